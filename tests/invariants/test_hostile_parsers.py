"""pipost's own parsers and words under hostile input (not a check of a port:
test_hostile_input.py judges an implementation through the driver).

- pipost's rejection reasons are never empty and hold no raw control character
  (they reach the drop log, quarantine notes and terminals);
- every truncation of a valid letter, at every length, is rejected by pipost's
  parser (the driver-level module cuts at drawn lengths);
- a letter over the read limit is rejected before it is decoded, the reason
  naming the limit;
- pipost's record parser (session.parse), which no operation of the driver
  exposes, is strict and total like the letter parser;
- what pipost's receiving session sets aside it keeps in quarantine, each letter
  under its name (quarantine rather than delete: pipost's choice).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from pipost import quarantine, session
from pipost.host import Delivery, Host
from pipost.message import LETTER_READ_LIMIT, Message, Rejected, Sender, encode, new_message, parse
from pipost.post import Post
from pipost.session import Record
from pipost_conformance.machines.conftest import count_example, count_step
from pipost_conformance.machines.hostile import (
    ADDRESS_GRAMMAR,
    MESSAGE_FIELDS,
    RECEIVER,
    RECEIVER_ADDRESS,
    InboxEntry,
    arbitrary_bytes,
    budget,
    file_names,
    flipped,
    hostile_records,
    inbox_entries,
    lay_inbox,
    mutated,
    scratch_tree,
    valid_letters,
)
from tests.helpers import NOW, FakeProcessTable, FixedClock, made

# What a reason may not hold: it reaches the drop log, quarantine notes and terminals.
RAW_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


@budget(gate=300, thorough=25_000)
@given(
    st.one_of(arbitrary_bytes, flipped(valid_letters), mutated(valid_letters, MESSAGE_FIELDS)),
    file_names,
)
def test_rejection_reasons_are_given_and_terminal_safe(raw: bytes, file_name: str | None) -> None:
    count_example("pipost parse: reasons")
    outcome = parse(raw, file_name)
    if isinstance(outcome, Rejected):
        assert outcome.reason, "a rejection gives its reason"
        assert not RAW_CONTROL.search(outcome.reason), outcome.reason


@budget(gate=40, thorough=3_000)
@given(valid_letters)
def test_every_truncation_of_a_valid_letter_is_rejected(letter: bytes) -> None:
    count_example("pipost parse: truncations")
    assert isinstance(parse(letter), Message), "the whole letter is valid"
    for length in range(len(letter)):
        count_step("pipost parse: truncations")
        assert isinstance(parse(letter[:length]), Rejected), length


def test_a_huge_valid_looking_letter_is_rejected_before_it_is_decoded() -> None:
    letter = encode(new_message(Sender("process", "big"), "x", NOW))
    padded = letter[:-1] + b" " * LETTER_READ_LIMIT + b"}"
    outcome = parse(padded)
    assert isinstance(outcome, Rejected)
    assert str(LETTER_READ_LIMIT) in outcome.reason


# -- session.parse -------------------------------------------------------------------


def expected_address(session_id: str) -> str:
    digest = hashlib.sha256(b"session\x00" + session_id.encode("utf-8")).hexdigest()
    return "s-" + digest[:12]


def check_record_outcome(raw: bytes, file_name: str | None) -> Record | Rejected:
    outcome = session.parse(raw, file_name)
    assert isinstance(outcome, (Record, Rejected)), outcome
    if isinstance(outcome, Rejected):
        assert outcome.reason
        return outcome
    assert ADDRESS_GRAMMAR.fullmatch(outcome.address), outcome.address
    assert outcome.address == expected_address(outcome.session_id)
    for text in (outcome.name, outcome.cwd, outcome.session_id):
        assert text and text.encode("utf-8")
    if file_name is not None:
        assert file_name == outcome.address + ".json"
    again = session.parse(session.encode(outcome), outcome.address + ".json")
    assert isinstance(again, Record)
    assert essentials(again) == essentials(outcome), "re-encoding changed the record"
    return outcome


def essentials(record: Record) -> tuple[object, ...]:
    """What a record says. A start time without a pid, or an empty one, says nothing
    (presence ignores it, and the writer leaves it out)."""
    pid_start = (record.pid_start or None) if record.pid is not None else None
    return (
        record.address,
        record.session_id,
        record.name,
        record.cwd,
        record.started_at,
        record.last_seen,
        record.pid,
        pid_start,
    )


@budget(gate=300, thorough=25_000)
@given(hostile_records, file_names | st.just("s-5b225c9adef5.json"))
def test_registry_parse_survives_hostile_record_bytes(raw: bytes, file_name: str | None) -> None:
    count_example("hostile parse: registry records")
    check_record_outcome(raw, file_name)


# -- quarantine ----------------------------------------------------------------------


class Keeping:
    """A context that takes everything."""

    def holds(self, message_id: str) -> bool | None:
        return None

    def enter(self, delivery: Delivery) -> bool:
        return True


@budget(gate=15, thorough=500)
@given(st.lists(inbox_entries, min_size=1, max_size=12))
def test_what_is_set_aside_is_kept_in_quarantine(entries: list[InboxEntry]) -> None:
    count_example("pipost: quarantine")
    with scratch_tree() as base:
        root, outside = base / "post", base / "outside"
        inbox = made(root, "inbox", RECEIVER_ADDRESS)
        outside.mkdir(mode=0o700)
        laid = lay_inbox(inbox, outside, entries)
        receiver = Host(
            Post(root, clock=FixedClock(), processes=FakeProcessTable()),
            RECEIVER,
            str(base),
            Keeping(),
            kernel_events=False,
        )
        receiver.start()
        try:
            set_aside = {entry.name: entry.reason for entry in quarantine.quarantined(root)}
            assert set(set_aside) == laid.bad
            assert all(set_aside.values()), "each with its reason"
            kept = Path(quarantine.quarantine_of(root, RECEIVER_ADDRESS))
            for name in laid.bad:
                assert os.path.lexists(kept / name)
        finally:
            receiver.stop()
