"""``pi-post demo`` when something goes wrong: a step that times out ends the demo
with "demo failed" and exit 1, its processes stopped; a signal that arrives while a
process is being started ends it once that process is tracked (the whole exchange
runs in tests/exchange/test_demo.py)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipost import demo


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
