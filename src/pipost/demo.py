"""``pi-post demo``: a narrated exchange between real processes in a throwaway
root. Every line it prints about mail comes from a real ``pi-post`` process or
from the files on disk; nothing is simulated."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pipost import mailbox, registry, session
from pipost.address import address_of
from pipost.registry import OsProcessTable
from pipost.session import Presence

Say = Callable[[str], None]
_WAIT_S = 15.0


class DemoFailed(Exception):
    pass


class Stopped(BaseException):
    """SIGTERM or SIGHUP arrived: the demo ends as on Ctrl-C, its processes stopped
    and its folder removed. A BaseException, as KeyboardInterrupt is, so that
    nothing on the way takes it for a failure to handle."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class Stops:
    """SIGTERM and SIGHUP, raised as Stopped. One that arrives while a process is
    being started waits until the process is tracked, or it would run on untracked."""

    SIGNALS = (signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self._starting = False
        self._pending: int | None = None

    def arrived(self, signum: int, frame: object) -> None:
        # The first signal ends the demo; more of them must not cut its cleanup short.
        for stopping in self.SIGNALS:
            signal.signal(stopping, signal.SIG_IGN)
        if self._starting:
            self._pending = signum
        else:
            raise Stopped(signum)

    @contextmanager
    def starting(self) -> Iterator[None]:
        self._starting = True
        try:
            yield
        finally:
            self._starting = False
        if self._pending is not None:
            raise Stopped(self._pending)


class Demo:
    def __init__(self, base: Path, say: Say, stops: Stops) -> None:
        self.base = base
        self.root = base / "post"
        self.say = say
        self.stops = stops
        self.cli = [sys.executable, "-m", "pipost"]
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PI_")}
        self.env.update(PI_POST_DIR=str(self.root), PI_POST_CLI=shlex.join(self.cli))
        self.listeners: dict[str, subprocess.Popen[bytes]] = {}
        self.processes: list[subprocess.Popen[bytes]] = []
        """Every process started, so that none outlives the demo."""

    def project(self, name: str) -> Path:
        folder = self.base / name
        folder.mkdir(exist_ok=True)
        return folder

    def start(self, args: list[str], cwd: Path, output: int) -> subprocess.Popen[bytes]:
        """A pi-post process, tracked from the moment it exists."""
        with self.stops.starting():
            process = subprocess.Popen(
                [*self.cli, *args],
                cwd=cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=output,
            )
            self.processes.append(process)
        return process

    def pipost(self, *args: str) -> str:
        """Run pi-post as a script in the folder ``scripts`` would, and show it."""
        self.say("$ pi-post " + shlex.join(args))
        process = self.start(list(args), self.project("scripts"), subprocess.PIPE)
        try:
            stdout, stderr = process.communicate(timeout=_WAIT_S)
        except subprocess.TimeoutExpired:
            raise DemoFailed(f"pi-post {args[0]} did not end within {_WAIT_S:g} s") from None
        shown = stdout.decode(errors="replace")
        for line in (shown + stderr.decode(errors="replace")).splitlines():
            self.say("  " + line)
        return shown

    def listen(self, name: str, *extra: str) -> str:
        session_id = f"demo-{name}"
        self.listeners[name] = self.start(
            ["listen", "--session-id", session_id, "--name", name, *extra],
            self.project(name + "-project"),
            subprocess.DEVNULL,
        )
        address = address_of(session_id)
        self.until(lambda: self.presence(address) is Presence.LIVE, f"{name} registers")
        return address

    def stop(self, name: str) -> None:
        process = self.listeners[name]
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=_WAIT_S)
        del self.listeners[name]

    def stop_all(self) -> None:
        for name in list(self.listeners):
            self.stop(name)

    def presence(self, address: str) -> Presence | None:
        record = registry.read(self.root, address)
        if record is None:
            return None
        return session.presence(record, int(time.time() * 1000), OsProcessTable())

    def transcript(self, name: str) -> list[dict[str, object]]:
        path = self.base / f"{name}.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    def until(self, condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + _WAIT_S
        while not condition():
            if time.monotonic() > deadline:
                raise DemoFailed(f"timed out waiting until {what}")
            time.sleep(0.05)

    def show_last_entry(self, name: str) -> None:
        entry = self.transcript(name)[-1]
        self.say(f"  what entered {name}'s context:")
        for line in str(entry["text"]).splitlines():
            self.say("  | " + line)


