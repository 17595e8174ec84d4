"""Mailboxes: letters laid by hand, receiving, peeking, counting, setting aside."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from behave import given, step, then, when
from behave.runner import Context

from pipost_conformance.client import Json
from pipost_conformance.features.steps.feature_world import (
    QUOTED,
    QUOTED_LIST,
    checks,
    dict_of,
    letter_bytes,
    list_of,
    quoted_items,
    text_of,
    use_regular_expressions,
    valid_letter,
    world,
    write_private,
)

use_regular_expressions()

OLDEST_ID = "0000000000001-0badbad0"
"""Sorts before any id pipost writes today, so a bad letter is always first in line."""


def _damaged(description: str) -> bytes:
    """Bytes that are not a letter, described as a person would see them."""
    whole = letter_bytes(valid_letter(OLDEST_ID, "cut short"))
    damage = {
        "an empty file": b"",
        "half of a letter, cut off mid-write": whole[: len(whole) // 2],
        "bytes that are not UTF-8": b'{"v":1,"body":"\xff\xfe"}',
        "JSON nested 100000 deep": b"[" * 100_000 + b"]" * 100_000,
        "a JSON array": b"[1, 2, 3]",
        "a letter with a duplicated key": whole[:-1] + b',"body":"second"}',
        "a file of 300000 bytes": b'{"v":1,"body":"' + b"x" * 300_000 + b'"}',
        "a letter whose body is one byte over the cap": letter_bytes(
            valid_letter(OLDEST_ID, "x" * 32_769)
        ),
    }
    assert description in damage, f"no such damage: {description!r}"
    return damage[description]


def _mutated(path: str, value: Json) -> bytes:
    """A valid letter with one field (``from.kind`` reaches into ``from``) replaced."""
    letter = valid_letter(OLDEST_ID, "the bad one")
    *outer, key = path.split(".")
    target = letter
    for part in outer:
        target = dict_of(target[part])
    target[key] = value
    return letter_bytes(letter)


def _in_flight(name: str) -> bytes:
    """The first bytes of a letter still being written under its temporary name."""
    return letter_bytes(valid_letter(name.removesuffix(".json.tmp"), "in flight"))[:20]


def _lay_bad_letter(context: Context, label: str, data: bytes) -> None:
    the = world(context)
    name = OLDEST_ID + ".json"
    write_private(the.inbox(label) / name, data)
    the.bad_letter = (name, data)


# -- laying letters by hand --------------------------------------------------------------


@given(f"the oldest letter in the mailbox of {QUOTED} is a valid letter with (\\S+) set to (.+)")
def oldest_mutated(context: Context, label: str, path: str, value: str) -> None:
    _lay_bad_letter(context, label, _mutated(path, json.loads(value)))


@given(f"the oldest letter in the mailbox of {QUOTED} is damaged: (.+)")
def oldest_damaged(context: Context, label: str, description: str) -> None:
    _lay_bad_letter(context, label, _damaged(description))


@given(f"the mailbox of {QUOTED} holds a valid letter in a file named {QUOTED}")
def letter_under_name(context: Context, label: str, name: str) -> None:
    the = world(context)
    letter = valid_letter("1796078534000-0000000d", "hidden")
    write_private(the.inbox(label) / name, letter_bytes(letter))


@given(f"the mailbox of {QUOTED} holds a deposit in flight {QUOTED}")
def deposit_in_flight(context: Context, label: str, name: str) -> None:
    the = world(context)
    path = the.inbox(label) / name
    write_private(path, _in_flight(name))
    the.last_modified(path, 0)  # in flight now, by the scenario's clock


@given(f"the mailbox of {QUOTED} holds letters written newest first:")
def letters_newest_first(context: Context, label: str) -> None:
    assert context.table is not None, "the step needs a table of id and body"
    the = world(context)
    for row in context.table:
        letter = valid_letter(row["id"], row["body"])
        write_private(the.inbox(label) / f"{row['id']}.json", letter_bytes(letter))


@given(f"an empty mailbox folder for {QUOTED}")
def empty_mailbox(context: Context, label: str) -> None:
    folder = world(context).inbox(label)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)  # a port may have made it
    folder.parent.chmod(0o700)


# -- receiving ----------------------------------------------------------------------------


@step(f"{QUOTED} takes the next message")
def takes_next(context: Context, label: str) -> None:
    world(context).take(label)


@when(f"{QUOTED} takes every message")
def takes_every(context: Context, label: str) -> None:
    the = world(context)
    for _ in range(100):  # a mailbox holds at most 50; more means take never ends
        if the.take(label) is None:
            return
    raise AssertionError(f"{label} kept yielding messages")


@then(f"{QUOTED} receives {QUOTED}")
@checks("INV-05", "INV-10")
def receives(context: Context, label: str, body: str) -> None:
    the = world(context)
    assert the.taken_from == the.address(label), f"[INV-05] nothing was taken from {label}"
    assert the.taken, f"[INV-05] {label} received nothing"
    got = the.taken[-1]
    # The bad letter the scenario laid, received as a message, is INV-10's.
    bad = the.bad_letter is not None and f"{got.get('id')}.json" == the.bad_letter[0]
    assert got["body"] == body, f"[{'INV-10' if bad else 'INV-05'}] {got}"


@then(f"{QUOTED} receives nothing")
@checks("INV-03")
def receives_nothing(context: Context, label: str) -> None:
    the = world(context)
    assert the.taken_from == the.address(label), f"nothing was taken from {label}"
    assert the.result["message"] is None, the.result


@then(f"{QUOTED} received {QUOTED_LIST} in that order")
@checks("INV-07")
def received_in_order(context: Context, label: str, bodies: str) -> None:
    the = world(context)
    assert the.taken_from == the.address(label), f"nothing was taken from {label}"
    assert [m["body"] for m in the.taken] == quoted_items(bodies), the.taken


@then(f"{QUOTED} receives exactly the text I sent")
@checks("INV-21")
def receives_exactly(context: Context, label: str) -> None:
    the = world(context)
    message = the.take(label)
    assert message is not None, f"{label} received nothing"
    assert message["body"] == the.sent_body, f"{message['body']!r} != {the.sent_body!r}"


@then(f"{QUOTED} receives a body of (\\d+) {QUOTED} characters")
@checks("INV-09")
def receives_repeated(context: Context, label: str, count: str, character: str) -> None:
    message = world(context).take(label)
    assert message is not None, f"{label} received nothing"
    assert message["body"] == character * int(count), f"{len(text_of(message['body']))} chars"


@then(f"the message {QUOTED} receives comes from the (process|session) {QUOTED} in {QUOTED}")
@checks("INV-21")
def comes_from(context: Context, label: str, kind: str, name: str, cwd: str) -> None:
    the = world(context)
    message = the.take(label)
    assert message is not None, f"{label} received nothing"
    sender = dict_of(message["from"])
    expected = (kind, name, the.expand(cwd))
    assert (sender["kind"], sender["name"], sender["cwd"]) == expected, sender


@then(f"its sender address and reply address are those of {QUOTED}")
@checks("INV-21")
def sender_and_reply(context: Context, label: str) -> None:
    the = world(context)
    message = the.taken[-1]
    address = the.address(label)
    assert dict_of(message["from"]).get("address") == address, message
    assert message.get("replyTo") == address, message


@then(f"its sender address is that of {QUOTED} and it has no reply address")
@checks("INV-21")
def sender_no_reply(context: Context, label: str) -> None:
    the = world(context)
    message = the.taken[-1]
    assert dict_of(message["from"]).get("address") == the.address(label), message
    assert "replyTo" not in message, message


@then("it has neither a sender address nor a reply address")
@checks("INV-21")
def no_addresses(context: Context) -> None:
    message = world(context).taken[-1]
    assert "address" not in dict_of(message["from"]), message
    assert "replyTo" not in message, message


# -- peeking and counting -------------------------------------------------------------------


@when(f"I peek at the mailbox of {QUOTED}")
def peek(context: Context, label: str) -> None:
    the = world(context)
    the.act("peek", address=the.address(label))


@when(f"I count the messages of {QUOTED}")
def count(context: Context, label: str) -> None:
    the = world(context)
    the.act("count", address=the.address(label))


@then(r"the count is (\d+)")
@checks("INV-03")
def count_is(context: Context, expected: str) -> None:
    assert world(context).result["count"] == int(expected), world(context).result


@then(f"peek shows {QUOTED_LIST} in that order")
@checks("INV-03", "INV-07", "INV-21")
def peek_shows(context: Context, bodies: str) -> None:
    letters = [dict_of(entry) for entry in list_of(world(context).result["letters"])]
    shown = [dict_of(entry["message"])["body"] for entry in letters if "message" in entry]
    wanted = quoted_items(bodies)
    # The right letters in another order break the order; a letter written that its
    # reader rejects breaks the wire form; anything else, what a letter is.
    reordered = sorted(map(str, shown)) == sorted(wanted)
    rejected = any("rejected" in entry for entry in letters)
    blamed = "INV-07" if reordered else "INV-21" if rejected else "INV-03"
    assert shown == wanted, f"[{blamed}] {letters}"


@then("peek shows nothing")
@checks("INV-03")
def peek_shows_nothing(context: Context) -> None:
    assert world(context).result["letters"] == [], world(context).result


@then(r"peek shows (\d+) messages? and (\d+) letters? that (?:is|are) not a message")
@checks("INV-10")
def peek_shows_counts(context: Context, messages: str, rejected: str) -> None:
    letters = [dict_of(entry) for entry in list_of(world(context).result["letters"])]
    assert sum("message" in entry for entry in letters) == int(messages), letters
    assert sum("rejected" in entry for entry in letters) == int(rejected), letters


@then(f"the mailbox of {QUOTED} holds (\\d+) messages?")
@checks("INV-05", "INV-08")
def mailbox_holds(context: Context, label: str, expected: str) -> None:
    found = world(context).count(label)
    assert found == int(expected), f"{label} holds {found}"


# -- the files themselves -----------------------------------------------------------------


@then(f'the bad letter was set aside as "(\\w+)"(?: with (field|key) {QUOTED})?')
@checks("INV-10")
def set_aside_as(context: Context, code: str, fact_name: str | None, fact: str | None) -> None:
    """The code of the reason (SPEC 10) and, where the code has one, its fact
    (``as "bad_field" with field "from.kind"``, ``as "duplicate_key" with key
    "body"``); an oversize letter's ``limit`` is a number of bytes it exceeded."""
    the = world(context)
    assert the.bad_letter is not None, "the scenario laid no bad letter"
    name, data = the.bad_letter
    reasons = {text_of(entry["name"]): dict_of(entry["reason"]) for entry in the.set_aside}
    assert name in reasons, f"not set aside: {the.set_aside}"
    reason = reasons[name]
    assert reason.get("code") == code, reason
    if fact_name is not None:
        assert reason.get(fact_name) == fact, reason
    if code == "oversize":
        limit = reason.get("limit")
        assert isinstance(limit, int) and limit < len(data), reason


