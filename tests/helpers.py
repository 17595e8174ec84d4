"""Helpers shared by the I/O tests: a snapshot of a folder tree, a process table
and a clock that the test controls, builders for records and messages, and a user
that mode bits bind; what a drain's outcomes come to; a letter claimed or set aside
by name, as a receiver does it; a recording double of what the disk is asked; a
disk that refuses unlinks, a folder removed while someone waits for its lock (or
every time), and the descriptors a process has open."""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest

from pipost import droplog, files, mailbox, registry
from pipost.address import address_of, default_name
from pipost.message import Message, Sender, new_message
from pipost.quarantine import SetAside
from pipost.reception import ENTERS, Outcome
from pipost.session import Record

# Shared with the state machines of the conformance kit, which ships in pipost.
from pipost_conformance.machines.common import NOW as NOW
from pipost_conformance.machines.common import Entry as Entry
from pipost_conformance.machines.common import descriptors_on as descriptors_on
from pipost_conformance.machines.common import made as made
from pipost_conformance.machines.common import tree_snapshot as tree_snapshot

PIPOST_DRIVER = [sys.executable, "-m", "pipost", "driver"]
"""pipost's driver over JSON lines, as a port's shim is run."""

DAY_MS = 24 * 3600 * 1000

T = TypeVar("T")


@dataclass
class FakeProcessTable:
    """pid -> start token; a pid that is not in the table has no process."""

    tokens: dict[int, str] = field(default_factory=dict)

    def start_token(self, pid: int) -> str | None:
        return self.tokens.get(pid)


@dataclass
class FixedClock:
    """A clock that only moves when the test moves it."""

    now: int = NOW

    def __call__(self) -> int:
        return self.now


def make_record(
    session_id: str,
    cwd: str,
    *,
    last_seen: int = NOW,
    name: str | None = None,
    pid: int | None = None,
    pid_start: str | None = None,
) -> Record:
    address = address_of(session_id)
    return Record(
        address=address,
        session_id=session_id,
        name=name or default_name(cwd, address),
        cwd=cwd,
        started_at=last_seen - 1000,
        last_seen=last_seen,
        pid=pid,
        pid_start=pid_start,
    )


def write_record(root: Path, record: Record) -> Record:
    registry.write(root, record)
    return record


def make_message(sent_at: int = NOW, body: str = "hello", name: str = "process:test") -> Message:
    return new_message(Sender(kind="process", name=name), body, sent_at)


def entered_count(outcomes: Sequence[Outcome]) -> int:
    """How many of a drain's outcomes are letters that entered the context."""
    return sum(outcome.action in ENTERS for outcome in outcomes)


def deposit(root: files.StrPath, address: str, message: Message, *, durable: bool = True) -> str:
    """Queue ``message`` as a sender does, the root opened (made) for it; the letter's path."""
    with files.make_root(root) as top:
        return mailbox.deposit(top, address, message, durable=durable)


def peek(root: files.StrPath, address: str) -> list[mailbox.Letter]:
    """The letters queued for ``address``, read as ``pi-post peek`` reads them."""
    top = files.open_root(root)
    if top is None:
        return []
    with top:
        return mailbox.peek(top, address)


def claim_named(root: files.StrPath, address: str, name: str) -> mailbox.Claim | None:
    """The claim of the letter ``name`` as a receiver takes it (mailbox.claims), the
    letters before it left queued; None if another receiver holds it or it is gone."""
    taking = mailbox.claims(root, address)
    try:
        for claim in taking:
            if claim.name == name:
                return claim
            claim.release()
        return None
    finally:
        taking.close()


def set_aside(root: files.StrPath, address: str, name: str, reason: str) -> SetAside:
    """Set the queued letter ``name`` aside as a receiver does: claimed, then moved."""
    claim = claim_named(root, address, name)
    assert claim is not None, f"no letter {name} to claim for {address}"
    try:
        return claim.set_aside(reason)
    finally:
        claim.release()


def log_drop(root: files.StrPath, drop: droplog.Drop) -> None:
    """One line of the drop log, written as a receiver writes it (below the open root)."""
    with files.make_root(root) as top:
        droplog.record(top, drop)


