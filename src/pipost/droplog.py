"""The drop log: every message a receiving session did not let into its context
(mode, duplicate, rate, malformed), with its reason and never its body.

Append-only JSON lines at ``log/drops.jsonl`` under the root, shared by every
session on the machine, kept small by rotation: past LIMIT bytes the file moves
to ``drops.jsonl.1`` (replacing the previous one) under a lock, so the log holds
at most twice LIMIT bytes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipost import files

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


def log_path(root: Path) -> Path:
    return root / "log" / "drops.jsonl"


def record(root: Path, drop: Drop) -> None:
    """Append one line, flushed; rotate first when the file is past LIMIT."""
    fields = {k: v[:_FIELD_LIMIT] if isinstance(v, str) else v for k, v in drop.to_json().items()}
    data = (json.dumps(fields, ensure_ascii=False) + "\n").encode("utf-8", "replace")
    folder = files.ensure_dirs(root, "log")
    path = log_path(root)
    while True:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, files.FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            # Another writer may have rotated the file while we waited for the lock.
            if not _is_current(path, fd):
                continue
            size = os.fstat(fd).st_size
            if size and size + len(data) > LIMIT:  # an empty file takes any line: no endless loop
                files.rename(path, folder / "drops.jsonl.1")
                continue
            os.write(fd, data)
            os.fsync(fd)
            return
        finally:
            os.close(fd)


def _is_current(path: Path, fd: int) -> bool:
    try:
        return os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def read(root: Path) -> Iterator[Drop]:
    """Oldest first, across the rotated file and the current one; bad lines skipped."""
    for path in (log_path(root).with_name("drops.jsonl.1"), log_path(root)):
        raw = files.read_bounded(path, 2 * LIMIT)
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
