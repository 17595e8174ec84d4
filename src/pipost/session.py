"""A session, as every part of pi-post sees it (SPEC 1.3, 2, 4, 5): its registry
record and the record's encoding, its presence, the rules of the sweep, the
session as resolution and the listings see it, and the order they list it in.

A record outlives the process that wrote it: shutdown removes the pid and keeps
the record (INV-14). Presence is decided from the record, the clock and the
process table, never from the pid alone (INV-15):

    pid recorded?  process exists?  same process?  beat within 45 s?   presence
    no             -                -              -                   offline
    yes            no               -              -                   offline
    yes            yes              no (recycled)  -                   offline
    yes            yes              yes            no                  stalled
    yes            yes              yes            yes                 live

A sweep removes a record only when the session is offline, unseen for more than
7 days and its mailbox is empty, and removes only empty mailbox folders that no
record names (INV-17). Before it decides, it removes the temporaries that writers
which died left behind: ``*.tmp`` untouched for more than 36 hours.

Pure: the process table and the clock are handed in; :mod:`pipost.registry`
reads and writes the records, :mod:`pipost.sweep` carries out the sweep.
"""

from __future__ import annotations

from pipost import jsontext
from pipost.address import address_of, is_address
from pipost.message import Rejected, bad_field, unreadable_version
from pipost.value import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar, Final, Protocol

    class ProcessTable(Protocol):
        def start_token(self, pid: int) -> str | None:
            """None if no process has ``pid``; else a token that changes when the pid
            is reused ("" when this system cannot tell)."""


VERSION = 1
"""The version pipost writes (records' ``v``): always the last of READABLE_VERSIONS."""
READABLE_VERSIONS = (1,)
"""The versions :func:`parse` accepts: a record written by an older pipost still
names its session after a bump."""
HEARTBEAT_MS = 30_000
LIVE_WINDOW_MS = 45_000
SWEEP_AFTER_MS = 7 * 24 * 3600 * 1000
RECORD_READ_LIMIT = 64 * 1024


class Presence:
    """A session's presence, decided by the table above: three instances compared by
    identity (a plain class: importing enum would cost a send more than the
    rest of its imports)."""

    __slots__ = ("value",)
    LIVE: ClassVar[Presence]
    STALLED: ClassVar[Presence]
    OFFLINE: ClassVar[Presence]

    def __init__(self, value: str) -> None:
        self.value: Final = value

    def __repr__(self) -> str:
        return f"Presence.{self.value.upper()}"

    @property
    def process_exists(self) -> bool:
        return self is not Presence.OFFLINE


Presence.LIVE = Presence("live")
Presence.STALLED = Presence("stalled")
Presence.OFFLINE = Presence("offline")


class Record(Value):
    __slots__ = (
        "address",
        "session_id",
        "name",
        "cwd",
        "started_at",
        "last_seen",
        "pid",
        "pid_start",
        "extra",
    )
    address: Final[str]
    session_id: Final[str]
    name: Final[str]
    cwd: Final[str]
    started_at: Final[int]
    last_seen: Final[int]
    pid: Final[int | None]
    pid_start: Final[str | None]
    """When the pid's process started (a token from the process table); it tells a
    recycled pid from the process that registered."""
    extra: Final[dict[str, Any]]
    """Fields of other writers, kept when the record is parsed, never written by us
    (and not compared)."""

    def __init__(
        self,
        address: str,
        session_id: str,
        name: str,
        cwd: str,
        started_at: int,
        last_seen: int,
        pid: int | None = None,
        pid_start: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.address = address
        self.session_id = session_id
        self.name = name
        self.cwd = cwd
        self.started_at = started_at
        self.last_seen = last_seen
        self.pid = pid
        self.pid_start = pid_start
        self.extra = {} if extra is None else extra

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__ if name != "extra")


def presence(record: Record, now: int, processes: ProcessTable) -> Presence:
    if record.pid is None:
        return Presence.OFFLINE
    token = processes.start_token(record.pid)
    if token is None:
        return Presence.OFFLINE
    if record.pid_start and token and token != record.pid_start:
        return Presence.OFFLINE
    return Presence.LIVE if now - record.last_seen <= LIVE_WINDOW_MS else Presence.STALLED


def record_is_sweepable(
    state: Presence, last_seen: int, now: int, queued: int, receiving: bool
) -> bool:
    """All three conditions of SPEC 5; live or stalled sessions are never touched, nor
    one whose listener runs (``receiving``), whatever its record says. A lastSeen
    ahead of the clock (a clock stepped back) is a negative age: not a week old."""
    if receiving:
        return False
    return state is Presence.OFFLINE and now - last_seen > SWEEP_AFTER_MS and queued == 0


def mailbox_is_sweepable(recorded: bool, entries: int, receiving: bool) -> bool:
    """Only an empty folder that no record names and no running listener receives
    from (one whose record could not be written, INV-23); a non-empty one is kept at
    any age."""
    return not recorded and entries == 0 and not receiving


TEMPORARY_STALE_MS = 36 * 3600 * 1000
"""A temporary file untouched this long was left by a writer that died (the maildir
rule): no deposit or record write takes more than a moment."""


