"""``--json`` on the reading commands and doctor: one document per run, valid against
the shipped schema (schemas/cli.v1.schema.json), carrying the facts the text shows
with the real strings, documented in docs/json.md; json itself stays off the text
path."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource

from pipost import cli, doctor, message, schemas
from pipost.address import address_of
from pipost.droplog import Drop
from pipost.message import Sender, new_message
from tests.helpers import (
    NOW,
    FakeProcessTable,
    deposit,
    log_drop,
    make_message,
    make_record,
    python_in,
    write_record,
)
from tests.test_cli import LIVE_PID, Ran, Tree, run
from tests.test_cli import tree as tree  # the fixture of test_cli's reading tests

REPO = Path(__file__).resolve().parents[1]
CLI_SCHEMA = schemas.load("cli.v1")
REFERENCED = Registry().with_resources(
    (schema["$id"], Resource.from_contents(schema))
    for schema in (schemas.load("message.v1"), schemas.load("record.v1"))
)
DOCUMENTS = jsonschema.Draft202012Validator(CLI_SCHEMA, registry=REFERENCED)
COMMANDS = ("list", "resolve", "peek", "log", "quarantine", "doctor")
LIVE = FakeProcessTable({LIVE_PID: "t", os.getpid(): "self"})


def document(ran: Ran, command: str) -> dict[str, Any]:
    """The one document a run printed, checked against the schema."""
    assert ran.stdout.endswith("\n") and ran.stdout.count("\n") == 1, ran.stdout
    assert ran.stdout.isascii()
    found = json.loads(ran.stdout)
    DOCUMENTS.validate(found)
    assert found["v"] == 1
    assert found["command"] == command
    assert isinstance(found, dict)
    return found


def run_json(argv: list[str], root: Path, **kwargs: Any) -> dict[str, Any]:
    kwargs.setdefault("processes", LIVE)
    ran = run([*argv, "--json"], root, **kwargs)
    assert ran.code in ((0, 1) if argv[0] == "doctor" else (0,)), ran.stderr
    return document(ran, argv[0])


# -- the schema and the documentation ---------------------------------------------------


def test_the_schema_is_a_valid_draft_2020_12_schema_with_a_document_per_command() -> None:
    assert CLI_SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(CLI_SCHEMA)
    assert [ref["$ref"] for ref in CLI_SCHEMA["oneOf"]] == [f"#/$defs/{c}" for c in COMMANDS]
    for command in COMMANDS:
        assert CLI_SCHEMA["$defs"][command]["properties"]["command"] == {"const": command}


def test_the_schema_lists_exactly_the_codes_doctor_gives() -> None:
    assert CLI_SCHEMA["$defs"]["finding"]["properties"]["code"]["enum"] == sorted(doctor.CODES)


def test_the_documentation_names_every_document_field_and_code() -> None:
    text = (REPO / "docs" / "json.md").read_text(encoding="utf-8")
    for name, definition in CLI_SCHEMA["$defs"].items():
        for field in definition.get("properties", {}):
            assert f"`{field}`" in text, (name, field)
    for code in doctor.CODES:
        assert f"`{code}`" in text, code


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_with_a_document_says_so_in_its_help(command: str) -> None:
    usage, *rest = cli.HELP[command].splitlines()
    assert "[--json]" in usage
    assert any("--json" in line and "docs/json.md" in line for line in rest)


@pytest.mark.parametrize(
    "mistake",
    [{"v": 2}, {"command": "lists"}, {"hidden": -1}, {"now": {"ms": 1}}, {"extra": 1}],
    ids=repr,
)
def test_the_schema_refuses_what_is_not_a_listing(mistake: dict[str, Any]) -> None:
    listing = {"v": 1, "command": "list", "now": {"ms": 0, "iso": "1970-01-01T00:00:00.000Z"}}
    listing |= {"sessions": [], "hidden": 0}
    DOCUMENTS.validate(listing)
    assert not DOCUMENTS.is_valid(listing | mistake)


# -- the documents carry the facts -------------------------------------------------------


@pytest.mark.usefixtures("time_zone")
def test_list_gives_every_session_in_listing_order_with_presence_and_queued(tree: Tree) -> None:
    shown = run_json(["list", "--all"], tree.root)
    by_address = {s["address"]: s for s in shown["sessions"]}
    live, offline = by_address[tree.live.address], by_address[tree.offline.address]
    assert live["presence"] == "live"
    assert live["pid"] == LIVE_PID
    assert live["name"] == "builder"
    assert live["sessionId"] == tree.live.session_id
    assert live["cwd"] == tree.live.cwd
    assert live["lastSeen"] == {"ms": NOW, "iso": "2026-11-30T22:42:14.257Z"}
    assert live["resumeHandle"] == "019a0000-1111-7222"
    assert (offline["presence"], offline["queued"], offline["pid"]) == ("offline", 4, None)
    assert shown["hidden"] == 0
    text = run(["list", "--all"], tree.root, processes=LIVE).stdout.splitlines()
    assert [s["address"] for s in shown["sessions"]] == [
        next(a for a in by_address if a in line) for line in text
    ]


def test_list_without_all_counts_what_it_leaves_out(tmp_path: Path) -> None:
    root = tmp_path / "post"
    write_record(root, make_record("sess-recent", "/home/dev/a", last_seen=NOW - 60_000))
    write_record(root, make_record("sess-gone", "/home/dev/b", last_seen=NOW - 3 * 86_400_000))
    shown = run_json(["list"], root)
    assert [s["address"] for s in shown["sessions"]] == [address_of("sess-recent")]
    assert shown["hidden"] == 1
    assert run_json(["list", "--all"], root)["hidden"] == 0


def test_list_of_nothing_is_an_empty_document(tmp_path: Path) -> None:
    assert run_json(["list"], tmp_path / "post")["sessions"] == []


def test_a_recycled_pid_is_offline_in_the_document_too(tmp_path: Path) -> None:
    """INV-15: the presence a script reads is the honest one."""
    root = tmp_path / "post"
    write_record(root, make_record("sess-r", "/home/dev/r", pid=LIVE_PID, pid_start="old"))
    (session,) = run_json(["list"], root, processes=FakeProcessTable({LIVE_PID: "new"}))["sessions"]
    assert (session["presence"], session["pid"]) == ("offline", LIVE_PID)


@pytest.mark.parametrize(
    "handle",
    [
        "LIVE",
        "builder",
        "cache-fix",
        "/home/dev/cache-fix",
        "~/project",
        ".",
        "OFFLINE-ID",
        "019b0000",
    ],
)
def test_resolve_gives_the_address_every_handle_names(tree: Tree, handle: str) -> None:
    """INV-13: each kind of handle, as a script gets it."""
    wanted = tree.live if handle in ("LIVE", "builder", "~/project", ".") else tree.offline
    handle = {"LIVE": tree.live.address, "OFFLINE-ID": tree.offline.session_id}.get(handle, handle)
    shown = run_json(
        ["resolve", handle],
        tree.root,
        cwd=str(tree.project),
        env={"HOME": str(tree.project.parent)},
    )
    assert shown["handle"] == handle
    assert shown["address"] == wanted.address
    assert shown["session"]["address"] == wanted.address
    assert shown["queued"] == shown["session"]["queued"]


def test_resolve_of_an_address_without_a_record_has_no_session(tree: Tree) -> None:
    shown = run_json(["resolve", tree.orphan], tree.root)
    assert (shown["address"], shown["queued"], shown["session"]) == (tree.orphan, 1, None)


@pytest.mark.parametrize("handle", ["019c0000", "nobody"])
def test_a_refused_target_prints_no_document(tree: Tree, handle: str) -> None:
    for command in ("resolve", "peek"):
        ran = run([command, handle, "--json"], tree.root)
        assert (ran.code, ran.stdout) == (1, "")
        assert ran.stderr.startswith("pi-post: ")


@pytest.mark.usefixtures("time_zone")
def test_peek_gives_each_letter_with_its_id_sender_time_and_body_or_why_not(tree: Tree) -> None:
    shown = run_json(["peek", tree.offline.address], tree.root)
    assert shown["address"] == tree.offline.address
    bad, *letters = shown["letters"]
    assert bad["name"] == "0000000000001-deadbeef.json"
    assert bad["rejected"].startswith("not JSON")
    assert [letter["body"] for letter in letters] == ["m0", "m1", "m2"]
    first = letters[0]
    assert first["name"] == first["id"] + ".json"
    assert first["from"] == {"kind": "process", "name": "process:test"}
    assert first["replyTo"] is None
    assert first["sentAt"] == {"ms": NOW, "iso": "2026-11-30T22:42:14.257Z"}


def test_peek_gives_the_address_a_letter_asks_replies_at(tmp_path: Path) -> None:
    root = tmp_path / "post"
    record = write_record(root, make_record("sess-asks-replies", "/home/dev/x"))
    reply_to = address_of("sess-the-sender")
    deposit(root, record.address, new_message(Sender("process", "ci"), "hi", NOW, reply_to))
    (letter,) = run_json(["peek", record.address], root)["letters"]
    assert letter["replyTo"] == reply_to


def test_peek_of_an_empty_mailbox_is_an_empty_list(tree: Tree) -> None:
    assert run_json(["peek", tree.live.address], tree.root)["letters"] == []


def test_quarantine_gives_each_letter_set_aside_with_its_reason_and_path(tree: Tree) -> None:
    (entry,) = run_json(["quarantine"], tree.root)["letters"]
    assert entry["address"] == tree.live.address
    assert entry["reason"] == "set aside by the test"
    assert Path(entry["path"]).read_bytes().startswith(b'{"v":%d,' % message.VERSION)
    assert abs(entry["since"]["ms"] - os.lstat(entry["path"] + ".reason").st_mtime * 1000) < 1


@pytest.mark.usefixtures("time_zone")
def test_log_gives_every_drop_and_an_empty_log_is_an_empty_list(tmp_path: Path) -> None:
    root = tmp_path / "post"
    assert run_json(["log"], root)["drops"] == []
    drop = Drop(NOW, address_of("x"), "1796078534257-00000000.json", "process:a", "duplicate")
    log_drop(root, drop)
    (shown,) = run_json(["log"], root)["drops"]
    assert shown == {
        "at": {"ms": NOW, "iso": "2026-11-30T22:42:14.257Z"},
        "address": drop.address,
        "letter": drop.letter,
        "from": "process:a",
        "reason": "duplicate",
    }


def test_doctor_gives_its_findings_and_exits_as_the_text_does(tree: Tree) -> None:
    shown = run_json(["doctor"], tree.root)
    ran = run(["doctor"], tree.root, processes=LIVE)
    assert shown["healthy"] is (ran.code == 0)
    assert shown["root"] == str(tree.root)
    assert len(shown["findings"]) == len(ran.stdout.splitlines()) - 1  # the summary line
    for finding, line in zip(shown["findings"], ran.stdout.splitlines(), strict=False):
        assert line.startswith(f"{finding['severity']:<9} {finding['code']}: ")
    codes = {f["code"] for f in shown["findings"]}
    assert {"quarantine-held", "root-ok", "contract-ok"} <= codes
    assert shown["contract"]["version"] == message.VERSION


# -- real strings, safe for a terminal ------------------------------------------------------


def test_names_and_bodies_are_the_real_strings_in_ascii_json(tmp_path: Path) -> None:
    root = tmp_path / "post"
    name, cwd = "\x1b[31mred\x1b[0m é", "/home/dev/\x1b]0;owned\x07"
    record = write_record(root, make_record("sess-\x9b-hostile", cwd, name=name))
    body = "body \x1b[31m in red\u202e\nand \x07 a bell"
    deposit(root, record.address, new_message(Sender("process", "\x1b[1mb\x9b"), body, NOW))
    for argv in (["list"], ["resolve", record.address], ["peek", record.address]):
        ran = run([*argv, "--json"], root)
        assert "\x1b" not in ran.stdout and "\x9b" not in ran.stdout and "\\x1b" not in ran.stdout
        shown = document(ran, argv[0])
        if argv[0] == "peek":
            (letter,) = shown["letters"]
            assert letter["body"] == body
            assert letter["from"]["name"] == "\x1b[1mb\x9b"
        else:
            session = shown["session"] if argv[0] == "resolve" else shown["sessions"][0]
            assert (session["name"], session["cwd"]) == (name, cwd)
            assert session["sessionId"] == "sess-\x9b-hostile"


def test_a_file_name_that_is_not_utf8_still_makes_a_document(tmp_path: Path) -> None:
    root = tmp_path / "post"
    record = write_record(root, make_record("sess-odd-file", "/home/dev/x"))
    deposit(root, record.address, make_message(NOW))
    folder = os.fsencode(root / "inbox" / record.address)
    os.close(os.open(folder + b"/\xff.json", os.O_WRONLY | os.O_CREAT, 0o600))
    shown = run_json(["peek", record.address], root)
    assert shown["letters"][-1]["name"] == "\udcff.json"


# -- json stays off the text path -------------------------------------------------------------


def test_the_text_of_the_reading_commands_loads_no_json(tmp_path: Path) -> None:
    root = tmp_path / "post"
    record = write_record(root, make_record("sess-lean", "/home/dev/lean"))
    deposit(root, record.address, make_message(NOW))
    probe = (
        "import sys\n"
        "from pipost.cli import main\n"
        f"codes = [main([c, {record.address!r}]) for c in ('resolve', 'peek')] + [main(['list'])]\n"
        "print(codes, 'json' in sys.modules, 'pipost.documents' in sys.modules)\n"
    )
    printed = python_in(root, probe)
    assert printed.splitlines()[-1] == "[0, 0, 0] False False"
