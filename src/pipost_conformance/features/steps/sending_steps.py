"""Sending, and what a sender is told: receipts or a refusal."""

from __future__ import annotations

import re

from behave import given, then, when
from behave.runner import Context

from pipost_conformance.client import Json
from pipost_conformance.features.steps.feature_world import (
    QUOTED,
    QUOTED_LIST,
    World,
    checks,
    fingerprint,
    list_of,
    quoted_items,
    text_of,
    tree_changes,
    use_regular_expressions,
    world,
)

use_regular_expressions()


@given(f"I am working in {QUOTED}")
def working_in(context: Context, cwd: str) -> None:
    the = world(context)
    the.cwd = the.directory(cwd)


@given(f"my home is {QUOTED}")
def home_is(context: Context, home: str) -> None:
    the = world(context)
    the.home = the.directory(home)


@given(f"I sent {QUOTED} to {QUOTED_LIST}")
@when(f"I send {QUOTED} to {QUOTED_LIST}")
def send(context: Context, body: str, targets: str) -> None:
    world(context).send(quoted_items(targets), body)


@when(f"I send {QUOTED} to {QUOTED} (\\d+) times over")
def send_to_repeated(context: Context, body: str, target: str, times: str) -> None:
    world(context).send([target] * int(times), body)


@when(f"I send {QUOTED} to {QUOTED} as {QUOTED}")
def send_as(context: Context, body: str, target: str, label: str) -> None:
    world(context).send([target], body, label=label)


@when(f"I send {QUOTED} to {QUOTED} with the reply address {QUOTED}")
def send_with_reply(context: Context, body: str, target: str, reply_to: str) -> None:
    the = world(context)
    the.send([target], body, reply_to=the.address(reply_to))


@when(f"I send this to {QUOTED}:")
def send_text(context: Context, target: str) -> None:
    assert context.text is not None, "the step needs the body as a doc string"
    world(context).send([target], context.text)


LINE_BREAKS = {
    "a line feed": "\n",
    "a carriage return": "\r",
    "a carriage return and a line feed": "\r\n",
    "a vertical tab": "\x0b",
    "a form feed": "\x0c",
    "a file separator": "\x1c",
    "a group separator": "\x1d",
    "a record separator": "\x1e",
    "a next line (U+0085)": "\x85",
    "a line separator (U+2028)": "\u2028",
    "a paragraph separator (U+2029)": "\u2029",
}
"""The line breaks SPEC 7.2 splits a body on, by name: a feature cannot hold most
of them raw."""


@when(f"I send {QUOTED} and {QUOTED} joined by (.+) to {QUOTED}")
def send_joined(context: Context, first: str, second: str, joint: str, target: str) -> None:
    assert joint in LINE_BREAKS, f"no line break named {joint!r}: {sorted(LINE_BREAKS)}"
    world(context).send([target], first + LINE_BREAKS[joint] + second)


@when(f"I send a body of (\\d+) {QUOTED} characters to {QUOTED}")
def send_repeated_body(context: Context, count: str, character: str, target: str) -> None:
    world(context).send([target], character * int(count))


@when(f"I send an empty body to {QUOTED}")
def send_empty(context: Context, target: str) -> None:
    world(context).send([target], "")


@given(f"{QUOTED} has (\\d+) messages? queued")
def messages_queued(context: Context, label: str, count: str) -> None:
    the = world(context)
    for number in range(1, int(count) + 1):
        the.send([label], f"queued message {number}")
        assert "receipts" in the.result, the.result


@when(f"{QUOTED} sends {QUOTED} to {QUOTED}")
def session_sends(context: Context, sender: str, body: str, target: str) -> None:
    the = world(context)
    the.send([target], body, session=the.session(sender).session_id)


@when(f"{QUOTED} sends {QUOTED} to {QUOTED} with no reply address")
def session_sends_no_reply(context: Context, sender: str, body: str, target: str) -> None:
    the = world(context)
    the.send([target], body, session=the.session(sender).session_id, reply_to="none")


# -- what the sender is told ------------------------------------------------------------


@then(f"the send is queued for {QUOTED_LIST}")
@checks("INV-13", "INV-11")
def queued_for(context: Context, targets: str) -> None:
    """One receipt per session named, in the order named; none delivered, as no
    receiver runs (INV-11: delivered only if the letter vanished)."""
    the = world(context)
    expected = [the.address(label) for label in quoted_items(targets)]
    receipts = the.receipts()
    assert [r["address"] for r in receipts] == expected, f"[INV-13] {receipts} != {expected}"
    assert all(r["delivered"] is False for r in receipts), f"[INV-11] {receipts}"


