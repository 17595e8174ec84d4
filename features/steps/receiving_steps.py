"""Receiving: real Host objects in this process, and real ``pi-post listen``
processes, over the scenario's scratch folder (environment.py makes it).

In-process hosts run on a clock the scenario moves and never serve in the
background unless a step says so: "the host takes its mail" is one drain. A
listener process runs on the machine's clock; every one started is killed when
the scenario ends.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

from behave import given, then, when
from behave.runner import Context

from pipost import droplog, mailbox, quarantine, registry, session
from pipost.address import address_of
from pipost.host import POLL_S, Delivery, Host, TranscriptContext
from pipost.host import Context as HostContext
from pipost.message import Message, Sender, new_message
from pipost.policy import Inbound, Resume, inbound_mode, resume_mode
from pipost.post import Post, os_caller, wall_clock_ms
from pipost.reception import RECEIPTED, Action
from pipost.registry import OsProcessTable
from pipost.session import Presence
from tests.helpers import deposit, entered_count, give_to_unprivileged, unprivileged

WAIT_S = 10.0
"""Longest a step waits for something another thread or process does."""

LETTER_NAME = re.compile(r"[0-9]{13}-[0-9a-f]{8}")


class MovableClock:
    """Milliseconds that move only when the scenario moves them."""

    def __init__(self) -> None:
        self.now = wall_clock_ms()

    def __call__(self) -> int:
        return self.now


class Recording:
    """A context that takes everything. With a ledger it can say which ids it holds
    (as a transcript can); without one it cannot (as a command cannot)."""

    def __init__(self, *, ledger: bool = True, failures: int = 0, raises: bool = False) -> None:
        self.ledger = ledger
        self.failures_left = failures
        self.raises = raises
        self.deliveries: list[Delivery] = []
        self._lock = threading.Lock()

    def holds(self, message_id: str) -> bool | None:
        return message_id in self.ids() if self.ledger else None

    def enter(self, delivery: Delivery) -> bool:
        if self.raises:
            raise RuntimeError("the context broke")
        with self._lock:
            if self.failures_left > 0:
                self.failures_left -= 1
                return False
            self.deliveries.append(delivery)
        return True

    def ids(self) -> list[str]:
        with self._lock:
            return [d.message.id for d in self.deliveries]

    def bodies(self) -> list[str]:
        with self._lock:
            return [d.message.body for d in self.deliveries]


class Listener:
    """A ``pi-post listen`` process of the scenario: keeping a transcript, running
    ``exec_command`` per message, or (with ``stream``) printing on standard output,
    which goes to a file. ``unprivileged`` runs it as a user mode bits bind
    (tests/helpers.py); ``session`` names the listener whose session this one
    listens for too."""

    def __init__(
        self,
        reception: Reception,
        name: str,
        inbound: str | None = None,
        *,
        exec_command: str | None = None,
        session: Listener | None = None,
        also: bool = False,
        stream: bool = False,
        unprivileged: bool = False,
    ) -> None:
        self.reception = reception
        self.name = name
        self.session_id: str = session.session_id if session else f"listener-{name}"
        self.address = address_of(self.session_id)
        self.transcript = reception.scratch / f"{name}.jsonl"
        self.stdout_path = reception.scratch / f"{name}.stdout"
        self.stderr_path = reception.scratch / f"{name}.stderr"
        self.inbound = inbound
        self.exec_command = exec_command
        self.also = also
        self.stream = stream
        self.unprivileged = unprivileged
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, context: Context, *, wait: bool = True) -> None:
        """Start the process; with ``wait``, until its record names it."""
        env = self.reception.cli_env()
        if self.inbound is not None:
            env["PI_POST_INBOUND"] = self.inbound
        folder = self.reception.scratch / self.name
        folder.mkdir(exist_ok=True)
        cli = unprivileged(self.reception.cli) if self.unprivileged else self.reception.cli
        options = ["--also"] if self.also else []
        if self.exec_command is not None:
            options += ["--exec", self.exec_command]
        elif not self.stream:
            options += ["--transcript", str(self.transcript)]
        with open(self.stdout_path, "ab") as stdout, open(self.stderr_path, "ab") as stderr:
            process = subprocess.Popen(
                [
                    *cli,
                    *("listen", "--session-id", self.session_id, "--name", self.name),
                    *("--cwd", str(folder), *options),
                ],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=stdout if self.stream else subprocess.DEVNULL,
                stderr=stderr,
            )
        context.add_cleanup(_kill, process)
        self.process = process
        if wait:
            until(lambda: self.registered_pid() == process.pid, f"{self.name} registers")

    def registered_pid(self) -> int | None:
        """The pid the record names, read as any reader would read the file."""
        path = Path(registry.record_path(self.reception.root, self.address))
        try:
            record = session.parse(path.read_bytes())
        except FileNotFoundError:
            return None
        return record.pid if isinstance(record, session.Record) else None

    def running(self) -> subprocess.Popen[bytes]:
        assert self.process is not None, "the listener was not started"
        return self.process

    def entries(self) -> list[dict[str, object]]:
        """The transcript's (or the standard output's) whole lines; a torn last line
        is not an entry."""
        path = self.stdout_path if self.stream else self.transcript
        if not path.exists():
            return []
        lines = path.read_bytes().split(b"\n")[:-1]
        return [json.loads(line) for line in lines]

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


def _kill(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
    process.wait(timeout=WAIT_S)


class Reception:
    """What the receiving steps of one scenario share."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self.scratch: Path = context.scratch
        self.root = self.scratch / "post"
        self.clock = MovableClock()
        self.post = Post(self.root, clock=self.clock, receipt_wait=0.0)
        self.session_id = "receiving-host"
        self.address = address_of(self.session_id)
        self.hosts: list[Host] = []
        self.contexts: list[Recording] = []
        self.transcript: TranscriptContext | None = None
        self.sent: list[Message] = []
        self.receipt_delivered: bool | None = None
        self.damaged_letter: str | None = None
        self.letter_on_disk_at_drop: list[bool] = []
        self.asked: list[str] = []
        self.listener: Listener | None = None
        self.second: Listener | None = None
        """Another listener for the listener's session."""
        self.cli = [sys.executable, "-m", "pipost"]
        self.cli_output = ""
        self.cli_message_id: str | None = None
        self.letter_bytes = b""
        """A letter's bytes as it was deposited, to tell that it was left untouched."""

    # -- in-process hosts -------------------------------------------------------------

    def new_host(
        self,
        context: HostContext,
        *,
        inbound: Inbound = Inbound.ACCEPT,
        ask: Callable[[Message], bool] | None = None,
        resume: Resume = Resume.WAKE,
        kernel_events: bool = True,
        poll_s: float = POLL_S,
        also: bool = False,
    ) -> Host:
        receiver = Host(
            self.post,
            self.session_id,
            str(self.scratch),
            context,
            inbound=inbound,
            ask=ask,
            resume=resume,
            kernel_events=kernel_events,
            poll_s=poll_s,
            also=also,
        )
        self.hosts.append(receiver)
        self.context.add_cleanup(receiver.stop)
        return receiver

    def recording_host(self, recording: Recording, *, start: bool = True, **options: Any) -> Host:
        self.contexts.append(recording)
        receiver = self.new_host(recording, **options)
        if start:
            receiver.start()
        return receiver

    @property
    def host(self) -> Host:
        assert self.hosts, "no receiving host in this scenario"
        return self.hosts[-1]

    @property
    def recording(self) -> Recording:
        assert self.contexts, "no recording context in this scenario"
        return self.contexts[-1]

    def open_transcript(self) -> TranscriptContext:
        if self.transcript is not None:
            self.transcript.close()
        self.transcript = TranscriptContext(self.scratch / "host.jsonl")
        self.context.add_cleanup(self.close_transcript, self.transcript)
        return self.transcript

    def close_transcript(self, transcript: TranscriptContext) -> None:
        if self.transcript is transcript:
            transcript.close()
            self.transcript = None

    def transcript_bodies(self) -> list[str]:
        path = self.scratch / "host.jsonl"
        return [json.loads(line)["body"] for line in path.read_text().splitlines()]

    def serve_in_background(self, receiver: Host) -> None:
        thread = threading.Thread(target=receiver.serve, daemon=True)
        thread.start()

        def halt() -> None:
            receiver.request_stop()
            thread.join(timeout=WAIT_S)

        self.context.add_cleanup(halt)

    # -- sending ----------------------------------------------------------------------

    def send(
        self, body: str, sender: Sender, receipt_wait: float = 0.0, reply_to: str | None = None
    ) -> Message:
        """Through Post.send, as any sender would; one millisecond per send keeps
        the ids of one scenario in the order they were sent."""
        self.clock.now += 1
        self.post.receipt_wait = receipt_wait
        caller = os_caller(str(self.scratch), {"HOME": str(self.scratch)})
        (receipt,) = self.post.send([self.address], body, sender, caller, reply_to=reply_to)
        self.receipt_delivered = receipt.delivered
        sent_at, nonce = receipt.message_id.split("-")
        sent = new_message(sender, body, int(sent_at), reply_to=reply_to, nonce=nonce)
        self.sent.append(sent)
        return sent

    def queued(self) -> list[str]:
        return mailbox.letter_names(self.root, self.address)

    # -- the command line -------------------------------------------------------------

    def cli_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PI_")}
        env.update(PI_POST_DIR=str(self.root), HOME=str(self.scratch))
        return env

    def run_cli(self, *args: str) -> str:
        done = subprocess.run(
            [*self.cli, *args],
            cwd=self.scratch,
            env=self.cli_env(),
            capture_output=True,
            text=True,
            timeout=WAIT_S * 3,
            check=False,
        )
        assert done.returncode == 0, f"pi-post {' '.join(args)} failed: {done.stderr}"
        self.cli_output = done.stdout
        return done.stdout

    def only_listener(self) -> Listener:
        assert self.listener is not None, "no listener in this scenario"
        return self.listener

    def running_listeners(self) -> list[Listener]:
        started = [self.only_listener()] + ([self.second] if self.second else [])
        return [listener for listener in started if listener.running().poll() is None]

    # -- the drop log ----------------------------------------------------------------

    def drops(self) -> list[droplog.Drop]:
        return list(droplog.read(self.root))


