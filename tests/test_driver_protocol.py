"""pipost's shim speaks the versioned driver protocol (SPEC 11): ``open`` carries
the protocol version and pipost answers with its name, version and language; a
defaulted argument is an omitted key, and null is no argument's value. The kit's
client of the protocol is tested in tests/conformance/test_client_transport.py."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest

from pipost.address import address_of, default_name
from pipost.driver import InProcessDriver, serve
from pipost.driver_protocol import PROTOCOL, DriverError, Json
from tests.helpers import deposit, make_message


def served(*requests: dict[str, Json]) -> list[dict[str, Json]]:
    out = io.StringIO()
    serve(io.StringIO("".join(json.dumps(r) + "\n" for r in requests)), out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def open_args(tmp_path: Path, **more: Json) -> dict[str, Json]:
    return {"root": str(tmp_path / "post"), "home": str(tmp_path), **more}


def pi_post_version() -> str:
    printed = subprocess.run(
        [sys.executable, "-m", "pipost", "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert printed.startswith("pi-post "), printed
    return printed.removeprefix("pi-post ").strip()


def test_open_answers_the_protocol_and_what_pipost_is(tmp_path: Path) -> None:
    (answer,) = served({"id": 1, "op": "open", "args": open_args(tmp_path, protocol=PROTOCOL)})
    assert answer == {
        "id": 1,
        "result": {
            "root": str(tmp_path / "post"),
            "protocol": PROTOCOL,
            "implementation": {
                "name": "pipost",
                "version": pi_post_version(),
                "language": "Python",
            },
        },
    }
    in_process = InProcessDriver(tmp_path / "post", home=str(tmp_path))
    result = answer["result"]
    assert isinstance(result, dict)
    assert in_process.implementation == result["implementation"]


@pytest.mark.parametrize(
    ("protocol", "error"),
    [
        (
            {"protocol": PROTOCOL + 1},
            f"open: this driver speaks protocol {PROTOCOL}, not {PROTOCOL + 1}",
        ),
        ({"protocol": True}, f"open: this driver speaks protocol {PROTOCOL}, not True"),
        ({}, f"open: this driver speaks protocol {PROTOCOL}, not None"),
    ],
)
def test_a_protocol_the_driver_does_not_speak_is_an_error_and_opens_nothing(
    tmp_path: Path, protocol: dict[str, Json], error: str
) -> None:
    answers = served(
        {"id": 1, "op": "open", "args": open_args(tmp_path, **protocol)},
        {"id": 2, "op": "capabilities"},
    )
    assert answers == [
        {"id": 1, "error": error},
        {"id": 2, "error": "capabilities before open: open a world first"},
    ]


def test_open_gives_the_world_the_home_and_the_clock_it_names(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    register: dict[str, Json] = {"session_id": "s", "cwd": str(tmp_path / "project"), "name": "p"}
    answers = served(
        {"id": 1, "op": "open", "args": open_args(tmp_path, protocol=PROTOCOL, now=1_234)},
        {"id": 2, "op": "advance_clock", "args": {"ms": 0}},
        {"id": 3, "op": "register", "args": register},
        {"id": 4, "op": "resolve", "args": {"handle": "~/project", "cwd": "/"}},
    )
    assert answers[1] == {"id": 2, "result": {"now": 1_234}}
    resolved = answers[3]["result"]
    assert isinstance(resolved, dict) and resolved["address"] == address_of("s")


def test_a_shim_over_serve_names_its_own_implementation(tmp_path: Path) -> None:
    port: dict[str, Json] = {"name": "my-port", "version": "0.3.0", "language": "Python"}
    out = io.StringIO()
    request = {"id": 1, "op": "open", "args": open_args(tmp_path, protocol=PROTOCOL)}
    serve(io.StringIO(json.dumps(request) + "\n"), out, implementation=port)
    assert json.loads(out.getvalue())["result"]["implementation"] == port


# -- a defaulted argument is an omitted key ---------------------------------------------


def test_a_defaulted_argument_left_out_takes_its_default(tmp_path: Path) -> None:
    (tmp_path / "cache-fix").mkdir()
    driver = InProcessDriver(tmp_path / "post", home=str(tmp_path))
    result = driver.call("register", session_id="s", cwd=str(tmp_path / "cache-fix"))
    record = result["record"]
    assert isinstance(record, dict)
    assert record["name"] == f"cache-fix-{str(result['address'])[2:6]}"


@pytest.mark.parametrize(
    ("op", "args"),
    [
        ("register", {"session_id": "s", "cwd": "/", "name": None}),
        ("process_start", {"pid": None}),
        ("send", {"targets": ["x"], "body": "hi", "cwd": "/", "reply_to": None}),
        ("resolve", {"handle": "x", "cwd": "/", "home": None}),
    ],
)
def test_null_for_a_defaulted_argument_is_a_misuse(
    tmp_path: Path, op: str, args: dict[str, Json]
) -> None:
    driver = InProcessDriver(tmp_path / "post", home=str(tmp_path))
    (name,) = [key for key, value in args.items() if value is None]
    with pytest.raises(DriverError, match=f"{op}: {name} is null; leave an argument out"):
        driver.call(op, **args)
    assert not (tmp_path / "post").exists(), "a misuse did nothing"


@pytest.mark.parametrize(
    ("op", "args", "name"),
    [
        ("register", {"session_id": "s", "cwd": "/", "name": 5}, "name"),  # str | None
        ("send", {"targets": "bob", "body": "hi", "cwd": "/"}, "targets"),  # a list of str
        ("send", {"targets": [5], "body": "hi", "cwd": "/"}, "targets"),
        ("race", {"session_id": "s", "receivers": [1, 2]}, "receivers"),
    ],
)
def test_a_mistyped_argument_is_a_misuse_whatever_the_shape_of_its_type(
    tmp_path: Path, op: str, args: dict[str, Json], name: str
) -> None:
    driver = InProcessDriver(tmp_path / "post", home=str(tmp_path))
    with pytest.raises(DriverError, match=f"^{op}: {name} must be "):
        driver.call(op, **args)
    assert not (tmp_path / "post").exists(), "a misuse did nothing"


def test_a_send_reads_its_targets_home_from_home_when_given_else_the_worlds(
    tmp_path: Path,
) -> None:
    driver = InProcessDriver(tmp_path / "post", home=str(tmp_path))
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "proj").mkdir(parents=True)
    address = driver.call("register", session_id="s", cwd=str(elsewhere / "proj"))["address"]
    sent = driver.call("send", targets=["~/proj"], body="hi", cwd="/", home=str(elsewhere))
    receipts = sent["receipts"]
    assert isinstance(receipts, list) and len(receipts) == 1
    assert isinstance(receipts[0], dict) and receipts[0]["address"] == address
    assert "refused" in driver.call("send", targets=["~/proj"], body="hi", cwd="/")


def test_the_arguments_of_an_operation_are_checked_against_types_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading type hints costs more than most operations: once per operation, for
    every driver, and the check still refuses a mistyped argument."""
    read: list[object] = []
    real = typing.get_type_hints

    def counted(thing: Any) -> dict[str, Any]:
        read.append(thing)
        return real(thing)

    monkeypatch.setattr(typing, "get_type_hints", counted)
    for world in ("a", "b"):
        driver = InProcessDriver(tmp_path / world, home=str(tmp_path))
        for ms in (1, 2):
            driver.call("advance_clock", ms=ms)
        with pytest.raises(DriverError, match="advance_clock: ms must be"):
            driver.call("advance_clock", ms="3")
    assert len(read) <= 1, read


