"""The kit's client over JSON lines (SPEC 11; pipost_conformance.client):
``SubprocessDriver`` opens with the suite's protocol, keeps what the
implementation says it is, and says so plainly when the implementation behind
it misbehaves. pipost's end, ``serve``, is tested in tests/test_driver_serve.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pipost.driver import InProcessDriver
from pipost.driver_protocol import DEFAULT_NOW, PROTOCOL
from pipost_conformance.client import CallTimedOut, DriverError, SubprocessDriver, TransportError
from tests.helpers import PIPOST_DRIVER, process_gone


def test_a_misuse_raises_driver_error_and_the_transport_goes_on(
    pipost_driver: SubprocessDriver,
) -> None:
    with pytest.raises(DriverError, match="unknown operation 'fly'"):
        pipost_driver.call("fly")
    assert pipost_driver.call("address_of", session_id="abc") == {"address": "s-cb61287a5998"}


FAKE = """
import json, sys
for n, line in enumerate(sys.stdin):
    request = json.loads(line)
    {behaviour}
"""


def fake(behaviour: str) -> list[str]:
    return [sys.executable, "-c", FAKE.format(behaviour=behaviour)]


# A fake that answers every call as open wants to be answered.
OPEN_RESULT = {"protocol": PROTOCOL}
ANSWER_AS_OPEN = f'print(json.dumps({{"id": request["id"], "result": {OPEN_RESULT}}}), flush=True)'


def test_an_implementation_that_exits_is_a_transport_error_and_open_restarts_it(
    tmp_path: Path,
) -> None:
    driver = SubprocessDriver(fake(f"{ANSWER_AS_OPEN}\n    if n == 1: sys.exit(3)"), timeout_s=30)
    try:
        driver.open(tmp_path, home=str(tmp_path))
        assert driver.call("list") == OPEN_RESULT
        with pytest.raises(TransportError, match="exited with status 3"):
            driver.call("list")
        driver.open(tmp_path, home=str(tmp_path))
        assert driver.call("list") == OPEN_RESULT
    finally:
        driver.close()


@pytest.mark.parametrize(
    ("behaviour", "error"),
    [
        ('print("hello", flush=True)', "not a JSON line: b'hello'"),
        ('print(json.dumps({"id": -1, "result": {}}), flush=True)', "answer is for request -1"),
        ('print(json.dumps({"id": request["id"]}), flush=True)', "has no result object"),
        # What is quoted of a long line stops at its first 200 bytes.
        ('print("x" * 300, flush=True)', "not a JSON line: b'x{200}'$"),
        ('print(json.dumps("y" * 300), flush=True)', "the answer is not an object: b'\"y{199}'$"),
    ],
)
def test_an_answer_outside_the_protocol_is_a_transport_error(
    tmp_path: Path, behaviour: str, error: str
) -> None:
    # A bound a loaded machine starts the fake within: these answers come at once.
    driver = SubprocessDriver(fake(behaviour), timeout_s=30)
    try:
        with pytest.raises(TransportError, match=error):
            driver.open(tmp_path, home=str(tmp_path))
    finally:
        driver.close()


def test_a_call_left_unanswered_times_out_as_such(tmp_path: Path) -> None:
    driver = SubprocessDriver(fake("pass"), timeout_s=0.5)
    try:
        with pytest.raises(CallTimedOut, match=r"^open: no answer within 0\.5 s$"):
            driver.open(tmp_path, home=str(tmp_path))
    finally:
        driver.close()


def test_a_bound_under_a_second_still_waits_for_the_answer(tmp_path: Path) -> None:
    driver = SubprocessDriver(fake(ANSWER_AS_OPEN), timeout_s=30)  # a loaded machine starts it
    try:
        driver.open(tmp_path, home=str(tmp_path))
        driver.timeout_s = 0.9  # the fake runs now and answers at once
        assert driver.call("list") == OPEN_RESULT
    finally:
        driver.close()


def test_open_sets_the_implementations_clock_where_it_is_asked(tmp_path: Path) -> None:
    driver = SubprocessDriver(PIPOST_DRIVER, timeout_s=30)
    try:
        driver.open(tmp_path / "post", home=str(tmp_path), now=DEFAULT_NOW + 1_000)
        assert driver.call("advance_clock", ms=5) == {"now": DEFAULT_NOW + 1_005}
    finally:
        driver.close()


def test_a_command_that_does_not_run_is_a_transport_error(tmp_path: Path) -> None:
    driver = SubprocessDriver("/nonexistent/pi-post driver", timeout_s=30)
    with pytest.raises(TransportError, match="cannot run /nonexistent/pi-post driver"):
        driver.open(tmp_path, home=str(tmp_path))


# -- what the transport makes of an implementation's answers --------------------------


def test_the_suite_opens_with_its_protocol_and_keeps_what_the_implementation_is(
    tmp_path: Path,
) -> None:
    driver = SubprocessDriver(PIPOST_DRIVER, timeout_s=30)
    try:
        driver.open(tmp_path / "post", home=str(tmp_path))
        assert driver.implementation == InProcessDriver(tmp_path, home="/").implementation
    finally:
        driver.close()


OTHER_PROTOCOL = PROTOCOL + 1


SPEAKS_ANOTHER = f"""
import json, sys
for line in sys.stdin:
    request = json.loads(line)
    result = {{"root": "/", "protocol": {OTHER_PROTOCOL}}}
    print(json.dumps({{"id": request["id"], "result": result}}), flush=True)
