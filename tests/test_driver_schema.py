"""The driver protocol's JSON Schema (schemas/driver.v1, SPEC 11) describes the
traffic pipost really has and names every operation and every code. What the
kit's client makes of an answer or a request that breaks it is tested in
tests/conformance/test_client_schema.py."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pipost import refusals, schemas
from pipost.driver import InProcessDriver, serve
from pipost.driver_protocol import PROTOCOL, Json, Result
from pipost_conformance.client import ProtocolSchema, ValidatingDriver

SCHEMA = schemas.load("driver.v1")
OPS: dict[str, Any] = SCHEMA["$defs"]["ops"]["$defs"]


def test_the_schema_is_a_draft_2020_12_schema() -> None:
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_every_operation_pipost_offers_has_an_entry(tmp_path: Path) -> None:
    offered = InProcessDriver(tmp_path, home="/").call("capabilities")["ops"]
    assert isinstance(offered, list)
    assert {"open", *map(str, offered)} == set(OPS)


def kinds() -> list[type[refusals.Refusal]]:
    found, pending = [], list(refusals.Refusal.__subclasses__())
    while pending:
        kind = pending.pop()
        found.append(kind)
        pending += kind.__subclasses__()
    return found


def facts_in_schema(definition: str) -> dict[str, set[str]]:
    """code → the facts the schema requires for it."""
    rules = SCHEMA["$defs"][definition]["allOf"]
    codes = {code: set[str]() for code in rules[1]["properties"]["code"]["enum"]}
    for rule in rules[2:]:
        codes[rule["if"]["properties"]["code"]["const"]] = set(rule["then"]["required"])
    return codes


@pytest.mark.parametrize(("outcome", "definition"), [("refused", "refusal"), ("failed", "failure")])
def test_the_codes_and_facts_of_the_schema_are_those_of_pipost_refusals(
    outcome: str, definition: str
) -> None:
    """Every kind's code is in the schema's enum with the facts the kind passes on
    (``path`` is the one optional fact: a directory handle's unknown_target)."""
    in_schema = facts_in_schema(definition)
    for kind in (k for k in kinds() if k.outcome == outcome):
        assert kind.code in in_schema, kind
        assert in_schema[kind.code] == set(kind.facts) - {"path"}, kind
    pipost_codes = {k.code for k in kinds() if k.outcome == outcome}
    assert set(in_schema) - pipost_codes == ({"io_error"} if outcome == "failed" else set())


# -- real traffic --------------------------------------------------------------------


def test_the_traffic_of_pipost_in_process_validates(tmp_path: Path) -> None:
    driver = ValidatingDriver(InProcessDriver(tmp_path / "post", home=str(tmp_path)))
    for folder in ("bob", "shared"):
        (tmp_path / folder).mkdir()
    results: list[Result] = [
        driver.call("capabilities"),
        driver.call("set_clock", now=1_796_078_534_257),
        driver.call("advance_clock", ms=-5),
        driver.call("register", session_id="bob", cwd=str(tmp_path / "bob"), name="bob"),
        driver.call("register", session_id="a", cwd=str(tmp_path / "shared")),
        driver.call("register", session_id="b", cwd=str(tmp_path / "shared"), pid=77),
        driver.call("heartbeat", session_id="bob"),
        driver.call("heartbeat", session_id="nobody"),
        driver.call("send", targets=["bob"], body="hello", cwd=str(tmp_path), label="tester"),
        driver.call("send", targets=["bob"], body="hi", cwd="/", session="a", reply_to="none"),
        driver.call("send", targets=["shared"], body="which?", cwd="/"),
        driver.call("send", targets=["nobody"], body="hi", cwd="/", home=str(tmp_path)),
        driver.call("send", targets=["bob"], body="x" * 32769, cwd="/"),
        driver.call("list"),
        driver.call("list", all=True),
        driver.call("resolve", handle="bob", cwd="/"),
        driver.call("record", address="s-0123456789ab"),
        driver.call("record", address="../x"),
        driver.call("peek", address=address_of(driver, "bob")),
        driver.call("count", address=address_of(driver, "bob")),
        driver.call("take", address=address_of(driver, "bob")),
        driver.call("deliver", session_id="bob"),
        driver.call("shutdown", session_id="a"),
        driver.call("process_stop", pid=77),
        driver.call("process_stop", pid=77),
        driver.call("process_start"),
        driver.call("process_recycle", pid=77),
        driver.call("sweep"),
        driver.call("parse", text=json.dumps(hand_written_letter())),
    ]
    outcomes = {next(iter(result)) for result in results}
    assert {"refused", "receipts", "letters", "message", "entered"} <= outcomes, outcomes


def address_of(driver: ValidatingDriver, session_id: str) -> str:
    return str(driver.call("address_of", session_id=session_id)["address"])


def hand_written_letter() -> dict[str, Json]:
    return {
        "v": 1,
        "id": "1796078534257-0000000a",
        "from": {"kind": "process", "name": "hand"},
        "sentAt": 1796078534257,
        "body": "hi",
    }


def test_the_answers_of_serve_validate_open_and_errors_included(tmp_path: Path) -> None:
    schema = ProtocolSchema()
    requests: list[dict[str, Json]] = [
        {"id": 1, "op": "open", "args": {"root": str(tmp_path), "home": "/", "protocol": PROTOCOL}},
        {"id": 2, "op": "count", "args": {"address": "s-0123456789ab"}},
        {"id": 3, "op": "count", "args": {}},
    ]
    out = io.StringIO()
    serve(io.StringIO("".join(json.dumps(r) + "\n" for r in requests)), out)
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    for request, answer in zip(requests, answers, strict=True):
        op, args = str(request["op"]), request["args"]
        assert isinstance(args, dict)
        if op != "count" or args:
            schema.check_request(op, args)
        schema.check_answer(op, answer)
    assert "error" in answers[2]
