"""A listener whose transcript (the ledger) is on a disk that fills, then has room
again: every message a sender got accepted enters once, none is lost, no line is
glued onto a cut one (INV-05, INV-06; SPEC 3.4). The disk is a small tmpfs the
test mounts, so this needs root (CI is root) and skips elsewhere."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pipost.address import address_of

from .conftest import WAIT_S, Exchange, Receipt, tmpfs

pytestmark = pytest.mark.exchange

SESSION = "full-disk-session"
BODY_BYTES = 30_000
"""About 30 KB a letter, as the issue measured: an entry holds the body twice (the
body and the framed text), so about 60 KB a transcript line."""
DISK_BYTES = 1024 * 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A fresh tmpfs of DISK_BYTES, unmounted at the end."""
    disk = tmp_path / "disk"
    disk.mkdir(mode=0o700)
    with tmpfs(disk, f"size={DISK_BYTES}"):
        yield disk


def fill(disk: Path, leave: int) -> Path:
    """A filler file that leaves ``leave`` bytes free on ``disk``; removing it frees
    the room again."""
    info = os.statvfs(disk)
    filler = disk / "filler"
    with filler.open("wb") as out:
        out.write(b"\0" * (info.f_bavail * info.f_frsize - leave))
    return filler


def within(condition: Callable[[], bool], timeout: float = WAIT_S) -> bool:
    """Whether ``condition`` came true before ``timeout``; waiting is never the verdict."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def transcript_lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _entry(line: bytes) -> dict[str, Any] | None:
    """A transcript line as the entry it is, or None for one that is not (a line cut
    short, or two glued together)."""
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    return entry if isinstance(entry, dict) else None


@pytest.mark.parametrize(
    ("whole_post_office", "free_bytes"),
    [(False, 96 * 1024), (True, 128 * 1024)],
    ids=["the transcript on the full disk", "the whole post office on the full disk"],
)
def test_a_full_disk_under_the_transcript_loses_nothing_and_glues_nothing(
    tmp_path: Path, small_disk: Path, whole_post_office: bool, free_bytes: int
) -> None:
    """Room for one entry and part of the next: the second cannot be written whole,
    so it and the third stay queued, said once; once room is freed and the listener
    restarted, each accepted message is in the transcript exactly once."""
    exchange = Exchange(small_disk if whole_post_office else tmp_path)
    try:
        transcript = small_disk / "transcript.jsonl"
        listener = exchange.listen(SESSION, transcript=transcript)
        filler = fill(small_disk, free_bytes)
        accepted: list[Receipt] = []
        for n in range(3):
            sent = exchange.send(address_of(SESSION), f"{n}:" + "abcdefghij" * (BODY_BYTES // 10))
            if sent.returncode == 0:
                accepted.extend(sent.receipts())

        def said_full() -> bool:
            return "disk is full" in listener.stderr()

        within(lambda: said_full() or exchange.queued(listener.address) == 0)
        assert listener.terminate() == 0
        first_run = listener.stderr()
        cut_lines = [line for line in transcript_lines(transcript) if not line.endswith(b"\n")]

        filler.unlink()
        restarted = exchange.listen(SESSION, transcript=transcript)
        exchange.until(lambda: exchange.queued(address_of(SESSION)) == 0, "the mailbox is empty")
        assert restarted.terminate() == 0
    finally:
        exchange.close()

    lines = transcript_lines(transcript)
    entered = [entry["id"] for entry in map(_entry, lines) if entry is not None]
    assert len(accepted) >= 2  # the disk refused at most the last deposit
    assert sorted(entered) == sorted(r.message_id for r in accepted)  # once each, none lost
    assert len(entered) == len(lines)  # none glued onto another
    assert cut_lines == []  # whatever the disk took, nothing cut was left behind
    assert sum("disk is full" in line for line in first_run.splitlines()) == 1
