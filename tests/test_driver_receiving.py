"""The driver's receiving side (docs/conformance.md, ``deliver`` and ``race``): named
receivers of a session, ledger and plain contexts, a crash between entry and
unlink and the restart that keeps the context, a disk that refuses unlinks, the
resume mode, the poll, retries on the world's clock, and drops as codes."""

from __future__ import annotations

import errno
import json
import os
import re
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from pipost import driver as driver_module
from pipost import droplog, host, mailbox
from pipost.driver import RACE_ENTRY_S, InProcessDriver
from pipost.driver_protocol import DriverError, Json, Result
from pipost.reception import Outcome
from pipost_conformance.client import SubprocessDriver, ValidatingDriver
from tests.helpers import FailingUnlinks, claim_named, entered_count, put

SESSION = "bob-session"


@pytest.fixture
def driver(tmp_path: Path) -> InProcessDriver:
    world = InProcessDriver(tmp_path / "post", home=str(tmp_path))
    world.call("register", session_id=SESSION, cwd=str(tmp_path), name="bob")
    return world


def send(driver: InProcessDriver, body: str, label: str = "process:tester") -> str:
    """Send ``body`` to bob from the process ``label``; one ms per send keeps ids in order."""
    driver.call("advance_clock", ms=1)
    result = driver.call("send", targets=["bob"], body=body, cwd="/", label=label)
    receipt = listed(result["receipts"])[0]
    assert isinstance(receipt, dict) and isinstance(receipt["id"], str)
    return receipt["id"]


def listed(value: Json) -> list[Json]:
    assert isinstance(value, list), value
    return value


def entries(result: Json) -> list[dict[str, Json]]:
    """The entries a receiver reported entered, in a deliver's (or a race's) result."""
    assert isinstance(result, dict), result
    found = [entry for entry in listed(result["entered"]) if isinstance(entry, dict)]
    assert len(found) == len(listed(result["entered"])), result
    return found


def field_of(entry: dict[str, Json], name: str) -> Json:
    """A field of the message an entry carries."""
    sent = entry["message"]
    assert isinstance(sent, dict), entry
    return sent[name]


def bodies(result: Result) -> list[str]:
    return [str(field_of(entry, "body")) for entry in entries(result)]


def queued(driver: InProcessDriver) -> int:
    address = driver.call("address_of", session_id=SESSION)["address"]
    count = driver.call("count", address=address)["count"]
    assert isinstance(count, int)
    return count


# -- a crash between entry and unlink, and the restart --------------------------------


def test_a_receiver_with_a_ledger_restarts_after_a_crash_and_only_unlinks(
    driver: InProcessDriver,
) -> None:
    send(driver, "exactly once")
    crashed = driver.call("deliver", session_id=SESSION, crash="after_entry")
    assert crashed["crashed"] is True
    assert bodies(crashed) == ["exactly once"]
    assert queued(driver) == 1, "the crash came before the unlink"

    restarted = driver.call("deliver", session_id=SESSION)

    assert bodies(restarted) == []
    assert queued(driver) == 0
    assert "crashed" not in restarted


def test_a_plain_context_enters_the_message_again_after_the_crash_once(
    driver: InProcessDriver,
) -> None:
    send(driver, "at least once")
    driver.call("deliver", session_id=SESSION, context="plain", crash="after_entry")

    restarted = driver.call("deliver", session_id=SESSION)

    assert bodies(restarted) == ["at least once"]
    assert queued(driver) == 0
    assert bodies(driver.call("deliver", session_id=SESSION)) == []


def test_a_receiver_restarting_after_a_crash_takes_the_mail_that_waited_as_a_start_does(
    driver: InProcessDriver,
) -> None:
    send(driver, "waited through the crash")
    driver.call("deliver", session_id=SESSION, context="plain", crash="after_entry")

    restarted = driver.call("deliver", session_id=SESSION, resume="stage")

    assert [e["wake"] for e in entries(restarted)] == [False], "staged, not woken"


def test_a_crash_asked_for_when_nothing_enters_does_not_happen(driver: InProcessDriver) -> None:
    result = driver.call("deliver", session_id=SESSION, crash="after_entry")
    assert result == {"entered": [], "dropped": [], "set_aside": [], "crashed": False}
    send(driver, "still running")
    assert bodies(driver.call("deliver", session_id=SESSION)) == ["still running"]


