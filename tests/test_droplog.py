"""The drop log: what a receiving session did not let in, with the reason and never
the body; bounded by rotation, safe under concurrent writers (INV-05)."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from pipost import droplog
from tests.helpers import NOW, log_drop

ADDRESS = "s-0123456789ab"


def drop(n: int, *, sender: str = "process:script", address: str = ADDRESS) -> droplog.Drop:
    return droplog.Drop(
        at=NOW + n,
        address=address,
        letter=f"{NOW + n:013d}-0000{n:04x}.json",
        sender=sender,
        reason=f"duplicate: identical body within 10 s (#{n})",
    )


def log_files(root: Path) -> list[str]:
    return sorted(os.listdir(root / "log"))


def test_what_is_recorded_reads_back_oldest_first(tmp_path: Path) -> None:
    written = [drop(n) for n in range(3)]
    for entry in written:
        log_drop(tmp_path, entry)

    assert list(droplog.read(tmp_path)) == written


def test_the_log_is_private_to_its_owner(tmp_path: Path) -> None:
    log_drop(tmp_path, drop(0))
    assert stat.S_IMODE(Path(droplog.log_path(tmp_path)).stat().st_mode) == 0o600


def test_reading_an_absent_log_finds_nothing(tmp_path: Path) -> None:
    assert list(droplog.read(tmp_path)) == []


def test_a_line_that_is_not_a_drop_is_skipped_and_the_rest_still_read(tmp_path: Path) -> None:
    log_drop(tmp_path, drop(0))
    with Path(droplog.log_path(tmp_path)).open("a") as log:
        log.write('{"torn": \n')
    log_drop(tmp_path, drop(1))

    assert list(droplog.read(tmp_path)) == [drop(0), drop(1)]


def test_a_very_long_sender_name_does_not_cost_the_reason(tmp_path: Path) -> None:
    # Names come from letters, which a hostile sender writes.
    log_drop(tmp_path, drop(0, sender="x" * 20_000))

    (read,) = droplog.read(tmp_path)
    assert read.reason == drop(0).reason
    assert read.letter == drop(0).letter
    assert read.sender.startswith("xxx")
    assert len(Path(droplog.log_path(tmp_path)).read_bytes()) < 20_000


def test_rotation_keeps_two_files_and_never_loses_the_newest_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit = 1000
    monkeypatch.setattr(droplog, "LIMIT", limit)
    written: list[droplog.Drop] = []
    for n in range(60):
        written.append(drop(n))
        log_drop(tmp_path, written[-1])

        assert set(log_files(tmp_path)) <= {"drops.jsonl", "drops.jsonl.1"}
        for name in log_files(tmp_path):
            assert (tmp_path / "log" / name).stat().st_size <= limit
        kept = list(droplog.read(tmp_path))
        assert kept == written[-len(kept) :]  # a contiguous tail ending at the newest

    line_size = len(Path(droplog.log_path(tmp_path)).read_bytes().splitlines(keepends=True)[0])
    assert "drops.jsonl.1" in log_files(tmp_path)
    assert len(list(droplog.read(tmp_path))) >= limit // line_size


def test_concurrent_writers_lose_no_line_below_the_limit(tmp_path: Path) -> None:
    writers, each = 4, 40

    def write(writer: int) -> None:
        for n in range(each):
            log_drop(tmp_path, drop(n, address=f"s-{writer:012x}"))

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)

    kept = list(droplog.read(tmp_path))
    assert sorted((d.address, d.at) for d in kept) == sorted(
        (f"s-{w:012x}", NOW + n) for w in range(writers) for n in range(each)
    )
    for writer in range(writers):  # each writer's lines in the order it wrote them
        mine = [d.at for d in kept if d.address == f"s-{writer:012x}"]
        assert mine == sorted(mine)
    assert log_files(tmp_path) == ["drops.jsonl"]


def test_concurrent_writers_across_rotations_leave_only_whole_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit = 1500
    monkeypatch.setattr(droplog, "LIMIT", limit)

    def write(writer: int) -> None:
        for n in range(30):
            log_drop(tmp_path, drop(n, address=f"s-{writer:012x}"))

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)

    assert log_files(tmp_path) == ["drops.jsonl", "drops.jsonl.1"]
    for name in log_files(tmp_path):
        raw = (tmp_path / "log" / name).read_bytes()
        assert len(raw) <= limit
        assert raw.endswith(b"\n")
        for line in raw.splitlines():
            assert set(json.loads(line)) == {"at", "address", "letter", "from", "reason"}
