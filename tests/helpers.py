"""Helpers shared by the I/O tests: a snapshot of a folder tree, a process table
and a clock that the test controls, builders for records and messages, and a user
that mode bits bind."""

from __future__ import annotations

import hashlib
import os
import pwd
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pipost import files, registry
from pipost.address import address_of, default_name
from pipost.message import Message, Sender, new_message
from pipost.registry import Record

NOW = 1796078534257
"""The instant the reference transcripts were recorded at (ms since the epoch)."""

DAY_MS = 24 * 3600 * 1000


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


@dataclass
class FakeProcessTable:
    """pid -> start token; a pid that is not in the table has no process."""

    tokens: dict[int, str] = field(default_factory=dict)

    def start_token(self, pid: int) -> str | None:
        return self.tokens.get(pid)


@dataclass
class FixedClock:
    """A clock that only moves when the test moves it."""

    now: int = NOW

    def __call__(self) -> int:
        return self.now


def make_record(
    session_id: str,
    cwd: str,
    *,
    last_seen: int = NOW,
    name: str | None = None,
    pid: int | None = None,
    pid_start: str | None = None,
) -> Record:
    address = address_of(session_id)
    return Record(
        address=address,
        session_id=session_id,
        name=name or default_name(cwd, address),
        cwd=cwd,
        started_at=last_seen - 1000,
        last_seen=last_seen,
        pid=pid,
        pid_start=pid_start,
    )


def write_record(root: Path, record: Record) -> Record:
    registry.write(root, record)
    return record


def make_message(sent_at: int = NOW, body: str = "hello", name: str = "process:test") -> Message:
    return new_message(Sender(kind="process", name=name), body, sent_at)


def json_names(folder: Path) -> list[str]:
    """The ``*.json`` names in a folder, as ``ls`` would show them (dot-files included)."""
    return sorted(name for name in os.listdir(folder) if name.endswith(".json"))


def made(root: Path, first: str, *rest: str) -> Path:
    """The folder ``root/first/rest...``, made (0700) as pipost makes it; its path."""
    files.make(root, first, *rest).close()
    return root.joinpath(first, *rest)


def put(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write a new file as pipost writes one, into a folder that must exist."""
    folder = files.open_root(path.parent)
    assert folder is not None, f"no folder {path.parent}"
    with folder:
        folder.write_new(path.name, data, durable=durable)


# -- a user that mode bits bind ------------------------------------------------------
# Root passes every mode bit, and CI runs as root: a process that must meet a folder
# it may not write runs as nobody there (through setpriv). Any other user is bound
# by mode bits already and runs as itself.

_NOBODY = pwd.getpwnam("nobody")


def unprivileged(argv: Sequence[str]) -> list[str]:
    """``argv`` as a command that runs as a user mode bits bind."""
    if os.geteuid() != 0:
        return list(argv)
    ids = (f"--reuid={_NOBODY.pw_uid}", f"--regid={_NOBODY.pw_gid}", "--clear-groups")
    return ["setpriv", *ids, *argv]


def unprivileged_uid() -> int:
    """The uid that ``unprivileged`` commands run with."""
    return _NOBODY.pw_uid if os.geteuid() == 0 else os.geteuid()


def unprivileged_scratch() -> Path:
    """A new folder that user can reach and own (pytest's own lie behind folders
    private to root); the caller removes it."""
    return Path(os.path.realpath(tempfile.mkdtemp(prefix="pipost-unprivileged-")))


def give_to_unprivileged(tree: Path) -> None:
    """Make ``tree`` and everything in it belong to that user, so that pipost run as it
    takes the tree for its own (it refuses folders of others)."""
    if os.geteuid() != 0:
        return
    for folder, folders, names in os.walk(tree):
        for name in [".", *folders, *names]:
            os.lchown(os.path.join(folder, name), _NOBODY.pw_uid, _NOBODY.pw_gid)
