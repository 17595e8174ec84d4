"""Delivery through the driver: a receiving session takes its mail (``deliver``)
and the steps look at what entered its context, what it dropped and set aside."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from behave import then, when
from behave.runner import Context
from feature_world import (
    QUOTED,
    QUOTED_LIST,
    World,
    dict_of,
    list_of,
    quoted_items,
    text_of,
    use_regular_expressions,
    world,
)

from pipost.driver import Json

use_regular_expressions()

RETRY_WAIT_S = 10.0
"""Longest a session may take to retry a letter whose entry failed."""


@dataclass
class Reception:
    """What the receiving sessions of one scenario let in, dropped and set aside."""

    entered: dict[str, list[dict[str, Json]]] = field(default_factory=dict)
    dropped: dict[str, list[dict[str, Json]]] = field(default_factory=dict)
    sent_ids: list[str] = field(default_factory=list)

    def texts(self, label: str) -> list[str]:
        return [text_of(entry["text"]) for entry in self.entered.get(label, [])]

    def bodies(self, label: str) -> list[str]:
        return [text_of(message(entry)["body"]) for entry in self.entered.get(label, [])]

    def ids(self, label: str) -> list[str]:
        return [text_of(message(entry)["id"]) for entry in self.entered.get(label, [])]


def reception(context: Context) -> Reception:
    if "delivery" not in context:
        context.delivery = Reception()
    found = context.delivery
    assert isinstance(found, Reception)
    return found


def message(entry: dict[str, Json]) -> dict[str, Json]:
    return dict_of(entry["message"])


def deliver(context: Context, label: str, *, fail: int = 0, inbound: str = "accept") -> int:
    """One ``deliver`` for the session ``label``; returns how many messages entered."""
    the = world(context)
    got = reception(context)
    result = the.call(
        "deliver", session_id=the.session(label).session_id, fail=fail, inbound=inbound
    )
    entered = [dict_of(entry) for entry in list_of(result["entered"])]
    got.entered.setdefault(label, []).extend(entered)
    got.dropped.setdefault(label, []).extend(dict_of(entry) for entry in list_of(result["dropped"]))
    the.set_aside += [dict_of(entry) for entry in list_of(result["set_aside"])]
    return len(entered)


def last_sent_id(the: World) -> str:
    """The id of the last message the scenario sent (the last send's last receipt)."""
    return text_of(the.receipts()[-1]["id"])


def look_at_text(context: Context, label: str) -> list[str]:
    """The lines of the one text that entered the context of ``label``; later steps
    about "that text" look at it, and at the body it carries."""
    got = reception(context)
    texts = got.texts(label)
    assert len(texts) == 1, f"{len(texts)} texts entered the context of {label}"
    context.delivery_text = (texts[0], got.bodies(label)[0])
    return texts[0].splitlines()


def that_text(context: Context) -> tuple[list[str], str]:
    """The lines of the text last looked at, and the body it carries."""
    assert "delivery_text" in context, "no text was looked at yet"
    text, body = context.delivery_text
    assert isinstance(text, str) and isinstance(body, str)
    return text.splitlines(), body


# -- taking mail -------------------------------------------------------------------------


@when(f"{QUOTED} takes its mail")
def takes_mail(context: Context, label: str) -> None:
    deliver(context, label)


@when(f"{QUOTED} takes its mail into a context that fails its first (\\d+) entr(?:y|ies)")
def takes_mail_failing(context: Context, label: str, failures: str) -> None:
    deliver(context, label, fail=int(failures))


@when(f"{QUOTED} takes its mail with PI_POST_INBOUND set to {QUOTED}")
def takes_mail_inbound(context: Context, label: str, mode: str) -> None:
    deliver(context, label, inbound=mode)


@when(f"{QUOTED} keeps taking its mail until a message enters its context")
def keeps_taking(context: Context, label: str) -> None:
    # A session may wait before it retries a letter its context failed to take.
    deadline = time.monotonic() + RETRY_WAIT_S
    while deliver(context, label) == 0:
        assert time.monotonic() < deadline, f"no message entered within {RETRY_WAIT_S:g} s"
        time.sleep(0.05)


@when(
    f"{QUOTED} sends (\\d+) different messages to {QUOTED}, (\\d+) seconds apart, "
    f"{QUOTED} taking each"
)
def burst(context: Context, sender: str, count: str, target: str, gap: str, taker: str) -> None:
    the = world(context)
    for number in range(1, int(count) + 1):
        the.send([target], f"update {number}", label=sender)
        reception(context).sent_ids.append(last_sent_id(the))
        deliver(context, taker)
        the.call("advance_clock", ms=int(gap) * 1000)


# -- what entered, and what did not -----------------------------------------------------


@then(f"the context of {QUOTED} holds {QUOTED_LIST} in that order")
def holds_in_order(context: Context, label: str, bodies: str) -> None:
    found = reception(context).bodies(label)
    assert found == quoted_items(bodies), f"the context of {label} holds {found}"


@then(f"the context of {QUOTED} holds {QUOTED} (once|twice)")
def holds_times(context: Context, label: str, body: str, times: str) -> None:
    found = reception(context).bodies(label)
    expected = {"once": 1, "twice": 2}[times]
    assert found.count(body) == expected, f"the context of {label} holds {found}"


@then(f"the context of {QUOTED} holds nothing")
def holds_nothing(context: Context, label: str) -> None:
    found = reception(context).bodies(label)
    assert found == [], f"the context of {label} holds {found}"


@then(f"the context of {QUOTED} holds the first (\\d+) of them, in order")
def holds_first(context: Context, label: str, count: str) -> None:
    got = reception(context)
    assert got.ids(label) == got.sent_ids[: int(count)], got.ids(label)


@then("every letter was still in its mailbox when its text entered the context")
def entered_while_on_disk(context: Context) -> None:
    entries = [entry for found in reception(context).entered.values() for entry in found]
    assert entries, "nothing entered a context"
    late = [text_of(message(entry)["id"]) for entry in entries if entry["on_disk"] is not True]
    assert not late, f"gone from the mailbox before entering the context: {late}"


@then(f"{QUOTED} (let in|dropped, giving a reason,) the last message sent")
def last_message_fate(context: Context, label: str, fate: str) -> None:
    the = world(context)
    got = reception(context)
    letter = last_sent_id(the)
    dropped = {text_of(d["name"]): text_of(d["reason"]) for d in got.dropped.get(label, [])}
    if fate == "let in":
        assert letter in got.ids(label), f"{letter} did not enter; dropped: {dropped}"
        assert f"{letter}.json" not in dropped, dropped
    else:
        assert letter not in got.ids(label), f"{letter} entered the context"
        assert dropped.get(f"{letter}.json", "").strip(), f"no reason given: {dropped}"


# -- the text the model reads (SPEC 7) --------------------------------------------------


@then(f"the text that entered the context of {QUOTED} begins by naming {QUOTED}")
def text_names_origin(context: Context, label: str, origin: str) -> None:
    first = look_at_text(context, label)[0]
    letter = reception(context).ids(label)[0]
    assert letter in first and f"from {origin}" in first, first


@then(f"in that text every line of the body is quoted with {QUOTED}")
def body_quoted(context: Context, quote: str) -> None:
    lines, body = that_text(context)
    assert lines[1:-1] == [f"{quote} {line}" for line in body.splitlines()], lines


@then("the last line of that text is the boundary, saying")
def boundary_says(context: Context) -> None:
    assert context.table is not None, "the step needs a table of phrases"
    last = that_text(context)[0][-1]
    for row in context.table:
        phrase = world(context).expand(row["phrase"])
        assert phrase in last, f"the boundary lacks {phrase!r}: {last}"


@then(
    f"only the first and the last line of the text that entered the context of {QUOTED} "
    f"start with {QUOTED}"
)
def only_frame_lines(context: Context, label: str, prefix: str) -> None:
    lines = look_at_text(context, label)
    starting = [n for n, line in enumerate(lines) if line.startswith(prefix)]
    assert starting == [0, len(lines) - 1], f"lines {starting} of {lines}"
