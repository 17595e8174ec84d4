"""pipost's own receivers crashing at every point of a take: INV-05 and INV-06 on
pipost alone (not a check of a port: it drives pipost's modules, not the driver;
test_mailbox_machine.py states the mailbox's invariants through the driver).

One address, several senders, several receivers, crashes, restarts, sweeps and a
clock that jumps. A state machine over the real mailbox, receiving sessions
(Host), registry and post office, in a fresh root per example. Three receivers
share the address: two whose context keeps a ledger (it answers holds() from what
entered it, as a transcript does) and one whose context cannot tell (holds() is
None, as a command's cannot).
There are no threads: concurrency is the interleaving of whole drains with single
steps of a take — the claim (mailbox.claims), the take (Host.take: the decision and
the entry, a ledger hit or a drop) and the unlink. A receiver crashes between any
two of them, or its Host dies inside the context mid-drain, before or after the
text went in; its claim is released without the unlink (the kernel releases the
locks of a dead process), and it restarts as a new Host with the same context.

After every step each accepted message is accounted for:

    entries + ledger hits + drops == gone + crashes after a take + held after a take

where "gone" is 1 once its letter left the disk and "held after a take" is 1 while
a receiver holds it, taken, before the unlink. Every take of a letter ends in one
entry, ledger hit or drop, and then either the unlink (once) or a crash. At the end
every receiver dies and one takes all that is left, so for each message

    entries - 1 == crashes after a take - ledger hits - drops

that is: nothing is lost (INV-05), a context with a ledger takes a message at most
once, and the duplicates are exactly the crashes between entry and unlink that no
ledger caught (INV-06). Drops are counted from the drop log; bodies are distinct, so
the loop guard drops only for rate, and its reason says so. What a drain reports
(its outcomes) is what its context saw.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from pipost import droplog, files, mailbox, registry, session
from pipost.address import address_of
from pipost.host import Delivery, Host
from pipost.message import Message, Sender, new_message, parse
from pipost.post import Post, Refused
from pipost.reception import RECEIPTED, Action
from pipost.resolve import Caller
from pipost.session import Presence
from pipost_conformance.machines.conftest import count_example, count_step
from tests.helpers import DAY_MS, NOW, FakeProcessTable, FixedClock, deposit, tree_snapshot

MACHINE = "mailbox crashes (pipost)"
SESSION = "machine-receiver"
ADDRESS = address_of(SESSION)
SENDERS = ("ann", "bob", "cy")
LEDGERS = (True, False, True)
"""One receiver per entry: whether its context keeps a ledger."""
CRASH_POINTS = (
    "between takes",
    "after the claim",
    "after the take",
    "in the context, before the entry",
    "in the context, after the entry",
)
PROCESS_TOKEN = "boot-1"
WEEK_MS = 7 * DAY_MS

SCRATCH = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
"""Where each example's root goes: a memory filesystem where there is one, as every
flush on a disk costs milliseconds. Nothing here depends on what reaches the disk
(that is test_power_loss.py's subject)."""


class ReceiverDied(BaseException):
    """The receiving process died inside its context: nothing after it runs (not an
    Exception, so none of the Host's handlers catches it)."""

    def __init__(self, entered: str | None) -> None:
        super().__init__(entered)
        self.entered = entered
        """The message that went in before the death, if it did."""


class RecordingContext:
    """Takes every delivery and keeps the ids in order. With a ledger it answers
    holds() from that record, and notes each time the answer spared an entry.
    Told to, it kills its receiver on the next entry, before or after the text
    goes in."""

    def __init__(self, *, ledger: bool) -> None:
        self.ledger = ledger
        self.entered: list[str] = []
        self.ledger_hits: list[str] = []
        self.dies_on_next_entry: str | None = None

    def holds(self, message_id: str) -> bool | None:
        if not self.ledger:
            return None
        held = message_id in self.entered
        if held:
            self.ledger_hits.append(message_id)
        return held

    def enter(self, delivery: Delivery) -> bool:
        dies, self.dies_on_next_entry = self.dies_on_next_entry, None
        if dies == "in the context, before the entry":
            raise ReceiverDied(None)
        self.entered.append(delivery.message.id)
        if dies == "in the context, after the entry":
            raise ReceiverDied(delivery.message.id)
        return True


@dataclass
class Taking:
    """A letter a receiver claimed and has not disposed of yet."""

    claim: mailbox.Claim
    message: Message
    taken: Action | None = None
    """What Host.take did with it (an entry, a ledger hit, a drop); None before."""


@dataclass
class Receiver:
    context: RecordingContext
    host: Host | None = None
    taking: Taking | None = None


class MailboxMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        count_example(MACHINE)
        self.base = Path(tempfile.mkdtemp(prefix="pipost-mailbox-", dir=SCRATCH))
        self.root = self.base / "post"
        self.clock = FixedClock(NOW)
        self.processes = FakeProcessTable()
        self.post = Post(self.root, clock=self.clock, processes=self.processes, receipt_wait=0.0)
        self.caller = Caller(cwd=str(self.base), home=str(self.base), canonical=os.path.realpath)
        self.receivers = [Receiver(RecordingContext(ledger=ledger)) for ledger in LEDGERS]
        self.accepted: set[str] = set()
        self.crashes_after_a_take: Counter[str] = Counter()
        self.written = 0
        self.inbox = Path(mailbox.inbox_of(self.root, ADDRESS))
        self.whole: set[tuple[str, int, int, int]] = set()
        """Letters already read whole, by name, inode, size and mtime: a letter in
        place is never written again, so each is parsed once unless it changes."""
        self.locks: list[files.OpenFile] = []
        """Every claim's locked descriptor, so that a receiver that dies inside a
        drain can have its locks released, as the kernel would."""
        self.patches = contextlib.ExitStack()
        recording = self._recording_locks(files.Folder.try_lock)
        self.patches.enter_context(mock.patch.object(files.Folder, "try_lock", recording))

    def _recording_locks(
        self, real: Callable[[files.Folder, str], files.OpenFile | None]
    ) -> Callable[[files.Folder, str], files.OpenFile | None]:
        def try_lock(folder: files.Folder, name: str) -> files.OpenFile | None:
            handle = real(folder, name)
            if handle is not None:
                self.locks.append(handle)
            return handle

        return try_lock

    def teardown(self) -> None:
        try:
            # After a failing step the failure is reported as it is; the final drain
            # runs only on a machine that got through every step.
            if sys.exc_info()[1] is None:
                self._everything_is_taken_at_the_end()
        finally:
            for receiver in self.receivers:
                if receiver.taking is not None:
                    receiver.taking.claim.release()
                if receiver.host is not None:
                    receiver.host.stop()
            self.patches.close()
            shutil.rmtree(self.base, ignore_errors=True)

    # -- what is on disk ------------------------------------------------------------

    def _letters(self) -> list[str]:
        return mailbox.letter_names(self.root, ADDRESS)

    def _held_by_others(self, index: int) -> set[str]:
        return {
            receiver.taking.claim.name
            for other, receiver in enumerate(self.receivers)
            if other != index and receiver.taking is not None
        }

    def _next_body(self, sender: str) -> str:
        # Distinct bodies: the guard never drops a duplicate, only a sender over its rate.
        self.written += 1
        return f"{sender} #{self.written}"

    # -- senders --------------------------------------------------------------------

    @rule(
        sender=st.sampled_from(SENDERS),
        letters=st.integers(1, 4),
        through_post=st.booleans(),
    )
    def letters_arrive(self, sender: str, letters: int, through_post: bool) -> None:
        """From one sender, through Post.send (which resolves the address first) or
        straight into the mailbox."""
        for _ in range(letters):
            if through_post:
                self._send(sender)
            else:
                self._deposit(sender)

    def _send(self, sender: str) -> None:
        """Refused when the address is unknown (its record and mailbox swept) or its
        mailbox is full; a refused send writes nothing (INV-08)."""
        known = registry.read(self.root, ADDRESS) is not None or self.inbox.is_dir()
        before = self._letters()
        try:
            (receipt,) = self.post.send(
                [ADDRESS], self._next_body(sender), Sender("process", sender), self.caller
            )
        except Refused as refusal:
            event("send refused")
            assert not known or len(before) >= mailbox.CAP, refusal
            assert self._letters() == before
            return
        assert known and len(before) < mailbox.CAP
        # nothing took it (no receiver runs during a send): queued, never "delivered"
        assert not receipt.delivered
        assert receipt.message_id + ".json" in self._letters()
        self.accepted.add(receipt.message_id)

    @rule()
    def senders_fill_the_mailbox(self) -> None:
        """Senders that each send once, until the mailbox refuses: at exactly 50."""
        for _ in range(mailbox.CAP + 1):
            if not self._deposit(f"flood-{self.written}"):
                return
        raise AssertionError(f"{mailbox.CAP + 1} deposits in a row and none refused")

    def _deposit(self, sender: str) -> bool:
        message = new_message(
            Sender("process", sender),
            self._next_body(sender),
            self.clock(),
            nonce=f"{self.written:08x}",
        )
        before = self._letters()
        try:
            deposit(self.root, ADDRESS, message)
        except mailbox.MailboxAtCap:
            event("deposit refused: mailbox full")
            assert len(before) == mailbox.CAP
            assert self._letters() == before
            return False
        assert len(before) < mailbox.CAP
        self.accepted.add(message.id)
        return True

    # -- receivers: who can do what now ----------------------------------------------

    def _stopped(self) -> list[int]:
        return [i for i, r in enumerate(self.receivers) if r.host is None]

    def _running(self) -> list[int]:
        return [i for i, r in enumerate(self.receivers) if r.host is not None]

    def _idle(self) -> list[int]:
        """Running, between takes."""
        return [i for i in self._running() if self.receivers[i].taking is None]

    def _can_claim(self) -> list[int]:
        """Idle, with a letter that no receiver holds."""
        held = {r.taking.claim.name for r in self.receivers if r.taking is not None}
        return self._idle() if set(self._letters()) - held else []

    def _holding(self, *, taken: bool) -> list[int]:
        return [
            i
            for i, r in enumerate(self.receivers)
            if r.taking is not None and (r.taking.taken is not None) is taken
        ]

    def _pick(self, data: st.DataObject, indices: list[int]) -> int:
        return data.draw(st.sampled_from(indices), label="receiver")

    # -- receivers: whole drains ----------------------------------------------------

    @initialize()
    def first_receiver_starts(self) -> None:
        self._start(0)

    @precondition(lambda self: self._stopped())
    @rule(data=st.data())
    def receiver_starts(self, data: st.DataObject) -> None:
        """A start, or a restart after a crash or a stop, with the same context."""
        self._start(self._pick(data, self._stopped()))

    def _start(self, index: int) -> None:
        receiver = self.receivers[index]
        self.processes.tokens[os.getpid()] = PROCESS_TOKEN
        # Several receivers of one address on purpose (INV-06 between them).
        host = Host(
            self.post, SESSION, str(self.base), receiver.context, kernel_events=False, also=True
        )
        with self._a_drain_by(index):
            host.start()
        receiver.host = host

    @precondition(lambda self: self._idle())
    @rule(data=st.data())
    def receiver_drains(self, data: st.DataObject) -> None:
        index = self._pick(data, self._idle())
        receiver = self.receivers[index]
        assert receiver.host is not None
        already = len(receiver.context.entered), len(receiver.context.ledger_hits)
        with self._a_drain_by(index):
            outcomes = receiver.host.drain()
        reported = Counter(outcome.action for outcome in outcomes)
        entered = [o.message_id for o in outcomes if o.action is Action.ENTER]
        assert entered == receiver.context.entered[already[0] :], outcomes
        assert reported[Action.ACKNOWLEDGE] == len(receiver.context.ledger_hits) - already[1]

    @contextlib.contextmanager
    def _a_drain_by(self, index: int) -> Iterator[None]:
        """A drain enters letters oldest first (INV-07) and takes every letter no other
        receiver holds."""
        context = self.receivers[index].context
        already = len(context.entered)
        yield
        order = context.entered[already:]
        assert order == sorted(set(order)), f"a drain entered {order}"
        assert set(self._letters()) <= self._held_by_others(index)

    # -- receivers: one step of a take at a time ------------------------------------

    @precondition(lambda self: self._can_claim())
    @rule(data=st.data())
    def receiver_claims(self, data: st.DataObject) -> None:
        """Claims the oldest letter nobody holds (INV-06, INV-07)."""
        self._claim(self._pick(data, self._can_claim()))

    def _claim(self, index: int) -> None:
        receiver = self.receivers[index]
        free = [name for name in self._letters() if name not in self._held_by_others(index)]
        claim = next(mailbox.claims(self.root, ADDRESS), None)  # the oldest one free
        assert claim is not None, "no letter could be claimed"
        assert claim.name == free[0]
        assert isinstance(claim.content, Message), claim.content
        receiver.taking = Taking(claim, claim.content)

    @precondition(lambda self: self._holding(taken=False))
    @rule(data=st.data())
    def receiver_takes(self, data: st.DataObject) -> None:
        """The receiver's Host takes the letter it claimed: enters it, or, when its
        ledger holds it, only acknowledges it, or drops it over the rate."""
        self._take(self._pick(data, self._holding(taken=False)))

    def _take(self, index: int) -> None:
        receiver = self.receivers[index]
        assert receiver.host is not None and receiver.taking is not None
        outcome = receiver.host.take(receiver.taking.claim)
        assert outcome.action in RECEIPTED, outcome  # the claim is held for the unlink
        assert outcome.message_id == receiver.taking.message.id
        receiver.taking.taken = outcome.action

    @precondition(lambda self: self._holding(taken=True))
    @rule(data=st.data())
    def receiver_disposes(self, data: st.DataObject) -> None:
        receiver = self.receivers[self._pick(data, self._holding(taken=True))]
        assert receiver.taking is not None
        receiver.taking.claim.dispose()
        receiver.taking = None

    @precondition(lambda self: self._running())
    @rule(data=st.data(), where=st.sampled_from(CRASH_POINTS))
    def receiver_crashes(self, data: st.DataObject, where: str) -> None:
        """Dies wherever it is (between takes, or holding its claim). An idle receiver
        with a letter to take may first run a take up to the crash point: its own steps
        (claim, take) back to back, or the Host's drain dying inside the context —
        so that the crash between entry and unlink, the one window for a duplicate,
        comes up often."""
        index = self._pick(data, self._running())
        if index not in self._can_claim() or where == "between takes":
            self._crash(index)
        elif where in ("after the claim", "after the take"):
            self._claim(index)
            if where == "after the take":
                self._take(index)
            self._crash(index)
        else:
            self._die_inside_the_context(index, where)

    def _die_inside_the_context(self, index: int, where: str) -> None:
        receiver = self.receivers[index]
        assert receiver.host is not None
        receiver.context.dies_on_next_entry = where
        locks = len(self.locks)
        already = len(receiver.context.entered)
        try:
            receiver.host.drain()
        except ReceiverDied as death:
            for handle in self.locks[locks:]:
                handle.close()  # the kernel releases a dead process's locks
            if death.entered is not None:
                self.crashes_after_a_take[death.entered] += 1
                event("crash between entry and unlink")
            self._crash(index)
        else:  # every letter was a ledger hit or a drop: nothing entered, nobody died
            receiver.context.dies_on_next_entry = None
            assert set(self._letters()) <= self._held_by_others(index)
        order = receiver.context.entered[already:]
        assert order == sorted(set(order)), f"a drain entered {order}"

    def _crash(self, index: int) -> None:
        receiver = self.receivers[index]
        if receiver.taking is not None:
            if receiver.taking.taken is not None:
                self.crashes_after_a_take[receiver.taking.message.id] += 1
            if receiver.taking.taken is Action.ENTER:
                event("crash between entry and unlink")
            receiver.taking.claim.release()
            receiver.taking = None
        if receiver.host is not None and receiver.host._watch is not None:
            receiver.host._watch.close()  # the kernel closes a dead process's descriptors
        if receiver.host is not None and receiver.host._listening is not None:
            receiver.host._listening.close()  # and drops its place among the listeners
        receiver.host = None
        self._process_table_follows_the_receivers()

    @precondition(lambda self: self._idle())
    @rule(data=st.data())
    def receiver_stops(self, data: st.DataObject) -> None:
        """A clean shutdown between takes: the record stays, offline (INV-14)."""
        receiver = self.receivers[self._pick(data, self._idle())]
        assert receiver.host is not None
        receiver.host.stop()
        receiver.host = None
        self._process_table_follows_the_receivers()

    def _process_table_follows_the_receivers(self) -> None:
        """The receivers share this test's pid: it exists while any of them runs."""
        if any(receiver.host is not None for receiver in self.receivers):
            self.processes.tokens[os.getpid()] = PROCESS_TOKEN
        else:
            self.processes.tokens.clear()

    # -- time, sweeps, reading ------------------------------------------------------

    @rule(
        ms=st.one_of(st.integers(0, 60_000), st.integers(WEEK_MS, 2 * WEEK_MS)),
        heartbeat=st.booleans(),
    )
    def time_passes(self, ms: int, heartbeat: bool) -> None:
        """Seconds, or past the 7 days after which an offline record may be swept;
        then perhaps a running receiver's heartbeat."""
        self.clock.now += ms
        running = [r.host for r in self.receivers if r.host is not None]
        if heartbeat and running:
            running[0].beat()

    @rule()
    def sweep(self) -> None:
        """Messages outrank tidiness (INV-17): a mailbox that holds mail and the record
        of its session stay; what goes was allowed to go."""
        letters = self._letters()
        record = registry.read(self.root, ADDRESS)
        state = None if record is None else session.presence(record, self.clock(), self.processes)
        report = self.post.sweep()
        if letters:
            assert self._letters() == letters
            assert report.mailboxes_removed == ()
            if record is not None:
                assert registry.read(self.root, ADDRESS) == record
        if report.records_removed:
            event("sweep removed the record")
            assert record is not None and not letters
            assert state is Presence.OFFLINE
            assert self.clock() - record.last_seen > session.SWEEP_AFTER_MS
        if report.mailboxes_removed:
            event("sweep removed the mailbox")
            assert not letters and registry.read(self.root, ADDRESS) is None

    @rule()
    def look(self) -> None:
        """Peek, count, list and resolve change nothing on disk (INV-16)."""
        before = tree_snapshot(self.root)
        letters = self.post.peek(ADDRESS)
        queued = mailbox.count(self.root, ADDRESS)
        sessions = self.post.sessions()
        try:
            self.post.resolve(SESSION, self.caller)
        except Refused:
            assert sessions == []
        assert tree_snapshot(self.root) == before
        assert [letter.name for letter in letters] == self._letters()
        assert queued == len(letters)
        assert all(isinstance(letter.content, Message) for letter in letters)

    # -- after every step -------------------------------------------------------------

    @invariant()
    def letters_are_whole_and_at_most_fifty(self) -> None:
        """INV-03: every letter parses whole, and no deposit left a temporary file;
        INV-08: never more than 50."""
        count_step(MACHINE)
        names = _names(self.inbox)
        letters = [name for name in names if name.endswith(".json")]
        assert len(letters) <= mailbox.CAP
        for name in letters:
            info = os.stat(self.inbox / name)
            seen = (name, info.st_ino, info.st_size, info.st_mtime_ns)
            if seen not in self.whole:
                parsed = parse((self.inbox / name).read_bytes(), name)
                assert isinstance(parsed, Message), f"{name}: {parsed}"
                assert parsed.id in self.accepted
                self.whole.add(seen)
        registry_names = _names(self.root / "registry")
        assert [name for name in names + registry_names if name.endswith(".tmp")] == []

    @invariant()
    def every_message_is_accounted_for(self) -> None:
        self._account(on_disk=set(self._letters()))

    def _account(self, on_disk: set[str]) -> None:
        contexts = [receiver.context for receiver in self.receivers]
        for context in contexts:
            if context.ledger:
                assert len(context.entered) == len(set(context.entered)), "a ledger re-entered"
        entries = Counter(i for context in contexts for i in context.entered)
        ledger_hits = Counter(i for context in contexts for i in context.ledger_hits)
        logged = list(droplog.read(self.root))
        assert all(drop.reason.startswith("rate:") for drop in logged), logged
        drops = Counter(drop.letter.removesuffix(".json") for drop in logged)
        assert set(entries) | set(drops) <= self.accepted
        held_after_a_take = Counter(
            receiver.taking.message.id
            for receiver in self.receivers
            if receiver.taking is not None and receiver.taking.taken is not None
        )
        for message_id in self.accepted:
            gone = message_id + ".json" not in on_disk
            taken = entries[message_id] + ledger_hits[message_id] + drops[message_id]
            assert taken == (
                gone + self.crashes_after_a_take[message_id] + held_after_a_take[message_id]
            ), (
                f"{message_id}: {entries[message_id]} entries, {ledger_hits[message_id]} "
                f"ledger hits, {drops[message_id]} drops, gone={gone}, "
                f"{self.crashes_after_a_take[message_id]} crashes after a take"
            )
            if gone:  # INV-05: it left the disk only after it entered or was dropped
                assert entries[message_id] + drops[message_id] >= 1
        if sum(entries.values()) > len(entries):
            event("a message entered twice (after a crash between entry and unlink)")
        if drops:
            event("the loop guard dropped a message")

    def _everything_is_taken_at_the_end(self) -> None:
        """Every receiver dies; the first restarts and takes all that is left. Then
        every accepted message entered a context or was dropped with its reason."""
        for index, receiver in enumerate(self.receivers):
            if receiver.host is not None:
                self._crash(index)
        self._start(0)
        assert self._letters() == []
        self._account(on_disk=set())


TestMailboxMachine = MailboxMachine.TestCase
TestMailboxMachine.settings = settings(stateful_step_count=30)


def _names(folder: Path) -> list[str]:
    return sorted(os.listdir(folder)) if folder.is_dir() else []
