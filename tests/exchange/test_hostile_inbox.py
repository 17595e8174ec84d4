"""The acceptance test of hardening: a real ``pi-post listen --transcript`` process
whose mailbox was laid out by someone hostile before it started (INV-09, INV-10,
INV-22, INV-23).

The mailbox holds a 200 MiB file named like a letter, a symlink named like a
letter pointing at a valid letter elsewhere, malformed JSON, a letter whose
replyTo is ``../../x``, and good letters; more good letters are sent while it
runs. The listener must deliver every good one exactly once, set every bad one
aside (in quarantine/, never in the transcript), leave the symlink's target
alone, keep running, and stay small: its peak RSS, read from ``wait4`` once it
exits, stays below 120 MiB, where reading the big file whole would take 200 MiB.

The 200 MiB file is sparse: its first bytes are real (the start of a letter) and
the rest is a hole. A hole costs no disk, but a reader that reads the file whole
still gets 200 MiB of zeros into its memory, which is what the RSS bound catches.

Why a launcher: Linux charges a process, in ru_maxrss, with the resident size of
the memory it had just before exec, and a child of pytest had pytest's (tens of
MiB, more as the run goes on). So the listener is forked and exec'd by a small
launcher process, the listener's parent, which does the ``os.wait4(pid, 0)`` and
reports the figure: the listener's own peak, not the test runner's.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import stat
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipost import mailbox, quarantine, registry, session
from pipost.address import address_of
from pipost.message import LETTER_READ_LIMIT, Message, Sender, encode, new_message
from pipost.post import wall_clock_ms
from pipost.registry import OsProcessTable
from pipost.session import Presence
from tests.helpers import deposit, made

from .conftest import CLI, WAIT_S, Exchange, read_transcript

pytestmark = pytest.mark.exchange

SESSION = "hostile-inbox-listener"
ADDRESS = address_of(SESSION)
HUGE_BYTES = 200 * 1024 * 1024
RSS_CAP_KIB = 120 * 1024
"""ru_maxrss is in KiB on Linux."""
FOLLOWED = "this letter was reached through a symlink"
PRE_LAID_GOOD = 5
SENT_WHILE_RUNNING = 3


@dataclass
class HostileMailbox:
    good: dict[str, tuple[str, str]]
    """id -> (body, sender name); each must enter the transcript exactly once."""
    bad: dict[str, str]
    """file name -> what it is."""
    link_target: Path
    link_target_bytes: bytes
    link_target_mtime_ns: int


def _letter(sent_at: int, nonce: str, body: str, name: str) -> Message:
    return new_message(Sender("process", name), body, sent_at, nonce=nonce)


def _write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def lay_hostile_mailbox(exchange: Exchange, *, bad_first: bool) -> HostileMailbox:
    """Good letters deposited as a sender would; bad files laid by hand. With
    ``bad_first`` the bad files' names sort before every good letter's and their
    mtimes are a day older; otherwise they sort after every letter of the test."""
    inbox = made(exchange.root, "inbox", ADDRESS)
    now = wall_clock_ms()
    good = {}
    for number in range(PRE_LAID_GOOD):
        message = _letter(
            now - 60_000 + number, f"{number:08x}", f"good {number}", f"early-{number}"
        )
        deposit(exchange.root, ADDRESS, message)
        good[message.id] = (message.body, message.sender.name)

    bad_at = 1 if bad_first else 9_999_999_999_000

    def bad_id(number: int) -> str:
        return f"{bad_at + number:013d}-0badbad{number}"

    bad = {}
    huge = f"{bad_id(1)}.json"
    letter_start = encode(_letter(bad_at + 1, "0badbad1", "x", "huge"))[:-2]  # ends inside the body
    _write(inbox / huge, letter_start)
    os.truncate(inbox / huge, HUGE_BYTES)
    bad[huge] = "200 MiB, sparse"

    elsewhere = exchange.folder("elsewhere")
    target = elsewhere / f"{bad_id(2)}.json"
    _write(target, encode(_letter(bad_at + 2, "0badbad2", FOLLOWED, "linked")))
    linked = f"{bad_id(2)}.json"
    os.symlink(target, inbox / linked)
    bad[linked] = "symlink to a valid letter"

    malformed = f"{bad_id(3)}.json"
    _write(inbox / malformed, b'{"v":1,"id":"' + bad_id(3).encode() + b'","from":{')
    bad[malformed] = "malformed JSON"

    escaping = _letter(bad_at + 4, "0badbad4", "reply to ../../x", "escaping")
    _write(inbox / escaping.file_name, json.dumps(_with_reply_to(escaping, "../../x")).encode())
    bad[escaping.file_name] = "replyTo ../../x"

    if bad_first:
        day_ago = time.time() - 86_400
        for name in bad:
            os.utime(inbox / name, (day_ago, day_ago), follow_symlinks=False)
    info = os.lstat(target)
    return HostileMailbox(good, bad, target, target.read_bytes(), info.st_mtime_ns)


def _with_reply_to(message: Message, reply_to: str) -> dict[str, object]:
    letter: dict[str, object] = json.loads(encode(message))
    letter["replyTo"] = reply_to
    return letter


LAUNCHER = """
import json, os, signal, sys
child = os.fork()
if child == 0:
    os.execv(sys.argv[1], sys.argv[1:])