def reception(context: Context) -> Reception:
    if "reception" not in context:
        context.reception = Reception(context)
    found = context.reception
    assert isinstance(found, Reception)
    return found


def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting until {what}"
        time.sleep(0.02)


def times(text: str) -> int:
    """``once``, ``twice``, ``3 times``."""
    return {"once": 1, "twice": 2}.get(text) or int(text.removesuffix(" times"))


def process(name: str = "script") -> Sender:
    return Sender("process", name)


# -- in-process hosts: Given --------------------------------------------------------


@given("a receiving host that records what enters its context")
def recording_host(context: Context) -> None:
    reception(context).recording_host(Recording())


@given("a receiving host whose context fails its first {count:d} entries")
def failing_host(context: Context, count: int) -> None:
    reception(context).recording_host(Recording(failures=count))


@given("a receiving host whose context raises on every entry")
def raising_host(context: Context) -> None:
    reception(context).recording_host(Recording(raises=True))


@when("the context is repaired")
def context_repaired(context: Context) -> None:
    reception(context).recording.raises = False


@given("a receiving host whose context keeps no ledger")
def ledgerless_host(context: Context) -> None:
    reception(context).recording_host(Recording(ledger=False))


@given("a receiving host keeping a transcript")
def transcript_host(context: Context) -> None:
    rx = reception(context)
    rx.new_host(rx.open_transcript()).start()


