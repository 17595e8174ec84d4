"""Nothing blocks without limit, with real processes (issue 38, items 5, 7, 11, 12;
INV-10, INV-23): a socket or a device node named like a letter, a FIFO standing
at the drop log, a sender and a listener frozen (SIGSTOP) while they hold a lock.

Before, a socket in front of a good letter made ``pi-post peek`` exit 1 and the
listener exit at every start; a FIFO at ``log/drops.jsonl`` blocked the listener
in open() for ever; a frozen holder of a mailbox's lock blocked every send to it,
and of the drop log's lock a listener, which then ignored SIGTERM.

The lock tests wait out pipost's real bound (files.LOCK_WAIT_S, 5 s) once each:
the processes are pipost's own, with nothing to shorten it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from pipost import droplog, files, registry
from pipost.address import address_of
from tests.helpers import (
    driverless_device,
    frozen_holder,
    log_drop,
    unix_socket,
)

from .conftest import WAIT_S, Exchange

pytestmark = pytest.mark.exchange

SESSION = "bounded-waits"
ADDRESS = address_of(SESSION)
FIRST = "0000000000001-00000000.json"
"""A name that sorts before any letter sent now: the bad one stands in front."""


def mailbox_of(exchange: Exchange) -> Path:
    with files.make(exchange.root, "inbox", ADDRESS):
        return exchange.root / "inbox" / ADDRESS


def malformed_in_front(exchange: Exchange) -> Path:
    path = mailbox_of(exchange) / FIRST
    path.write_bytes(b"{")
    return path


def lines_naming(text: str, what: str) -> list[str]:
    return [line for line in text.splitlines() if what in line]


def claimed_by(pid: int, path: Path) -> bool:
    """Whether process ``pid`` holds a lock on the file at ``path`` (a claim)."""
    info = os.stat(path)
    with open(files.LOCKS_TABLE) as table:
        holders = files.holders_in(
            table.read(), os.major(info.st_dev), os.minor(info.st_dev), info.st_ino
        )
    return pid in holders


@pytest.mark.parametrize(
    "lay",
    [
        pytest.param(lambda path: unix_socket(path).close(), id="socket"),
        pytest.param(driverless_device, id="device"),
    ],
)
def test_what_cannot_be_opened_in_front_of_a_letter_stops_neither_peek_nor_the_listener(
    exchange: Exchange, lay: Callable[[Path], object]
) -> None:
    bad = mailbox_of(exchange) / FIRST
    lay(bad)
    sent = exchange.send(ADDRESS, "behind the thing that is no file").receipt()

    peeked = exchange.run("peek", ADDRESS)
    assert peeked.returncode == 0, peeked.stderr
    assert f"(not a message: {FIRST} — not a regular file)" in peeked.stdout
    assert "behind the thing that is no file" in peeked.stdout

    listener = exchange.listen(SESSION)
    assert listener.next_json()["id"] == sent.message_id
    kept = exchange.root / "quarantine" / ADDRESS / FIRST
    exchange.until(lambda: os.path.lexists(kept), "the bad one is set aside")
    assert stat.S_IFMT(os.lstat(kept).st_mode) in (stat.S_IFSOCK, stat.S_IFCHR)
    assert [(d.letter, d.reason) for d in exchange.drops()] == [
        (FIRST, "malformed: not a regular file")
    ]
    assert listener.terminate() == 0, listener.stderr()


def test_a_fifo_at_the_drop_log_stops_neither_the_listener_nor_the_mail_behind(
    exchange: Exchange,
) -> None:
    bad = malformed_in_front(exchange)
    with files.make(exchange.root, "log"):
        os.mkfifo(droplog.log_path(exchange.root), 0o600)
    sent = exchange.send(ADDRESS, "behind the malformed one").receipt()

    listener = exchange.listen(SESSION)
    try:
        assert listener.next_json()["id"] == sent.message_id
        exchange.until(lambda: "listening as" in listener.stderr(), "it says it listens")
    finally:  # a listener blocked in open() is freed by a reader
        os.close(os.open(droplog.log_path(exchange.root), os.O_RDONLY | os.O_NONBLOCK))
    assert listener.terminate() == 0, listener.stderr()

    said = lines_naming(listener.stderr(), droplog.log_path(exchange.root))
    assert len(said) == 1, listener.stderr()
    assert "not a regular file" in said[0]
    assert bad.read_bytes() == b"{", "the letter that needs the log stays queued"
    assert stat.S_ISFIFO(os.lstat(droplog.log_path(exchange.root)).st_mode)


def test_a_send_to_a_mailbox_a_frozen_sender_holds_fails_after_the_bound_naming_it(
    exchange: Exchange,
) -> None:
    folder = mailbox_of(exchange)
    with frozen_holder(folder) as pid:
        sent = exchange.send(ADDRESS, "waits for no frozen sender")
    assert sent.returncode == 1
    assert sent.stdout == ""
    assert sent.stderr.startswith(f"pi-post: cannot write to mailbox {ADDRESS} ({folder}): ")
    assert f"locked by pid {pid} for more than {files.LOCK_WAIT_S:g} s" in sent.stderr
    assert os.listdir(folder) == [], "something was written"


def test_a_drop_log_a_frozen_listener_holds_delays_the_mail_by_the_bound_and_sigterm_ends_it(
    exchange: Exchange,
) -> None:
    bad = malformed_in_front(exchange)
    log_drop(exchange.root, droplog.Drop(1, "s-000000000000", "x.json", "?", "malformed: x"))
    log = Path(droplog.log_path(exchange.root))
    sent = exchange.send(ADDRESS, "behind the malformed one").receipt()

    with frozen_holder(log) as holder:
        listener = exchange.listen(SESSION)
        assert listener.next_json(timeout=WAIT_S + files.LOCK_WAIT_S)["id"] == sent.message_id
        said = lines_naming(listener.stderr(), str(log))
        assert len(said) == 1, listener.stderr()
        assert f"locked by pid {holder} " in said[0]
        # Its next try of the bad letter waits for the log again: stop it there.
        exchange.until(lambda: claimed_by(listener.pid, bad), "it tries the bad letter again")
        assert listener.terminate() == 0, listener.stderr()  # within WAIT_S
        assert "stopped;" in listener.stderr()

    assert bad.read_bytes() == b"{", "the letter that needs the log stays queued"
    assert [d.letter for d in droplog.read(exchange.root)] == ["x.json"]
    record = registry.read(exchange.root, ADDRESS)
    assert record is not None and record.pid is None, "it did not shut down in order"
