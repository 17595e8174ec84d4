"""Loops are bounded in rate (SPEC 6.1): INV-18, and INV-08 on the way.

Tier: must
Operations: set_clock, advance_clock, register, send, deliver, count.

Two or three receiving sessions answer every message they get, as a model that
cannot help replying would: with an identical echo, with a changing counter, or
with a burst. Hypothesis chooses who answers how, who starts talking, when each
session takes its mail (``deliver``) and how time passes (the fake clock).
Whatever it chooses, per sender and receiver no more than 8 messages enter a
context in any 30 s, an identical body at most once in 10 s, no mailbox ever
holds more than 50, and so the exchange is bounded in every window.

Through the driver only (``register``, ``send``, ``deliver``, ``count``, the
clock), so a conformance run points it at a port with PIPOST_IMPL. A session
answers what entered it right after its ``deliver`` returns, at the same instant
on the clock, as a model answering inside its turn would. Each bound is its own
check; the machine stops at the first one broken.
"""

from __future__ import annotations

import enum
import itertools
import math
import shutil
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from pipost_conformance.client import Json, Result
from pipost_conformance.machines import driving
from pipost_conformance.machines.common import NOW
from pipost_conformance.machines.conftest import count_example, count_step
from pipost_conformance.machines.driving import SCRATCH, integer, refusal_code, setup
from pipost_conformance.machines.verdict import SetupFailed, check

MACHINE = "reply loops"


SECOND_MS = 1000
RATE_LIMIT = 8
RATE_WINDOW_MS = 30 * SECOND_MS
DUPLICATE_WINDOW_MS = 10 * SECOND_MS
MAILBOX_CAP = 50

SESSION_IDS = ("loop-session-a", "loop-session-b", "loop-session-c")
KICKER = "process:kick"

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
    """The loop guard's key: the sender's address, or a process's name."""
    body: str
    at: int


@dataclass
class Talker:
    """A receiving session and how it answers."""

    session_id: str
    cwd: str
    address: str
    style: Style
    burst: int
    counter: itertools.count[int]

    def replies(self, body: str) -> list[str]:
        if self.style is Style.ECHO:
            return [body]
        if self.style is Style.COUNTER:
            return [f"answer {next(self.counter)}"]
        return [f"burst {next(self.counter)}" for _ in range(self.burst)]


class LoopsMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        count_example(MACHINE)
        self.tmp = Path(tempfile.mkdtemp(prefix="pipost-loops-", dir=SCRATCH)).resolve()
        self.driver = driving.new_driver(self.tmp)
        self.now = integer(self._world("set_clock", now=NOW)["now"], "the clock")
        self.talkers: list[Talker] = []
        self.entered: list[Entered] = []
        self._checked: dict[tuple[str, str], int] = defaultdict(int)
        self._kicks = itertools.count(1)

    def teardown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _world(self, op: str, **args: Json) -> Result:
        return setup(self.driver.call(op, **args), op)

    @initialize(
        styles=st.lists(st.sampled_from(Style), min_size=2, max_size=3),
        burst=st.integers(2, 6),
    )
    def start_sessions(self, styles: list[Style], burst: int) -> None:
        for session_id, style in zip(SESSION_IDS, styles, strict=False):
            cwd = self.tmp / session_id
            cwd.mkdir(parents=True, exist_ok=True)
            started = self._world("register", session_id=session_id, cwd=str(cwd), name=session_id)
            address = str(started["address"])
            self.talkers.append(
                Talker(session_id, str(cwd), address, style, burst, itertools.count(1))
            )

    # -- who talks, who reads, how time passes ----------------------------------------

    @rule(data=st.data(), body=st.sampled_from(["ping", "status?", "ping again"]))
    def a_session_starts_talking(self, data: st.DataObject, body: str) -> None:
        count_step(MACHINE)
        source, target = data.draw(st.permutations(self.talkers), label="from, to")[:2]
        self.send_unless_full(target.address, body, session=source.session_id, cwd=source.cwd)

    @rule(data=st.data(), times=st.integers(1, 12), identical=st.booleans())
    def a_script_sends_a_burst(self, data: st.DataObject, times: int, identical: bool) -> None:
        """A process with no inbox: the guard keys it by name."""
        count_step(MACHINE)
        target = data.draw(st.sampled_from(self.talkers), label="to")
        for _ in range(times):
            body = "run the tests" if identical else f"step {next(self._kicks)}"
            if not self.send_unless_full(target.address, body, label=KICKER, cwd=str(self.tmp)):
                return

    @rule(data=st.data())
    def a_session_takes_its_mail(self, data: st.DataObject) -> None:
        """Its deliver, then its answers to every message that entered."""
        count_step(MACHINE)
        receiver = data.draw(st.sampled_from(self.talkers), label="session")
        delivered = self._world("deliver", session_id=receiver.session_id)
        entries = delivered.get("entered")
        if not isinstance(entries, list):
            raise SetupFailed(f"deliver answered no list of entries: {delivered}")
        answers: list[tuple[str, str]] = []
        for entry in entries:
            message = entry.get("message") if isinstance(entry, dict) else None
            sender = message.get("from") if isinstance(message, dict) else None
            if not isinstance(message, dict) or not isinstance(sender, dict):
                raise SetupFailed(f"deliver answered an entry that is no message: {entry!r}")
            key = sender.get("address") or sender.get("name")
            self.entered.append(
                Entered(receiver.address, str(key), str(message.get("body")), self.now)
            )
            reply_to = message.get("replyTo")
            if isinstance(reply_to, str):
                answers += [(reply_to, body) for body in receiver.replies(str(message["body"]))]
        for address, body in answers:
            self.send_unless_full(address, body, session=receiver.session_id, cwd=receiver.cwd)

    @rule(ms=PAUSES)
    def time_passes(self, ms: int) -> None:
        count_step(MACHINE)
        self.now = integer(self._world("advance_clock", ms=ms)["now"], "the clock")

    @precondition(lambda self: self.entered)
    @rule(data=st.data(), window=st.sampled_from([DUPLICATE_WINDOW_MS, RATE_WINDOW_MS]))
    def time_passes_to_the_edge_of_a_window(self, data: st.DataObject, window: int) -> None:
        """The instant a guard's window closes over an earlier delivery, or 1 ms before:
        where an off-by-one in the guard would show."""
        count_step(MACHINE)
        entry = data.draw(st.sampled_from(self.entered), label="since")
        edge = entry.at + window - data.draw(st.sampled_from([0, 1]), label="ms before")
        if edge > self.now:
            self.now = integer(self._world("set_clock", now=edge)["now"], "the clock")

    def send_unless_full(self, address: str, body: str, *, cwd: str, **sender: Json) -> bool:
        """A send refused only because the mailbox is full: the answer is lost, the
        message that prompted it is not. False when it was refused."""
        result = self.driver.call("send", targets=[address], body=body, cwd=cwd, **sender)
        if "failed" in result:
            raise SetupFailed(f"send to {address}: {result}")
        if "refused" not in result:
            return True
        queued = self._queued(address)
        check(
            queued == MAILBOX_CAP and refusal_code(result) == "mailbox_full",
            "INV-08",
            f"a send to {address} ({queued} queued) was refused: {result}",
        )
        return False

    def _queued(self, address: str) -> int:
        return integer(self._world("count", address=address)["count"], f"count of {address}")

    # -- the bounds -------------------------------------------------------------------

    def streams(self) -> dict[tuple[str, str], list[Entered]]:
        """What entered each receiver from each sender, in order."""
        by_pair: dict[tuple[str, str], list[Entered]] = defaultdict(list)
        for entry in self.entered:
            by_pair[(entry.receiver, entry.sender)].append(entry)
        return by_pair

    @invariant()
    def no_mailbox_holds_more_than_fifty(self) -> None:
        for talker in self.talkers:
            queued = self._queued(talker.address)
            check(queued <= MAILBOX_CAP, "INV-08", f"{talker.address} holds {queued} letters")

    @invariant()
    def rate_duplicate_and_window_bounds_hold(self) -> None:
        """Checked for every window ending at a delivery new since the last check
        (the older windows were checked then)."""
        for pair, stream in self.streams().items():
            times = [entry.at for entry in stream]
            for newest in range(self._checked[pair], len(stream)):
                end = times[newest]
                in_rate_window = [t for t in times[: newest + 1] if end - t < RATE_WINDOW_MS]
                check(
                    len(in_rate_window) <= RATE_LIMIT,
                    "INV-18",
                    f"{pair}: {len(in_rate_window)} deliveries within 30 s",
                )
                same_body = [e.at for e in stream[:newest] if e.body == stream[newest].body]
                check(
                    not same_body or end - same_body[-1] >= DUPLICATE_WINDOW_MS,
                    "INV-18",
                    f"{pair}: {stream[newest].body!r} twice within 10 s",
                )
                for first in range(newest + 1):
                    span_s = (end - times[first]) / SECOND_MS
                    bound = RATE_LIMIT * math.ceil(span_s / 30) + RATE_LIMIT
                    check(
                        newest - first + 1 <= bound,
                        "INV-18",
                        f"{pair}: {newest - first + 1} deliveries in {span_s} s",
                    )
            self._checked[pair] = len(stream)


LoopsMachine.TestCase.settings = settings(stateful_step_count=20)
TestLoopsMachine = LoopsMachine.TestCase