signal.signal(signal.SIGTERM, lambda *_: os.kill(child, signal.SIGTERM))
print(json.dumps({"pid": child}), flush=True)
_, status, usage = os.wait4(child, 0)
print(json.dumps({"code": os.waitstatus_to_exitcode(status), "maxrss_kib": usage.ru_maxrss}))
"""
"""Forks, execs the listener, passes SIGTERM on, reaps it with wait4 and reports."""


class MeasuredListener:
    """``pi-post listen`` under the launcher, in a process group of its own."""

    def __init__(self, exchange: Exchange, transcript: Path) -> None:
        self.root = exchange.root
        self.stderr_path = exchange.base / "listener.stderr"
        listen = [*CLI, "listen", "--session-id", SESSION, "--transcript", str(transcript)]
        with open(self.stderr_path, "wb") as stderr:
            self.launcher = subprocess.Popen(
                [sys.executable, "-c", LAUNCHER, *listen],
                cwd=exchange.folder(SESSION),
                env=exchange.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                start_new_session=True,
            )
        self.pid = int(self._report()["pid"])

    def _report(self) -> dict[str, int]:
        assert self.launcher.stdout is not None
        ready, _, _ = select.select([self.launcher.stdout], [], [], WAIT_S)
        line = self.launcher.stdout.readline() if ready else ""
        assert line, f"the launcher reported nothing: {self.stderr()}"
        report: dict[str, int] = json.loads(line)
        return report

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def is_live(self) -> bool:
        record = registry.read(self.root, ADDRESS)
        return (
            record is not None
            and record.pid == self.pid
            and session.presence(record, wall_clock_ms(), OsProcessTable()) is Presence.LIVE
        )

    def running(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return self.launcher.poll() is None

    def stop_and_measure(self) -> tuple[int, int]:
        """SIGTERM, passed on by the launcher: (exit code, peak RSS in KiB) of the listener."""
        self.launcher.send_signal(signal.SIGTERM)
        report = self._report()
        self.launcher.wait(timeout=WAIT_S)
        return report["code"], report["maxrss_kib"]

    def close(self) -> None:
        """Whatever happened: kill the group (launcher and listener), close the pipe."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.launcher.pid, signal.SIGKILL)
        self.launcher.wait(timeout=WAIT_S)
        if self.launcher.stdout is not None:
            self.launcher.stdout.close()


def json_letters(folder: Path) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.endswith(".json") and not n.startswith("."))


@pytest.mark.parametrize(
    "bad_first", [False, True], ids=["bad-files-sort-last", "bad-files-older-and-first"]
)
def test_a_listener_keeps_delivering_past_a_hostile_mailbox_in_bounded_memory(
    exchange: Exchange, bad_first: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    laid = lay_hostile_mailbox(exchange, bad_first=bad_first)
    transcript = exchange.base / "transcript.jsonl"
    listener = MeasuredListener(exchange, transcript)
    try:
        exchange.until(listener.is_live, "the listener is live")
        check_the_listener(exchange, laid, listener, transcript, bad_first, capsys)
    finally:
        listener.close()


def check_the_listener(
    exchange: Exchange,
    laid: HostileMailbox,
    listener: MeasuredListener,
    transcript: Path,
    bad_first: bool,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for number in range(SENT_WHILE_RUNNING):
        body = f"sent while running {number}"
        sent = exchange.send(ADDRESS, body, label=f"runner-{number}").receipt()
        laid.good[sent.message_id] = (body, f"runner-{number}")

    inbox = Path(mailbox.inbox_of(exchange.root, ADDRESS))
    exchange.until(
        lambda: (
            {entry["id"] for entry in read_transcript(transcript)} == set(laid.good)
            and not json_letters(inbox)
        ),
        "every good letter is in the transcript and the mailbox holds no letter",
    )
    assert listener.running(), f"the listener stopped: {listener.stderr()}"
    code, peak_kib = listener.stop_and_measure()
    with capsys.disabled():
        print(
            f"\n[hostile inbox, {'bad first' if bad_first else 'bad last'}] listener peak RSS "
            f"{peak_kib} KiB = {peak_kib / 1024:.1f} MiB (cap {RSS_CAP_KIB // 1024} MiB)"
        )
    assert code == 0, listener.stderr()
    assert peak_kib < RSS_CAP_KIB, f"peak RSS {peak_kib} KiB: a letter was read whole"

    entries = read_transcript(transcript)
    assert Counter(entry["id"] for entry in entries) == Counter(laid.good.keys()), (
        "each good one once"
    )
    for entry in entries:
        assert (entry["body"], entry["from"]["name"]) == laid.good[entry["id"]]
    assert FOLLOWED not in transcript.read_text(encoding="utf-8")

    quarantined = {entry.name: entry.reason for entry in quarantine.quarantined(exchange.root)}
    assert set(quarantined) == set(laid.bad), quarantined
    assert all(quarantined.values()), "each set aside with its reason"
    kept = Path(quarantine.quarantine_of(exchange.root, ADDRESS))
    huge = next(name for name, what in laid.bad.items() if what.startswith("200 MiB"))
    assert os.lstat(kept / huge).st_size <= LETTER_READ_LIMIT, "only the head of it is kept"
    linked = next(name for name, what in laid.bad.items() if what.startswith("symlink"))
    assert stat.S_ISLNK(os.lstat(kept / linked).st_mode), "the link itself is set aside"
    assert laid.link_target.read_bytes() == laid.link_target_bytes
    assert os.lstat(laid.link_target).st_mtime_ns == laid.link_target_mtime_ns
    assert {drop.letter for drop in exchange.drops()} == set(laid.bad)

    assert json_letters(inbox) == []
    assert not (exchange.root / "x").exists() and not (exchange.base / "x").exists()
