"""Waiting for new mail: the kernel's change notification where the standard
library can reach it (inotify on Linux, through ctypes; kqueue on macOS and the
BSDs), a plain timeout elsewhere. Either way the receiving session also polls
every 3 s, so a missed event only delays mail, never strands it (INV-23). A watch
the kernel refuses (an inotify limit, no descriptor left) is a wait that polls;
FolderWatch keeps why, for the session to say; and so it does for an inotify
watch lost later, its folder removed (kqueue's is not noticed).
"""

from __future__ import annotations

import errno
import os
import select
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Protocol

    from pipost.files import StrPath

    class _Events(Protocol):
        """A kernel watch on one folder: readable while changes wait to be read."""

        def fileno(self) -> int: ...

        def drain(self) -> bool:
            """Read the changes that wait, so the next wait blocks until a new one;
            False once the watch is gone with its folder."""

        def close(self) -> None: ...

        def finish(self) -> None:
            """Done with this watch after a receipt wait (inotify keeps it for reuse)."""


# inotify(7) events: a file was renamed into the folder or finished being
# written (new mail); a file was removed or renamed away (a receipt).
_IN_MOVED_TO = 0x00000080
_IN_CLOSE_WRITE = 0x00000008
_IN_DELETE = 0x00000200
_IN_MOVED_FROM = 0x00000040
_IN_DELETE_SELF = 0x00000400
_IN_IGNORED = 0x00008000  # the watch is gone: its folder removed, its file system unmounted
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_IN_DONT_FOLLOW = 0x02000000  # a symlink swapped in for the folder is not watched through

# What each wait asks for: (inotify mask, kqueue vnode notes by name). A folder's
# NOTE_WRITE is any change to its entries (a name added, removed or renamed); a
# letter is always written under a temporary name and renamed in, so the rename
# is an entry change too.
_NEW_LETTERS = (_IN_MOVED_TO | _IN_CLOSE_WRITE, ("KQ_NOTE_WRITE",))
_REMOVALS = (_IN_DELETE | _IN_MOVED_FROM | _IN_DELETE_SELF, ("KQ_NOTE_WRITE", "KQ_NOTE_DELETE"))


class FolderWatch:
    """wait(timeout) returns when the folder may have new letters, when wake() is
    called (from a signal handler too), or at the timeout."""

    def __init__(self, folder: StrPath, *, kernel_events: bool = True) -> None:
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self._events: _Events | None = None
        self.folder = folder
        self.refused: str | None = None
        """Why the kernel would not watch the folder, when it was asked to: the
        waits then only time out."""
        self.lost: str | None = None
        """Why the kernel's watch ended while the session waited: the waits then
        only time out."""
        if kernel_events:
            try:
                self._events = _kernel_watch(folder, *_NEW_LETTERS)
            except OSError as error:
                self.refused = error.strerror or str(error)

    @property
    def uses_kernel_events(self) -> bool:
        return self._events is not None

    def wait(self, timeout: float) -> None:
        events = self._events
        sources = [self._wake_read] + ([events.fileno()] if events is not None else [])
        # A signal does not end it (PEP 475: select is retried), a handler's wake() does.
        ready, _, _ = select.select(sources, [], [], max(timeout, 0.0))
        if self._wake_read in ready:
            _drain(self._wake_read)
        if events is not None and events.fileno() in ready and not events.drain():
            events.close()
            self._events = None
            self.lost = "the folder is gone (removed, or its file system unmounted)"

    def wake(self) -> None:
        try:
            os.write(self._wake_write, b"!")
        except BlockingIOError:  # a full pipe is already a wake-up
            pass

    def close(self) -> None:
        os.close(self._wake_read)
        os.close(self._wake_write)
        if self._events is not None:
            self._events.close()
        self._events = None


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 65536):
            pass
    except BlockingIOError:
        pass


def wait_gone(path: StrPath, timeout: float, interval: float = 0.01) -> bool:
    """True as soon as ``path`` no longer exists, False at the timeout. Woken by the
    kernel when the file is removed; polls every ``interval`` where it cannot be."""
    if timeout <= 0:  # no wait: not worth a watch (closing one costs the kernel a grace period)
        return not os.path.lexists(path)
    deadline = time.monotonic() + timeout
    try:
        events = _kernel_watch(os.path.dirname(path), *_REMOVALS)
    except OSError:  # refused: a sender's short wait polls, and has no one to tell
        events = None
    try:
        while True:
            # Checked after the watch is in place, so a removal cannot slip between.
            if not os.path.lexists(path):
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if events is None:
                time.sleep(min(interval, remaining))
                continue
            ready, _, _ = select.select([events], [], [], remaining)
            if ready:
                events.drain()  # a folder gone takes the letter with it: the next look says so
    finally:
        if events is not None:
            events.finish()


def _kernel_watch(folder: StrPath, mask: int, notes: tuple[str, ...]) -> _Events | None:
    """A watch on ``folder`` for the changes ``mask`` (inotify) or ``notes``
    (kqueue) name; None where the kernel cannot tell; OSError where it refuses."""
    if hasattr(select, "kqueue"):
        return _Kqueue.open(folder, notes)
    if sys.platform.startswith("linux"):
        return _Inotify.open(folder, mask)
    return None