class Opened:
    """A recording double in front of the disk: how often the root is opened, each
    folder entered from the one above it (by path), each folder listed (a mailbox's
    listing is its count) and each file read."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.roots = 0
        self.entered: Counter[str] = Counter()
        self.listed: Counter[str] = Counter()
        self.read: Counter[str] = Counter()
        real_open_root, real_child = files.open_root, files.Folder.child
        real_names, real_open_file = files.Folder.names, files.Folder.open_file

        def open_root(root: files.StrPath) -> files.Folder | None:
            self.roots += 1
            return real_open_root(root)

        def child(folder: files.Folder, name: str) -> files.Folder | None:
            self.entered[folder.name(name)] += 1
            return real_child(folder, name)

        def names(folder: files.Folder) -> list[str]:
            self.listed[os.path.basename(folder.path)] += 1
            return real_names(folder)

        def open_file(folder: files.Folder, name: str) -> files.OpenFile | None:
            self.read[name] += 1
            return real_open_file(folder, name)

        monkeypatch.setattr(files, "open_root", open_root)
        monkeypatch.setattr(files.Folder, "child", child)
        monkeypatch.setattr(files.Folder, "names", names)
        monkeypatch.setattr(files.Folder, "open_file", open_file)


def json_names(folder: Path) -> list[str]:
    """The ``*.json`` names in a folder, as ``ls`` would show them (dot-files included)."""
    return sorted(name for name in os.listdir(folder) if name.endswith(".json"))


def put(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write a new file as pipost writes one, into a folder that must exist."""
    folder = files.open_root(path.parent)
    assert folder is not None, f"no folder {path.parent}"
    with folder:
        folder.write_new(path.name, data, durable=durable)


def process_gone(pid: int) -> bool:
    """Whether the process ``pid`` has ended and been reaped (a zombie waiting for its
    reaper still answers)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


# -- a disk that refuses unlinks -----------------------------------------------------


class FailingUnlinks:
    """Stands between a receiver and the disk: while ``failing``, every unlink in a
    mailbox folder fails as on a folder the process may not write."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.failing = True
        self.attempts = 0
        real = files.Folder.unlink

        def unlink(folder: files.Folder, name: str) -> None:
            if "/inbox/" in folder.path + "/":
                self.attempts += 1
                if self.failing:
                    raise PermissionError(13, "Permission denied", folder.name(name))
            real(folder, name)

        monkeypatch.setattr(files.Folder, "unlink", unlink)


# -- folders removed under a waiter, descriptors left open ------------------------------


def open_descriptors() -> set[str]:
    """The descriptors this process has open (Linux and macOS alike)."""
    return set(os.listdir("/dev/fd"))


def waits_on_lock(folder: Path) -> bool:
    """Whether someone waits for the lock of ``folder``, which the test holds."""
    return waiters_on_lock(folder) > 0


def waiters_on_lock(folder: Path) -> int:
    """How many wait for the lock of ``folder`` while the test holds it through one
    descriptor: the descriptors open on it besides the test's."""
    return descriptors_on(folder) - 1


def removed_while_awaited(folder: Path, action: Callable[[], T]) -> T:
    """What ``action`` returns (or raises), run while the empty ``folder`` is locked
    and removed as soon as ``action`` waits for its lock: as a sweep, or the last
    listener to leave, removes a folder under its lock."""
    return while_awaited(folder, action, lambda: os.rmdir(folder))


def while_awaited(folder: Path, action: Callable[[], T], meanwhile: Callable[[], object]) -> T:
    """What ``action`` returns (or raises), run while ``folder`` is locked, with
    ``meanwhile`` run once ``action`` waits for that lock, then the lock released."""
    held = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    outcome: list[T] = []
    raised: list[BaseException] = []

    def act() -> None:
        try:
            outcome.append(action())
        except BaseException as error:  # raised again in the test's thread
            raised.append(error)

    waiter = threading.Thread(target=act, daemon=True)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        waiter.start()
        deadline = time.monotonic() + 20
        while not waits_on_lock(folder):
            assert waiter.is_alive() and time.monotonic() < deadline, "it never waited"
            time.sleep(0.001)
        meanwhile()
    finally:
        os.close(held)  # the lock goes with it
    waiter.join(timeout=20)
    assert not waiter.is_alive()
    if raised:
        raise raised[0]
    return outcome[0]


_FROZEN_HOLDER = """
import fcntl, os, signal, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_SH if sys.argv[2] == "shared" else fcntl.LOCK_EX)
os.kill(os.getpid(), signal.SIGSTOP)
"""


