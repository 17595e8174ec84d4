"""What becomes of a claimed letter, decided without a disk (reception.py; SPEC 3, 6;
INV-05, INV-06, INV-10, INV-18, INV-20): every row of the decision, in the order of
the receiving steps."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipost.message import Rejected, Sender, new_message
from pipost.policy import ASK_DECLINED, DELIVER, INBOUND_TABLE, WAKES, Admission, Inbound, Resume
from pipost.reception import ENTERS, RECEIPTED, SETTLED, Action, Decision, Facts, decide
from tests.helpers import NOW, python_in

MESSAGE = new_message(Sender("process", "ann"), "hello", NOW)
REJECTED = Rejected("not_json", "not JSON")
RATE = Admission(False, "rate: over 8 messages in 30 s")
REFUSED = "refused: PI_POST_INBOUND=refuse"


def test_a_letter_that_is_not_a_message_is_set_aside_whatever_else_holds() -> None:
    for held in (True, False, None):
        for inbound in Inbound:
            facts = Facts(REJECTED, held=held, inbound=inbound, guard=RATE)
            assert decide(facts) == Decision(Action.SET_ASIDE, "not JSON")


@pytest.mark.parametrize("inbound", list(Inbound))
def test_a_message_the_context_holds_is_only_acknowledged_before_any_mode(
    inbound: Inbound,
) -> None:
    facts = Facts(MESSAGE, held=True, inbound=inbound, can_ask=True, guard=RATE)
    assert decide(facts) == Decision(Action.ACKNOWLEDGE)


@pytest.mark.parametrize("held", [False, None])
@pytest.mark.parametrize(
    ("inbound", "can_ask", "expected"),
    [
        (Inbound.ACCEPT, True, Decision(Action.ENTER)),
        (Inbound.ACCEPT, False, Decision(Action.ENTER)),
        (Inbound.ASK, True, Decision(Action.ASK)),
        (Inbound.ASK, False, Decision(Action.ENTER)),  # no one to ask: accept
        (Inbound.REFUSE, True, Decision(Action.DROP, REFUSED)),
        (Inbound.REFUSE, False, Decision(Action.DROP, REFUSED)),
    ],
)
def test_the_inbound_mode_comes_next(
    held: bool | None, inbound: Inbound, can_ask: bool, expected: Decision
) -> None:
    assert decide(Facts(MESSAGE, held=held, inbound=inbound, can_ask=can_ask)) == expected


def test_every_row_of_the_inbound_table_is_decided() -> None:
    for (inbound, can_ask), verdict in INBOUND_TABLE.items():
        action = decide(Facts(MESSAGE, inbound=inbound, can_ask=can_ask)).action
        expected = Action.ASK if verdict is None else (Action.ENTER if verdict.deliver else None)
        assert action is (expected or Action.DROP), (inbound, can_ask)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (True, Decision(Action.ENTER)),
        (False, Decision(Action.DROP, ASK_DECLINED.reason)),
    ],
)
def test_the_persons_answer_decides_a_message_the_mode_asks_about(
    answer: bool, expected: Decision
) -> None:
    asked = Facts(MESSAGE, inbound=Inbound.ASK, can_ask=True)
    assert decide(asked).action is Action.ASK
    assert decide(asked.replace(answer=answer)) == expected


def test_the_loop_guard_drops_what_the_mode_let_in_with_its_reason() -> None:
    assert decide(Facts(MESSAGE, guard=RATE)) == Decision(Action.DROP, RATE.reason)
    agreed = Facts(MESSAGE, inbound=Inbound.ASK, can_ask=True, guard=RATE, answer=True)
    assert decide(agreed) == Decision(Action.DROP, RATE.reason)


def test_a_mode_that_drops_gives_its_own_reason_not_the_guards() -> None:
    refused = Facts(MESSAGE, inbound=Inbound.REFUSE, guard=RATE)
    assert decide(refused) == Decision(Action.DROP, REFUSED)
    declined = Facts(MESSAGE, inbound=Inbound.ASK, can_ask=True, guard=RATE, answer=False)
    assert decide(declined) == Decision(Action.DROP, ASK_DECLINED.reason)


@pytest.mark.parametrize(("resume", "at_startup"), list(WAKES))
def test_a_message_let_in_enters_waking_the_session_or_staged_as_the_resume_mode_says(
    resume: Resume, at_startup: bool
) -> None:
    decision = decide(Facts(MESSAGE, resume=resume, at_startup=at_startup, guard=DELIVER))
    assert decision.action in ENTERS
    assert ENTERS[decision.action] is WAKES[(resume, at_startup)]
    staged = resume is Resume.STAGE and at_startup
    assert decision.action is (Action.STAGE if staged else Action.ENTER)


def test_what_decide_says_settles_the_letter_and_nothing_else_does() -> None:
    everything = [
        Facts(
            content,
            held=held,
            inbound=inbound,
            can_ask=can_ask,
            resume=resume,
            at_startup=at_startup,
            guard=guard,
            answer=answer,
        )
        for content in (MESSAGE, REJECTED)
        for held in (True, False, None)
        for inbound, can_ask in INBOUND_TABLE
        for resume, at_startup in WAKES
        for guard in (DELIVER, RATE)
        for answer in (None, True, False)
    ]
    decided = {decide(facts).action for facts in everything}
    assert decided - {Action.ASK} == SETTLED  # each one is reachable, and leaves the mailbox
    assert {Action.SET_ASIDE} == (SETTLED - RECEIPTED)  # moved to the quarantine, not unlinked
    assert not (set(Action) - decided) & SETTLED  # failed, deferred, kept, left: queued still


def test_a_verdict_that_gives_no_reason_still_drops_with_one_to_log() -> None:
    """Every drop is logged with why (INV-05): a verdict against delivery that says
    nothing is logged as "dropped", never with an empty reason."""
    for silent in (Admission(False), Admission(False, "")):
        assert decide(Facts(MESSAGE, guard=silent)) == Decision(Action.DROP, "dropped")


def test_facts_left_out_are_a_live_drain_s_with_no_person_to_ask() -> None:
    """Facts' defaults: no UI to ask (so ask falls back to accept) and not the
    start-up drain (so live mail wakes the session even under stage)."""
    assert decide(Facts(MESSAGE, inbound=Inbound.ASK)) == Decision(Action.ENTER)
    assert decide(Facts(MESSAGE, resume=Resume.STAGE)) == Decision(Action.ENTER)


def test_the_decision_loads_no_io_module(tmp_path: Path) -> None:
    probe = (
        "import sys; import pipost.reception; "
        "print(sorted(m for m in ('fcntl', 'pipost.files', 'pipost.mailbox', "
        "'pipost.droplog', 'pipost.host') if m in sys.modules))"
    )
    assert python_in(tmp_path, probe).strip() == "[]"
