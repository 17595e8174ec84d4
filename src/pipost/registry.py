"""Presence records on disk: ``registry/<address>.json``, one per session (SPEC
1.3, 2), and the machine's process table that presence is decided against.

What a record is, how it is encoded and parsed, and how presence is decided from
it are pure rules in :mod:`pipost.session`; this module only reads and writes the
files, each write atomic, and asks the machine about a pid. The process table
lives here, beside the records that name the processes, rather than in a module
of its own: it is the other half of presence's I/O, and every command that reads
a record asks it.
"""

from __future__ import annotations

import os

from pipost import files
from pipost.address import address_of, checked, default_name, is_address
from pipost.session import RECORD_READ_LIMIT, Record, encode, parse

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pipost.files import Folder, StrPath


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


def registry_dir(root: StrPath) -> str:
    return os.path.join(root, "registry")


def record_name(address: str) -> str:
    """The record's file name; the address is checked before it names a file (INV-22)."""
    return checked(address) + ".json"


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
        top = files.open_root(root)
    except files.UnsafePath:
        return None
    if top is None:
        return None
    with top:
        return read_in(top, address)


def read_in(top: Folder, address: str) -> Record | None:
    """The record of ``address`` below the open root ``top``; None if absent or bad."""
    name = record_name(address)
    try:
        folder = top.walk("registry")
    except files.UnsafePath:
        return None
    if folder is None:
        return None
    with folder:
        return _read_named(folder, name)


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
