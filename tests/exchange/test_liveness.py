"""A receiving session that can no longer deliver stops being live (issue 38:
items 3, 13 and 15), run as a user would: real ``pi-post listen`` processes.
"""

from __future__ import annotations

import signal
import subprocess

import pytest

from pipost import registry
from pipost.address import address_of

from .conftest import WAIT_S, Exchange

pytestmark = pytest.mark.exchange


def test_a_listener_whose_output_reader_goes_away_stops_and_leaves_the_mail_queued(
    exchange: Exchange,
) -> None:
    """``pi-post listen | head -1``: once the reader has gone, the next message
    cannot enter. The listener ends, as any command whose reader went away (by
    SIGPIPE), says so, and its record goes offline: the letter waits for the next
    start and later senders are told the truth."""
    session_id = "stream-reader-gone"
    listener = exchange.spawn(
        "listen",
        "--session-id",
        session_id,
        cwd=exchange.folder(session_id),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert listener.stdout is not None and listener.stderr is not None
    address = address_of(session_id)
    exchange.until(lambda: registry.read(exchange.root, address) is not None, "it registers")
    exchange.send(address, "the one head reads")
    first = listener.stdout.readline()
    listener.stdout.close()  # the reader goes away, as head does after its line

    later = exchange.send(address, "after the reader left").receipt()
    code = listener.wait(timeout=WAIT_S)
    stderr = listener.stderr.read()

    assert "the one head reads" in first
    assert code == -signal.SIGPIPE, stderr
    assert (exchange.root / "inbox" / address / f"{later.message_id}.json").exists()
    assert f"message {later.message_id} stays queued" in stderr
    record = registry.read(exchange.root, address)
    assert record is not None and record.pid is None, "the record still says it receives"
