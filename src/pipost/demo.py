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

from pipost import registry
from pipost.address import address_of
from pipost.registry import OsProcessTable, Presence

Say = Callable[[str], None]
_WAIT_S = 15.0


class DemoFailed(Exception):
    pass


class Demo:
    def __init__(self, base: Path, say: Say) -> None:
        self.base = base
        self.root = base / "post"
        self.say = say
        self.cli = [sys.executable, "-m", "pipost"]
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PI_")}
        self.env.update(PI_POST_DIR=str(self.root), PI_POST_CLI=shlex.join(self.cli))
        self.listeners: dict[str, subprocess.Popen[bytes]] = {}

    def project(self, name: str) -> Path:
        folder = self.base / name
        folder.mkdir(exist_ok=True)
        return folder

    def pipost(self, *args: str) -> str:
        """Run pi-post as a script in the folder ``scripts`` would, and show it."""
        self.say("$ pi-post " + shlex.join(args))
        done = subprocess.run(
            [*self.cli, *args],
            cwd=self.project("scripts"),
            env=self.env,
            capture_output=True,
            text=True,
            timeout=_WAIT_S,
            check=False,
        )
        for line in (done.stdout + done.stderr).splitlines():
            self.say("  " + line)
        return done.stdout

    def listen(self, name: str, *extra: str) -> str:
        session_id = f"demo-{name}"
        process = subprocess.Popen(
            [*self.cli, "listen", "--session-id", session_id, "--name", name, *extra],
            cwd=self.project(name + "-project"),
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.listeners[name] = process
        address = address_of(session_id)
        self.until(lambda: self.presence(address) is Presence.LIVE, f"{name} registers")
        return address

    def stop(self, name: str) -> None:
        process = self.listeners.pop(name)
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=_WAIT_S)

    def stop_all(self) -> None:
        for name in list(self.listeners):
            self.stop(name)

    def presence(self, address: str) -> Presence | None:
        record = registry.read(self.root, address)
        if record is None:
            return None
        return registry.presence(record, int(time.time() * 1000), OsProcessTable())

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
    with tempfile.TemporaryDirectory(prefix="pipost-demo-") as tmp, _demo(Path(tmp), say) as demo:
        try:
            _script(demo)
        except DemoFailed as failure:
            say(f"demo failed: {failure}")
            return 1
    return 0


@contextmanager
def _demo(base: Path, say: Say) -> Iterator[Demo]:
    demo = Demo(base, say)
    try:
        yield demo
    finally:
        for process in demo.listeners.values():
            process.kill()
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
    demo.listen("bob", "--transcript", str(demo.base / "bob.jsonl"))
    demo.until(lambda: len(demo.transcript("bob")) == 1, "bob collects his mail")
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
