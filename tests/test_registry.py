"""Presence records and sweeps: a record outlives its process (INV-14), presence is
honest (INV-15), garbage is skipped, and messages outrank tidiness (INV-17)."""

from __future__ import annotations

import calendar
import ctypes
import errno
import fcntl
import io
import itertools
import json
import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pipost import files, mailbox, registry, session, sweep
from pipost.address import address_of
from pipost.host import Delivery, Host
from pipost.message import Rejected, Sender, unreadable_version
from pipost.post import Post
from pipost.registry import OsProcessTable
from pipost.resolve import Caller
from pipost.session import Presence, Record
from tests.helpers import (
    DAY_MS,
    NOW,
    FakeProcessTable,
    deposit,
    finished_or_awaiting,
    frozen_holder,
    make_message,
    make_record,
    not_blocked,
    removed_while_awaited,
    tree_snapshot,
    unprivileged_python,
    while_awaited,
    write_record,
)

PID = 4242
TOKEN = "start-1"
YEAR_MS = 365 * DAY_MS


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "post"


def running() -> FakeProcessTable:
    """The process table in which PID is the process that registered."""
    return FakeProcessTable({PID: TOKEN})


# -- the record on disk -----------------------------------------------------------------


def test_register_heartbeat_and_mark_offline_round_trip(root: Path) -> None:
    record = registry.register(
        root, "sess-round-trip", "/home/dev/app", NOW, pid=PID, pid_start=TOKEN
    )
    assert record.address == address_of("sess-round-trip")
    assert record.name == f"app-{record.address[2:6]}"
    assert registry.read(root, record.address) == record
    path = root / "registry" / f"{record.address}.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(root / "registry").st_mode) == 0o700
    assert os.listdir(root / "registry") == [path.name]  # no temporary left behind

    beaten = registry.heartbeat(root, record, NOW + 30_000)
    assert beaten.last_seen == NOW + 30_000
    assert registry.read(root, record.address) == beaten

    offline = registry.mark_offline(root, beaten, NOW + 40_000)
    assert registry.read(root, record.address) == offline
    assert registry.records(root) == [offline]


def test_shutdown_keeps_the_record_without_its_pid(root: Path) -> None:
    record = registry.register(root, "sess-shutdown", "/home/dev/app", NOW, pid=PID)
    registry.mark_offline(root, record, NOW + 5)
    path = root / "registry" / f"{record.address}.json"
    on_disk = json.loads(path.read_bytes())
    assert "pid" not in on_disk
    assert "pidStart" not in on_disk
    assert on_disk["lastSeen"] == NOW + 5
    assert on_disk["sessionId"] == "sess-shutdown"
    kept = registry.read(root, record.address)
    assert kept is not None
    assert session.presence(kept, NOW + 5, running()) is Presence.OFFLINE


def test_register_without_a_pid_records_this_process(root: Path) -> None:
    record = registry.register(root, "sess-self", "/home/dev/app", NOW)
    assert record.pid == os.getpid()


def test_fields_of_other_writers_are_read_and_ignored(root: Path) -> None:
    record = make_record("sess-extra", "/home/dev/app")
    folder = root / "registry"
    folder.mkdir(parents=True)
    data = {**session.to_json(record), "futureField": {"x": 1}}
    (folder / f"{record.address}.json").write_text(json.dumps(data))
    read = registry.read(root, record.address)
    assert read == record
    assert read is not None and read.extra == {"futureField": {"x": 1}}


def test_records_skip_garbage_and_half_written_files(root: Path, tmp_path: Path) -> None:
    good = write_record(root, make_record("sess-good", "/home/dev/good"))
    folder = root / "registry"

    def body(session_id: str, **changes: object) -> dict[str, object]:
        return {**session.to_json(make_record(session_id, "/home/dev/x")), **changes}

    def put(name: str, raw: bytes) -> None:
        (folder / name).write_bytes(raw)

    truncated = make_record("sess-truncated", "/x")
    put(f"{truncated.address}.json", session.encode(truncated)[:40])
    wrong_v = make_record("sess-v2", "/x")
    put(f"{wrong_v.address}.json", json.dumps(body("sess-v2", v=session.VERSION + 1)).encode())
    mismatch = make_record("sess-mismatch", "/x")
    forged = body("sess-mismatch", sessionId="sess-someone-else")
    put(f"{mismatch.address}.json", json.dumps(forged).encode())
    elsewhere = make_record("sess-renamed", "/x")
    put(f"{address_of('sess-not-this-one')}.json", session.encode(elsewhere))
    in_flight = make_record("sess-in-flight", "/x")
    put(f".{in_flight.address}.0badc0de.tmp", session.encode(in_flight))
    hidden = make_record("sess-hidden", "/x")
    put(f".{hidden.address}.json", session.encode(hidden))
    for number, raw in enumerate([b"", b"\xff\xfe", b"[1, 2]", b"null", b"{" * 100_000]):
        put(f"{address_of(f'sess-junk-{number}')}.json", raw)
    bad_pid = make_record("sess-bad-pid", "/x")
    put(f"{bad_pid.address}.json", json.dumps(body("sess-bad-pid", pid="12")).encode())
    put("not-an-address.json", session.encode(make_record("sess-odd-name", "/x")))
    (folder / f"{address_of('sess-folder')}.json").mkdir()
    linked = make_record("sess-linked", "/x")
    (tmp_path / "planted.json").write_bytes(session.encode(linked))
    (folder / f"{linked.address}.json").symlink_to(tmp_path / "planted.json")

    assert registry.records(root) == [good]
    assert registry.read(root, linked.address) is None
    assert registry.read(root, truncated.address) is None


def test_a_record_is_never_read_through_a_symlinked_root(root: Path, tmp_path: Path) -> None:
    record = write_record(root, make_record("sess-behind-a-link", "/x"))
    linked = tmp_path / "linked-post"
    linked.symlink_to(root)
    assert registry.read(linked, record.address) is None
    assert registry.read(root, record.address) == record