def run(say: Say) -> int:
    stops = Stops()
    previous = {signum: signal.signal(signum, stops.arrived) for signum in Stops.SIGNALS}
    try:
        with (
            tempfile.TemporaryDirectory(prefix="pipost-demo-") as tmp,
            _demo(Path(tmp), say, stops) as demo,
        ):
            try:
                _script(demo)
            except DemoFailed as failure:
                say(f"demo failed: {failure}")
                return 1
    except Stopped as stopped:
        return 128 + stopped.signum  # as a shell reports a process ended by the signal
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0


@contextmanager
def _demo(base: Path, say: Say, stops: Stops) -> Iterator[Demo]:
    demo = Demo(base, say, stops)
    try:
        yield demo
    finally:
        for process in demo.processes:
            process.kill()  # nothing for one that has ended already
            process.wait()


def _script(demo: Demo) -> None:
    say = demo.say
    say(f"# A throwaway post office at {demo.root}")
    say("# Two sessions start receiving; each keeps a transcript of what entered its context.")
    demo.listen("alice", "--transcript", str(demo.base / "alice.jsonl"))
    demo.listen("bob", "--transcript", str(demo.base / "bob.jsonl"))
    demo.pipost("list")

    say("")
    say("# A process (a script, a hook) sends to alice by name. She is live and takes it:")
    demo.pipost("send", "--to", "alice", "--body", "main moved; rebase before you push")
    demo.show_last_entry("alice")

    say("")
    say("# bob shuts down. His record stays; mail sent to him now waits on disk.")
    demo.stop("bob")
    demo.pipost(
        "send", "--to", str(demo.project("bob-project")), "--body", "review PR 12 when back"
    )
    demo.pipost("peek", "bob")

    say("")
    say("# bob resumes and collects his mail at start-up.")
    bob = demo.listen("bob", "--transcript", str(demo.base / "bob.jsonl"))
    # His transcript has the letter before the letter leaves the disk: the peek
    # below would show it still queued if the demo went on at the first.
    demo.until(
        lambda: len(demo.transcript("bob")) == 1 and mailbox.count(demo.root, bob) == 0,
        "bob collects his mail",
    )
    demo.show_last_entry("bob")
    demo.pipost("peek", "bob")

    say("")
    say("# ping and pong answer every message they get, with the same words, in the background.")
    say("# The loop guard drops an identical body from one sender within 10 s: the echo stops.")
    reply = '$PI_POST_CLI send --to "$PI_POST_MESSAGE_REPLY_TO" --body "got it" >/dev/null &'
    ping = demo.listen("ping", "--exec", reply)
    demo.listen("pong", "--exec", reply)
    demo.pipost("send", "--to", "pong", "--reply-to", ping, "--body", "got it")
    _settle(demo)
    say("# The drop log (reasons, never bodies):")
    demo.pipost("log")

    say("")
    say("# Everyone stops. A month passes (we age the records by hand); bob has mail queued.")
    demo.stop_all()
    demo.pipost("send", "--to", "bob", "--body", "welcome back")
    month = 30 * 24 * 3600 * 1000
    for record in registry.records(demo.root):
        registry.write(demo.root, registry.replace_last_seen(record, record.last_seen - month))
    say("# The sweep removes the month-old records with empty mailboxes, and keeps bob's:")
    demo.pipost("sweep")
    demo.pipost("list", "--all")


def _settle(demo: Demo) -> None:
    """Wait until the drop log stops growing: the exchange has ended by itself."""
    log = demo.root / "log" / "drops.jsonl"
    demo.until(log.exists, "the guard drops an echo")
    size, quiet_since = -1, time.monotonic()
    while time.monotonic() - quiet_since < 2.0:
        if log.stat().st_size != size:
            size, quiet_since = log.stat().st_size, time.monotonic()
        time.sleep(0.1)