"""


def test_an_implementation_answering_another_protocol_breaks_the_run(tmp_path: Path) -> None:
    driver = SubprocessDriver([sys.executable, "-c", SPEAKS_ANOTHER], timeout_s=30)
    said = f"answered protocol {OTHER_PROTOCOL}; the suite speaks {PROTOCOL}"
    try:
        with pytest.raises(TransportError, match=said):
            driver.open(tmp_path, home=str(tmp_path))
    finally:
        driver.close()


DEAF_AFTER_OPEN = f"""
import json, os, sys, time
request = json.loads(sys.stdin.readline())
os.close(0)  # stops reading before it answers (so the next call finds no reader), runs on
print(json.dumps({{"id": request["id"], "result": {{"root": "/", "protocol": {PROTOCOL}}}}}),
      flush=True)
time.sleep(60)
"""


ANSWERS_A_LIST = """
import sys
sys.stdin.readline()
print("[1, 2]", flush=True)
"""


def test_an_implementation_that_stops_reading_but_runs_on_breaks_the_run(
    tmp_path: Path,
) -> None:
    driver = SubprocessDriver([sys.executable, "-c", DEAF_AFTER_OPEN], timeout_s=30)
    try:
        driver.open(tmp_path, home=str(tmp_path))
        with pytest.raises(TransportError) as broken:
            driver.call("capabilities")
        assert str(broken.value) == "capabilities: the implementation stopped reading"
        assert driver.pid is not None
        os.kill(driver.pid, signal.SIGKILL)  # rather than wait out close()'s grace
    finally:
        driver.close()


def test_an_answer_that_is_not_an_object_breaks_the_run(tmp_path: Path) -> None:
    driver = SubprocessDriver([sys.executable, "-c", ANSWERS_A_LIST], timeout_s=30)
    try:
        with pytest.raises(TransportError, match=r"open: the answer is not an object: b'\[1, 2\]'"):
            driver.open(tmp_path, home=str(tmp_path))
    finally:
        driver.close()


def test_a_transport_before_open_or_after_close_runs_nothing(tmp_path: Path) -> None:
    driver = SubprocessDriver(PIPOST_DRIVER, timeout_s=30)
    assert driver.pid is None
    with pytest.raises(TransportError, match="count before open: the implementation is not"):
        driver.call("count", address="s-0123456789ab")
    driver.open(tmp_path / "post", home=str(tmp_path))
    running = driver.pid
    assert running is not None
    driver.close()
    assert driver.pid is None
    assert process_gone(running)
    with pytest.raises(TransportError, match="before open"):
        driver.call("capabilities")


ANSWERS_OPEN = f"""
import json, sys, time
request = json.loads(sys.stdin.readline())
print(json.dumps({{"id": request["id"], "result": {{"root": "/", "protocol": {PROTOCOL}}}}}),
      flush=True)
"""


def implementation(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_transport_says_nothing_of_an_implementation_that_named_none(tmp_path: Path) -> None:
    """Before any open, and after an open whose answer names no implementation,
    ``implementation`` is null: nothing was said."""
    driver = SubprocessDriver(implementation(ANSWERS_OPEN + "sys.stdin.read()\n"), timeout_s=30)
    assert driver.implementation is None
    try:
        driver.open(tmp_path, home=str(tmp_path))
        assert driver.implementation is None
    finally:
        driver.close()


def test_an_answer_that_does_not_echo_its_id_breaks_the_run_null_included(
    tmp_path: Path,
) -> None:
    """Every request has an id of its own and the answer echoes it (SPEC 11.3): an
    answer with a null id is no answer to any request the suite sent."""
    code = f"""
