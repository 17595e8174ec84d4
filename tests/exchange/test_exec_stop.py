"""A listener whose ``--exec`` command is still running when SIGTERM comes stops
at once: the command's process group is ended and the message it was handling
stays queued for the next start (INV-05, INV-23). A command that hangs is ended
at ``--exec-timeout`` and retried with the backoff, saying so on stderr.

The commands write the pid of the child they wait for, so that the test can see
that nothing they started outlives them.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import pytest

from pipost import registry
from tests.helpers import process_gone

from .conftest import WAIT_S, Exchange

pytestmark = pytest.mark.exchange

COMMAND_S = 30
"""How long the command would run if nothing ended it."""


def _sleeping_command(child_file: Path) -> str:
    return f"sleep {COMMAND_S} & echo $! > {shlex.quote(str(child_file))}; wait"


def _child_pid(exchange: Exchange, child_file: Path) -> int:
    exchange.until(
        lambda: child_file.exists() and child_file.read_text().endswith("\n"),
        "the command is running",
    )
    return int(child_file.read_text())


def test_sigterm_ends_a_running_command_and_leaves_its_message_queued(
    exchange: Exchange,
) -> None:
    child_file = exchange.base / "child"
    listener = exchange.listen("exec-stop", exec_command=_sleeping_command(child_file))
    receipt = exchange.send(listener.address, "hold on", label="sender").receipt()
    child = _child_pid(exchange, child_file)

    sent_at = time.monotonic()
    code = listener.terminate()  # waits at most WAIT_S, well under the command's 30 s
    print(f"SIGTERM to exit: {time.monotonic() - sent_at:.3f} s")

    assert WAIT_S < COMMAND_S
    assert code == 0, listener.stderr()
    letter = exchange.root / "inbox" / listener.address / f"{receipt.message_id}.json"
    assert letter.exists(), "the message being handled was taken"
    assert exchange.queued(listener.address) == 1
    exchange.until(lambda: process_gone(child), "the command's child has ended")
    record = registry.read(exchange.root, listener.address)
    assert record is not None and record.pid is None, "the record is not kept, offline"
    assert listener.stderr() == (
        f"pi-post: listening as {listener.address}\n"
        f"pi-post: stopped; {listener.address} is offline\n"
    )


def test_a_command_past_the_exec_timeout_is_ended_said_and_retried(exchange: Exchange) -> None:
    child_file = exchange.base / "child"
    listener = exchange.listen(
        "exec-timeout", exec_command=_sleeping_command(child_file), exec_timeout="0.5"
    )
    receipt = exchange.send(listener.address, "too slow", label="sender").receipt()
    first = _child_pid(exchange, child_file)
    said = f"pi-post: message {receipt.message_id} stays queued: timed out after 0.5 s;"
    exchange.until(lambda: f"{said} next try in 1 s\n" in listener.stderr(), "the timeout is said")
    exchange.until(lambda: process_gone(first), "the first command's child has ended")
    exchange.until(lambda: f"{said} next try in 2 s\n" in listener.stderr(), "it was retried")

    assert listener.terminate() == 0
    assert exchange.queued(listener.address) == 1
    exchange.until(lambda: process_gone(_child_pid(exchange, child_file)), "no child is left")
