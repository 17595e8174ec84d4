"""The contract gate (src/pipost/contract.py), run on copies: the contract as a
dict of parts, the pins as a dict of versions, changed the way a contributor
would change the code, and checked the way tests/test_contract.py checks the
project's own in ``nox -s check``."""

from __future__ import annotations

import copy
import io

from behave import given, then, when
from behave.runner import Context
from feature_world import QUOTED, dict_of, list_of, use_regular_expressions

from pipost import cli, contract

use_regular_expressions()


class Gate:
    """A contract, the version it is published as, and the pins it is held to."""

    def __init__(self) -> None:
        self.version = contract.current_version()
        self.parts = contract.parts()
        self.pins = contract.load_pins()
        self.first_pins = copy.deepcopy(self.pins)
        self.first_version = self.version

    def problems(self) -> list[str]:
        return contract.check(self.version, self.parts, self.pins)


def gate(context: Context) -> Gate:
    found = context.gate
    assert isinstance(found, Gate)
    return found


@when("I ask pi-post for its contract")
def ask_contract(context: Context) -> None:
    out, err = io.StringIO(), io.StringIO()
    context.contract_code = cli.run(["contract"], cli.Context(stdout=out, stderr=err))
    context.contract_output = out.getvalue()


@then("it prints the message schema version and the fingerprint pinned for it")
def prints_pinned(context: Context) -> None:
    version = contract.current_version()
    pinned, _ = contract.load_pins()[version]
    assert context.contract_code == 0, context.contract_output
    lines = context.contract_output.splitlines()
    assert lines[:2] == [f"message schema v{version}", f"fingerprint {pinned}"], lines


@given("the contract and its pins as they are")
def contract_as_is(context: Context) -> None:
    context.gate = Gate()
    assert gate(context).problems() == [], gate(context).problems()


@when(f"the message schema gains a property {QUOTED}, the version staying the same")
def schema_gains(context: Context, name: str) -> None:
    properties = dict_of(dict_of(gate(context).parts["message_schema"])["properties"])
    properties[name] = {"type": "string"}


@when(r"the body cap becomes (\d+) bytes, the version staying the same")
def cap_changes(context: Context, cap: str) -> None:
    dict_of(gate(context).parts["message_rules"])["body_cap_bytes"] = int(cap)


@when(f"records gain a written field {QUOTED}, the version staying the same")
def record_gains(context: Context, name: str) -> None:
    list_of(dict_of(gate(context).parts["record_fields"])["written"]).append(name)


@when(f"the address of {QUOTED} becomes {QUOTED}, the version staying the same")
def address_changes(context: Context, session_id: str, address: str) -> None:
    for vector in list_of(gate(context).parts["address_vectors"]):
        if dict_of(vector)["sessionId"] == session_id:
            dict_of(vector)["address"] = address
            return
    raise AssertionError(f"no vector for {session_id!r}")


@when(f"letters are named {QUOTED}, the version staying the same")
def letters_renamed(context: Context, pattern: str) -> None:
    dict_of(gate(context).parts["file_naming"])["letter"] = pattern


@then(f"the contract gate fails, naming {QUOTED} and showing {QUOTED}")
def gate_fails(context: Context, part: str, shown: str) -> None:
    problems = gate(context).problems()
    assert problems, "the gate passed a changed contract"
    assert f"still v{gate(context).version}" in problems[0], problems[0]
    assert [p for p in problems if p.startswith(f"changed: {part}\n")], problems
    assert all(p.startswith(f"changed: {part}\n") for p in problems[1:]), problems
    assert shown in "\n".join(problems), problems


@when("the version is bumped and the changed contract is pinned for it")
def bump_and_pin(context: Context) -> None:
    the = gate(context)
    the.version += 1
    assert the.problems(), "a version without a pin passed the gate"
    the.pins = contract.pin(the.version, the.parts, the.pins)


@then("the contract gate passes")
def gate_passes(context: Context) -> None:
    problems = gate(context).problems()
    assert problems == [], problems


@then("the pin of the version before is unchanged")
def old_pin_kept(context: Context) -> None:
    the = gate(context)
    assert the.pins[the.first_version] == the.first_pins[the.first_version]


@then(f"pinning it under the same version is refused, saying {QUOTED}")
def pin_refused(context: Context, words: str) -> None:
    the = gate(context)
    try:
        contract.pin(the.version, the.parts, the.pins)
    except contract.ContractError as error:
        assert words in str(error), str(error)
        return
    raise AssertionError("the pin of a published version was rewritten")


@then("the contract gate still fails")
def gate_still_fails(context: Context) -> None:
    assert gate(context).problems(), "the gate passed a changed contract"
