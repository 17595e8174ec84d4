"""The receiving session: where "delivered" is decided (SPEC 3, 6, 7; INV-05, INV-06,
INV-07, INV-11, INV-14, INV-15, INV-18, INV-20, INV-23).

Real Host objects over a tmp root; only the context (where delivered text goes) is
a test double, and the backoff's monotonic clock where a test must move it.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import shutil
import signal
import sys
import threading
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pipost import (
    cli,
    droplog,
    files,
    format,
    host,
    listeners,
    mailbox,
    quarantine,
    registry,
    session,
    watch,
)
from pipost.address import address_of
from pipost.driver import InProcessDriver
from pipost.host import Delivery, ExecContext, Host, StreamContext, TranscriptContext
from pipost.message import READABLE_VERSIONS, Message, Sender, new_message, to_json
from pipost.message import rules_of as message_rules
from pipost.policy import Inbound, Resume, inbound_mode
from pipost.post import Post, os_caller
from pipost.reception import RECEIPTED, Action, Outcome
from pipost.registry import OsProcessTable
from pipost.session import Presence
from tests import helpers
from tests.helpers import (
    NOW,
    FailingUnlinks,
    FakeProcessTable,
    FixedClock,
    Opened,
    entered_count,
    process_gone,
    tree_snapshot,
)

SESSION = "receiver-session"
ADDRESS = address_of(SESSION)
SECOND_MS = 1000


# -- contexts the tests control --------------------------------------------------------


class Recording:
    """Takes every delivery. With a ledger it can say which ids it holds, as a
    transcript can; without one it cannot (holds() is None), as a command cannot."""

    def __init__(self, *, ledger: bool = True) -> None:
        self.ledger = ledger
        self.deliveries: list[Delivery] = []
        self._lock = threading.Lock()

    def holds(self, message_id: str) -> bool | None:
        if not self.ledger:
            return None
        return message_id in self.ids

    def enter(self, delivery: Delivery) -> bool:
        with self._lock:
            self.deliveries.append(delivery)
        return True

    @property
    def ids(self) -> list[str]:
        with self._lock:
            return [d.message.id for d in self.deliveries]


class FailsThenTakes(Recording):
    """Refuses the first ``failures`` attempts (a busy model, a full disk), then takes."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures_left = failures
        self.attempts = 0

    def enter(self, delivery: Delivery) -> bool:
        self.attempts += 1
        if self.failures_left > 0:
            self.failures_left -= 1
            return False
        return super().enter(delivery)


class Raises:
    """A context with a bug: every entry raises."""

    def __init__(self) -> None:
        self.attempts = 0

    def holds(self, message_id: str) -> bool | None:
        return None

    def enter(self, delivery: Delivery) -> bool:
        self.attempts += 1
        raise RuntimeError("the context broke")


class SteppedTime:
    """The host's monotonic clock (``Host.monotonic``): backoff moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


# -- building blocks ------------------------------------------------------------------


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "post"


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(NOW)


@pytest.fixture
def post(root: Path, clock: FixedClock) -> Post:
    return Post(root, clock=clock)


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[Callable[..., Host]]:
    """Builds hosts on SESSION's address and stops every one at the end."""
    made: list[Host] = []

    def make(post: Post, context: host.Context, **options: Any) -> Host:
        receiver = Host(post, SESSION, str(tmp_path), context, **options)
        made.append(receiver)
        return receiver

    yield make
    for receiver in made:
        receiver.request_stop()
        receiver.stop()


def deposit(
    root: Path, body: str, sent_at: int, *, sender: str = "script", reply_to: str | None = None
) -> Message:
    message = new_message(Sender("process", sender), body, sent_at, reply_to=reply_to)
    helpers.deposit(root, ADDRESS, message)
    return message


def queued(root: Path) -> list[str]:
    return mailbox.letter_names(root, ADDRESS)


def drops(root: Path) -> list[droplog.Drop]:
    return list(droplog.read(root))


def serving(receiver: Host) -> threading.Thread:
    thread = threading.Thread(target=receiver.serve, daemon=True)
    thread.start()
    return thread


def halt(receiver: Host, thread: threading.Thread) -> None:
    receiver.request_stop()
    thread.join(timeout=10)
    assert not thread.is_alive(), "the host did not stop when asked"


def eventually(condition: Callable[[], bool], seconds: float = 10.0) -> bool:
    """Polls ``condition`` until it holds or ``seconds`` pass; returns the last answer."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return condition()
        time.sleep(0.01)
    return True


# -- INV-05: nothing is lost ----------------------------------------------------------


def test_a_failing_context_keeps_the_letter_and_is_retried_with_backoff(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    steps = SteppedTime()
    context = FailsThenTakes(failures=2)
    receiver = hosts(post, context, monotonic=steps.monotonic)
    message = deposit(root, "please rebase", NOW)

    receiver.start()
    assert context.attempts == 1
    assert queued(root) == [message.file_name]

    receiver.drain()  # within the first second: not tried again
    assert context.attempts == 1

    steps.now += host.RETRY_FIRST_S
    receiver.drain()
    assert context.attempts == 2
    assert queued(root) == [message.file_name]

    steps.now += host.RETRY_FIRST_S  # the delay doubled: still too early
    receiver.drain()
    assert context.attempts == 2

    steps.now += host.RETRY_FIRST_S
    assert entered_count(receiver.drain()) == 1
    assert context.ids == [message.id]
    assert queued(root) == []
    assert receiver.stats.failed_entries == 2


def test_a_context_that_declines_without_saying_why_is_retried_and_nothing_is_said(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    """enter() returning False gives no reason: the outcome has none, and the session
    has nothing to tell (it says a reason only when the context gave one)."""
    steps = SteppedTime()
    said: list[str] = []
    receiver = hosts(post, FailsThenTakes(failures=1), say=said.append, monotonic=steps.monotonic)
    receiver.start()
    message = deposit(root, "not now", NOW)

    assert receiver.drain() == [Outcome(message.file_name, Action.FAILED, None, message.id)]
    assert said == []
    assert queued(root) == [message.file_name]


def test_a_letter_waiting_for_its_retry_does_not_hold_up_the_letters_after_it(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    class RefusesTheFirst(Recording):
        def enter(self, delivery: Delivery) -> bool:
            return delivery.message.body != "refused" and super().enter(delivery)

    steps = SteppedTime()
    context = RefusesTheFirst()
    receiver = hosts(post, context, monotonic=steps.monotonic)
    refused = deposit(root, "refused", NOW, sender="first")
    receiver.start()  # its next try is a second away
    later = deposit(root, "behind it", NOW + 1, sender="second")

    assert receiver.drain() == [Outcome(later.file_name, Action.ENTER, None, later.id)]
    assert context.ids == [later.id]
    assert queued(root) == [refused.file_name]


def test_a_raising_context_never_loses_mail(
    root: Path, post: Post, hosts: Callable[..., Host], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(host, "RETRY_FIRST_S", 0.0)
    broken = Raises()
    receiver = hosts(post, broken)
    letters = [deposit(root, f"note {n}", NOW + n, sender=f"s{n}") for n in range(3)]

    receiver.start()
    receiver.drain()
    assert broken.attempts == 6
    assert queued(root) == [m.file_name for m in letters]
    assert receiver.stats.failed_entries == 6

    repaired = Recording()
    receiver.context = repaired
    receiver.drain()
    assert repaired.ids == [m.id for m in letters]
    assert queued(root) == []


def _dropped_before_the_unlink(
    root: Path, receiver: Host, message: Message, reason_starts: str
) -> None:
    """Host.take drops the letter, logged, and leaves it at its name for the receipt
    drain() does next: the drop is logged before the unlink (INV-05), without the
    body."""
    claim = helpers.claim_named(root, ADDRESS, message.file_name)
    assert claim is not None
    assert receiver.take(claim).action is Action.DROP
    logged = [d for d in drops(root) if d.letter == message.file_name]
    assert message.file_name in queued(root), "logged while the letter is still queued"
    claim.dispose()  # the receipt
    assert len(logged) == 1
    assert logged[0].reason.startswith(reason_starts)
    assert logged[0].sender == message.sender.key
    assert logged[0].address == ADDRESS
    assert message.body.encode() not in Path(droplog.log_path(root)).read_bytes()


def test_a_refused_letter_is_logged_without_its_body_before_the_unlink(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    context = Recording()
    receiver = hosts(post, context, inbound=Inbound.REFUSE)
    receiver.start()
    message = deposit(root, "secret-body-7f3a refused", NOW)

    _dropped_before_the_unlink(root, receiver, message, "refused")

    assert context.ids == []
    assert receiver.stats.dropped == 1


def test_a_duplicate_is_logged_without_its_body_before_the_unlink(
    root: Path, post: Post, clock: FixedClock, hosts: Callable[..., Host]
) -> None:
    context = Recording()
    receiver = hosts(post, context)
    receiver.start()
    first = deposit(root, "secret-body-91c2 echo", clock.now)
    receiver.drain()
    clock.now += 2 * SECOND_MS
    echo = deposit(root, "secret-body-91c2 echo", clock.now)

    _dropped_before_the_unlink(root, receiver, echo, "duplicate")

    assert context.ids == [first.id]


def test_a_letter_over_the_rate_is_logged_without_its_body_before_the_unlink(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    context = Recording()
    receiver = hosts(post, context)
    letters = [deposit(root, f"secret-body-b0d4 number {n}", NOW + n) for n in range(8)]
    receiver.start()
    over = deposit(root, "secret-body-b0d4 number 8", NOW + 8)

    _dropped_before_the_unlink(root, receiver, over, "rate")

    assert context.ids == [m.id for m in letters]


def test_a_malformed_letter_is_set_aside_and_later_letters_are_delivered(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    context = Recording()
    receiver = hosts(post, context)
    bad_name = f"{NOW - 5:013d}-0badc0de.json"  # sorts first: it must not block the rest
    inbox = Path(mailbox.inbox_of(root, ADDRESS))
    inbox.mkdir(parents=True)
    (inbox / bad_name).write_bytes(b'{"v": 1, "id": "torn')
    letters = [deposit(root, f"good {n}", NOW + n) for n in range(2)]

    receiver.start()

    assert context.ids == [m.id for m in letters]
    assert queued(root) == []
    aside = Path(quarantine.quarantine_of(root, ADDRESS))
    assert (aside / bad_name).read_bytes() == b'{"v": 1, "id": "torn'
    assert (aside / (bad_name + ".reason")).read_text().startswith("not JSON")
    assert [(d.letter, d.reason.split(":")[0]) for d in drops(root)] == [(bad_name, "malformed")]
    assert receiver.stats.set_aside == 1


def test_a_letter_named_with_255_bytes_is_set_aside_and_logged_once(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    """Its name leaves no room for ``.reason``: it is still moved (under a head of its
    name), logged once, not again at every try while it never moves."""
    steps = SteppedTime()
    context = Recording()
    receiver = hosts(post, context, monotonic=steps.monotonic)
    long_name = f"{NOW - 5:013d}-" + "0" * 236 + ".json"
    inbox = Path(mailbox.inbox_of(root, ADDRESS))
    inbox.mkdir(parents=True)
    (inbox / long_name).write_bytes(b"not a message")
    letter = deposit(root, "good", NOW)

    receiver.start()
    for _ in range(3):
        steps.now += host.RETRY_MAX_S
        receiver.drain()

    assert context.ids == [letter.id]
    assert queued(root) == []
    assert [(d.letter, d.reason.split(":")[0]) for d in drops(root)] == [(long_name, "malformed")]
    assert [q.reason.split(" (named ")[1] for q in quarantine.quarantined(root)] == [
        f"{long_name} in the mailbox: cut to fit beside its reason)"
    ]


def test_the_drivers_take_sets_a_letter_aside_logged_as_a_session_logs_it(
    root: Path, tmp_path: Path
) -> None:
    driver = InProcessDriver(root, home=str(tmp_path), now=NOW)
    bad_name = f"{NOW - 5:013d}-0badc0de.json"
    inbox = Path(mailbox.inbox_of(root, ADDRESS))
    inbox.mkdir(parents=True)
    (inbox / bad_name).write_bytes(b'{"v": 1, "id": "torn')
    message = deposit(root, "good", NOW)

    result = driver.call("take", address=ADDRESS)

    reason = (Path(quarantine.quarantine_of(root, ADDRESS)) / (bad_name + ".reason")).read_text()
    text = reason.strip()
    assert result["set_aside"] == [{"name": bad_name, "reason": {"code": "not_json", "text": text}}]
    assert result["message"] == to_json(message)
    logged = [(d.letter, d.sender, d.reason) for d in drops(root)]
    assert logged == [(bad_name, "?", f"malformed: {text}")]


# -- what a drain reports ------------------------------------------------------------


def test_a_drain_returns_what_became_of_every_letter_it_took_and_stats_counts_them(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    context = Recording()
    receiver = hosts(post, context)
    receiver.start()
    inbox = Path(mailbox.inbox_of(root, ADDRESS))
    bad_name = f"{NOW - 5:013d}-0badc0de.json"
    (inbox / bad_name).write_bytes(b"{")
    first = deposit(root, "same words", NOW)
    echo = deposit(root, "same words", NOW + 1)
    held = deposit(root, "entered before a crash", NOW + 2, sender="other")
    context.deliveries.append(Delivery(held, format.frame(held), True))  # held already

    outcomes = receiver.drain()

    assert [(o.name, o.action, o.message_id) for o in outcomes] == [
        (bad_name, Action.SET_ASIDE, None),
        (first.file_name, Action.ENTER, first.id),
        (echo.file_name, Action.DROP, echo.id),
        (held.file_name, Action.ACKNOWLEDGE, held.id),
    ]
    logged = {d.letter: d.reason for d in drops(root)}
    assert outcomes[0].reason == logged[bad_name] and logged[bad_name].startswith("malformed")
    assert outcomes[2].reason == logged[echo.file_name]
    assert logged[echo.file_name].startswith("duplicate")
    assert outcomes[1].reason is None and outcomes[3].reason is None
    assert queued(root) == []
    assert receiver.stats == host.Stats(entered=1, dropped=1, set_aside=1, already_held=1)


def test_a_drain_reports_a_failed_entry_and_leaves_a_letter_waiting_for_its_retry_unreported(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    steps = SteppedTime()
    receiver = hosts(post, ExecContext("exit 3", {}), monotonic=steps.monotonic)
    receiver.start()
    message = deposit(root, "try me", NOW)

    failed = receiver.drain()
    waiting = receiver.drain()  # its next try is a second away

    assert failed == [
        Outcome(message.file_name, Action.FAILED, "exit status 3", message.id),
    ]
    assert waiting == []
    assert receiver.stats.failed_entries == 1
    assert queued(root) == [message.file_name]


def test_mail_found_at_start_up_with_resume_stage_is_reported_staged(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    context = Recording()
    receiver = hosts(post, context, resume=Resume.STAGE)
    waited = deposit(root, "while you were away", NOW)
    receiver.start()
    live = deposit(root, "now", NOW + 1)

    assert receiver.drain() == [Outcome(live.file_name, Action.ENTER, None, live.id)]
    assert [d.wake for d in context.deliveries] == [False, True]
    assert receiver.stats.entered == 2
    assert context.ids == [waited.id, live.id]


def test_a_letter_taken_at_start_up_with_resume_stage_is_reported_staged_not_entered(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    context = Recording()
    receiver = hosts(post, context, resume=Resume.STAGE)
    receiver.start()
    message = deposit(root, "for the first prompt", NOW)

    assert receiver.drain(at_startup=True) == [
        Outcome(message.file_name, Action.STAGE, None, message.id)
    ]
    assert [d.wake for d in context.deliveries] == [False]


def test_a_letter_taken_outside_the_start_up_is_live_mail_and_wakes_the_session(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    """take() without at_startup: mail that arrived while the session runs is a steer,
    whatever the resume mode says of the mail found at start-up."""
    context = Recording()
    receiver = hosts(post, context, resume=Resume.STAGE)
    receiver.start()
    message = deposit(root, "arrived just now", NOW)
    claim = helpers.claim_named(root, ADDRESS, message.file_name)
    assert claim is not None

    outcome = receiver.take(claim)
    claim.dispose()  # the receipt

    assert outcome == Outcome(message.file_name, Action.ENTER, None, message.id)
    assert [d.wake for d in context.deliveries] == [True]


def test_a_letter_whose_entry_the_stop_cut_short_is_reported_left_and_stays_queued(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    class StoppedMidway(Recording):
        def enter(self, delivery: Delivery) -> bool:
            receiver.request_stop()  # the session stops while the text is on its way
            return False

    receiver = hosts(post, StoppedMidway())
    receiver.start()
    message = deposit(root, "cut short", NOW)

    assert receiver.drain() == [
        Outcome(message.file_name, Action.LEFT, "the session is stopping", message.id)
    ]
    assert queued(root) == [message.file_name]
    assert receiver.stats.failed_entries == 0


def test_a_letter_taken_meanwhile_by_a_receiver_without_locks_is_reported_left(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    context = Recording()
    receiver = hosts(post, context)
    receiver.start()
    message = deposit(root, "gone already", NOW)
    claim = next(mailbox.claims(root, ADDRESS))
    (Path(mailbox.inbox_of(root, ADDRESS)) / message.file_name).unlink()  # pi-post 0.7 took it

    outcome = receiver.take(claim)

    assert outcome == Outcome(
        message.file_name, Action.LEFT, "taken by another receiver", message.id
    )
    assert context.ids == []


# -- INV-06: no double delivery -------------------------------------------------------


def test_two_receivers_on_one_address_enter_every_letter_exactly_once(
    root: Path, hosts: Callable[..., Host]
) -> None:
    post = Post(root)
    contexts = [Recording(ledger=False), Recording(ledger=False)]
    receivers = [hosts(post, context, also=True) for context in contexts]
    for receiver in receivers:
        receiver.start()
    total = 200
    sent: list[str] = []

    def feed() -> None:
        for n in range(total):
            # A sender each, so the loop guard lets every letter through.
            message = new_message(Sender("process", f"sender-{n}"), f"letter {n}", NOW + n)
            while True:
                try:
                    helpers.deposit(root, ADDRESS, message, durable=False)
                    break
                except mailbox.MailboxAtCap:
                    time.sleep(0.002)
            sent.append(message.id)

    def entered() -> int:
        return sum(len(context.ids) for context in contexts)

    def take(receiver: Host) -> None:
        deadline = time.monotonic() + 20
        while entered() < total and time.monotonic() < deadline:
            if entered_count(receiver.drain()) == 0:
                time.sleep(0.001)

    threads = [threading.Thread(target=feed)]
    threads += [threading.Thread(target=take, args=(r,)) for r in receivers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)

    both = contexts[0].ids + contexts[1].ids
    assert Counter(both) == Counter(sent)
    assert len(sent) == total
    assert queued(root) == []


def test_a_message_whose_unlink_fails_is_never_entered_again_nor_taken_by_another(
    root: Path,
    post: Post,
    clock: FixedClock,
    hosts: Callable[..., Host],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A context that cannot tell what it holds (a stream, a command) is entered once;
    the letter's claim is kept until the unlink succeeds (INV-06)."""
    unlinks = FailingUnlinks(monkeypatch)
    context, beside = Recording(ledger=False), Recording(ledger=False)
    receiver = hosts(post, context)
    message = deposit(root, "enter me once", NOW)

    receiver.start()
    other = hosts(post, beside, also=True)
    other.start()
    for _ in range(3):
        clock.now += 11 * SECOND_MS  # past the loop guard's 10 s: it does not hide a repeat
        receiver.drain()
        other.drain()

    assert context.ids == [message.id] and beside.ids == []
    assert queued(root) == [message.file_name]
    assert unlinks.attempts == 4, "the unlink is tried again at every drain"
    unlinks.failing = False
    receiver.drain()
    assert queued(root) == []
    assert context.ids == [message.id] and beside.ids == []


