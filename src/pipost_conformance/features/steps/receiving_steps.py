"""Receiving through the driver: receivers of a session take its mail (``deliver``,
``race``), and the steps look at what entered each receiver's context, what it
dropped and set aside, and what is left on disk.

A receiver is named by a label: a session's own label is its one receiver (the
driver's default), and "bob-1" and "bob-2" are two receivers of bob's session,
each with a context of its own. Time is the world's clock: a retry waits for the
clock to pass its delay, never for the machine's.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from behave import given, then, when
from behave.runner import Context

from pipost_conformance.client import Json
from pipost_conformance.features.steps.feature_world import (
    QUOTED,
    QUOTED_LIST,
    World,
    checks,
    dict_of,
    list_of,
    quoted_items,
    text_of,
    use_regular_expressions,
    world,
)

use_regular_expressions()


@dataclass
class Receiver:
    """A receiver of the scenario: the session it receives for, and its context."""

    session: str
    """The label of the session."""
    name: str | None
    """The receiver's name in the driver; None: the session's own receiver."""
    context: str | None = None
    """"ledger" or "plain" as the scenario asked; None: the driver's default."""


@dataclass
class Reception:
    """What the receivers of one scenario let in and dropped, and what was sent."""

    receivers: dict[str, Receiver] = field(default_factory=dict)
    entered: dict[str, list[dict[str, Json]]] = field(default_factory=dict)
    dropped: dict[str, list[dict[str, Json]]] = field(default_factory=dict)
    set_aside: dict[str, list[dict[str, Json]]] = field(default_factory=dict)
    sent_ids: list[str] = field(default_factory=list)

    def receiver(self, label: str) -> Receiver:
        return self.receivers.setdefault(label, Receiver(label, None))

    def entries(self, label: str) -> list[dict[str, Json]]:
        return self.entered.get(label, [])

    def bodies(self, label: str) -> list[str]:
        return [text_of(message(entry)["body"]) for entry in self.entries(label)]

    def ids(self, label: str) -> list[str]:
        return [text_of(message(entry)["id"]) for entry in self.entries(label)]

    def keep(self, label: str, result: dict[str, Json]) -> int:
        """Keep what one drain of ``label`` reported; returns how many entered."""
        entered = [dict_of(entry) for entry in list_of(result["entered"])]
        self.entered.setdefault(label, []).extend(entered)
        for kind, kept in (("dropped", self.dropped), ("set_aside", self.set_aside)):
            kept.setdefault(label, []).extend(dict_of(entry) for entry in list_of(result[kind]))
        return len(entered)


def reception(context: Context) -> Reception:
    if "reception" not in context:
        context.reception = Reception()
    found = context.reception
    assert isinstance(found, Reception)
    return found


def message(entry: dict[str, Json]) -> dict[str, Json]:
    return dict_of(entry["message"])


def deliver(context: Context, label: str, **options: Json) -> dict[str, Json]:
    """One ``deliver`` by the receiver ``label``; defaulted arguments are left out."""
    the = world(context)
    got = reception(context)
    receiver = got.receiver(label)
    args: dict[str, Json] = {"session_id": the.session(receiver.session).session_id}
    if receiver.name is not None:
        args["receiver"] = receiver.name
    if receiver.context is not None:
        args["context"] = receiver.context
    result = the.call("deliver", **args, **options)
    got.keep(label, result)
    return result


def receiving_for(context: Context, label: str, session: str) -> None:
    """The scenario's receiver ``label`` receives for ``session`` (a step's premise)."""
    found = reception(context).receiver(label).session
    assert found == session, f"{label} is a receiver of {found}, not of {session}"


def last_sent_id(the: World) -> str:
    """The id of the last message the scenario sent (the last send's last receipt)."""
    return text_of(the.receipts()[-1]["id"])