@given('a receiving host with PI_POST_INBOUND set to "{mode}" and {asking}')
def inbound_host(context: Context, mode: str, asking: str) -> None:
    rx = reception(context)
    answers = {"no one to ask": None, "a person who declines": False, "a person who agrees": True}
    answer = answers[asking]

    def ask(message: Message) -> bool:
        rx.asked.append(message.id)
        return bool(answer)

    rx.recording_host(Recording(), inbound=inbound_mode(mode), ask=None if answer is None else ask)


@given('a receiving host with PI_POST_RESUME set to "{mode}", not yet started')
def resume_host(context: Context, mode: str) -> None:
    reception(context).recording_host(Recording(), start=False, resume=resume_mode(mode))


@given("two receiving hosts on one address")
def two_hosts(context: Context) -> None:
    rx = reception(context)
    for _ in range(2):
        rx.recording_host(Recording(ledger=False), also=True)


@given(
    "a receiving host without kernel events, polling every {seconds:g} s, serving in the background"
)
def polling_host(context: Context, seconds: float) -> None:
    rx = reception(context)
    receiver = rx.recording_host(Recording(), kernel_events=False, poll_s=seconds)
    rx.serve_in_background(receiver)


@given("the registry folder of the post office is a file, so no record can be written")
def unwritable_registry(context: Context) -> None:
    # Tests may run as root, where permissions stop nothing; a file where the
    # folder belongs makes every record write fail.
    rx = reception(context)
    rx.root.mkdir(mode=0o700)
    (rx.root / "registry").write_text("not a folder")


@given("the receiving host's mailbox holds a damaged letter older than any other")
def damaged_letter(context: Context) -> None:
    rx = reception(context)
    name = f"{rx.clock.now - 60_000:013d}-0badc0de.json"
    (Path(mailbox.inbox_of(rx.root, rx.address)) / name).write_bytes(b'{"v": 1, "id": "torn')
    rx.damaged_letter = name


@given('a process sent "{body}" to the receiving host')
@when('a process sends "{body}" to the receiving host')
def process_sends(context: Context, body: str) -> None:
    reception(context).send(body, process())


@when('a process sends "{body}" to the receiving host and waits {seconds:g} s for the receipt')
def process_sends_and_waits(context: Context, body: str, seconds: float) -> None:
    reception(context).send(body, process(), receipt_wait=seconds)


@given("a message from a process waits in the receiving host's mailbox")
def message_waits(context: Context) -> None:
    rx = reception(context)
    message = new_message(process("early-bird"), "waiting since yesterday", rx.clock.now - 1)
    deposit(rx.root, rx.address, message)
    rx.sent.append(message)


