"""Inbound and resume modes, and the loop guard (SPEC 3, 6; INV-18, INV-20)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipost.policy import (
    INBOUND_TABLE,
    WAKES,
    Admission,
    Inbound,
    LoopGuard,
    Resume,
    inbound_mode,
    is_unknown_mode,
    resume_mode,
)

SECOND = 1000


@pytest.mark.parametrize(
    ("value", "mode"),
    [
        ("accept", Inbound.ACCEPT),
        ("ask", Inbound.ASK),
        ("refuse", Inbound.REFUSE),
        ("REFUSE", Inbound.REFUSE),
        (" ask\n", Inbound.ASK),
        ("", Inbound.ACCEPT),
        (None, Inbound.ACCEPT),
        ("deny", Inbound.ACCEPT),
        ("refused", Inbound.ACCEPT),
    ],
)
def test_inbound_mode(value: str | None, mode: Inbound) -> None:
    assert inbound_mode(value) is mode


@pytest.mark.parametrize(
    ("value", "mode"),
    [
        ("wake", Resume.WAKE),
        ("stage", Resume.STAGE),
        ("Stage ", Resume.STAGE),
        ("", Resume.WAKE),
        (None, Resume.WAKE),
        ("sleep", Resume.WAKE),
    ],
)
def test_resume_mode(value: str | None, mode: Resume) -> None:
    assert resume_mode(value) is mode


@pytest.mark.parametrize(
    ("modes", "value", "unknown"),
    [
        (Inbound, "refuse", False),  # a mode other than the default
        (Inbound, " ASK\n", False),
        (Inbound, "accept", False),
        (Inbound, None, False),  # unset and blank mean the default, and say nothing
        (Inbound, " ", False),
        (Inbound, "deny", True),
        (Resume, "stage", False),
        (Resume, "sleep", True),
    ],
)
def test_only_a_value_that_names_no_mode_is_unknown(
    modes: type[Inbound] | type[Resume], value: str | None, unknown: bool
) -> None:
    """The session warns once about a mode variable that names none of its modes
    (it means the default); a mode spelled in any case, or none, is no news."""
    assert is_unknown_mode(modes, value) is unknown


def test_inbound_table_covers_every_mode_with_and_without_a_person() -> None:
    assert set(INBOUND_TABLE) == set(itertools.product(Inbound, (True, False)))


@pytest.mark.parametrize("can_ask", [True, False])
def test_accept_delivers(can_ask: bool) -> None:
    verdict = INBOUND_TABLE[Inbound.ACCEPT, can_ask]
    assert verdict is not None
    assert verdict.deliver


def test_ask_asks_the_person_where_there_is_one() -> None:
    assert INBOUND_TABLE[Inbound.ASK, True] is None


def test_ask_without_a_person_accepts() -> None:
    verdict = INBOUND_TABLE[Inbound.ASK, False]
    assert verdict is not None
    assert verdict.deliver


@pytest.mark.parametrize("can_ask", [True, False])
def test_refuse_drops_with_a_reason(can_ask: bool) -> None:
    verdict = INBOUND_TABLE[Inbound.REFUSE, can_ask]
    assert verdict is not None
    assert not verdict.deliver
    assert verdict.reason is not None
    assert "refuse" in verdict.reason


def test_only_staged_mail_found_at_start_up_waits_for_the_first_prompt() -> None:
    assert set(WAKES) == set(itertools.product(Resume, (True, False)))
    assert [key for key, wakes in WAKES.items() if not wakes] == [(Resume.STAGE, True)]


# -- the loop guard -----------------------------------------------------------------


def offer(guard: LoopGuard, sender: str, body: str, now: int) -> Admission:
    """What a receiver does: judge, and record what it lets into context."""
    verdict = guard.judge(sender, body, now)
    if verdict.deliver:
        guard.admit(sender, body, now)
    return verdict


def test_an_identical_body_within_10_s_is_dropped_and_accepted_after() -> None:
    guard = LoopGuard()
    assert offer(guard, "s-52c78af935a3", "ping", 0).deliver
    dropped = offer(guard, "s-52c78af935a3", "ping", 10 * SECOND - 1)
    assert not dropped.deliver
    assert dropped.reason is not None
    assert dropped.reason.startswith("duplicate")
    assert offer(guard, "s-52c78af935a3", "ping", 10 * SECOND).deliver


def test_a_dropped_duplicate_does_not_extend_the_window() -> None:
    guard = LoopGuard()
    assert offer(guard, "a", "ping", 0).deliver
    assert not offer(guard, "a", "ping", 9 * SECOND).deliver
    assert offer(guard, "a", "ping", 10 * SECOND).deliver


def test_duplicates_are_counted_per_sender() -> None:
    guard = LoopGuard()
    assert offer(guard, "a", "ping", 0).deliver
    assert offer(guard, "b", "ping", 0).deliver
    assert offer(guard, "a", "pong", 0).deliver


def test_the_9th_message_within_30_s_is_dropped() -> None:
    guard = LoopGuard()
    for n in range(8):
        assert offer(guard, "a", f"message {n}", n * SECOND).deliver
    dropped = offer(guard, "a", "message 8", 29 * SECOND)
    assert not dropped.deliver
    assert dropped.reason is not None
    assert dropped.reason.startswith("rate")
    assert offer(guard, "b", "message 8", 29 * SECOND).deliver
    # The first delivery (at 0) leaves the window at 30 s.
    assert offer(guard, "a", "message 8", 30 * SECOND).deliver
    assert not offer(guard, "a", "message 9", 30 * SECOND).deliver


def test_judging_alone_records_nothing() -> None:
    # A delivery that failed is judged again on retry; it is not its own duplicate.
    guard = LoopGuard()
    for _ in range(20):
        assert guard.judge("a", "ping", 0).deliver


offers = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]),
        st.sampled_from(["ping", "pong", "ack", "ping "]),
        st.integers(min_value=0, max_value=6 * SECOND),
    ),
    max_size=80,
)


@given(offers)
def test_delivered_messages_keep_both_caps_and_only_a_cap_drops(
    steps: list[tuple[str, str, int]],
) -> None:
    guard = LoopGuard()
    delivered: dict[str, list[tuple[int, str]]] = {"a": [], "b": []}
    now = 0
    for sender, body, step in steps:
        now += step
        past = delivered[sender]
        verdict = offer(guard, sender, body, now)
        recent = [t for t, _ in past if now - t < 30 * SECOND]
        echo = [t for t, b in past if b == body and now - t < 10 * SECOND]
        # Dropped exactly when delivering would break a cap.
        assert verdict.deliver == (len(recent) < 8 and not echo)
        if verdict.deliver:
            past.append((now, body))
    for past in delivered.values():
        times = [t for t, _ in past]
        # No 9 deliveries from one sender within any 30 s.
        assert all(
            later - first >= 30 * SECOND for first, later in zip(times, times[8:], strict=False)
        )
        for body in {b for _, b in past}:
            same = [t for t, b in past if b == body]
            assert all(later - first >= 10 * SECOND for first, later in itertools.pairwise(same))