import json, sys
sys.stdin.readline()
print(json.dumps({{"id": None, "result": {{"root": "/", "protocol": {PROTOCOL}}}}}), flush=True)
"""
    driver = SubprocessDriver(implementation(code), timeout_s=30)
    try:
        with pytest.raises(TransportError, match=r"^open: the answer is for request None$"):
            driver.open(tmp_path, home=str(tmp_path))
    finally:
        driver.close()


def test_an_error_line_is_a_misuse_and_not_a_broken_transport(tmp_path: Path) -> None:
    """An error answer is the implementation saying the call misused the interface:
    a DriverError with its words (the scenario errs), not a TransportError (the run
    breaks), and the transport goes on."""
    driver = SubprocessDriver(PIPOST_DRIVER, timeout_s=30)
    try:
        driver.open(tmp_path / "post", home=str(tmp_path))
        with pytest.raises(DriverError) as misuse:
            driver.call("fly")
        assert type(misuse.value) is DriverError
        assert str(misuse.value) == "unknown operation 'fly' (see capabilities)"
        assert driver.call("address_of", session_id="abc") == {"address": "s-cb61287a5998"}
    finally:
        driver.close()


def test_each_call_reads_one_line_and_leaves_the_next_for_the_next_call(tmp_path: Path) -> None:
    """Answers are one per line: when an implementation writes two at once, the call
    takes the first and the second waits, whole, for the call it answers."""
    code = f"""
import json, sys
request = json.loads(sys.stdin.readline())
opened = {{"id": request["id"], "result": {{"root": "/", "protocol": {PROTOCOL}}}}}
ahead = {{"id": request["id"] + 1, "result": {{"answered": "ahead"}}}}
sys.stdout.write(json.dumps(opened) + "\\n" + json.dumps(ahead) + "\\n")  # one write
sys.stdout.flush()
sys.stdin.read()
"""
    driver = SubprocessDriver(implementation(code), timeout_s=30)
    try:
        driver.open(tmp_path, home=str(tmp_path))
        assert driver.call("list") == {"answered": "ahead"}
    finally:
        driver.close()


def test_an_implementation_that_closes_its_output_is_said_to_have_done_so(
    tmp_path: Path,
) -> None:
    """The error names the call and what happened, whether or not the exit status
    came in time to be added to it."""
    reads_the_next_and_exits = ANSWERS_OPEN + "sys.stdin.readline()\n"
    driver = SubprocessDriver(implementation(reads_the_next_and_exits), timeout_s=30)
    try:
        driver.open(tmp_path, home=str(tmp_path))
        with pytest.raises(TransportError, match=r"^list: the implementation closed its output"):
            driver.call("list")
    finally:
        driver.close()


def test_close_kills_an_implementation_that_runs_on_after_its_input_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """close waits for the implementation a bounded time, then kills it: an
    implementation that ignores the end of its input does not hang the suite at
    exit. (The grace itself runs out at once here: wait says it timed out.)"""
    driver = SubprocessDriver(implementation(ANSWERS_OPEN + "time.sleep(60)\n"), timeout_s=30)
    driver.open(tmp_path, home=str(tmp_path))
    pid = driver.pid
    assert pid is not None
    real_wait, real_kill = subprocess.Popen.wait, subprocess.Popen.kill
    killed: list[int] = []

    def kill(process: subprocess.Popen[bytes]) -> None:
        killed.append(process.pid)
        real_kill(process)

    def wait(process: subprocess.Popen[bytes], timeout: float | None = None) -> int:
        if timeout is not None:
            raise subprocess.TimeoutExpired(process.args, timeout)
        assert process.pid in killed, "close waits without end for a running implementation"
        return real_wait(process)

    monkeypatch.setattr(subprocess.Popen, "kill", kill)
    monkeypatch.setattr(subprocess.Popen, "wait", wait)
    try:
        driver.close()
    finally:
        monkeypatch.undo()
        if not killed:
            os.kill(pid, signal.SIGKILL)
    assert killed == [pid]
    assert process_gone(pid)
