"""Sweeps beside running listeners, as a user meets them (issue 38, items 4 and 14;
SPEC 5, INV-17, INV-23): real ``pi-post listen``, ``pi-post sweep`` and ``pi-post
send`` processes over one post office."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipost import listeners, registry, session
from pipost.address import address_of
from pipost.post import wall_clock_ms
from pipost.registry import OsProcessTable
from pipost.session import Presence, Record
from tests.exchange.conftest import WAIT_S, Exchange, tmpfs
from tests.helpers import DAY_MS, waiters_on_lock, waits_on_lock, write_record


@pytest.fixture
def read_only_registry(exchange: Exchange) -> Iterator[Path]:
    """The registry folder on a file system mounted read-only (a tmpfs): no record
    can be written there, by anyone, root included."""
    folder = exchange.root / "registry"
    folder.mkdir(parents=True, mode=0o700)
    exchange.root.chmod(0o700)
    with tmpfs(folder, "ro"):
        yield folder


def test_a_sweep_keeps_the_mailbox_of_a_listener_whose_registry_is_read_only(
    exchange: Exchange, read_only_registry: Path
) -> None:
    """Item 14: the listener runs without a record (INV-23); a sweep came and removed
    its empty mailbox, and the next send to its address was refused as unknown.
    Now the sweep keeps it, and the send is delivered."""
    listener = exchange.listen("sess-read-only-registry", wait_live=False)
    exchange.until(
        lambda: listeners.running(exchange.root, listener.address) == [listener.pid],
        "the listener joined listeners/",
    )
    exchange.until(lambda: "cannot write the record" in listener.stderr(), "it said so")

    swept = exchange.run("sweep")
    sent = exchange.send(listener.address, "are you there?")

    assert swept.returncode == 0, swept.stderr
    assert "removed" not in swept.stdout, swept.stdout
    assert (exchange.root / "inbox" / listener.address).is_dir()
    assert sent.returncode == 0, sent.stderr
    assert listener.next_json()["body"] == "are you there?"


needs_proc_locks = pytest.mark.skipif(
    not os.path.exists("/proc/locks"), reason="sees who waits for a lock in /proc/locks (Linux)"
)


@needs_proc_locks
def test_a_listener_starting_while_a_sweep_waits_keeps_its_record_and_mailbox(
    exchange: Exchange,
) -> None:
    """Item 4: ``pi-post sweep`` has found the 8-day-old record and waits for the
    mailbox's lock (held here, as a sender holds it); ``pi-post listen`` starts for
    that session meanwhile. The sweep removed the fresh record and the mailbox, and
    sends by name and address were refused until the next heartbeat. Now both
    stay, and sends by name and address are delivered."""
    session_id = "sess-comes-back"
    address = address_of(session_id)
    cwd = exchange.folder(session_id)
    now = wall_clock_ms()
    write_record(
        exchange.root,
        Record(address, session_id, "comes-back", str(cwd), now - 8 * DAY_MS, now - 8 * DAY_MS),
    )
    inbox = exchange.root / "inbox" / address
    inbox.mkdir(parents=True)
    for folder in (inbox, inbox.parent, exchange.root):
        folder.chmod(0o700)

    held = os.open(inbox, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        sweep = exchange.spawn("sweep")
        exchange.until(lambda: waits_on_lock(inbox), "the sweep waits for the mailbox")
        listener = exchange.listen(session_id, cwd=cwd, wait_live=False)

        def registered_or_waiting() -> bool:
            record = registry.read(exchange.root, address)
            return (record is not None and record.pid == listener.pid) or waiters_on_lock(
                inbox
            ) >= 2

        exchange.until(registered_or_waiting, "the listener registered or waits for the lock")
    finally:
        os.close(held)  # the lock goes with it
    out, err = sweep.communicate(timeout=WAIT_S)
    exchange.wait_live(listener)
    by_name = exchange.send(f"{session_id}-{address[2:6]}", "welcome back")  # its default name
    by_address = exchange.send(address, "and again")

    assert sweep.returncode == 0, err
    assert "removed" not in out, out
    assert inbox.is_dir()
    record = registry.read(exchange.root, address)
    assert record is not None and record.pid == listener.pid
    assert session.presence(record, wall_clock_ms(), OsProcessTable()) is Presence.LIVE
    for sent in (by_name, by_address):
        assert sent.returncode == 0, sent.stderr
    assert [listener.next_json()["body"] for _ in range(2)] == ["welcome back", "and again"]
