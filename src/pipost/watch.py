"""Waiting for new mail: the kernel's change notification where the standard
library can reach it (inotify on Linux, through ctypes), a plain timeout
elsewhere. Either way the receiving session also polls every 3 s, so a missed
event only delays mail, never strands it (INV-23).
"""

from __future__ import annotations

import os
import select
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pipost.files import StrPath

# inotify(7) events: a file was renamed into the folder or finished being
# written (new mail); a file was removed or renamed away (a receipt).
_IN_MOVED_TO = 0x00000080
_IN_CLOSE_WRITE = 0x00000008
_IN_DELETE = 0x00000200
_IN_MOVED_FROM = 0x00000040
_IN_DELETE_SELF = 0x00000400
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_IN_DONT_FOLLOW = 0x02000000  # a symlink swapped in for the folder is not watched through


class FolderWatch:
    """wait(timeout) returns when the folder may have new letters, when wake() is
    called (from a signal handler too), or at the timeout."""

    def __init__(self, folder: StrPath, *, kernel_events: bool = True) -> None:
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        found = _inotify_watch(folder, _IN_MOVED_TO | _IN_CLOSE_WRITE) if kernel_events else None
        self._inotify = found[0] if found is not None else None

    @property
    def uses_kernel_events(self) -> bool:
        return self._inotify is not None

    def wait(self, timeout: float) -> None:
        sources = [self._wake_read] + ([self._inotify] if self._inotify is not None else [])
        try:
            ready, _, _ = select.select(sources, [], [], max(timeout, 0.0))
        except InterruptedError:
            return
        for fd in ready:
            _drain(fd)

    def wake(self) -> None:
        try:
            os.write(self._wake_write, b"!")
        except BlockingIOError:  # a full pipe is already a wake-up
            pass

    def close(self) -> None:
        for fd in (self._wake_read, self._wake_write, self._inotify):
            if fd is not None:
                os.close(fd)
        self._inotify = None


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
    found = _inotify_watch(os.path.dirname(path), _IN_DELETE | _IN_MOVED_FROM | _IN_DELETE_SELF)
    watch = found[0] if found is not None else None
    try:
        while True:
            # Checked after the watch is in place, so a removal cannot slip between.
            if not os.path.lexists(path):
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if watch is None:
                time.sleep(min(interval, remaining))
                continue
            ready, _, _ = select.select([watch], [], [], remaining)
            if ready:
                _drain(watch)
    finally:
        if found is not None:
            _keep_spare(*found)


_spare_instances: list[int] = []
"""inotify instances wait_gone keeps open between waits. Closing one makes the
kernel wait out a grace period (5-20 ms measured), which a sender would pay
between the receiver's unlink and printing its receipt; removing a watch is cheap."""


def _keep_spare(fd: int, watch_id: int) -> None:
    _libc().inotify_rm_watch(fd, watch_id)
    _drain(fd)  # the removal's own event
    _spare_instances.append(fd)


def _forget_spares() -> None:
    """In a forked child: the spares are the parent's, two processes must not share one."""
    while _spare_instances:
        os.close(_spare_instances.pop())


os.register_at_fork(after_in_child=_forget_spares)


def _inotify_watch(folder: StrPath, mask: int) -> tuple[int, int] | None:
    """An inotify descriptor watching ``folder`` and the watch's id; None where
    the kernel cannot tell."""
    if not sys.platform.startswith("linux"):
        return None
    libc = _libc()
    try:
        fd = _spare_instances.pop()
    except IndexError:
        fd = int(libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC))
        if fd < 0:
            return None
    watch_id = int(libc.inotify_add_watch(fd, os.fsencode(folder), mask | _IN_DONT_FOLLOW))
    if watch_id < 0:
        os.close(fd)
        return None
    return fd, watch_id


def _libc() -> Any:
    import ctypes  # only here: most commands never watch anything

    return ctypes.CDLL(None, use_errno=True)  # the running program's own libc