@pytest.mark.parametrize(
    ("more", "error"),
    [
        ({"clock": 5}, "open: unknown arguments ['clock']"),
        ({"home": 5}, "open: home must be a string"),
        ({"now": "1796078534257"}, "open: now must be an integer (ms)"),
        ({"now": True}, "open: now must be an integer (ms)"),
    ],
)
def test_open_with_arguments_it_does_not_take_is_an_error_and_opens_nothing(
    tmp_path: Path, more: dict[str, Json], error: str
) -> None:
    answers = served(
        {"id": 1, "op": "open", "args": {**open_args(tmp_path, protocol=PROTOCOL), **more}},
        {"id": 2, "op": "capabilities"},
    )
    assert answers == [
        {"id": 1, "error": error},
        {"id": 2, "error": "capabilities before open: open a world first"},
    ]
    assert not (tmp_path / "post").exists()


def test_an_error_for_a_line_that_is_no_request_carries_a_null_id(tmp_path: Path) -> None:
    """A line that is not a JSON object has no id to echo: its error line's id is
    null, as the example shim of docs/conformance.md answers it."""
    out = io.StringIO()
    serve(io.StringIO("{not json\n[1, 2]\n"), out)
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [answer["id"] for answer in answers] == [None, None]
    assert [str(answer["error"]).split(":")[0] for answer in answers] == [
        "not a JSON line",
        "a request is a JSON object",
    ]


