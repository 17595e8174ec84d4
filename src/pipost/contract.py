"""The wire contract, fingerprinted, and the gate that ties it to the schema version.

The contract is what another implementation must match byte for byte to share a
folder with this one (SPEC 1): the message schema, the record fields, the address
rule and its vectors, and how files are named. :func:`parts` gathers each from
the code and the shipped schemas, in a canonical form; :func:`fingerprint` hashes
them. ``contract_pins.json`` keeps, for every message-schema version ``v``, the
parts and the fingerprint of the contract published as that version.

The gate (:func:`check`, run by tests/test_contract.py in ``nox -s check``): the
contract must equal the pin of the current ``v``. A change without a bump fails,
showing what changed; a bumped ``v`` without a pin fails too. After a deliberate
change: bump ``message.VERSION``, then ``python -m pipost.contract --pin``, which
adds the new pin and never rewrites an existing one.

Prose in the schemas (title, description, $comment, examples) is left out of the
canonical form: rewording documentation is not a wire change. The rules that
prose states and a JSON Schema cannot (the cap counted in bytes, the id pattern)
are in the parts as the constants the code enforces.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TypeAlias

from pipost import files, mailbox, message, registry, schemas, session
from pipost.address import ADDRESS_PATTERN, address_of

Json: TypeAlias = bool | int | float | str | list["Json"] | dict[str, "Json"] | None
Parts: TypeAlias = dict[str, Json]
Pins: TypeAlias = dict[int, tuple[str, Parts]]
"""Version → (fingerprint, parts)."""

PINS_FILE = Path(__file__).with_name("contract_pins.json")

ADDRESS_RULE = (
    '"s-" + the first 12 lowercase hex characters of SHA-256 over the UTF-8 bytes of '
    '"session" + NUL + sessionId'
)
VECTOR_SESSION_IDS = (
    "019a3f2e-7c41-7b3a-9d2e-5f1c8a4b6e01",
    "019a3f2e-7c41-7b3a-9d2e-5f1c8a4b6e02",
    "0192b6a8-0000-7000-8000-000000000000",
    "ffffffff-ffff-7fff-bfff-ffffffffffff",
    "abc",
    "session with spaces",
    "ünïcödé-Σ-会话",
    "x/../y",
    "tab\tsep",
    "A",
    "0",
)
"""The session ids whose addresses the reference CLI computed (the interop vectors)."""

_ANNOTATIONS = frozenset({"title", "description", "$comment", "examples"})
_SAMPLE_ADDRESS = "s-000000000000"
_SAMPLE_ID = "0000000000000-00000000"


class ContractError(Exception):
    """A pin that would rewrite the contract published as a version."""


def current_version() -> int:
    """The message-schema version ``v`` this implementation writes."""
    return message.VERSION


def parts() -> Parts:
    """The contract as this implementation has it, each part in canonical form."""
    sample_record = session.Record(
        _SAMPLE_ADDRESS, "session", "name", "/", 0, 0, pid=1, pid_start="start"
    )
    root = Path("ROOT")
    letter = Path(mailbox.inbox_of(root, _SAMPLE_ADDRESS)) / (_SAMPLE_ID + message.SUFFIX)

    def named(path: str | Path) -> str:
        text = str(Path(path).relative_to(root))
        return text.replace(_SAMPLE_ADDRESS, "<address>").replace(_SAMPLE_ID, "<id>")

    return {
        "message_schema": _semantic(schemas.load("message.v1")),
        "message_rules": {
            "v": message.VERSION,
            "id_pattern": message.ID_PATTERN,
            "body_cap_bytes": message.BODY_CAP,
        },
        "record_fields": {
            "written": list(session.to_json(sample_record)),
            "schema": _semantic(schemas.load("record.v1")),
        },
        "address_rule": {"rule": ADDRESS_RULE, "pattern": ADDRESS_PATTERN},
        "address_vectors": [
            {"sessionId": session_id, "address": address_of(session_id)}
            for session_id in VECTOR_SESSION_IDS
        ],
        "file_naming": {
            "record": named(registry.record_path(root, _SAMPLE_ADDRESS)),
            "letter": named(letter),
            "letter_in_flight": named(letter) + mailbox.TMP_SUFFIX,
            "folder_mode": f"{files.DIR_MODE:04o}",
            "file_mode": f"{files.FILE_MODE:04o}",
        },
    }


def canonical(value: Json) -> bytes:
    """One byte string per JSON value: keys sorted, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def fingerprint(contract: Parts) -> str:
    return "sha256:" + hashlib.sha256(canonical(contract)).hexdigest()