# A quarantine is bounded in size: a file too large to be a letter may keep only
# its head, as long as that head is at least as large as any letter can be.
KEPT_HEAD_BYTES = 6 * 32768 + 64 * 1024


@then("the bad letter is kept outside the mailboxes, whole or its head when oversize")
@checks("INV-10")
def bad_letter_kept(context: Context) -> None:
    the = world(context)
    assert the.bad_letter is not None, "the scenario laid no bad letter"
    name, data = the.bad_letter
    inbox = the.root / "inbox"
    assert not any(inbox.glob(f"*/{name}")), f"{name} is still in a mailbox"
    wanted = min(len(data), KEPT_HEAD_BYTES)
    kept = [
        path
        for path in the.root.rglob("*")
        if inbox not in path.parents
        and stat.S_ISREG(os.lstat(path).st_mode)  # never through a link, never a FIFO
        and _keeps(_head(path, len(data) + 1), data, wanted)
    ]
    assert kept, "the bad letter was destroyed"


def _keeps(head: bytes, data: bytes, wanted: int) -> bool:
    """Whether a file starting with ``head`` keeps the bad letter ``data``: whole, or
    at least ``wanted`` bytes of its head; or, when ``data`` is itself only the head
    of a giant, all of it."""
    if len(data) >= KEPT_HEAD_BYTES and head.startswith(data):
        return True
    return len(head) >= wanted and data.startswith(head)