@when('the process "{name}" sends "{body}" to the receiving host')
def named_process_sends(context: Context, name: str, body: str) -> None:
    reception(context).send(body, process(name))


@when('the session "{name}" in "{cwd}" sends "{body}" to the receiving host')
def session_sends(context: Context, name: str, cwd: str, body: str) -> None:
    address = address_of(f"{name}-session")
    reception(context).send(body, Sender("session", name, address, cwd), reply_to=address)


@when("a process sends this to the receiving host")
def process_sends_text(context: Context) -> None:
    assert context.text is not None, "the step needs the text to send"
    reception(context).send(context.text, process("forger"))


# -- in-process hosts: When ---------------------------------------------------------


@when("the host starts")
def host_starts(context: Context) -> None:
    reception(context).host.start()


@when("the host takes its mail")
def host_drains(context: Context) -> None:
    reception(context).host.drain()


@when("the host keeps taking its mail until its context takes the letter")
def host_retries(context: Context) -> None:
    rx = reception(context)
    deadline = time.monotonic() + WAIT_S
    while not rx.recording.ids() and time.monotonic() < deadline:
        rx.host.drain()
        time.sleep(0.05)


@when("the receivers' clock moves on {seconds:d} seconds")
def clock_moves(context: Context, seconds: int) -> None:
    reception(context).clock.now += seconds * 1000


@when(
    'the process "{name}" sends {count:d} different messages to the receiving host, '
    "{gap:d} seconds apart, the host taking each"
)
def burst(context: Context, name: str, count: int, gap: int) -> None:
    rx = reception(context)
    for n in range(count):
        rx.send(f"update {n + 1}", process(name))
        rx.host.drain()
        rx.clock.now += gap * 1000


@when("{count:d} letters from different processes arrive while both hosts take their mail")
def letters_race(context: Context, count: int) -> None:
    rx = reception(context)

    def feed() -> None:
        for n in range(count):
            # A sender each: the loop guard lets every letter through.
            message = new_message(process(f"sender-{n}"), f"letter {n}", rx.clock.now + n)
            while True:
                try:
                    deposit(rx.root, rx.address, message, durable=False)
                    break
                except mailbox.MailboxFull:
                    time.sleep(0.002)
            rx.sent.append(message)

    def entered() -> int:
        return sum(len(recording.ids()) for recording in rx.contexts)

    def take(receiver: Host) -> None:
        deadline = time.monotonic() + WAIT_S * 2
        while entered() < count and time.monotonic() < deadline:
            if entered_count(receiver.drain()) == 0:
                time.sleep(0.001)

    threads = [threading.Thread(target=feed)]
    threads += [threading.Thread(target=take, args=(receiver,)) for receiver in rx.hosts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=WAIT_S * 3)
    assert not any(thread.is_alive() for thread in threads), "the race did not end"


@when("the host takes its mail, the disk looked at before each unlink")
def host_drains_looking(context: Context) -> None:
    """A drain a letter at a time, as drain() takes them: Host.take, then the unlink
    (the receipt). In between, a drop's letter must be on disk and already logged."""
    rx = reception(context)
    for claim in mailbox.claims(rx.root, rx.address):
        outcome = rx.host.take(claim)
        if outcome.action is Action.DROP:
            logged = claim.name in [drop.letter for drop in rx.drops()]
            rx.letter_on_disk_at_drop.append(logged and Path(claim.path).exists())
        if outcome.action in RECEIPTED:
            claim.dispose()


@when("the host dies after entering the message but before unlinking it")
def host_dies(context: Context) -> None:
    """It takes the letter (Host.take: the text enters), then dies before the unlink
    drain() would do next; the kernel drops a dead process's locks — its claim and
    its place among the listeners — so we do too."""
    rx = reception(context)
    claim = next(mailbox.claims(rx.root, rx.address), None)
    assert claim is not None, "no letter to take, so the host could not die taking one"
    outcome = rx.host.take(claim)
    assert outcome.action is Action.ENTER, outcome
    claim.release()
    if rx.host._listening is not None:
        rx.host._listening.close()


@when("a new host starts on the same context")
def new_host_same_context(context: Context) -> None:
    rx = reception(context)
    rx.new_host(rx.recording).start()


@when("a new host starts on the same transcript")
def new_host_same_transcript(context: Context) -> None:
    rx = reception(context)
    rx.new_host(rx.open_transcript()).start()


# -- in-process hosts: Then ---------------------------------------------------------


@then('the context holds "{body}" {count}')
def context_holds(context: Context, body: str, count: str) -> None:
    bodies = reception(context).recording.bodies()
    assert bodies.count(body) == times(count), f"the context holds {bodies}"


@then('the context comes to hold "{body}" once')
def context_comes_to_hold(context: Context, body: str) -> None:
    rx = reception(context)
    until(lambda: body in rx.recording.bodies(), f"{body!r} enters the context")
    assert rx.recording.bodies() == [body]