def queued_bodies(the: World, label: str) -> list[str]:
    """The bodies of the messages queued for ``label``, read through ``peek``."""
    letters = [
        dict_of(letter)
        for letter in list_of(the.call("peek", address=the.address(label))["letters"])
    ]
    return [
        text_of(dict_of(letter["message"])["body"]) for letter in letters if "message" in letter
    ]


# -- the sessions and their receivers ---------------------------------------------------


@given(f"the live sessions {QUOTED} and {QUOTED}, each in a folder of its own")
def live_sessions(context: Context, *labels: str) -> None:
    the = world(context)
    for label in labels:
        folder = the.scratch / label
        folder.mkdir(parents=True, exist_ok=True)
        the.register(label, str(folder))


@given(f"{QUOTED} has two receivers, {QUOTED} and {QUOTED}, each with a (ledger|plain) context")
def two_receivers(context: Context, session: str, first: str, second: str, kind: str) -> None:
    world(context).session(session)  # the session must be the scenario's
    for name in (first, second):
        reception(context).receivers[name] = Receiver(session, name, kind)


@given(f"(\\d+) processes each sent one letter to {QUOTED}")
def many_senders(context: Context, count: str, target: str) -> None:
    the = world(context)
    for number in range(1, int(count) + 1):
        # A sender each, so that the loop guard lets every letter through.
        the.send([target], f"letter {number}", label=f"process:sender-{number}")
        reception(context).sent_ids.append(last_sent_id(the))


@given("the registry folder of the post office is replaced by a file")
def registry_is_a_file(context: Context) -> None:
    # Modes stop nothing for root; a file where the folder belongs makes every
    # write of a record fail for anyone.
    registry = world(context).root / "registry"
    registry.rename(registry.with_name("registry-moved-away"))
    registry.write_bytes(b"not a folder\n")


# -- taking mail --------------------------------------------------------------------------


@when(f"{QUOTED} takes its mail")
@when(f"{QUOTED} takes the mail of {QUOTED}")
def takes_mail(context: Context, label: str, session: str | None = None) -> None:
    if session is not None:
        receiving_for(context, label, session)
    deliver(context, label)


@when(f"{QUOTED} takes its mail into a context that fails its first (\\d+) entr(?:y|ies)")
def takes_mail_failing(context: Context, label: str, failures: str) -> None:
    deliver(context, label, fail=int(failures))


@when(f"{QUOTED} takes its mail with PI_POST_INBOUND set to {QUOTED}")
def takes_mail_inbound(context: Context, label: str, mode: str) -> None:
    deliver(context, label, inbound=mode)


@when(f"{QUOTED} takes its mail with PI_POST_RESUME set to {QUOTED}")
@when(f"{QUOTED} starts with PI_POST_RESUME set to {QUOTED} and takes its mail")
def takes_mail_resume(context: Context, label: str, mode: str) -> None:
    deliver(context, label, resume=mode)


@when(f"{QUOTED} takes its mail on its poll tick, the watch having missed the letter")
def takes_mail_polling(context: Context, label: str) -> None:
    deliver(context, label, trigger="poll")


@when(f"{QUOTED} takes the mail of {QUOTED}, the disk refusing its unlink")
def takes_mail_unlink_refused(context: Context, label: str, session: str) -> None:
    receiving_for(context, label, session)
    deliver(context, label, fail_unlink=1)


@when(
    f"{QUOTED} takes its mail into a (ledger|plain) context, "
    "and dies after the entry before the unlink"
)
@when(
    f"{QUOTED} takes its mail into a context with a (ledger), "
    "and dies after the entry before the unlink"
)
def takes_mail_and_dies(context: Context, label: str, kind: str) -> None:
    reception(context).receiver(label).context = kind
    result = deliver(context, label, crash="after_entry")
    assert result.get("crashed") is True, f"the receiver did not die: {result}"


@when(f"{QUOTED} starts again with the same context and takes its mail")
def restarts(context: Context, label: str) -> None:
    deliver(context, label)  # the driver's receiver died: this is its restart