def _head(path: Path, size: int) -> bytes:
    """At most ``size`` bytes: a sparse giant is never read whole."""
    with path.open("rb") as file:
        return file.read(size)


@then(f"the mailbox folder of {QUOTED} holds only {QUOTED_LIST}")
@checks("INV-03", "INV-17")
def folder_holds_only(context: Context, label: str, names: str) -> None:
    found = sorted(os.listdir(world(context).inbox(label)))
    assert found == sorted(quoted_items(names)), found


@then(f"the mailbox folder of {QUOTED} holds just the letter named after the message's id")
@checks("INV-03")
def folder_holds_letter(context: Context, label: str) -> None:
    the = world(context)
    (receipt,) = the.receipts()
    found = os.listdir(the.inbox(label))
    assert found == [f"{text_of(receipt['id'])}.json"], found


@then(f"the mailbox folder of {QUOTED} (exists|is gone)")
@checks("INV-17")
def folder_exists(context: Context, label: str, state: str) -> None:
    folder = world(context).inbox(label)
    assert folder.is_dir() == (state == "exists"), f"{folder}: expected it {state}"


@then(r"the id of the message starts with (\d+)-")
@checks("INV-21")
def id_starts(context: Context, sent_at: str) -> None:
    (receipt,) = world(context).receipts()
    assert text_of(receipt["id"]).startswith(sent_at + "-"), receipt