@then("the context holds no message")
def context_empty(context: Context) -> None:
    bodies = reception(context).recording.bodies()
    assert bodies == [], f"the context holds {bodies}"


@then("the context holds the first {count:d} of them, in order")
def context_holds_first(context: Context, count: int) -> None:
    rx = reception(context)
    assert rx.recording.ids() == [m.id for m in rx.sent[:count]]


@then('the transcript holds "{body}" {count}')
def transcript_holds(context: Context, body: str, count: str) -> None:
    bodies = reception(context).transcript_bodies()
    assert bodies.count(body) == times(count), f"the transcript holds {bodies}"


@then("the letter is still in the receiving host's mailbox")
def letter_still_queued(context: Context) -> None:
    rx = reception(context)
    assert rx.queued() == [rx.sent[-1].file_name], f"the mailbox holds {rx.queued()}"


@then("the receiving host's mailbox is empty")
def mailbox_empty(context: Context) -> None:
    queued = reception(context).queued()
    assert queued == [], f"the mailbox holds {queued}"


@then("the damaged letter is in quarantine with its reason")
def damaged_in_quarantine(context: Context) -> None:
    rx = reception(context)
    assert rx.damaged_letter is not None
    aside = Path(quarantine.quarantine_of(rx.root, rx.address))
    assert (aside / rx.damaged_letter).read_bytes() == b'{"v": 1, "id": "torn'
    assert (aside / (rx.damaged_letter + ".reason")).read_text().strip()


@then('the drop log records the damaged letter as "{reason}"')
def damaged_in_drop_log(context: Context, reason: str) -> None:
    rx = reception(context)
    logged = [(d.letter, d.reason.split(":")[0]) for d in rx.drops()]
    assert logged == [(rx.damaged_letter, reason)], f"the drop log holds {logged}"


@then('the drop log records the last message sent, and only it, as "{reason}"')
def last_in_drop_log(context: Context, reason: str) -> None:
    rx = reception(context)
    logged = [(d.letter, d.reason.split(":")[0]) for d in rx.drops()]
    assert logged == [(rx.sent[-1].file_name, reason)], f"the drop log holds {logged}"


@then('the drop log records the message as "{reason}", naming its sender')
def message_in_drop_log(context: Context, reason: str) -> None:
    rx = reception(context)
    logged = [(d.letter, d.sender, d.reason.split(":")[0]) for d in rx.drops()]
    message = rx.sent[-1]
    assert logged == [(message.file_name, message.sender.key, reason)], f"logged: {logged}"


@then('the drop log does not contain "{text}"')
def drop_log_lacks(context: Context, text: str) -> None:
    log = Path(droplog.log_path(reception(context).root))
    assert log.exists(), "nothing was logged"
    assert text.encode() not in log.read_bytes()


@then("every drop was logged while its letter was still on disk")
def logged_before_unlink(context: Context) -> None:
    seen = reception(context).letter_on_disk_at_drop
    assert seen and all(seen), f"letter on disk at each drop: {seen}"


@then("the message entered the context")
def message_entered(context: Context) -> None:
    rx = reception(context)
    assert rx.queued() == []
    assert rx.recording.ids() == [rx.sent[-1].id]
    assert rx.drops() == []


@then("the message was dropped, with the reason logged")
def message_dropped(context: Context) -> None:
    rx = reception(context)
    assert rx.queued() == []
    assert rx.recording.ids() == []
    drops = rx.drops()
    assert [d.letter for d in drops] == [rx.sent[-1].file_name]
    assert "PI_POST_INBOUND" in drops[0].reason


@then("the person was asked {count}")
def person_asked(context: Context, count: str) -> None:
    asked = reception(context).asked
    expected = 0 if count == "nothing" else times(count)
    assert len(asked) == expected, f"asked about {asked}"


@then("the waiting message entered {how}")
def waiting_entered(context: Context, how: str) -> None:
    deliveries = reception(context).recording.deliveries
    assert deliveries and deliveries[0].message.body == "waiting since yesterday"
    wakes = {"as a steer that wakes the session": True, "staged for the first prompt": False}
    assert deliveries[0].wake is wakes[how], f"wake is {deliveries[0].wake}"


@then('the live message "{body}" entered as a steer that wakes the session')
def live_wakes(context: Context, body: str) -> None:
    deliveries = reception(context).recording.deliveries
    live = [d for d in deliveries if d.message.body == body]
    assert len(live) == 1 and live[0].wake is True


@then("every letter entered exactly one of the two contexts, exactly once")
def each_exactly_once(context: Context) -> None:
    rx = reception(context)
    first, second = (recording.ids() for recording in rx.contexts)
    assert not set(first) & set(second), "a letter entered both contexts"
    assert Counter(first + second) == Counter(m.id for m in rx.sent)
    assert len(first) == len(set(first)) and len(second) == len(set(second))


