"""The acceptance test: a receiver SIGKILLed at random moments while senders keep
sending loses nothing and delivers nothing twice (INV-04, INV-05, INV-06).

The transcript is the ledger: a message whose line reached it before a crash is
only unlinked on the next start, never entered again. Each sender sends at most
7 messages under a label of its own, so the loop guard (8 per sender in 30 s)
drops nothing and the check can be strict: every accepted message is in the
transcript exactly once.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter

import pytest

from .conftest import Exchange, SendResult, read_transcript

pytestmark = pytest.mark.exchange

SENDERS = 6
MESSAGES_PER_SENDER = 7
SESSION_ID = "sigkill-receiver"


def test_a_receiver_killed_at_random_moments_takes_every_message_exactly_once(
    exchange: Exchange,
) -> None:
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    transcript = exchange.base / "receiver.jsonl"
    listener = exchange.listen(SESSION_ID, transcript=transcript)
    address = listener.address

    sent: list[tuple[str, SendResult]] = []
    sent_lock = threading.Lock()

    def sender(index: int) -> None:
        pacing = random.Random(seed + index + 1)
        for k in range(MESSAGES_PER_SENDER):
            body = f"msg {index * MESSAGES_PER_SENDER + k + 1}"
            result = exchange.send(address, body, label=f"sender-{index}")
            with sent_lock:
                sent.append((body, result))
            time.sleep(pacing.uniform(0.0, 0.3))

    senders = [threading.Thread(target=sender, args=(i,), daemon=True) for i in range(SENDERS)]
    for thread in senders:
        thread.start()

    kills = rng.randint(6, 10)
    for _ in range(kills):
        time.sleep(rng.uniform(0.05, 0.4))
        listener.kill()
        # The next kill lands 50-400 ms after the record is live: during the
        # start-up drain or while serving.
        listener = exchange.listen(SESSION_ID, transcript=transcript)

    for thread in senders:
        thread.join(timeout=60)
        assert not thread.is_alive(), "a sender did not finish"

    # The last restart comes after every sender is done: it must collect the rest.
    listener.kill()
    listener = exchange.listen(SESSION_ID, transcript=transcript)
    exchange.until(lambda: exchange.queued(address) == 0, "the mailbox is empty")
    assert listener.terminate() == 0, listener.stderr()

    accepted = {}
    outcomes: Counter[str] = Counter()
    for body, result in sent:
        receipt = result.receipt()  # every send succeeded and printed one receipt
        assert receipt.address == address
        accepted[receipt.message_id] = body
        outcomes[receipt.outcome] += 1
    entries = read_transcript(transcript)
    ids = Counter(str(entry["id"]) for entry in entries)
    bodies = Counter(str(entry["body"]) for entry in entries)
    duplicates = sum(n - 1 for n in ids.values()) + sum(n - 1 for n in bodies.values())
    print(
        f"seed {seed}: {kills + 1} kills, {len(sent)} messages sent "
        f"({outcomes['delivered']} delivered, {outcomes['queued']} queued), "
        f"{len(entries)} transcript entries, {duplicates} duplicates"
    )

    assert len(accepted) == SENDERS * MESSAGES_PER_SENDER
    assert duplicates == 0
    assert {str(entry["id"]): entry["body"] for entry in entries} == accepted
    assert exchange.queued(address) == 0
    assert exchange.drops() == []
    assert exchange.set_aside() == []


def test_a_letter_that_entered_before_a_crash_is_only_unlinked_on_restart(
    exchange: Exchange,
) -> None:
    """The crash window the random kills rarely hit, laid out on disk: the line is
    in the transcript, the letter is still in the inbox."""
    transcript = exchange.base / "receiver.jsonl"
    listener = exchange.listen(SESSION_ID, transcript=transcript)
    assert listener.terminate() == 0
    receipt = exchange.send(listener.address, "entered once", label="sender").receipt()
    assert receipt.outcome == "queued"
    letter = exchange.root / "inbox" / listener.address / f"{receipt.message_id}.json"
    unlinked_by_the_crash = letter.read_bytes()

    first = exchange.listen(SESSION_ID, transcript=transcript)
    exchange.until(lambda: exchange.queued(first.address) == 0, "the letter is taken")
    assert first.terminate() == 0
    letter.write_bytes(unlinked_by_the_crash)

    second = exchange.listen(SESSION_ID, transcript=transcript)
    exchange.until(lambda: exchange.queued(second.address) == 0, "the letter is unlinked")
    assert second.terminate() == 0

    assert [entry["id"] for entry in read_transcript(transcript)] == [receipt.message_id]
    assert exchange.drops() == []


def test_a_transcript_line_torn_by_a_crash_is_cut_and_the_letter_entered_whole(
    exchange: Exchange,
) -> None:
    transcript = exchange.base / "receiver.jsonl"
    listener = exchange.listen(SESSION_ID, transcript=transcript)
    earlier = exchange.send(listener.address, "before the crash", label="sender").receipt()
    exchange.until(lambda: exchange.queued(listener.address) == 0, "the letter is taken")
    assert listener.terminate() == 0
    torn = exchange.send(listener.address, "torn by the crash", label="sender").receipt()
    assert torn.outcome == "queued"
    with open(transcript, "a", encoding="utf-8") as crashed_write:
        crashed_write.write(f'{{"id": "{torn.message_id}", "from": {{"ki')

    restarted = exchange.listen(SESSION_ID, transcript=transcript)
    exchange.until(lambda: exchange.queued(restarted.address) == 0, "the letter is taken")
    assert restarted.terminate() == 0

    entries = read_transcript(transcript)
    assert [(e["id"], e["body"]) for e in entries] == [
        (earlier.message_id, "before the crash"),
        (torn.message_id, "torn by the crash"),
    ]
