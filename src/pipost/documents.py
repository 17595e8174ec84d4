"""The ``--json`` documents of ``list``, ``resolve``, ``peek``, ``log``, ``quarantine``
and ``doctor``: one JSON object per command, for scripts and hooks.

Each document carries ``"v"`` (its format's version) and ``"command"``; they are
described in docs/json.md and by ``schemas/cli.v1.schema.json``. Strings are the
real ones, not the spelled-out forms the text output shows a terminal: the JSON
encoding escapes what needs escaping, and the output is ASCII, so no control
character or escape sequence reaches a terminal raw and a name that is not valid
UTF-8 (a lone surrogate) can still be written. Times are given twice, as ms since
the epoch and as ISO 8601 in UTC.

Imported only by a command given ``--json``: ``json`` costs a start-up that the
text output does without.
"""

from __future__ import annotations

import json
import os

from pipost import format, message
from pipost.address import resume_handle
from pipost.message import Rejected
from pipost.quarantine import Quarantined, quarantine_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, TypeAlias

    from pipost.doctor import Finding, PostOfficeFacts
    from pipost.droplog import Drop
    from pipost.files import StrPath
    from pipost.mailbox import Letter
    from pipost.session import Candidate

    Document: TypeAlias = dict[str, Any]

VERSION = 1
"""The version of every document's format: it changes when a field is removed or
changes its meaning, not when one is added."""


def dump(document: Document) -> str:
    """One line of ASCII JSON."""
    return json.dumps(document, ensure_ascii=True, separators=(",", ":"))


def _document(command: str, **fields: Any) -> Document:
    return {"v": VERSION, "command": command, **fields}


def time(ms: int) -> Document:
    return {"ms": ms, "iso": format.iso_time(ms)}


def session(candidate: Candidate) -> Document:
    record = candidate.record
    return {
        "address": record.address,
        "name": record.name,
        "sessionId": record.session_id,
        "cwd": record.cwd,
        "presence": candidate.presence.value,
        "queued": candidate.queued,
        "pid": record.pid,
        "startedAt": time(record.started_at),
        "lastSeen": time(record.last_seen),
        "resumeHandle": resume_handle(record.session_id),
    }


def listing(candidates: Sequence[Candidate], now: int, *, everything: bool) -> Document:
    """As the text listing: live first; without ``everything`` the sessions it
    summarises are left out and counted in ``hidden``."""
    shown = [c for c in candidates if everything or not format.is_collapsed(c, now)]
    return _document(
        "list",
        now=time(now),
        sessions=[session(c) for c in shown],
        hidden=len(candidates) - len(shown),
    )


def resolved(handle: str, address: str, queued: int, candidate: Candidate | None) -> Document:
    """``candidate`` is None for an address with no record."""
    return _document(
        "resolve",
        handle=handle,
        address=address,
        queued=queued,
        session=None if candidate is None else session(candidate),
    )


def letter(found: Letter) -> Document:
    if isinstance(found.content, Rejected):
        return {"name": found.name, "rejected": found.content.reason}
    wire = message.to_json(found.content)
    return {
        "name": found.name,
        "id": wire["id"],
        "from": wire["from"],
        "replyTo": wire.get("replyTo"),
        "sentAt": time(wire["sentAt"]),
        "body": wire["body"],
    }


def peeked(handle: str, address: str, letters: Sequence[Letter]) -> Document:
    return _document(
        "peek", handle=handle, address=address, letters=[letter(found) for found in letters]
    )


def drops(found: Sequence[Drop]) -> Document:
    return _document(
        "log",
        drops=[
            {
                "at": time(drop.at),
                "address": drop.address,
                "letter": drop.letter,
                "from": drop.sender,
                "reason": drop.reason,
            }
            for drop in found
        ],
    )


def quarantine(root: StrPath, entries: Sequence[Quarantined]) -> Document:
    return _document(
        "quarantine",
        letters=[
            {
                "address": entry.address,
                "name": entry.name,
                "reason": entry.reason,
                "since": time(entry.since_ns // 1_000_000),
                "path": os.path.join(quarantine_of(root, entry.address), entry.name),
            }
            for entry in entries
        ],
    )


def doctor(facts: PostOfficeFacts, findings: Sequence[Finding]) -> Document:
    from pipost.doctor import healthy

    return _document(
        "doctor",
        root=facts.root,
        healthy=healthy(findings),
        contract={"version": facts.contract.version, "fingerprint": facts.contract.fingerprint},
        findings=[
            {
                "code": finding.code,
                "severity": finding.severity,
                "text": finding.text,
                "fix": finding.fix,
                "subject": finding.subject,
            }
            for finding in findings
        ],
    )
