"""Golden data from the reference pi-post 0.7 CLI (the kit's fixtures/interop), and
the vectors (the kit's vectors/)."""

from __future__ import annotations

import base64
import json
import os

from behave import given, then, when
from behave.runner import Context

from pipost_conformance import INTEROP, vector_bytes, vectors
from pipost_conformance.client import Json
from pipost_conformance.features.steps.feature_world import (
    QUOTED,
    checks,
    dict_of,
    int_of,
    text_of,
    use_regular_expressions,
    world,
    write_private,
)

use_regular_expressions()

MESSAGES = INTEROP / "messages"


def _message_files() -> list[tuple[str, str]]:
    """(address, file name) of every message the reference wrote, named
    ``<address>--<id>.json`` in the fixture folder."""
    found = []
    for fixture in sorted(os.listdir(MESSAGES)):
        address, _, name = fixture.partition("--")
        found.append((address, name))
    assert found, f"no message files in {MESSAGES}"
    return found


# -- addresses ------------------------------------------------------------------------------


@when(f"I ask for the address of session id {QUOTED}")
def address_of(context: Context, session_id: str) -> None:
    world(context).act("address_of", session_id=session_id)


@then(f"the address is {QUOTED}")
@checks("INV-01")
def address_is(context: Context, address: str) -> None:
    assert world(context).result == {"address": address}, world(context).result


@then("every address of the vectors is the one derived from its session id")
@checks("INV-01", "INV-21")
def every_address_vector(context: Context) -> None:
    the = world(context)
    cases = vectors("address")
    assert cases, "no address vectors"
    for name, (sent, expected) in cases.items():
        found = the.call("address_of", session_id=sent["sessionId"])["address"]
        assert found == expected["address"], f"{name} ({sent['sessionId']!r}): {found}"


@then("every letter of the vectors is accepted or rejected as it expects")
@checks("INV-21")
def every_letter_vector(context: Context) -> None:
    the = world(context)
    cases = vectors("letter")
    assert cases, "no letter vectors"
    for name, (sent, expected) in cases.items():
        raw, file_name = vector_bytes(sent)
        named = {} if file_name is None else {"file_name": file_name}
        answer = the.call("parse", raw_base64=base64.b64encode(raw).decode("ascii"), **named)
        if "message" in answer:
            found = {"accepted": answer["message"]}
        else:
            reason = answer["rejected"]
            assert isinstance(reason, dict), answer
            found = {"rejected": {k: v for k, v in reason.items() if k != "text"}}
        assert found == expected, f"{name}: {json.dumps(found, ensure_ascii=False)[:300]}"


# -- messages -------------------------------------------------------------------------------


@given("the message files the reference wrote are in their mailboxes")
def reference_mail(context: Context) -> None:
    the = world(context)
    for address, name in _message_files():
        data = (MESSAGES / f"{address}--{name}").read_bytes()
        write_private(the.root / "inbox" / address / name, data)


@then("every message file the reference wrote parses, its id matching its file name")
@checks("INV-21")
def reference_files_parse(context: Context) -> None:
    the = world(context)
    for address, name in _message_files():
        raw = (MESSAGES / f"{address}--{name}").read_text(encoding="utf-8")
        parsed = the.call("parse", text=raw, file_name=name)
        assert "message" in parsed, f"{name}: {parsed}"
        assert parsed["message"] == json.loads(raw), f"{name}: {parsed}"


@then(f"the messages taken are the reference's files for {QUOTED}, oldest first")
@checks("INV-21", "INV-07")
def taken_are_reference(context: Context, address: str) -> None:
    the = world(context)
    expected = [
        json.loads((MESSAGES / f"{a}--{name}").read_text(encoding="utf-8"))
        for a, name in _message_files()
        if a == address
    ]
    assert expected, f"the reference wrote nothing for {address}"
    # The right letters in another order break the order (INV-07) and nothing else.
    reordered = sorted(map(_canonical, the.taken)) == sorted(map(_canonical, expected))
    blamed = "INV-07" if reordered else "INV-21"
    assert the.taken == expected, f"[{blamed}] {the.taken} != {expected}"
    assert not the.set_aside, f"[INV-21] set aside: {the.set_aside}"


def _canonical(message: Json) -> str:
    return json.dumps(message, sort_keys=True)


@then(f"the letter pipost wrote to {QUOTED} is the reference's {QUOTED} but for its random part")
@checks("INV-21")
def same_bytes(context: Context, label: str, fixture: str) -> None:
    """Byte for byte, but for the 8 random characters of the id and the sender's
    directory: the reference's, below the scratch folder here."""
    the = world(context)
    (receipt,) = the.receipts()
    ours = text_of(receipt["id"])
    reference = (MESSAGES / fixture).read_bytes()
    theirs_cwd = text_of(dict_of(json.loads(reference)["from"])["cwd"])
    assert the.cwd == f"{the.scratch}{theirs_cwd}", f"sent from {the.cwd}, not {theirs_cwd}"
    reference = reference.replace(
        f'"cwd":{json.dumps(theirs_cwd)}'.encode(), f'"cwd":{json.dumps(the.cwd)}'.encode()
    )
    theirs = fixture.partition("--")[2].removesuffix(".json")
    # Only the 8 random hex characters of an id may differ; the time part must not.
    assert ours[:13] == theirs[:13], f"{ours} was not sent at the reference's time"
    written = (the.inbox(label) / f"{ours}.json").read_bytes()
    assert written == reference.replace(theirs.encode(), ours.encode()), written


# -- the registry -----------------------------------------------------------------------------


@given("the registry the reference's transcripts were made with, its live session running")
def reference_registry(context: Context) -> None:
    """The records of cli-transcripts.json, at the moment its transcripts were made:
    the one record with a pid names a process that runs. Each session's directory
    is made in the scratch folder, the reference's path below it."""
    the = world(context)
    transcripts = json.loads((INTEROP / "cli-transcripts.json").read_text(encoding="utf-8"))
    entries = transcripts["fixture"]
    moments = {entry["record"]["lastSeen"] + entry["lastSeenAgoMs"] for entry in entries}
    assert len(moments) == 1, f"the fixture's ages disagree on when it was made: {moments}"
    the.call("set_clock", now=moments.pop())
    for entry in entries:
        record = dict_of(entry["record"])
        record["cwd"] = the.directory("{scratch}" + text_of(record["cwd"]))
        if "pid" in record:
            record["pid"] = int_of(the.call("process_start")["pid"])
        path = the.root / "registry" / f"{text_of(record['address'])}.json"
        write_private(path, json.dumps(record).encode())
