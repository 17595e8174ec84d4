"""The vectors (src/pipost_conformance/vectors; docs/conformance.md, "Vectors"): the
manifest lists every case and nothing else, and pipost answers every case as it
expects, through its public functions."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pipost import format, message, session
from pipost.address import address_of
from pipost_conformance import VECTORS, vector_bytes, vectors

MANIFEST = json.loads((VECTORS / "v1.manifest.json").read_text(encoding="utf-8"))
CASES = [(case["kind"], case["name"]) for case in MANIFEST["cases"]]
ADDRESS = re.compile(r"s-[0-9a-f]{12}")


def test_every_case_the_manifest_lists_has_its_two_files_and_every_file_is_listed() -> None:
    listed = {
        Path(kind, f"{name}.{role}.json") for kind, name in CASES for role in ("input", "expected")
    }
    on_disk = {
        path.relative_to(VECTORS)
        for path in VECTORS.rglob("*")
        if path.is_file() and path.parent != VECTORS
    }
    assert sorted(listed - on_disk) == [], "listed, but no such file"
    assert sorted(on_disk - listed) == [], "a file the manifest does not list"
    assert len(set(CASES)) == len(CASES), "a case listed twice"
    assert sorted(p.name for p in VECTORS.iterdir() if p.is_file()) == ["v1.manifest.json"]


def test_every_kind_of_case_is_described_by_the_manifest_and_has_cases() -> None:
    assert {kind for kind, _ in CASES} == set(MANIFEST["kinds"])
    assert MANIFEST["version"] == 1
    parts = {"message": message.VERSION, "record": session.VERSION, "address": 1}
    assert MANIFEST["parts"] == parts


def _letter(fields: dict[str, Any]) -> message.Message:
    return message.Message(
        id=fields["id"],
        sender=message.Sender(**fields["from"]),
        sent_at=fields["sentAt"],
        body=fields["body"],
        reply_to=fields.get("replyTo"),
    )


def _read(read: Any, as_json: Any) -> dict[str, Any]:
    if isinstance(read, message.Rejected):
        return {"rejected": {"code": read.code, **read.facts}}
    return {"accepted": as_json(read)}


def _record(fields: dict[str, Any]) -> session.Record:
    return session.Record(
        address=fields["address"],
        session_id=fields["sessionId"],
        name=fields["name"],
        cwd=fields["cwd"],
        started_at=fields["startedAt"],
        last_seen=fields["lastSeen"],
        pid=fields.get("pid"),
        pid_start=fields.get("pidStart"),
    )


def _framed(fields: dict[str, Any], expected: dict[str, Any]) -> dict[str, Any]:
    """pipost's frame judged as a port's is (the manifest's "frame" kind), and its text."""
    text = format.frame(_letter(fields["message"]))
    header, *body, end = text.split("\n")
    framed = header.startswith("[pi-post]") and end.startswith("[pi-post]")
    return {
        "header_contains": [t for t in expected["header_contains"] if t in header],
        "body_lines": body,
        "end_contains": [t for t in expected["end_contains"] if t in end],
        "end_names_an_address": bool(ADDRESS.search(end)),
        "pipost_text": text if framed else "",
    }


def _answer(kind: str, given: Any, expected: Any) -> Any:
    """pipost's answer to one case, written as the case's expected file writes one."""
    if kind == "address":
        return {"address": address_of(given["sessionId"])}
    if kind == "letter":
        return _read(message.parse(*vector_bytes(given)), message.to_json)
    if kind == "record":
        return _read(session.parse(*vector_bytes(given)), session.to_json)
    if kind == "letter-written":
        return {"text": message.encode(_letter(given["message"])).decode("utf-8")}
    if kind == "record-written":
        return {"text": session.encode(_record(given["record"])).decode("utf-8")}
    assert kind == "frame"
    return _framed(given, expected)


@pytest.mark.parametrize(("kind", "name"), [pytest.param(k, n, id=f"{k}/{n}") for k, n in CASES])
def test_pipost_answers_the_vector_as_it_expects(kind: str, name: str) -> None:
    given, expected = vectors(kind)[name]
    assert _answer(kind, given, expected) == expected


def test_the_frame_vectors_hold_each_point_of_the_frame() -> None:
    """What a port checks of its own frame (the manifest's header) is in the vectors for
    every case: the id at both ends, and a reply address exactly when there is one."""
    for given, expected in vectors("frame").values():
        fields = given["message"]
        assert fields["id"] in expected["header_contains"]
        assert fields["id"] in expected["end_contains"]
        assert expected["end_names_an_address"] == ("replyTo" in fields)
        assert expected["body_lines"], "a frame quotes at least one line"