def test_a_record_whose_rename_fails_stays_as_it_was_with_no_temporary_left(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = write_record(root, make_record("sess-rename-fails", "/x"))

    def failing_rename(self: files.Folder, name: str, target: str, into: object = None) -> None:
        raise OSError(5, "Input/output error", name)

    monkeypatch.setattr(files.Folder, "rename", failing_rename)
    with pytest.raises(OSError, match="Input/output error"):
        registry.heartbeat(root, record, NOW + 30_000)
    assert os.listdir(root / "registry") == [f"{record.address}.json"]
    assert registry.read(root, record.address) == record


def test_a_record_whose_rename_and_cleanup_both_fail_says_the_rename_s_error(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The temporary then stays, for the sweep to remove once it is stale."""
    record = write_record(root, make_record("sess-rename-fails", "/x"))

    def failing_rename(self: files.Folder, name: str, target: str, into: object = None) -> None:
        raise OSError(5, "Input/output error", name)

    def failing_unlink(self: files.Folder, name: str) -> None:
        raise OSError(30, "Read-only file system", name)

    monkeypatch.setattr(files.Folder, "rename", failing_rename)
    monkeypatch.setattr(files.Folder, "unlink", failing_unlink)
    with pytest.raises(OSError, match="Input/output error"):
        registry.heartbeat(root, record, NOW + 30_000)
    assert registry.read(root, record.address) == record


def test_records_of_an_absent_registry_are_none(root: Path) -> None:
    assert registry.records(root) == []
    assert not root.exists()


# -- presence ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pid", "pid_start", "table", "beat_ago_ms", "expected"),
    [
        pytest.param(None, None, {PID: TOKEN}, 0, Presence.OFFLINE, id="no pid"),
        pytest.param(PID, TOKEN, {}, 0, Presence.OFFLINE, id="dead pid"),
        pytest.param(PID, TOKEN, {PID: "start-2"}, 0, Presence.OFFLINE, id="recycled pid"),
        pytest.param(PID, TOKEN, {PID: TOKEN}, 0, Presence.LIVE, id="live"),
        pytest.param(PID, TOKEN, {PID: TOKEN}, 45_000, Presence.LIVE, id="live at 45 s"),
        pytest.param(PID, TOKEN, {PID: TOKEN}, 45_001, Presence.STALLED, id="stalled"),
        pytest.param(PID, TOKEN, {PID: TOKEN}, YEAR_MS, Presence.STALLED, id="stalled a year"),
        pytest.param(PID, None, {PID: "any"}, 0, Presence.LIVE, id="start not recorded"),
        pytest.param(PID, TOKEN, {PID: ""}, 0, Presence.LIVE, id="system cannot tell"),
        pytest.param(PID, TOKEN, {}, YEAR_MS, Presence.OFFLINE, id="dead and old"),
    ],
)
def test_presence(
    pid: int | None,
    pid_start: str | None,
    table: dict[int, str],
    beat_ago_ms: int,
    expected: Presence,
) -> None:
    record = make_record("sess-presence", "/x", last_seen=NOW - beat_ago_ms)
    record = record.replace(pid=pid, pid_start=pid_start)
    assert session.presence(record, NOW, FakeProcessTable(table)) is expected


def test_a_presence_reads_as_its_name_where_a_failure_prints_it() -> None:
    shown = {repr(state): state for state in (Presence.LIVE, Presence.STALLED, Presence.OFFLINE)}
    assert list(shown) == ["Presence.LIVE", "Presence.STALLED", "Presence.OFFLINE"]
    assert all(eval(text, {"Presence": Presence}) is state for text, state in shown.items())


def test_os_process_table_knows_this_process() -> None:
    table = OsProcessTable()
    token = table.start_token(os.getpid())
    assert token is not None
    assert table.start_token(os.getpid()) == token
    if Path("/proc/self/stat").exists():
        assert token.isdigit()


def sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


@contextmanager
def ended_not_reaped() -> Iterator[int]:
    """The pid of a child that has ended and that nobody has waited for yet: a zombie."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 30
        while not ps_state(child.pid).startswith("Z"):  # os.waitid is not on every system
            assert time.monotonic() < deadline, "the child never ended"
            time.sleep(0.01)
        yield child.pid
    finally:
        child.wait(timeout=60)


def test_os_process_table_knows_a_dead_process_is_gone() -> None:
    child = sleeper()
    try:
        assert OsProcessTable().start_token(child.pid) is not None
    finally:
        child.kill()
        child.wait(timeout=60)  # reaped: the pid names no process now
    assert OsProcessTable().start_token(child.pid) is None


def test_os_process_table_takes_an_ended_process_not_yet_reaped_for_gone() -> None:
    """A listener killed whose parent has not waited for it yet (or whose init does not
    reap) is a zombie: its pid and start time are still there, its session is not."""
    with ended_not_reaped() as pid:
        assert OsProcessTable().start_token(pid) is None


def test_os_process_table_refuses_pids_that_name_no_single_process() -> None:
    assert OsProcessTable().start_token(0) is None
    assert OsProcessTable().start_token(-1) is None


def test_pid_1_is_a_process_like_any_other() -> None:
    """A session may run as a container's first process, pid 1 (init or launchd
    elsewhere, always there): it is asked about as any other pid is."""
    assert OsProcessTable().start_token(1)


def test_a_process_of_another_user_is_seen_with_its_start_time() -> None:
    """A recorded pid may be another user's process (a pid taken again by someone
    else): the kernel refuses to signal it, and it still counts as running, its start
    time read as its owner reads it."""
    pid = os.getpid() if os.geteuid() == 0 else 1  # root's, whoever asks as nobody
    token = OsProcessTable().start_token(pid)
    assert token
    code = f"from pipost.registry import OsProcessTable as T; print(T().start_token({pid}))"
    shown = subprocess.run(
        unprivileged_python(code), capture_output=True, text=True, timeout=60, check=True
    )
    assert shown.stdout == f"{token}\n"


def test_a_process_whose_stat_cannot_be_read_has_an_unknown_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """/proc hidden from this user (hidepid) or the entry gone in between: the process
    is there (it answered the signal), when it started is not known."""

    def unreadable(path: str, mode: str) -> None:
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(registry, "open", unreadable, raising=False)
    assert OsProcessTable().start_token(os.getpid()) == ""


def stat_line(command: str, state: str, fields_after_state: int = 49) -> bytes:
    """/proc/<pid>/stat as Linux writes it: the pid, the command name in parentheses
    (as the process named itself: any bytes but NUL), then the state and the other
    fields, the start time (field 22) being 81234567."""
    numbers = [str(field) for field in range(4, 4 + fields_after_state)]
    if len(numbers) > 22 - 4:
        numbers[22 - 4] = "81234567"
    return f"{os.getpid()} ({command}) {state} {' '.join(numbers)}\n".encode()


@pytest.fixture
def proc_stat(monkeypatch: pytest.MonkeyPatch) -> Callable[[bytes], None]:
    """This machine as Linux, whose /proc/<this pid>/stat reads as the test says."""
    monkeypatch.setattr(sys, "platform", "linux")

    def stat_reading_as(content: bytes) -> None:
        def fake_open(path: str, mode: str) -> io.BytesIO:
            assert (path, mode) == (f"/proc/{os.getpid()}/stat", "rb")
            return io.BytesIO(content)

        monkeypatch.setattr(registry, "open", fake_open, raising=False)

    return stat_reading_as


@pytest.mark.parametrize(
    ("command", "state", "token"),
    [
        ("sleep", "S", "81234567"),
        ("a) Z 1 (b", "S", "81234567"),  # a name that holds ") " and a state: not read as one
        (") )", "R", "81234567"),
        ("sleep", "Z", None),  # ended, not yet reaped
        ("sleep", "X", None),  # dead, on its way out of the table
    ],
)
def test_on_linux_the_start_is_field_22_after_the_command_name_whatever_it_holds(
    proc_stat: Callable[[bytes], None], command: str, state: str, token: str | None
) -> None:
    proc_stat(stat_line(command, state))
    assert OsProcessTable().start_token(os.getpid()) == token


@pytest.mark.parametrize(
    ("fields_after_state", "token"),
    [(19, "81234567"), (18, "")],
    ids=["ending at field 22", "ending at field 21"],
)
def test_on_linux_a_stat_that_stops_before_field_22_leaves_the_start_unknown(
    proc_stat: Callable[[bytes], None], fields_after_state: int, token: str
) -> None:
    proc_stat(stat_line("sleep", "S", fields_after_state))
    assert OsProcessTable().start_token(os.getpid()) == token


def ps_state(pid: int) -> str:
    return ps(pid, "stat=")


def ps(pid: int, field: str) -> str:
    """What ps shows of the process (procps on Linux, the system's own ps elsewhere),
    in the C locale and UTC: a reading that pipost's table does not share."""
    return subprocess.run(
        ["ps", "-o", field, "-p", str(pid)],
        env={"LC_ALL": "C", "TZ": "UTC0", "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def ps_start_seconds(pid: int) -> int:
    """When ps says the process started, in seconds since the epoch."""
    shown = ps(pid, "lstart=")
    return calendar.timegm(time.strptime(" ".join(shown.split()), "%a %b %d %H:%M:%S %Y"))


def token_seconds(token: str) -> int:
    """A start token of this system's table, in seconds since the epoch."""
    if sys.platform.startswith("linux"):  # clock ticks after boot
        stat_lines = Path("/proc/stat").read_text().splitlines()
        boot = next(int(line.split()[1]) for line in stat_lines if line.startswith("btime "))
        return boot + int(token) // os.sysconf("SC_CLK_TCK")
    if sys.platform == "darwin":  # microseconds
        return int(token[:-6])
    return calendar.timegm(time.strptime(token, "%Y%m%d%H%M%S"))


def test_the_start_time_the_table_reads_is_the_one_ps_shows() -> None:
    """Issue 16: the start time is read from a real process, and checked against what
    ps shows of it: a wrong field of /proc/<pid>/stat (or a wrong offset in macOS's
    kinfo_proc) names another instant, or none."""
    child = sleeper()
    try:
        token = OsProcessTable().start_token(child.pid)
        assert token
        assert token_seconds(token) == ps_start_seconds(child.pid)
    finally:
        child.kill()
        child.wait(timeout=60)


# -- macOS: the kernel's kinfo_proc, through sysctl(3) -----------------------------------

KINFO_PROC_SIZE = 648
SRUN, SZOMB = 2, 5


class KinfoProcs:
    """sysctl(3) as macOS answers {CTL_KERN, KERN_PROC, KERN_PROC_PID, pid}: that
    process's struct kinfo_proc (p_starttime first, p_stat at byte 36, p_pid at
    40), or nothing for a pid with no process. The processes are the test's: pid ->
    (start seconds, microseconds, p_stat). Any other name is refused, as the kernel
    refuses a name it does not know."""

    def __init__(self) -> None:
        self.processes: dict[int, tuple[int, int, int]] = {}

    def __call__(
        self, name: Any, length: int, info: Any, size: Any, new: Any, new_size: int
    ) -> int:
        asked = list(name)[:length]
        if length != 4 or asked[:3] != [1, 14, 1] or new is not None or new_size != 0:
            return -1
        pid = asked[3]
        if pid not in self.processes:
            size.contents.value = 0
            return 0
        if size.contents.value < KINFO_PROC_SIZE:
            return -1  # ENOMEM
        seconds, microseconds, state = self.processes[pid]
        kinfo = bytearray(b"\xa5" * KINFO_PROC_SIZE)  # what is not read is not zero either
        kinfo[0:8] = seconds.to_bytes(8, sys.byteorder, signed=True)
        kinfo[8:12] = microseconds.to_bytes(4, sys.byteorder, signed=True)
        kinfo[36] = state
        kinfo[40:44] = pid.to_bytes(4, sys.byteorder, signed=True)
        ctypes.memmove(info, bytes(kinfo), KINFO_PROC_SIZE)
        size.contents.value = KINFO_PROC_SIZE
        return 0


@pytest.fixture
def macos(monkeypatch: pytest.MonkeyPatch) -> KinfoProcs:
    """This machine as macOS: no /proc, and the kernel's process table through sysctl."""
    kernel = KinfoProcs()
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(registry, "_sysctl", lambda: kernel)
    return kernel


def test_on_macos_the_start_token_is_the_start_time_the_kernel_gives(macos: KinfoProcs) -> None:
    macos.processes[os.getpid()] = (1796078534, 257, SRUN)
    assert OsProcessTable().start_token(os.getpid()) == "1796078534000257"


def test_on_macos_the_start_token_counts_microseconds_even_before_the_epoch(
    macos: KinfoProcs,
) -> None:
    """kinfo_proc's fields are signed, as C declares them (time_t, suseconds_t,
    pid_t): a process started 1 s minus 257 µs before 1970 (a clock set back)
    started -999743 µs after the epoch, not some 2**64 µs later."""
    macos.processes[os.getpid()] = (-1, 257, SRUN)
    assert OsProcessTable().start_token(os.getpid()) == "-999743"


def test_on_macos_a_recycled_pid_is_told_apart(macos: KinfoProcs) -> None:
    macos.processes[os.getpid()] = (1796078534, 257_000, SRUN)
    token = OsProcessTable().start_token(os.getpid())
    record = make_record("sess-recycled", "/x", pid=os.getpid(), pid_start=token)
    assert session.presence(record, NOW, OsProcessTable()) is Presence.LIVE

    macos.processes[os.getpid()] = (1796078534, 257_001, SRUN)  # the pid, taken again
    assert session.presence(record, NOW, OsProcessTable()) is Presence.OFFLINE


@pytest.mark.parametrize(
    "process", [(1796078534, 257, SZOMB), None], ids=["not yet reaped", "ended since"]
)
def test_on_macos_an_ended_process_is_gone(
    macos: KinfoProcs, process: tuple[int, int, int] | None
) -> None:
    if process is not None:
        macos.processes[os.getpid()] = process
    assert OsProcessTable().start_token(os.getpid()) is None


@pytest.mark.parametrize(
    ("size", "pid_shift"), [(KINFO_PROC_SIZE - 8, 0), (KINFO_PROC_SIZE, 1)], ids=["size", "pid"]
)
def test_on_macos_a_kinfo_proc_of_another_layout_leaves_the_start_unknown(
    macos: KinfoProcs, monkeypatch: pytest.MonkeyPatch, size: int, pid_shift: int
) -> None:
    """Another struct size, or p_pid not where it is read: the offsets read are not
    this kernel's, so nothing read there is taken for a start time."""
    macos.processes[os.getpid()] = (1796078534, 257, SRUN)

    def other_layout(name: Any, length: int, info: Any, answered: Any, *rest: Any) -> int:
        status = macos(name, length, info, answered, *rest)
        answered.contents.value = size
        ctypes.memmove(
            ctypes.addressof(info) + 40, (os.getpid() + pid_shift).to_bytes(4, sys.byteorder), 4
        )
        return status

    monkeypatch.setattr(registry, "_sysctl", lambda: other_layout)
    assert OsProcessTable().start_token(os.getpid()) == ""


def test_on_macos_a_kernel_that_does_not_answer_leaves_the_start_unknown(
    macos: KinfoProcs, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry, "_sysctl", lambda: lambda *arguments: -1)
    assert OsProcessTable().start_token(os.getpid()) == ""


# -- the BSDs: ps ------------------------------------------------------------------------


@pytest.fixture
def bsd(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine as one of the BSDs: the start time is asked of ps (the real one)."""
    monkeypatch.setattr(sys, "platform", "freebsd14")


def test_elsewhere_the_start_token_is_the_second_ps_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    child = sleeper()
    try:
        native = OsProcessTable().start_token(child.pid)
        assert native
        started = time.gmtime(token_seconds(native))  # this system's own reading
        monkeypatch.setattr(sys, "platform", "freebsd14")
        assert OsProcessTable().start_token(child.pid) == time.strftime("%Y%m%d%H%M%S", started)
    finally:
        child.kill()
        child.wait(timeout=60)


def test_elsewhere_ps_takes_an_ended_process_not_yet_reaped_for_gone(bsd: None) -> None:
    with ended_not_reaped() as pid:
        assert OsProcessTable().start_token(pid) is None


def test_elsewhere_a_ps_that_cannot_run_leaves_the_start_unknown(
    bsd: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry, "_PS", ("/nonexistent/ps", "-p"))
    assert OsProcessTable().start_token(os.getpid()) == ""


FOREIGN_PS = r"""
import os, sys, time
# ps on a machine whose own time zone (the one without TZ) is 13:45 ahead of UTC and
# whose users read German: it shows the start in the zone TZ names and with the
# month names of the locale LC_ALL, LC_TIME or LANG names (C's for any other name).
os.environ.setdefault("TZ", "<+1345>-13:45")
time.tzset()
names = [os.environ.get(name, "") for name in ("LC_ALL", "LC_TIME", "LANG")]
german = next((name for name in names if name), "").startswith("de_")
months = ("Jan Feb M\u00e4r Apr Mai Jun Jul Aug Sep Okt Nov Dez" if german else
          "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec").split()
time.sleep(float(os.environ.get("PS_THINKS", "0")))
started = time.localtime(int(sys.argv[1]))
print("S", "Thu", months[started.tm_mon - 1], started.tm_mday,
      time.strftime("%H:%M:%S %Y", started))
"""
"""A ps (by its absolute path, so PATH plays no part) that reads the environment as
a real one does. It is asked for the "pid" it is given: the start instant itself."""
FOREIGN_START = calendar.timegm((2026, 10, 1, 12, 34, 56, 0, 0, 0))


@pytest.fixture
def foreign_ps(bsd: None, monkeypatch: pytest.MonkeyPatch) -> int:
    """ps as FOREIGN_PS, asked by a session whose own environment is a German one on
    New York time; the pid to ask it about (FOREIGN_START, a pid os.kill accepts)."""
    monkeypatch.setattr(registry, "_PS", (sys.executable, "-c", FOREIGN_PS))
    kill = os.kill  # the fake pid is a process; every other one is the kernel's to answer
    monkeypatch.setattr(
        os, "kill", lambda pid, sig: None if pid == FOREIGN_START else kill(pid, sig)
    )
    for name in ("LC_ALL", "LC_TIME", "PS_THINKS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "de_DE.UTF-8")
    monkeypatch.setenv("TZ", "EST5EDT,M3.2.0,M11.1.0")
    return FOREIGN_START


def test_elsewhere_ps_shows_the_start_in_utc_and_in_c_s_words_whatever_the_machine_s(
    foreign_ps: int,
) -> None:
    """SPEC 2: the token is the start in UTC, so that every reader of the record
    writes the same one; ps runs in the C locale (whose month names are read) and in
    UTC, not in the time zone and language of the machine or of the session."""
    assert OsProcessTable().start_token(foreign_ps) == "20261001123456"


def test_elsewhere_a_ps_that_does_not_answer_is_not_waited_for(
    foreign_ps: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ps that hangs does not hang the command that asked for presence: after
    _PS_WAIT_S the start is unknown, even if ps would have answered later."""
    monkeypatch.setattr(registry, "_PS_WAIT_S", 0.5)
    thinking = ("env", "PS_THINKS=30", *registry._PS)  # env keeps the other settings
    monkeypatch.setattr(registry, "_PS", thinking)
    assert OsProcessTable().start_token(foreign_ps) == ""


@pytest.mark.parametrize(
    "ps_command",
    [
        ("sh", "-c", "echo S Tue Dec 1 14:22:12 2026; exit 1"),  # the pid is its $0
        ("echo", "S", "Tue", "Smarch", "1", "14:22:12"),  # the pid stands for the year
        ("echo", "S", "Tue", "Dec", "1"),  # no year
        ("sh", "-c", r"printf 'S Tue D\303\251c 1 14:22:12 2026\n'"),  # not ASCII
        ("sh", "-c", "echo S Tue Dec 1 14:22:12 20266"),  # digits, one too many
        ("sh", "-c", "echo S Tue Dec 1x 14:22:12 2026"),  # as many, not all digits
    ],
    ids=["fails", "no month", "five columns", "not ascii", "year 20266", "day 1x"],
)
def test_elsewhere_a_ps_that_answers_otherwise_leaves_the_start_unknown(
    bsd: None, monkeypatch: pytest.MonkeyPatch, ps_command: tuple[str, ...]
) -> None:
    monkeypatch.setattr(registry, "_PS", ps_command)
    assert OsProcessTable().start_token(os.getpid()) == ""


def test_a_record_of_this_process_is_live(root: Path) -> None:
    record = registry.register(root, "sess-me", "/x", NOW)
    assert session.presence(record, NOW, OsProcessTable()) is Presence.LIVE


# -- sweeps -----------------------------------------------------------------------------


def queue_letter(root: Path, address: str) -> None:
    deposit(root, address, make_message(NOW - YEAR_MS), durable=False)


@pytest.mark.parametrize(
    ("process_exists", "unseen_long", "mailbox_empty"),
    list(itertools.product([True, False], repeat=3)),
)
def test_a_record_is_swept_only_offline_and_unseen_a_week_and_with_no_mail(
    root: Path, process_exists: bool, unseen_long: bool, mailbox_empty: bool
) -> None:
    last_seen = NOW - (session.SWEEP_AFTER_MS + 1 if unseen_long else 10_000)
    record = write_record(
        root, make_record("sess-sweep", "/x", last_seen=last_seen, pid=PID, pid_start=TOKEN)
    )
    if not mailbox_empty:
        queue_letter(root, record.address)
    table = running() if process_exists else FakeProcessTable()

    report = sweep.sweep(root, NOW, table)

    swept = not process_exists and unseen_long and mailbox_empty
    assert report.records_removed == ((record.address,) if swept else ())
    assert (registry.read(root, record.address) is None) is swept
    if not mailbox_empty:
        assert mailbox.count(root, record.address) == 1


def test_a_record_unseen_exactly_a_week_is_kept(root: Path) -> None:
    record = write_record(
        root, make_record("sess-week", "/x", last_seen=NOW - session.SWEEP_AFTER_MS)
    )
    assert sweep.sweep(root, NOW, FakeProcessTable()).records_removed == ()
    assert registry.read(root, record.address) == record
    assert sweep.sweep(root, NOW + 1, FakeProcessTable()).records_removed == (record.address,)


def test_mail_of_a_session_offline_for_a_year_is_kept_with_its_record(root: Path) -> None:
    record = write_record(root, make_record("sess-away", "/x", last_seen=NOW - YEAR_MS))
    queue_letter(root, record.address)
    before = tree_snapshot(root)
    report = sweep.sweep(root, NOW, FakeProcessTable())
    assert report == sweep.SweepReport((), ())
    assert tree_snapshot(root) == before


def lay_temporary(path: Path, age_ms: int) -> Path:
    """A file last modified ``age_ms`` before NOW (the sweep's clock), folders made."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_bytes(b'{"v":1,"id":')
    age(path, age_ms)
    return path


def age(path: Path, age_ms: int) -> None:
    moment_ns = (NOW - age_ms) * 1_000_000
    os.utime(path, ns=(moment_ns, moment_ns), follow_symlinks=False)


def test_a_deposit_in_flight_keeps_the_record(root: Path) -> None:
    record = write_record(root, make_record("sess-in-flight", "/x", last_seen=NOW - YEAR_MS))
    lay_temporary(root / "inbox" / record.address / "1796078534257-00000000.json.tmp", 0)
    assert sweep.sweep(root, NOW, FakeProcessTable()).records_removed == ()
    assert registry.read(root, record.address) == record


@pytest.mark.parametrize("table", [running(), FakeProcessTable({PID: ""})])
def test_live_and_stalled_sessions_are_never_swept(root: Path, table: FakeProcessTable) -> None:
    live = write_record(root, make_record("sess-live", "/x", pid=PID, pid_start=TOKEN))
    stalled = write_record(
        root,
        make_record("sess-stalled", "/y", last_seen=NOW - YEAR_MS, pid=PID, pid_start=TOKEN),
    )
    for address in (live.address, stalled.address):
        (root / "inbox" / address).mkdir(parents=True, exist_ok=True)
    before = tree_snapshot(root)
    assert sweep.sweep(root, NOW, table) == sweep.SweepReport((), ())
    assert tree_snapshot(root) == before


@pytest.mark.parametrize("age_ms", [0, DAY_MS, YEAR_MS])
def test_an_empty_mailbox_no_record_names_is_removed(root: Path, age_ms: int) -> None:
    orphan = address_of("sess-orphan")
    folder = root / "inbox" / orphan
    folder.mkdir(parents=True)
    seconds = (NOW - age_ms) / 1000
    os.utime(folder, (seconds, seconds))
    assert sweep.sweep(root, NOW, FakeProcessTable()).mailboxes_removed == (orphan,)
    assert not folder.exists()


@pytest.mark.parametrize("age_ms", [0, DAY_MS, YEAR_MS, 10 * YEAR_MS])
def test_a_mailbox_with_mail_is_never_removed(root: Path, age_ms: int) -> None:
    orphan = address_of("sess-orphan")
    queue_letter(root, orphan)
    folder = root / "inbox" / orphan
    seconds = (NOW - age_ms) / 1000
    os.utime(folder, (seconds, seconds))
    before = tree_snapshot(root)
    assert sweep.sweep(root, NOW, FakeProcessTable()) == sweep.SweepReport((), ())
    assert tree_snapshot(root) == before


def test_an_empty_mailbox_a_record_names_is_kept(root: Path) -> None:
    record = write_record(root, make_record("sess-recent", "/x", last_seen=NOW - DAY_MS))
    folder = root / "inbox" / record.address
    folder.mkdir(parents=True)
    assert sweep.sweep(root, NOW, FakeProcessTable()) == sweep.SweepReport((), ())
    assert folder.is_dir()


def test_sweep_removes_a_stale_record_and_then_its_empty_mailbox(root: Path) -> None:
    record = write_record(root, make_record("sess-stale", "/x", last_seen=NOW - YEAR_MS))
    (root / "inbox" / record.address).mkdir(parents=True)
    report = sweep.sweep(root, NOW, FakeProcessTable())
    assert report == sweep.SweepReport((record.address,), (record.address,))
    assert os.listdir(root / "registry") == []
    assert os.listdir(root / "inbox") == []


STALE_MS = session.TEMPORARY_STALE_MS + 1


def test_a_stale_temporary_is_removed_and_then_its_orphan_mailbox(root: Path) -> None:
    orphan = address_of("sess-orphan")
    lay_temporary(root / "inbox" / orphan / "1796078534257-00000000.json.tmp", STALE_MS)
    report = sweep.sweep(root, NOW, FakeProcessTable())
    assert report == sweep.SweepReport(
        (), (orphan,), (f"inbox/{orphan}/1796078534257-00000000.json.tmp",)
    )
    assert os.listdir(root / "inbox") == []


def test_a_stale_temporary_no_longer_keeps_a_stale_record(root: Path) -> None:
    record = write_record(root, make_record("sess-gone", "/x", last_seen=NOW - YEAR_MS))
    lay_temporary(root / "inbox" / record.address / "1796078534257-00000000.json.tmp", STALE_MS)
    report = sweep.sweep(root, NOW, FakeProcessTable())
    assert report.records_removed == (record.address,)
    assert report.mailboxes_removed == (record.address,)
    assert report.temporaries_removed == (
        f"inbox/{record.address}/1796078534257-00000000.json.tmp",
    )


@pytest.mark.parametrize("age_ms", [-DAY_MS, 0, session.TEMPORARY_STALE_MS])
def test_a_temporary_touched_within_36_hours_is_kept_with_its_mailbox(
    root: Path, age_ms: int
) -> None:
    orphan = address_of("sess-orphan")
    lay_temporary(root / "inbox" / orphan / "1796078534257-00000000.json.tmp", age_ms)
    lay_temporary(root / "registry" / f".{orphan}.0a1b2c3d.tmp", age_ms)
    before = tree_snapshot(root)
    assert sweep.sweep(root, NOW, FakeProcessTable()) == sweep.SweepReport((), ())
    assert tree_snapshot(root) == before


def test_stale_temporaries_go_from_the_registry_and_every_mailbox_and_nothing_else(
    root: Path,
) -> None:
    live = write_record(root, make_record("sess-live", "/x", pid=PID, pid_start=TOKEN))
    away = write_record(root, make_record("sess-away", "/y", last_seen=NOW - YEAR_MS))
    queue_letter(root, away.address)
    stale = [
        lay_temporary(root / "registry" / f".{live.address}.0a1b2c3d.tmp", YEAR_MS),
        lay_temporary(root / "inbox" / live.address / "1796078534257-00000001.json.tmp", STALE_MS),
        lay_temporary(root / "inbox" / away.address / "1796078534257-00000002.json.tmp", YEAR_MS),
    ]
    kept = [
        lay_temporary(root / "inbox" / away.address / "1796078534257-00000003.json.tmp", 0),
        lay_temporary(root / "inbox" / away.address / "notes.txt", YEAR_MS),
        lay_temporary(root / "quarantine" / away.address / "x.json.tmp", YEAR_MS),
        lay_temporary(root / "log" / "drops.jsonl.tmp", YEAR_MS),
    ]
    (root / "inbox" / away.address / "folder.tmp").mkdir()
    (root / "inbox" / away.address / "link.tmp").symlink_to(stale[2])
    fresh = kept[0]
    for path in [*(root / "inbox" / away.address).iterdir(), *(root / "registry").iterdir()]:
        if path != fresh:
            age(path, 10 * YEAR_MS)  # the letter, the records, the link and the folder too
    before = tree_snapshot(root)

    report = sweep.sweep(root, NOW, FakeProcessTable({PID: TOKEN}))

    assert sorted(report.temporaries_removed) == sorted(
        str(path.relative_to(root)) for path in stale
    )
    assert report.records_removed == report.mailboxes_removed == ()
    after = tree_snapshot(root)
    gone = {str(path.relative_to(root)) for path in stale}
    assert set(before) - set(after) == gone
    changed_folders = {str(path.parent.relative_to(root)) for path in stale}
    assert {k for k in after if after[k] != before[k]} <= changed_folders
    assert all(path.is_file() for path in kept)
    assert mailbox.count(root, away.address) == 1
    assert registry.records(root) == sorted([live, away], key=lambda r: r.address)


def test_a_mailbox_temporary_is_removed_under_the_mailbox_lock(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As every other decision of the sweep (INV-17): a deposit holding the lock is
    never cut short, and a temporary is only ever seen stale without one."""
    orphan = address_of("sess-orphan")
    lay_temporary(root / "inbox" / orphan / "1796078534257-00000000.json.tmp", STALE_MS)
    real_unlink = files.Folder.unlink
    held_while_unlinking: list[bool] = []

    def unlink_noting_the_lock(folder: files.Folder, name: str) -> None:
        if name.endswith(".tmp"):
            other = os.open(folder.path, os.O_RDONLY | os.O_DIRECTORY)
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                held_while_unlinking.append(True)
            else:
                held_while_unlinking.append(False)
            finally:
                os.close(other)
        real_unlink(folder, name)

    monkeypatch.setattr(files.Folder, "unlink", unlink_noting_the_lock)
    assert sweep.sweep(root, NOW, FakeProcessTable()).mailboxes_removed == (orphan,)
    assert held_while_unlinking == [True]


def test_a_sweep_of_a_post_office_not_made_yet_removes_nothing_and_makes_nothing(
    root: Path,
) -> None:
    assert sweep.sweep(root, NOW, FakeProcessTable()) == sweep.SweepReport((), ())
    assert not root.exists()


@pytest.mark.parametrize("gone_before", ["lstat", "unlink"])
def test_a_stale_temporary_another_sweep_removes_first_is_not_counted_twice(
    root: Path, monkeypatch: pytest.MonkeyPatch, gone_before: str
) -> None:
    """Two sweeps at once (two sessions starting): whichever unlinks a temporary
    first reports it; the other passes over it and sweeps on."""
    orphan = address_of("sess-orphan")
    raced = lay_temporary(root / "inbox" / orphan / "1796078534257-00000000.json.tmp", STALE_MS)
    other = lay_temporary(root / "inbox" / orphan / "1796078534257-00000001.json.tmp", STALE_MS)
    real = getattr(files.Folder, gone_before)

    def the_other_sweep_first(folder: files.Folder, name: str) -> Any:
        if name == raced.name and raced.exists():
            raced.unlink()
        return real(folder, name)

    monkeypatch.setattr(files.Folder, gone_before, the_other_sweep_first)
    report = sweep.sweep(root, NOW, FakeProcessTable())
    assert report == sweep.SweepReport((), (orphan,), (f"inbox/{orphan}/{other.name}",))
    assert os.listdir(root / "inbox") == []


def test_a_mailbox_another_sweep_removes_while_this_one_waits_counts_as_empty(
    root: Path,
) -> None:
    record = write_record(root, make_record("sess-stale", "/x", last_seen=NOW - YEAR_MS))
    folder = root / "inbox" / record.address
    folder.mkdir(parents=True)
    report = removed_while_awaited(folder, lambda: sweep.sweep(root, NOW, FakeProcessTable()))
    assert report == sweep.SweepReport((record.address,), ())
    assert os.listdir(root / "registry") == []
    assert os.listdir(root / "inbox") == []


def test_a_sweep_gives_up_a_mailbox_a_stopped_sender_holds_and_removes_nothing_of_it(
    root: Path, short_bound: float
) -> None:
    """A sender frozen while it holds a mailbox's lock: the sweep stops after the
    bound with an error naming the holder, and that session's record and mailbox
    stay (INV-17); it used to wait without limit."""
    record = write_record(root, make_record("sess-frozen", "/x", last_seen=NOW - YEAR_MS))
    folder = root / "inbox" / record.address
    folder.mkdir(parents=True)
    before = tree_snapshot(root)
    with frozen_holder(folder) as pid:
        raised = not_blocked(lambda: sweep.sweep(root, NOW, FakeProcessTable()))
    assert isinstance(raised, files.LockTimeout), raised
    assert raised.filename == str(folder)
    assert str(raised.strerror).startswith(f"locked by pid {pid} ")
    assert tree_snapshot(root) == before


def test_a_deposit_whose_folder_is_swept_under_it_starts_again(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep removes the empty folder between the deposit creating it and
    locking it; the deposit notices and creates it again (INV-17)."""
    address = address_of("sess-raced")
    real_lock = files.Folder.lock
    swept: list[sweep.SweepReport] = []
    interleaved = threading.Event()

    def sweep_first(folder: files.Folder) -> files.FolderLock:
        if not interleaved.is_set():
            interleaved.set()
            swept.append(sweep.sweep(root, NOW, FakeProcessTable()))
        return real_lock(folder)

    monkeypatch.setattr(files.Folder, "lock", sweep_first)
    path = Path(deposit(root, address, make_message()))
    assert swept == [sweep.SweepReport((), (address,))]
    assert path.is_file()
    assert mailbox.count(root, address) == 1


def test_a_sweep_racing_deposits_never_loses_one(
    root: Path, record_property: Callable[[str, object], None]
) -> None:
    """Deposits go into empty orphan folders that the sweep is busy removing: the
    sweep walks them in order, the depositors from the other end, so they meet."""
    depositors, folders = 4, 400
    addresses = sorted(address_of(f"sess-race-{n}") for n in range(folders))
    for address in addresses:
        (root / "inbox" / address).mkdir(parents=True)
    returned: list[Path] = []
    failures: list[BaseException] = []
    done = threading.Event()
    sweeps: list[sweep.SweepReport] = []

    def deposit_all(number: int) -> None:
        try:
            for index, address in enumerate(addresses[::-1][number::depositors]):
                message = make_message(NOW + index, body=f"{number}/{index}")
                returned.append(Path(deposit(root, address, message, durable=False)))
        except BaseException as error:
            failures.append(error)

    def sweep_until_done() -> None:
        try:
            while not done.is_set():
                sweeps.append(sweep.sweep(root, NOW, FakeProcessTable()))
        except BaseException as error:
            failures.append(error)

    sweeper = threading.Thread(target=sweep_until_done)
    workers = [threading.Thread(target=deposit_all, args=(n,)) for n in range(depositors)]
    sweeper.start()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    done.set()
    sweeper.join(timeout=120)

    # How often the sweeper removed a folder during the race, for the junit report.
    record_property("mailboxes_swept_during_race", sum(len(s.mailboxes_removed) for s in sweeps))
    record_property("sweeps_during_race", len(sweeps))
    assert failures == []
    assert len(returned) == folders
    assert sorted(path.parent.name for path in returned) == addresses
    for path in returned:
        assert mailbox.letter_names(root, path.parent.name) == [path.name]


# -- sweeps and running sessions (issue 38, items 4 and 14) --------------------------------

needs_proc_locks = pytest.mark.skipif(
    not os.path.exists("/proc/locks"), reason="sees who waits for a lock in /proc/locks (Linux)"
)


SENDER = Sender("process", "process:test")
CALLER = Caller(cwd="/", home="/", canonical=os.path.realpath)


class Taken:
    """A listener's context that takes every delivery."""

    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []

    def holds(self, message_id: str) -> bool | None:
        return None

    def enter(self, delivery: Delivery) -> bool:
        self.deliveries.append(delivery)
        return True


def idle_for_8_days(root: Path, session_id: str) -> Record:
    """An offline record unseen for 8 days, and its empty mailbox folder."""
    record = write_record(root, make_record(session_id, "/x", last_seen=NOW - 8 * DAY_MS))
    (root / "inbox" / record.address).mkdir(parents=True)
    return record


def sweeping(root: Path, processes: session.ProcessTable) -> Callable[[], sweep.SweepReport]:
    return lambda: sweep.sweep(root, NOW, processes)


@needs_proc_locks
def test_a_record_written_while_the_sweep_waits_for_the_mailbox_is_judged_as_written(
    root: Path,
) -> None:
    """The sweep read the 8-day-old record, then waited for the mailbox's lock; the
    session registered meanwhile: the record is read again under the lock and kept,
    and so is the mailbox it names (INV-17)."""
    idle = idle_for_8_days(root, "sess-back")
    back = make_record("sess-back", "/x", last_seen=NOW, pid=PID, pid_start=TOKEN)
    inbox = root / "inbox" / idle.address

    report = while_awaited(inbox, sweeping(root, running()), lambda: write_record(root, back))

    assert report == sweep.SweepReport((), ())
    assert registry.read(root, idle.address) == back
    assert inbox.is_dir()


@needs_proc_locks
def test_a_listener_starting_while_the_sweep_waits_keeps_its_record_and_mailbox(
    root: Path, tmp_path: Path
) -> None:
    """Issue 38, item 4: a sweep judging an 8-day-old record while that session's
    listener starts. Whichever takes the mailbox's lock first once the sweep's wait
    ends, the listener keeps its record, its mailbox and its watch, and mail sent
    to it by address or name is taken."""
    idle = idle_for_8_days(root, "sess-starting")
    inbox = root / "inbox" / idle.address
    post = Post(root, clock=lambda: NOW)
    context = Taken()
    listener = Host(post, "sess-starting", str(tmp_path), context, name="starting")
    started: list[Host] = []

    def start_the_listener() -> None:
        listener.start()
        started.append(listener)

    starting: list[threading.Thread] = []
    try:
        report = while_awaited(
            inbox,
            sweeping(root, OsProcessTable()),
            lambda: starting.append(finished_or_awaiting(inbox, start_the_listener, beside=1)),
        )
        starting[0].join(timeout=20)
        assert started == [listener]
        assert report == sweep.SweepReport((), ())
        record = registry.read(root, idle.address)
        assert record is not None and record.pid == os.getpid()
        assert inbox.is_dir()
        for handle in (idle.address, "starting"):
            receipts = post.send([handle], f"to {handle}", SENDER, CALLER)
            assert [r.address for r in receipts] == [idle.address]
        listener.drain()
        # Sent at one clock reading: their ids, and so their order, differ by chance.
        assert sorted(d.message.body for d in context.deliveries) == [
            f"to {idle.address}",
            "to starting",
        ]
    finally:
        listener.stop()


def test_a_running_listener_whose_record_cannot_be_written_keeps_its_mailbox(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38, item 14: the registry cannot be written (INV-23: the session runs
    on), and a sweep comes: the empty mailbox no record names is the running
    listener's, and stays; mail sent to the address still queues and is taken."""

    def read_only(root: Path, record: Record) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(registry, "write", read_only)
    post = Post(root, clock=lambda: NOW)
    context = Taken()
    listener = Host(post, "sess-unrecorded", str(tmp_path), context)
    listener.start()
    try:
        assert listener.record is None
        report = sweep.sweep(root, NOW, OsProcessTable())
        assert report == sweep.SweepReport((), ())
        assert (root / "inbox" / listener.address).is_dir()
        post.send([listener.address], "still here?", SENDER, CALLER)
        listener.drain()
        assert [d.message.body for d in context.deliveries] == ["still here?"]
    finally:
        listener.stop()
    # Once it stopped, the mailbox is any orphan's: the next sweep removes it.
    assert sweep.sweep(root, NOW, OsProcessTable()).mailboxes_removed == (listener.address,)


def test_a_running_listener_keeps_its_record_however_old_it_reads(
    root: Path, tmp_path: Path
) -> None:
    """A record that says offline, unseen for 8 days (another receiver of the session
    marked it so when it stopped, and this one's heartbeats could not be written
    since), while a listener of the session runs: the sweep keeps it and the
    mailbox, as they are."""
    post = Post(root, clock=lambda: NOW - 8 * DAY_MS)
    listener = Host(post, "sess-quiet", str(tmp_path), Taken())
    listener.start()
    try:
        assert listener.record is not None
        registry.mark_offline(root, listener.record, NOW - 8 * DAY_MS)
        before = tree_snapshot(root)
        assert sweep.sweep(root, NOW, OsProcessTable()) == sweep.SweepReport((), ())
        assert tree_snapshot(root) == before
    finally:
        listener.stop()


@needs_proc_locks
def test_a_starting_listener_registers_under_its_mailbox_lock(root: Path, tmp_path: Path) -> None:
    """Registering and sweeping agree on one lock, the mailbox's: while a sweep holds
    it (here, the test), a starting listener waits to write its record, so none is
    written between the sweep's second reading and its unlink."""
    inbox = root / "inbox" / address_of("sess-waits")
    inbox.mkdir(parents=True)
    listener = Host(Post(root, clock=lambda: NOW), "sess-waits", str(tmp_path), Taken())
    held = os.open(inbox, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        starting = finished_or_awaiting(inbox, listener.start)
        waited = starting.is_alive()
        written_meanwhile = registry.read(root, listener.address)
    finally:
        os.close(held)  # the lock goes with it
    try:
        starting.join(timeout=20)
        assert waited
        assert written_meanwhile is None
        assert registry.read(root, listener.address) == listener.record
    finally:
        listener.stop()


def test_a_listener_makes_its_mailbox_again_when_a_sweep_removed_it_while_it_waited(
    root: Path, tmp_path: Path
) -> None:
    """The sweep removed the empty folder (no record, no listener yet) while the
    starting listener waited for its lock: it makes the folder again, and watches
    and registers that one."""
    inbox = root / "inbox" / address_of("sess-raced")
    inbox.mkdir(parents=True)
    listener = Host(Post(root, clock=lambda: NOW), "sess-raced", str(tmp_path), Taken())
    try:
        removed_while_awaited(inbox, listener.start)
        assert inbox.is_dir()
        assert registry.read(root, listener.address) == listener.record
    finally:
        listener.stop()


@pytest.mark.parametrize(
    "change",
    [
        {"address": "s-000000000000"},
        {"session_id": "other"},
        {"name": "other"},
        {"cwd": "/other"},
        {"started_at": 1},
        {"last_seen": 1},
        {"pid": 7},
        {"pid_start": "7"},
    ],
)
def test_records_differing_in_a_field_we_write_are_unequal(change: dict[str, object]) -> None:
    record = make_record("equal", "/work", pid=5, pid_start="5")
    assert record.replace(**change) != record
    assert record.replace(extra={"other": "writer"}) == record


@pytest.mark.parametrize(
    ("escaped_name", "accepted"),
    [
        ("\\ud83d\\ude00", True),  # a pair: one character, valid text
        ("\\u00e9t\\u00e9", True),
        ("\\ud800", False),  # a lone surrogate: JSON, but no text
        ("x\\udfff", False),
    ],
)
def test_a_name_spelled_with_escapes_is_text_or_refused(escaped_name: str, accepted: bool) -> None:
    record = make_record("escapes", "/work", pid=5)
    raw = session.encode(record).replace(b'"name":"', b'"name":"' + escaped_name.encode(), 1)
    parsed = session.parse(raw)
    if accepted:
        assert isinstance(parsed, Record)
        assert parsed.name.startswith(json.loads(f'"{escaped_name}"'))
    else:
        assert parsed == Rejected("bad_field", "name holds unpaired surrogates", field="name")


@pytest.mark.parametrize(
    ("name", "age_ms", "sweepable"),
    [
        ("1796078509367-deed10f1.json.tmp", session.TEMPORARY_STALE_MS + 1, True),
        (".s-52c78af935a3.0a1b2c3d.tmp", session.TEMPORARY_STALE_MS + 1, True),
        ("1796078509367-deed10f1.json.tmp", session.TEMPORARY_STALE_MS, False),
        ("1796078509367-deed10f1.json.tmp", 0, False),
        ("1796078509367-deed10f1.json", YEAR_MS, False),
        ("notes.txt", YEAR_MS, False),
        ("tmp", YEAR_MS, False),
    ],
)
def test_only_temporaries_untouched_for_36_hours_are_sweepable(
    name: str, age_ms: int, sweepable: bool
) -> None:
    assert session.TEMPORARY_STALE_MS == 36 * 3600 * 1000
    assert session.temporary_is_sweepable(name, age_ms) is sweepable


def _record_with(**changes: object) -> bytes:
    """A well-formed record with fields replaced (a value of ... removes the field)."""
    data = session.to_json(make_record("rules", "/work", pid=5))
    for key, value in changes.items():
        if value is ...:
            data.pop(key)
        else:
            data[key] = value
    return json.dumps(data).encode()


RECORD_REJECTIONS: list[tuple[str, bytes, Rejected]] = [
    (
        "oversize",
        b" " * (session.RECORD_READ_LIMIT + 1),
        Rejected("oversize", "record is too large", limit=session.RECORD_READ_LIMIT),
    ),
    ("not UTF-8", b'{"v":1,"name":"\xff"}', Rejected("not_utf8", "not JSON")),
    ("truncated", b'{"v":1,', Rejected("not_json", "not JSON")),
    ("deep", b"[" * 30_000 + b"]" * 30_000, Rejected("too_deep", "not JSON")),
    ("array", b"[]", Rejected("not_object", "not a JSON object")),
    (
        "v after the current",
        _record_with(v=session.VERSION + 1),
        Rejected("bad_field", unreadable_version(session.READABLE_VERSIONS), field="v"),
    ),
    (
        "no cwd",
        _record_with(cwd=...),
        Rejected("bad_field", "cwd is not a non-empty string", field="cwd"),
    ),
    (
        "pid text",
        _record_with(pid="5"),
        Rejected("bad_field", "pid is not a positive integer", field="pid"),
    ),
    (
        "pidStart number",
        _record_with(pidStart=7),
        Rejected("bad_field", "pidStart is not a string", field="pidStart"),
    ),
    (
        "pidStart a lone surrogate",
        _record_with(pidStart="\ud800"),
        Rejected("bad_field", "pidStart holds unpaired surrogates", field="pidStart"),
    ),
    (
        "startedAt text",
        _record_with(startedAt="1"),
        Rejected("bad_field", "startedAt is not an integer", field="startedAt"),
    ),
    (
        "lastSeen missing",
        _record_with(lastSeen=...),
        Rejected("bad_field", "lastSeen is not an integer", field="lastSeen"),
    ),
    (
        "another session's address",
        _record_with(address=address_of("someone else")),
        Rejected("bad_field", "address is not the address of sessionId", field="address"),
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(raw, expected) for _, raw, expected in RECORD_REJECTIONS],
    ids=[label for label, _, _ in RECORD_REJECTIONS],
)
def test_a_record_is_rejected_with_a_code_its_facts_and_pipost_s_words(
    raw: bytes, expected: Rejected
) -> None:
    assert session.parse(raw) == expected


def test_a_record_of_exactly_the_read_limit_is_read() -> None:
    """The limit is the largest record read, not the first refused (SPEC's bound)."""
    raw = _record_with()
    padded = raw + b" " * (session.RECORD_READ_LIMIT - len(raw))
    assert len(padded) == session.RECORD_READ_LIMIT
    assert session.parse(padded) == make_record("rules", "/work", pid=5)


@pytest.fixture
def bumped(monkeypatch: pytest.MonkeyPatch) -> None:
    """The record version bumped to 2, as a later pipost would have it."""
    monkeypatch.setattr(session, "VERSION", 2)
    monkeypatch.setattr(session, "READABLE_VERSIONS", (1, 2))


@pytest.mark.usefixtures("bumped")
def test_after_a_bump_a_v1_record_is_read_and_records_are_written_as_the_new_version() -> None:
    record = make_record("rules", "/work", pid=5)
    assert session.parse(_record_with(v=1)) == record
    assert session.to_json(record)["v"] == 2
    assert session.parse(session.encode(record)) == record


@pytest.mark.usefixtures("bumped")
@pytest.mark.parametrize("v", [0, 3, True, "1"])
def test_after_a_bump_a_record_version_not_read_is_refused_naming_the_readable_ones(
    v: object,
) -> None:
    expected = Rejected("bad_field", "v is not one of 1, 2", field="v")
    assert session.parse(_record_with(v=v)) == expected


@pytest.mark.usefixtures("bumped")
def test_a_record_is_read_by_the_fields_of_its_own_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """A field v2 defines is another writer's in a v1 record, kept as extra."""
    monkeypatch.setitem(session.KNOWN_FIELDS, 2, session.KNOWN_FIELDS[1] | {"host"})
    v1 = session.parse(_record_with(v=1, host="box"))
    v2 = session.parse(_record_with(v=2, host="box"))
    assert isinstance(v1, Record) and v1.extra == {"host": "box"}
    assert isinstance(v2, Record) and v2.extra == {}
    assert session.known_fields(3) == session.KNOWN_FIELDS[2]


def test_a_record_filed_under_another_address_is_an_id_mismatch() -> None:
    record = make_record("filed", "/work", pid=5)
    parsed = session.parse(session.encode(record), address_of("elsewhere") + ".json")
    assert parsed == Rejected("id_mismatch", "file name is not the address")