@when(f"{QUOTED} and {QUOTED} take the mail of {QUOTED} at the same time")
def race(context: Context, first: str, second: str, session: str) -> None:
    the = world(context)
    got = reception(context)
    names = [first, second]
    for name in names:
        receiving_for(context, name, session)
    kind = got.receiver(first).context
    result = the.call(
        "race",
        session_id=the.session(session).session_id,
        receivers=list[Json](names),
        **({} if kind is None else {"context": kind}),
    )
    for name, taken in zip(names, list_of(result["receivers"]), strict=True):
        got.keep(name, dict_of(taken))


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


# -- what entered, and what did not -------------------------------------------------------


@then(f"the context of {QUOTED} holds {QUOTED_LIST} in that order")
@checks("INV-07")
def holds_in_order(context: Context, label: str, bodies: str) -> None:
    found = reception(context).bodies(label)
    assert found == quoted_items(bodies), f"the context of {label} holds {found}"


@then(f"the context of {QUOTED} holds {QUOTED} once")
@checks("INV-05", "INV-06")
def holds_once(context: Context, label: str, body: str) -> None:
    found = reception(context).bodies(label)
    assert body in found, f"[INV-05] the context of {label} never got it: it holds {found}"
    assert found.count(body) == 1, f"[INV-06] the context of {label} holds {found}"


@then(f"the context of {QUOTED} holds {QUOTED}, the letter behind the bad one, once")
@checks("INV-10", "INV-06")
def holds_the_one_behind_once(context: Context, label: str, body: str) -> None:
    found = reception(context).bodies(label)
    assert body in found, f"[INV-10] the letter behind the bad one did not enter: {found}"
    assert found.count(body) == 1, f"[INV-06] the context of {label} holds {found}"


@then(f"the context of {QUOTED} holds {QUOTED} once or twice")
@checks("INV-05", "INV-06")
def holds_once_or_twice(context: Context, label: str, body: str) -> None:
    found = reception(context).bodies(label)
    assert body in found, f"[INV-05] the context of {label} never got it: it holds {found}"
    assert found.count(body) <= 2, f"[INV-06] the context of {label} holds {found}"


@then(f"the context of {QUOTED} holds {QUOTED} twice")
@checks("INV-18")
def holds_twice(context: Context, label: str, body: str) -> None:
    found = reception(context).bodies(label)
    assert found.count(body) == 2, f"the context of {label} holds {found}"


@then(f"the loop guard let {QUOTED} into the context of {QUOTED}")
@checks("INV-18")
def let_in_by_the_guard(context: Context, body: str, label: str) -> None:
    found = reception(context).bodies(label)
    assert body in found, f"the context of {label} holds {found}"


@then(f"the context of {QUOTED} holds nothing")
@checks("INV-05", "INV-06")
def holds_nothing(context: Context, label: str) -> None:
    found = reception(context).bodies(label)
    assert found == [], f"the context of {label} holds {found}"


@then(f"the context of {QUOTED} holds the first (\\d+) of them, in order")
@checks("INV-18")
def holds_first(context: Context, label: str, count: str) -> None:
    got = reception(context)
    assert got.ids(label) == got.sent_ids[: int(count)], got.ids(label)


@then(f"every letter sent entered exactly one of the contexts of {QUOTED} and {QUOTED}, once")
@checks("INV-06")
def each_exactly_once(context: Context, first: str, second: str) -> None:
    got = reception(context)
    entered = got.ids(first) + got.ids(second)
    assert Counter(entered) == Counter(got.sent_ids), (
        f"entered {sorted(entered)}, sent {sorted(got.sent_ids)}"
    )


@then("every letter was still in its mailbox when its text entered the context")
@checks("INV-05")
def entered_while_on_disk(context: Context) -> None:
    entries = [entry for found in reception(context).entered.values() for entry in found]
    assert entries, "nothing entered a context"
    late = [text_of(message(entry)["id"]) for entry in entries if entry["on_disk"] is not True]
    assert not late, f"gone from the mailbox before entering the context: {late}"


