"""How the implementation writes, as its system calls show it (SPEC 1, 3.1, 3.3):
one operation run by a second process of the implementation under strace, on the
scenario's root (``pipost_conformance.tracing``), and the trace judged by
``pipost_conformance.syscalls``. Where nothing can trace, the scenario is not
checked (``context.not_checked``, which environment.py reports)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from behave import given, then, when
from behave.runner import Context

from pipost_conformance import syscalls, tracing
from pipost_conformance.client import Json, Result
from pipost_conformance.features.steps.feature_world import (
    QUOTED,
    checks,
    dict_of,
    list_of,
    session_id_for,
    text_of,
    use_regular_expressions,
    world,
)

use_regular_expressions()


@given("the implementation's system calls can be traced")
def can_trace(context: Context) -> None:
    why = tracing.why_untraceable()
    if why is not None:
        context.not_checked = why
        context.scenario.skip(why)


def _traced(context: Context) -> tracing.Traced:
    """A second process of the implementation under test, under strace, on the
    scenario's root."""
    the = world(context)
    external = context.implementation.external
    command = list(external.argv) if external is not None else tracing.PIPOST_DRIVER
    timeout_s = (
        external.timeout_s
        if external is not None
        else float(os.environ.get("PIPOST_TIMEOUT") or 60)
    )
    return tracing.Traced(command, the.root, home=the.home, timeout_s=timeout_s)


def _recorded(
    context: Context, op: str, args: dict[str, Json], call: Callable[[], Result]
) -> Result:
    """The traced call, in the scenario's exchange as the reports show it."""
    result: Result = context.implementation.recorder.record(op, args, call)
    return result


def _keep(context: Context, traced: tracing.Traced, written: Path) -> None:
    """What a scenario judges: the trace and the file the call wrote or took. That
    the trace shows the file named and the answer after it is a precondition."""
    path = os.path.realpath(written)
    named = syscalls.namings(traced.events, path)
    assert named, f"the trace shows no call that gave {path} its name:\n{traced.text[-2000:]}"
    assert syscalls.answer_after(traced.events, named[-1].index) is not None, (
        f"the trace shows no answer written after {named[-1].shown()}"
    )
    context.trace = traced.events
    context.traced_path = path


@when(f"I send {QUOTED} to {QUOTED}, its system calls traced")
def send_traced(context: Context, body: str, target: str) -> None:
    the = world(context)
    args: dict[str, Json] = {
        "targets": [the.address(target)],
        "body": body,
        "cwd": the.cwd,
        "home": the.home,
    }
    with _traced(context) as traced:
        result = _recorded(context, "send", args, lambda: traced.call("send", **args))
    receipt = dict_of(list_of(result.get("receipts"))[0])
    letter = f"{text_of(receipt['id'])}.json"
    _keep(context, traced, the.root / "inbox" / text_of(receipt["address"]) / letter)


@when(f"a session {QUOTED} registers in {QUOTED}, its system calls traced")
def register_traced(context: Context, label: str, cwd: str) -> None:
    the = world(context)
    args: dict[str, Json] = {"session_id": session_id_for(label), "cwd": the.directory(cwd)}
    with _traced(context) as traced:
        result = _recorded(context, "register", args, lambda: traced.call("register", **args))
    address = text_of(result.get("address"))
    _keep(context, traced, the.root / "registry" / f"{address}.json")


@when(f"{QUOTED} takes the next message, its system calls traced")
def take_traced(context: Context, label: str) -> None:
    the = world(context)
    args: dict[str, Json] = {"address": the.address(label)}
    with _traced(context) as traced:
        result = _recorded(context, "take", args, lambda: traced.call("take", **args))
    taken = result.get("message")
    assert taken is not None, f"take answered no message: {result}"
    letter = f"{text_of(dict_of(taken)['id'])}.json"
    path = os.path.realpath(the.inbox(label) / letter)
    assert any(e.kind == "unlink" and e.path == path for e in traced.events), (
        f"the trace shows no unlink of {path}"
    )
    context.trace = traced.events
    context.traced_path = path


def _judged(context: Context) -> tuple[list[syscalls.Event], str]:
    assert "trace" in context, "no operation was traced"
    return context.trace, context.traced_path


@then("no letter or record was opened for writing or truncated")
@checks("INV-03")
def not_written_in_place(context: Context) -> None:
    found, _ = _judged(context)
    problems = syscalls.written_in_place(found, os.path.realpath(world(context).root))
    assert not problems, "\n".join(problems)


@then("the (?:letter|record) got its name by a rename from a temporary in its folder")
@checks("INV-03")
def renamed_into_place(context: Context) -> None:
    found, path = _judged(context)
    problems = syscalls.not_renamed_into_place(found, path)
    assert not problems, "\n".join(problems)


@then("its bytes and its name were flushed before the answer")
@checks("INV-04")
def flushed(context: Context) -> None:
    found, path = _judged(context)
    problems = syscalls.not_flushed(found, path)
    assert not problems, "\n".join(problems)


@then("it counted the mailbox holding an exclusive lock on it, before the rename")
@checks("INV-08")
def counted_under_lock(context: Context) -> None:
    found, path = _judged(context)
    problems = syscalls.counted_unlocked(found, path)
    assert not problems, "\n".join(problems)


@then("the letter stayed at its name until its unlink")
@checks("INV-04")
def stayed_until_unlink(context: Context) -> None:
    found, path = _judged(context)
    problems = syscalls.moved_before_unlink(found, path)
    assert not problems, "\n".join(problems)
