"""The quarantine: ``quarantine/<address>/``, where a letter that is not a message
is set aside, each with its reason beside it in ``<name>.reason``; a name too long
for that is cut to fit, and the reason says the name it had.

A letter set aside is never delivered and never destroyed (INV-10): it is moved,
not copied, out of the mailbox it was claimed in, and only a letter too large to
be a message is cut, to the head a reader would have looked at. The quarantine is
outside ``inbox/`` so that no reader, ours or pi-post 0.7, takes it for mail, and
it is bounded per address: past CAP the oldest entries go, and the receiver logs
each one (bounded, but never silently).

Setting aside works on folders the claim already holds open (the root and the
mailbox), so it neither opens the root again nor walks ``inbox/<address>`` again;
the quarantine folder is made below the open root without following a symlink
(INV-22). Listing changes nothing on disk.
"""

from __future__ import annotations

import contextlib
import os
import stat

from pipost import files
from pipost.address import checked, is_address
from pipost.message import LETTER_READ_LIMIT
from pipost.value import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

    from pipost.files import Folder, StrPath

CAP = 20
"""Most letters kept set aside per address; past it the oldest goes, and the
receiver logs that it went (bounded, but never silently)."""

REASON_SUFFIX = ".reason"
NAME_MAX = 255
"""The longest file name, in bytes, where the file system does not say."""
REASON_READ_LIMIT = 4096
"""Bytes of a reason a listing shows: pipost writes short ones, but the folder is
the user's, and a listing reads no file whole."""


def quarantine_of(root: StrPath, address: str) -> str:
    """The quarantine folder's path of ``address`` (for messages and listings)."""
    return os.path.join(root, "quarantine", checked(address))


class SetAside(Value):
    __slots__ = ("path", "evicted")
    path: Final[str]
    evicted: Final[tuple[str, ...]]
    """Older quarantined letters removed to stay within CAP."""

    def __init__(self, path: str, evicted: tuple[str, ...]) -> None:
        self.path = path
        self.evicted = evicted


def set_aside(top: Folder, inbox: Folder, address: str, name: str, reason: str) -> SetAside:
    """Move the letter ``name`` out of the mailbox ``inbox`` of ``address`` into
    ``quarantine/<address>/`` below the open root ``top``, keeping it and the reason
    (INV-10). A letter too large to be one keeps only its first LETTER_READ_LIMIT
    bytes there, and the reason says so."""
    with top.make("quarantine", checked(address)) as folder:
        kept = _free_name(folder, name)
        if not kept.startswith(name):
            reason += f" (named {name} in the mailbox: cut to fit beside its reason)"
        info = inbox.lstat(name)
        oversize = stat.S_ISREG(info.st_mode) and info.st_size > LETTER_READ_LIMIT
        if oversize:
            reason += f" (kept the first {LETTER_READ_LIMIT} of {info.st_size} bytes)"
        folder.write_new(kept + REASON_SUFFIX, (reason + "\n").encode("utf-8"))
        if oversize:
            head = inbox.read_bounded(name, LETTER_READ_LIMIT) or b""
            folder.write_new(kept, head[:LETTER_READ_LIMIT])
            inbox.unlink(name)
        else:
            inbox.rename(name, kept, into=folder)
        folder.flush()
        inbox.flush()
        return SetAside(folder.name(kept), _evict_oldest(folder, address))


def _free_name(folder: Folder, name: str) -> str:
    """``name``, or ``name.1``, ``name.2``...: a name set aside twice keeps both. Its
    head only, when the name and ``.reason`` would not fit in a file name: a letter
    that cannot be moved would be logged again at every try, and never move."""
    taken = set(folder.names())
    room = _name_max(folder) - len(REASON_SUFFIX)
    candidate, number = _head(name, room), 0
    while candidate in taken or candidate + REASON_SUFFIX in taken:
        number += 1
        suffix = f".{number}"
        candidate = _head(name, room - len(suffix)) + suffix
    return candidate


def _name_max(folder: Folder) -> int:
    try:
        limit = os.fpathconf(folder.fd, "PC_NAME_MAX")
    except (OSError, ValueError):
        return NAME_MAX
    return limit if limit > 0 else NAME_MAX


def _head(name: str, room: int) -> str:
    """The longest head of ``name``, cut between characters, that is at most
    ``room`` bytes on disk."""
    while len(os.fsencode(name)) > room:
        name = name[:-1]
    return name


def _evict_oldest(folder: Folder, address: str) -> tuple[str, ...]:
    entries = _entries_in(folder, address)
    excess = entries[: max(0, len(entries) - CAP)]
    for entry in excess:
        for doomed in (entry.name, entry.name + REASON_SUFFIX):
            with contextlib.suppress(FileNotFoundError):
                folder.unlink(doomed)
    if excess:
        folder.flush()
    return tuple(entry.name for entry in excess)


class Quarantined(Value):
    __slots__ = ("address", "name", "reason", "since_ns")
    address: Final[str]
    name: Final[str]
    reason: Final[str]
    since_ns: Final[int]

    def __init__(self, address: str, name: str, reason: str, since_ns: int) -> None:
        self.address = address
        self.name = name
        self.reason = reason
        self.since_ns = since_ns


def _entries_in(folder: Folder, address: str) -> list[Quarantined]:
    entries = []
    for reason_name in folder.names():
        if not reason_name.endswith(REASON_SUFFIX):
            continue
        try:
            since = folder.lstat(reason_name).st_mtime_ns
            raw = folder.read_bounded(reason_name, REASON_READ_LIMIT)
        except OSError:
            continue
        if raw is None:
            continue  # removed since it was listed: an entry evicted meanwhile
        entries.append(
            Quarantined(
                address=address,
                name=reason_name[: -len(REASON_SUFFIX)],
                reason=raw[:REASON_READ_LIMIT].decode("utf-8", "replace").strip(),
                since_ns=since,
            )
        )
    return sorted(entries, key=lambda entry: (entry.since_ns, entry.name))


def quarantined(root: StrPath) -> list[Quarantined]:
    """Every quarantined letter of every address, oldest first per address (no side
    effects)."""
    folder = files.walk(root, "quarantine")
    if folder is None:
        return []
    with folder:
        return quarantined_in(folder)


def quarantined_in(folder: Folder) -> list[Quarantined]:
    """quarantined() for the open ``quarantine/`` folder."""
    found: list[Quarantined] = []
    for address in sorted(folder.names()):
        if not is_address(address):
            continue
        below = folder.child(address)
        if below is not None:
            with below:
                found += _entries_in(below, address)
    return found