class _Inotify:
    """An inotify instance (Linux) with one watch on a folder."""

    def __init__(self, fd: int, watch_id: int) -> None:
        self._fd = fd
        self._watch_id = watch_id

    @classmethod
    def open(cls, folder: StrPath, mask: int) -> _Inotify:
        libc = _libc()
        try:
            fd = _spare_instances.pop()
        except IndexError:
            fd = int(libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC))
            if fd < 0:
                raise _refused(_INSTANCES_LIMIT) from None
        watch_id = int(libc.inotify_add_watch(fd, os.fsencode(folder), mask | _IN_DONT_FOLLOW))
        if watch_id < 0:
            refusal = _refused(_WATCHES_LIMIT)
            os.close(fd)
            raise refusal
        return cls(fd, watch_id)

    def fileno(self) -> int:
        return self._fd

    def drain(self) -> bool:
        standing = True
        try:
            while chunk := os.read(self._fd, 65536):
                standing = standing and not _ignored(chunk)
        except BlockingIOError:
            pass
        return standing

    def close(self) -> None:
        os.close(self._fd)

    def finish(self) -> None:
        _libc().inotify_rm_watch(self._fd, self._watch_id)
        _drain(self._fd)  # the removal's own event
        _spare_instances.append(self._fd)


# Where inotify's own limits are set, for the errors that mean one was reached
# (inotify(7)): a process's instances also count against its open files.
_INSTANCES_LIMIT = (errno.EMFILE, "inotify instances: fs.inotify.max_user_instances, or ulimit -n")
_WATCHES_LIMIT = (errno.ENOSPC, "inotify watches: fs.inotify.max_user_watches")


def _refused(limit: tuple[int, str]) -> OSError:
    """The error of the inotify call that just failed; the limit it names where the
    error number is the one that limit gives."""
    import ctypes  # loaded already: the call was made through it

    number = ctypes.get_errno()
    why = os.strerror(number) if number else "refused by the kernel"
    return OSError(number, f"{why} ({limit[1]})" if number == limit[0] else why)


def _ignored(events: bytes) -> bool:
    """Whether inotify(7) events, as read, include IN_IGNORED: each is a wd, a mask,
    a cookie and a name's length (4 bytes each, in the machine's order), then the name."""
    at = 0
    while at + 16 <= len(events):
        mask = int.from_bytes(events[at + 4 : at + 8], sys.byteorder)
        if mask & _IN_IGNORED:
            return True
        at += 16 + int.from_bytes(events[at + 12 : at + 16], sys.byteorder)
    return False


_spare_instances: list[int] = []
"""inotify instances wait_gone keeps open between waits. Closing one makes the
kernel wait out a grace period (5-20 ms measured), which a sender would pay
between the receiver's unlink and printing its receipt; removing a watch is cheap."""


def _forget_spares() -> None:
    """In a forked child: the spares are the parent's, two processes must not share one."""
    while _spare_instances:
        os.close(_spare_instances.pop())


os.register_at_fork(after_in_child=_forget_spares)


class _Kqueue:
    """A kqueue (macOS, the BSDs) with one vnode event on a folder, edge-triggered
    (EV_CLEAR): reading the event resets it until the folder changes again."""

    def __init__(self, queue: Any, folder_fd: int) -> None:
        self._queue = queue
        self._folder_fd = folder_fd

    @classmethod
    def open(cls, folder: StrPath, notes: tuple[str, ...]) -> _Kqueue:
        # O_EVTONLY (macOS): held for events only, so it does not keep a volume mounted.
        # O_NOFOLLOW: a symlink swapped in for the folder is not watched through.
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        folder_fd = os.open(folder, flags | getattr(os, "O_EVTONLY", 0))
        kq: Any = select  # its kqueue names exist only on the systems that have kqueue
        fflags = 0
        for note in notes:
            fflags |= getattr(kq, note)
        change = kq.kevent(
            folder_fd, filter=kq.KQ_FILTER_VNODE, flags=kq.KQ_EV_ADD | kq.KQ_EV_CLEAR, fflags=fflags
        )
        try:
            queue = kq.kqueue()
        except OSError:
            os.close(folder_fd)
            raise
        try:
            queue.control([change], 0, 0)
        except OSError:
            queue.close()
            os.close(folder_fd)
            raise
        return cls(queue, folder_fd)

    def fileno(self) -> int:
        return int(self._queue.fileno())

    def drain(self) -> bool:
        self._queue.control(None, 1, 0)  # one knote: at most one event waits
        return True

    def close(self) -> None:
        self._queue.close()  # removes the event too
        os.close(self._folder_fd)

    finish = close  # closing a kqueue costs no grace period


def _libc() -> Any:
    import ctypes  # only here: most commands never watch anything

    return ctypes.CDLL(None, use_errno=True)  # the running program's own libc
