"""Mail the reference pi-post 0.7 wrote, taken by a real listener (INV-21): its
message files, dropped into a mailbox beside its registry record, arrive
byte-identical, oldest first, and leave the inbox empty."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pipost_conformance import INTEROP
from tests.helpers import made, put

from .conftest import Exchange, read_transcript

pytestmark = pytest.mark.exchange

MESSAGES = sorted((INTEROP / "messages").glob("*.json"))
ADDRESSES = sorted({path.name.split("--")[0] for path in MESSAGES})


def _reference_records() -> dict[str, dict[str, Any]]:
    """The registry records of the reference's fixture, by address."""
    fixture = json.loads((INTEROP / "cli-transcripts.json").read_text(encoding="utf-8"))
    return {entry["record"]["address"]: entry["record"] for entry in fixture["fixture"]}


@pytest.mark.parametrize("address", ADDRESSES)
def test_reference_mail_is_taken_byte_identical_and_in_id_order(
    exchange: Exchange, address: str
) -> None:
    record = _reference_records()[address]
    record.pop("pid", None)  # the session is offline until our listener takes over
    registry_folder = made(exchange.root, "registry")
    put(registry_folder / f"{address}.json", json.dumps(record).encode())
    inbox = made(exchange.root, "inbox", address)
    letters = {}
    for path in MESSAGES:
        if path.name.startswith(address + "--"):
            message_id = path.name.split("--")[1].removesuffix(".json")
            put(inbox / f"{message_id}.json", path.read_bytes())
            letters[message_id] = json.loads(path.read_bytes())
    assert letters, f"no reference mail for {address}"

    transcript = exchange.base / "transcript.jsonl"
    listener = exchange.listen(record["sessionId"], transcript=transcript)
    exchange.until(lambda: exchange.queued(address) == 0, "the mailbox is drained")
    assert listener.terminate() == 0, listener.stderr()

    entries = read_transcript(transcript)
    assert [entry["id"] for entry in entries] == sorted(letters)
    for entry in entries:
        written = letters[entry["id"]]
        assert entry["body"].encode("utf-8") == written["body"].encode("utf-8")
        assert (entry["from"], entry["replyTo"], entry["sentAt"]) == (
            written["from"],
            written.get("replyTo"),
            written["sentAt"],
        )
    assert list(inbox.iterdir()) == []
    assert exchange.drops() == []