def test_a_crash_leaves_the_letters_after_the_entry_queued_and_drops_their_claims(
    driver: InProcessDriver,
) -> None:
    first, second = send(driver, "one", "process:a"), send(driver, "two", "process:b")
    driver.call("deliver", session_id=SESSION, crash="after_entry")

    other = driver.call("deliver", session_id=SESSION, receiver="another", context="plain")

    # The dead receiver's lock on the first letter ended with it: another takes both.
    entered = [str(field_of(e, "id")) for e in entries(other)]
    assert entered == [first, second]


# -- two receivers, and a disk that refuses unlinks ------------------------------------


def test_a_letter_whose_unlink_is_refused_stays_claimed_and_goes_at_the_next_try(
    driver: InProcessDriver,
) -> None:
    send(driver, "enter me once")
    first = driver.call(
        "deliver", session_id=SESSION, receiver="one", context="plain", fail_unlink=1
    )
    assert bodies(first) == ["enter me once"] and queued(driver) == 1
    driver.call("advance_clock", ms=11_000)  # past the loop guard: it cannot hide a repeat

    other = driver.call("deliver", session_id=SESSION, receiver="two", context="plain")
    again = driver.call("deliver", session_id=SESSION, receiver="one")

    assert bodies(other) == [] and bodies(again) == []
    assert queued(driver) == 0


