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
import os
import stat

from pipost import files, format, refusals
from pipost.address import checked, is_address
from pipost.message import LETTER_READ_LIMIT, SUFFIX, Message, Rejected, encode, parse
from pipost.value import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Final

    from pipost.files import Folder, StrPath

CAP = 50
"""Most messages a mailbox holds queued; the next send to it is refused."""

TMP_SUFFIX = ".tmp"
_DEPOSIT_ATTEMPTS = 1000  # a sweep may remove the empty folder between mkdir and lock


class MailboxFull(Exception):
    def __init__(self, address: str, queued: int) -> None:
        self.refusal = refusals.MailboxFull(address, queued, CAP)
        super().__init__(format.refusal(self.refusal))
        self.address = address
        self.queued = queued


class DepositFailed(OSError):
    """A mailbox the file system would not let us write (read-only, full disk...).
    It names the mailbox and its folder, not the temporary file the write stopped at."""

    def __init__(self, folder: str, address: str, cause: OSError) -> None:
        reason = cause.strerror or str(cause)
        super().__init__(cause.errno, reason, folder)
        self.address = address
        self.refusal = refusals.CannotWrite(address, folder, reason)

    def __str__(self) -> str:
        return format.refusal(self.refusal)


def inbox_of(root: StrPath, address: str) -> str:
    """The mailbox folder's path (for watching and for messages)."""
    return os.path.join(root, "inbox", checked(address))


def open_inbox(root: StrPath, address: str) -> Folder | None:
    """The mailbox folder, reached from the root without following a link; None if absent."""
    top = files.open_root(root)
    if top is None:
        return None
    with top:
        return inbox_in(top, address)


def inbox_in(top: Folder, address: str) -> Folder | None:
    """The mailbox folder below the open root ``top``; None if absent."""
    return top.walk("inbox", checked(address))


def is_letter_name(name: str) -> bool:
    """What readers look at: ``*.json``, never ``*.tmp`` and never dot-files (INV-03)."""
    return name.endswith(SUFFIX) and not name.startswith(".")


def letters_in(folder: Folder) -> list[str]:
    """Queued letters, oldest first (ids sort by time; INV-07)."""
    return sorted(name for name in folder.names() if is_letter_name(name))


def letter_names(root: StrPath, address: str) -> list[str]:
    folder = open_inbox(root, address)
    if folder is None:
        return []
    with folder:
        return letters_in(folder)


def count(root: StrPath, address: str) -> int:
    return len(letter_names(root, address))


def count_in(top: Folder, address: str) -> int:
    """The letters queued for ``address`` below the open root ``top``."""
    folder = inbox_in(top, address)
    if folder is None:
        return 0
    with folder:
        return len(letters_in(folder))


def mailbox_addresses(root: StrPath) -> list[str]:
    """Addresses that have a mailbox folder."""
    folder = files.walk(root, "inbox")
    if folder is None:
        return []
    with folder:
        return sorted(name for name in folder.names() if is_address(name))


def deposit(top: Folder, address: str, message: Message, *, durable: bool = True) -> str:
    """Queue ``message`` for ``address`` in the post office whose root ``top`` is open;
    returns the letter's path.

    The mailbox is counted once, under its lock: that count is the cap's (INV-08).
    Raises MailboxFull with nothing written, and DepositFailed, with no letter
    written, for a folder that cannot be written. A sweep that removes the folder
    while we wait for its lock makes us start again (INV-17)."""
    try:
        return _deposit(top, checked(address), message, durable)
    except (files.UnsafePath, FileExistsError):
        raise  # each names the very path that is wrong: a link, a letter with this id
    except OSError as error:
        raise DepositFailed(inbox_of(top.path, address), address, error) from error