@then(f"the letter of {QUOTED} is still in the mailbox of {QUOTED}")
@checks("INV-05")
def letter_still_queued(context: Context, body: str, label: str) -> None:
    found = queued_bodies(world(context), label)
    assert found.count(body) == 1, f"the mailbox of {label} holds {found}"


@then(f"the mailbox of {QUOTED} is empty")
@checks("INV-06")
def mailbox_empty(context: Context, label: str) -> None:
    # A letter left behind after its entry would be entered again by the next drain.
    the = world(context)
    assert the.count(label) == 0, f"the mailbox of {label} holds {queued_bodies(the, label)}"


@then(f"{QUOTED} set the bad letter aside, and nothing of it entered the context")
@checks("INV-10")
def bad_letter_set_aside(context: Context, label: str) -> None:
    the = world(context)
    got = reception(context)
    assert the.bad_letter is not None, "the scenario laid no bad letter"
    name = the.bad_letter[0]
    aside = [dict_of(entry) for entry in got.set_aside.get(label, [])]
    assert [text_of(entry["name"]) for entry in aside] == [name], f"set aside: {aside}"
    assert aside[0]["reason"], f"no reason given: {aside}"
    assert name.removesuffix(".json") not in got.ids(label), f"{name} entered the context"


@then(f"the send reports the letter for {QUOTED} not delivered")
@checks("INV-11")
def not_delivered(context: Context, label: str) -> None:
    the = world(context)
    (receipt,) = the.receipts()
    assert receipt["address"] == the.address(label), receipt
    assert receipt["delivered"] is False, f"delivered, yet nobody took it: {receipt}"


def _drop_of_last(context: Context, label: str) -> dict[str, Json] | None:
    """The drop of the last message sent, or None if it was not dropped."""
    letter = last_sent_id(world(context)) + ".json"
    drops = [d for d in reception(context).dropped.get(label, []) if d["name"] == letter]
    assert len(drops) <= 1, f"dropped more than once: {drops}"
    return drops[0] if drops else None


@then(f"{QUOTED} let in the last message sent")
@checks("INV-20")
def let_in(context: Context, label: str) -> None:
    letter = last_sent_id(world(context))
    assert letter in reception(context).ids(label), f"{letter} did not enter"
    assert _drop_of_last(context, label) is None, "it was dropped too"


@then(f"{QUOTED} dropped, by the (inbound mode|loop guard), the last message sent")
@checks("INV-18", "INV-20")
def dropped_by(context: Context, label: str, rule: str) -> None:
    # The inbound mode is INV-20's, the loop guard INV-18's: each drop is its rule's.
    blamed = "INV-20" if rule == "inbound mode" else "INV-18"
    letter = last_sent_id(world(context))
    assert letter not in reception(context).ids(label), f"[{blamed}] {letter} entered the context"
    drop = _drop_of_last(context, label)
    assert drop is not None, f"[{blamed}] {letter} was not dropped"
    code = {"inbound mode": "inbound_refused", "loop guard": "loop_guard"}[rule]
    assert dict_of(drop["reason"])["code"] == code, f"[{blamed}] {drop}"


@then(f"no file of the post office holds {QUOTED}")
@checks("INV-05")
def kept_nowhere(context: Context, text: str) -> None:
    root = world(context).root
    holding = [
        str(path)
        for path in root.rglob("*")
        if path.is_file() and text.encode() in path.read_bytes()
    ]
    assert not holding, f"the body is kept in {holding}"


@then(
    f"{QUOTED} entered the context of {QUOTED} "
    "(as a steer that wakes the session|staged for the first prompt)"
)
@checks("INV-20")
def entered_how(context: Context, body: str, label: str, how: str) -> None:
    entries = [e for e in reception(context).entries(label) if message(e)["body"] == body]
    assert len(entries) == 1, f"{body!r} entered {len(entries)} times"
    wakes = how == "as a steer that wakes the session"
    assert entries[0]["wake"] is wakes, f"wake is {entries[0]['wake']}"


