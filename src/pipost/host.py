"""The receiving session: where "delivered" is decided.

Theory of operation
-------------------
A host owns one address. It joins the listeners of that address (listeners.py:
a second one is refused unless asked to run beside the first), registers its
record (pid and the process's start time), then takes its mail in a loop: at
start-up, whenever the folder watch fires, and every 3 s regardless. Each letter
goes through the same steps; check to enter are decided by reception.decide from
the facts the host gathers, and carried out by Host.take:

    claim      lock the file, oldest first; another receiver's claim is skipped
    can it?    the claim still holds and the mailbox folder can be written: else
               the letter stays queued, untouched, and the session says why, once
    check      a letter that is not a message is set aside, never delivered
    ledger     a context that already holds the id gets only the missing unlink
    guard      the inbound mode (asking the person if it says so), then the loop
               guard; a drop is logged first
    enter      the framed text goes to the context: a steer that wakes the
               session, or, for mail found at start-up with PI_POST_RESUME=stage,
               staged for the first prompt
    dispose    unlink only once the context took it (or it was dropped): the
               unlink is the sender's receipt; an unlink that fails keeps the
               claim, and is tried again at every drain, never entered again

drain() returns an Outcome for every letter it took (what became of it, and why),
and stats counts them.

A context that fails leaves the letter queued and is retried with backoff, so
nothing is lost (INV-05); one that is gone for good (ContextGone: the reader of
standard output went away) leaves it queued too, and ends the session (start()
and serve() raise it), so that no record says live while nothing can enter; so
does a process out of file descriptors (OUT_OF_DESCRIPTORS, raised as OSError).
With a context that can say which ids it holds (a transcript can), a crash
between entry and unlink costs nothing: delivery is exactly once. With one that
cannot, that crash window is the only way a message enters twice (INV-06).
Heartbeats every 30 s keep the record live, also while a command handles a
letter (keep_alive); failing to write it does not stop the session, and is said
once (INV-23).
Shutdown keeps the record (INV-14): offline, or handed to another listener of
the address that still runs; a command still handling a letter when the stop
comes is ended, and the letter stays queued for the next start.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import signal
import stat
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from pipost import droplog, files, format, listeners, mailbox, registry
from pipost.address import address_of
from pipost.files import StrPath
from pipost.message import LETTER_READ_LIMIT, Message, Rejected, to_json
from pipost.policy import DELIVER, Inbound, LoopGuard, Resume
from pipost.post import Post
from pipost.reception import (
    ENTERS,
    RECEIPTED,
    SETTLED,
    Action,
    Decision,
    Facts,
    Outcome,
    decide,
)
from pipost.session import HEARTBEAT_MS, Record
from pipost.watch import FolderWatch

POLL_S = 3.0
HEARTBEAT_S = HEARTBEAT_MS / 1000
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 60.0
EXEC_TIMEOUT_S = 600.0
"""How long an --exec command may run before it is ended and counted as a failure."""
EXEC_KILL_GRACE_S = 1.0
"""Between SIGTERM and SIGKILL for the process group of a command being ended."""
_EXEC_WAIT_SLICE_S = 0.1
"""How often a running command is checked on: for a stop asked from another thread."""

_MAILBOX_ATTEMPTS = 1000  # a sweep may remove the empty folder between make and lock
OUT_OF_DESCRIPTORS = frozenset((errno.EMFILE, errno.ENFILE))
"""Errors no letter caused and no retry clears while the session runs: the process
(or the system) has no file descriptor left. They end the session (start() and
serve() raise them): a session that stayed would look live and take nothing."""

# Troubles the session says once, and again only after they cleared and came back.
_MAILBOX = "the mailbox cannot be written"
_RECORD = "the record cannot be written"
_LISTENERS = "the listener cannot be noted"
_CONTEXT = "the context cannot take mail"
_SETTLE = "a letter cannot be logged or set aside"
_WATCH = "the folder cannot be watched"


@dataclass(frozen=True)
class Delivery:
    message: Message
    text: str
    """The framed text the model reads (format.frame)."""
    wake: bool
    """True: a steer that also wakes an idle session. False: staged for the first prompt."""


class EntryFailed(Exception):
    """A context could not take a message; the text says why (an exit status, a
    timeout), for the session to report. The letter stays queued."""

    def __init__(self, reason: str, *, lasting: bool = False) -> None:
        super().__init__(reason)
        self.lasting = lasting
        """A trouble of the context itself (its disk is full), not of this message:
        every entry fails alike until it is fixed, so the session says it once."""


class ContextGone(Exception):
    """A context that can never take text again (the reader of standard output went
    away): the letter stays queued and the session ends, so that its record stops
    saying it receives. The text says what is gone."""


class Context(Protocol):
    """Where delivered text goes: the model's context, a transcript, a command."""

    def holds(self, message_id: str) -> bool | None:
        """Whether the context already holds this message; None if it cannot tell."""

    def enter(self, delivery: Delivery) -> bool:
        """True once the text is in the context; False (or EntryFailed, saying why)
        leaves the letter queued."""

    # A context that can be busy for long (a command) also has interrupt(): called
    # by Host.request_stop, from a signal handler too, it must not block. While
    # busy it calls the host's keep_alive() (ExecContext: its ``meanwhile``).