@then("the send reports queued")
def send_queued(context: Context) -> None:
    assert reception(context).receipt_delivered is False


@then("the send reports delivered")
def send_delivered(context: Context) -> None:
    assert reception(context).receipt_delivered is True


@then("the receiving host's record is live")
def host_record_live(context: Context) -> None:
    rx = reception(context)
    record = registry.read(rx.root, rx.address)
    assert record is not None
    assert session.presence(record, rx.clock(), OsProcessTable()) is Presence.LIVE


@then("the host counted failed heartbeats: {count:d}")
def failed_heartbeats(context: Context, count: int) -> None:
    assert reception(context).host.stats.failed_heartbeats == count


# -- the boundary (INV-19) ------------------------------------------------------------


def entered_lines(context: Context) -> list[str]:
    deliveries = reception(context).recording.deliveries
    assert len(deliveries) == 1, f"{len(deliveries)} deliveries"
    return deliveries[0].text.splitlines()


@then('the text that entered begins by naming "{origin}"')
def text_names_origin(context: Context, origin: str) -> None:
    rx = reception(context)
    first = entered_lines(context)[0]
    assert first.startswith(f"[pi-post] Message {rx.sent[-1].id} from {origin},"), first


@then('every line of the body in it is quoted with "{quote}"')
def body_lines_quoted(context: Context, quote: str) -> None:
    rx = reception(context)
    lines = entered_lines(context)[1:-1]
    assert lines == [quote + " " + line for line in rx.sent[-1].body.splitlines()], lines


@then("its last line ends the message with the boundary, saying")
def boundary_says(context: Context) -> None:
    rx = reception(context)
    last = entered_lines(context)[-1]
    assert last.startswith(f"[pi-post] End of message {rx.sent[-1].id}."), last
    assert context.table is not None, "the step needs a table of phrases"
    for row in context.table:
        assert row["phrase"] in last, f"the boundary lacks {row['phrase']!r}: {last}"


@then('only the first and the last line of the text that entered start with "{prefix}"')
def only_frame_lines(context: Context, prefix: str) -> None:
    lines = entered_lines(context)
    starting = [n for n, line in enumerate(lines) if line.startswith(prefix)]
    assert starting == [0, len(lines) - 1], f"lines {starting} of {lines}"


# -- listener processes ---------------------------------------------------------------


@given("a listener process keeping a transcript")
def listener_started(context: Context) -> None:
    rx = reception(context)
    rx.listener = Listener(rx, "alice")
    rx.listener.start(context)


@given('a listener process started with PI_POST_INBOUND set to "{mode}"')
def listener_with_inbound(context: Context, mode: str) -> None:
    rx = reception(context)
    rx.listener = Listener(rx, "alice", inbound=mode)
    rx.listener.start(context)


@given("a listener process whose command runs for {seconds:d} s for each message")
def listener_with_slow_command(context: Context, seconds: int) -> None:
    rx = reception(context)
    child_file = shlex.quote(str(rx.scratch / "command-child"))
    command = f"sleep {seconds} & echo $! > {child_file}; wait"
    rx.listener = Listener(rx, "alice", exec_command=command)
    rx.listener.start(context)


@when('I run pi-post send to the listener with the body "{body}"')
def cli_send(context: Context, body: str) -> None:
    rx = reception(context)
    listener = rx.only_listener()
    output = rx.run_cli("send", "--to", listener.address, "--body", body, "--from", "cli-user")
    found = re.fullmatch(
        rf"(delivered|queued) {listener.address} ({LETTER_NAME.pattern})\n", output
    )
    assert found, f"pi-post send printed {output!r}"
    rx.cli_message_id = found.group(2)


@then('pi-post prints "{word}" with the listener\'s address and the message id')
def cli_printed(context: Context, word: str) -> None:
    rx = reception(context)
    listener = rx.only_listener()
    assert rx.cli_output == f"{word} {listener.address} {rx.cli_message_id}\n", rx.cli_output


@when("{count:d} messages from different processes are sent to the listener")
def messages_to_listener(context: Context, count: int) -> None:
    rx = reception(context)
    listener = rx.only_listener()
    for n in range(count):
        sent = len(rx.sent)
        message = new_message(process(f"sender-{sent}"), f"message {sent}", wall_clock_ms() + n)
        deposit(rx.root, listener.address, message)
        rx.sent.append(message)


@when("the listener's transcript holds all of them")
@then("the listener's transcript holds all of them")
def listener_caught_up(context: Context) -> None:
    rx = reception(context)
    listener = rx.only_listener()
    until(lambda: len(listener.entries()) >= len(rx.sent), "the listener takes every message")