# -- the text the model reads (SPEC 7.1) --------------------------------------------------


def look_at_text(context: Context, label: str) -> list[str]:
    """The lines of the one text that entered the context of ``label``; later steps
    about "that text" look at it, and at the message it carries."""
    entries = reception(context).entries(label)
    assert len(entries) == 1, f"{len(entries)} texts entered the context of {label}"
    context.delivery_entry = entries[0]
    return text_of(entries[0]["text"]).splitlines()


def that_text(context: Context) -> tuple[list[str], dict[str, Json]]:
    """The lines of the text last looked at, and the message it carries."""
    assert "delivery_entry" in context, "no text was looked at yet"
    entry = context.delivery_entry
    return text_of(entry["text"]).splitlines(), message(entry)


@then(
    f"the text that entered the context of {QUOTED} begins with a {QUOTED} line naming "
    f"the message, {QUOTED_LIST}"
)
@checks("INV-19")
def text_names_origin(context: Context, label: str, prefix: str, names: str) -> None:
    first = look_at_text(context, label)[0]
    letter = text_of(that_text(context)[1]["id"])
    assert first.startswith(prefix), first
    for named in [letter, *(world(context).expand(n) for n in quoted_items(names))]:
        assert named in first, f"the first line does not name {named!r}: {first}"


@then(f"in that text every line of the body is quoted with {QUOTED}")
@checks("INV-19")
def body_quoted(context: Context, quote: str) -> None:
    lines, sent = that_text(context)
    body = text_of(sent["body"]).splitlines()
    assert lines[1:-1] == [f"{quote} {line}" for line in body], lines


@then(
    f"the last line of that text is a {QUOTED} line ending the message, "
    f"naming (no address|the address of {QUOTED} to reply to)"
)
@checks("INV-19")
def boundary(context: Context, prefix: str, naming: str, sender: str | None) -> None:
    lines, sent = that_text(context)
    last = lines[-1]
    assert last.startswith(prefix) and text_of(sent["id"]) in last, last
    the = world(context)
    if sender is not None:
        assert the.address(sender) in last, f"no address to reply to: {last}"
    else:
        named = [s.address for s in the.sessions.values() if s.address in last]
        assert not named and " s-" not in last, f"an address to reply to: {last}"


BOUNDARY_WORDS = ("not from the user", "no authority", "approve", "slash command", "inert")
"""What SPEC 7.1's table says the end line holds, whoever sent the message."""
SENDER_WORDS = {
    "session": ("pi session ", "session", "process"),
    "process": ("process ", "process", "session"),
}
"""Sender kind → what the header names it by, the word the end line says, and the
word it must not say (SPEC 7.1)."""


@then("the frame says each point of the boundary, for a (session|process) sender")
@checks("INV-19")
def boundary_said(context: Context, kind: str) -> None:
    lines, _ = that_text(context)
    header, end = lines[0].lower(), lines[-1].lower()
    named, said, unsaid = SENDER_WORDS[kind]
    assert named in header, f"the header does not name a {kind} by {named!r}: {lines[0]}"
    assert said in end and unsaid not in end, (
        f"the end line does not say it came from a {kind} ({said!r}, not {unsaid!r}): {lines[-1]}"
    )
    missing = [words for words in (*BOUNDARY_WORDS, "unreviewed") if words not in end]
    assert not missing, f"the end line does not say {missing}: {lines[-1]}"


@then(
    f"only the first and the last line of the text that entered the context of {QUOTED} "
    f"start with {QUOTED}"
)
@checks("INV-19")
def only_frame_lines(context: Context, label: str, prefix: str) -> None:
    lines = look_at_text(context, label)
    starting = [n for n, line in enumerate(lines) if line.startswith(prefix)]
    assert starting == [0, len(lines) - 1], f"lines {starting} of {lines}"