def _quiet(line: str) -> None:
    """A host with no one to tell (tests, the driver)."""


@dataclass(frozen=True)
class Stats:
    entered: int = 0
    dropped: int = 0
    set_aside: int = 0
    already_held: int = 0
    failed_entries: int = 0
    failed_heartbeats: int = 0


@dataclass
class _Retry:
    at: float
    delay: float


@dataclass
class Host:
    post: Post
    session_id: str
    cwd: str
    context: Context
    name: str | None = None
    inbound: Inbound = Inbound.ACCEPT
    resume: Resume = Resume.WAKE
    ask: Callable[[Message], bool] | None = None
    """Asks the person (PI_POST_INBOUND=ask); None where there is no UI."""
    say: Callable[[str], None] = _quiet
    """Tells the person running the session what went wrong and how to fix it, one
    line at a time (pi-post listen: standard error)."""
    also: bool = False
    """Run beside the other listeners of this address (pi-post listen --also): each
    message still enters one of them, once (INV-06). False: start() raises
    listeners.AlreadyListening while another one runs."""
    kernel_events: bool = True
    unlink: Callable[[mailbox.Claim], bool] = mailbox.Claim.dispose_or_hold
    """The receipt on disk: unlink a claimed letter, or keep the claim and say False
    when the disk would not (the conformance driver's failing disk stands here)."""
    poll_s: float = POLL_S
    heartbeat_s: float = HEARTBEAT_S
    monotonic: Callable[[], float] = time.monotonic
    """Seconds on a clock that never steps, for the serving loop, the retry delays
    and the loop guard's windows (SPEC 6.1), never the wall clock: stepped back an
    hour, it would drop every repeat for that hour. The conformance driver hands in
    its world's monotonic clock."""
    record: Record | None = None
    _guard: LoopGuard = field(default_factory=LoopGuard)
    _retries: dict[str, _Retry] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _watch: FolderWatch | None = None
    _listening: listeners.Listening | None = None
    _unreceipted: dict[str, mailbox.Claim] = field(default_factory=dict)
    """Letters that entered the context, or were dropped, and whose unlink failed, by
    name: their claims are kept, so no receiver takes them again, and the unlink
    is tried again at every drain (never the entry)."""
    _told: set[str] = field(default_factory=set)
    _tally: Counter[Action] = field(default_factory=Counter)
    """Every outcome of take(), counted by action: what stats shows."""
    _failed_heartbeats: int = 0
    _next_beat: float = 0.0
    """When the next heartbeat is due, on ``monotonic``."""

    def __post_init__(self) -> None:
        if isinstance(self.context, ExecContext):
            self.context.meanwhile = self.keep_alive

    @property
    def address(self) -> str:
        return address_of(self.session_id)

    @property
    def root(self) -> StrPath:
        return self.post.root

    # -- lifecycle ----------------------------------------------------------------

    def start(self) -> None:
        """Join the listeners of the address (refused while another runs, unless
        ``also``); then, under the mailbox's lock (the folder made if missing),
        register and watch it; then take the mail that waited. A sweep decides under
        that lock too and keeps what a running listener needs (SPEC 5): one that
        locks the mailbox after this joined sees it, and one that locked it before
        removes at most the empty folder, which is made again here."""
        self._join()
        held = self._locked_mailbox()
        try:
            self._register()
            self._next_beat = self.monotonic() + self.heartbeat_s
            folder = mailbox.inbox_of(self.root, self.address)
            self._watch = FolderWatch(folder, kernel_events=self.kernel_events)
        finally:
            held.close()  # closing releases the lock
        if self._watch.refused is not None:
            self._tell(_WATCH, self._unwatched(self._watch.refused))
        self.drain(at_startup=True)

    def _locked_mailbox(self) -> files.Folder:
        """The mailbox folder, made if missing, its lock held; made again if a sweep
        removed it while this waited for the lock."""
        for _ in range(_MAILBOX_ATTEMPTS):
            folder = files.make(self.root, "inbox", self.address)
            try:
                folder.lock().__enter__()
            except files.Vanished:
                folder.close()
                continue
            return folder
        where = mailbox.inbox_of(self.root, self.address)
        raise OSError(errno.EAGAIN, "the mailbox folder kept vanishing", where)

    def serve(self) -> None:
        """Take mail until request_stop(); heartbeats on the way."""
        watch = self._watch
        if watch is None:
            raise RuntimeError("start() the host before serving")
        while not self._stop.is_set():
            now = self.monotonic()
            wake_at = min(
                [now + self.poll_s, self._next_beat] + [r.at for r in self._retries.values()]
            )
            watch.wait(wake_at - now)
            if watch.lost is not None:
                self._tell(_WATCH, self._unwatched(watch.lost))
            if self._stop.is_set():
                break
            self.drain()
            self.keep_alive()

    def keep_alive(self) -> None:
        """Beat if a heartbeat is due: after each round of serve(), and between the
        waits of a context that is busy for long (a command may run for minutes),
        so that the record stays live while the session works (SPEC 2). Called on
        the serving thread only, so the record is never written by two at once."""
        if self.monotonic() >= self._next_beat:
            self.beat()
            self._next_beat = self.monotonic() + self.heartbeat_s

    def _unwatched(self, why: str) -> str:
        """What the session says of a watch refused or lost (once)."""
        folder = format.visible(mailbox.inbox_of(self.root, self.address))
        return f"cannot watch {folder} for new mail: {why}; polling every {self.poll_s:g} s"

    def request_stop(self) -> None:
        """Safe from a signal handler or another thread; an entry in progress is
        interrupted, and its letter stays queued."""
        self._stop.set()
        if self._watch is not None:
            self._watch.wake()
        interrupt = getattr(self.context, "interrupt", None)
        if interrupt is not None:
            interrupt()

    def stop(self) -> None:
        """Shutdown, said in one line: the record stays (INV-14), without its pid, or
        handed to another listener of this address that still runs. A record
        another receiver wrote since is theirs: it stays as it is."""
        listened = self._watch is not None
        for claim in self._unreceipted.values():
            if not self.unlink(claim):  # a last try: once released, anyone may take it
                claim.release()  # queued again; a ledger turns it into an unlink next time
        self._unreceipted.clear()
        if self._listening is not None:
            self._listening.leave()
            self._listening = None
        outcome = self._leave_record()
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        if listened:
            self.say(f"stopped; {outcome}")

    def _leave_record(self) -> str:
        """Mark the record offline, or hand it to a listener that still runs; how the
        address was left."""
        current = registry.read(self.root, self.address)
        ours = self.record is not None and (
            current is None
            or (current.pid, current.pid_start) == (self.record.pid, self.record.pid_start)
        )
        if self.record is None or not ours:
            if current is not None and current.pid is not None:
                return f"{self.address} stays with pid {current.pid}"
            return f"{self.address} is offline"
        now = self.post.clock()
        try:
            for pid in self._peers():
                token = self.post.processes.start_token(pid)
                if token is not None:
                    handed = self.record.replace(pid=pid, pid_start=token or None, last_seen=now)
                    registry.write(self.root, handed)
                    self.record = handed
                    return f"{self.address} handed to pid {pid}"
            self.record = registry.mark_offline(self.root, self.record, now)
        except OSError as error:
            return f"{self.address} could not be marked offline ({error.strerror or error})"
        return f"{self.address} is offline"

    def _peers(self) -> list[int]:
        """The other listeners of this address that still run (this one has left)."""
        try:
            return listeners.running(self.root, self.address)
        except OSError:
            return []

    def beat(self) -> None:
        """Refresh the record; one that could not be written at start is written now."""
        if self.record is None:
            self._register()
            return
        try:
            self.record = registry.heartbeat(self.root, self.record, self.post.clock())
        except OSError as error:
            self._record_failed(error)
            return
        self._told.discard(_RECORD)

    def _register(self) -> None:
        pid = os.getpid()
        token = self.post.processes.start_token(pid)
        try:
            self.record = registry.register(
                self.root,
                self.session_id,
                self.cwd,
                self.post.clock(),
                name=self.name,
                pid=pid,
                pid_start=token or None,
            )
        except OSError as error:
            self._record_failed(error)  # unregistered, but mail still flows
            return
        self._told.discard(_RECORD)

    def _record_failed(self, error: OSError) -> None:
        self._failed_heartbeats += 1
        self._tell(
            _RECORD,
            f"cannot write the record {registry.record_path(self.root, self.address)}: "
            f"{error.strerror or error}; pi-post list will not show {self.address} live "
            f"while this lasts (its mail still flows; it tries again every {HEARTBEAT_S:g} s)",
        )

    def _join(self) -> None:
        try:
            self._listening = listeners.join(self.root, self.address, beside_others=self.also)
        except OSError as error:
            self._tell(
                _LISTENERS,
                f"cannot note this listener in {listeners.folder_of(self.root, self.address)}: "
                f"{error.strerror or error}; a second listener of {self.address} will not be "
                "refused, and its record may say offline while one still runs",
            )

    def _tell(self, trouble: str, line: str) -> None:
        """Say ``line``, unless ``trouble`` was said already and has not cleared since."""
        if trouble not in self._told:
            self._told.add(trouble)
            self.say(line)

    # -- taking mail --------------------------------------------------------------

    @property
    def stats(self) -> Stats:
        """What became of the letters taken so far, counted from their outcomes; and
        how many writes of the record failed."""
        tally = self._tally
        return Stats(
            entered=tally[Action.ENTER] + tally[Action.STAGE],
            dropped=tally[Action.DROP],
            set_aside=tally[Action.SET_ASIDE],
            already_held=tally[Action.ACKNOWLEDGE],
            failed_entries=tally[Action.FAILED],
            failed_heartbeats=self._failed_heartbeats,
        )

    def drain(self, *, at_startup: bool = False) -> list[Outcome]:
        """Take every letter that can be taken now, oldest first; returns what became
        of each one taken (a letter that waits for its next try is left alone)."""
        for name, held in list(self._unreceipted.items()):
            if self.unlink(held):
                del self._unreceipted[name]
        outcomes: list[Outcome] = []
        for claim in mailbox.claims(self.root, self.address):
            if self._stop.is_set():  # a stop ends the drain: what is left stays queued
                claim.release()
                break
            retry = self._retries.get(claim.name)
            if retry is not None and retry.at > self.monotonic():
                claim.release()
                continue
            outcome = self.take(claim, at_startup=at_startup)
            outcomes.append(outcome)
            if outcome.action in RECEIPTED:
                self._receipt(claim)
            elif outcome.action is Action.KEPT:
                break  # no letter after it could be unlinked either
        return outcomes

    def take(self, claim: mailbox.Claim, *, at_startup: bool = False) -> Outcome:
        """Decide what becomes of one claimed letter (reception.decide) and carry it
        out, all but the receipt. After an action in reception.RECEIPTED the claim is
        still held, the letter at its name, for the unlink that drain() does next
        (the seam where a receiver can die between entry and unlink); after any
        other the claim has ended."""
        outcome = self._take(claim, at_startup)
        self._tally[outcome.action] += 1
        if outcome.action in SETTLED:
            self._retries.pop(claim.name, None)
        return outcome

    def _take(self, claim: mailbox.Claim, at_startup: bool) -> Outcome:
        content = claim.content
        message = content if isinstance(content, Message) else None
        message_id = message.id if message is not None else None
        if not claim.still_held():
            claim.release()  # a receiver that takes no lock (pi-post 0.7) had it
            return Outcome(claim.name, Action.LEFT, "taken by another receiver", message_id)
        obstacle = claim.why_undisposable()
        if obstacle is not None:
            where = f"inbox/{self.address} is {obstacle}"
            self._cannot_take(claim, where)  # logged below the root the claim holds
            claim.release()
            return Outcome(claim.name, Action.KEPT, where, message_id)
        self._told.discard(_MAILBOX)
        # The guard's windows, on the clock a step of the wall clock does not move.
        now = round(self.monotonic() * 1000)
        try:
            decision = self._decide(content, at_startup, now)
            action, reason = decision.action, decision.reason
            if action is Action.SET_ASIDE:
                assert isinstance(content, Rejected) and reason is not None  # it says why
                reason = set_aside(self.post, claim, reason)
                self._told.discard(_SETTLE)
                return Outcome(claim.name, action, reason, rejected=content)
            elif action is Action.DROP:
                assert message is not None and reason is not None  # decide() says why
                self._log(claim, message.sender.key, reason)
                self._told.discard(_SETTLE)
            elif action in ENTERS:
                assert message is not None  # only a message enters
                return self._enter(claim, message, ENTERS[action], now)
        except OSError as error:
            if error.errno in OUT_OF_DESCRIPTORS:
                claim.release()
                raise
            delay = self._retry_later(claim)
            what = os.fsdecode(error.filename) if error.filename else "the post office"
            self._tell(
                _SETTLE,
                f"cannot log or set aside mail until this is fixed: "
                f"{files.write_trouble(what, error)}; letter {claim.name} and any like it "
                f"stay queued (next try in {delay:g} s)",
            )
            why = f"{error.strerror or error}; next try in {delay:g} s"
            return Outcome(claim.name, Action.DEFERRED, why, message_id)
        return Outcome(claim.name, action, reason, message_id)

    def _decide(self, content: Message | Rejected, at_startup: bool, now: int) -> Decision:
        """Gather the facts about one letter and decide; ask the person if the mode
        says so, and decide again with the answer."""
        held, guard = None, DELIVER
        if isinstance(content, Message):
            held = self.context.holds(content.id)
            guard = self._guard.judge(content.sender.key, content.body, now)
        facts = Facts(
            content,
            held=held,
            inbound=self.inbound,
            can_ask=self.ask is not None,
            resume=self.resume,
            at_startup=at_startup,
            guard=guard,
        )
        decision = decide(facts)
        if decision.action is Action.ASK:
            assert self.ask is not None and isinstance(content, Message)  # decide() asks only then
            decision = decide(facts.replace(answer=self.ask(content)))
        return decision

    def _enter(self, claim: mailbox.Claim, message: Message, wake: bool, now: int) -> Outcome:
        """The text goes to the context; a context that fails leaves the letter queued,
        to be tried again after a delay."""
        delivery = Delivery(message, format.frame(message), wake)
        reason, lasting = None, False
        try:
            entered = self.context.enter(delivery)
        except ContextGone as gone:
            claim.release()
            self.say(f"{gone}: the session stops; message {message.id} stays queued")
            raise
        except EntryFailed as failure:
            entered, reason, lasting = False, str(failure), failure.lasting
        except Exception as error:  # a failing context must not lose the letter
            if isinstance(error, OSError) and error.errno in OUT_OF_DESCRIPTORS:
                claim.release()
                raise
            entered = False
        if entered:
            self._told.discard(_CONTEXT)
            self._guard.admit(message.sender.key, message.body, now)
            return Outcome(claim.name, Action.ENTER if wake else Action.STAGE, None, message.id)
        if self._stop.is_set():  # cut short by the shutdown: not a failure, not retried
            claim.release()
            return Outcome(claim.name, Action.LEFT, "the session is stopping", message.id)
        delay = self._retry_later(claim)
        if lasting:
            self._tell(
                _CONTEXT,
                f"cannot enter mail until this is fixed: {reason}; message {message.id} "
                f"and the mail after it stay queued (next try in {delay:g} s)",
            )
        elif reason is not None:
            self.say(f"message {message.id} stays queued: {reason}; next try in {delay:g} s")
        return Outcome(claim.name, Action.FAILED, reason, message.id)

    def _cannot_take(self, claim: mailbox.Claim, where: str) -> None:
        """Say, and log where the log can be written, once until it clears, that the
        mail stays queued: it could not be removed once entered."""
        if _MAILBOX in self._told:
            return
        self._told.add(_MAILBOX)
        self.say(f"cannot take mail: {where}; its letters stay queued until then")
        sender = claim.content.sender.key if isinstance(claim.content, Message) else "?"
        with contextlib.suppress(OSError):
            self._log(claim, sender, f"kept: {where}; the letter stays queued")

    def _receipt(self, claim: mailbox.Claim) -> None:
        """The unlink of a letter whose fate is decided; one that fails keeps its
        claim until a later drain's unlink succeeds."""
        if not self.unlink(claim):
            self._unreceipted[claim.name] = claim

    def _retry_later(self, claim: mailbox.Claim) -> float:
        """Release the letter and schedule its next try; returns the delay."""
        claim.release()
        previous = self._retries.get(claim.name)
        delay = min(previous.delay * 2, RETRY_MAX_S) if previous else RETRY_FIRST_S
        self._retries[claim.name] = _Retry(self.monotonic() + delay, delay)
        return delay

    def _log(self, claim: mailbox.Claim, sender: str, reason: str) -> None:
        log(self.post, claim, claim.name, sender, reason)


