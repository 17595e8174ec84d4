"""The drop log: what a receiving session did not let in, with the reason and never
the body; bounded by rotation, safe under concurrent writers (INV-05)."""

from __future__ import annotations

import fcntl
import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pipost import droplog, files
from tests.helpers import NOW, frozen_holder, log_drop, not_blocked

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


def test_a_fifo_at_the_log_s_name_is_refused_without_waiting_for_a_reader(
    tmp_path: Path,
) -> None:
    """It used to block the receiver in open() for ever: a FIFO opened for writing
    waits for a reader. It is refused, and left as it is."""
    (tmp_path / "log").mkdir(mode=0o700)
    os.mkfifo(droplog.log_path(tmp_path), 0o600)
    try:
        raised = not_blocked(lambda: log_drop(tmp_path, drop(0)))
    finally:  # a writer blocked in open() is freed by a reader
        os.close(os.open(droplog.log_path(tmp_path), os.O_RDONLY | os.O_NONBLOCK))
    assert isinstance(raised, files.UnsafePath), raised
    assert raised.strerror == "not a regular file"
    assert stat.S_ISFIFO(os.lstat(droplog.log_path(tmp_path)).st_mode)


def test_a_log_a_stopped_writer_holds_is_given_up_naming_it_and_left_as_it_was(
    tmp_path: Path, short_bound: float
) -> None:
    """A listener frozen (SIGSTOP) while it held the log's lock: the next line is not
    written, and the writer learns who holds the lock after the bound."""
    log_drop(tmp_path, drop(0))
    log = Path(droplog.log_path(tmp_path))
    before = log.read_bytes()
    with frozen_holder(log) as pid:
        raised = not_blocked(lambda: log_drop(tmp_path, drop(1)))
    assert isinstance(raised, files.LockTimeout), raised
    assert raised.filename == str(log)
    assert str(raised.strerror).startswith(f"locked by pid {pid} for more than 0.2 s")
    assert log.read_bytes() == before


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


def test_a_name_of_any_characters_is_logged_as_readable_utf8(tmp_path: Path) -> None:
    """Names come from letters: one that is not ASCII stays readable in the file (the
    log is for people, and grep), and one that holds a lone surrogate (an escape a
    sender wrote, or bytes no codec decoded) is logged with a stand-in, not refused."""
    log_drop(tmp_path, drop(0, sender="agent:Zoë"))
    log_drop(tmp_path, drop(1, sender="agent:\udcff"))

    raw = Path(droplog.log_path(tmp_path)).read_bytes()
    assert '"from": "agent:Zoë"'.encode() in raw
    assert [d.sender for d in droplog.read(tmp_path)] == ["agent:Zoë", "agent:?"]


def test_a_line_that_fills_the_log_to_its_limit_exactly_is_kept_in_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log_drop(tmp_path / "measure", drop(1))
    line_size = Path(droplog.log_path(tmp_path / "measure")).stat().st_size
    monkeypatch.setattr(droplog, "LIMIT", 2 * line_size)

    log_drop(tmp_path, drop(1))
    log_drop(tmp_path, drop(2))
    assert log_files(tmp_path) == ["drops.jsonl"]
    log_drop(tmp_path, drop(3))
    assert log_files(tmp_path) == ["drops.jsonl", "drops.jsonl.1"]
    assert list(droplog.read(tmp_path)) == [drop(1), drop(2), drop(3)]


@pytest.mark.parametrize("new_log_started", [True, False], ids=["started", "not yet"])
def test_a_line_written_while_another_writer_rotates_goes_to_the_current_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, new_log_started: bool
) -> None:
    """Between opening the log and locking it, another writer may rotate it, and may
    or may not have started the new one: the line goes to the log that is current
    then, never into the rotated file nor nowhere."""
    log_drop(tmp_path, drop(0))
    log = Path(droplog.log_path(tmp_path))
    flock = fcntl.flock
    rotated = False

    def rotated_meanwhile(fd: int, operation: int) -> None:
        nonlocal rotated
        if not rotated and os.fstat(fd).st_ino == log.stat().st_ino:
            rotated = True
            log.rename(log.with_name(droplog.ROTATED_NAME))
            if new_log_started:
                log.touch(mode=0o600)
        flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", rotated_meanwhile)
    log_drop(tmp_path, drop(1))

    assert rotated
    assert [json.loads(line)["at"] for line in log.read_bytes().splitlines()] == [drop(1).at]
    assert list(droplog.read(tmp_path)) == [drop(0), drop(1)]


def test_reading_takes_at_most_twice_the_limit_of_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log is never written past its limit and a line; a file that is (a stranger's,
    or damaged) is read by its head, not whole."""
    limit = 1000
    monkeypatch.setattr(droplog, "LIMIT", limit)
    log_drop(tmp_path, drop(0))
    log = Path(droplog.log_path(tmp_path))
    line = log.read_bytes()
    log.write_bytes(line + b"x" * (2 * limit) + b"\n" + line)

    assert list(droplog.read(tmp_path)) == [drop(0)]


def test_lines_of_bad_bytes_or_the_wrong_shape_are_skipped(tmp_path: Path) -> None:
    log_drop(tmp_path, drop(0))
    with Path(droplog.log_path(tmp_path)).open("ab") as log:
        log.write(b'{"at": 1, "address": "\xff"}\n')  # not UTF-8, and no letter (KeyError)
        log.write(b"[1, 2]\n")  # not an object (TypeError)
        log.write(b'{"at": null, "address": "", "letter": "", "from": "", "reason": ""}\n')
    log_drop(tmp_path, drop(1))

    assert list(droplog.read(tmp_path)) == [drop(0), drop(1)]


_UNDER_A_FILE_SIZE_LIMIT = """
import errno, resource, sys
from pipost import droplog
from tests.helpers import log_drop
from tests.test_droplog import drop
limit = int(sys.argv[2])
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
# The soft limit alone, and only around the write: a coverage run measuring this
# child saves its data at exit, which the limit must not cut.
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
try:
    log_drop(sys.argv[1], drop(1))
except OSError as error:
    print(errno.errorcode[error.errno], error.filename)
else:
    print("written")
finally:
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
"""


def test_a_line_the_log_cannot_take_whole_is_not_written_at_all(tmp_path: Path) -> None:
    """``ulimit -f`` lets the file grow by part of a line only: the record fails
    (its letter then stays queued) naming the log, and nothing of it stays behind."""
    log_drop(tmp_path, drop(0))
    log = Path(droplog.log_path(tmp_path))
    before = log.read_bytes()
    repo = Path(__file__).resolve().parent.parent
    ran = subprocess.run(
        [sys.executable, "-c", _UNDER_A_FILE_SIZE_LIMIT, str(tmp_path), str(len(before) + 40)],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )

    assert (ran.returncode, ran.stdout, ran.stderr) == (0, f"EFBIG {log}\n", "")
    assert log.read_bytes() == before
    log_drop(tmp_path, drop(2))
    assert list(droplog.read(tmp_path)) == [drop(0), drop(2)]


def test_a_line_cut_by_a_crash_gets_no_line_glued_onto_it(tmp_path: Path) -> None:
    log_drop(tmp_path, drop(0))
    log = Path(droplog.log_path(tmp_path))
    whole = log.read_bytes()
    cut = whole[: len(whole) // 2]
    log.write_bytes(whole + cut)
    log_drop(tmp_path, drop(1))

    assert log.read_bytes().startswith(whole + cut + b"\n")
    assert list(droplog.read(tmp_path)) == [drop(0), drop(1)]
