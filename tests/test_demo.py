"""``pi-post demo`` when something goes wrong: a step that times out ends the demo
with "demo failed" and exit 1, its processes stopped; a signal that arrives while a
process is being started ends it once that process is tracked. And what needs no
exchange: its waits, on a clock of the test's, output that is not UTF-8, a listener
that ignores SIGTERM (the whole exchange runs in tests/exchange/test_demo.py)."""

from __future__ import annotations

import copy
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pipost import demo, registry
from pipost.address import address_of
from pipost.message import Sender, new_message
from pipost.session import Presence
from tests.helpers import deposit


@pytest.fixture
def signals_kept() -> Iterator[None]:
    """The demo's handlers (and the SIG_IGN a stop sets) undone after the test."""
    kept = {signum: signal.getsignal(signum) for signum in demo.Stops.SIGNALS}
    try:
        yield
    finally:
        for signum, handler in kept.items():
            signal.signal(signum, handler)


def test_a_step_that_times_out_ends_the_demo_saying_so(
    monkeypatch: pytest.MonkeyPatch, signals_kept: None
) -> None:
    monkeypatch.setattr(demo, "_WAIT_S", 0.0)  # no listener registers in no time
    said: list[str] = []
    assert demo.run(said.append) == 1
    assert said[-1] == "demo failed: timed out waiting until alice registers"


def test_a_command_that_does_not_end_in_time_fails_the_step_and_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signals_kept: None
) -> None:
    monkeypatch.setattr(demo, "_WAIT_S", 0.5)
    said: list[str] = []
    with demo._demo(tmp_path, said.append, demo.Stops()) as shown:
        with pytest.raises(demo.DemoFailed, match=r"^pi-post listen did not end within 0\.5 s$"):
            shown.pipost("listen", "--session-id", "never-ends")
        (process,) = shown.processes
    assert said == ["$ pi-post listen --session-id never-ends"]
    assert process.returncode == -signal.SIGKILL  # stopped when the demo ended


def test_a_transcript_not_written_yet_has_no_entries(tmp_path: Path) -> None:
    assert demo.Demo(tmp_path, print, demo.Stops()).transcript("alice") == []


def test_a_signal_while_a_process_starts_ends_the_demo_once_it_is_tracked(
    signals_kept: None,
) -> None:
    stops = demo.Stops()
    tracked: list[str] = []
    with pytest.raises(demo.Stopped) as stopped, stops.starting():
        stops.arrived(signal.SIGHUP, None)
        tracked.append("the process")  # the start goes on to its end
    assert (stopped.value.signum, tracked) == (signal.SIGHUP, ["the process"])
    # Further signals are ignored: they must not cut the demo's cleanup short.
    assert all(signal.getsignal(s) == signal.SIG_IGN for s in demo.Stops.SIGNALS)


def test_a_signal_before_any_process_starts_ends_the_demo_at_once(signals_kept: None) -> None:
    with pytest.raises(demo.Stopped) as stopped:
        demo.Stops().arrived(signal.SIGTERM, None)
    assert stopped.value.signum == signal.SIGTERM


def test_a_stop_keeps_its_signal_as_an_exception_keeps_its_arguments() -> None:
    """An exception is shown (in a traceback) and copied (copy, pickle) from its args:
    a stop's are its signal, so that a copy of it is a stop by the same signal."""
    stopped = demo.Stopped(signal.SIGTERM)
    assert stopped.args == (signal.SIGTERM,)
    assert copy.copy(stopped).signum == signal.SIGTERM


_PRINTS_LATIN_1 = r"""import sys
sys.stdout.buffer.write(b"caf\xe9\n")
sys.stderr.buffer.write(b"\xe9 on stderr\n")
"""


def test_output_that_is_not_utf8_is_shown_with_replacement_characters(
    tmp_path: Path, signals_kept: None
) -> None:
    """A command's output is shown whatever its bytes: the demo must not fail on it."""
    said: list[str] = []
    with demo._demo(tmp_path, said.append, demo.Stops()) as shown:
        shown.cli = [sys.executable, "-c", _PRINTS_LATIN_1]
        assert shown.pipost("peek") == "caf\ufffd\n"
    assert said == ["$ pi-post peek", "  caf\ufffd", "  \ufffd on stderr"]


_IGNORES_SIGTERM = """import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ignoring SIGTERM", flush=True)
time.sleep(10)
"""


def test_a_listener_that_ignores_sigterm_cannot_hang_the_demo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signals_kept: None
) -> None:
    """Stopping it waits as long as any step, then gives up; the demo's end kills it."""
    monkeypatch.setattr(demo, "_WAIT_S", 0.2)
    with demo._demo(tmp_path, print, demo.Stops()) as shown:
        shown.cli = [sys.executable, "-c", _IGNORES_SIGTERM]
        stubborn = shown.start([], tmp_path, subprocess.PIPE)
        assert stubborn.stdout is not None and stubborn.stderr is not None
        with stubborn.stdout, stubborn.stderr:
            assert stubborn.stdout.readline() == b"ignoring SIGTERM\n"
        shown.listeners["stubborn"] = stubborn
        with pytest.raises(subprocess.TimeoutExpired):
            shown.stop("stubborn")
    assert stubborn.returncode == -signal.SIGKILL


