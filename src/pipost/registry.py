"""Presence records: ``registry/<address>.json``, one per session (SPEC 1.3, 2, 5).

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
"""

from __future__ import annotations

import os
import stat

from pipost import files, jsontext
from pipost.address import address_of, default_name, is_address
from pipost.message import Rejected
from pipost.value import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar, Final, Protocol

    from pipost.files import Folder, StrPath

    class ProcessTable(Protocol):
        def start_token(self, pid: int) -> str | None:
            """None if no process has ``pid``; else a token that changes when the pid
            is reused ("" when this system cannot tell)."""


VERSION = 1
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
    ALL: ClassVar[tuple[Presence, ...]]

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
Presence.ALL = (Presence.LIVE, Presence.STALLED, Presence.OFFLINE)


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


class OsProcessTable:
    """The machine's processes; start tokens from /proc where it exists."""

    def start_token(self, pid: int) -> str | None:
        if pid <= 0:
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass  # exists, owned by someone else
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat_file:
                raw = stat_file.read()
        except OSError:
            return ""
        # Fields count from after the parenthesised command name, which may itself
        # hold spaces and parentheses: field 3 is the state, 22 the start time.
        fields = raw[raw.rfind(b")") + 2 :].split()
        if fields and fields[0] in (b"Z", b"X"):
            return None  # ended, waiting to be reaped: it will never beat again
        return fields[19].decode() if len(fields) > 19 else ""


def presence(record: Record, now: int, processes: ProcessTable) -> Presence:
    if record.pid is None:
        return Presence.OFFLINE
    token = processes.start_token(record.pid)
    if token is None:
        return Presence.OFFLINE
    if record.pid_start and token and token != record.pid_start:
        return Presence.OFFLINE
    return Presence.LIVE if now - record.last_seen <= LIVE_WINDOW_MS else Presence.STALLED


def record_is_sweepable(state: Presence, last_seen: int, now: int, queued: int) -> bool:
    """All three conditions of SPEC 5; live or stalled sessions are never touched."""
    return state is Presence.OFFLINE and now - last_seen > SWEEP_AFTER_MS and queued == 0


def mailbox_is_sweepable(recorded: bool, entries: int) -> bool:
    """Only an empty folder that no record names; a non-empty one is kept at any age."""
    return not recorded and entries == 0


TEMPORARY_STALE_MS = 36 * 3600 * 1000
"""A temporary file untouched this long was left by a writer that died (the maildir
rule): no deposit or record write takes more than a moment."""


def temporary_is_sweepable(name: str, age_ms: int) -> bool:
    """Only ``*.tmp`` files (deposits and record writes in flight) untouched for more
    than 36 hours; every ``.json`` and anything else is kept."""
    return name.endswith(".tmp") and age_ms > TEMPORARY_STALE_MS


# -- the record on disk -------------------------------------------------------------