@when("the listener process is stopped with SIGTERM")
def listener_terminated(context: Context) -> None:
    process = reception(context).only_listener().running()
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=WAIT_S)


@when("the listener process is killed with SIGKILL")
def listener_killed(context: Context) -> None:
    process = reception(context).only_listener().running()
    process.kill()
    process.wait(timeout=WAIT_S)  # reaped: its pid no longer exists


@then("the listener process exited with status {status:d}")
def listener_exit_status(context: Context, status: int) -> None:
    assert reception(context).only_listener().running().returncode == status


@then("the listener's record is kept, offline")
def listener_offline(context: Context) -> None:
    rx = reception(context)
    record = registry.read(rx.root, rx.only_listener().address)
    assert record is not None, "the record was removed"
    assert record.pid is None
    assert session.presence(record, wall_clock_ms(), OsProcessTable()) is Presence.OFFLINE


@when("the listener's command is running")
def listener_command_running(context: Context) -> None:
    child_file = reception(context).scratch / "command-child"
    until(lambda: child_file.exists() and child_file.read_text().endswith("\n"), "it runs")


@then("nothing the listener's command started is still running")
def listener_command_ended(context: Context) -> None:
    child = int((reception(context).scratch / "command-child").read_text())

    def gone() -> bool:
        try:
            os.kill(child, 0)  # a zombie waiting for its reaper still answers
        except ProcessLookupError:
            return True
        return False

    until(gone, "the command's child has ended")


@then("the listener's message is still in its mailbox")
def listener_letter_queued(context: Context) -> None:
    rx = reception(context)
    queued = mailbox.letter_names(rx.root, rx.only_listener().address)
    assert queued == [f"{rx.cli_message_id}.json"], queued


@when(
    "one of those messages is already in the transcript, as if the listener died before its unlink"
)
def planted_in_transcript(context: Context) -> None:
    rx = reception(context)
    listener = rx.only_listener()
    entry = {"id": rx.sent[-1].id, "body": rx.sent[-1].body, "text": "(entered before the kill)"}
    with listener.transcript.open("a") as transcript:
        transcript.write(json.dumps(entry) + "\n")


