"""Who listens: ``listeners/<address>/<pid>.<nonce>.lock``, one file per running
receiving session of an address, each held with an exclusive ``flock`` by its
listener for as long as it runs.

The lock, not the file, says that a listener runs: the kernel drops it when the
process dies, however it dies, so a crashed listener never blocks the next one. A
file whose lock anyone can take is stale; a listener that joins removes the stale
files it finds. The pid in the name is for people (and for handing the record
over, host.py); the nonce tells apart two listeners that one process runs.

Joining and leaving happen under the lock of the address's folder (``flock`` on
the folder itself, as deposits lock a mailbox), and whoever removes a file there
holds it. So two listeners that start at the same moment are ordered — the second
sees the first, never both each other — and no file is removed between its
creation and its lock. The folder is removed by the last listener to leave, under
the same lock; one that was waiting for it starts again (files.Vanished).

Reading (``running``) takes no folder lock and changes nothing: it asks each file's
lock with a shared, non-blocking lock on a descriptor of its own.

``listeners/`` sits beside ``quarantine/`` and ``log/``: pi-post 0.7 never looks
there.
"""

from __future__ import annotations

import errno
import os

from pipost import files
from pipost.address import checked

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pipost.files import Folder, StrPath

FOLDER = "listeners"
SUFFIX = ".lock"
_JOIN_ATTEMPTS = 1000  # the last listener may remove the folder between make and lock


class AlreadyListening(Exception):
    """Another listener runs for this address, and this one was not asked to run
    beside it."""

    def __init__(self, address: str, pids: list[int]) -> None:
        super().__init__(f"{address} already has a listener: pid {', '.join(map(str, pids))}")
        self.address = address
        self.pids = pids


def folder_of(root: StrPath, address: str) -> str:
    """The path of an address's folder of listeners, for messages."""
    return os.path.join(root, FOLDER, checked(address))


def _pid_of(name: str) -> int | None:
    """The pid a listener's file is named after; None for any other name."""
    pid, dot, rest = name.partition(".")
    if not dot or not pid.isdigit() or not rest.endswith(SUFFIX):
        return None
    return int(pid)


def running(root: StrPath, address: str) -> list[int]:
    """The pids of the listeners of ``address`` that run now, ascending (a pid twice
    when one process runs two). Reading only: nothing is created or removed."""
    top = files.open_root(root)
    if top is None:
        return []
    with top:
        return running_below(top, address)


def running_below(top: Folder, address: str) -> list[int]:
    """As :func:`running`, below the open root ``top`` (a sweep asks it per address)."""
    folder = top.walk(FOLDER, checked(address))
    if folder is None:
        return []
    with folder:
        named = [(name, _pid_of(name)) for name in folder.names()]
        return sorted(pid for name, pid in named if pid is not None and folder.is_held(name))


class Listening:
    """This listener's place among the listeners of its address, held until leave()."""

    def __init__(
        self, root: StrPath, address: str, folder: Folder, name: str, handle: files.OpenFile
    ) -> None:
        self.root = root
        self.address = address
        self.name = name
        self._folder = folder
        self._handle = handle

    def leave(self) -> None:
        """Remove this listener's file, and the folder if it was the last one."""
        if self._handle.fd < 0:
            return
        parent = None
        try:
            parent = files.walk(self.root, FOLDER)
            with self._folder.lock():
                self._folder.unlink(self.name)
                if parent is not None:
                    parent.remove_empty(self.address)
        except OSError:
            pass  # the file stays behind, unlocked: stale, and removed by the next to join
        finally:
            if parent is not None:
                parent.close()
            self.close()

    def close(self) -> None:
        """Let go of the lock without removing the file (it becomes stale)."""
        self._handle.close()
        self._folder.close()


def join(root: StrPath, address: str, *, beside_others: bool = False) -> Listening:
    """Add this process to the listeners of ``address``, removing stale files on the
    way. While another listener runs, AlreadyListening — and nothing is added —
    unless ``beside_others``."""
    for _ in range(_JOIN_ATTEMPTS):
        folder = files.make(root, FOLDER, checked(address))
        try:
            with folder.lock():
                others = []
                for name in sorted(folder.names()):
                    pid = _pid_of(name)
                    if pid is None:
                        continue  # not a listener's file: not ours to judge
                    if folder.is_held(name):
                        others.append(pid)
                    else:
                        folder.unlink(name)
                if others and not beside_others:
                    raise AlreadyListening(address, sorted(others))
                name = f"{os.getpid()}.{os.urandom(4).hex()}{SUFFIX}"
                handle = folder.create_locked(name)
        except files.Vanished:
            folder.close()
            continue
        except BaseException:
            folder.close()
            raise
        return Listening(root, address, folder, name, handle)
    raise OSError(errno.EAGAIN, "the folder of listeners kept vanishing", folder_of(root, address))