def _deposit(top: Folder, address: str, message: Message, durable: bool) -> str:
    data = encode(message)
    for _ in range(_DEPOSIT_ATTEMPTS):
        with top.make("inbox", address) as folder:
            try:
                with folder.lock():
                    queued = len(letters_in(folder))
                    if queued >= CAP:
                        raise MailboxFull(address, queued)
                    final = message.file_name
                    if folder.exists(final):
                        raise FileExistsError(
                            errno.EEXIST, "a letter with this id exists", folder.name(final)
                        )
                    temporary = final + TMP_SUFFIX
                    folder.write_new(temporary, data, durable=durable)
                    try:
                        folder.rename(temporary, final)
                    except BaseException:
                        folder.unlink(temporary)
                        raise
                    if durable:
                        folder.flush()
                    return folder.name(final)
            except files.Vanished:
                continue
    raise OSError(errno.EAGAIN, "mailbox folder kept vanishing", inbox_of(top.path, address))


def wait_consumed(letter: str, timeout: float) -> bool:
    """True once ``letter`` is gone (the receiver's receipt), False at the timeout;
    woken by the unlink itself where the kernel can tell."""
    from pipost import watch  # here: a send to a stopped session never waits

    return watch.wait_gone(letter, timeout)


class Letter(Value):
    """One file of a mailbox as a reader sees it: a message, or why it is not one."""

    __slots__ = ("name", "content")
    name: Final[str]
    content: Final[Message | Rejected]

    def __init__(self, name: str, content: Message | Rejected) -> None:
        self.name = name
        self.content = content


def _read_letter(folder: Folder, name: str) -> Letter | None:
    try:
        raw = folder.read_bounded(name, LETTER_READ_LIMIT)
    except files.UnsafePath as error:
        return Letter(name, Rejected(error.strerror or "unsafe file"))
    if raw is None:
        return None
    return Letter(name, parse(raw, name))


def peek(root: StrPath, address: str) -> list[Letter]:
    """Every queued letter, oldest first, read but not claimed (INV-16)."""
    folder = open_inbox(root, address)
    if folder is None:
        return []
    with folder:
        letters = (_read_letter(folder, name) for name in letters_in(folder))
        return [letter for letter in letters if letter is not None]


class Claim:
    """A letter held exclusively by one receiver, still at its name on disk.

    Exactly one of dispose() (entered context, or dropped on purpose), set_aside()
    (not a message) or release() (leave it queued) ends it."""

    def __init__(
        self,
        root: StrPath,
        address: str,
        name: str,
        folder: Folder,
        handle: files.OpenFile | None,
        content: Message | Rejected,
    ) -> None:
        self.root = root
        self.address = address
        self.name = name
        self.content = content
        self._folder = folder
        """The mailbox folder, owned by the claim: the receipt is an unlink in it."""
        self._handle = handle

    @property
    def path(self) -> str:
        return self._folder.name(self.name)

    def dispose(self) -> None:
        """The receipt: unlink, then flush the folder so it stays unlinked. The claim
        ends either way."""
        try:
            self._remove()
        finally:
            self.release()

    def dispose_or_hold(self) -> bool:
        """dispose(); but a claim whose unlink or flush fails is kept, still locked so
        that no other receiver takes the letter, and False says to try again."""
        try:
            self._remove()
        except OSError:
            return False
        self.release()
        return True

    def _remove(self) -> None:
        # A retry after a failed flush finds the letter already unlinked.
        if self._handle is None or os.fstat(self._handle.fd).st_nlink > 0:
            self._folder.unlink(self.name)
        self._folder.flush()

    def still_held(self) -> bool:
        """Whether the locked file is still the letter at its name: a pi-post 0.7
        receiver takes no lock, and may have taken it meanwhile."""
        if self._handle is None:
            return True  # a link or no plain file: there is only a name to set aside
        held = os.fstat(self._handle.fd)
        try:
            named = self._folder.lstat(self.name)
        except FileNotFoundError:
            return False
        return held.st_nlink > 0 and (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)

    def why_undisposable(self) -> str | None:
        """Why dispose() or set_aside() would fail now, with the fix: the mailbox
        folder cannot be written by this process. None when they can go ahead."""
        return self._folder.why_unwritable()

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
        self._folder.close()


