"""pipost's shim over JSON lines (SPEC 11; ``pi-post driver``): ``serve`` answers
one line per request, in order, and ``pi-post driver`` gives the same results as
pipost in this process."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from pipost.driver import InProcessDriver, serve
from pipost.driver_protocol import DEFAULT_NOW, PROTOCOL, Json
from pipost_conformance.client import SubprocessDriver


def served(*requests: dict[str, Json] | str) -> list[dict[str, Json]]:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in requests]
    out = io.StringIO()
    serve(io.StringIO("".join(line + "\n" for line in lines)), out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def open_request(root: Path) -> dict[str, Json]:
    args: dict[str, Json] = {"root": str(root / "post"), "home": str(root), "protocol": PROTOCOL}
    return {"id": "o", "op": "open", "args": args}


def test_serve_answers_each_request_in_order_with_its_id(tmp_path: Path) -> None:
    answers = served(
        open_request(tmp_path),
        {"id": 1, "op": "address_of", "args": {"session_id": "abc"}},
        {"id": 2, "op": "advance_clock", "args": {"ms": 5}},
    )
    opened = answers[0]["result"]
    assert isinstance(opened, dict)
    assert answers == [
        {"id": "o", "result": {**opened, "root": str(tmp_path / "post")}},
        {"id": 1, "result": {"address": "s-cb61287a5998"}},
        {"id": 2, "result": {"now": DEFAULT_NOW + 5}},
    ]
    assert opened["protocol"] == PROTOCOL


@pytest.mark.parametrize(
    ("request_line", "error"),
    [
        ("{not json", "not a JSON line"),
        ("[1, 2]", "a request is a JSON object"),
        ('{"id": 3, "op": 7}', "a request has an op"),
        ('{"id": 3, "op": "no_such_op"}', "unknown operation 'no_such_op'"),
        ('{"id": 3, "op": "count", "args": {"address": 12}}', "count: address must be"),
        ('{"id": 3, "op": "count", "args": {}}', "count: missing a required argument"),
    ],
)
def test_a_misuse_gets_an_error_line_and_the_next_request_still_an_answer(
    tmp_path: Path, request_line: str, error: str
) -> None:
    answers = served(
        open_request(tmp_path),
        request_line,
        {"id": 4, "op": "address_of", "args": {"session_id": "abc"}},
    )
    assert str(answers[1]["error"]).startswith(error), answers[1]
    assert answers[2] == {"id": 4, "result": {"address": "s-cb61287a5998"}}


def test_nothing_but_open_is_answered_before_open(tmp_path: Path) -> None:
    answers = served(
        {"id": 1, "op": "capabilities"},
        {
            "id": 2,
            "op": "open",
            "args": {"root": "relative/post", "home": "/", "protocol": PROTOCOL},
        },
    )
    assert answers == [
        {"id": 1, "error": "capabilities before open: open a world first"},
        {"id": 2, "error": "open: root must be an absolute path"},
    ]


def test_each_open_starts_a_fresh_world(tmp_path: Path) -> None:
    answers = served(
        open_request(tmp_path),
        {"id": 1, "op": "register", "args": {"session_id": "abc", "cwd": str(tmp_path)}},
        {"id": 2, "op": "advance_clock", "args": {"ms": 1000}},
        {
            **open_request(tmp_path),
            "args": {"root": str(tmp_path / "x"), "home": "/", "protocol": PROTOCOL},
        },
        {"id": 3, "op": "list"},
        {"id": 4, "op": "advance_clock", "args": {"ms": 0}},
    )
    assert answers[4] == {"id": 3, "result": {"sessions": [], "hidden": 0}}
    assert answers[5] == {"id": 4, "result": {"now": DEFAULT_NOW}}


def test_pi_post_driver_offers_what_pipost_in_process_does(
    tmp_path: Path, pipost_driver: SubprocessDriver
) -> None:
    in_process = InProcessDriver(tmp_path / "in-process", home=str(tmp_path))
    assert pipost_driver.call("capabilities") == in_process.call("capabilities")


def test_a_message_goes_through_pi_post_driver_as_through_pipost_in_process(
    tmp_path: Path, pipost_driver: SubprocessDriver
) -> None:
    in_process = InProcessDriver(tmp_path / "in-process", home=str(tmp_path))
    entered = []
    for driver in (pipost_driver, in_process):
        driver.call("register", session_id="bob", cwd=str(tmp_path), name="bob")
        refused = driver.call("send", targets=["bob"], body="hé\udcff", cwd="/")
        assert "body is not valid text" in str(refused["refused"])
        driver.call("send", targets=["bob"], body="hello, bob", cwd="/")
        (entry,) = as_list(driver.call("deliver", session_id="bob")["entered"])
        entered.append(as_dict(entry))
    through_pipe, in_process_entry = entered
    assert as_dict(through_pipe["message"])["body"] == "hello, bob"
    assert through_pipe["on_disk"] is True
    assert through_pipe["text"] == str(in_process_entry["text"]).replace(
        as_id(in_process_entry), as_id(through_pipe)
    )


def as_list(value: Json) -> list[Json]:
    assert isinstance(value, list), value
    return value


def as_dict(value: Json) -> dict[str, Json]:
    assert isinstance(value, dict), value
    return value


def as_id(entry: dict[str, Json]) -> str:
    return str(as_dict(entry["message"])["id"])