def test_a_letter_the_real_disk_will_not_let_go_stays_claimed_as_a_refused_unlink(
    driver: InProcessDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not the scenario's failing disk: the file system itself refuses the unlink (a
    mailbox the receiver may not write). The letter entered once, and waits."""
    unlinks = FailingUnlinks(monkeypatch)
    send(driver, "enter me once")
    first = driver.call("deliver", session_id=SESSION, receiver="one", context="plain")
    assert bodies(first) == ["enter me once"] and queued(driver) == 1
    driver.call("advance_clock", ms=11_000)  # past the loop guard: it cannot hide a repeat

    other = driver.call("deliver", session_id=SESSION, receiver="two", context="plain")
    unlinks.failing = False
    again = driver.call("deliver", session_id=SESSION, receiver="one")

    assert bodies(other) == [] and bodies(again) == []
    assert queued(driver) == 0


def test_a_letter_the_file_system_would_not_unlink_is_let_go_when_its_receiver_dies(
    driver: InProcessDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    unlinks = FailingUnlinks(monkeypatch)
    send(driver, "held by a refusing disk")
    driver.call("deliver", session_id=SESSION, receiver="one", context="plain")
    send(driver, "the crash comes here", "process:other")
    crashed = driver.call("deliver", session_id=SESSION, receiver="one", crash="after_entry")
    assert crashed["crashed"] is True
    unlinks.failing = False
    driver.call("advance_clock", ms=11_000)

    other = driver.call("deliver", session_id=SESSION, receiver="survivor", context="plain")

    assert bodies(other) == ["held by a refusing disk", "the crash comes here"]


def test_unlinks_refused_past_a_crash_end_with_the_receiver(driver: InProcessDriver) -> None:
    send(driver, "held, then let go")
    driver.call("deliver", session_id=SESSION, context="plain", fail_unlink=1)
    send(driver, "the crash comes here", "process:other")
    # The disk still refuses the held letter's unlink when the receiver dies.
    driver.call("deliver", session_id=SESSION, crash="after_entry", fail_unlink=1)
    driver.call("advance_clock", ms=11_000)

    other = driver.call("deliver", session_id=SESSION, receiver="survivor", context="plain")

    assert bodies(other) == ["held, then let go", "the crash comes here"]


def test_the_context_and_the_disk_fail_as_many_times_as_asked_and_then_work(
    driver: InProcessDriver,
) -> None:
    """``fail`` and ``fail_unlink`` count: the drain goes on past a failure, so the
    third letter meets a context, and then a disk, that work again."""
    for n in range(3):
        send(driver, f"letter {n}", f"process:sender-{n}")
    failing = driver.call("deliver", session_id=SESSION, context="plain", fail=2)
    assert bodies(failing) == ["letter 2"]
    assert queued(driver) == 2

    driver.call("advance_clock", ms=60_000)  # past both retries
    send(driver, "letter 3", "process:sender-3")
    refusing = driver.call("deliver", session_id=SESSION, context="plain", fail_unlink=2)
    assert bodies(refusing) == ["letter 0", "letter 1", "letter 3"]
    assert queued(driver) == 2, "the disk refused the first two unlinks, not the third"


def test_a_letter_whose_entry_failed_waits_its_retry_delay_on_the_worlds_clock(
    driver: InProcessDriver,
) -> None:
    send(driver, "try me again")
    assert bodies(driver.call("deliver", session_id=SESSION, context="plain", fail=1)) == []
    driver.call("advance_clock", ms=999)
    assert bodies(driver.call("deliver", session_id=SESSION)) == [], "its first delay is 1 s"
    driver.call("advance_clock", ms=1)
    assert bodies(driver.call("deliver", session_id=SESSION)) == ["try me again"]


def test_receivers_racing_on_one_address_enter_each_letter_once(driver: InProcessDriver) -> None:
    sent = [send(driver, f"letter {n}", f"process:sender-{n}") for n in range(40)]

    result = driver.call(
        "race", session_id=SESSION, receivers=["one", "two", "three"], context="plain"
    )

    runs = listed(result["receivers"])
    assert len(runs) == 3
    entered = [str(field_of(e, "id")) for run in runs for e in entries(run)]
    assert Counter(entered) == Counter(sent)
    assert queued(driver) == 0


def test_a_race_whose_receivers_fail_says_the_failure_as_any_operation_does(
    driver: InProcessDriver, tmp_path: Path
) -> None:
    send(driver, "behind a link")
    address = driver.call("address_of", session_id=SESSION)["address"]
    mailbox = tmp_path / "post" / "inbox" / str(address)
    mailbox.rename(tmp_path / "elsewhere")
    mailbox.symlink_to(tmp_path / "elsewhere")

    result = driver.call("race", session_id=SESSION, receivers=["one", "two"], context="plain")

    assert result == {
        "failed": {
            "code": "io_error",
            "text": f"not a folder (a symlink is never followed): {mailbox}",
        }
    }
    assert len(list((tmp_path / "elsewhere").iterdir())) == 1


def test_a_race_in_which_one_receiver_fails_says_that_failure(
    driver: InProcessDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    send(driver, "one receiver fails")
    first = threading.Lock()
    real_drain = host.Host.drain

    def first_drain_fails(receiver: host.Host, *, at_startup: bool = False) -> list[Outcome]:
        if first.acquire(blocking=False):  # one thread only; the other drains as ever
            raise OSError(errno.EIO, os.strerror(errno.EIO), "/post/inbox")
        return real_drain(receiver, at_startup=at_startup)

    monkeypatch.setattr(host.Host, "drain", first_drain_fails)

    result = driver.call("race", session_id=SESSION, receivers=["one", "two"], context="plain")

    assert result == {"failed": {"code": "io_error", "text": "Input/output error: /post/inbox"}}


def test_a_race_makes_its_new_receivers_with_the_context_it_names(
    driver: InProcessDriver,
) -> None:
    driver.call("race", session_id=SESSION, receivers=["one", "two"], context="plain")
    for receiver in ("one", "two"):
        assert bodies(driver.call("deliver", session_id=SESSION, receiver=receiver)) == []
        with pytest.raises(DriverError, match="is not 'ledger'"):
            driver.call("deliver", session_id=SESSION, receiver=receiver, context="ledger")


def test_receivers_that_ran_before_take_the_mail_of_a_race_as_live_mail(
    driver: InProcessDriver,
) -> None:
    """Under resume "stage" only a receiver's start-up drain stages what waits: for a
    receiver that runs on, a race's mail arrived live, and wakes the session."""
    for receiver in ("one", "two"):
        driver.call("deliver", session_id=SESSION, receiver=receiver, resume="stage")
    for n in range(4):
        send(driver, f"live {n}", f"process:sender-{n}")

    result = driver.call("race", session_id=SESSION, receivers=["one", "two"])

    runs = listed(result["receivers"])
    assert [e["wake"] for run in runs for e in entries(run)] == [True] * 4