def _claim_in(root: StrPath, address: str, folder: Folder, name: str) -> Claim | None:
    own = files.Folder(os.dup(folder.fd), folder.path)
    try:
        handle = own.try_lock(name)
    except files.UnsafePath as error:
        return Claim(root, address, name, own, None, Rejected(error.strerror or "unsafe file"))
    except BaseException:
        own.close()
        raise
    if handle is None:
        own.close()
        return None
    try:
        content = parse(handle.read(LETTER_READ_LIMIT), name)
    except BaseException:
        handle.close()
        own.close()
        raise
    return Claim(root, address, name, own, handle, content)


def claim(root: StrPath, address: str, name: str) -> Claim | None:
    """Take one letter exclusively; None if another receiver holds it or it is gone."""
    folder = open_inbox(root, address)
    if folder is None:
        return None
    with folder:
        return _claim_in(root, address, folder, name)


def claims(root: StrPath, address: str) -> Iterator[Claim]:
    """Claim the queued letters one at a time, oldest first, skipping what another
    receiver holds; the folder is opened and listed once. Each claim must be ended
    before the next is taken."""
    folder = open_inbox(root, address)
    if folder is None:
        return
    with folder:
        for name in letters_in(folder):
            taken = _claim_in(root, address, folder, name)
            if taken is not None:
                yield taken


def quarantine_of(root: StrPath, address: str) -> str:
    return os.path.join(root, "quarantine", checked(address))


QUARANTINE_CAP = 20
"""Most letters kept set aside per address; past it the oldest goes, and the
receiver logs that it went (bounded, but never silently)."""


class SetAside(Value):
    __slots__ = ("path", "evicted")
    path: Final[str]
    evicted: Final[tuple[str, ...]]
    """Older quarantined letters removed to stay within QUARANTINE_CAP."""

    def __init__(self, path: str, evicted: tuple[str, ...]) -> None:
        self.path = path
        self.evicted = evicted


def set_aside(root: StrPath, address: str, name: str, reason: str) -> SetAside:
    """Move a bad letter out of the mailbox, keeping it and the reason (INV-10).

    The quarantine is outside ``inbox/`` so that no reader, ours or pi-post 0.7,
    takes it for mail. A letter too large to be one keeps only its first
    LETTER_READ_LIMIT bytes there, and the reason says so."""
    checked(address)
    with files.make_root(root) as top:
        inbox = top.walk("inbox", address)
        if inbox is None:
            raise FileNotFoundError(errno.ENOENT, "no mailbox", inbox_of(root, address))
        with inbox, top.make("quarantine", address) as folder:
            kept = _free_name(folder, name)
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


REASON_SUFFIX = ".reason"


def _free_name(folder: Folder, name: str) -> str:
    taken = set(folder.names())
    candidate, number = name, 0
    while candidate in taken or candidate + REASON_SUFFIX in taken:
        number += 1
        candidate = f"{name}.{number}"
    return candidate


def _evict_oldest(folder: Folder, address: str) -> tuple[str, ...]:
    entries = _quarantined_in(folder, address)
    excess = entries[: max(0, len(entries) - QUARANTINE_CAP)]
    for entry in excess:
        for doomed in (entry.name, entry.name + REASON_SUFFIX):
            try:
                folder.unlink(doomed)
            except FileNotFoundError:
                pass
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


def _quarantined_in(folder: Folder, address: str) -> list[Quarantined]:
    entries = []
    for reason_name in folder.names():
        if not reason_name.endswith(REASON_SUFFIX):
            continue
        try:
            since = folder.lstat(reason_name).st_mtime_ns
            raw = folder.read_bounded(reason_name, 4096) or b""
        except OSError:
            continue
        entries.append(
            Quarantined(
                address=address,
                name=reason_name[: -len(REASON_SUFFIX)],
                reason=raw.decode("utf-8", "replace").strip(),
                since_ns=since,
            )
        )
    return sorted(entries, key=lambda entry: (entry.since_ns, entry.name))


def quarantined(root: StrPath) -> list[Quarantined]:
    """Every quarantined letter of every address, oldest first per address (no side
    effects)."""
    found: list[Quarantined] = []
    top = files.walk(root, "quarantine")
    if top is None:
        return found
    with top:
        for address in sorted(top.names()):
            if not is_address(address):
                continue
            folder = top.child(address)
            if folder is not None:
                with folder:
                    found += _quarantined_in(folder, address)
    return found
