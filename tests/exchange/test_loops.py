"""Loops are bounded in rate (INV-18): two sessions that answer every message
they get, each reply a real ``pi-post send`` run by ``listen --exec``.

Each exec command writes one line per delivery to a log of its own (when, and
from which sender) before it replies in the background, so the assertions read
what entered each context, not how long anything took.
"""

from __future__ import annotations

import shlex
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipost import droplog

from .conftest import Exchange, Listener

pytestmark = pytest.mark.exchange

CLI = shlex.join([sys.executable, "-m", "pipost"])
# SPEC 6, stated here rather than imported so that the test checks the spec.
RATE_LIMIT = 8
RATE_WINDOW_MS = 30_000
SETTLE_S = 2.0
"""An exchange counts as ended once nothing entered any context for this long."""


@dataclass(frozen=True)
class Entry:
    at_ms: int
    sender: str


def _answering(exchange: Exchange, name: str, body: str) -> tuple[Listener, Path]:
    """A session that logs every delivery and answers it with ``body`` (shell text)."""
    log = exchange.base / f"{name}.deliveries"
    log.touch()
    command = (
        f'printf "%s\\t%s\\n" "$(date +%s%3N)" "$PI_POST_MESSAGE_FROM"'
        f" >> {shlex.quote(str(log))}; "
        f'{CLI} send --to "$PI_POST_MESSAGE_REPLY_TO" --body "{body}" >/dev/null 2>&1 &'
    )
    listener = exchange.listen(name, exec_command=command, cwd=exchange.folder(f"{name}-project"))
    return listener, log


def _entries(log: Path) -> list[Entry]:
    entries = []
    for line in log.read_text().splitlines():
        at_ms, sender = line.split("\t")
        entries.append(Entry(int(at_ms), sender))
    return entries


def _settle(exchange: Exchange, listeners: list[Listener], logs: list[Path]) -> None:
    """Until the guard dropped something and then nothing entered any context, no
    drop was logged and no mail waited for SETTLE_S (bounded): the exchange ended
    by itself. A loop that never ends fails here."""
    drops = Path(droplog.log_path(exchange.root))
    exchange.until(drops.exists, "the guard drops a message", timeout=30)
    last: list[int] = []
    changed_at = time.monotonic()

    def quiet() -> bool:
        nonlocal last, changed_at
        queued = [exchange.queued(listener.address) for listener in listeners]
        state = [p.stat().st_size for p in [*logs, drops]] + queued
        if state != last:
            last, changed_at = state, time.monotonic()
        return time.monotonic() - changed_at >= SETTLE_S and not any(queued)

    exchange.until(quiet, "the exchange ends by itself", timeout=30)
    for listener in listeners:
        assert listener.terminate() == 0, listener.stderr()


def test_identical_echoes_stop_at_once(exchange: Exchange) -> None:
    ping, ping_log = _answering(exchange, "ping", "got it")
    pong, pong_log = _answering(exchange, "pong", "got it")

    exchange.send(pong.address, "got it", label="kick", reply_to=ping.address).receipt()
    _settle(exchange, [ping, pong], [ping_log, pong_log])

    entered = Counter(("ping", e.sender) for e in _entries(ping_log))
    entered += Counter(("pong", e.sender) for e in _entries(pong_log))
    # kick -> pong -> ping -> pong, and the next "got it" from pong to ping is the
    # same body from the same sender within 10 s: dropped, nothing answers it.
    assert entered == {
        ("pong", "kick"): 1,
        ("ping", "process:pong-project"): 1,
        ("pong", "process:ping-project"): 1,
    }
    drops = exchange.drops()
    assert [(d.address, d.sender) for d in drops] == [(ping.address, "process:pong-project")]
    assert drops[0].reason.startswith("duplicate")


def test_replies_with_a_changing_body_are_bounded_by_the_rate_cap(exchange: Exchange) -> None:
    counter = "n=$(date +%s%N)"
    ping, ping_log = _answering(exchange, "ping", counter)
    pong, pong_log = _answering(exchange, "pong", counter)

    exchange.send(pong.address, "n=0", label="kick", reply_to=ping.address).receipt()
    _settle(exchange, [ping, pong], [ping_log, pong_log])

    by_receiver = {ping.address: _entries(ping_log), pong.address: _entries(pong_log)}
    print({address: len(entries) for address, entries in by_receiver.items()})
    for entries in by_receiver.values():
        for sender in {e.sender for e in entries}:
            times = sorted(e.at_ms for e in entries if e.sender == sender)
            busiest = max(
                sum(1 for t in times if start <= t < start + RATE_WINDOW_MS) for start in times
            )
            assert busiest <= RATE_LIMIT, f"{sender}: {busiest} deliveries in one window"
    drops = exchange.drops()
    assert drops, "the guard never cut the loop"
    assert all(d.reason.startswith("rate") for d in drops), drops
    # The cap cut in at the limit, not before it: the dropped sender had exactly
    # RATE_LIMIT deliveries at that receiver in the window before the drop.
    for drop in drops:
        recent = [
            e
            for e in by_receiver[drop.address]
            if e.sender == drop.sender and drop.at - RATE_WINDOW_MS < e.at_ms <= drop.at
        ]
        assert len(recent) == RATE_LIMIT