class RaceLog:
    """What each receiver of a race did, in the order its thread did it: its drains
    (``("drain", at_startup, letters taken, letters entered)``), the pauses of the
    entries inside them (``("entry", s)``) and its pauses between drains (``("pause",
    s)``). A receiver that drains more than ``bound`` times fails the race, which
    then ends instead of hanging the test."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, bound: int = 100) -> None:
        self.threads: dict[int, list[tuple[Json, ...]]] = {}
        draining = threading.local()
        real_drain, real_sleep = host.Host.drain, time.sleep

        def drain(receiver: host.Host, *, at_startup: bool = False) -> list[Outcome]:
            done = self.threads.setdefault(threading.get_ident(), [])
            if len(done) > bound:
                raise AssertionError(f"a receiver drained more than {bound} times")
            draining.now = True
            try:
                taken = real_drain(receiver, at_startup=at_startup)
            finally:
                draining.now = False
            done.append(("drain", at_startup, len(taken), entered_count(taken)))
            return taken

        def sleep(seconds: float) -> None:
            done = self.threads.get(threading.get_ident())
            if done is not None:  # a receiver's thread, once it drained
                done.append(("entry" if draining.now else "pause", seconds))
            real_sleep(seconds)

        monkeypatch.setattr(host.Host, "drain", drain)
        monkeypatch.setattr(time, "sleep", sleep)

    def drains(self) -> list[list[tuple[Json, ...]]]:
        """Each receiver's drains, in order: ``(at_startup, taken, entered)``."""
        return [[e[1:] for e in done if e[0] == "drain"] for done in self.threads.values()]


IDLE_DRAINS = 3
"""RACE_IDLE_DRAINS in the tests that count drains: a few, so a count is quick."""


def paced(done: list[tuple[Json, ...]]) -> list[tuple[Json, ...]]:
    """A receiver's log as a race paces it: each entry takes RACE_ENTRY_S, so
    receivers overlap, and a drain that took nothing is followed by a millisecond's
    pause that leaves the letters to the receivers that hold them."""
    expected: list[tuple[Json, ...]] = []
    for event in done:
        if event[0] == "drain":
            _, _, taken, entered = event
            assert isinstance(entered, int)
            expected += [("entry", RACE_ENTRY_S)] * entered + [event]
            expected += [] if taken else [("pause", 0.001)]
    return expected


def gave_up_idle(drains: list[tuple[Json, ...]]) -> bool:
    """Whether a receiver's drains end with exactly IDLE_DRAINS in a row that took
    nothing: those end its part in the race, and no fewer do."""
    taking = [n for n, (_, taken, _) in enumerate(drains) if taken]
    idle_at_end = len(drains) - (taking[-1] + 1 if taking else 0)
    return idle_at_end == IDLE_DRAINS