def test_blank_lines_between_requests_are_passed_over(tmp_path: Path) -> None:
    out = io.StringIO()
    request = {"id": 7, "op": "open", "args": open_args(tmp_path, protocol=PROTOCOL)}
    serve(io.StringIO("\n  \n" + json.dumps(request) + "\n\n"), out)
    (answer,) = [json.loads(line) for line in out.getvalue().splitlines()]
    assert answer["id"] == 7 and "result" in answer


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({}, "parse takes exactly one of text and raw_base64"),
        ({"text": "{}", "raw_base64": "e30="}, "parse takes exactly one of text and raw_base64"),
        ({"raw_base64": "e30"}, "raw_base64 is not base64: Incorrect padding"),
        ({"raw_base64": "e3*="}, "raw_base64 is not base64: Only base64 data is allowed"),
    ],
)
def test_a_parse_without_exactly_one_letter_in_a_known_spelling_is_a_misuse(
    tmp_path: Path, args: dict[str, Json], error: str
) -> None:
    driver = InProcessDriver(tmp_path / "post", home=str(tmp_path))
    with pytest.raises(DriverError, match=f"^{re.escape(error)}"):
        driver.call("parse", **args)


# -- a session or a mailbox without a record ------------------------------------------


def test_a_session_without_a_record_sends_under_its_default_name_in_cwd(tmp_path: Path) -> None:
    driver = InProcessDriver(tmp_path / "post", home=str(tmp_path))
    driver.call("register", session_id="bob-session", cwd=str(tmp_path), name="bob")
    driver.call("send", targets=["bob"], body="hi", cwd="/home/dev/ghost", session="ghost")
    entered = driver.call("deliver", session_id="bob-session")["entered"]
    assert isinstance(entered, list) and len(entered) == 1
    (letter,) = entered
    ghost = address_of("ghost")
    assert isinstance(letter, dict) and isinstance(letter["message"], dict)
    assert letter["message"]["from"] == {
        "kind": "session",
        "name": default_name("/home/dev/ghost", ghost),
        "address": ghost,
        "cwd": "/home/dev/ghost",
    }
    assert letter["message"]["replyTo"] == ghost


def test_a_mailbox_without_a_record_resolves_to_its_address_and_its_mail(tmp_path: Path) -> None:
    """resolve of an address that has a mailbox but no record is a session whose
    record and presence are null and whose queued count is its mail
    (docs/conformance.md, resolve)."""
    root = tmp_path / "post"
    orphan = address_of("orphan-session")
    deposit(root, orphan, make_message(body="nobody reads this"))
    deposit(root, orphan, make_message(body="nor this"))
    driver = InProcessDriver(root, home=str(tmp_path))
    assert driver.call("resolve", handle=orphan, cwd="/") == {
        "address": orphan,
        "record": None,
        "presence": None,
        "queued": 2,
    }