def load_pins(path: Path = PINS_FILE) -> Pins:
    data = json.loads(path.read_text(encoding="utf-8"))
    return {int(v): (pin["fingerprint"], pin["parts"]) for v, pin in data.items()}


def save_pins(pins: Pins, path: Path = PINS_FILE) -> None:
    data = {
        str(v): {"fingerprint": fingerprint_, "parts": contract}
        for v, (fingerprint_, contract) in sorted(pins.items())
    }
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def check(version: int, contract: Parts, pins: Pins) -> list[str]:
    """What is wrong with publishing ``contract`` as ``version``; empty if nothing."""
    if version not in pins:
        return [
            f"the wire contract has no pin for message schema v{version}: after bumping the "
            "version, pin it with: python -m pipost.contract --pin"
        ]
    pinned_fingerprint, pinned = pins[version]
    if fingerprint(contract) == pinned_fingerprint:
        return []
    return [
        f"the wire contract changed, but the message schema version is still v{version} "
        f"(pinned {pinned_fingerprint}, now {fingerprint(contract)}). Bump message.VERSION "
        "and pin the new contract (python -m pipost.contract --pin), or undo the change.",
        *changes(pinned, contract),
    ]


def changes(before: Parts, after: Parts) -> list[str]:
    """Each part that differs, with a diff of its pretty-printed JSON."""
    found = []
    for name in sorted(set(before) | set(after)):
        if name in before and name in after and canonical(before[name]) == canonical(after[name]):
            continue
        diff = difflib.unified_diff(
            _pretty(before.get(name)), _pretty(after.get(name)), "pinned", "now", lineterm="", n=2
        )
        found.append(f"changed: {name}\n" + "\n".join(list(diff)[2:]))
    return found


def pin(version: int, contract: Parts, pins: Pins) -> Pins:
    """``pins`` with ``contract`` pinned as ``version``; an existing pin of that
    version is never rewritten: a different contract needs a new version."""
    if version in pins and pins[version][0] != fingerprint(contract):
        raise ContractError(
            f"message schema v{version} is pinned to another contract; bump the version"
        )
    return {**pins, version: (fingerprint(contract), contract)}


def _semantic(schema: Json) -> Json:
    """A JSON Schema without its prose."""
    if isinstance(schema, dict):
        return {k: _semantic(v) for k, v in schema.items() if k not in _ANNOTATIONS}
    if isinstance(schema, list):
        return [_semantic(item) for item in schema]
    return schema


def _pretty(value: Json) -> list[str]:
    if value is None:
        return []
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False).splitlines()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pipost.contract [--pin]``: show the gate's verdict; with --pin,
    pin the current contract as the current version."""
    args = sys.argv[1:] if argv is None else list(argv)
    version, contract, pins = current_version(), parts(), load_pins()
    if args == ["--pin"]:
        try:
            save_pins(pin(version, contract, pins))
        except ContractError as error:
            print(f"pi-post: {error}", file=sys.stderr)
            return 1
        print(f"pinned message schema v{version}: {fingerprint(contract)}")
        return 0
    if args:
        print("usage: python -m pipost.contract [--pin]", file=sys.stderr)
        return 2
    problems = check(version, contract, pins)
    print("\n".join(problems or [f"v{version} {fingerprint(contract)} matches its pin"]))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