@when("the transcript ends in a line the kill tore, for another of those messages")
def torn_transcript_line(context: Context) -> None:
    rx = reception(context)
    listener = rx.only_listener()
    line = json.dumps({"id": rx.sent[-2].id, "body": rx.sent[-2].body})
    with listener.transcript.open("a") as transcript:
        transcript.write(line[: len(line) // 2])


@when("the listener starts again with the same transcript")
def listener_restarts(context: Context) -> None:
    reception(context).only_listener().start(context)


@then("the listener's mailbox comes to be empty")
def listener_mailbox_empties(context: Context) -> None:
    rx = reception(context)
    address = rx.only_listener().address
    until(lambda: not mailbox.letter_names(rx.root, address), "the listener's mailbox empties")


@then("the listener's transcript holds each message sent exactly once")
def listener_each_once(context: Context) -> None:
    rx = reception(context)
    listener = rx.only_listener()
    ids = [str(entry["id"]) for entry in listener.entries()]
    expected = [m.id for m in rx.sent]
    if rx.cli_message_id is not None:
        expected.append(rx.cli_message_id)
    assert Counter(ids) == Counter(expected), f"transcript ids {ids}, sent {expected}"
    assert listener.transcript.read_bytes().endswith(b"\n"), "a torn line was left"


@then('the listener\'s transcript holds "{body}" {count}')
def listener_holds(context: Context, body: str, count: str) -> None:
    listener = reception(context).only_listener()
    until(lambda: any(e["body"] == body for e in listener.entries()), f"{body!r} is taken")
    bodies = [e["body"] for e in listener.entries()]
    assert bodies.count(body) == times(count), f"the transcript holds {bodies}"


@then("the listener's transcript holds nothing")
def listener_holds_nothing(context: Context) -> None:
    assert reception(context).only_listener().entries() == []


@when("I run pi-post log")
def cli_log(context: Context) -> None:
    reception(context).run_cli("log")


@then('pi-post log shows one line for the listener\'s address, saying "{reason}"')
def log_shows(context: Context, reason: str) -> None:
    rx = reception(context)
    address = rx.only_listener().address
    lines = rx.cli_output.splitlines()
    assert len(lines) == 1, lines
    assert f" {address} {rx.cli_message_id}.json from cli-user: {reason}" in lines[0], lines[0]


@then('pi-post log does not show "{text}"')
def log_lacks(context: Context, text: str) -> None:
    assert text not in reception(context).cli_output


# -- listeners that cannot write their mailbox ---------------------------------------


@given("a letter waits for a session whose mailbox folder is read-only for its listener")
def read_only_mailbox(context: Context) -> None:
    rx = reception(context)
    rx.listener = Listener(rx, "read-only", stream=True, unprivileged=True)
    message = new_message(process("script"), "enter me once", wall_clock_ms())
    deposit(rx.root, rx.listener.address, message)
    rx.sent.append(message)
    rx.scratch.chmod(0o711)  # that user must reach the post office inside
    give_to_unprivileged(rx.root)
    inbox = Path(mailbox.inbox_of(rx.root, rx.listener.address))
    rx.letter_bytes = (inbox / message.file_name).read_bytes()
    inbox.chmod(0o500)


@when("its listener starts, printing on standard output, as a user mode bits bind")
def read_only_listener_starts(context: Context) -> None:
    reception(context).only_listener().start(context)


@when("the listener has drained its mailbox more than once")
def several_drains(context: Context) -> None:
    time.sleep(POLL_S + 1)  # the start-up drain, then at least one poll


@then("the letter is still in the listener's mailbox, unchanged")
def letter_unchanged(context: Context) -> None:
    rx = reception(context)
    inbox = Path(mailbox.inbox_of(rx.root, rx.only_listener().address))
    letter = rx.sent[-1].file_name
    assert os.listdir(inbox) == [letter], os.listdir(inbox)
    assert (inbox / letter).read_bytes() == rx.letter_bytes


@then("the listener printed nothing")
def printed_nothing(context: Context) -> None:
    entries = reception(context).only_listener().entries()
    assert entries == [], f"it printed {entries}"


@then("the listener named its mailbox folder on standard error")
def named_the_folder(context: Context) -> None:
    rx = reception(context)
    listener = rx.only_listener()
    assert mailbox.inbox_of(rx.root, listener.address) in listener.stderr(), listener.stderr()


@then('the drop log records the letter as "{reason}"')
def drop_log_file_records(context: Context, reason: str) -> None:
    rx = reception(context)
    log = Path(droplog.log_path(rx.root))
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    found = [(entry["letter"], entry["reason"].split(":")[0]) for entry in logged]
    assert found == [(rx.sent[-1].file_name, reason)], f"the drop log holds {found}"


@when("the mailbox folder is made writable for the listener")
def mailbox_writable(context: Context) -> None:
    rx = reception(context)
    Path(mailbox.inbox_of(rx.root, rx.only_listener().address)).chmod(0o700)


@then("the listener's mailbox folder comes to be empty")
def mailbox_folder_empties(context: Context) -> None:
    rx = reception(context)
    inbox = Path(mailbox.inbox_of(rx.root, rx.only_listener().address))
    until(lambda: os.listdir(inbox) == [], "the letter is unlinked")


@then("the listener printed the letter once")
def printed_once(context: Context) -> None:
    rx = reception(context)
    ids = [entry["id"] for entry in rx.only_listener().entries()]
    assert ids == [rx.sent[-1].id], f"it printed {ids}"


# -- two listeners for one session ---------------------------------------------------


@when("a second listener for the same session starts, keeping a transcript of its own")
def second_listener(context: Context) -> None:
    rx = reception(context)
    rx.second = Listener(rx, "second", session=rx.only_listener())
    rx.second.start(context, wait=False)
    with suppress(subprocess.TimeoutExpired):  # still running: the next step says so
        rx.second.running().wait(timeout=WAIT_S)


@when("a second listener for the same session starts with --also")
def second_listener_also(context: Context) -> None:
    rx = reception(context)
    rx.second = Listener(rx, "second", session=rx.only_listener(), also=True)
    rx.second.start(context)


@then("the second listener exited with status {status:d}, naming the first one's pid")
def second_refused(context: Context, status: int) -> None:
    rx = reception(context)
    assert rx.second is not None
    assert rx.second.running().returncode == status, f"it exited {rx.second.running().poll()}"
    first = rx.only_listener().running().pid
    assert re.search(rf"\b{first}\b", rx.second.stderr()), rx.second.stderr()


@then("the listener's record names the one listener process that runs, live")
def record_names_the_running_one(context: Context) -> None:
    rx = reception(context)
    (running,) = rx.running_listeners()
    record = registry.read(rx.root, running.address)
    assert record is not None and record.pid == running.running().pid, record
    assert session.presence(record, wall_clock_ms(), OsProcessTable()) is Presence.LIVE


@when("the listener the record names is stopped with SIGTERM")
def stop_the_named_one(context: Context) -> None:
    rx = reception(context)
    (named,) = [
        listener
        for listener in rx.running_listeners()
        if listener.running().pid == listener.registered_pid()
    ]
    named.running().send_signal(signal.SIGTERM)
    assert named.running().wait(timeout=WAIT_S) == 0


@when("the listener that still runs is stopped with SIGTERM")
def stop_the_last_one(context: Context) -> None:
    (last,) = reception(context).running_listeners()
    last.running().send_signal(signal.SIGTERM)
    assert last.running().wait(timeout=WAIT_S) == 0