# A refusal is judged by its code and its facts, never by the implementation's
# words: ``the send is refused as "too_many_targets" with count 9 and cap 8``. A fact
# is a number, null, or one or more quoted values: sessions of the scenario (or
# addresses) for ``address``, ``candidates`` and ``reachable``, else text with its
# placeholders expanded. The step a code is judged by names the invariant the code
# belongs to.
REFUSED = r'(?:the send|it) is refused as "({codes})"(?: with (.+))?'
FACT = re.compile(r'(\w+) ((?:"[^"]*")(?:(?:, | and )"[^"]*")*|-?\d+|null)')
SESSION_FACTS = {"address", "candidates", "reachable"}
LIST_FACTS = {"candidates", "reachable"}


def _expected_facts(the: World, text: str | None) -> dict[str, Json]:
    facts: dict[str, Json] = {}
    for name, value in FACT.findall(text or ""):
        if value == "null":
            facts[name] = None
        elif not value.startswith('"'):
            facts[name] = int(value)
        else:
            items = [
                the.address(item) if name in SESSION_FACTS else the.expand(item)
                for item in quoted_items(value)
            ]
            facts[name] = list[Json](sorted(items)) if name in LIST_FACTS else items[0]
    assert text is None or facts, f"no facts in {text!r}"
    return facts


def _refused_as(context: Context, code: str, facts: str | None) -> None:
    the = world(context)
    refusal = the.refusal()
    assert refusal["code"] == code, f"refused as {refusal['code']!r}, not {code!r}: {refusal}"
    for name, expected in _expected_facts(the, facts).items():
        assert name in refusal, f"the refusal has no {name!r}: {refusal}"
        found = refusal[name]
        if name in LIST_FACTS:
            found = list[Json](sorted(text_of(item) for item in list_of(found)))
        assert found == expected, f"{name} is {found!r}, not {expected!r}: {refusal}"


@then(
    REFUSED.format(codes="unknown_target|ambiguous_target|unknown_address|(?:no|too_many)_targets")
)
@checks("INV-12", "INV-13")
def refused_by_resolution(context: Context, code: str, facts: str | None) -> None:
    the = world(context)
    try:
        _refused_as(context, code, facts)
    except AssertionError as error:
        # Unknown where another refusal, or another handle, was due: a handle that
        # names a session found none (INV-13), which is no guess (INV-12).
        found = the.result.get("refused")
        handle = _expected_facts(the, facts).get("handle")
        lost = (
            isinstance(found, dict)
            and found.get("code") == "unknown_target"
            and (code != "unknown_target" or found.get("handle") != handle)
        )
        raise AssertionError(f"[{'INV-13' if lost else 'INV-12'}] {error}") from None


@then(REFUSED.format(codes="empty_body|body_not_text|body_too_large"))
@checks("INV-09")
def refused_for_the_body(context: Context, code: str, facts: str | None) -> None:
    _refused_as(context, code, facts)


@then(REFUSED.format(codes="mailbox_full"))
@checks("INV-08")
def refused_for_a_full_mailbox(context: Context, code: str, facts: str | None) -> None:
    _refused_as(context, code, facts)


@then(f"the refusal offers the reachable sessions {QUOTED_LIST}")
@checks("INV-12")
def refusal_offers(context: Context, labels: str) -> None:
    """The sessions a refusal of an unknown target offers instead (a SHOULD of
    pipost: pi-post 0.7 offered none): every one named, in any order."""
    the = world(context)
    reachable = sorted(text_of(a) for a in list_of(the.refusal().get("reachable")))
    expected = sorted(the.address(label) for label in quoted_items(labels))
    assert reachable == expected, f"{reachable} != {expected}"


def assert_nothing_written(context: Context) -> None:
    the = world(context)
    changes = tree_changes(the.before, fingerprint(the.root))
    assert not changes, "the tree changed:\n" + "\n".join(changes)


# One check, said three ways, for the three rules that refuse a send: each counts
# for its own invariant, so a body let through past the cap fails INV-09 alone.
@then("nothing was written")
@checks("INV-08")
def nothing_written(context: Context) -> None:
    assert_nothing_written(context)


@then("the refused body was written nowhere")
@checks("INV-09")
def body_written_nowhere(context: Context) -> None:
    assert_nothing_written(context)


@then("the refused batch wrote nothing")
@checks("INV-12")
def batch_wrote_nothing(context: Context) -> None:
    assert_nothing_written(context)
