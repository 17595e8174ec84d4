"""Steps whose outcomes are known, for the toy scenarios of verdicts.feature."""

from __future__ import annotations

from behave import given, then, when
from behave.runner import Context

from pipost_conformance.client import CallTimedOut
from pipost_conformance.features.steps.feature_world import checks, world


@given("a world")
def a_world(context: Context) -> None:
    world(context).call("advance_clock", ms=1)


@given("a precondition that fails")
def a_failing_precondition(context: Context) -> None:
    raise AssertionError("the precondition does not hold")


@when("the implementation answers an error")
def an_error_answer(context: Context) -> None:
    world(context).call("no_such_op")


@when("the implementation does not answer")
def no_answer(context: Context) -> None:
    raise CallTimedOut("advance_clock: no answer within 0.5 s")


@then("the INV-10 assertion fails")
@checks("INV-10")
def inv_10_fails(context: Context) -> None:
    raise AssertionError("the letter was not set aside")


@then("the INV-05 and INV-10 assertion fails naming INV-10")
@checks("INV-05", "INV-10")
def inv_10_of_two_fails(context: Context) -> None:
    raise AssertionError("[INV-10] the letter was delivered, not set aside")


@then("the INV-08 and INV-10 assertion fails")
@checks("INV-08", "INV-10")
def inv_08_or_10_fails(context: Context) -> None:
    raise AssertionError("the mailbox holds 51")


@then("the INV-08 assertion fails")
@checks("INV-08")
def inv_08_fails(context: Context) -> None:
    raise AssertionError("the 51st letter went in")


@then("the INV-08 assertion passes")
@checks("INV-08")
def inv_08_passes(context: Context) -> None:
    world(context).call("advance_clock", ms=0)


@then("the INV-05 assertion passes")
@checks("INV-05")
def inv_05_passes(context: Context) -> None:
    world(context).call("advance_clock", ms=0)


@then("an assertion that names no invariant fails")
def unmarked_fails(context: Context) -> None:
    raise AssertionError("it was queued")
