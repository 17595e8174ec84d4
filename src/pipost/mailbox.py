"""A session's mailbox: ``inbox/<address>/``, one message per ``<id>.json``.

Deposit (sender): SPEC §3.1's protocol, stated in code once, in _deposit (INV-03,
INV-04), under the folder's lock so that the count of 50 holds however many
senders race (INV-08).

Claim and dispose (receiver): the claimed file stays at its name, locked, until
the message entered context or was deliberately dropped; only then is it
unlinked, and the unlink is the receipt (INV-05, INV-06, INV-11). A letter that
is not a message is set aside (quarantine.py) from the folders the claim holds
open, never delivered and never destroyed (INV-10).

Reading (names, count, peek) changes nothing on disk (INV-16).
"""

from __future__ import annotations

import errno
import os

from pipost import files, format, refusals
from pipost.address import checked
from pipost.message import LETTER_READ_LIMIT, SUFFIX, Message, Rejected, encode, parse
from pipost.value import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Generator
    from typing import Final

    from pipost.files import Folder, StrPath
    from pipost.quarantine import SetAside

CAP = 50
"""Most messages a mailbox holds queued; the next send to it is refused."""

TMP_SUFFIX = ".tmp"
_DEPOSIT_ATTEMPTS = 1000  # a sweep may remove the empty folder between mkdir and lock


class MailboxAtCap(Exception):
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


def deposit(top: Folder, address: str, message: Message, *, durable: bool = True) -> str:
    """Queue ``message`` for ``address`` in the post office whose root ``top`` is open;
    returns the letter's path.

    The mailbox is counted once, under its lock: that count is the cap's (INV-08).
    Raises MailboxAtCap with nothing written, and DepositFailed, with no letter
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
                        raise MailboxAtCap(address, queued)
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


def _unopenable(error: OSError) -> Rejected:
    """Why a file named like a letter could not be opened as one: a symlink (never
    followed), no regular file (a FIFO, a folder...), or a file we may not read."""
    reason = error.strerror or "unsafe file"
    if isinstance(error, PermissionError):
        return Rejected("unreadable", reason)
    return Rejected("symlink" if error.errno == errno.ELOOP else "not_a_file", reason)


def _read_letter(folder: Folder, name: str) -> Letter | None:
    try:
        raw = folder.read_bounded(name, LETTER_READ_LIMIT)
    except (files.UnsafePath, PermissionError) as error:
        return Letter(name, _unopenable(error))
    if raw is None:
        return None
    return Letter(name, parse(raw, name))


def peek(top: Folder, address: str) -> list[Letter]:
    """Every letter queued below the open root ``top``, oldest first, read but not
    claimed (INV-16)."""
    folder = inbox_in(top, address)
    if folder is None:
        return []
    with folder:
        letters = (_read_letter(folder, name) for name in letters_in(folder))
        return [letter for letter in letters if letter is not None]


class Claim:
    """A letter held exclusively by one receiver, still at its name on disk.

    Exactly one of dispose() (entered context, or dropped on purpose), set_aside()
    then release() (not a message) or release() (leave it queued) ends it."""

    def __init__(
        self,
        address: str,
        name: str,
        folder: Folder,
        handle: files.OpenFile | None,
        content: Message | Rejected,
        top: Folder,
    ) -> None:
        self.address = address
        self.name = name
        self.content = content
        self._folder = folder
        """The mailbox folder, owned by the claim: the receipt is an unlink in it."""
        self._handle = handle
        self._top = top
        """The root the claim was taken under, owned by the claim (a descriptor of
        its own, so that it outlives claims()): set_aside() makes the quarantine
        below it without opening the root again."""

    @property
    def root(self) -> Folder:
        """The root the claim was taken under, open until the claim ends: what the
        receiver writes beside the mailbox (the drop log) goes below it."""
        return self._top

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
        """Move the letter to ``quarantine/<address>/`` with its reason beside it,
        from the mailbox folder the claim holds and below the root it was taken
        under: no path is walked again. The claim stays open (so that what the
        move evicted is logged below the same root) until release()."""
        from pipost import quarantine  # here: a send never sets a letter aside

        return quarantine.set_aside(self._top, self._folder, self.address, self.name, reason)

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        self._folder.close()
        self._top.close()


def _claim_in(top: Folder, folder: Folder, address: str, name: str) -> Claim | None:
    try:
        handle = folder.try_lock(name)
    except (files.UnsafePath, PermissionError) as error:
        return _claim(top, folder, address, name, None, _unopenable(error))
    if handle is None:
        return None
    try:
        content = parse(handle.read(LETTER_READ_LIMIT), name)
        return _claim(top, folder, address, name, handle, content)
    except BaseException:
        handle.close()
        raise


def _claim(
    top: Folder,
    folder: Folder,
    address: str,
    name: str,
    handle: files.OpenFile | None,
    content: Message | Rejected,
) -> Claim:
    """The claim, with descriptors of its own for the mailbox and the root (dup, not
    open: nothing is walked again)."""
    own = files.Folder(os.dup(folder.fd), folder.path)
    try:
        root = files.Folder(os.dup(top.fd), top.path)
    except BaseException:
        own.close()
        raise
    return Claim(address, name, own, handle, content, root)


def claims(root: StrPath, address: str) -> Generator[Claim, None, None]:
    """Claim the queued letters one at a time, oldest first, skipping what another
    receiver holds; the root is opened once, and the folder opened and listed once.
    Each claim must be ended before the next is taken."""
    top = files.open_root(root)
    if top is None:
        return
    with top:
        folder = inbox_in(top, address)
        if folder is None:
            return
        with folder:
            for name in letters_in(folder):
                taken = _claim_in(top, folder, address, name)
                if taken is not None:
                    yield taken