@contextmanager
def frozen_holder(path: Path, *, shared: bool = False) -> Iterator[int]:
    """The pid of a process that holds the ``flock`` of ``path`` (a folder or a file)
    and is stopped (SIGSTOP): a sender or a listener frozen while it held a lock.
    Killed at the end, which frees the lock."""
    process = subprocess.Popen(
        [sys.executable, "-c", _FROZEN_HOLDER, str(path), "shared" if shared else "exclusive"]
    )
    try:
        _, status = os.waitpid(process.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status), f"the holder ended (status {status}) instead of stopping"
        yield process.pid
    finally:
        process.kill()
        process.wait()


def unix_socket(path: Path) -> socket.socket:
    """A UNIX socket bound at ``path``, which cannot be opened at all (ENXIO); bound
    from its folder, as a socket's path is limited to 108 bytes."""
    bound = socket.socket(socket.AF_UNIX)
    here = os.getcwd()
    os.chdir(path.parent)
    try:
        bound.bind(path.name)
    except BaseException:
        bound.close()
        raise
    finally:
        os.chdir(here)
    return bound


def driverless_device(path: Path) -> None:
    """A character device node at ``path`` whose major number no driver here claimed
    (of those Linux keeps for local use), so it cannot be opened (ENXIO). Making one
    needs root: the test is skipped otherwise (CI runs as root)."""
    if os.geteuid() != 0:
        pytest.skip("making a device node (mknod) needs root; CI runs as root")
    with open("/proc/devices") as table:
        characters = table.read().split("Block devices:")[0]
    claimed = {int(line.split()[0]) for line in characters.splitlines()[1:] if line.strip()}
    free = [major for major in range(240, 255) if major not in claimed]
    if not free:
        pytest.skip("every local-use character major has a driver on this machine")
    os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(free[0], 7))


def not_blocked(action: Callable[[], object]) -> BaseException | None:
    """What ``action`` raised (None if nothing), failing the test if it is still
    waiting after 20 s: what it waits for is held by a stopped process, or is a
    FIFO, so without a bound it would wait for ever."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            action()
        except BaseException as error:  # raised again by the caller's assertions
            raised.append(error)

    waiter = threading.Thread(target=run, daemon=True)
    waiter.start()
    waiter.join(timeout=20)
    if waiter.is_alive():
        pytest.fail("still waiting after 20 s for a lock or a FIFO")
    return raised[0] if raised else None


def finished_or_awaiting(
    folder: Path, action: Callable[[], object], *, beside: int = 0
) -> threading.Thread:
    """``action`` started in a thread of its own, returned once it ended or waits
    for ``folder``'s lock beside the ``beside`` waits already there; join the thread
    after the lock is released."""
    thread = threading.Thread(target=action, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while thread.is_alive() and waiters_on_lock(folder) <= beside:
        assert time.monotonic() < deadline, "it neither ended nor waited"
        time.sleep(0.001)
    return thread


class VanishingFolders:
    """files.FolderLock as it is when every folder pipost locks is removed while it
    waits (files.Vanished), every time; how often it was asked is counted."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.asked = 0

        def lock(held: files.FolderLock) -> files.Folder:
            self.asked += 1
            raise files.Vanished

        monkeypatch.setattr(files.FolderLock, "__enter__", lock)


# -- a user that mode bits bind -------------------------------------------------------

UNPRIVILEGED_USER = "nobody"
UNPRIVILEGED_GROUP = "nogroup"


PIPOST_COMMAND = (sys.executable, "-m", "pipost")
"""pipost's command line as the tests run it."""


def unprivileged(command: Sequence[str]) -> list[str]:
    """``command``, run by a user whom a read-only folder stops: root (as CI runs)
    ignores mode bits, so under root it runs as nobody; anyone else runs it as is.

    That user may not be able to enter the checkout (CI clones into a folder only
    root can enter): pipost's command line then runs from a copy of the package
    that anyone can read."""
    if os.geteuid() != 0:
        return list(command)
    if tuple(command[: len(PIPOST_COMMAND)]) == PIPOST_COMMAND:
        launch = (
            f"import sys; sys.path.insert(0, {str(_readable_package())!r}); "
            "from pipost.cli import exit_now, main; exit_now(main())"
        )
        command = [sys.executable, "-c", launch, *command[len(PIPOST_COMMAND) :]]
    return [
        "setpriv",
        f"--reuid={UNPRIVILEGED_USER}",
        f"--regid={UNPRIVILEGED_GROUP}",
        "--clear-groups",
        *command,
    ]