def test_a_race_over_one_letter_ends_when_its_taker_took_it(
    driver: InProcessDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The receiver that claimed the letter enters it in its first drain, unlinks it
    at the first try and stops, the mailbox empty; the other drains only while the
    letter is held, if at all."""
    monkeypatch.setattr(driver_module, "RACE_IDLE_DRAINS", IDLE_DRAINS)
    sent = send(driver, "the only letter")
    log = RaceLog(monkeypatch)

    result = driver.call("race", session_id=SESSION, receivers=["one", "two"], context="plain")

    entered = [str(field_of(e, "id")) for run in listed(result["receivers"]) for e in entries(run)]
    assert entered == [sent] and queued(driver) == 0
    # The receivers whose drains entered something: a drain that found the letter
    # gone under its lock takes it too (as "left"), and enters nothing.
    takers = [drains for drains in log.drains() if any(n for _, _, n in drains)]
    assert takers == [[(True, 1, 1)]]
    assert [paced(done) for done in log.threads.values()] == list(log.threads.values())


def race_while_held(
    driver: InProcessDriver, monkeypatch: pytest.MonkeyPatch, held: str
) -> tuple[dict[str, Json], RaceLog]:
    """A race of two receivers while letter ``held`` is locked by a receiver outside
    it, so that the mailbox is never empty: what the race gave, and its log."""
    address = str(driver.call("address_of", session_id=SESSION)["address"])
    claim = claim_named(driver.root, address, f"{held}.json")
    assert claim is not None
    log = RaceLog(monkeypatch)
    try:
        result = driver.call("race", session_id=SESSION, receivers=["one", "two"])
    finally:
        claim.release()
    return result, log


def test_receivers_give_up_a_letter_held_outside_the_race_after_drains_that_take_nothing(
    driver: InProcessDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(driver_module, "RACE_IDLE_DRAINS", IDLE_DRAINS)
    held = send(driver, "held by a receiver outside the race")
    result, log = race_while_held(driver, monkeypatch, held)

    assert [entries(run) for run in listed(result["receivers"])] == [[], []]
    assert log.drains() == [[(True, 0, 0)] + [(False, 0, 0)] * (IDLE_DRAINS - 1)] * 2
    assert [paced(done) for done in log.threads.values()] == list(log.threads.values())


def test_each_receiver_of_a_race_drains_until_it_takes_nothing_more_and_reports_all_it_took(
    driver: InProcessDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A letter held outside the race keeps every receiver draining after the rest
    is taken: each reports what all its drains took, the set-aside letter too."""
    monkeypatch.setattr(driver_module, "RACE_IDLE_DRAINS", IDLE_DRAINS)
    held = send(driver, "held by a receiver outside the race")
    sent = send(driver, "taken in the race", "process:other")
    address = str(driver.call("address_of", session_id=SESSION)["address"])
    not_a_message = "0000000000001-0badbad0.json"
    put(Path(mailbox.inbox_of(driver.root, address)) / not_a_message, b"[]")
    result, log = race_while_held(driver, monkeypatch, held)

    runs = listed(result["receivers"])
    assert [str(field_of(e, "id")) for run in runs for e in entries(run)] == [sent]
    set_aside = [
        letter for run in runs if isinstance(run, dict) for letter in listed(run["set_aside"])
    ]
    assert [letter["name"] for letter in set_aside if isinstance(letter, dict)] == [not_a_message]
    assert len(set_aside) == 1
    for drains in log.drains():
        assert [at_startup for at_startup, _, _ in drains] == [True] + [False] * (len(drains) - 1)
        assert gave_up_idle(drains), drains
    assert [paced(done) for done in log.threads.values()] == list(log.threads.values())


# -- modes, retries, the poll ----------------------------------------------------------


def test_start_up_mail_is_staged_with_resume_stage_and_live_mail_wakes(
    driver: InProcessDriver,
) -> None:
    send(driver, "waiting")
    at_start = driver.call("deliver", session_id=SESSION, resume=" STAGE ")
    send(driver, "live", "process:other")
    live = driver.call("deliver", session_id=SESSION, resume="stage")

    assert [e["wake"] for e in entries(at_start)] == [False]
    assert [e["wake"] for e in entries(live)] == [True]


def test_a_failed_entry_is_retried_once_the_worlds_clock_passed_its_delay(
    driver: InProcessDriver,
) -> None:
    send(driver, "try again")
    assert bodies(driver.call("deliver", session_id=SESSION, fail=1)) == []
    assert bodies(driver.call("deliver", session_id=SESSION)) == [], "retried before its delay"
    driver.call("advance_clock", ms=1_000)
    assert bodies(driver.call("deliver", session_id=SESSION)) == ["try again"]


def test_a_drain_on_the_poll_tick_takes_what_no_event_announced(driver: InProcessDriver) -> None:
    send(driver, "unannounced")
    assert bodies(driver.call("deliver", session_id=SESSION, trigger="poll")) == ["unannounced"]


# -- drops, as codes -------------------------------------------------------------------


def test_drops_give_the_code_and_facts_of_their_rule_and_pipost_words_as_text(
    driver: InProcessDriver, tmp_path: Path
) -> None:
    refused = send(driver, "no thanks")
    by_mode = driver.call("deliver", session_id=SESSION, inbound="refuse")
    send(driver, "echo", "process:looper")
    driver.call("deliver", session_id=SESSION)
    echo = send(driver, "echo", "process:looper")
    by_guard = driver.call("deliver", session_id=SESSION)
    for n in range(8):
        send(driver, f"update {n}", "process:chatty")
    over = send(driver, "one too many", "process:chatty")
    by_rate = driver.call("deliver", session_id=SESSION)

    assert by_mode["dropped"] == [
        {
            "name": f"{refused}.json",
            "reason": {"code": "inbound_refused", "text": "refused: PI_POST_INBOUND=refuse"},
        }
    ]
    assert by_guard["dropped"] == [
        {
            "name": f"{echo}.json",
            "reason": {
                "code": "loop_guard",
                "text": "duplicate: identical body within 10 s",
                "rule": "duplicate",
                "window_ms": 10_000,
            },
        }
    ]
    assert listed(by_rate["dropped"])[-1] == {
        "name": f"{over}.json",
        "reason": {
            "code": "loop_guard",
            "text": "rate: over 8 messages in 30 s",
            "rule": "rate",
            "window_ms": 30_000,
            "limit": 8,
        },
    }
    logged = [drop.reason for drop in droplog.read(tmp_path / "post")]
    assert logged[:2] == [
        "refused: PI_POST_INBOUND=refuse",
        "duplicate: identical body within 10 s",
    ]


# -- misuse ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"crash": "before_entry"}, 'deliver: crash must be "after_entry"'),
        ({"trigger": "inotify"}, 'deliver: trigger must be "event" or "poll"'),
        ({"context": "transcript"}, 'deliver: context must be "ledger" or "plain"'),
        ({"fail_unlink": -1}, "deliver: fail and fail_unlink count"),
    ],
)
def test_a_misused_deliver_is_an_error(
    driver: InProcessDriver, args: dict[str, Json], error: str
) -> None:
    with pytest.raises(DriverError, match="^" + re.escape(error)):
        driver.call("deliver", session_id=SESSION, **args)


