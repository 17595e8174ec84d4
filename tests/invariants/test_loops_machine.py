"""Loops terminate structurally (SPEC 6; INV-18).

Two or three receiving sessions — real Host objects over one tmp root, with an
injected clock — answer every message they get, as a model that cannot help
replying would: with an identical echo, with a changing counter, or with a burst.
Hypothesis chooses who answers how, who starts talking, when each session takes
its mail and how time passes. Whatever it chooses, per sender and receiver no
more than 8 messages enter a context in any 30 s, an identical body at most once
in 10 s, no mailbox ever holds more than 50, and so the exchange is bounded in
every window.

The hosts run in-process and are driven step by step (drain), not by their serve
loop: the driver offers no receiving session, so this machine uses the modules.
"""

from __future__ import annotations

import enum
import itertools
import math
import os
import shutil
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from pipost import mailbox
from pipost.host import Delivery, Host
from pipost.message import Sender
from pipost.post import Post, Refused
from pipost.resolve import Caller
from tests.helpers import NOW, FakeProcessTable
from tests.invariants.conftest import count_example, count_step

MACHINE = "reply loops"

SECOND_MS = 1000
RATE_LIMIT = 8
RATE_WINDOW_MS = 30 * SECOND_MS
DUPLICATE_WINDOW_MS = 10 * SECOND_MS
MAILBOX_CAP = 50

SESSION_IDS = ("loop-session-a", "loop-session-b", "loop-session-c")
KICKER = "process:kick"

SCRATCH = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
"""Where each example's root goes: a memory filesystem where there is one. The
bounds are about counts, not durability, and every letter is flushed (fsync),
which on a disk would dominate the run."""

# Pauses around the guard's windows, and free ones.
PAUSES = st.one_of(
    st.sampled_from(
        [
            0,
            1,
            DUPLICATE_WINDOW_MS - 1,
            DUPLICATE_WINDOW_MS,
            RATE_WINDOW_MS - 1,
            RATE_WINDOW_MS,
        ]
    ),
    st.integers(0, 2 * RATE_WINDOW_MS),
)


class Style(enum.Enum):
    ECHO = "echo"
    """Answers with the body it got, word for word."""
    COUNTER = "counter"
    """Answers with a new body every time."""
    BURST = "burst"
    """Answers with several new bodies at once."""


@dataclass(frozen=True)
class Entered:
    """One message that entered a context."""

    receiver: str
    sender: str
    body: str
    at: int


class Answering:
    """A context that records what entered it and answers the sender at once."""

    def __init__(self, machine: LoopsMachine, style: Style, burst: int) -> None:
        self.machine = machine
        self.style = style
        self.burst = burst
        self.host: Host | None = None
        self._counter = itertools.count(1)

    def holds(self, message_id: str) -> bool | None:
        return None

    def enter(self, delivery: Delivery) -> bool:
        receiver = self.host
        assert receiver is not None
        message = delivery.message
        self.machine.entered.append(
            Entered(receiver.address, message.sender.key, message.body, self.machine.now)
        )
        if message.reply_to is None:
            return True
        for body in self.replies(message.body):
            self.machine.send_unless_full(receiver, message.reply_to, body)
        return True

    def replies(self, body: str) -> list[str]:
        if self.style is Style.ECHO:
            return [body]
        if self.style is Style.COUNTER:
            return [f"answer {next(self._counter)}"]
        return [f"burst {next(self._counter)}" for _ in range(self.burst)]


class LoopsMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        count_example(MACHINE)
        self.tmp = Path(tempfile.mkdtemp(prefix="pipost-loops-", dir=SCRATCH)).resolve()
        self.now = NOW
        # Every host runs in this process; the table says it is the one that registered.
        processes = FakeProcessTable({os.getpid(): "this-process"})
        self.post = Post(self.tmp / "post", clock=lambda: self.now, processes=processes)
        self.post.receipt_wait = 0.0  # nobody else takes mail while a step runs
        self.hosts: list[Host] = []
        self.entered: list[Entered] = []
        self._checked: dict[tuple[str, str], int] = defaultdict(int)
        self._kicks = itertools.count(1)

    def teardown(self) -> None:
        for receiver in self.hosts:
            receiver.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def send(self, source: Host, address: str, body: str) -> None:
        sender = Sender("session", source.name or source.session_id, source.address, source.cwd)
        caller = Caller(cwd=source.cwd, home=str(self.tmp), canonical=os.path.realpath)
        self.post.send([address], body, sender, caller, reply_to=source.address)

    @initialize(
        styles=st.lists(st.sampled_from(Style), min_size=2, max_size=3),
        burst=st.integers(2, 6),
    )
    def start_sessions(self, styles: list[Style], burst: int) -> None:
        for session_id, style in zip(SESSION_IDS, styles, strict=False):
            cwd = self.tmp / session_id
            cwd.mkdir()
            context = Answering(self, style, burst)
            receiver = Host(
                self.post, session_id, str(cwd), context, name=session_id, kernel_events=False
            )
            context.host = receiver
            self.hosts.append(receiver)
            receiver.start()

    # -- who talks, who reads, how time passes ----------------------------------------

    @rule(data=st.data(), body=st.sampled_from(["ping", "status?", "ping again"]))
    def a_session_starts_talking(self, data: st.DataObject, body: str) -> None:
        count_step(MACHINE)
        source, target = data.draw(st.permutations(self.hosts), label="from, to")[:2]
        self.send_unless_full(source, target.address, body)

    @rule(data=st.data(), times=st.integers(1, 12), identical=st.booleans())
    def a_script_sends_a_burst(self, data: st.DataObject, times: int, identical: bool) -> None:
        """A process with no inbox: the guard keys it by name."""
        count_step(MACHINE)
        target = data.draw(st.sampled_from(self.hosts), label="to")
        caller = Caller(cwd=str(self.tmp), home=str(self.tmp), canonical=os.path.realpath)
        for _ in range(times):
            body = "run the tests" if identical else f"step {next(self._kicks)}"
            try:
                self.post.send([target.address], body, Sender("process", KICKER), caller)
            except Refused:
                assert mailbox.count(self.post.root, target.address) == MAILBOX_CAP
                return

    @rule(data=st.data())
    def a_session_takes_its_mail(self, data: st.DataObject) -> None:
        count_step(MACHINE)
        receiver = data.draw(st.sampled_from(self.hosts), label="session")
        receiver.drain()
        # The host swallows what the context raises (a failed entry is retried), so
        # a failed check inside an answer shows here.
        assert receiver.stats.failed_entries == 0, "an answer failed other than to a full mailbox"
        # It answers others, never itself: what it held was all taken or dropped.
        assert mailbox.count(self.post.root, receiver.address) == 0

    @rule(ms=PAUSES)
    def time_passes(self, ms: int) -> None:
        count_step(MACHINE)
        self.now += ms

    @precondition(lambda self: self.entered)
    @rule(data=st.data(), window=st.sampled_from([DUPLICATE_WINDOW_MS, RATE_WINDOW_MS]))
    def time_passes_to_the_edge_of_a_window(self, data: st.DataObject, window: int) -> None:
        """The instant a guard's window closes over an earlier delivery, or 1 ms before:
        where an off-by-one in the guard would show."""
        count_step(MACHINE)
        entry = data.draw(st.sampled_from(self.entered), label="since")
        edge = entry.at + window - data.draw(st.sampled_from([0, 1]), label="ms before")
        self.now = max(self.now, edge)

    def send_unless_full(self, source: Host, address: str, body: str) -> None:
        """A send refused only because the mailbox is full: the answer is lost, the
        message that prompted it is not."""
        try:
            self.send(source, address, body)
        except Refused:
            assert mailbox.count(self.post.root, address) == MAILBOX_CAP

    # -- the bounds -------------------------------------------------------------------

    def streams(self) -> dict[tuple[str, str], list[Entered]]:
        """What entered each receiver from each sender, in order."""
        by_pair: dict[tuple[str, str], list[Entered]] = defaultdict(list)
        for entry in self.entered:
            by_pair[(entry.receiver, entry.sender)].append(entry)
        return by_pair

    @invariant()
    def no_mailbox_holds_more_than_fifty(self) -> None:
        for receiver in self.hosts:
            assert mailbox.count(self.post.root, receiver.address) <= MAILBOX_CAP

    @invariant()
    def rate_duplicate_and_window_bounds_hold(self) -> None:
        """Checked for every window ending at a delivery new since the last check
        (the older windows were checked then)."""
        for pair, stream in self.streams().items():
            times = [entry.at for entry in stream]
            for newest in range(self._checked[pair], len(stream)):
                end = times[newest]
                in_rate_window = [t for t in times[: newest + 1] if end - t < RATE_WINDOW_MS]
                assert len(in_rate_window) <= RATE_LIMIT, (
                    f"{pair}: {len(in_rate_window)} deliveries within 30 s"
                )
                same_body = [e.at for e in stream[:newest] if e.body == stream[newest].body]
                assert not same_body or end - same_body[-1] >= DUPLICATE_WINDOW_MS, (
                    f"{pair}: {stream[newest].body!r} twice within 10 s"
                )
                for first in range(newest + 1):
                    span_s = (end - times[first]) / SECOND_MS
                    bound = RATE_LIMIT * math.ceil(span_s / 30) + RATE_LIMIT
                    assert newest - first + 1 <= bound, (
                        f"{pair}: {newest - first + 1} deliveries in {span_s} s"
                    )
            self._checked[pair] = len(stream)


LoopsMachine.TestCase.settings = settings(stateful_step_count=20)
TestLoopsMachine = LoopsMachine.TestCase