def unprivileged_python(code: str) -> list[str]:
    """``python -c code`` as ``unprivileged`` runs it, pipost imported from the copy
    anyone can read when the user changes."""
    if os.geteuid() == 0:
        code = f"import sys; sys.path.insert(0, {str(_readable_package())!r}); {code}"
    return unprivileged([sys.executable, "-c", code])


_readable_copy: list[Path] = []


def _readable_package() -> Path:
    """The folder of a copy of the pipost package under test, readable by anyone:
    made once per test process, removed when it ends."""
    if not _readable_copy:
        import atexit

        import pipost

        folder = Path(tempfile.mkdtemp(prefix="pipost-code-"))
        atexit.register(shutil.rmtree, folder, True)
        shutil.copytree(
            Path(pipost.__file__).parent,
            folder / "pipost",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        for place, _, names in os.walk(folder):
            os.chmod(place, 0o755)
            for name in names:
                os.chmod(os.path.join(place, name), 0o644)
        _readable_copy.append(folder)
    return _readable_copy[0]


def unprivileged_uid() -> int:
    """The uid that ``unprivileged`` commands run with."""
    return _unprivileged_ids()[0] if os.geteuid() == 0 else os.geteuid()


def give_to_unprivileged(path: Path) -> None:
    """Make ``path`` and everything under it the unprivileged user's (under root)."""
    if os.geteuid() != 0:
        return
    for folder, _, names in os.walk(path):
        for name in [".", *names]:
            os.chown(os.path.join(folder, name), *_unprivileged_ids(), follow_symlinks=False)


def _unprivileged_ids() -> tuple[int, int]:
    import grp
    import pwd

    return pwd.getpwnam(UNPRIVILEGED_USER).pw_uid, grp.getgrnam(UNPRIVILEGED_GROUP).gr_gid


@contextmanager
def unprivileged_scratch() -> Iterator[Path]:
    """A scratch folder the unprivileged user can reach (pytest's tmp_path sits in a
    folder only its owner may enter), removed afterwards whatever its modes."""
    scratch = Path(tempfile.mkdtemp(prefix="pipost-unprivileged-"))
    give_to_unprivileged(scratch)
    try:
        yield scratch
    finally:
        for folder, _, _ in os.walk(scratch):
            os.chmod(folder, 0o700)
        shutil.rmtree(scratch)


def measured() -> dict[str, str]:
    """The variables by which coverage.py measures a child too (nox -s check sets them),
    and the mutant it runs (mutated()), for a test that starts its process with an
    environment of its own. Not for one that pins what a process imports or how it
    exits: coverage loads modules (threading)."""
    coverage = {name: value for name, value in os.environ.items() if name.startswith("COVERAGE_")}
    return coverage | mutated()


def mutated() -> dict[str, str]:
    """The mutant nox -s mutation runs, for a child started with an environment of its
    own: without it, the child runs the code unmutated, and no mutant of what only a
    child runs could be killed."""
    mutant = os.environ.get("MUTANT_UNDER_TEST")
    return {} if mutant is None else {"MUTANT_UNDER_TEST": mutant}


def python_path_first(source: Path) -> str:
    """PYTHONPATH for a child that runs the pipost of ``source`` (a copy of src/): it
    first, then this process's own."""
    given = [folder for folder in os.environ.get("PYTHONPATH", "").split(os.pathsep) if folder]
    return os.pathsep.join([str(source), *given])


C_LOCALE_WITHOUT_UTF8_MODE = {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
"""The environment of a process under the C locale that Python neither coerces to
C.UTF-8 nor meets in UTF-8 mode: it reads its arguments, and encodes a child's
environment, as ASCII."""


def python_under_c_locale(code: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    """``python -c code args`` under C_LOCALE_WITHOUT_UTF8_MODE, importing what this
    process imports (the mutant under test among it, if any); its output as bytes."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env={
            "PATH": os.environ.get("PATH", ""),
            "PYTHONPATH": os.pathsep.join(sys.path),
            **C_LOCALE_WITHOUT_UTF8_MODE,
            **mutated(),
        },
        capture_output=True,
        timeout=60,
    )


def python_in(root: Path, code: str) -> str:
    """What ``code`` prints, run by a fresh interpreter with PI_POST_DIR at ``root``
    and nothing else of this environment: what a command imports shows only in a
    process of its own."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={"PI_POST_DIR": str(root), "PATH": os.environ.get("PATH", "")},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout
