"""What the state machines share with pipost's own tests (tests/helpers.py takes
them from here): the instant the reference transcripts were recorded at, a
snapshot of a folder tree, a folder made as pipost makes it, and who holds a
folder open (the feature steps take that too)."""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from pipost import files

NOW = 1796078534257
"""The instant the reference transcripts were recorded at (ms since the epoch)."""


@dataclass(frozen=True)
class Entry:
    """One path of a tree as the snapshot sees it."""

    mode: int
    content: str
    """sha256 of a file's bytes, a symlink's target, or "" for anything else."""
    mtime_ns: int


def tree_snapshot(root: Path) -> dict[str, Entry]:
    """Every path under ``root`` (``root`` itself as ".") with mode, content and
    mtime, never following a symlink and never opening a FIFO. Two snapshots are
    equal exactly when nothing under ``root`` was created, removed or changed."""
    snapshot: dict[str, Entry] = {}
    for folder, folders, names in os.walk(root, followlinks=False):
        for name in [".", *folders, *names]:
            path = Path(folder) / name if name != "." else Path(folder)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                content = os.readlink(path)
            elif stat.S_ISREG(info.st_mode):
                content = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                content = ""
            relative = os.path.relpath(path, root)
            snapshot[relative] = Entry(info.st_mode, content, info.st_mtime_ns)
    return snapshot


def made(root: Path, first: str, *rest: str) -> Path:
    """The folder ``root/first/rest...``, made (0700) as pipost makes it; its path."""
    files.make(root, first, *rest).close()
    return root.joinpath(first, *rest)


def descriptors_on(path: Path) -> int:
    """How many descriptors are open on ``path`` in the processes this one may look
    into (``/proc/<pid>/fd``). Whoever waits for the lock of a folder has it open,
    whether it waits blocked in flock (a "->" line of /proc/locks) or tries again
    and again, as pipost does (files.hold_lock): so this sees waiters of both."""
    wanted = os.stat(path)
    count = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            descriptors = os.listdir(f"/proc/{pid}/fd")
        except OSError:  # gone, or not ours to look into
            continue
        for fd in descriptors:
            try:
                info = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            count += (info.st_dev, info.st_ino) == (wanted.st_dev, wanted.st_ino)
    return count
