"""Sending, and what a sender is told: receipts or a refusal."""

from __future__ import annotations

from behave import given, then, when
from behave.runner import Context
from feature_world import (
    QUOTED,
    QUOTED_LIST,
    fingerprint,
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
    the.cwd = the.expand(cwd)


@given(f"my home is {QUOTED}")
def home_is(context: Context, home: str) -> None:
    the = world(context)
    the.home = the.expand(home)


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
def queued_for(context: Context, targets: str) -> None:
    the = world(context)
    expected = [the.address(label) for label in quoted_items(targets)]
    receipts = the.receipts()
    assert [r["address"] for r in receipts] == expected, f"{receipts} != {expected}"
    assert all(r["delivered"] is False for r in receipts), receipts


@then(f"(?:the send|it) is refused saying (?:{QUOTED}|'([^']*)')")
def refused_saying(context: Context, double_quoted: str | None, single_quoted: str | None) -> None:
    """The refusal holds the words; ``\\n`` stands for a line break (Gherkin tables
    have none)."""
    words = double_quoted if double_quoted is not None else single_quoted
    assert words is not None
    the = world(context)
    expected = the.expand(words).replace("\\n", "\n")
    refusal = the.refusal()
    assert expected in refusal, f"{expected!r} not in:\n{refusal}"


@then(f"the refusal names the address of {QUOTED}")
def refusal_names_address(context: Context, label: str) -> None:
    the = world(context)
    assert the.address(label) in the.refusal(), the.refusal()


@then(f"the refusal lists {QUOTED_LIST}")
def refusal_lists(context: Context, labels: str) -> None:
    """Each candidate on a line of its own: name (address) — cwd."""
    the = world(context)
    lines = the.refusal().splitlines()
    for label in quoted_items(labels):
        record = the.record(label)
        assert record is not None, f"{label} has no record"
        line = f"  {text_of(record['name'])} ({the.address(label)}) — {text_of(record['cwd'])}"
        assert line in lines, f"{line!r} not in:\n{the.refusal()}"


@then(f"the refusal does not list {QUOTED}")
def refusal_does_not_list(context: Context, label: str) -> None:
    the = world(context)
    assert the.address(label) not in the.refusal(), the.refusal()


@then("nothing was written")
def nothing_written(context: Context) -> None:
    the = world(context)
    changes = tree_changes(the.before, fingerprint(the.root))
    assert not changes, "the tree changed:\n" + "\n".join(changes)