@pytest.mark.parametrize("last_try", ["fails", "succeeds"])
def test_a_letter_whose_unlink_still_fails_at_shutdown_is_queued_again_for_any_receiver(
    root: Path,
    post: Post,
    clock: FixedClock,
    hosts: Callable[..., Host],
    monkeypatch: pytest.MonkeyPatch,
    last_try: str,
) -> None:
    """Shutdown tries the unlink once more; if it fails again the claim is released,
    so the letter waits in the mailbox for the next receiver (a ledger tells that
    one it is in already), rather than staying locked by a receiver that is gone."""
    unlinks = FailingUnlinks(monkeypatch)
    context = Recording(ledger=False)
    receiver = hosts(post, context)
    message = deposit(root, "entered, not unlinked", NOW)
    receiver.start()
    assert context.ids == [message.id] and queued(root) == [message.file_name]

    unlinks.failing = last_try == "fails"
    receiver.stop()
    assert unlinks.attempts == 2
    if last_try == "succeeds":
        assert queued(root) == []
        return
    assert queued(root) == [message.file_name]
    claim = helpers.claim_named(root, ADDRESS, message.file_name)
    assert claim is not None, "the letter is still locked by the receiver that stopped"
    claim.release()


def _crash_after_entry(root: Path, receiver: Host, entries_so_far: Callable[[], int]) -> None:
    """Let ``receiver`` enter the queued letter, then die before the unlink (the
    receipt): Host.take leaves the claim held at the letter's name, and the kernel
    drops a dead process's locks."""
    [name] = queued(root)
    claim = helpers.claim_named(root, ADDRESS, name)
    assert claim is not None
    assert receiver.take(claim, at_startup=True).action in RECEIPTED
    claim.release()
    assert entries_so_far() == 1