def test_a_listener_registers_only_with_a_fresh_heartbeat(tmp_path: Path) -> None:
    """A record whose process runs but whose heartbeat is older than the live window
    is stalled: the demo does not take it for the listener it started."""
    shown = demo.Demo(tmp_path, print, demo.Stops())
    now = int(time.time() * 1000)
    fresh = registry.register(shown.root, "demo-alice", str(tmp_path), now)
    stale = registry.register(shown.root, "demo-bob", str(tmp_path), now - 60_000)
    assert shown.presence(fresh.address) is Presence.LIVE
    assert shown.presence(stale.address) is Presence.STALLED


class Clock:
    """The demo's time, for its waits: it moves ``tick`` seconds at each sleep, and
    ``then`` runs after the sleep numbered by its key (counted from 1)."""

    def __init__(self, tick: float, then: dict[int, Callable[[], object]] | None = None) -> None:
        self.now = 1000.0
        self.tick = tick
        self.then = then or {}
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += self.tick
        self.then.get(len(self.slept), lambda: None)()


def test_a_wait_looks_every_50_ms_and_gives_up_only_past_its_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A look at the deadline itself is still in time (the clock ticks in exact
    halves of the wait, so one look falls on it)."""
    clock = Clock(tick=demo._WAIT_S / 2)
    monkeypatch.setattr(demo, "time", clock)
    looks: list[float] = []

    def never() -> bool:
        looks.append(clock.now)
        return False

    with pytest.raises(demo.DemoFailed, match=r"^timed out waiting until it happens$"):
        demo.Demo(tmp_path, print, demo.Stops()).until(never, "it happens")
    half = demo._WAIT_S / 2
    assert looks == [1000.0, 1000.0 + half, 1000.0 + 2 * half, 1000.0 + 3 * half]
    assert clock.slept == [0.05] * 3


def test_the_exchange_has_settled_once_the_drop_log_stopped_growing_for_2_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log grows at the second look; the demo goes on 2 s after it saw that, at the
    first look 2 s later (the clock ticks in exact halves of a second)."""
    shown = demo.Demo(tmp_path, print, demo.Stops())
    log = shown.root / "log" / "drops.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text('{"first": "drop"}\n')

    def another_drop() -> None:
        with log.open("a") as appended:
            appended.write('{"second": "drop"}\n')

    clock = Clock(tick=0.5, then={2: another_drop})
    monkeypatch.setattr(demo, "time", clock)
    demo._settle(shown)
    assert clock.now == 1000.0 + 1.0 + 2.0
    assert clock.slept == [0.1] * 6


def test_an_echo_the_guard_never_drops_fails_the_demo_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(demo, "_WAIT_S", 0.0)
    with pytest.raises(demo.DemoFailed, match=r"^timed out waiting until the guard drops an echo$"):
        demo._settle(demo.Demo(tmp_path, print, demo.Stops()))


class Unattended(demo.Demo):
    """A demo whose sessions never run: each step ends at once, and no mail arrives."""

    def listen(self, name: str, *extra: str) -> str:
        return address_of(f"demo-{name}")

    def pipost(self, *args: str) -> str:
        self.say("$ pi-post " + shlex.join(args))
        return ""

    def stop(self, name: str) -> None:
        pass

    def show_last_entry(self, name: str) -> None:
        pass


def test_a_resumed_bob_who_collects_no_mail_fails_the_demo_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(demo, "_WAIT_S", 0.0)
    said: list[str] = []
    with pytest.raises(demo.DemoFailed, match=r"^timed out waiting until bob collects his mail$"):
        demo._script(Unattended(tmp_path, said.append, demo.Stops()))
    assert said[-1] == "# bob resumes and collects his mail at start-up."


class Collecting(Unattended):
    """A demo whose bob has his mail in his transcript, but whose letter stays on disk:
    the moment between the two, held."""

    def listen(self, name: str, *extra: str) -> str:
        if name == "bob" and self.transcript("bob") == []:
            (self.base / "bob.jsonl").write_text('{"text": "review PR 12 when back"}\n')
        return super().listen(name, *extra)


def test_bob_has_collected_his_mail_only_once_it_has_left_the_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """His transcript has the letter before the letter is removed; the peek that
    follows must find his mailbox empty, so the demo waits for both."""
    monkeypatch.setattr(demo, "_WAIT_S", 0.0)
    shown = Collecting(tmp_path, print, demo.Stops())
    bob = address_of("demo-bob")
    deposit(shown.root, bob, new_message(Sender("process", "scripts"), "review PR 12", 1))
    with pytest.raises(demo.DemoFailed, match=r"^timed out waiting until bob collects his mail$"):
        demo._script(shown)
