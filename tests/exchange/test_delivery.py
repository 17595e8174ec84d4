"""Delivery between real processes: the sender learns the truth (INV-11), mail
waits for a stopped session and is collected on restart (INV-04, INV-14), the
resume and inbound modes come from the listener's environment (INV-20), and two
receivers on one address never both take a message (INV-06)."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from pipost import registry

from .conftest import WAIT_S, Exchange, Listener, SendResult, read_transcript

pytestmark = pytest.mark.exchange


def test_a_send_to_a_live_listener_is_delivered_into_its_context(exchange: Exchange) -> None:
    listener = exchange.listen("live-one")

    receipt = exchange.send_to_live(listener, "are you there?", label="hook")

    entry = listener.next_json()
    assert (entry["id"], entry["body"], entry["wake"]) == (
        receipt.message_id,
        "are you there?",
        True,
    )
    assert entry["from"]["name"] == "hook"
    assert exchange.queued(listener.address) == 0


def test_mail_for_a_stopped_listener_is_queued_and_collected_when_it_restarts(
    exchange: Exchange,
) -> None:
    listener = exchange.listen("resumer")
    assert listener.terminate() == 0
    record = registry.read(exchange.root, listener.address)
    assert record is not None and record.pid is None  # offline, and the record kept

    result = exchange.send(listener.address, "review PR 12 when back", label="hook")

    assert result.returncode == 0, result.stderr
    receipt = result.receipt()
    assert result.stdout == f"queued {listener.address} {receipt.message_id}\n"
    assert exchange.queued(listener.address) == 1
    restarted = exchange.listen("resumer")
    entry = restarted.next_json()
    assert (entry["id"], entry["body"], entry["wake"]) == (
        receipt.message_id,
        "review PR 12 when back",
        True,
    )
    exchange.until(lambda: exchange.queued(listener.address) == 0, "the letter is unlinked")


def test_with_resume_stage_start_up_mail_waits_for_the_first_prompt(exchange: Exchange) -> None:
    stage = {"PI_POST_RESUME": "stage"}
    listener = exchange.listen("stager", env=stage)
    assert listener.terminate() == 0
    waiting = exchange.send(listener.address, "found at start-up", label="hook").receipt()
    assert waiting.outcome == "queued"

    restarted = exchange.listen("stager", env=stage)
    at_start = restarted.next_json()
    live = exchange.send_to_live(restarted, "arrived while running", label="hook")
    while_running = restarted.next_json()

    assert (at_start["id"], at_start["wake"]) == (waiting.message_id, False)
    assert (while_running["id"], while_running["wake"]) == (live.message_id, True)


def test_a_listener_started_with_inbound_refuse_drops_mail_and_pi_post_log_says_why(
    exchange: Exchange,
) -> None:
    """The mode comes from the listener's environment; the drop log names the letter,
    its sender and the reason, never the body (INV-05, INV-20)."""
    listener = exchange.listen("refuser", env={"PI_POST_INBOUND": "refuse"})

    receipt = exchange.send(listener.address, "the-secret-body-0815", label="cli-user").receipt()

    exchange.until(lambda: exchange.queued(listener.address) == 0, "the letter is dropped")
    assert listener.terminate() == 0
    listener.finish_reading()
    assert listener.printed_so_far() == [], "a refused message entered the context"
    shown = exchange.run("log")
    assert shown.returncode == 0, shown.stderr
    [line] = shown.stdout.splitlines()
    assert line.endswith(
        f" {listener.address} {receipt.message_id}.json from cli-user: "
        "refused: PI_POST_INBOUND=refuse"
    ), line
    assert "the-secret-body-0815" not in shown.stdout


SENDERS = 4
MESSAGES_PER_SENDER = 10


def test_two_listeners_on_one_address_take_every_message_exactly_once(
    exchange: Exchange,
) -> None:
    """The same conversation open twice: both claim from one mailbox while four
    senders deposit concurrently."""
    transcripts = [exchange.base / "first.jsonl", exchange.base / "second.jsonl"]
    listeners = [exchange.listen("twin", transcript=path, also=True) for path in transcripts]
    address = listeners[0].address
    sent: list[tuple[str, SendResult]] = []
    lock = threading.Lock()

    def sender(index: int) -> None:
        for k in range(MESSAGES_PER_SENDER):
            body = f"msg {index * MESSAGES_PER_SENDER + k + 1}"
            # Two labels per sender keep each under the guard's 8 per 30 s, so that
            # nothing is dropped and the check below can be strict.
            result = exchange.send(address, body, label=f"sender-{index}-{k % 2}")
            with lock:
                sent.append((body, result))

    threads = [threading.Thread(target=sender, args=(i,), daemon=True) for i in range(SENDERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive(), "a sender did not finish"
    exchange.until(lambda: exchange.queued(address) == 0, "the mailbox is empty")
    for listener in listeners:
        assert listener.terminate() == 0, listener.stderr()

    accepted = sorted((result.receipt().message_id, body) for body, result in sent)
    taken = [[(e["id"], e["body"]) for e in read_transcript(path)] for path in transcripts]
    print(f"{len(accepted)} messages: {len(taken[0])} and {len(taken[1])} taken by each listener")
    everything = taken[0] + taken[1]
    assert len(everything) == len(set(everything))
    assert sorted(everything) == accepted
    assert len(accepted) == SENDERS * MESSAGES_PER_SENDER
    assert exchange.drops() == []


def test_when_one_of_two_listeners_on_an_address_stops_the_other_keeps_it_live(
    exchange: Exchange,
) -> None:
    """Shutdown marks the record offline only when the record is its own: the
    conversation is still open in the other process."""
    first = exchange.listen("twin")
    second = exchange.listen("twin", also=True)  # registers last: the record names it
    assert first.terminate() == 0

    exchange.wait_live(second)  # the record names the one still running
    receipt = exchange.send_to_live(second, "still there?", label="hook")
    assert second.next_json()["id"] == receipt.message_id


def test_a_listener_whose_standard_error_is_gone_goes_on_taking_mail(
    exchange: Exchange,
) -> None:
    """Its reports are for a person; a closed stderr (the terminal it started in has
    gone) must not stop it receiving (INV-23)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # every line it says now fails with EPIPE
    try:
        with open(write_end, "wb", closefd=False) as stderr:
            process = exchange.spawn(
                "listen",
                "--session-id",
                "no-stderr",
                cwd=exchange.folder("no-stderr"),
                stderr=stderr,
            )
    finally:
        os.close(write_end)
    nothing_said = exchange.base / "closed.stderr"  # what a reader of that stderr got
    nothing_said.touch()
    listener = Listener("no-stderr", process, nothing_said, stream=True)
    exchange.wait_live(listener)

    receipt = exchange.send_to_live(listener, "still there?")

    assert listener.next_json()["id"] == receipt.message_id
    assert process.poll() is None
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=WAIT_S) == 0