@then(f"the file of the message in the mailbox of {QUOTED} parses to the same message")
@checks("INV-21")
def file_parses(context: Context, label: str) -> None:
    the = world(context)
    (receipt,) = the.receipts()
    name = f"{text_of(receipt['id'])}.json"
    raw = (the.inbox(label) / name).read_text(encoding="utf-8")
    parsed = the.call("parse", text=raw, file_name=name)
    assert "message" in parsed, parsed
    message = dict_of(parsed["message"])
    assert message["id"] == receipt["id"] and message["body"] == the.sent_body, message
    assert message == json.loads(raw), f"{message} != {raw}"


@then("every folder in the tree is 0700 and every file 0600")
@checks("INV-22")
def private_modes(context: Context) -> None:
    root = world(context).root
    for path in [root, *root.rglob("*")]:
        mode = stat.S_IMODE(os.lstat(path).st_mode)
        expected = 0o700 if path.is_dir() else 0o600
        assert mode == expected, f"{path} is {oct(mode)}"


@then("no file in the tree is a deposit in flight")
@checks("INV-03")
def no_temporary(context: Context) -> None:
    leftovers = [p for p in world(context).root.rglob("*") if p.name.endswith(".tmp")]
    assert not leftovers, leftovers


@then(f"the deposit in flight {QUOTED} is still in the mailbox of {QUOTED}, untouched")
@checks("INV-03", "INV-17")
def tmp_untouched(context: Context, name: str, label: str) -> None:
    the = world(context)
    path = the.inbox(label) / name
    # Gone in a sweep, it was swept (INV-17); gone otherwise, it was read as a letter.
    blamed = "INV-17" if "mailboxes_removed" in the.result else "INV-03"
    assert path.is_file(), f"[{blamed}] {name} is gone"
    assert path.read_bytes() == _in_flight(name), f"[{blamed}] the deposit in flight was changed"