def test_a_context_with_a_ledger_is_not_entered_again_after_a_crash(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    context = Recording(ledger=True)
    message = deposit(root, "exactly once", NOW)
    _crash_after_entry(root, hosts(post, context), lambda: len(context.ids))
    assert queued(root) == [message.file_name]

    restarted = hosts(post, context)
    restarted.start()

    assert queued(root) == []
    assert context.ids == [message.id]
    assert restarted.stats.already_held == 1


def test_a_transcript_is_the_ledger_that_makes_delivery_exactly_once(
    root: Path,
    tmp_path: Path,
    post: Post,
    hosts: Callable[..., Host],
) -> None:
    path = tmp_path / "transcript.jsonl"
    message = deposit(root, "exactly once", NOW)
    transcript = TranscriptContext(path)
    _crash_after_entry(root, hosts(post, transcript), lambda: len(path.read_text().splitlines()))
    transcript.close()

    reopened = TranscriptContext(path)
    try:
        restarted = hosts(post, reopened)
        restarted.start()
    finally:
        reopened.close()

    assert queued(root) == []
    assert [json.loads(line)["id"] for line in path.read_text().splitlines()] == [message.id]


def test_without_a_ledger_the_crash_window_costs_exactly_one_duplicate(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    context = Recording(ledger=False)
    message = deposit(root, "at least once", NOW)
    _crash_after_entry(root, hosts(post, context), lambda: len(context.ids))

    hosts(post, context).start()

    duplicates = len(context.ids) - len(set(context.ids))
    assert duplicates == 1
    assert set(context.ids) == {message.id}
    assert queued(root) == []


# -- INV-07: oldest first -------------------------------------------------------------


def test_a_drain_takes_the_oldest_letter_first(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    # Deposited out of order, so directory order cannot pass for age order.
    offsets = [7, 2, 9, 0, 5, 3]
    letters = [deposit(root, f"at {o}", NOW + o * SECOND_MS, sender=f"s{o}") for o in offsets]
    context = Recording()

    hosts(post, context).start()

    assert context.ids == [m.id for m in sorted(letters, key=lambda m: m.sent_at)]


# -- INV-11: the sender learns the truth -----------------------------------------------


def _send(root: Path, tmp_path: Path, receipt_wait: float) -> tuple[bool, str]:
    sender = Post(root, receipt_wait=receipt_wait)
    caller = os_caller(str(tmp_path), {"HOME": str(tmp_path)})
    (receipt,) = sender.send([ADDRESS], "are you there?", Sender("process", "asker"), caller)
    return receipt.delivered, receipt.message_id


def test_a_send_to_a_serving_host_reports_delivered(
    root: Path, tmp_path: Path, hosts: Callable[..., Host]
) -> None:
    context = Recording()
    receiver = hosts(Post(root), context)
    receiver.start()
    thread = serving(receiver)
    try:
        delivered, message_id = _send(root, tmp_path, receipt_wait=10.0)
    finally:
        halt(receiver, thread)

    assert delivered
    assert context.ids == [message_id]


def test_a_send_to_a_stopped_host_reports_queued(
    root: Path, tmp_path: Path, hosts: Callable[..., Host]
) -> None:
    receiver = hosts(Post(root), Recording())
    receiver.start()
    receiver.stop()

    delivered, message_id = _send(root, tmp_path, receipt_wait=10.0)

    assert not delivered
    assert queued(root) == [message_id + ".json"]


def test_a_live_record_whose_host_does_not_drain_gets_queued_after_the_wait(
    root: Path, tmp_path: Path, hosts: Callable[..., Host]
) -> None:
    post = Post(root)
    receiver = hosts(post, Recording())
    receiver.start()  # registered and live, but nobody serves the mailbox
    record = registry.read(root, ADDRESS)
    assert record is not None
    assert session.presence(record, post.clock(), post.processes) is Presence.LIVE

    delivered, message_id = _send(root, tmp_path, receipt_wait=0.2)

    assert not delivered
    assert queued(root) == [message_id + ".json"]


# -- INV-18: the loop guard inside the host ---------------------------------------------


class Clocks:
    """The wall clock the post office reads and the host's monotonic clock, which the
    loop guard's windows run on (SPEC 6.1): time passes on both, and the wall clock
    alone can be stepped."""

    def __init__(self, wall: FixedClock) -> None:
        self.wall = wall
        self.steady = SteppedTime()

    def pass_ms(self, ms: int) -> None:
        self.wall.now += ms
        self.steady.now += ms / 1000

    def step_wall_ms(self, ms: int) -> None:
        self.wall.now += ms


def test_an_identical_body_from_one_sender_within_10_s_is_dropped(
    root: Path, post: Post, clock: FixedClock, hosts: Callable[..., Host]
) -> None:
    clocks = Clocks(clock)
    context = Recording()
    receiver = hosts(post, context, monotonic=clocks.steady.monotonic)
    receiver.start()

    first = deposit(root, "same words", clock.now, sender="looper")
    receiver.drain()
    clocks.pass_ms(9 * SECOND_MS)
    echo = deposit(root, "same words", clock.now, sender="looper")
    other_sender = deposit(root, "same words", clock.now + 1, sender="bystander")
    receiver.drain()
    clocks.pass_ms(2 * SECOND_MS)  # 11 s after the delivered one
    later = deposit(root, "same words", clock.now, sender="looper")
    receiver.drain()

    assert context.ids == [first.id, other_sender.id, later.id]
    assert [(d.letter, d.reason.split(":")[0]) for d in drops(root)] == [
        (echo.file_name, "duplicate")
    ]


def test_a_ninth_message_from_one_sender_within_30_s_is_dropped(
    root: Path, post: Post, clock: FixedClock, hosts: Callable[..., Host]
) -> None:
    clocks = Clocks(clock)
    context = Recording()
    receiver = hosts(post, context, monotonic=clocks.steady.monotonic)
    receiver.start()

    burst = []
    for n in range(9):
        burst.append(deposit(root, f"update {n}", clock.now, sender="chatty"))
        receiver.drain()
        clocks.pass_ms(3 * SECOND_MS)  # 9 letters within 27 s
    clocks.pass_ms(3 * SECOND_MS)  # 30 s: the first delivery has left the window
    after = deposit(root, "update 9", clock.now, sender="chatty")
    receiver.drain()

    assert context.ids == [m.id for m in burst[:8]] + [after.id]
    assert [(d.letter, d.reason.split(":")[0]) for d in drops(root)] == [
        (burst[8].file_name, "rate")
    ]


def test_the_guard_s_windows_run_on_the_monotonic_clock_whatever_the_wall_clock_does(
    root: Path, post: Post, clock: FixedClock, hosts: Callable[..., Host]
) -> None:
    """Issue 38, item 9: the wall clock stepped back an hour under a running listener
    dropped every later repeat, and every message past the 8th, for the whole hour;
    stepped forward, it let an echo through at once. The windows run on the
    monotonic clock (SPEC 6.1)."""
    clocks = Clocks(clock)
    context = Recording()
    receiver = hosts(post, context, monotonic=clocks.steady.monotonic)
    receiver.start()
    hour_ms = 3600 * SECOND_MS

    first = deposit(root, "same words", clock.now, sender="looper")
    receiver.drain()
    clocks.pass_ms(11 * SECOND_MS)
    clocks.step_wall_ms(-hour_ms)
    repeat = deposit(root, "same words", clock.now, sender="looper")
    receiver.drain()
    clocks.pass_ms(SECOND_MS)
    clocks.step_wall_ms(+hour_ms)
    echo = deposit(root, "same words", clock.now, sender="looper")
    receiver.drain()
    burst = []
    for n in range(6):  # 8 from looper entered within 30 s: the next is the 9th
        clocks.pass_ms(SECOND_MS)
        burst.append(deposit(root, f"update {n}", clock.now, sender="looper"))
        receiver.drain()
    clocks.pass_ms(30 * SECOND_MS)
    clocks.step_wall_ms(-hour_ms)
    after = deposit(root, "after the window", clock.now, sender="looper")
    receiver.drain()

    assert context.ids == [first.id, repeat.id, *(m.id for m in burst), after.id]
    assert [(d.letter, d.reason.split(":")[0]) for d in drops(root)] == [
        (echo.file_name, "duplicate")
    ]


# -- INV-20: inbound and resume modes ---------------------------------------------------


@pytest.mark.parametrize(
    ("inbound", "ask_answers", "delivered"),
    [
        (Inbound.ACCEPT, None, True),
        (Inbound.REFUSE, None, False),
        (Inbound.ASK, True, True),
        (Inbound.ASK, False, False),
        (Inbound.ASK, None, True),  # no UI to ask: accept
        (inbound_mode("sometimes"), None, True),  # unknown values mean accept
    ],
)
def test_the_inbound_mode_decides_what_enters(
    root: Path,
    post: Post,
    hosts: Callable[..., Host],
    inbound: Inbound,
    ask_answers: bool | None,
    delivered: bool,
) -> None:
    asked: list[str] = []

    def ask(message: Message) -> bool:
        asked.append(message.id)
        return bool(ask_answers)

    context = Recording()
    receiver = hosts(post, context, inbound=inbound, ask=None if ask_answers is None else ask)
    message = deposit(root, "may I come in?", NOW)

    receiver.start()

    assert context.ids == ([message.id] if delivered else [])
    assert queued(root) == []
    assert asked == ([message.id] if ask_answers is not None else [])
    logged = [d.reason for d in drops(root)]
    if delivered:
        assert logged == []
    else:
        assert len(logged) == 1
        assert "PI_POST_INBOUND" in logged[0]


@pytest.mark.parametrize(
    ("resume", "waiting_mail_wakes"), [(Resume.WAKE, True), (Resume.STAGE, False)]
)
def test_mail_found_at_start_follows_the_resume_mode_and_live_mail_always_wakes(
    root: Path,
    post: Post,
    clock: FixedClock,
    hosts: Callable[..., Host],
    resume: Resume,
    waiting_mail_wakes: bool,
) -> None:
    context = Recording()
    receiver = hosts(post, context, resume=resume)
    deposit(root, "waiting since yesterday", NOW, sender="early")

    receiver.start()
    deposit(root, "arriving now", NOW + 1, sender="late")
    receiver.drain()

    assert [d.message.body for d in context.deliveries] == [
        "waiting since yesterday",
        "arriving now",
    ]
    assert [d.wake for d in context.deliveries] == [waiting_mail_wakes, True]


# -- INV-14, INV-15: the record -----------------------------------------------------------


def test_start_registers_a_live_record_and_stop_keeps_it_offline(
    root: Path, clock: FixedClock, hosts: Callable[..., Host]
) -> None:
    processes = FakeProcessTable({os.getpid(): "started-4242"})
    post = Post(root, clock=clock, processes=processes)
    receiver = hosts(post, Recording(), name="reviewer")

    receiver.start()
    live = registry.read(root, ADDRESS)
    assert live is not None
    assert (live.pid, live.pid_start, live.name) == (os.getpid(), "started-4242", "reviewer")
    assert session.presence(live, clock.now, processes) is Presence.LIVE

    clock.now += 5 * SECOND_MS
    receiver.stop()
    kept = registry.read(root, ADDRESS)
    assert kept is not None
    assert (kept.pid, kept.pid_start, kept.name) == (None, None, "reviewer")
    assert kept.last_seen == clock.now
    assert session.presence(kept, clock.now, processes) is Presence.OFFLINE


def test_a_second_listener_is_refused_while_the_first_runs_and_changes_nothing(
    root: Path, clock: FixedClock, hosts: Callable[..., Host]
) -> None:
    post = Post(root, clock=clock, processes=FakeProcessTable({os.getpid(): "started"}))
    first = hosts(post, Recording())
    first.start()
    record = registry.read(root, ADDRESS)
    clock.now += SECOND_MS

    with pytest.raises(listeners.AlreadyListening) as refused:
        hosts(post, Recording()).start()
    assert (refused.value.address, refused.value.pids) == (ADDRESS, [os.getpid()])
    assert registry.read(root, ADDRESS) == record
    assert listeners.running(root, ADDRESS) == [os.getpid()]

    beside = hosts(post, Recording(), also=True)
    beside.start()  # on purpose
    assert listeners.running(root, ADDRESS) == [os.getpid(), os.getpid()]


def test_stopping_says_how_the_address_was_left_and_hands_the_record_to_a_listener_that_runs(
    root: Path, clock: FixedClock, hosts: Callable[..., Host]
) -> None:
    """The record stays live while any listener runs (INV-14, INV-15)."""
    processes = FakeProcessTable({os.getpid(): "started"})
    post = Post(root, clock=clock, processes=processes)
    lines: list[str] = []
    first = hosts(post, Recording(), say=lines.append)
    second = hosts(post, Recording(), say=lines.append, also=True)
    first.start()
    second.start()

    clock.now += SECOND_MS
    second.stop()
    handed = registry.read(root, ADDRESS)
    assert handed is not None
    assert (handed.pid, handed.pid_start, handed.last_seen) == (os.getpid(), "started", clock.now)
    assert second.record == handed, "the host knows the record it wrote last"
    assert session.presence(handed, clock.now, processes) is Presence.LIVE

    clock.now += SECOND_MS
    first.stop()
    offline = registry.read(root, ADDRESS)
    assert offline is not None and offline.pid is None
    assert lines == [
        f"stopped; {ADDRESS} handed to pid {os.getpid()}",
        f"stopped; {ADDRESS} is offline",
    ]
    assert os.listdir(root / "listeners") == []


def test_a_record_that_cannot_be_marked_offline_at_shutdown_says_why(
    root: Path, post: Post, hosts: Callable[..., Host], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines: list[str] = []
    receiver = hosts(post, Recording(), say=lines.append)
    receiver.start()

    def disk_full(root: Path, record: session.Record) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(registry, "write", disk_full)
    receiver.stop()

    assert lines == [f"stopped; {ADDRESS} could not be marked offline (No space left on device)"]


def test_a_listener_that_ended_since_it_was_seen_is_not_handed_the_record(
    root: Path, clock: FixedClock, hosts: Callable[..., Host]
) -> None:
    """The other listener's lock still stands, but the process table no longer knows
    its process (it ended in between): the record goes offline instead (INV-15)."""
    post = Post(root, clock=clock, processes=FakeProcessTable({}))
    lines: list[str] = []
    first = hosts(post, Recording(), say=lines.append)
    second = hosts(post, Recording(), say=lines.append, also=True)
    first.start()
    second.start()

    second.stop()
    offline = registry.read(root, ADDRESS)
    assert offline is not None and offline.pid is None
    assert lines == [f"stopped; {ADDRESS} is offline"]


def test_a_record_another_receiver_wrote_stays_theirs_at_shutdown(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    lines: list[str] = []
    receiver = hosts(post, Recording(), say=lines.append)
    receiver.start()
    assert receiver.record is not None
    theirs = receiver.record.replace(pid=4242, pid_start="theirs")
    registry.write(root, theirs)

    receiver.stop()
    assert registry.read(root, ADDRESS) == theirs
    assert lines == [f"stopped; {ADDRESS} stays with pid 4242"]


def test_a_listener_that_cannot_be_noted_says_so_once_and_takes_its_mail(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    """A root where the listeners folder cannot be made: the session runs anyway (INV-23)."""
    files.make_root(root).close()
    (root / "listeners").write_text("not a folder")
    lines: list[str] = []
    context = Recording()
    message = deposit(root, "still taken", NOW)
    receiver = hosts(post, context, say=lines.append)

    receiver.start()
    assert context.ids == [message.id]
    assert lines == [
        f"cannot note this listener in {root}/listeners/{ADDRESS}: not a folder (a symlink is "
        f"never followed); a second listener of {ADDRESS} will not be refused, and its record "
        "may say offline while one still runs"
    ]
    receiver.stop()
    assert lines[1:] == [f"stopped; {ADDRESS} is offline"]


def test_start_records_the_real_process_start_time(root: Path, hosts: Callable[..., Host]) -> None:
    hosts(Post(root), Recording()).start()
    record = registry.read(root, ADDRESS)
    assert record is not None
    assert record.pid == os.getpid()
    assert record.pid_start == OsProcessTable().start_token(os.getpid())


def test_a_host_serves_only_once_started(post: Post, hosts: Callable[..., Host]) -> None:
    with pytest.raises(RuntimeError) as refused:
        hosts(post, Recording()).serve()
    assert str(refused.value) == "start() the host before serving"


class SteppedRounds:
    """Stands for the folder watch in serve() (host.FolderWatch): each wait moves the
    host's monotonic clock and the post office's clock by its timeout, and notes the
    timeout and the record's last_seen; the wait numbered ``rounds`` asks for the stop."""

    def __init__(self, root: Path, clock: FixedClock) -> None:
        self.root, self.clock, self.time = root, clock, SteppedTime()
        self.made: list[tuple[str, bool]] = []  # (folder, kernel_events) per watch made
        self.seen: list[tuple[float, int | None]] = []  # (timeout, last_seen) per wait
        self.receiver: Host | None = None
        self.rounds = 0
        self.refused: str | None = None  # a watch the kernel set, and kept
        self.lost: str | None = None

    def watch(self, folder: Any, *, kernel_events: bool) -> SteppedRounds:
        self.made.append((str(folder), kernel_events))
        return self

    def wait(self, timeout: float) -> None:
        record = registry.read(self.root, ADDRESS)
        self.seen.append((timeout, None if record is None else record.last_seen))
        self.time.now += timeout
        self.clock.now += round(timeout * SECOND_MS)
        if len(self.seen) == self.rounds and self.receiver is not None:
            self.receiver.request_stop()

    def wake(self) -> None: ...

    def close(self) -> None: ...

    def serve(self, receiver: Host, rounds: int) -> list[float]:
        """Serve ``rounds`` waits; the timeout of each."""
        self.receiver, self.rounds = receiver, rounds
        receiver.serve()
        return [timeout for timeout, _ in self.seen]


@pytest.fixture
def stepped(root: Path, clock: FixedClock, monkeypatch: pytest.MonkeyPatch) -> SteppedRounds:
    rounds = SteppedRounds(root, clock)
    monkeypatch.setattr(host, "FolderWatch", rounds.watch)
    return rounds


def test_the_serving_loop_waits_for_the_poll_and_refreshes_the_record_every_30_s(
    root: Path, post: Post, hosts: Callable[..., Host], stepped: SteppedRounds
) -> None:
    """serve() round by round, on the test's clocks: each round waits for the next poll
    (3 s), and the record is refreshed at 30 s, then every 30 s, never sooner (INV-14,
    INV-15)."""
    # Told to poll only (a folder whose changes the kernel does not report).
    receiver = hosts(post, Recording(), kernel_events=False, monotonic=stepped.time.monotonic)
    receiver.start()

    timeouts = stepped.serve(receiver, rounds=21)  # the last wait ends at 60 s

    assert stepped.made == [(str(mailbox.inbox_of(root, ADDRESS)), False)]
    assert timeouts == [host.POLL_S] * 21
    refreshed = [(seen - NOW) // SECOND_MS for _, seen in stepped.seen if seen is not None]
    assert refreshed == [0] * 10 + [30] * 10 + [60]


def test_a_letter_waiting_for_its_retry_wakes_the_serving_loop_until_it_is_settled(
    root: Path, post: Post, hosts: Callable[..., Host], stepped: SteppedRounds
) -> None:
    """The loop wakes for the next try of a letter a context refused (1 s later), not
    at the next poll; once the letter entered, its try no longer wakes the loop."""
    context = FailsThenTakes(failures=1)
    message = deposit(root, "again in a second", NOW)
    receiver = hosts(post, context, monotonic=stepped.time.monotonic)
    receiver.start()  # refused once

    timeouts = stepped.serve(receiver, rounds=3)

    assert timeouts == [host.RETRY_FIRST_S, host.POLL_S, host.POLL_S]
    assert context.ids == [message.id]


def test_a_serving_host_refreshes_its_record_every_30_s_and_serves_on(
    root: Path, post: Post, clock: FixedClock, hosts: Callable[..., Host]
) -> None:
    """The heartbeat inside serve(): not before 30 s, then at 30 s, and again 30 s
    later, with the mail still flowing after each refresh (INV-14, INV-15). Both
    clocks are the test's; the loop polls every 10 ms of real time."""
    time_ = SteppedTime()
    context = Recording()
    receiver = hosts(post, context, kernel_events=False, poll_s=0.01, monotonic=time_.monotonic)
    receiver.start()
    thread = serving(receiver)

    def last_seen() -> int | None:
        record = registry.read(root, ADDRESS)
        return None if record is None else record.last_seen

    def served(body: str) -> bool:
        """A letter sent now is entered: the loop went round at the time now set, and
        once two are, the round that took the first has also looked at the heartbeat."""
        message = deposit(root, body, clock.now)
        return eventually(lambda: message.id in context.ids)

    try:
        assert served("at start")  # serve() has set its first heartbeat's time
        time_.now += 29
        clock.now += 29 * SECOND_MS
        assert served("at 29 s") and served("still at 29 s")
        early = last_seen()

        time_.now += 1
        clock.now += SECOND_MS
        first = eventually(lambda: last_seen() == NOW + 30 * SECOND_MS)
        after_first = served("after the first refresh")

        time_.now += 30
        clock.now += 30 * SECOND_MS
        second = eventually(lambda: last_seen() == NOW + 60 * SECOND_MS)
        alive = thread.is_alive()
    finally:
        halt(receiver, thread)

    assert early == NOW, "no refresh before 30 s"
    assert first, "refreshed at 30 s"
    assert after_first and alive, "serving on after the refresh"
    assert second, "refreshed again 30 s later"


def test_a_command_running_for_long_keeps_the_heartbeat_going(
    root: Path, post: Post, clock: FixedClock, hosts: Callable[..., Host], tmp_path: Path
) -> None:
    """Issue 38, item 15: while ``--exec`` ran a command (up to 600 s) the session
    did not beat, and showed *not responding*. Now the record is refreshed at 30 s
    while the command still runs (SPEC 2). Both clocks are the test's: the command
    waits for a gate the test opens, not for time to pass."""
    time_ = SteppedTime()
    started, gate = tmp_path / "started", tmp_path / "gate"
    command = f"cat > /dev/null; : > '{started}'; until [ -e '{gate}' ]; do sleep 0.01; done"
    receiver = hosts(
        post,
        ExecContext(command, dict(os.environ)),
        kernel_events=False,
        poll_s=0.01,
        monotonic=time_.monotonic,
    )
    receiver.start()
    message = deposit(root, "a long turn", NOW)
    thread = serving(receiver)

    def last_seen() -> int | None:
        record = registry.read(root, ADDRESS)
        return None if record is None else record.last_seen

    try:
        running = eventually(started.exists)
        time_.now += 30
        clock.now += 30 * SECOND_MS
        beaten = eventually(lambda: last_seen() == NOW + 30 * SECOND_MS)
        still_running = not gate.exists() and queued(root) == [message.file_name]
        gate.touch()
        taken = eventually(lambda: queued(root) == [])
    finally:
        gate.touch()
        halt(receiver, thread)

    assert running, "the command never started"
    assert beaten and still_running, "no heartbeat while the command ran"
    assert taken and receiver.stats.entered == 1


# -- INV-23: failures are contained ---------------------------------------------------------


def test_a_watch_the_kernel_refuses_is_said_once_with_polling_named(
    root: Path, post: Post, hosts: Callable[..., Host], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38, item 3: with inotify refused (its limits reached) the session polled
    and nothing said the watch was gone. Now it says so once, naming the poll, and
    its mail still flows."""

    def refused(folder: object, mask: int, notes: object) -> None:
        raise OSError(errno.EMFILE, "no inotify instance left")

    monkeypatch.setattr(watch, "_kernel_watch", refused)
    said: list[str] = []
    context = Recording()
    receiver = hosts(post, context, say=said.append, poll_s=0.01)
    receiver.start()
    thread = serving(receiver)
    try:
        message = deposit(root, "found by polling", NOW)
        entered = eventually(lambda: context.ids == [message.id])
    finally:
        halt(receiver, thread)

    folder = root / "inbox" / ADDRESS
    assert said == [
        f"cannot watch {folder} for new mail: no inotify instance left; polling every 0.01 s"
    ]
    assert entered


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="kqueue's loss is not noticed")
def test_a_watch_lost_with_its_folder_is_said_once_and_the_mail_still_flows(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    """Issue 38, item 3: a mailbox folder removed under a running session (a sweep
    that misjudged it, a person) took the watch with it, and nothing said so."""
    said: list[str] = []
    context = Recording()
    receiver = hosts(post, context, say=said.append, poll_s=0.05)
    receiver.start()
    thread = serving(receiver)
    folder = root / "inbox" / ADDRESS
    try:
        shutil.rmtree(folder)
        told = eventually(lambda: len(said) == 1)
        first = deposit(root, "found by polling", NOW)  # makes the folder again
        second = deposit(root, "and again", NOW + 1)
        entered = eventually(lambda: context.ids == [first.id, second.id])
    finally:
        halt(receiver, thread)

    assert told and entered
    assert said == [
        f"cannot watch {folder} for new mail: the folder is gone (removed, or its file "
        "system unmounted); polling every 0.05 s"
    ]


def test_an_unwritable_registry_does_not_stop_the_host(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    # Tests run as root, where permissions stop nothing: a file where the registry
    # folder belongs makes every record write fail instead.
    root.mkdir()
    (root / "registry").write_text("not a folder")
    context = Recording()
    receiver = hosts(post, context)

    receiver.start()
    message = deposit(root, "still reaches you", NOW)
    receiver.drain()

    assert context.ids == [message.id]
    assert receiver.stats.failed_heartbeats == 1
    assert receiver.record is None

    # Once the registry can be written again, the next heartbeat registers.
    (root / "registry").unlink()
    receiver.beat()
    assert receiver.record is not None
    assert registry.read(root, ADDRESS) == receiver.record


def test_failed_heartbeats_are_counted_and_shutdown_still_completes(
    root: Path,
    post: Post,
    clock: FixedClock,
    hosts: Callable[..., Host],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    context = Recording()
    receiver = hosts(post, context)
    receiver.start()

    def disk_full(root: Path, record: session.Record) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(registry, "write", disk_full)
    clock.now += 30 * SECOND_MS
    receiver.beat()
    receiver.beat()
    message = deposit(root, "after the disk filled", clock.now)
    receiver.drain()
    receiver.stop()

    assert receiver.stats.failed_heartbeats == 2
    assert context.ids == [message.id]
    kept = registry.read(root, ADDRESS)
    assert kept is not None and kept.last_seen == NOW  # the last record that was written


class OutOfDescriptors:
    """A context whose entry finds no descriptor left (a command that cannot start)."""

    def __init__(self, number: int) -> None:
        self.number = number

    def holds(self, message_id: str) -> bool | None:
        return None

    def enter(self, delivery: Delivery) -> bool:
        raise OSError(self.number, os.strerror(self.number))


@pytest.mark.parametrize("number", [errno.EMFILE, errno.ENFILE])
@pytest.mark.parametrize("where", ["the drop log", "the context"])
def test_a_session_out_of_descriptors_ends_and_leaves_the_letter_queued(
    root: Path,
    post: Post,
    hosts: Callable[..., Host],
    monkeypatch: pytest.MonkeyPatch,
    number: int,
    where: str,
) -> None:
    """Issue 38, item 3: a letter that met EMFILE was deferred and retried for good,
    silently, while the record stayed live. No letter causes it and no retry clears
    it, so it ends the session (pi-post listen says why): the letter stays queued
    and unclaimed, for the next start."""
    if where == "the drop log":
        context: host.Context = Recording()

        def no_descriptor(where: Any, drop: droplog.Drop) -> None:
            raise OSError(number, os.strerror(number))

        monkeypatch.setattr(droplog, "record", no_descriptor)
    else:
        context = OutOfDescriptors(number)
    inbound = Inbound.REFUSE if where == "the drop log" else Inbound.ACCEPT
    receiver = hosts(post, context, inbound=inbound)
    message = deposit(root, "waits for a higher limit", NOW)

    with pytest.raises(OSError) as raised:
        receiver.start()

    assert raised.value.errno == number
    assert queued(root) == [message.file_name]
    claim = helpers.claim_named(root, ADDRESS, message.file_name)
    assert claim is not None, "the session ended holding its claim"
    claim.release()
    assert receiver.stats == host.Stats()


def test_a_drop_whose_log_cannot_be_written_waits_and_is_logged_on_its_next_try(
    root: Path, post: Post, hosts: Callable[..., Host], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No drop without its line in the drop log (INV-05), and a log the disk will not
    take does not stop the session (INV-23): the letter waits for its next try."""
    steps = SteppedTime()
    receiver = hosts(post, Recording(), inbound=Inbound.REFUSE, monotonic=steps.monotonic)
    receiver.start()
    message = deposit(root, "refused once the log can say so", NOW)
    real_record = droplog.record

    def disk_full(where: Any, drop: droplog.Drop) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(droplog, "record", disk_full)
    deferred = receiver.drain()
    waiting = receiver.drain()  # before its next try
    assert deferred == [
        Outcome(
            message.file_name,
            Action.DEFERRED,
            "No space left on device; next try in 1 s",
            message.id,
        )
    ]
    assert waiting == []
    assert queued(root) == [message.file_name]
    assert receiver.stats.dropped == 0

    monkeypatch.setattr(droplog, "record", real_record)
    steps.now += host.RETRY_FIRST_S
    assert [(o.action, o.message_id) for o in receiver.drain()] == [(Action.DROP, message.id)]
    assert [(d.letter, d.reason.split(":")[0]) for d in drops(root)] == [
        (message.file_name, "refused")
    ]
    assert queued(root) == []


def test_a_drop_whose_log_line_is_cut_short_stays_queued_and_is_said_once(
    root: Path, post: Post, hosts: Callable[..., Host], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A drop log that takes part of a line (a full disk, ``ulimit -f``) is no record
    of the drop: the letter stays queued, the session says it once over its retries,
    and the log gets no cut line; once it can grow, the drop is logged whole."""
    steps = SteppedTime()
    said: list[str] = []
    receiver = hosts(
        post, Recording(), inbound=Inbound.REFUSE, say=said.append, monotonic=steps.monotonic
    )
    receiver.start()
    helpers.log_drop(root, droplog.Drop(NOW, ADDRESS, "earlier.json", "?", "refused: earlier"))
    log = Path(droplog.log_path(root))
    before = log.read_bytes()
    disk = FullDisk(log, monkeypatch, room=20)
    message = deposit(root, "refused once the log can say so", NOW)
    for _ in range(3):
        receiver.drain()
        steps.now += host.RETRY_MAX_S
    assert log.read_bytes() == before
    assert queued(root) == [message.file_name]
    assert said == [
        f"cannot log or set aside mail until this is fixed: {log} cannot be written: its disk "
        f"is full (free some space on it); letter {message.file_name} and any like it stay "
        "queued (next try in 1 s)"
    ]

    disk.full = False
    assert [o.action for o in receiver.drain()] == [Action.DROP]
    assert queued(root) == []
    assert [d.letter for d in drops(root)] == ["earlier.json", message.file_name]


def test_a_letter_that_cannot_be_set_aside_waits_and_the_mail_behind_it_flows(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    """A quarantine the receiver cannot make (a file stands where its folder goes)
    keeps the bad letter queued, never delivered nor destroyed (INV-10), and the
    session goes on (INV-23); once it can be made, the next try sets it aside."""
    steps = SteppedTime()
    context = Recording()
    receiver = hosts(post, context, monotonic=steps.monotonic)
    receiver.start()
    bad_name = f"{NOW - 5:013d}-0badc0de.json"  # sorts first: it must not block the rest
    (Path(mailbox.inbox_of(root, ADDRESS)) / bad_name).write_bytes(b"{")
    good = deposit(root, "behind the bad one", NOW)
    (root / "quarantine").write_text("not a folder")

    outcomes = receiver.drain()

    assert [(o.name, o.action) for o in outcomes] == [
        (bad_name, Action.DEFERRED),
        (good.file_name, Action.ENTER),
    ]
    assert outcomes[0].reason is not None and outcomes[0].reason.endswith("next try in 1 s")
    assert context.ids == [good.id]
    assert queued(root) == [bad_name]
    assert receiver.stats.set_aside == 0

    (root / "quarantine").unlink()
    steps.now += host.RETRY_FIRST_S
    assert [(o.name, o.action) for o in receiver.drain()] == [(bad_name, Action.SET_ASIDE)]
    assert queued(root) == []
    assert (Path(quarantine.quarantine_of(root, ADDRESS)) / bad_name).read_bytes() == b"{"


def test_a_drop_log_a_stopped_listener_holds_keeps_its_letters_queued_said_once(
    root: Path, post: Post, hosts: Callable[..., Host], short_bound: float
) -> None:
    """Another session's listener frozen while it held the drop log's lock: a letter
    that needs a line there waits for its next try after the bound, the mail behind
    it flows, and the session says once who holds the log; once the log takes a line
    again, a new stall is said again (INV-05, INV-23). It used to wait for ever."""
    steps = SteppedTime()
    context = Recording()
    said: list[str] = []
    receiver = hosts(post, context, say=said.append, monotonic=steps.monotonic)
    receiver.start()
    bad_name = f"{NOW - 5:013d}-0badc0de.json"  # sorts first: it must not hold up the rest
    (Path(mailbox.inbox_of(root, ADDRESS)) / bad_name).write_bytes(b"{")
    good = deposit(root, "behind the bad one", NOW)
    helpers.log_drop(root, droplog.Drop(NOW, ADDRESS, "earlier.json", "?", "malformed: x"))
    log = Path(droplog.log_path(root))

    with helpers.frozen_holder(log) as pid:
        first: list[Outcome] = []
        assert helpers.not_blocked(lambda: first.extend(receiver.drain())) is None
        steps.now += host.RETRY_FIRST_S
        again = receiver.drain()
    assert [(o.name, o.action) for o in first] == [
        (bad_name, Action.DEFERRED),
        (good.file_name, Action.ENTER),
    ]
    assert [(o.name, o.action) for o in again] == [(bad_name, Action.DEFERRED)]
    assert context.ids == [good.id]
    assert queued(root) == [bad_name]
    about_the_log = [line for line in said if str(log) in line]
    assert len(about_the_log) == 1, said
    assert f"locked by pid {pid} " in about_the_log[0]
    assert bad_name in about_the_log[0]

    steps.now += 2 * host.RETRY_FIRST_S
    assert [(o.name, o.action) for o in receiver.drain()] == [(bad_name, Action.SET_ASIDE)]
    assert [d.letter for d in drops(root)] == ["earlier.json", bad_name]

    other_bad = f"{NOW - 4:013d}-0badc0de.json"
    (Path(mailbox.inbox_of(root, ADDRESS)) / other_bad).write_bytes(b"[")
    with helpers.frozen_holder(log):
        assert [(o.name, o.action) for o in receiver.drain()] == [(other_bad, Action.DEFERRED)]
    assert len([line for line in said if str(log) in line]) == 2, said


def test_a_letter_evicted_from_the_full_quarantine_is_logged(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    """The quarantine is bounded, but never silently (INV-05, INV-10)."""
    inbox = Path(mailbox.inbox_of(root, ADDRESS))
    inbox.mkdir(parents=True)
    full = [f"{n:013d}-00000000.json" for n in range(quarantine.CAP)]
    for name in full:
        (inbox / name).write_bytes(b"{")
        helpers.set_aside(root, ADDRESS, name, "not JSON")
    bad_name = f"{NOW:013d}-0badc0de.json"
    (inbox / bad_name).write_bytes(b"{")

    hosts(post, Recording()).start()

    assert [(d.letter, d.sender, d.reason.split(":")[0]) for d in drops(root)] == [
        (bad_name, "?", "malformed"),
        (full[0], "?", "removed from the full quarantine (oldest first)"),
    ]
    assert [entry.name for entry in quarantine.quarantined(root)] == [*full[1:], bad_name]


@pytest.fixture
def told(hosts: Callable[..., Host]) -> Callable[..., tuple[Host, list[str]]]:
    """A host whose ``say`` lines are kept."""

    def make(post: Post, context: host.Context, **options: Any) -> tuple[Host, list[str]]:
        lines: list[str] = []
        return hosts(post, context, say=lines.append, **options), lines

    return make


def read_only_folders(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """As if every folder were read-only for this process (tests run as root, which
    mode bits do not stop): the kernel's access check says no while the switch is on."""
    read_only = [True]
    real = os.access

    def access(path: str, mode: int, **options: Any) -> bool:
        return not read_only[0] and real(path, mode, **options)

    monkeypatch.setattr(os, "access", access)
    return read_only


def test_a_mailbox_that_cannot_be_written_keeps_its_letters_untouched_and_says_so_once(
    root: Path,
    post: Post,
    told: Callable[..., tuple[Host, list[str]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before entering, the host makes sure it can remove the letter afterwards: else
    nothing is entered, set aside or dropped, and the mail waits (INV-05, INV-06, INV-23)."""
    context = Recording(ledger=False)
    receiver, lines = told(post, context)
    inbox = Path(mailbox.inbox_of(root, ADDRESS))
    inbox.mkdir(parents=True)
    bad_name = f"{NOW - 5:013d}-0badc0de.json"
    (inbox / bad_name).write_bytes(b'{"v": 1, "id": "torn')
    message = deposit(root, "enter me once", NOW)
    before = tree_snapshot(inbox)
    read_only = read_only_folders(monkeypatch)

    receiver.start()
    for _ in range(3):
        receiver.drain()

    assert context.ids == []
    assert tree_snapshot(inbox) == before, "every letter untouched"
    problem = f"inbox/{ADDRESS} is read-only for uid {os.geteuid()}: chmod u+w {inbox}"
    assert lines == [f"cannot take mail: {problem}; its letters stay queued until then"]
    assert [(d.letter, d.sender, d.reason) for d in drops(root)] == [
        (bad_name, "?", f"kept: {problem}; the letter stays queued")
    ]

    read_only[0] = False
    assert entered_count(receiver.drain()) == 1
    assert context.ids == [message.id]
    assert queued(root) == []
    assert quarantine.quarantined(root)[0].name == bad_name

    read_only[0] = True  # a trouble that cleared and came back is said again
    later = deposit(root, "later", NOW + 1)
    receiver.drain()
    assert len(lines) == 2 and lines[1] == lines[0]
    assert queued(root) == [later.file_name]


def test_a_mailbox_on_a_read_only_file_system_says_to_remount_it(
    root: Path,
    post: Post,
    told: Callable[..., tuple[Host, list[str]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    receiver, lines = told(post, Recording())
    deposit(root, "waits", NOW)
    read_only_folders(monkeypatch)
    real_fstatvfs = os.fstatvfs

    def read_only_file_system(fd: int) -> Any:
        found = real_fstatvfs(fd)
        return type("Info", (), {"f_flag": found.f_flag | os.ST_RDONLY})()

    monkeypatch.setattr(os, "fstatvfs", read_only_file_system)
    receiver.start()

    inbox = mailbox.inbox_of(root, ADDRESS)
    assert lines == [
        f"cannot take mail: inbox/{ADDRESS} is on a read-only file system: remount it "
        f"read-write ({inbox}); its letters stay queued until then"
    ]


@pytest.mark.parametrize("log", ["writable", "full"])
def test_a_message_kept_by_a_mailbox_that_cannot_be_written_is_logged_with_its_sender(
    root: Path,
    post: Post,
    told: Callable[..., tuple[Host, list[str]]],
    monkeypatch: pytest.MonkeyPatch,
    log: str,
) -> None:
    """The drop log names who sent the letter kept; a log the disk will not take either
    does not stop the session: the person is told, and the mail waits (INV-05, INV-23)."""
    receiver, lines = told(post, Recording())
    message = deposit(root, "kept for now", NOW, sender="planner")
    read_only_folders(monkeypatch)
    if log == "full":

        def disk_full(where: Any, drop: droplog.Drop) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(droplog, "record", disk_full)

    receiver.start()
    outcomes = receiver.drain()

    inbox = mailbox.inbox_of(root, ADDRESS)
    problem = f"inbox/{ADDRESS} is read-only for uid {os.geteuid()}: chmod u+w {inbox}"
    assert outcomes == [Outcome(message.file_name, Action.KEPT, problem, message.id)]
    assert lines == [f"cannot take mail: {problem}; its letters stay queued until then"]
    assert queued(root) == [message.file_name]
    logged = [(d.letter, d.sender, d.reason) for d in drops(root)]
    if log == "writable":
        assert logged == [
            (message.file_name, message.sender.key, f"kept: {problem}; the letter stays queued")
        ]
    else:
        assert logged == []


def test_a_record_that_cannot_be_written_is_said_once_until_it_recovers(
    root: Path,
    post: Post,
    clock: FixedClock,
    told: Callable[..., tuple[Host, list[str]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pi-post list would not show the session live: the person is told (INV-23)."""
    root.mkdir()
    (root / "registry").write_text("not a folder")
    receiver, lines = told(post, Recording())

    receiver.start()
    receiver.beat()
    record = registry.record_path(root, ADDRESS)
    said = (
        f"cannot write the record {record}: not a folder (a symlink is never followed); "
        f"pi-post list will not show {ADDRESS} live while this lasts (its mail still flows; "
        "it tries again every 30 s)"
    )
    assert lines == [said]

    (root / "registry").unlink()
    receiver.beat()  # registers now, and the trouble has cleared
    assert lines == [said]

    def disk_full(root: Path, record: session.Record) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(registry, "write", disk_full)
    receiver.beat()
    receiver.beat()
    assert lines[1:] == [
        f"cannot write the record {record}: No space left on device; pi-post list will not "
        f"show {ADDRESS} live while this lasts (its mail still flows; it tries again every 30 s)"
    ]


def test_a_heartbeat_that_fails_again_after_one_went_through_is_said_again(
    root: Path,
    post: Post,
    clock: FixedClock,
    told: Callable[..., tuple[Host, list[str]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A refresh that goes through clears the trouble: the next failure is news (INV-23)."""
    receiver, lines = told(post, Recording())
    receiver.start()
    real_write = registry.write
    disk = {"full": True}

    def write(root: Path, record: session.Record) -> None:
        if disk["full"]:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(root, record)

    monkeypatch.setattr(registry, "write", write)
    for full in (True, False, True):
        disk["full"] = full
        clock.now += 30 * SECOND_MS
        receiver.beat()

    said = (
        f"cannot write the record {registry.record_path(root, ADDRESS)}: No space left on "
        f"device; pi-post list will not show {ADDRESS} live while this lasts (its mail still "
        "flows; it tries again every 30 s)"
    )
    assert lines == [said, said]
    assert receiver.stats.failed_heartbeats == 2


def test_the_poll_finds_mail_without_any_watch_event(
    root: Path, hosts: Callable[..., Host]
) -> None:
    context = Recording()
    receiver = hosts(Post(root), context, kernel_events=False, poll_s=0.2)
    receiver.start()
    thread = serving(receiver)
    try:
        message = deposit(root, "found by the poll", NOW)
        found = eventually(lambda: context.ids == [message.id])
    finally:
        halt(receiver, thread)

    assert found
    assert queued(root) == []


# -- contexts -------------------------------------------------------------------------------


def _delivery(body: str = "hello\nworld", *, wake: bool = True) -> Delivery:
    message = new_message(
        Sender("session", "planner", address_of("planner-session"), "/work/plan"),
        body,
        NOW,
        reply_to=address_of("planner-session"),
    )
    return Delivery(message, format.frame(message), wake)


def _transcript_ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text().splitlines()]


def test_a_transcript_line_is_on_disk_once_entered(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    transcript = TranscriptContext(path)
    delivery = _delivery()
    try:
        assert transcript.enter(delivery)
        line = json.loads(path.read_text())  # read through another file, not the writer
    finally:
        transcript.close()
    assert line["id"] == delivery.message.id
    assert line["text"] == delivery.text
    assert line["wake"] is True
    assert line["replyTo"] == address_of("planner-session")


def test_a_reopened_transcript_knows_the_ids_it_holds(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    entered = _delivery("first")
    transcript = TranscriptContext(path)
    transcript.enter(entered)
    assert transcript.holds(entered.message.id)
    transcript.close()

    reopened = TranscriptContext(path)
    try:
        assert reopened.holds(entered.message.id)
        assert not reopened.holds(_delivery("never sent").message.id)
    finally:
        reopened.close()


def test_a_torn_last_line_is_cut_at_reopening(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    kept, torn = _delivery("kept"), _delivery("torn")
    transcript = TranscriptContext(path)
    transcript.enter(kept)
    transcript.close()
    whole = path.read_bytes()
    torn_line = json.dumps(host.delivery_json(torn)).encode()
    path.write_bytes(whole + torn_line[: len(torn_line) // 2])

    reopened = TranscriptContext(path)
    try:
        assert path.read_bytes() == whole
        assert not reopened.holds(torn.message.id)
        reopened.enter(torn)
    finally:
        reopened.close()
    assert _transcript_ids(path) == [kept.message.id, torn.message.id]


class FullDisk:
    """Stands between the process and one file's writes: while ``full``, a write
    takes ``room`` bytes at most, as a disk that fills does (a short write), and
    the next one fails with ENOSPC; ftruncate fails ``truncate_failures`` times."""

    def __init__(self, path: Path, monkeypatch: pytest.MonkeyPatch, *, room: int = 0) -> None:
        self.inode = path.stat().st_ino
        self.room = room
        self.full = True
        self.truncate_failures = 0
        real_write, real_ftruncate = os.write, os.ftruncate

        def write(fd: int, data: Any) -> int:
            if not self.full or os.fstat(fd).st_ino != self.inode:
                return real_write(fd, data)
            if self.room == 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            taken = real_write(fd, bytes(data[: self.room]))
            self.room -= taken
            return taken

        def ftruncate(fd: int, length: int) -> None:
            if self.truncate_failures and os.fstat(fd).st_ino == self.inode:
                self.truncate_failures -= 1
                raise OSError(errno.EIO, os.strerror(errno.EIO))
            real_ftruncate(fd, length)

        monkeypatch.setattr(os, "write", write)
        monkeypatch.setattr(os, "ftruncate", ftruncate)


def test_a_line_the_disk_takes_in_part_is_cut_back_and_its_id_not_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A short write is no entry: the part written is cut off (nothing for the next
    line to be glued onto), the entry fails, saying why with the fix, and the id is
    not held; once there is room, the same message enters whole."""
    path = tmp_path / "t.jsonl"
    first, second = _delivery("first"), _delivery("second")
    transcript = TranscriptContext(path)
    try:
        transcript.enter(first)
        before = path.read_bytes()
        disk = FullDisk(path, monkeypatch, room=100)
        with pytest.raises(host.EntryFailed) as failed:
            transcript.enter(second)
        assert path.read_bytes() == before
        assert not transcript.holds(second.message.id)
        assert failed.value.lasting
        assert str(failed.value) == (
            f"the transcript {path} cannot be written: its disk is full (free some space on it)"
        )
        disk.full = False
        assert transcript.enter(second)
    finally:
        transcript.close()
    assert _transcript_ids(path) == [first.message.id, second.message.id]


def test_a_cut_line_that_could_not_be_cut_back_at_once_is_cut_before_the_next_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.jsonl"
    first, second = _delivery("first"), _delivery("second")
    transcript = TranscriptContext(path)
    try:
        transcript.enter(first)
        before = path.read_bytes()
        disk = FullDisk(path, monkeypatch, room=100)
        disk.truncate_failures = 2  # at the failed write, and at the next try
        with pytest.raises(host.EntryFailed):
            transcript.enter(second)
        assert len(path.read_bytes()) == len(before) + 100  # left there, for now
        disk.full = False
        with pytest.raises(host.EntryFailed, match="Input/output error"):
            transcript.enter(second)
        assert transcript.enter(second)
    finally:
        transcript.close()
    assert _transcript_ids(path) == [first.message.id, second.message.id]


def test_a_transcript_on_a_full_disk_keeps_the_mail_queued_and_says_so_once(
    root: Path,
    tmp_path: Path,
    post: Post,
    hosts: Callable[..., Host],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every try fails alike while the disk is full: the session says it once, not
    at every retry; the letters stay queued and enter, once each, when room comes."""
    path = tmp_path / "t.jsonl"
    transcript = TranscriptContext(path)
    said: list[str] = []
    steps = SteppedTime()
    receiver = hosts(post, transcript, say=said.append, monotonic=steps.monotonic)
    disk = FullDisk(path, monkeypatch)
    messages = [deposit(root, f"letter {n}", NOW + n) for n in range(2)]
    try:
        receiver.start()
        for _ in range(3):
            steps.now += host.RETRY_MAX_S
            receiver.drain()
        assert queued(root) == [m.file_name for m in messages]
        assert path.read_bytes() == b""
        assert said == [
            f"cannot enter mail until this is fixed: the transcript {path} cannot be written: "
            f"its disk is full (free some space on it); message {messages[0].id} and the mail "
            "after it stay queued (next try in 1 s)"
        ]
        disk.full = False
        steps.now += host.RETRY_MAX_S
        receiver.drain()
    finally:
        transcript.close()
    assert queued(root) == []
    assert _transcript_ids(path) == [m.id for m in messages]
    assert receiver.stats.failed_entries == 2 * 4


@pytest.mark.parametrize(
    "last",
    [b"a note of the user's", b'{"note": "whole JSON"}', b"{not ours, and not JSON"],
    ids=["text", "JSON", "not JSON, not begun as pipost's lines begin"],
)
def test_a_last_line_without_a_newline_that_pipost_did_not_begin_is_kept(
    tmp_path: Path, last: bytes
) -> None:
    """A user's file whose last line has no newline lost it to no crash of ours: the
    line is kept, and the next entry starts on a line of its own."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"first line\n" + last)
    entered = _delivery("after the user's line")
    transcript = TranscriptContext(path)
    try:
        transcript.enter(entered)
    finally:
        transcript.close()
    lines = path.read_bytes().split(b"\n")
    assert lines[:2] == [b"first line", last]
    assert [json.loads(line)["id"] for line in lines[2:-1]] == [entered.message.id]
    assert lines[-1] == b""


def test_an_entry_that_lost_only_its_newline_is_held_and_kept(tmp_path: Path) -> None:
    """Whole JSON is a line that may be whole: its id counts, nothing is cut."""
    path = tmp_path / "t.jsonl"
    whole = _delivery("whole but for its newline")
    path.write_bytes(json.dumps(host.delivery_json(whole)).encode())
    before = path.read_bytes()
    transcript = TranscriptContext(path)
    try:
        assert transcript.holds(whole.message.id)
    finally:
        transcript.close()
    assert path.read_bytes() == before


def test_a_new_transcript_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    """It holds what others wrote to this session, as a letter does (files.FILE_MODE)."""
    path = tmp_path / "t.jsonl"
    umask = os.umask(0o022)  # the usual one, which would leave a new file readable by all
    try:
        TranscriptContext(path).close()
    finally:
        os.umask(umask)
    assert path.stat().st_mode & 0o777 == files.FILE_MODE == 0o600


def test_a_transcript_with_lines_that_are_not_entries_still_opens_and_knows_its_ids(
    tmp_path: Path,
) -> None:
    """A line edited by hand, or written by another tool, is not an id entered: it is
    passed over, neither the reason to refuse the transcript nor cut from it."""
    path = tmp_path / "t.jsonl"
    entered = _delivery("entered")
    transcript = TranscriptContext(path)
    transcript.enter(entered)
    transcript.close()
    foreign = [
        b"not json",  # ValueError
        b"\xff\xfe",  # not UTF-8: a ValueError too
        b'{"note": "no id"}',  # KeyError
        b'["a", "list"]',  # TypeError: a list is not indexed by a name
        b'"a string"',  # TypeError
    ]
    path.write_bytes(b"\n".join(foreign) + b"\n" + path.read_bytes())
    before = path.read_bytes()

    reopened = TranscriptContext(path)
    try:
        assert reopened.holds(entered.message.id)
        assert not reopened.holds("no id")
    finally:
        reopened.close()
    assert path.read_bytes() == before


@pytest.mark.parametrize("target_exists", [True, False], ids=["a file", "dangling"])
def test_a_transcript_at_a_symlink_is_refused_and_its_target_left_alone(
    tmp_path: Path, target_exists: bool
) -> None:
    """In a shared folder another user can plant a link where a listener's transcript
    will be: followed, message text would be appended to (and a last line cut from,
    or a new file made at) a file of the listener's user."""
    target = tmp_path / "roots-file"
    if target_exists:
        target.write_bytes(b"a line of root's\nits last line, without a newline")
    before = target.read_bytes() if target_exists else None
    link = tmp_path / "shared" / "t.jsonl"
    link.parent.mkdir()
    link.symlink_to(target)

    with pytest.raises(files.UnsafePath) as refused:
        TranscriptContext(link)

    assert (refused.value.filename, refused.value.strerror) == (
        str(link),
        "a symlink, which pi-post never follows for a transcript; give the path of a file",
    )
    assert (target.read_bytes() if target.exists() else None) == before


def test_a_transcript_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    """/dev/null would swallow the ledger: every id lost at the next start."""
    with pytest.raises(files.UnsafePath, match="not a regular file"):
        TranscriptContext(Path("/dev/null"))


def test_listen_says_why_it_refuses_a_symlinked_transcript(tmp_path: Path) -> None:
    link = tmp_path / "t.jsonl"
    link.symlink_to(tmp_path / "elsewhere.jsonl")
    stderr = io.StringIO()
    context = cli.Invocation(
        environ={"PI_POST_DIR": str(tmp_path / "post"), "HOME": str(tmp_path)},
        cwd=str(tmp_path),
        stdin=io.StringIO(),
        stdout=io.StringIO(),
        stderr=stderr,
    )

    code = cli.run(["listen", "--session-id", SESSION, "--transcript", str(link)], context)

    assert (code, stderr.getvalue()) == (
        1,
        f"pi-post: {link}: a symlink, which pi-post never follows for a transcript; "
        "give the path of a file\n",
    )
    assert not (tmp_path / "elsewhere.jsonl").exists()


def _write_transcript(path: Path, entries: int, body_bytes: int) -> None:
    with path.open("wb") as out:
        for n in range(entries):
            message = helpers.make_message(NOW + n, body="b" * body_bytes)
            out.write(json.dumps(host.delivery_json(Delivery(message, "", True))).encode())
            out.write(b"\n")


def _peak_bytes_opening(path: Path) -> int:
    """The most memory Python held at once while the transcript was opened (read)."""
    tracemalloc.start()
    try:
        transcript = TranscriptContext(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    transcript.close()
    return peak


def test_reading_a_transcript_at_start_needs_memory_that_does_not_grow_with_its_bytes(
    tmp_path: Path,
) -> None:
    """1 MB and 32 MB of transcript (64 and 2,048 entries of 16 KB): read line by
    line, only the ids kept, the peak grows with the ids, far less than with the
    bytes (measured: 0.15 and 0.42 MB, a ratio of 2.8; read whole, split and copied:
    2.1 and 66 MB, 31.5)."""
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    _write_transcript(small, 64, 16_000)
    _write_transcript(large, 2048, 16_000)
    assert large.stat().st_size > 30 * small.stat().st_size

    small_peak, large_peak = _peak_bytes_opening(small), _peak_bytes_opening(large)

    assert large_peak < 8 * small_peak
    assert large_peak < large.stat().st_size // 16


def test_a_line_longer_than_any_entry_is_passed_over(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    first, last = _delivery("first"), _delivery("last")
    entry = json.dumps(host.delivery_json(first)).encode()
    giant = b'{"id": "giant", "pad": "' + b"x" * (host.LINE_LIMIT + 1) + b'"}'
    path.write_bytes(
        entry + b"\n" + giant + b"\n" + json.dumps(host.delivery_json(last)).encode() + b"\n"
    )
    transcript = TranscriptContext(path)
    try:
        assert transcript.holds(first.message.id) and transcript.holds(last.message.id)
        assert not transcript.holds("giant")
    finally:
        transcript.close()


def test_the_longest_line_pipost_writes_is_within_the_line_limit() -> None:
    """A body at its cap of the characters escaped the most, in the body and in the
    framed text: the transcript reads its lines up to LINE_LIMIT."""
    cap = max(message_rules(version).body_cap for version in READABLE_VERSIONS)
    longest = 0
    for character in ("\x01", "\x1b", "\\", '"', "\x7f"):
        message = helpers.make_message(NOW, body=character * cap)
        delivery = Delivery(message, format.frame(message), True)
        line = json.dumps(host.delivery_json(delivery), ensure_ascii=False).encode()
        longest = max(longest, len(line))
    assert longest < host.LINE_LIMIT


def test_a_second_listener_on_one_transcript_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    first = TranscriptContext(path)
    try:
        with pytest.raises(OSError, match="in use"):
            TranscriptContext(path)
    finally:
        first.close()
    TranscriptContext(path).close()  # free again once the first has gone


def test_an_exec_context_gets_the_text_on_stdin_and_the_message_in_its_environment(
    tmp_path: Path,
) -> None:
    command = 'cat > "$OUT/stdin.txt" && env > "$OUT/env.txt"'
    context = ExecContext(command, {"OUT": str(tmp_path), "PATH": os.environ["PATH"]})
    delivery = _delivery(wake=False)

    assert context.enter(delivery)

    # The framed text, ended by a newline as a line on a pipe is (the frame has none).
    assert (tmp_path / "stdin.txt").read_text() == delivery.text + "\n"
    assert not delivery.text.endswith("\n")
    env = dict(
        line.split("=", 1)
        for line in (tmp_path / "env.txt").read_text().splitlines()
        if "=" in line
    )
    assert env["PI_POST_MESSAGE_ID"] == delivery.message.id
    assert env["PI_POST_MESSAGE_FROM"] == "planner"
    assert env["PI_POST_MESSAGE_REPLY_TO"] == address_of("planner-session")
    assert env["PI_POST_WAKE"] == "0"
    assert env["OUT"] == str(tmp_path)
    assert context.holds(delivery.message.id) is None
    # Each variable the command is given is one listen --help names.
    given = {name for name in env if name.startswith("PI_POST_")}
    assert given == {
        "PI_POST_MESSAGE_ID",
        "PI_POST_MESSAGE_FROM",
        "PI_POST_MESSAGE_REPLY_TO",
        "PI_POST_WAKE",
    }
    assert all(name in cli.HELP["listen"] for name in given)


@pytest.mark.parametrize(("wake", "variable"), [(True, "1"), (False, "0")])
def test_the_command_learns_whether_the_text_wakes_the_session(
    tmp_path: Path, wake: bool, variable: str
) -> None:
    """PI_POST_WAKE: 1 for a steer that wakes the session, 0 for text staged for its
    first prompt (listen --help)."""
    context = ExecContext('printf %s "$PI_POST_WAKE" > "$OUT/wake.txt"', {"OUT": str(tmp_path)})
    assert context.enter(_delivery(wake=wake))
    assert (tmp_path / "wake.txt").read_text() == variable


def test_a_message_without_a_reply_address_gives_the_command_an_empty_reply_to(
    tmp_path: Path,
) -> None:
    """PI_POST_MESSAGE_REPLY_TO is always set (listen --help), empty when there is
    nowhere to reply; never another word that a reply would be sent to."""
    message = new_message(Sender("process", "cron"), "nightly", NOW)
    assert message.reply_to is None
    command = 'printf %s "${PI_POST_MESSAGE_REPLY_TO-unset}" > "$OUT/reply_to.txt"'
    context = ExecContext(command, {"OUT": str(tmp_path)})

    assert context.enter(Delivery(message, format.frame(message), True))
    assert (tmp_path / "reply_to.txt").read_text() == ""


def test_a_sender_name_no_environment_can_hold_reaches_the_command_spelled_out(
    tmp_path: Path,
) -> None:
    message = new_message(Sender("process", "a\x00b"), "hello", NOW)  # a valid letter
    context = ExecContext(
        'printf %s "$PI_POST_MESSAGE_FROM" > "$OUT/from.txt"', {"OUT": str(tmp_path)}
    )

    assert context.enter(Delivery(message, format.frame(message), True))
    assert (tmp_path / "from.txt").read_text() == "a\\x00b"


def test_a_sender_name_a_c_locale_cannot_encode_reaches_the_command_in_utf8(
    tmp_path: Path,
) -> None:
    """Under a C locale without Python's UTF-8 mode the command's environment could
    only be ASCII: a message from "Zoë" would never start one, and stay queued for
    ever. Its variables are the UTF-8 of the message's text whatever the locale."""
    out = tmp_path / "from.txt"
    # In ASCII: that locale reads the arguments, this code among them, as ASCII.
    probe = (
        "from pipost import format\n"
        "from pipost.host import Delivery, ExecContext\n"
        "from pipost.message import Sender, new_message\n"
        f"message = new_message(Sender('process', 'Zo\\u00eb'), 'hello', {NOW})\n"
        'context = ExecContext(\'printf %s "$PI_POST_MESSAGE_FROM" > "$OUT"\', '
        f"{{'OUT': {str(out)!r}}})\n"
        "print(context.enter(Delivery(message, format.frame(message), True)))\n"
    )
    done = helpers.python_under_c_locale(probe)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"True\n", b"")
    assert out.read_bytes() == "Zoë".encode()


def test_a_stop_requested_during_a_drain_leaves_the_rest_of_the_mail_queued(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    class StopsAtFirst(Recording):
        def enter(self, delivery: Delivery) -> bool:
            receiver.request_stop()
            return super().enter(delivery)

    context = StopsAtFirst()
    receiver = hosts(post, context)
    first, *rest = [deposit(root, f"letter {n}", NOW + n) for n in range(3)]

    receiver.start()

    assert context.ids == [first.id]
    assert queued(root) == [message.file_name for message in rest]


def test_a_command_that_reads_lines_gets_the_last_line_of_the_text(tmp_path: Path) -> None:
    command = 'while read -r line; do printf "%s\\n" "$line"; done > "$OUT/lines.txt"'
    delivery = _delivery("the last line")
    assert ExecContext(command, {"OUT": str(tmp_path)}).enter(delivery)
    assert (tmp_path / "lines.txt").read_text().splitlines()[-1] == delivery.text.splitlines()[-1]


@pytest.mark.parametrize(
    ("command", "timeout_s", "reason"),
    [
        ("exit 3", 600.0, "exit status 3"),
        ("exit 1", 600.0, "exit status 1"),  # the least failure is one
        ("kill -9 $$", 600.0, "killed by signal 9"),
        ("sleep 30", 0.3, "timed out after 0.3 s"),
    ],
)
def test_a_failing_command_says_why(command: str, timeout_s: float, reason: str) -> None:
    with pytest.raises(host.EntryFailed) as failed:
        ExecContext(command, {}, timeout_s).enter(_delivery())
    assert str(failed.value) == reason


def test_a_command_that_cannot_start_says_why() -> None:
    with pytest.raises(host.EntryFailed) as failed:
        ExecContext("exit 0", {"BROKEN": "a\0b"}).enter(_delivery())
    assert str(failed.value) == "could not start: embedded null byte"


def _child_pid(path: Path) -> int:
    """The pid a command wrote to ``path``, once it has."""
    assert eventually(lambda: path.exists() and path.read_text().endswith("\n"))
    return int(path.read_text())


def _running_command(context: ExecContext, path: Path) -> int:
    """The pid the command wrote to ``path``, once ``context`` also holds it as running:
    enter() notes the process just after starting it, which a loaded machine can delay
    past the command's first lines, and until then interrupt() has nothing to signal."""
    pid = _child_pid(path)
    assert eventually(lambda: context._running is not None)
    return pid


# The shell waits for a child in the background, as a command that runs a program does.
SLEEPING_CHILD = 'sleep 30 & echo $! > "$OUT/child"; wait'
DEAF_CHILD = 'trap "" TERM; sleep 30 & echo $! > "$OUT/child"; wait'
"""Both the shell and its child ignore SIGTERM: only SIGKILL ends them."""


def test_a_command_past_its_timeout_is_ended_with_everything_it_started(tmp_path: Path) -> None:
    context = ExecContext(SLEEPING_CHILD, {"OUT": str(tmp_path)}, timeout_s=0.5)
    with pytest.raises(host.EntryFailed, match="timed out"):
        context.enter(_delivery())
    assert eventually(lambda: process_gone(_child_pid(tmp_path / "child")))


def _enter_in_background(context: ExecContext) -> tuple[threading.Thread, list[Exception]]:
    raised: list[Exception] = []

    def enter() -> None:
        try:
            context.enter(_delivery())
        except Exception as error:  # handed to the test, which checks what it was
            raised.append(error)

    thread = threading.Thread(target=enter, daemon=True)
    thread.start()
    return thread, raised


@pytest.mark.parametrize("command", [SLEEPING_CHILD, DEAF_CHILD])
def test_an_interrupted_command_is_ended_with_everything_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    monkeypatch.setattr(host, "EXEC_KILL_GRACE_S", 0.2)
    context = ExecContext(command, {"OUT": str(tmp_path)})
    thread, raised = _enter_in_background(context)
    child = _child_pid(tmp_path / "child")

    context.interrupt()

    thread.join(timeout=10)
    assert not thread.is_alive(), "the command was not ended"
    assert [str(error) for error in raised] == ["ended by the shutdown"]
    assert all(isinstance(error, host.EntryFailed) for error in raised)
    assert eventually(lambda: process_gone(child))
    (tmp_path / "child").unlink()
    with pytest.raises(host.EntryFailed) as stopping:
        context.enter(_delivery())  # a stopped context starts no other command
    assert str(stopping.value) == "the session is stopping"
    assert not (tmp_path / "child").exists()


# The shell ends at TERM; the child it left ignores TERM and outlives it.
DEAF_ORPHAN = '(trap "" TERM; exec sleep 30) & echo $! > "$OUT/child"; wait'


def test_a_group_that_cannot_be_probed_counts_as_running_and_is_killed_after_the_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the timeout the shell is gone, but a member of its group may have changed
    user (the kernel refuses to say whether the group lives): it is taken to run, so
    what outlived the TERM is killed at the end of the grace."""
    monkeypatch.setattr(host, "EXEC_KILL_GRACE_S", 0.2)
    signal_group = os.killpg

    def unprobeable(group: int, signum: int) -> None:
        if signum == 0:
            raise PermissionError(errno.EPERM, "Operation not permitted")
        signal_group(group, signum)

    monkeypatch.setattr(os, "killpg", unprobeable)
    context = ExecContext(DEAF_ORPHAN, {"OUT": str(tmp_path)}, timeout_s=0.3)
    with pytest.raises(host.EntryFailed, match=r"timed out after 0\.3 s"):
        context.enter(_delivery())
    assert eventually(lambda: process_gone(_child_pid(tmp_path / "child")))


def test_an_interrupt_ends_the_command_at_once_not_at_its_next_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """interrupt() signals the running command itself: the stop does not wait for the
    next slice of the wait, nor for the grace, once the group is gone (here both are
    made far longer than the test waits)."""
    monkeypatch.setattr(host, "_EXEC_WAIT_SLICE_S", 600.0)
    monkeypatch.setattr(host, "EXEC_KILL_GRACE_S", 600.0)
    # One process, the group's only member: gone once its listener has reaped it.
    context = ExecContext('echo $$ > "$OUT/child"; exec sleep 30', {"OUT": str(tmp_path)})
    thread, raised = _enter_in_background(context)
    command = _running_command(context, tmp_path / "child")

    context.interrupt()

    thread.join(timeout=10)
    assert not thread.is_alive(), "the command was not ended at once"
    assert [(type(error), str(error)) for error in raised] == [
        (host.EntryFailed, "ended by the shutdown")
    ]
    assert process_gone(command)


def test_a_group_that_refuses_the_signals_is_waited_for_and_its_entry_still_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The kernel may refuse to signal a group (its members changed user): the command
    is waited for until it ends, and the entry fails as timed out, the letter queued."""
    monkeypatch.setattr(host, "EXEC_KILL_GRACE_S", 0.2)
    signalled: list[int] = []

    def refused(group: int, signum: int) -> None:
        signalled.append(signum)
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "killpg", refused)
    with pytest.raises(host.EntryFailed) as failed:
        ExecContext("sleep 1", {}, timeout_s=0.3).enter(_delivery())
    assert str(failed.value) == "timed out after 0.3 s"
    assert signalled[0] == signal.SIGTERM and signalled[-1] == signal.SIGKILL


# The shell ends at TERM; what it left ignores TERM, notes every HUP, and ends by itself
# in 15 s at the latest.
NOTING_ORPHAN = (
    '(trap "" TERM; trap "echo HUP >> \\"$OUT/signals\\"" HUP; n=0; '
    'while [ $n -lt 300 ]; do sleep 0.05; n=$((n+1)); done) & echo $! > "$OUT/child"; wait'
)


def test_what_outlives_the_shell_is_probed_without_a_signal_and_killed_after_the_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the shell is gone its group is only probed (signal 0) until the grace ends,
    then killed: nothing but TERM and KILL reaches what the command started."""
    monkeypatch.setattr(host, "EXEC_KILL_GRACE_S", 0.5)
    # A shell cannot trap a signal that was ignored when it started, and a run under
    # nohup ignores HUP: the command inherits SIG_IGN, never a handler of ours.
    before = signal.signal(signal.SIGHUP, lambda signum, frame: None)
    try:
        context = ExecContext(NOTING_ORPHAN, {"OUT": str(tmp_path)}, timeout_s=0.3)
        with pytest.raises(host.EntryFailed, match=r"timed out after 0\.3 s"):
            context.enter(_delivery())
    finally:
        signal.signal(signal.SIGHUP, before)
    assert eventually(lambda: process_gone(_child_pid(tmp_path / "child")))
    assert not (tmp_path / "signals").exists()


@pytest.mark.parametrize(
    ("trap", "slice_s"),
    [
        ("exit 0", 600.0),  # one look, once it has ended
        ("sleep 0.5; exit 0", host._EXEC_WAIT_SLICE_S),  # still running at the next look
    ],
    ids=["ended-at-once", "slow-to-end"],
)
def test_a_command_that_finishes_its_entry_when_told_to_stop_has_taken_the_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trap: str, slice_s: float
) -> None:
    """Exit 0 says the text entered, even when the stop's TERM is what ended the
    command, and whenever after it the command ends: the letter is taken, not
    entered again at the next start (INV-06)."""
    monkeypatch.setattr(host, "_EXEC_WAIT_SLICE_S", slice_s)
    monkeypatch.setattr(host, "EXEC_KILL_GRACE_S", 600.0)  # never killed: it ends itself
    context = ExecContext(
        f'trap "{trap}" TERM; echo $$ > "$OUT/child"; sleep 30 & wait', {"OUT": str(tmp_path)}
    )
    answers: list[bool | Exception] = []

    def enter() -> None:
        try:
            answers.append(context.enter(_delivery()))
        except Exception as error:  # handed to the test, which checks what it was
            answers.append(error)

    thread = threading.Thread(target=enter, daemon=True)
    thread.start()
    _running_command(context, tmp_path / "child")

    context.interrupt()

    thread.join(timeout=30)
    assert not thread.is_alive(), "the command was not ended"
    assert answers == [True]


def test_a_command_is_given_the_grace_to_clean_up_after_the_term(tmp_path: Path) -> None:
    context = ExecContext(
        "trap 'echo cleaned up > \"$OUT/cleanup\"; exit 1' TERM; sleep 30 & wait",
        {"OUT": str(tmp_path)},
        timeout_s=0.3,
    )
    with pytest.raises(host.EntryFailed, match=r"timed out after 0\.3 s"):
        context.enter(_delivery())
    assert (tmp_path / "cleanup").read_text() == "cleaned up\n"


class ScriptedClock:
    """ExecContext's monotonic clock: each look at it sees the next of ``readings``, and
    the last one from then on; time does not move unless the script says so."""

    def __init__(self, *readings: float) -> None:
        self.readings = list(readings)

    def monotonic(self) -> float:
        return self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]


def _exec_clock(monkeypatch: pytest.MonkeyPatch, clock: ScriptedClock) -> None:
    fake_time = type("FakeTime", (), {"monotonic": clock.monotonic, "sleep": time.sleep})
    monkeypatch.setattr(host, "time", fake_time)


def test_a_command_is_ended_when_its_time_is_up_to_the_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Started at 0 with 5 s to run, the first look after it started sees 5 s: its time
    is up (a command that ran on would end by itself, and count as taken)."""
    _exec_clock(monkeypatch, ScriptedClock(0.0, 5.0))
    with pytest.raises(host.EntryFailed) as failed:
        ExecContext("sleep 3", {}, timeout_s=5.0).enter(_delivery())
    assert str(failed.value) == "timed out after 5 s"


def test_what_ignores_the_term_is_killed_when_the_grace_is_up_to_the_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Timed out at 5 s, TERM ignored: the look at the clock that sees the grace over
    kills the group, before the command could finish what it was doing."""
    grace_over = 5.0 + host.EXEC_KILL_GRACE_S
    _exec_clock(monkeypatch, ScriptedClock(0.0, 5.0, 5.0, grace_over))
    context = ExecContext(
        'trap "" TERM; sleep 3; echo finished > "$OUT/finished"',
        {"OUT": str(tmp_path)},
        timeout_s=5.0,
    )
    with pytest.raises(host.EntryFailed, match="timed out after 5 s"):
        context.enter(_delivery())
    assert not (tmp_path / "finished").exists()


def test_a_stop_while_a_command_runs_leaves_its_letter_queued_and_uncounted(
    root: Path, tmp_path: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    said: list[str] = []
    out = tmp_path / "out"
    out.mkdir()
    receiver = hosts(post, ExecContext(SLEEPING_CHILD, {"OUT": str(out)}), say=said.append)
    message = deposit(root, "hold on", NOW)
    thread = threading.Thread(target=receiver.start, daemon=True)
    thread.start()
    child = _child_pid(out / "child")

    receiver.request_stop()

    thread.join(timeout=10)
    assert not thread.is_alive(), "the host did not stop its command"
    assert queued(root) == [message.file_name]
    assert (receiver.stats.entered, receiver.stats.failed_entries) == (0, 0)
    assert said == []
    assert eventually(lambda: process_gone(child))


def test_a_failing_command_is_retried_with_backoff_and_said_why(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    steps = SteppedTime()
    said: list[str] = []
    receiver = hosts(post, ExecContext("exit 3", {}), say=said.append, monotonic=steps.monotonic)
    message = deposit(root, "try me", NOW)

    receiver.start()
    steps.now += host.RETRY_FIRST_S
    receiver.drain()

    assert queued(root) == [message.file_name]
    assert receiver.stats.failed_entries == 2
    assert said == [
        f"message {message.id} stays queued: exit status 3; next try in 1 s",
        f"message {message.id} stays queued: exit status 3; next try in 2 s",
    ]


@pytest.mark.parametrize(
    "command",
    # The second one exits 0 once ended: it still timed out, and its text may be cut.
    ["sleep 30", 'trap "exit 0" TERM; sleep 30 & wait'],
)
def test_a_command_past_its_timeout_counts_as_a_failure_and_is_retried(
    root: Path, post: Post, hosts: Callable[..., Host], command: str
) -> None:
    said: list[str] = []
    receiver = hosts(post, ExecContext(command, {}, timeout_s=0.3), say=said.append)
    message = deposit(root, "too slow", NOW)

    receiver.start()

    assert queued(root) == [message.file_name]
    assert (receiver.stats.entered, receiver.stats.failed_entries) == (0, 1)
    assert said == [f"message {message.id} stays queued: timed out after 0.3 s; next try in 1 s"]


@pytest.mark.parametrize(
    ("environ", "why"),
    [
        ({"BROKEN": "a\0b"}, "embedded null byte"),
        # Past what exec takes on Linux (one string) and macOS (all of them together).
        ({"HUGE": "x" * (4 << 20)}, os.strerror(errno.E2BIG)),
    ],
    ids=["a NUL byte", "an environment too large"],
)
def test_a_command_that_cannot_start_leaves_its_letter_queued_and_says_why(
    root: Path, post: Post, hosts: Callable[..., Host], environ: dict[str, str], why: str
) -> None:
    said: list[str] = []
    receiver = hosts(post, ExecContext("exit 0", environ), say=said.append)
    message = deposit(root, "cannot be run", NOW)

    receiver.start()

    assert queued(root) == [message.file_name]
    assert (receiver.stats.entered, receiver.stats.failed_entries) == (0, 1)
    assert said == [f"message {message.id} stays queued: could not start: {why}; next try in 1 s"]


def test_a_stream_context_writes_one_json_line_per_message() -> None:
    stream = io.StringIO()
    context = StreamContext(stream)
    delivery = _delivery("line one\nline two")

    assert context.enter(delivery)

    lines = stream.getvalue().splitlines(keepends=True)
    assert len(lines) == 1 and lines[0].endswith("\n")
    entry = json.loads(lines[0])
    assert entry["id"] == delivery.message.id
    assert entry["body"] == "line one\nline two"
    assert entry["from"]["name"] == "planner"
    assert entry["text"] == delivery.text


def test_the_transcript_and_the_stream_keep_text_as_utf8_readable_as_it_is(
    tmp_path: Path,
) -> None:
    """A person or a grep reading the lines sees "Zoë" and "café", not JSON's \\u
    escapes: the lines are UTF-8, as the letters are."""
    message = new_message(Sender("process", "Zoë"), "café au lait", NOW)
    delivery = Delivery(message, format.frame(message), True)
    stream = io.StringIO()
    assert StreamContext(stream).enter(delivery)
    path = tmp_path / "t.jsonl"
    transcript = TranscriptContext(path)
    try:
        assert transcript.enter(delivery)
    finally:
        transcript.close()

    for line in (stream.getvalue(), path.read_bytes().decode("utf-8")):
        assert "Zoë" in line and "café au lait" in line and "\\u" not in line
        assert json.loads(line)["body"] == "café au lait"


def test_a_closed_stream_is_a_context_gone() -> None:
    stream = io.StringIO()
    stream.close()
    with pytest.raises(host.ContextGone):
        StreamContext(stream).enter(_delivery())


def _pipe_without_reader() -> io.TextIOWrapper:
    """The write end of a pipe whose reader has gone (``listen | head -c 10``)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    return open(write_end, "w", encoding="utf-8")


def test_a_stream_whose_reader_is_gone_is_a_context_gone() -> None:
    stream = _pipe_without_reader()
    try:
        with pytest.raises(host.ContextGone, match="the reader of its output is gone"):
            StreamContext(stream).enter(_delivery())
    finally:
        with contextlib.suppress(BrokenPipeError):
            stream.close()


def test_a_stream_that_fails_otherwise_says_why_and_keeps_the_letter_queued(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    """A write error that may clear (a full disk under a redirected output) is an
    entry that failed, said with its reason, not a silent retry."""

    class FullDisk(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    said: list[str] = []
    receiver = hosts(post, StreamContext(FullDisk()), say=said.append)
    message = deposit(root, "to a full disk", NOW)

    receiver.start()

    assert queued(root) == [message.file_name]
    assert said == [
        f"message {message.id} stays queued: {os.strerror(errno.ENOSPC)}; next try in 1 s"
    ]


def test_a_session_whose_output_reader_is_gone_stops_and_keeps_the_letter_queued(
    root: Path, post: Post, hosts: Callable[..., Host]
) -> None:
    """Issue 38, 13: a listener on standard output piped into ``head`` stayed live
    and beating after head left, so senders were told queued for good. Now the
    session ends: the letter stays queued, it says so once, and its record goes
    offline at stop."""
    said: list[str] = []
    stream = _pipe_without_reader()
    receiver = hosts(post, StreamContext(stream), say=said.append)
    first, second = deposit(root, "one", NOW), deposit(root, "two", NOW + 1)

    try:
        with pytest.raises(host.ContextGone):
            receiver.start()
        receiver.stop()
    finally:
        with contextlib.suppress(BrokenPipeError):
            stream.close()

    assert queued(root) == [first.file_name, second.file_name]
    assert said[0] == (
        f"the reader of its output is gone: the session stops; message {first.id} stays queued"
    )
    record = registry.read(root, ADDRESS)
    assert record is not None and record.pid is None, "the record still says it receives"
    assert receiver.stats.failed_entries == 0


def test_a_drain_that_drops_or_sets_aside_letters_opens_the_root_once(
    root: Path, post: Post, hosts: Callable[..., Host], monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN §1: each drop and each set-aside is logged below the root the drain
    opened (the claim holds it), not through a fresh open of the root per letter."""
    receiver = hosts(post, Recording(), inbound=Inbound.REFUSE)
    receiver.start()
    for n in range(3):
        deposit(root, f"refused {n}", NOW + n)
    inbox = Path(mailbox.inbox_of(root, ADDRESS))
    for n in range(2):
        (inbox / f"{NOW + 10 + n:013d}-0badc0de.json").write_bytes(b"{not json")
    opened = Opened(monkeypatch)

    outcomes = receiver.drain()

    assert [outcome.action for outcome in outcomes] == [Action.DROP] * 3 + [Action.SET_ASIDE] * 2
    assert opened.roots == 1  # before: 1 + one per letter logged
    assert len(drops(root)) == 5


@pytest.mark.parametrize("registered", [True, False])
def test_the_driver_reads_a_record_with_the_root_opened_once(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registered: bool
) -> None:
    """op_record reads the record and counts the mailbox below one open root (DESIGN
    §1; before: once for the record, once more for the count)."""
    driver = InProcessDriver(root, home=str(tmp_path), now=NOW)
    if registered:
        driver.op_register(SESSION, str(tmp_path))
    deposit(root, "queued", NOW)
    opened = Opened(monkeypatch)
    session = driver.op_record(ADDRESS)
    assert opened.roots == 1
    assert opened.listed[ADDRESS] == 1
    assert session["queued"] == 1
    assert (session["record"] is not None) is registered