_KNOWN = frozenset(
    ("v", "address", "sessionId", "name", "cwd", "pid", "pidStart", "startedAt", "lastSeen")
)


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
        return Rejected("record is too large")
    try:
        data = jsontext.decode(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return Rejected("not JSON")
    if type(data) is not dict:
        return Rejected("not a JSON object")
    get = data.get
    if type(get("v")) is not int or data["v"] != VERSION:
        return Rejected("v is not 1")
    # "\ud800" is valid JSON but no text: it would crash hashing and printing. Only
    # a \u escape can spell one, so a record without any needs no check.
    escaped = b"\\u" in raw
    for key in _TEXT_FIELDS:
        value = get(key)
        if type(value) is not str or not value:
            return Rejected(f"{key} is not a non-empty string")
        if escaped and not _is_utf8_text(value):
            return Rejected(f"{key} holds unpaired surrogates")
    started_at, last_seen = get("startedAt"), get("lastSeen")
    if type(started_at) is not int:
        return Rejected("startedAt is not an integer")
    if type(last_seen) is not int:
        return Rejected("lastSeen is not an integer")
    pid, pid_start = get("pid"), get("pidStart")
    if pid is not None and (type(pid) is not int or pid <= 0):
        return Rejected("pid is not a positive integer")
    if pid_start is not None and type(pid_start) is not str:
        return Rejected("pidStart is not a string")
    if pid_start is not None and escaped and not _is_utf8_text(pid_start):
        return Rejected("pidStart holds unpaired surrogates")
    address = data["address"]
    if not is_address(address) or address_of(data["sessionId"]) != address:
        return Rejected("address is not the address of sessionId")
    if file_name is not None and file_name != address + ".json":
        return Rejected("file name is not the address")
    return Record(
        address=address,
        session_id=data["sessionId"],
        name=data["name"],
        cwd=data["cwd"],
        started_at=started_at,
        last_seen=last_seen,
        pid=pid,
        pid_start=pid_start,
        extra={} if _KNOWN.issuperset(data) else {k: v for k, v in data.items() if k not in _KNOWN},
    )


def registry_dir(root: StrPath) -> str:
    return os.path.join(root, "registry")


def record_name(address: str) -> str:
    """The record's file name; the address is checked before it names a file (INV-22)."""
    if not is_address(address):
        raise ValueError(f"not an address: {address!r}")
    return address + ".json"


def record_path(root: StrPath, address: str) -> str:
    return os.path.join(root, "registry", record_name(address))


def write(root: StrPath, record: Record) -> None:
    """Replace the record atomically: a reader sees the old one or the new one."""
    final = record_name(record.address)
    with files.make(root, "registry") as folder:
        temporary = f".{record.address}.{os.urandom(4).hex()}.tmp"
        folder.write_new(temporary, encode(record))
        try:
            folder.rename(temporary, final)
        except BaseException:
            try:
                folder.unlink(temporary)
            except OSError:
                pass
            raise
        folder.flush()


def _read_in(folder: Folder, address: str) -> Record | None:
    return _read_named(folder, record_name(address))


def _read_named(folder: Folder, name: str) -> Record | None:
    """The record in the file ``name``, whose address part is already checked."""
    try:
        raw = folder.read_bounded(name, RECORD_READ_LIMIT)
    except OSError:
        return None
    if raw is None:
        return None
    record = parse(raw, name)
    return record if isinstance(record, Record) else None


def read(root: StrPath, address: str) -> Record | None:
    """The record of ``address`` without scanning the registry; None if absent or bad."""
    record_name(address)
    try:
        folder = files.walk(root, "registry")
    except files.UnsafePath:
        return None
    if folder is None:
        return None
    with folder:
        return _read_in(folder, address)


def records_in(folder: Folder) -> list[Record]:
    """Every readable record of the open registry folder."""
    found = []
    for name in sorted(folder.names()):
        if name.startswith(".") or not name.endswith(".json"):
            continue
        if is_address(name[: -len(".json")]):
            record = _read_named(folder, name)
            if record is not None:
                found.append(record)
    return found


def records(root: StrPath) -> list[Record]:
    """Every readable record; garbage and half-written files are skipped. The
    registry folder is opened once and every record is read relative to it."""
    folder = files.walk(root, "registry")
    if folder is None:
        return []
    with folder:
        return records_in(folder)


def register(
    root: StrPath,
    session_id: str,
    cwd: str,
    now: int,
    *,
    name: str | None = None,
    pid: int | None = None,
    pid_start: str | None = None,
) -> Record:
    """Write this session's record; a resumed session keeps its address (INV-01)."""
    address = address_of(session_id)
    cwd = os.path.realpath(cwd)  # resolution compares canonical paths
    record = Record(
        address=address,
        session_id=session_id,
        name=name or default_name(cwd, address),
        cwd=cwd,
        started_at=now,
        last_seen=now,
        pid=pid if pid is not None else os.getpid(),
        pid_start=pid_start,
    )
    write(root, record)
    return record


def replace_last_seen(record: Record, last_seen: int) -> Record:
    return record.replace(last_seen=last_seen)


def heartbeat(root: StrPath, record: Record, now: int) -> Record:
    beaten = replace_last_seen(record, now)
    write(root, beaten)
    return beaten


def mark_offline(root: StrPath, record: Record, now: int) -> Record:
    """Shutdown: the pid goes, the record stays (INV-14)."""
    offline = record.replace(pid=None, pid_start=None, last_seen=now)
    write(root, offline)
    return offline


class SweepReport(Value):
    __slots__ = ("records_removed", "mailboxes_removed", "temporaries_removed")
    records_removed: Final[tuple[str, ...]]
    mailboxes_removed: Final[tuple[str, ...]]
    temporaries_removed: Final[tuple[str, ...]]
    """Stale temporaries, as paths below the root: ``inbox/<address>/<name>`` or
    ``registry/<name>``."""

    def __init__(
        self,
        records_removed: tuple[str, ...],
        mailboxes_removed: tuple[str, ...],
        temporaries_removed: tuple[str, ...] = (),
    ) -> None:
        self.records_removed = records_removed
        self.mailboxes_removed = mailboxes_removed
        self.temporaries_removed = temporaries_removed


def sweep(root: StrPath, now: int, processes: ProcessTable) -> SweepReport:
    """Remove what SPEC 5 allows and nothing else. Each decision is taken under the
    mailbox's lock, so a deposit racing the sweep is never lost (INV-17). Stale
    temporaries go first, so that one left by a writer that died keeps nothing."""
    top = files.open_root(root)
    if top is None:
        return SweepReport((), ())
    with top:
        registry = top.walk("registry")
        inbox = top.walk("inbox")
        stale: list[str] = []
        try:
            if registry is not None:
                stale += _remove_stale_temporaries(registry, "registry", now)
            removed_records = _sweep_records(registry, inbox, now, processes, stale)
            recorded = set() if registry is None else {r.address for r in records_in(registry)}
            removed_mailboxes = _sweep_mailboxes(inbox, recorded, now, stale)
        finally:
            for folder in (registry, inbox):
                if folder is not None:
                    folder.close()
    return SweepReport(tuple(removed_records), tuple(removed_mailboxes), tuple(stale))


def _remove_stale_temporaries(folder: Folder, where: str, now: int) -> list[str]:
    """Unlink the temporaries in ``folder`` that writers which died left behind,
    their age taken from their mtime; returns them as ``where/<name>``. The caller
    holds the lock that the folder's writers take, where they take one."""
    removed: list[str] = []
    for name in sorted(folder.names()):
        try:
            info = folder.lstat(name)
        except FileNotFoundError:
            continue
        age_ms = now - info.st_mtime_ns // 1_000_000
        # Only a plain file: a link or a folder named like one is not a writer's.
        if stat.S_ISREG(info.st_mode) and temporary_is_sweepable(name, age_ms):
            try:
                folder.unlink(name)
            except FileNotFoundError:
                continue
            removed.append(f"{where}/{name}")
    if removed:
        folder.flush()
    return removed


def _sweep_records(
    registry: Folder | None,
    inbox: Folder | None,
    now: int,
    processes: ProcessTable,
    stale: list[str],
) -> list[str]:
    removed: list[str] = []
    for record in [] if registry is None else records_in(registry):
        state = presence(record, now, processes)
        if state is not Presence.OFFLINE:
            continue
        with _MailboxHeld(inbox, record.address, now, stale) as held:
            if registry is not None and record_is_sweepable(state, record.last_seen, now, held):
                registry.unlink(record_name(record.address))
                removed.append(record.address)
    if removed and registry is not None:
        registry.flush()
    return removed


def _sweep_mailboxes(
    inbox: Folder | None, recorded: set[str], now: int, stale: list[str]
) -> list[str]:
    removed: list[str] = []
    if inbox is None:
        return removed
    for address in sorted(name for name in inbox.names() if is_address(name)):
        with _MailboxHeld(inbox, address, now, stale) as entries:
            if mailbox_is_sweepable(address in recorded, entries) and inbox.remove_empty(address):
                removed.append(address)
    if removed:
        inbox.flush()
    return removed


class _MailboxHeld:
    """A mailbox's lock while the sweep decides, entering with how many entries the
    folder holds once its stale temporaries are removed (added to ``stale``); a
    mailbox that is absent (or was just removed) holds none and has nothing to lock."""

    def __init__(self, inbox: Folder | None, address: str, now: int, stale: list[str]) -> None:
        self._folder = None if inbox is None else inbox.child(address)
        self._where = f"inbox/{address}"
        self._now = now
        self._stale = stale

    def __enter__(self) -> int:
        if self._folder is None:
            return 0
        try:
            self._folder.lock().__enter__()
        except files.Vanished:
            return 0
        self._stale += _remove_stale_temporaries(self._folder, self._where, self._now)
        return len(self._folder.names())

    def __exit__(self, *exc_info: object) -> None:
        if self._folder is not None:
            self._folder.close()  # closing releases the lock