def temporary_is_sweepable(name: str, age_ms: int) -> bool:
    """Only ``*.tmp`` files (deposits and record writes in flight) untouched for more
    than 36 hours; every ``.json`` and anything else is kept."""
    return name.endswith(".tmp") and age_ms > TEMPORARY_STALE_MS


# -- the record on disk -------------------------------------------------------------

KNOWN_FIELDS = {
    1: frozenset(
        ("v", "address", "sessionId", "name", "cwd", "pid", "pidStart", "startedAt", "lastSeen")
    ),
}
"""The fields each version defines (any other is another writer's, kept as
``extra``), keyed by the version that changed them: a record is read by the row of
its ``v``, or, when its version changed none, by the row of the latest before it."""


def known_fields(version: int) -> frozenset[str]:
    """The fields a record of ``version`` (a readable one) defines."""
    return KNOWN_FIELDS[max(since for since in KNOWN_FIELDS if since <= version)]


def to_json(record: Record) -> dict[str, Any]:
    data: dict[str, Any] = {
        "v": VERSION,
        "address": record.address,
        "sessionId": record.session_id,
        "name": record.name,
        "cwd": record.cwd,
    }
    if record.pid is not None:
        data["pid"] = record.pid
        if record.pid_start:
            data["pidStart"] = record.pid_start
    data["startedAt"] = record.started_at
    data["lastSeen"] = record.last_seen
    return data


def encode(record: Record) -> bytes:
    return jsontext.encode(to_json(record)).encode("utf-8")


def _is_utf8_text(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_TEXT_FIELDS = ("address", "sessionId", "name", "cwd")


def parse(raw: bytes, file_name: str | None = None) -> Record | Rejected:
    """Strict on the fields we know, tolerant of fields we do not; never raises.

    Types are checked with ``type(x) is ...``: the decoder makes exact ints and
    strs, and a bool is not an int here. A listing parses every record, so the
    checks are written to be cheap."""
    if len(raw) > RECORD_READ_LIMIT:
        return Rejected("oversize", "record is too large", limit=RECORD_READ_LIMIT)
    try:
        data = jsontext.decode(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return Rejected("not_utf8", "not JSON")
    except RecursionError:
        return Rejected("too_deep", "not JSON")
    except ValueError:
        return Rejected("not_json", "not JSON")
    if type(data) is not dict:
        return Rejected("not_object", "not a JSON object")
    get = data.get
    version = get("v")
    if type(version) is not int or version not in READABLE_VERSIONS:
        return bad_field("v", unreadable_version(READABLE_VERSIONS))
    # "\ud800" is valid JSON but no text: it would crash hashing and printing. Only
    # a \u escape can spell one, so a record without any needs no check.
    escaped = b"\\u" in raw
    for key in _TEXT_FIELDS:
        value = get(key)
        if type(value) is not str or not value:
            return bad_field(key, f"{key} is not a non-empty string")
        if escaped and not _is_utf8_text(value):
            return bad_field(key, f"{key} holds unpaired surrogates")
    started_at, last_seen = get("startedAt"), get("lastSeen")
    if type(started_at) is not int:
        return bad_field("startedAt", "startedAt is not an integer")
    if type(last_seen) is not int:
        return bad_field("lastSeen", "lastSeen is not an integer")
    pid, pid_start = get("pid"), get("pidStart")
    if pid is not None and (type(pid) is not int or pid <= 0):
        return bad_field("pid", "pid is not a positive integer")
    if pid_start is not None and type(pid_start) is not str:
        return bad_field("pidStart", "pidStart is not a string")
    if pid_start is not None and escaped and not _is_utf8_text(pid_start):
        return bad_field("pidStart", "pidStart holds unpaired surrogates")
    address = data["address"]
    if not is_address(address) or address_of(data["sessionId"]) != address:
        return bad_field("address", "address is not the address of sessionId")
    if file_name is not None and file_name != address + ".json":
        return Rejected("id_mismatch", "file name is not the address")
    known = known_fields(version)
    return Record(
        address=address,
        session_id=data["sessionId"],
        name=data["name"],
        cwd=data["cwd"],
        started_at=started_at,
        last_seen=last_seen,
        pid=pid,
        pid_start=pid_start,
        extra={} if known.issuperset(data) else {k: v for k, v in data.items() if k not in known},
    )


# -- the session as resolution and the listings see it ------------------------------


class Candidate(Value):
    """A session as resolution and listings see it: its record, its presence now and
    how many letters wait in its mailbox."""

    # Fields in their order, which Value's repr and replace follow.
    __slots__ = ("record", "presence", "queued")
    record: Final[Record]
    presence: Final[Presence]
    queued: Final[int]

    def __init__(self, record: Record, presence: Presence, queued: int) -> None:
        self.record = record
        self.presence = presence
        self.queued = queued

    @property
    def address(self) -> str:
        return self.record.address


_RANKS = {Presence.LIVE: 0, Presence.STALLED: 1, Presence.OFFLINE: 2}


def listing_order(candidate: Candidate) -> tuple[int, int, str]:
    """Live first, then stalled, then offline; the latest seen first within each, the
    address breaking ties. Listings show sessions in this order and resolution
    offers the reachable sessions in it."""
    return (_RANKS[candidate.presence], -candidate.record.last_seen, candidate.record.address)
