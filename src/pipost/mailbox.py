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

import errno
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pipost import files
from pipost.address import is_address
from pipost.message import LETTER_READ_LIMIT, SUFFIX, Message, Rejected, encode, parse

CAP = 50
"""Most messages a mailbox holds queued; the next send to it is refused."""

TMP_SUFFIX = ".tmp"
_DEPOSIT_ATTEMPTS = 20


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


def wait_consumed(letter: Path, timeout: float, interval: float = 0.01) -> bool:
    """True once ``letter`` is gone (the receiver's receipt), False at the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        if not letter.exists():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


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

    def set_aside(self, reason: str) -> Path:
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


def set_aside(root: Path, address: str, name: str, reason: str) -> Path:
    """Move a bad letter out of the mailbox, keeping it and the reason (INV-10).

    The quarantine is outside ``inbox/`` so that no reader, ours or pi-post 0.7,
    takes it for mail."""
    folder = files.ensure_dirs(root, "quarantine", address)
    target = folder / name
    files.write_new(folder / (name + ".reason"), (reason + "\n").encode("utf-8"))
    files.rename(inbox_of(root, address) / name, target)
    files.flush_dir(folder)
    files.flush_dir(inbox_of(root, address))
    return target