def test_a_receivers_context_and_session_are_fixed_when_it_first_runs(
    driver: InProcessDriver,
) -> None:
    driver.call("deliver", session_id=SESSION, receiver="one", context="plain")
    with pytest.raises(DriverError, match="is not 'ledger'"):
        driver.call("deliver", session_id=SESSION, receiver="one", context="ledger")
    with pytest.raises(DriverError, match="receives for another session"):
        driver.call("deliver", session_id="alice-session", receiver="one")
    for receivers in (["one"], ["one", "one"]):
        with pytest.raises(DriverError, match=r"^race: receivers names two or more receivers,"):
            driver.call("race", session_id=SESSION, receivers=list[Json](receivers))


# -- the protocol's schema ------------------------------------------------------------


def test_the_receiving_traffic_validates_against_the_protocols_schema(tmp_path: Path) -> None:
    world = InProcessDriver(tmp_path / "post", home=str(tmp_path))
    checked = ValidatingDriver(world)
    checked.call("register", session_id=SESSION, cwd=str(tmp_path), name="bob")
    for n in range(3):
        checked.call("send", targets=["bob"], body="same", cwd="/", label=f"process:p{n % 2}")
    checked.call("deliver", session_id=SESSION, resume="stage", trigger="poll", fail_unlink=1)
    checked.call("send", targets=["bob"], body="later", cwd="/")
    checked.call("deliver", session_id=SESSION, context="ledger", crash="after_entry")
    checked.call("deliver", session_id=SESSION, inbound="refuse")
    checked.call("send", targets=["bob"], body="raced", cwd="/")
    result = checked.call("race", session_id=SESSION, receivers=["one", "two"], context="plain")
    assert len(listed(result["receivers"])) == 2


# -- over JSON lines -------------------------------------------------------------------


def test_a_crash_and_its_restart_go_through_pi_post_driver(tmp_path: Path) -> None:
    remote = SubprocessDriver([sys.executable, "-m", "pipost", "driver"], timeout_s=30)
    try:
        remote.open(tmp_path / "post", home=str(tmp_path))
        remote.call("register", session_id=SESSION, cwd=str(tmp_path), name="bob")
        remote.call("send", targets=["bob"], body="across the pipe", cwd="/")
        crashed = remote.call("deliver", session_id=SESSION, crash="after_entry")
        restarted = remote.call("deliver", session_id=SESSION)
    finally:
        remote.close()
    assert crashed["crashed"] is True
    assert json.loads(json.dumps(bodies(crashed))) == ["across the pipe"]
    assert bodies(restarted) == []
