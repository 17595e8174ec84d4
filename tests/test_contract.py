"""The contract gate: the wire contract equals the pin of its message-schema version,
and a change to it without a version bump fails, saying what changed (INV-21)."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path

import pytest

from pipost import cli, contract
from pipost.contract import Parts

INTEROP = Path(__file__).parent / "fixtures" / "interop"


def test_the_wire_contract_matches_the_pin_of_its_version() -> None:
    """The gate itself. If this fails, the message says which part changed and how:
    undo the change, or bump message.VERSION and run python -m pipost.contract --pin."""
    problems = contract.check(contract.current_version(), contract.parts(), contract.load_pins())
    assert not problems, "\n\n".join(problems)


def test_every_pin_is_the_fingerprint_of_the_parts_it_keeps() -> None:
    for version, (fingerprint, parts) in contract.load_pins().items():
        assert contract.fingerprint(parts) == fingerprint, f"the pin of v{version} was edited"


def test_the_address_vectors_are_the_ones_the_reference_computed() -> None:
    reference = json.loads((INTEROP / "address-vectors.json").read_text(encoding="utf-8"))
    assert contract.parts()["address_vectors"] == reference["vectors"]


def test_the_parts_come_from_the_code() -> None:
    parts = contract.parts()
    assert parts["file_naming"] == {
        "record": "registry/<address>.json",
        "letter": "inbox/<address>/<id>.json",
        "letter_in_flight": "inbox/<address>/<id>.json.tmp",
        "folder_mode": "0700",
        "file_mode": "0600",
    }
    assert parts["message_rules"] == {
        "v": 1,
        "id_pattern": "^[0-9]{13}-[0-9a-f]{8}$",
        "body_cap_bytes": 32768,
    }
    written = parts["record_fields"]
    assert isinstance(written, dict)
    assert written["written"] == [
        *("v", "address", "sessionId", "name", "cwd"),
        *("pid", "pidStart", "startedAt", "lastSeen"),
    ]


def test_prose_in_the_schemas_is_not_part_of_the_contract() -> None:
    schema = contract.parts()["message_schema"]
    assert "description" not in json.dumps(schema)
    assert "pattern" in json.dumps(schema)


def _with_priority(parts: Parts) -> Parts:
    changed = copy.deepcopy(parts)
    _schema_gains_priority(changed)
    return changed


def _schema_gains_priority(parts: Parts) -> None:
    schema = parts["message_schema"]
    assert isinstance(schema, dict) and isinstance(schema["properties"], dict)
    schema["properties"]["priority"] = {"type": "integer"}


def test_a_changed_contract_with_the_same_version_fails_saying_what_changed() -> None:
    version, pins = contract.current_version(), contract.load_pins()
    problems = contract.check(version, _with_priority(contract.parts()), pins)
    assert f"still v{version}" in problems[0]
    assert len(problems) == 2
    assert problems[1].startswith("changed: message_schema\n")
    assert '+    "priority": {' in problems[1]


def test_a_bumped_version_fails_until_pinned_then_passes_and_keeps_the_old_pin() -> None:
    version, pins = contract.current_version(), contract.load_pins()
    changed = _with_priority(contract.parts())
    assert contract.check(version + 1, changed, pins) == [
        f"the wire contract has no pin for message schema v{version + 1}: after bumping the "
        "version, pin it with: python -m pipost.contract --pin"
    ]
    bumped = contract.pin(version + 1, changed, pins)
    assert contract.check(version + 1, changed, bumped) == []
    assert bumped[version] == pins[version]
    assert contract.check(version, contract.parts(), bumped) == []


def test_a_published_version_is_never_pinned_to_another_contract() -> None:
    version, pins = contract.current_version(), contract.load_pins()
    changed = _with_priority(contract.parts())
    with pytest.raises(contract.ContractError, match="bump the version"):
        contract.pin(version, changed, pins)
    assert contract.check(version, changed, pins), "the refused pin left the gate open"
    assert contract.pin(version, contract.parts(), pins) == pins


def _body_cap_65536(parts: Parts) -> None:
    rules = parts["message_rules"]
    assert isinstance(rules, dict)
    rules["body_cap_bytes"] = 65536


def _record_gains_host(parts: Parts) -> None:
    fields = parts["record_fields"]
    assert isinstance(fields, dict) and isinstance(fields["written"], list)
    fields["written"].append("host")


def _address_of_abc_changes(parts: Parts) -> None:
    vectors = parts["address_vectors"]
    assert isinstance(vectors, list)
    (vector,) = [v for v in vectors if isinstance(v, dict) and v["sessionId"] == "abc"]
    vector["address"] = "s-000000000000"


def _letters_named_msg(parts: Parts) -> None:
    naming = parts["file_naming"]
    assert isinstance(naming, dict)
    naming["letter"] = "inbox/<address>/<id>.msg"


CHANGES = {
    "message_schema": (_schema_gains_priority, "priority"),
    "message_rules": (_body_cap_65536, "65536"),
    "record_fields": (_record_gains_host, "host"),
    "address_vectors": (_address_of_abc_changes, "s-000000000000"),
    "file_naming": (_letters_named_msg, ".msg"),
}


@pytest.mark.parametrize("part", list(CHANGES))
def test_a_change_to_any_part_without_a_bump_fails_naming_it_and_the_bump_passes(
    part: str,
) -> None:
    """Each part of the wire contract is held to its pin: changed under the same
    version, the gate fails, saying which part changed and showing the change;
    bumped and pinned, it passes, and the pin of the version before stays."""
    version, pins = contract.current_version(), contract.load_pins()
    change, shown = CHANGES[part]
    changed = copy.deepcopy(contract.parts())
    change(changed)

    problems = contract.check(version, changed, pins)
    assert problems, "the gate passed a changed contract"
    assert f"still v{version}" in problems[0], problems[0]
    assert problems[1:] and all(p.startswith(f"changed: {part}\n") for p in problems[1:]), problems
    assert shown in "\n".join(problems), problems

    assert contract.check(version + 1, changed, pins), "a version without a pin passed the gate"
    bumped = contract.pin(version + 1, changed, pins)
    assert contract.check(version + 1, changed, bumped) == []
    assert bumped[version] == pins[version], "the pin of the version before changed"


def test_pins_round_trip_through_their_file(tmp_path: Path) -> None:
    pins = contract.pin(2, _with_priority(contract.parts()), contract.load_pins())
    contract.save_pins(pins, tmp_path / "pins.json")
    assert contract.load_pins(tmp_path / "pins.json") == pins


def test_pi_post_contract_prints_the_version_and_the_fingerprint() -> None:
    out, err = io.StringIO(), io.StringIO()
    code = cli.run(["contract"], cli.Context(stdout=out, stderr=err))
    version = contract.current_version()
    pinned, _ = contract.load_pins()[version]
    assert (code, err.getvalue()) == (0, "")
    assert out.getvalue() == (
        f"message schema v{version}\n"
        f"fingerprint {contract.fingerprint(contract.parts())}\n"
        f"matches the pin of v{version}\n"
    )
    assert out.getvalue().splitlines()[1] == f"fingerprint {pinned}"


def test_pi_post_contract_fails_saying_what_changed_when_the_pin_differs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    version = contract.current_version()
    other = _with_priority(contract.parts())
    monkeypatch.setattr(
        contract, "load_pins", lambda: {version: (contract.fingerprint(other), other)}
    )
    out, err = io.StringIO(), io.StringIO()
    code = cli.run(["contract"], cli.Context(stdout=out, stderr=err))
    assert code == 1
    assert out.getvalue().startswith(f"message schema v{version}\nfingerprint sha256:")
    assert err.getvalue().startswith("pi-post: the wire contract changed, but the message")
    assert "changed: message_schema" in err.getvalue()
    assert '-    "priority": {' in err.getvalue()
