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
import sys

from pipost import files
from pipost.address import address_of, checked, default_name, is_address
from pipost.session import RECORD_READ_LIMIT, Record, encode, parse

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pipost.files import Folder, StrPath


class OsProcessTable:
    """The machine's processes, and when each one started: from /proc on Linux, from
    the kernel's process table (sysctl) on macOS, from ps elsewhere (the BSDs)."""

    def start_token(self, pid: int) -> str | None:
        if pid <= 0:
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass  # exists, owned by someone else
        if sys.platform.startswith("linux"):
            return _proc_start(pid)
        if sys.platform == "darwin":
            return _sysctl_start(pid)
        return _ps_start(pid)


# A process that has ended and waits to be reaped (a zombie) is gone: it will never
# beat again. Each reader below says None for one.


def _proc_start(pid: int) -> str | None:
    """Field 22 of /proc/<pid>/stat: clock ticks from boot to the start (SPEC 2)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            raw = stat_file.read()
    except OSError:
        return ""
    # Fields count from after the parenthesised command name, which may itself
    # hold spaces and parentheses: field 3 is the state, 22 the start time.
    fields = raw[raw.rfind(b")") + 2 :].split()
    if fields and fields[0] in (b"Z", b"X"):
        return None
    return fields[19].decode() if len(fields) > 19 else ""


_KERN_PROC_PID = (1, 14, 1)
"""CTL_KERN, KERN_PROC, KERN_PROC_PID: the sysctl name of one process's kinfo_proc."""
_KINFO_PROC_SIZE = 648
"""sizeof(struct kinfo_proc) on 64-bit macOS; another size is a layout not read here."""
_SZOMB = 5
"""p_stat of a zombie (<sys/proc.h>)."""


def _sysctl_start(pid: int) -> str | None:
    """kp_proc.p_starttime of the process's kinfo_proc (macOS), in microseconds since
    the epoch, as decimal digits. The struct starts with it (a timeval: tv_sec, 8
    bytes, then tv_usec, 4); p_stat is at byte 36 and p_pid at byte 40."""
    import ctypes  # only here: a send that asks no start time never loads it

    name = (ctypes.c_int * 4)(*_KERN_PROC_PID, pid)
    info = ctypes.create_string_buffer(_KINFO_PROC_SIZE)
    size = ctypes.c_size_t(_KINFO_PROC_SIZE)
    if _sysctl()(name, 4, info, ctypes.pointer(size), None, 0) != 0:
        return ""
    if size.value == 0:
        return None  # ended since os.kill saw it
    raw = info.raw
    if size.value != _KINFO_PROC_SIZE or _native_int(raw[40:44]) != pid:
        return ""
    if raw[36] == _SZOMB:
        return None
    return str(_native_int(raw[0:8]) * 1_000_000 + _native_int(raw[8:12]))


def _native_int(raw: bytes) -> int:
    return int.from_bytes(raw, sys.byteorder, signed=True)


# Only macOS's libc has sysctl(3) to bind (Linux's has none); the tests stand a
# kernel of their own in its place, so this binding runs only on macOS.
def _sysctl() -> Any:  # pragma: no cover
    """sysctl(3) of the running program's libc, its arguments typed as the C
    declaration has them."""
    import ctypes

    call = ctypes.CDLL(None, use_errno=True).sysctl
    call.argtypes = (
        ctypes.c_void_p,  # int *name
        ctypes.c_uint,  # u_int namelen
        ctypes.c_void_p,  # void *oldp
        ctypes.POINTER(ctypes.c_size_t),  # size_t *oldlenp
        ctypes.c_void_p,  # void *newp
        ctypes.c_size_t,  # size_t newlen
    )
    call.restype = ctypes.c_int
    return call


_PS = ("ps", "-o", "stat=", "-o", "lstart=", "-p")
"""ps's state and start time of a pid, without a header; the BSDs' ps and procps
alike print the start as C's ctime does ("Tue Dec  1 14:22:12 2026")."""
_PS_WAIT_S = 10
"""How long ps is waited for: a command that asks for presence never hangs on a ps
that does not answer."""
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _ps_start(pid: int) -> str | None:
    """The start time ps reads, in UTC, as the digits YYYYMMDDhhmmss; to the second,
    which tells a reused pid apart unless its first process lived less than one."""
    import subprocess  # only here: Linux and macOS never run ps

    # The C locale and UTC, so that every reader of the record writes the same token.
    settings = {"LC_ALL": "C", "TZ": "UTC0", "PATH": "/bin:/usr/bin"}
    try:
        ran = subprocess.run(
            [*_PS, str(pid)], env=settings, capture_output=True, timeout=_PS_WAIT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    words = ran.stdout.decode("ascii", "replace").split()
    if ran.returncode != 0 or len(words) != 6 or words[2] not in _MONTHS:
        return ""
    state, _, month, day, clock, year = words
    if state.startswith("Z"):
        return None
    stamp = f"{year}{_MONTHS.index(month) + 1:02d}{day:0>2}{clock.replace(':', '')}"
    return stamp if stamp.isdigit() and len(stamp) == 14 else ""


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


def read_named(folder: Folder, name: str) -> Record | None:
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
        return read_named(folder, name)


def records_in(folder: Folder) -> list[Record]:
    """Every readable record of the open registry folder."""
    found = []
    for name in sorted(folder.names()):
        if name.startswith(".") or not name.endswith(".json"):
            continue
        if is_address(name[: -len(".json")]):
            record = read_named(folder, name)
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
