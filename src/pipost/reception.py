"""What becomes of a letter a receiving session claimed (SPEC 3, 6; INV-05, INV-06,
INV-10, INV-18, INV-20): the decision, as data.

The session (host.py) gathers the facts about one claimed letter — what it
parsed to, whether the context already holds it, the modes, the loop guard's
verdict, whether this is the start-up drain — and :func:`decide` says what to
do with it. The session carries the action out and reports an :class:`Outcome`
per letter. The order of the checks is the order of the receiving steps (DESIGN
§4): not a message, then the ledger, then the inbound mode (and the person, when
the mode asks), then the guard, then how the text enters. The modes are
policy.py's tables; nothing here touches the disk or the clock.
"""

from __future__ import annotations

import enum

from pipost.message import Message, Rejected
from pipost.policy import ASK_DECLINED, DELIVER, INBOUND_TABLE, WAKES, Admission, Inbound, Resume
from pipost.value import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final


class Action(enum.Enum):
    """What becomes of a claimed letter. :func:`decide` picks one of the first six;
    the last four are what the session reports instead when it could not carry
    the decided action out, the letter left queued."""

    SET_ASIDE = "set aside"
    """Not a message: logged, then moved to the quarantine with its reason (INV-10)."""
    ACKNOWLEDGE = "acknowledge"
    """The context already holds it (it entered before a crash): only the unlink."""
    DROP = "drop"
    """The inbound mode, the person or the loop guard let it go: logged, then unlinked."""
    ASK = "ask"
    """The person decides (PI_POST_INBOUND=ask); decided again with the answer."""
    STAGE = "stage"
    """Enters the context, staged for the first prompt; then unlinked."""
    ENTER = "enter"
    """Enters the context as a steer that wakes the session; then unlinked."""
    FAILED = "failed"
    """The context did not take it: tried again after a delay."""
    DEFERRED = "deferred"
    """The disk failed a step (the drop log, the quarantine): tried again after a delay."""
    KEPT = "kept"
    """The mailbox folder cannot be written, so no unlink could follow: it and the
    letters after it stay queued, untouched."""
    LEFT = "left"
    """Not this session's to take: a receiver that takes no lock took it meanwhile,
    or the stop cut its entry short."""


RECEIPTED: frozenset[Action] = frozenset(
    {Action.ACKNOWLEDGE, Action.DROP, Action.STAGE, Action.ENTER}
)
"""The actions after which the letter is unlinked, the unlink being the sender's
receipt (a letter set aside moves instead)."""

SETTLED: frozenset[Action] = RECEIPTED | {Action.SET_ASIDE}
"""The actions that settle a letter's fate: it leaves the mailbox, never to be tried
again."""

ENTERS: dict[Action, bool] = {Action.ENTER: True, Action.STAGE: False}
"""The actions that put the text in the context, and whether it wakes the session."""

_ENTRY: dict[bool, Action] = {wake: action for action, wake in ENTERS.items()}
_ANSWERS: dict[bool, Admission] = {True: DELIVER, False: ASK_DECLINED}
"""The person's answer (PI_POST_INBOUND=ask) -> what to do before the guard."""


class Facts(Value):
    """What the session knows about one claimed letter when it decides."""

    __slots__ = ("content", "held", "inbound", "can_ask", "resume", "at_startup", "guard", "answer")
    content: Final[Message | Rejected]
    held: Final[bool | None]
    """Whether the context holds the message already; None if it cannot tell."""
    inbound: Final[Inbound]
    can_ask: Final[bool]
    """Whether there is a person to ask (a UI)."""
    resume: Final[Resume]
    at_startup: Final[bool]
    """Whether the letter was found by the drain at start-up."""
    guard: Final[Admission]
    """The loop guard's verdict on the message (LoopGuard.judge)."""
    answer: Final[bool | None]
    """The person's answer, once asked; None before."""

    def __init__(
        self,
        content: Message | Rejected,
        *,
        held: bool | None = None,
        inbound: Inbound = Inbound.ACCEPT,
        can_ask: bool = False,
        resume: Resume = Resume.WAKE,
        at_startup: bool = False,
        guard: Admission = DELIVER,
        answer: bool | None = None,
    ) -> None:
        self.content = content
        self.held = held
        self.inbound = inbound
        self.can_ask = can_ask
        self.resume = resume
        self.at_startup = at_startup
        self.guard = guard
        self.answer = answer


class Decision(Value):
    __slots__ = ("action", "reason")
    action: Final[Action]
    reason: Final[str | None]
    """Why: for a letter set aside, its rejection (kept beside it in the quarantine);
    for a drop, the verdict's reason (logged; never the body)."""

    def __init__(self, action: Action, reason: str | None = None) -> None:
        self.action = action
        self.reason = reason


def decide(facts: Facts) -> Decision:
    """What to do with the letter ``facts`` describe."""
    content = facts.content
    if isinstance(content, Rejected):
        return Decision(Action.SET_ASIDE, content.reason)
    if facts.held:
        return Decision(Action.ACKNOWLEDGE)
    admission = INBOUND_TABLE[(facts.inbound, facts.can_ask)]
    if admission is None:  # the mode asks the person
        if facts.answer is None:
            return Decision(Action.ASK)
        admission = _ANSWERS[facts.answer]
    for verdict in (admission, facts.guard):
        if not verdict.deliver:
            return Decision(Action.DROP, verdict.reason or "dropped")
    return Decision(_ENTRY[WAKES[(facts.resume, facts.at_startup)]])


class Outcome(Value):
    """What became of one letter a drain looked at (Host.drain returns them)."""

    __slots__ = ("name", "action", "reason", "message_id", "rejected")
    name: Final[str]
    """The letter's file name in the mailbox."""
    action: Final[Action]
    reason: Final[str | None]
    """Why it was set aside or dropped, as logged; why it failed or stayed queued."""
    message_id: Final[str | None]
    """The message's id; None for a letter that is not a message."""
    rejected: Final[Rejected | None]
    """For a letter set aside, why it is not a message (its code and facts)."""

    def __init__(
        self,
        name: str,
        action: Action,
        reason: str | None = None,
        message_id: str | None = None,
        rejected: Rejected | None = None,
    ) -> None:
        self.name = name
        self.action = action
        self.reason = reason
        self.message_id = message_id
        self.rejected = rejected
