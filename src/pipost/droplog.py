"""The drop log: every message a receiving session did not let into its context
(mode, duplicate, rate, malformed), with its reason and never its body; and, with
a reason that starts ``kept:``, a letter it left queued because it could not have
removed it after entry (its mailbox folder cannot be written): kept, not dropped.

Append-only JSON lines at ``log/drops.jsonl`` under the root (written below the
root a receiver's drain already holds open), shared by every
session on the machine, kept small by rotation: past LIMIT bytes the file moves
to ``drops.jsonl.1`` (replacing the previous one) under a lock, so the log holds
at most twice LIMIT bytes. A line is written whole and flushed, or not at all (a
disk that fills, ``ulimit -f``): a letter is never unlinked on the strength of a
cut line, and no line is glued onto one a crash cut.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pipost import files
from pipost.files import StrPath

LIMIT = 1024 * 1024
_FIELD_LIMIT = 512
"""Characters kept of each text field: names come from letters a stranger wrote.
Fields are clipped, never the line, so every line stays JSON (and its reason
readable) whatever a sender put in them."""


@dataclass(frozen=True)
class Drop:
    at: int
    address: str
    letter: str
    sender: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "address": self.address,
            "letter": self.letter,
            "from": self.sender,
            "reason": self.reason,
        }


LOG_NAME = "drops.jsonl"
ROTATED_NAME = "drops.jsonl.1"


def log_path(root: StrPath) -> str:
    return os.path.join(root, "log", LOG_NAME)


def record(top: files.Folder, drop: Drop) -> None:
    """Append one line, flushed, below the open root ``top``; rotate first when the
    file is past LIMIT. Never blocks without limit: what stands at the log's name
    and is no regular file is refused (files.UnsafePath), and a lock held past
    files.LOCK_WAIT_S is given up (files.LockTimeout)."""
    fields = {k: v[:_FIELD_LIMIT] if isinstance(v, str) else v for k, v in drop.to_json().items()}
    data = (json.dumps(fields, ensure_ascii=False) + "\n").encode("utf-8", "replace")
    with top.make("log") as folder:
        while True:
            fd = folder.open_append(LOG_NAME)
            try:
                files.hold_lock(fd, folder.name(LOG_NAME))
                # Another writer may have rotated the file while we waited for the lock.
                if not _is_current(folder, fd):
                    continue
                size = os.fstat(fd).st_size
                if size and size + len(data) > LIMIT:  # an empty file takes any line
                    folder.rename(LOG_NAME, ROTATED_NAME)
                    continue
                _append(fd, size, data)
                return
            except OSError as error:
                error.filename = error.filename or folder.name(LOG_NAME)
                raise
            finally:
                os.close(fd)


def _append(fd: int, size: int, data: bytes) -> None:
    """The whole line, flushed, or nothing: the letter it accounts for must not be
    unlinked on the strength of a cut line (a disk that fills, ``ulimit -f``)."""
    if size and os.pread(fd, 1, size - 1) != b"\n":
        data = b"\n" + data  # a line cut by a crash: ours is never glued onto it
    try:
        files.write_all(fd, data)
        os.fsync(fd)
    except OSError:
        with contextlib.suppress(OSError):  # if this fails, the next line starts anew
            os.ftruncate(fd, size)
        raise


def _is_current(folder: files.Folder, fd: int) -> bool:
    try:
        return folder.lstat(LOG_NAME).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def read(root: StrPath) -> Iterator[Drop]:
    """Oldest first, across the rotated file and the current one; bad lines skipped."""
    folder = files.walk(root, "log")
    if folder is None:
        return
    with folder:
        raws = [folder.read_bounded(name, 2 * LIMIT) for name in (ROTATED_NAME, LOG_NAME)]
    for raw in raws:
        if raw is None:
            continue
        for line in raw.decode("utf-8", "replace").splitlines():
            with contextlib.suppress(ValueError, KeyError, TypeError):
                data = json.loads(line)
                yield Drop(
                    at=int(data["at"]),
                    address=str(data["address"]),
                    letter=str(data["letter"]),
                    sender=str(data["from"]),
                    reason=str(data["reason"]),
                )
