"""A session's mailbox: ``inbox/<address>/``, one message per ``<id>.json``.

Deposit (sender): exclusive temporary file, flushed, renamed into place, folder
flushed, all under the folder's lock so that the count of 50 holds however many
senders race (INV-03, INV-04, INV-08).

Claim and dispose (receiver): the claimed file stays at its name, locked, until
the message entered context or was deliberately dropped; only then is it
unlinked, and the unlink is the receipt (INV-05, INV-06, INV-11). A letter that
is not a message is set aside into ``quarantine/``, never delivered and never
destroyed (INV-10).

Reading (names, count, peek) changes nothing on disk (INV-16).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pipost import files, watch
from pipost.address import is_address
from pipost.message import LETTER_READ_LIMIT, SUFFIX, Message, Rejected, encode, parse

CAP = 50
"""Most messages a mailbox holds queued; the next send to it is refused."""

TMP_SUFFIX = ".tmp"
_DEPOSIT_ATTEMPTS = 1000  # a sweep may remove the empty folder between mkdir and lock


class MailboxFull(Exception):
    def __init__(self, address: str, queued: int) -> None:
        super().__init__(
            f"mailbox {address} is full ({queued} queued; the cap is {CAP}) — "
            "the session is not reading its mail"
        )
        self.address = address
        self.queued = queued


def inbox_root(root: Path) -> Path:
    return root / "inbox"


def inbox_of(root: Path, address: str) -> Path:
    """The mailbox folder; the address is checked before any path is built (INV-22)."""
    if not is_address(address):
        raise ValueError(f"not an address: {address!r}")
    return root / "inbox" / address


def is_letter_name(name: str) -> bool:
    """What readers look at: ``*.json``, never ``*.tmp`` and never dot-files (INV-03)."""
    return name.endswith(SUFFIX) and not name.startswith(".")


def letter_names(root: Path, address: str) -> list[str]:
    """Queued letters, oldest first (ids sort by time; INV-07)."""
    return sorted(n for n in files.list_names(inbox_of(root, address)) if is_letter_name(n))


def count(root: Path, address: str) -> int:
    return len(letter_names(root, address))


def mailbox_addresses(root: Path) -> list[str]:
    """Addresses that have a mailbox folder."""
    return sorted(n for n in files.list_names(inbox_root(root)) if is_address(n))


def deposit(root: Path, address: str, message: Message, *, durable: bool = True) -> Path:
    """Queue ``message`` for ``address``; returns the letter's path.

    Raises MailboxFull with nothing written. A sweep that removes the folder
    while we wait for its lock makes us start again (INV-17)."""
    data = encode(message)
    folder = inbox_of(root, address)
    for _ in range(_DEPOSIT_ATTEMPTS):
        files.ensure_dirs(root, "inbox", address)
        try:
            with files.locked_dir(folder):
                queued = count(root, address)
                if queued >= CAP:
                    raise MailboxFull(address, queued)
                final = folder / message.file_name
                if final.exists():
                    raise FileExistsError(errno.EEXIST, "a letter with this id exists", str(final))
                temporary = folder / (message.file_name + TMP_SUFFIX)
                files.write_new(temporary, data, durable=durable)
                try:
                    files.rename(temporary, final)
                except BaseException:
                    files.unlink(temporary)
                    raise
                if durable:
                    files.flush_dir(folder)
                return final
        except files.Vanished:
            continue
    raise OSError(errno.EAGAIN, "mailbox folder kept vanishing", str(folder))


def wait_consumed(letter: Path, timeout: float) -> bool:
    """True once ``letter`` is gone (the receiver's receipt), False at the timeout;
    woken by the unlink itself where the kernel can tell."""
    return watch.wait_gone(letter, timeout)


@dataclass(frozen=True)
class Letter:
    """One file of a mailbox as a reader sees it: a message, or why it is not one."""

    name: str
    content: Message | Rejected


def read_letter(root: Path, address: str, name: str) -> Letter | None:
    """A bounded read with no side effects; None if the letter is gone."""
    try:
        raw = files.read_bounded(inbox_of(root, address) / name, LETTER_READ_LIMIT)
    except files.UnsafePath as error:
        return Letter(name, Rejected(error.strerror or "unsafe file"))
    if raw is None:
        return None
    return Letter(name, parse(raw, name))


def peek(root: Path, address: str) -> list[Letter]:
    """Every queued letter, oldest first, read but not claimed (INV-16)."""
    letters = (read_letter(root, address, name) for name in letter_names(root, address))
    return [letter for letter in letters if letter is not None]


class Claim:
    """A letter held exclusively by one receiver, still at its name on disk.

    Exactly one of dispose() (entered context, or dropped on purpose), set_aside()
    (not a message) or release() (leave it queued) ends it."""

    def __init__(
        self,
        root: Path,
        address: str,
        name: str,
        handle: files.OpenFile | None,
        content: Message | Rejected,
    ) -> None:
        self.root = root
        self.address = address
        self.name = name
        self.content = content
        self._handle = handle

    @property
    def path(self) -> Path:
        return inbox_of(self.root, self.address) / self.name

    def dispose(self) -> None:
        """The receipt: unlink, then flush the folder so it stays unlinked."""
        try:
            files.unlink(self.path)
            files.flush_dir(self.path.parent)
        finally:
            self.release()

    def set_aside(self, reason: str) -> SetAside:
        """Move the letter to ``quarantine/<address>/`` with its reason beside it."""
        try:
            return set_aside(self.root, self.address, self.name, reason)
        finally:
            self.release()

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def claim(root: Path, address: str, name: str) -> Claim | None:
    """Take one letter exclusively; None if another receiver holds it or it is gone."""
    path = inbox_of(root, address) / name
    try:
        handle = files.try_lock_file(path)
    except files.UnsafePath as error:
        return Claim(root, address, name, None, Rejected(error.strerror or "unsafe file"))
    if handle is None:
        return None
    try:
        content = parse(handle.read(LETTER_READ_LIMIT), name)
    except BaseException:
        handle.close()
        raise
    return Claim(root, address, name, handle, content)


def claims(root: Path, address: str) -> Iterator[Claim]:
    """Claim the queued letters one at a time, oldest first, skipping what another
    receiver holds. Each claim must be ended before the next is taken."""
    for name in letter_names(root, address):
        taken = claim(root, address, name)
        if taken is not None:
            yield taken


def quarantine_of(root: Path, address: str) -> Path:
    if not is_address(address):
        raise ValueError(f"not an address: {address!r}")
    return root / "quarantine" / address


QUARANTINE_CAP = 20
"""Most letters kept set aside per address; past it the oldest goes, and the
receiver logs that it went (bounded, but never silently)."""


@dataclass(frozen=True)
class SetAside:
    path: Path
    evicted: tuple[str, ...]
    """Older quarantined letters removed to stay within QUARANTINE_CAP."""


def set_aside(root: Path, address: str, name: str, reason: str) -> SetAside:
    """Move a bad letter out of the mailbox, keeping it and the reason (INV-10).

    The quarantine is outside ``inbox/`` so that no reader, ours or pi-post 0.7,
    takes it for mail. A letter too large to be one keeps only its first
    LETTER_READ_LIMIT bytes there, and the reason says so."""
    folder = files.ensure_dirs(root, "quarantine", address)
    kept = _free_name(folder, name)
    source = inbox_of(root, address) / name
    info = os.lstat(source)
    oversize = stat.S_ISREG(info.st_mode) and info.st_size > LETTER_READ_LIMIT
    if oversize:
        reason += f" (kept the first {LETTER_READ_LIMIT} of {info.st_size} bytes)"
    files.write_new(folder / (kept + REASON_SUFFIX), (reason + "\n").encode("utf-8"))
    if oversize:
        head = files.read_bounded(source, LETTER_READ_LIMIT) or b""
        files.write_new(folder / kept, head[:LETTER_READ_LIMIT])
        files.unlink(source)
    else:
        files.rename(source, folder / kept)
    files.flush_dir(folder)
    files.flush_dir(inbox_of(root, address))
    return SetAside(folder / kept, _evict_oldest(folder))


REASON_SUFFIX = ".reason"


def _free_name(folder: Path, name: str) -> str:
    taken = set(files.list_names(folder))
    candidate, number = name, 0
    while candidate in taken or candidate + REASON_SUFFIX in taken:
        number += 1
        candidate = f"{name}.{number}"
    return candidate


def _evict_oldest(folder: Path) -> tuple[str, ...]:
    entries = quarantined_in(folder)
    excess = entries[: max(0, len(entries) - QUARANTINE_CAP)]
    for entry in excess:
        for doomed in (folder / entry.name, folder / (entry.name + REASON_SUFFIX)):
            with contextlib.suppress(FileNotFoundError):
                files.unlink(doomed)
    if excess:
        files.flush_dir(folder)
    return tuple(entry.name for entry in excess)


@dataclass(frozen=True)
class Quarantined:
    address: str
    name: str
    reason: str
    since_ns: int


def quarantined_in(folder: Path) -> list[Quarantined]:
    """What a quarantine folder holds, oldest first (no side effects)."""
    entries = []
    for reason_name in files.list_names(folder):
        if not reason_name.endswith(REASON_SUFFIX):
            continue
        path = folder / reason_name
        try:
            since = os.lstat(path).st_mtime_ns
            raw = files.read_bounded(path, 4096) or b""
        except OSError:
            continue
        entries.append(
            Quarantined(
                address=folder.name,
                name=reason_name[: -len(REASON_SUFFIX)],
                reason=raw.decode("utf-8", "replace").strip(),
                since_ns=since,
            )
        )
    return sorted(entries, key=lambda entry: (entry.since_ns, entry.name))


def quarantined(root: Path) -> list[Quarantined]:
    """Every quarantined letter of every address, oldest first per address."""
    found: list[Quarantined] = []
    for address in sorted(files.list_names(root / "quarantine")):
        if is_address(address):
            found += quarantined_in(quarantine_of(root, address))
    return found
