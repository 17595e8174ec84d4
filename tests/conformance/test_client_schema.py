"""The kit's schema validation (pipost_conformance.client): an answer or a request
that breaks the driver protocol's schema is a DriverError naming the operation
and the JSON path, through ``ValidatingDriver``, ``ProtocolSchema`` and a
``SubprocessDriver`` asked to validate. That pipost's own traffic validates is
tested in tests/test_driver_schema.py."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from pipost_conformance.client import (
    DriverError,
    Json,
    ProtocolSchema,
    Result,
    SubprocessDriver,
    ValidatingDriver,
)


class Answers:
    """A driver that answers what the test says, whatever it is asked."""

    def __init__(self, result: Result) -> None:
        self.result = result

    def call(self, op: str, **args: Json) -> Result:
        return self.result


FULL = {"code": "mailbox_full", "text": "full", "address": "s-0123456789ab", "cap": 50}


@pytest.mark.parametrize(
    ("op", "args", "result", "error"),
    [
        (
            "send",
            {"targets": ["bob"], "body": "hi", "cwd": "/"},
            {"receipts": [{"address": "bob", "id": "x", "delivered": False}]},
            "send: the answer breaks the protocol at $.result.receipts[0].address:",
        ),
        (
            "send",
            {"targets": ["bob"], "body": "hi", "cwd": "/"},
            {"refused": FULL},
            "send: the answer breaks the protocol at $.result.refused: 'queued' is a required",
        ),
        (
            "send",
            {"targets": ["bob"], "body": "hi", "cwd": "/"},
            {"refused": "mailbox s-0123456789ab is full"},
            "send: the answer breaks the protocol at $.result.refused: 'mailbox",
        ),
        (
            "count",
            {"address": "s-0123456789ab"},
            {"count": -1},
            "count: the answer breaks the protocol at $.result.count:",
        ),
        (
            "register",
            {"session_id": "a", "cwd": "/", "name": None},
            {},
            "register: the request breaks the protocol at $.args.name: None is not of type",
        ),
        ("fly", {}, {}, "fly: the protocol's schema has no such operation"),
    ],
)
def test_a_wrong_answer_or_request_is_a_driver_error_naming_the_op_and_the_path(
    op: str, args: dict[str, Json], result: Result, error: str
) -> None:
    with pytest.raises(DriverError) as caught:
        ValidatingDriver(Answers(result)).call(op, **args)
    assert str(caught.value).startswith(error), caught.value


@pytest.mark.parametrize(
    "answer",
    [
        {"id": 1},
        {"id": 1, "result": {"count": 0}, "checksum": 7},
        {"id": 1, "error": 404},
    ],
)
def test_an_answer_line_outside_the_protocol_is_a_driver_error_naming_the_op(
    answer: dict[str, Json],
) -> None:
    with pytest.raises(DriverError) as caught:
        ProtocolSchema().check_answer("count", answer)
    assert str(caught.value).startswith("count: the answer breaks the protocol at $"), caught.value


WRONG_COUNT = """
import json, sys
for line in sys.stdin:
    request = json.loads(line)
    result = {"count": "three"}
    if request["op"] == "open":
        toy = {"name": "toy", "version": "0", "language": "Python"}
        result = {"root": "/", "protocol": request["args"]["protocol"], "implementation": toy}
    print(json.dumps({"id": request["id"], "result": result}), flush=True)
"""


def test_the_subprocess_transport_validates_every_answer_when_asked(tmp_path: Path) -> None:
    checked = SubprocessDriver([sys.executable, "-c", WRONG_COUNT], timeout_s=30, validate=True)
    unchecked = SubprocessDriver([sys.executable, "-c", WRONG_COUNT], timeout_s=30)
    try:
        checked.open(tmp_path, home="/")
        with pytest.raises(DriverError, match=r"count: the answer breaks .* \$\.result\.count"):
            checked.call("count", address=f"s-{'0' * 12}")
        unchecked.open(tmp_path, home="/")
        assert unchecked.call("count", address=f"s-{'0' * 12}") == {"count": "three"}
    finally:
        checked.close()
        unchecked.close()


# -- the receiving operations ----------------------------------------------------------

ENTRY = {"message": {}, "text": "t", "on_disk": True}


@pytest.mark.parametrize(
    ("op", "args", "result", "path"),
    [
        (
            "deliver",
            {"session_id": "a"},
            {"entered": [ENTRY], "dropped": [], "set_aside": []},
            "$.result.entered[0]",
        ),
        ("deliver", {"session_id": "a", "crash": "before_entry"}, {}, "$.args.crash"),
        ("deliver", {"session_id": "a", "context": "transcript"}, {}, "$.args.context"),
        (
            "deliver",
            {"session_id": "a"},
            {
                "entered": [],
                "dropped": [{"name": "x.json", "reason": {"code": "loop_guard", "text": "t"}}],
                "set_aside": [],
            },
            "$.result.dropped[0].reason",
        ),
        ("race", {"session_id": "a", "receivers": ["one"]}, {}, "$.args.receivers"),
        (
            "race",
            {"session_id": "a", "receivers": ["one", "two"]},
            {"receivers": [{"entered": []}]},
            "$.result.receivers[0]",
        ),
    ],
)
def test_the_schema_catches_a_receiving_request_or_answer_that_breaks_the_protocol(
    op: str, args: dict[str, Json], result: Result, path: str
) -> None:
    class Answers:
        def call(self, op: str, **args: Json) -> Result:
            return result

    with pytest.raises(DriverError, match=re.escape(f"breaks the protocol at {path}:")):
        ValidatingDriver(Answers()).call(op, **args)
