"""Real ``pi-post listen`` processes meeting what a new user runs into: a mailbox
folder the listener may not write (INV-05, INV-06, INV-23) and a second listener
for one session (INV-06, INV-14, INV-15)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipost import registry
from pipost.address import address_of
from pipost.host import POLL_S
from pipost.message import Sender, new_message
from pipost.post import wall_clock_ms
from tests.helpers import (
    deposit,
    give_to_unprivileged,
    unprivileged,
    unprivileged_scratch,
    unprivileged_uid,
)

from .conftest import CLI, Exchange

pytestmark = pytest.mark.exchange

SESSION = "read-only-session"


@pytest.fixture
def unprivileged_exchange() -> Iterator[Exchange]:
    """A post office whose processes run as a user that mode bits bind (CI is root)."""
    with unprivileged_scratch() as base:
        post_office = Exchange(base, command=unprivileged(CLI))
        try:
            yield post_office
        finally:
            post_office.close()


def test_a_listener_whose_mailbox_is_read_only_for_it_enters_nothing_twice_and_says_why(
    unprivileged_exchange: Exchange,
) -> None:
    """The listener (context: standard output) cannot remove what it would enter, so
    it enters nothing until it can, says so once, and then takes the letter once."""
    exchange = unprivileged_exchange
    address = address_of(SESSION)
    message = new_message(Sender("process", "script"), "enter me once", wall_clock_ms())
    deposit(exchange.root, address, message)
    exchange.folder(SESSION)
    give_to_unprivileged(exchange.base)
    inbox = exchange.root / "inbox" / address
    inbox.chmod(0o500)

    listener = exchange.listen(SESSION, wait_live=False)
    exchange.until(lambda: "cannot take mail" in listener.stderr(), "the listener says why")
    time.sleep(2 * POLL_S + 1)  # several drains: the start-up one and two polls

    assert listener.printed_so_far() == []
    assert os.listdir(inbox) == [message.file_name]
    said = (
        f"pi-post: cannot take mail: inbox/{address} is read-only for uid {unprivileged_uid()}: "
        f"chmod u+w {inbox}; its letters stay queued until then\n"
    )
    assert listener.stderr() == said + f"pi-post: listening as {address}\n"  # once
    logged = [json.loads(line) for line in (exchange.root / "log" / "drops.jsonl").open()]
    assert [(entry["letter"], entry["reason"].split(":")[0]) for entry in logged] == [
        (message.file_name, "kept")
    ]

    inbox.chmod(0o700)
    entry = listener.next_json()
    assert (entry["id"], entry["body"]) == (message.id, "enter me once")
    exchange.until(lambda: os.listdir(inbox) == [], "the letter is unlinked")
    assert listener.terminate() == 0
    listener.finish_reading()
    assert listener.printed_so_far() == []
    assert listener.stderr().endswith(f"pi-post: stopped; {address} is offline\n")


def test_a_second_listener_for_a_session_is_refused_naming_the_running_one(
    exchange: Exchange,
) -> None:
    first = exchange.listen("twice")
    record = registry.read(exchange.root, first.address)

    second = exchange.listen("twice", wait_live=False)
    assert second.process.wait(timeout=15) == 1
    assert second.stderr() == (
        f"pi-post: {first.address} already has a listener: pid {first.pid} "
        "(stop it, or pass --also to run this one beside it)\n"
    )
    assert registry.read(exchange.root, first.address) == record, "the record is untouched"
    receipt = exchange.send_to_live(first, "still yours", label="hook")
    assert first.next_json()["id"] == receipt.message_id


def test_with_also_the_record_stays_live_until_the_last_listener_stops(
    exchange: Exchange,
) -> None:
    first = exchange.listen("both")
    second = exchange.listen("both", also=True)  # registers last: the record names it

    assert second.terminate() == 0
    assert second.stderr().endswith(
        f"pi-post: stopped; {second.address} handed to pid {first.pid}\n"
    )
    exchange.wait_live(first)
    receipt = exchange.send_to_live(first, "who is there?", label="hook")
    assert first.next_json()["id"] == receipt.message_id

    assert first.terminate() == 0
    assert first.stderr().endswith(f"pi-post: stopped; {first.address} is offline\n")
    record = registry.read(exchange.root, first.address)
    assert record is not None and record.pid is None


def test_a_listener_killed_with_sigkill_does_not_block_the_next(exchange: Exchange) -> None:
    crashed = exchange.listen("crashing")
    crashed.kill()

    restarted = exchange.listen("crashing")  # waits until it is the live holder
    assert restarted.terminate() == 0
    assert os.listdir(exchange.root / "listeners") == [], "the stale file went, then the folder"


def test_listen_refuses_a_cwd_that_is_not_a_directory(exchange: Exchange, tmp_path: Path) -> None:
    done = exchange.run("listen", "--session-id", "nowhere", "--cwd", str(tmp_path / "absent"))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"pi-post: --cwd must be an existing directory, not '{tmp_path / 'absent'}'\n"
    )
    assert not exchange.root.exists(), "nothing written"
