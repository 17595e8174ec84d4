"""Sessions, their processes and the clock; presence and records."""

from __future__ import annotations

from behave import given, step, then, when
from behave.runner import Context

from pipost_conformance.features.steps.feature_world import (
    QUOTED,
    checks,
    duration_ms,
    int_of,
    text_of,
    use_regular_expressions,
    world,
)

use_regular_expressions()


# -- the clock ------------------------------------------------------------------------


@step(r"the clock reads (\d+)")
def clock_reads(context: Context, now: str) -> None:
    world(context).call("set_clock", now=int(now))


@step(r"the clock advances by (.+)")
def clock_advances(context: Context, duration: str) -> None:
    world(context).call("advance_clock", ms=duration_ms(duration))


@step(r"the wall clock steps back by (.+)")
def clock_steps_back(context: Context, duration: str) -> None:
    """The machine's clock set back (by hand, or by NTP): no time passes, and a clock
    that never steps stays where it was (docs/conformance.md)."""
    world(context).call("advance_clock", ms=-duration_ms(duration))


# -- sessions -------------------------------------------------------------------------


@given(f"a live session {QUOTED} in {QUOTED}")
def live_session(context: Context, label: str, cwd: str) -> None:
    world(context).register(label, cwd)


@given(f"a live session {QUOTED} with id {QUOTED} in {QUOTED}")
def live_session_with_id(context: Context, label: str, session_id: str, cwd: str) -> None:
    world(context).register(label, cwd, session_id=session_id)


@given(f"a live session {QUOTED} with id {QUOTED} registered without a name in {QUOTED}")
def unnamed_session(context: Context, label: str, session_id: str, cwd: str) -> None:
    world(context).register(label, cwd, session_id=session_id, named=False)


@given(f"a stalled session {QUOTED} in {QUOTED}")
def stalled_session(context: Context, label: str, cwd: str) -> None:
    world(context).register(label, cwd, presence="stalled", unseen_ms=60_000)


@given(f"an offline session {QUOTED} in {QUOTED} last seen (.+) ago")
def offline_session(context: Context, label: str, cwd: str, duration: str) -> None:
    world(context).register(label, cwd, presence="offline", unseen_ms=duration_ms(duration))


@given(f"a session {QUOTED} in {QUOTED} that is (live|stalled|offline), last seen (.+) ago")
def session_seen(context: Context, label: str, cwd: str, presence: str, duration: str) -> None:
    world(context).register(label, cwd, presence=presence, unseen_ms=duration_ms(duration))


@given(f"the record of {QUOTED} holds the start time of its process")
def record_holds_start(context: Context, label: str) -> None:
    """What the MUST of SPEC 2 on reused pids depends on; a record without it is
    judged by the SHOULD scenario alone, so this one is not checked."""
    record = world(context).record(label)
    if record is None or "pidStart" not in record:
        reason = "the record holds no pidStart: SPEC 2 lets presence go by the pid alone"
        context.skip_reason = reason
        context.scenario.skip(reason)


@step(f"{QUOTED} shuts down")
def shuts_down(context: Context, label: str) -> None:
    the = world(context)
    the.act("shutdown", session_id=the.session(label).session_id)


@step(f"{QUOTED} heartbeats")
def heartbeats(context: Context, label: str) -> None:
    the = world(context)
    the.act("heartbeat", session_id=the.session(label).session_id)


@step(f"the process of {QUOTED} exits")
def process_exits(context: Context, label: str) -> None:
    the = world(context)
    the.call("process_stop", pid=the.session(label).pid)


@step(f"the pid of {QUOTED} is taken by an unrelated process")
def pid_recycled(context: Context, label: str) -> None:
    the = world(context)
    the.call("process_recycle", pid=the.session(label).pid)


@when(f"{QUOTED} starts again in {QUOTED}")
def starts_again(context: Context, label: str, cwd: str) -> None:
    the = world(context)
    the.register(label, cwd, session_id=the.session(label).session_id)


# -- what the records say -------------------------------------------------------------


@then(f"{QUOTED} is (live|stalled|offline)")
@checks("INV-15", "INV-14")
def has_presence(context: Context, label: str, presence: str) -> None:
    the = world(context)
    found = the.call("record", address=the.address(label))["presence"]
    assert found is not None, f"[INV-14] {label} has no record: it is no session any more"
    assert found == presence, f"[INV-15] {label} is {found}, not {presence}"


@then(f"{QUOTED} has the address it had before")
@checks("INV-01")
def same_address(context: Context, label: str) -> None:
    the = world(context)
    assert the.session(label).address == the.first_address[label], (
        f"{the.session(label).address} != {the.first_address[label]}"
    )


@then(f"the record of {QUOTED} names the directory {QUOTED} and the pid of its process")
@checks("INV-13", "INV-15")
def record_names(context: Context, label: str, cwd: str) -> None:
    the = world(context)
    record = the.record(label)
    assert record is not None, f"{label} has no record"
    assert record["cwd"] == the.expand(cwd), record
    assert int_of(record["pid"]) == the.session(label).pid, record


@then(f"the record of {QUOTED} is still there, without a pid")
@checks("INV-14")
def record_without_pid(context: Context, label: str) -> None:
    record = world(context).record(label)
    assert record is not None, f"the record of {label} is gone"
    assert "pid" not in record, record


@then(f"{QUOTED} is named {QUOTED}")
@checks("INV-13")
def is_named(context: Context, label: str, name: str) -> None:
    record = world(context).record(label)
    assert record is not None, f"{label} has no record"
    assert text_of(record["name"]) == name, record
