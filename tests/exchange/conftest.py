"""The harness for whole exchanges: real ``pi-post`` processes sharing a tmp root.

Every process runs ``python -m pipost`` with PI_POST_DIR pointing at the test's
root and no other PI_* variable from the environment the tests run in, so that
nothing here can reach ~/.pi or a session of the person running the tests.
Listeners run in process groups of their own: the finalizer kills each group,
which also ends anything an ``--exec`` command left running in the background.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

from pipost import droplog, mailbox, registry, session
from pipost.address import address_of
from pipost.post import wall_clock_ms
from pipost.registry import OsProcessTable
from pipost.session import Presence

CLI = [sys.executable, "-m", "pipost"]
WAIT_S = 15.0
"""Upper bound for any single wait on another process; never an assertion on speed."""

_RECEIPT = re.compile(r"(delivered|queued) (s-[0-9a-f]{12}) ([0-9]{13}-[0-9a-f]{8})")


@dataclass(frozen=True)
class Receipt:
    outcome: str
    """"delivered" or "queued", as the sender printed it."""
    address: str
    message_id: str


@dataclass(frozen=True)
class SendResult:
    returncode: int
    stdout: str
    stderr: str

    def receipts(self) -> list[Receipt]:
        found = []
        for line in self.stdout.splitlines():
            match = _RECEIPT.fullmatch(line)
            assert match, f"send printed an unexpected line: {line!r} (stderr: {self.stderr!r})"
            found.append(Receipt(*match.groups()))
        return found

    def receipt(self) -> Receipt:
        """The one receipt of a successful send to one target."""
        assert self.returncode == 0, f"send failed ({self.returncode}): {self.stderr}"
        receipts = self.receipts()
        assert len(receipts) == 1, f"expected one receipt, got {self.stdout!r}"
        return receipts[0]


class Listener:
    """One ``pi-post listen`` process. In stream mode (neither --transcript nor
    --exec) its JSON lines are collected by a reader thread."""

    def __init__(
        self, session_id: str, process: subprocess.Popen[str], stderr_path: Path, *, stream: bool
    ) -> None:
        self.session_id = session_id
        self.process = process
        self.stderr_path = stderr_path
        self._lines: queue.Queue[str] = queue.Queue()
        self._reader: threading.Thread | None = None
        if stream:
            self._reader = threading.Thread(target=self._read_stdout, daemon=True)
            self._reader.start()

    @property
    def address(self) -> str:
        return address_of(self.session_id)

    @property
    def pid(self) -> int:
        return self.process.pid

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)

    def next_json(self, timeout: float = WAIT_S) -> dict[str, Any]:
        """The next message the listener printed, waiting at most ``timeout``."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"listener {self.session_id} printed nothing in {timeout} s")
        entry = json.loads(line)
        assert isinstance(entry, dict)
        return entry

    def printed_so_far(self) -> list[dict[str, Any]]:
        """The messages the listener printed until now, without waiting for more."""
        entries = []
        while not self._lines.empty():
            entries.append(json.loads(self._lines.get_nowait()))
        return entries

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def terminate(self) -> int:
        """SIGTERM, the orderly shutdown; returns the exit code."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=WAIT_S)

    def kill(self) -> None:
        """SIGKILL, a crash: nothing of the listener's runs after it."""
        self.process.kill()
        self.process.wait(timeout=WAIT_S)

    def finish_reading(self) -> None:
        """After the process is gone: let the reader reach the end of its output."""
        if self._reader is not None:
            self._reader.join(timeout=WAIT_S)