def set_aside(post: Post, claim: mailbox.Claim, reason: str) -> str:
    """Set aside a claimed letter that is not a message, as every receiver of pipost
    does (INV-10): the drop log says so first, then the letter moves to the
    quarantine with ``reason`` beside it, and each letter the full quarantine let
    go for it is logged too. Ends the claim; returns the reason logged."""
    logged = f"malformed: {reason}"
    try:
        log(post, claim, claim.name, "?", logged)
        moved = claim.set_aside(reason)
        for name in moved.evicted:
            log(post, claim, name, "?", "removed from the full quarantine (oldest first)")
    finally:
        claim.release()
    return logged


def log(post: Post, claim: mailbox.Claim, letter: str, sender: str, reason: str) -> None:
    """One line of the drop log, at the post office's time, below the root the claim
    was taken under: a drain that drops N letters opens the root once, not 1 + N."""
    drop = droplog.Drop(
        at=post.clock(), address=claim.address, letter=letter, sender=sender, reason=reason
    )
    droplog.record(claim.root, drop)


# -- contexts -------------------------------------------------------------------------


def delivery_json(delivery: Delivery) -> dict[str, Any]:
    message = to_json(delivery.message)
    return {
        "id": message["id"],
        "from": message["from"],
        "replyTo": message.get("replyTo"),
        "sentAt": message["sentAt"],
        "body": message["body"],
        "text": delivery.text,
        "wake": delivery.wake,
    }


ENTRY_START = b'{"id": '
"""How every line pipost writes to a transcript begins (delivery_json's first key)."""
LINE_LIMIT = 4 * LETTER_READ_LIMIT
"""Bytes of a transcript line read to find its id: more than any line pipost writes
(the worst a body's escapes make of a message, in its body and framed text, is
about 1.4 times the letter's bound). A longer line is not an entry, and is passed
over without being held."""
_READ_CHUNK = 1 << 16


class TranscriptContext:
    """A JSON-lines transcript that is also the ledger: a line is written whole and
    flushed to disk before the letter is unlinked, so a restart after any crash
    knows which ids already entered. One listener per transcript (an exclusive
    lock says so)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._cut_back_to: int | None = None
        """Where a line the disk did not take whole still has to be cut off, when
        cutting it at once failed too: nothing may be written after it."""
        self._fd = _open_transcript(path)
        try:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise OSError(f"transcript {path} is in use by another listener") from None
            self._ids = self._load()
        except BaseException:
            os.close(self._fd)
            raise

    def _load(self) -> set[str]:
        """The ids the transcript holds, read a chunk at a time (memory does not
        grow with its length); a last line pipost began and did not finish is cut."""
        ledger = _scan_ledger(_chunks(self._fd))
        if ledger.tail and _torn_by_us(ledger.tail):
            os.ftruncate(self._fd, ledger.end)  # never entered: its letter is still queued
        elif ledger.tail:  # whole, or someone else's: kept, and the next line starts anew
            entry_id = _entry_id(ledger.tail)
            if entry_id is not None:
                ledger.ids.add(entry_id)
        return ledger.ids

    def holds(self, message_id: str) -> bool | None:
        return message_id in self._ids

    def enter(self, delivery: Delivery) -> bool:
        line = json.dumps(delivery_json(delivery), ensure_ascii=False) + "\n"
        try:
            self._append(line.encode("utf-8"))
        except OSError as error:
            trouble = files.write_trouble(f"the transcript {self.path}", error)
            raise EntryFailed(trouble, lasting=True) from None
        self._ids.add(delivery.message.id)
        return True

    def _append(self, line: bytes) -> None:
        """The whole line, flushed; or, on any failure, none of it: a cut line would
        have its id counted by nobody and the next line glued onto it."""
        if self._cut_back_to is not None:
            os.ftruncate(self._fd, self._cut_back_to)
            self._cut_back_to = None
        end = os.fstat(self._fd).st_size
        if end and os.pread(self._fd, 1, end - 1) != b"\n":
            line = b"\n" + line  # after a last line kept without its newline
        try:
            files.write_all(self._fd, line)
            os.fsync(self._fd)
        except OSError:
            self._cut_back_to = end
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, end)
                self._cut_back_to = None
            raise

    def close(self) -> None:
        os.close(self._fd)


def _open_transcript(path: Path) -> int:
    """The transcript, for appending, created 0600. A symlink at its name is refused,
    not followed: in a shared folder another user could have planted it, to have
    message text appended to a file of theirs, or of root's."""
    flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, files.FILE_MODE)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.EMLINK) and path.is_symlink():
            raise files.UnsafePath(
                error.errno,
                "a symlink, which pi-post never follows for a transcript; give the path of a file",
                str(path),
            ) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise files.UnsafePath(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _chunks(fd: int) -> Iterator[bytes]:
    offset = 0
    while chunk := os.pread(fd, _READ_CHUNK, offset):
        offset += len(chunk)
        yield chunk


@dataclass
class _Ledger:
    """What a transcript holds, read line by line."""

    ids: set[str]
    """The ids of its whole lines that are entries."""
    end: int
    """Where its last whole line ends: after its last newline."""
    tail: bytes | None
    """What follows that newline (a last line without its own), or None when it is
    longer than LINE_LIMIT (and was not held)."""


def _scan_ledger(chunks: Iterator[bytes]) -> _Ledger:
    """The ids in a transcript given as chunks of bytes, holding at most one line of
    LINE_LIMIT bytes at a time: never the whole transcript."""
    ids: set[str] = set()
    line = bytearray()
    too_long = False
    end = offset = 0
    for chunk in chunks:
        start = 0
        while True:
            newline = chunk.find(b"\n", start)
            if not too_long:
                line += chunk[start:] if newline < 0 else chunk[start:newline]
                too_long = len(line) > LINE_LIMIT
                if too_long:
                    line.clear()
            if newline < 0:
                break
            entry_id = None if too_long else _entry_id(line)
            if entry_id is not None:
                ids.add(entry_id)
            line.clear()
            too_long = False
            start = newline + 1
            end = offset + start
        offset += len(chunk)
    return _Ledger(ids, end, None if too_long else bytes(line))


def _entry_id(line: bytes | bytearray) -> str | None:
    """The id of a transcript line, or None when the line is not an entry."""
    try:
        return str(json.loads(line)["id"])
    except (ValueError, KeyError, TypeError):
        return None


def _torn_by_us(tail: bytes) -> bool:
    """Whether a last line without its newline is one pipost began and did not finish
    (a crash, or a cut-back that could not be done): it begins as pipost's lines do
    and is not JSON. Only such a line is cut at start; any other may be whole (a
    line of the user's, or an entry that lost only its newline) and is kept."""
    if not ENTRY_START.startswith(tail[: len(ENTRY_START)]):
        return False
    try:
        json.loads(tail)
    except ValueError:
        return True
    return False


class ExecContext:
    """Runs a shell command per message with the framed text on stdin; exit 0 means
    the text entered context. The command learns the message from its environment.

    The command runs in a session (and process group) of its own, so that ending
    it reaches whatever it started: past ``timeout_s``, or when the session
    stops, the group gets SIGTERM, then SIGKILL after EXEC_KILL_GRACE_S."""

    def __init__(
        self, command: str, environ: dict[str, str], timeout_s: float = EXEC_TIMEOUT_S
    ) -> None:
        self.command = command
        self.environ = environ
        self.timeout_s = timeout_s
        self.meanwhile: Callable[[], None] = _idle
        """Called between the slices of a command's wait: the host's keep_alive."""
        self._running: subprocess.Popen[bytes] | None = None
        self._stopping = False

    def holds(self, message_id: str) -> bool | None:
        return None

    def interrupt(self) -> None:
        """The session stops: end the command now running, start no other. Only
        signals, so it is safe in a signal handler; enter() does the rest."""
        self._stopping = True
        running = self._running
        if running is not None:
            _signal_group(running, signal.SIGTERM)

    def enter(self, delivery: Delivery) -> bool:
        if self._stopping:
            raise EntryFailed("the session is stopping")
        message = delivery.message
        about = {
            "PI_POST_MESSAGE_ID": message.id,
            # Spelled out as on a terminal: a NUL byte or a lone surrogate in a
            # stranger's name must not keep the command from ever starting.
            "PI_POST_MESSAGE_FROM": format.visible(message.sender.name),
            "PI_POST_MESSAGE_REPLY_TO": message.reply_to or "",
            "PI_POST_WAKE": "1" if delivery.wake else "0",
        }
        try:
            # As bytes: the inherited variables as they came, the message's text in
            # UTF-8 as the letter has it, whatever the locale could encode.
            env = {os.fsencode(name): os.fsencode(value) for name, value in self.environ.items()}
            env.update((name.encode(), value.encode("utf-8")) for name, value in about.items())
            process = subprocess.Popen(
                ["/bin/sh", "-c", self.command],
                stdin=subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
        except (OSError, ValueError) as error:  # ValueError: a NUL byte in a variable
            if isinstance(error, OSError) and error.errno in OUT_OF_DESCRIPTORS:
                raise  # not this message's trouble: the session ends (Host._enter)
            why = error.strerror if isinstance(error, OSError) and error.strerror else error
            raise EntryFailed(f"could not start: {why}") from None
        with process:  # closes our end of its stdin, whatever it read
            self._running = process
            try:
                # A final newline, as a line on a pipe has, for commands that read lines.
                ended_by_us = self._wait(process, delivery.text.encode("utf-8") + b"\n")
            finally:
                self._running = None
        if ended_by_us is not None:
            raise EntryFailed(ended_by_us)
        if process.returncode < 0:
            raise EntryFailed(f"killed by signal {-process.returncode}")
        if process.returncode > 0:
            raise EntryFailed(f"exit status {process.returncode}")
        return True

    def _wait(self, process: subprocess.Popen[bytes], text: bytes) -> str | None:
        """Feed the command its text and wait until it ends, or end it: past the
        timeout, or once the session stops (which interrupt() may signal from
        another thread: hence short slices). Returns why we ended it, or None."""
        ends_at = time.monotonic() + self.timeout_s
        feed: bytes | None = text
        while True:
            try:
                process.communicate(feed, timeout=_EXEC_WAIT_SLICE_S)
            except subprocess.TimeoutExpired:
                feed = None  # communicate() keeps what it has not written yet
            self.meanwhile()
            if process.returncode == 0:
                return None  # taken, even if the stop came just as it finished
            if self._stopping:
                reason = "ended by the shutdown"
                break
            if process.returncode is not None:
                return None
            if time.monotonic() >= ends_at:
                reason = f"timed out after {self.timeout_s:g} s"
                break
        _signal_group(process, signal.SIGTERM)
        kill_at = time.monotonic() + EXEC_KILL_GRACE_S
        # The shell may be gone while something it started still runs in its group.
        while process.poll() is None or _group_alive(process):
            if time.monotonic() >= kill_at:
                _signal_group(process, signal.SIGKILL)
                break
            time.sleep(_EXEC_WAIT_SLICE_S)
        process.wait()
        if self._stopping and process.returncode == 0:
            return None  # the stop's TERM came first (interrupt): exit 0 still says taken
        return reason


def _idle() -> None:
    """Nothing to do while a command runs (an ExecContext no host serves)."""


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)  # its own session: the group id is its pid


def _group_alive(process: subprocess.Popen[bytes]) -> bool:
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class StreamContext:
    """One JSON line per message on a stream (standard output by default). A stream
    whose reader went away, or that was closed, can take nothing more: ContextGone."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def holds(self, message_id: str) -> bool | None:
        return None

    def enter(self, delivery: Delivery) -> bool:
        try:
            self.stream.write(json.dumps(delivery_json(delivery), ensure_ascii=False) + "\n")
            self.stream.flush()
        except BrokenPipeError:
            raise ContextGone("the reader of its output is gone") from None
        except ValueError:  # what a closed stream raises
            raise ContextGone("its output is closed") from None
        except OSError as error:
            raise EntryFailed(error.strerror or str(error)) from None
        return True
