"""The published JSON Schemas state the wire contract the parsers implement (SPEC 1.2, 1.3)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipost import message, schemas, session
from pipost.address import ADDRESS_PATTERN, address_of
from pipost.session import Record
from pipost_conformance import INTEROP
from tests.helpers import python_under_c_locale

INTEROP_MESSAGES = sorted((INTEROP / "messages").glob("*.json"))
FIXTURE_RECORDS: list[dict[str, Any]] = [
    entry["record"]
    for entry in json.loads((INTEROP / "cli-transcripts.json").read_text(encoding="utf-8"))[
        "fixture"
    ]
]
# The v1 wire, which pi-post 0.7 writes: its letters and records stay readable.
MESSAGE_SCHEMA = schemas.load("message.v1")
RECORD_SCHEMA = schemas.load("record.v1")
MESSAGES = jsonschema.Draft202012Validator(MESSAGE_SCHEMA)
RECORDS = jsonschema.Draft202012Validator(RECORD_SCHEMA)


@pytest.mark.parametrize("schema", [MESSAGE_SCHEMA, RECORD_SCHEMA], ids=["message", "record"])
def test_schema_is_a_valid_draft_2020_12_schema(schema: dict[str, Any]) -> None:
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("version", message.READABLE_VERSIONS)
def test_the_message_schema_of_each_version_uses_the_parser_constants(version: int) -> None:
    properties = schemas.load(f"message.v{version}")["properties"]
    assert properties["id"]["pattern"] == message.ID_PATTERN
    assert properties["replyTo"]["pattern"] == ADDRESS_PATTERN
    assert properties["from"]["properties"]["address"]["pattern"] == ADDRESS_PATTERN
    assert properties["body"]["maxLength"] == message.rules_of(version).body_cap
    assert properties["v"]["const"] == version


@pytest.mark.parametrize("version", session.READABLE_VERSIONS)
def test_the_record_schema_of_each_version_uses_the_parser_constants(version: int) -> None:
    properties = schemas.load(f"record.v{version}")["properties"]
    assert properties["address"]["pattern"] == ADDRESS_PATTERN
    assert properties["v"]["const"] == version


def test_the_version_written_is_the_last_read() -> None:
    assert message.READABLE_VERSIONS[-1] == message.VERSION
    assert session.READABLE_VERSIONS[-1] == session.VERSION


# -- messages -----------------------------------------------------------------------


@pytest.mark.parametrize("path", INTEROP_MESSAGES, ids=lambda path: path.name)
def test_interop_messages_validate(path: Path) -> None:
    MESSAGES.validate(json.loads(path.read_bytes()))


VALID_MESSAGE: dict[str, Any] = {
    "v": 1,
    "id": "1796078509367-deed10f1",
    "from": {
        "kind": "session",
        "name": "gtm-summoner",
        "address": "s-52c78af935a3",
        "cwd": "/home/dev/gtm",
    },
    "replyTo": "s-52c78af935a3",
    "sentAt": 1796078509367,
    "body": "text",
}


def message_with(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(VALID_MESSAGE)
    for key, value in changes.items():
        target, _, field = key.rpartition("__")
        holder = data["from"] if target == "from" else data
        if value is ...:
            holder.pop(field)
        else:
            holder[field] = value
    return data


def test_the_valid_message_validates() -> None:
    MESSAGES.validate(VALID_MESSAGE)
    MESSAGES.validate(message_with(from__kind="process", from__address=..., replyTo=...))


@pytest.mark.parametrize(
    "changes",
    [
        {"v": 2},
        {"v": True},
        {"v": "1"},
        {"v": ...},
        {"id": "1796078509367-DEED10F1"},
        {"id": "../../x"},
        {"id": ...},
        {"from": "gtm"},
        {"from": ...},
        {"from__kind": "robot"},
        {"from__kind": ...},
        {"from__name": ""},
        {"from__name": 7},
        {"from__name": ...},
        {"from__address": "../../x"},
        {"from__address": None},
        {"from__address": ...},  # a session sender has an inbox
        {"from__kind": "process"},  # a process sender has none
        {"from__cwd": 5},
        {"from__pid": 1},
        {"replyTo": "../../x"},
        {"replyTo": "S-52C78AF935A3"},
        {"replyTo": None},
        {"sentAt": -1},
        {"sentAt": "1796078509367"},
        {"sentAt": 1796078509367.5},
        {"sentAt": ...},
        {"body": 5},
        {"body": "x" * (message.BODY_CAP + 1)},
        {"body": ...},
        {"priority": "high"},
    ],
    ids=repr,
)
def test_message_schema_rejects(changes: dict[str, Any]) -> None:
    assert not MESSAGES.is_valid(message_with(**changes))


# -- records ------------------------------------------------------------------------


def with_a_pid(record: dict[str, Any]) -> dict[str, Any]:
    """The live fixture record says "<pid of a live process>" where the pid was."""
    return record | {"pid": 4242} if "pid" in record else record


@pytest.mark.parametrize(
    "record", FIXTURE_RECORDS, ids=[record["name"] for record in FIXTURE_RECORDS]
)
def test_interop_records_validate(record: dict[str, Any]) -> None:
    RECORDS.validate(with_a_pid(record))


def test_the_fixture_has_a_record_with_a_pid_and_one_without() -> None:
    assert {"pid" in record for record in FIXTURE_RECORDS} == {True, False}


ms = st.integers(min_value=0, max_value=10**13)


@st.composite
def records(draw: st.DrawFn) -> Record:
    session_id = draw(st.text(min_size=1))
    pid = draw(st.none() | st.integers(min_value=1, max_value=2**22))
    return Record(
        address=address_of(session_id),
        session_id=session_id,
        name=draw(st.text(min_size=1)),
        cwd=draw(st.text(min_size=1)),
        started_at=draw(ms),
        last_seen=draw(ms),
        pid=pid,
        pid_start=draw(st.none() | st.text(min_size=1)) if pid is not None else None,
    )


@given(records())
def test_records_written_by_the_registry_validate(record: Record) -> None:
    written = json.loads(session.encode(record))
    RECORDS.validate(written)
    assert ("pid" in written) == (record.pid is not None)


def test_a_record_may_carry_fields_other_writers_added() -> None:
    RECORDS.validate(FIXTURE_RECORDS[1] | {"model": "x", "tags": ["a"]})


@pytest.mark.parametrize(
    "changes",
    [
        {"v": 2},
        {"address": "../../x"},
        {"address": "S-D51010B8F7A1"},
        {"sessionId": ""},
        {"name": ""},
        {"cwd": ""},
        {"cwd": 5},
        {"pid": 0},
        {"pid": -1},
        {"pid": "123"},
        {"pid": 1.5},
        {"pidStart": 17},
        {"startedAt": "1796074634257"},
        {"lastSeen": None},
    ],
    ids=repr,
)
def test_record_schema_rejects(changes: dict[str, Any]) -> None:
    assert not RECORDS.is_valid(FIXTURE_RECORDS[1] | changes)


@pytest.mark.parametrize(
    "missing", ["v", "address", "sessionId", "name", "cwd", "startedAt", "lastSeen"]
)
def test_record_schema_requires(missing: str) -> None:
    record = {key: value for key, value in FIXTURE_RECORDS[1].items() if key != missing}
    assert not RECORDS.is_valid(record)


SHIPPED = sorted(
    path.name.removesuffix(".schema.json")
    for path in Path(schemas.__file__).parent.glob("*.schema.json")
)


def test_every_shipped_schema_loads_the_same_under_a_locale_that_is_not_utf_8() -> None:
    """The schemas are UTF-8 (the report's has a non-ASCII character): a port's check of
    its report must not depend on the machine's locale (issue 16: mutmut found the read
    left to the locale's encoding unpinned)."""
    assert "conformance-report.v1" in SHIPPED
    probe = (
        "import json, sys\n"
        "from pipost import schemas\n"
        "print(json.dumps([schemas.load(name) for name in sys.argv[1:]]))\n"
    )
    done = python_under_c_locale(probe, *SHIPPED)
    assert (done.returncode, done.stderr) == (0, b"")
    assert json.loads(done.stdout) == [schemas.load(name) for name in SHIPPED]