class Exchange:
    """A tmp post office and the real processes that use it, each run as ``command``
    (``pi-post``, by default as the user running the tests)."""

    def __init__(self, base: Path, command: Sequence[str] = CLI) -> None:
        self.base = base
        self.command = list(command)
        self.root = base / "post"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PI_")}
        self.env["PI_POST_DIR"] = str(self.root)
        self.scripts = self.folder("scripts")
        self._listeners: list[Listener] = []
        self._groups: list[subprocess.Popen[str]] = []
        self._count = 0

    def folder(self, name: str) -> Path:
        path = self.base / name
        path.mkdir(exist_ok=True)
        return path

    def listen(
        self,
        session_id: str,
        *,
        transcript: Path | None = None,
        exec_command: str | None = None,
        exec_timeout: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        wait_live: bool = True,
        also: bool = False,
    ) -> Listener:
        """Start ``pi-post listen`` (with ``also``, beside a listener the session has);
        by default wait until its record is live."""
        args = ["listen", "--session-id", session_id] + (["--also"] if also else [])
        if transcript is not None:
            args += ["--transcript", str(transcript)]
        if exec_command is not None:
            args += ["--exec", exec_command]
        if exec_timeout is not None:
            args += ["--exec-timeout", exec_timeout]
        stream = transcript is None and exec_command is None
        self._count += 1
        stderr_path = self.base / f"listener-{self._count}.stderr"
        with open(stderr_path, "wb") as stderr:
            process = self.spawn(
                *args,
                cwd=cwd or self.folder(session_id),
                env=env,
                stdout=subprocess.PIPE if stream else subprocess.DEVNULL,
                stderr=stderr,
            )
        listener = Listener(session_id, process, stderr_path, stream=stream)
        self._listeners.append(listener)
        if wait_live:
            self.wait_live(listener)
        return listener

    def wait_live(self, listener: Listener) -> None:
        """Until the registry shows this very process as the live holder of the address."""

        def live() -> bool:
            if listener.process.poll() is not None:
                pytest.fail(f"listener exited ({listener.process.returncode}): {listener.stderr()}")
            record = registry.read(self.root, listener.address)
            return (
                record is not None
                and record.pid == listener.pid
                and session.presence(record, wall_clock_ms(), OsProcessTable()) is Presence.LIVE
            )

        self.until(live, f"{listener.session_id} is live")

    def spawn(
        self,
        *args: str,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        stdout: int | IO[Any] = subprocess.PIPE,
        stderr: int | IO[Any] = subprocess.PIPE,
    ) -> subprocess.Popen[str]:
        """A ``pi-post`` process in a process group of its own, killed with its
        children at the end of the test whatever happened."""
        process = subprocess.Popen(
            [*self.command, *args],
            cwd=cwd or self.scripts,
            env={**self.env, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            text=True,
            start_new_session=True,
        )
        self._groups.append(process)
        return process

    def run(self, *args: str, timeout: float = WAIT_S) -> subprocess.CompletedProcess[str]:
        """One ``pi-post`` command, run from a scripts folder as a hook would."""
        return subprocess.run(
            [*self.command, *args],
            cwd=self.scripts,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def send(
        self, to: str, body: str, *, label: str | None = None, reply_to: str | None = None
    ) -> SendResult:
        args = ["send", "--to", to, "--body", body]
        if label is not None:
            args += ["--from", label]
        if reply_to is not None:
            args += ["--reply-to", reply_to]
        done = self.run(*args)
        return SendResult(done.returncode, done.stdout, done.stderr)

    def send_to_live(self, listener: Listener, body: str, *, label: str | None = None) -> Receipt:
        """A send to a live listener, its receipt judged as SPEC 3.2 allows it either
        way (INV-11): "delivered" only if the letter is off disk when the sender
        returns; "queued" too, since a receiver on a loaded machine may take longer
        than the 1.5 s the sender waits. What entered the context is the caller's
        to check; the receipt's timing is never this test's verdict."""
        receipt = self.send(listener.address, body, label=label).receipt()
        assert receipt.address == listener.address
        letter = self.root / "inbox" / receipt.address / f"{receipt.message_id}.json"
        if receipt.outcome == "delivered":
            assert not letter.exists(), "said delivered while the letter is still on disk"
        return receipt

    def queued(self, address: str) -> int:
        return mailbox.count(self.root, address)

    def drops(self) -> list[droplog.Drop]:
        return list(droplog.read(self.root))

    def set_aside(self) -> list[str]:
        """Everything the receivers moved to quarantine, as paths under the root."""
        quarantine = self.root / "quarantine"
        if not quarantine.exists():
            return []
        return sorted(str(p.relative_to(self.root)) for p in quarantine.rglob("*") if p.is_file())

    def until(self, condition: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout} s waiting until {what}")
            time.sleep(0.02)

    def close(self) -> None:
        """Kill every process group started (each process and its children)."""
        for process in self._groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=WAIT_S)
        for listener in self._listeners:
            listener.finish_reading()
        for process in self._groups:
            for pipe in (process.stdout, process.stderr):
                if pipe is not None:
                    pipe.close()


def read_transcript(path: Path) -> list[dict[str, Any]]:
    """Every line a ``--transcript`` listener wrote; each must be whole JSON."""
    if not path.exists():
        return []
    entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert all(isinstance(entry, dict) for entry in entries)
    return entries


@pytest.fixture
def exchange(tmp_path: Path) -> Iterator[Exchange]:
    post_office = Exchange(tmp_path)
    try:
        yield post_office
    finally:
        post_office.close()


@contextlib.contextmanager
def tmpfs(folder: Path, options: str) -> Iterator[Path]:
    """A tmpfs mounted on ``folder`` with ``options`` (``size=…``, ``ro``), unmounted
    at the end; the test is skipped where it cannot be mounted (root on Linux: CI
    runs as root)."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root on Linux (CI runs as root)")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"{options},mode=0700", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)
