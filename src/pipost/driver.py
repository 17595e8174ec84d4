"""pipost's end of the driver protocol (SPEC 11.3): the shim ``pi-post driver`` serves.

The Gherkin features and the state machines drive an implementation only through
``Driver.call(op, **args)``: every argument and every result is a JSON value
(dicts, lists, strings, integers, booleans, None), so the same suite can run
in-process against pipost or, over a JSON-lines transport, against a port.

Outcomes of the contract are results, not exceptions: ``{"refused": reason}`` when
pi-post refuses (an unknown target, an oversize body, a full mailbox) and
``{"failed": reason}`` when the filesystem failed an operation, where a reason is
``{"code", "text", …facts}`` (:func:`reason`): the suite judges the code and the
facts, and pipost's words travel beside them. A misuse of the interface itself
(an operation not in ``capabilities``, a missing, unknown, mistyped or null
argument) raises DriverError; a transport reports it as an error line.

Messages and records appear in results in their wire form (SPEC 1.2, 1.3).

:class:`InProcessDriver` runs pipost over one root folder with an injected clock
(ms) and a fake process table, both moved by operations, so presence, ages and
sweeps are decided by the scenario and not by the machine.

The JSON-lines transport (docs/conformance.md): :func:`serve` answers requests on
a pair of streams (``pi-post driver`` serves pipost this way; a port's shim does
the same over its own library). The client that drives such a command, and the
schema validation, are the conformance kit's (``pipost_conformance.client``);
what both ends share is :mod:`pipost.driver_protocol`.
"""

from __future__ import annotations

import base64
import binascii
import functools
import inspect
import itertools
import json
import os
import threading
import time
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, TypeAlias, Union

from pipost import format, host, mailbox, message, registry
from pipost.address import address_of, default_name, is_address, process_name
from pipost.driver_protocol import DEFAULT_NOW, PROTOCOL, Driver, DriverError, Json, Result
from pipost.message import Rejected, Sender
from pipost.policy import DUPLICATE_WINDOW_MS, RATE_LIMIT, RATE_WINDOW_MS, inbound_mode, resume_mode
from pipost.post import Post, Refused
from pipost.reception import Action, Outcome
from pipost.refusals import BadEnvelope, MalformedAddress, NoProcess, NoRecord, PidRunning, Refusal
from pipost.resolve import Caller
from pipost.session import Candidate, Record
from pipost.session import to_json as record_json

RACE_ENTRY_S = 0.001
"""How long an entry takes in a race: long enough for the receivers to overlap."""
RACE_IDLE_DRAINS = 1000
"""How many drains in a row that take nothing end a receiver's part in a race."""


@functools.cache  # looking the version up costs more than a scenario's world
def pipost_implementation() -> dict[str, Json]:
    """What pipost says it is when a world is opened: its name, the version
    ``pi-post --version`` prints and its language."""
    from importlib import metadata

    return {"name": "pipost", "version": metadata.version("pipost"), "language": "Python"}


class FakeProcessTable:
    """A process table the scenario controls: pids start, exit and get reused.

    A start token names one process; a recycled pid gets a new token, which is how
    presence tells the process that registered from a stranger (INV-15)."""

    def __init__(self) -> None:
        self._tokens: dict[int, str] = {}
        self._next_pid = 40_000
        self._births = itertools.count(1)

    def start_token(self, pid: int) -> str | None:
        return self._tokens.get(pid)

    def start(self, pid: int | None = None) -> int:
        if pid is None:
            while self._next_pid in self._tokens:
                self._next_pid += 1
            pid = self._next_pid
        self._tokens[pid] = f"birth-{next(self._births)}"
        return pid

    def stop(self, pid: int) -> bool:
        return self._tokens.pop(pid, None) is not None


class InProcessDriver:
    """pipost itself, over ``root``, with an injected clock and process table.

    ``home`` is what ``~`` means in path handles. A send does not wait for a
    receipt (``receipt_wait`` 0 s): no receiver runs in-process, so a live target
    answers "queued" at once instead of after 1.5 s."""

    def __init__(
        self, root: Path, *, home: str, now: int = DEFAULT_NOW, receipt_wait: float = 0.0
    ) -> None:
        self.root = root
        self.home = home
        self.now = now
        self.elapsed = 0
        """The world's monotonic clock (ms): it follows the wall clock forward, never
        back (a step back of the wall clock leaves it where it is)."""
        self.processes = FakeProcessTable()
        self.post = Post(root, clock=lambda: self.now, processes=self.processes)
        self.post.receipt_wait = receipt_wait
        self.implementation = pipost_implementation()
        self._receivers: dict[str, Receiving] = {}
        self._operations: dict[str, Callable[..., Result]] = {
            name.removeprefix("op_"): getattr(self, name)
            for name in sorted(dir(self))
            if name.startswith("op_")
        }

    def call(self, op: str, **args: Json) -> Result:
        operation = self._operations.get(op)
        if operation is None:
            raise DriverError(f"unknown operation {op!r} (see capabilities)")
        _check_arguments(op, operation, args)
        try:
            return operation(**args)
        except Refused as refused:
            # Only a front end refuses in words of its own (PI_POST_DIR): the driver's
            # operations are given their root, and every refusal of theirs is data.
            assert not isinstance(refused.reason, str), refused.reason
            return {refused.reason.outcome: reason(refused.reason)}
        except OSError as error:
            where = f": {error.filename}" if error.filename else ""
            return {"failed": {"code": "io_error", "text": f"{error.strerror or error}{where}"}}

    # -- the interface itself ---------------------------------------------------------

    def op_capabilities(self) -> Result:
        """The operations this driver offers. Result: ``{"ops": [name, ...]}``."""
        return {"ops": list(self._operations)}

    # -- the world: clock and processes -----------------------------------------------

    def op_set_clock(self, now: int) -> Result:
        """Set the clock to ``now`` (ms since the epoch): time passes when it moves
        forward, the wall clock steps when it moves back. Result: ``{"now": ms}``."""
        return self.op_advance_clock(now - self.now)

    def op_advance_clock(self, ms: int) -> Result:
        """Move the clock forward by ``ms``: time passes, on the wall clock and the
        monotonic one alike. A negative ``ms`` steps the wall clock back, and the
        monotonic clock stays where it is (SPEC 6.1). Result: ``{"now": ms}``."""
        self.now += ms
        self.elapsed += max(ms, 0)
        return {"now": self.now}

    def op_process_start(self, pid: int | None = None) -> Result:
        """Start a process, with ``pid`` if given, else a fresh pid. Result: ``{"pid": n}``.
        Refused if a process already has ``pid``."""
        if pid is not None and self.processes.start_token(pid) is not None:
            raise Refused(PidRunning(pid))
        return {"pid": self.processes.start(pid)}

    def op_process_stop(self, pid: int) -> Result:
        """The process ``pid`` exits. Result: ``{"pid": n}``; refused if none runs."""
        if not self.processes.stop(pid):
            raise Refused(NoProcess(pid))
        return {"pid": pid}

    def op_process_recycle(self, pid: int) -> Result:
        """Whatever had ``pid`` exits and an unrelated process gets the same pid.
        Result: ``{"pid": n}``."""
        self.processes.stop(pid)
        return {"pid": self.processes.start(pid)}

    # -- a session's life ---------------------------------------------------------------

    def op_register(
        self, session_id: str, cwd: str, name: str | None = None, pid: int | None = None
    ) -> Result:
        """A session starts (or resumes) in ``cwd`` and writes its record.

        ``cwd`` is canonicalised as a session does; ``name`` defaults to the default
        name; ``pid`` defaults to a freshly started process. Result: a session
        (``{"address", "record", "presence", "queued"}``)."""
        if pid is None:
            pid = self.processes.start()
        record = registry.register(
            self.root,
            session_id,
            os.path.realpath(cwd),
            self.now,
            name=name,
            pid=pid,
            pid_start=self.processes.start_token(pid),
        )
        return self._session(self._candidate(record))

    def op_heartbeat(self, session_id: str) -> Result:
        """The session refreshes its record. Result: a session; refused without a record."""
        record = registry.heartbeat(self.root, self._record_of(session_id), self.now)
        return self._session(self._candidate(record))

    def op_shutdown(self, session_id: str) -> Result:
        """The session ends: its record loses the pid and stays (INV-14). Result: a
        session; refused without a record. The process itself is left to process_stop."""
        record = registry.mark_offline(self.root, self._record_of(session_id), self.now)
        return self._session(self._candidate(record))

    # -- sending ------------------------------------------------------------------------

    def op_send(
        self,
        targets: list[str],
        body: str,
        cwd: str,
        label: str | None = None,
        session: str | None = None,
        reply_to: str | None = None,
        home: str | None = None,
    ) -> Result:
        """Send ``body`` to every handle in ``targets``, resolved from ``cwd`` (and
        ``home`` for ``~``, by default the driver's).

        The sender is the session whose id is ``session`` (its name, address and
        cwd from its record, else its default name in ``cwd``), or else a process
        named ``label`` (default ``process:<basename of cwd>``). ``reply_to`` is an
        address, or ``"none"`` for none; it defaults to the sending session's
        address, and to none for a process. Result: ``{"receipts": [{"address",
        "id", "delivered"}, ...]}`` in target order; refused (nothing written) for
        an unknown, ambiguous or excess target, a bad body or a full mailbox."""
        sender = self._sender(cwd, label, session)
        if reply_to == "none":
            reply = None
        elif reply_to is None:
            reply = sender.address
        elif is_address(reply_to):
            reply = reply_to
        else:
            problem = f"reply_to must be an address or none, not {format.visible(reply_to)!r}"
            raise Refused(BadEnvelope("replyTo", problem))
        receipts = self.post.send(targets, body, sender, self._caller(cwd, home), reply_to=reply)
        return {
            "receipts": [
                {"address": r.address, "id": r.message_id, "delivered": r.delivered}
                for r in receipts
            ]
        }

    # -- reading (no side effects: INV-16) ------------------------------------------------

    def op_list(self, all: bool = False) -> Result:
        """The sessions in listing order (live, stalled, offline; latest seen first).
        Without ``all``, offline sessions unseen for over a day with nothing queued
        are left out and counted. Result: ``{"sessions": [session, ...], "hidden": n}``."""
        sessions = self.post.sessions()
        shown = [c for c in sessions if all or not format.is_collapsed(c, self.now)]
        return {
            "sessions": [self._session(c) for c in shown],
            "hidden": len(sessions) - len(shown),
        }

    def op_resolve(self, handle: str, cwd: str, home: str | None = None) -> Result:
        """Resolve one handle as a send would, from ``cwd`` (and ``home`` for ``~``).
        Result: a session (its ``record`` None for a mailbox with no record);
        refused (unknown_target with the reachable sessions, ambiguous_target with the
        candidates) when it does not name one session."""
        target = self.post.resolve(handle, self._caller(cwd, home))
        if target.candidate is not None:
            return self._session(target.candidate)
        queued = mailbox.count(self.root, target.address)
        return {"address": target.address, "record": None, "presence": None, "queued": queued}

    def op_record(self, address: str) -> Result:
        """The record of ``address`` read as it is. Result: a session, ``record`` None
        when there is none or it is unreadable; refused for a malformed address."""
        address = _address(address)
        with self.post.directory() as directory:  # the root opened once
            found = directory.by_address(address)
            if found is not None:
                return self._session(found)
            queued = 0 if directory.top is None else mailbox.count_in(directory.top, address)
        return {"address": address, "record": None, "presence": None, "queued": queued}

    def op_peek(self, address: str) -> Result:
        """The queued letters of ``address``, oldest first, read and left in place.
        Result: ``{"letters": [{"name", "message"} | {"name", "rejected"}, ...]}``."""
        letters = self.post.peek(_address(address))
        return {"letters": [_letter(letter.name, letter.content) for letter in letters]}

    def op_count(self, address: str) -> Result:
        """How many letters ``address`` holds queued. Result: ``{"count": n}``."""
        return {"count": mailbox.count(self.root, _address(address))}

    # -- receiving ----------------------------------------------------------------------

    def op_take(self, address: str) -> Result:
        """Receive the oldest message of ``address``: claim it, dispose of it, return it.

        A letter that is not a message is set aside (never delivered, never
        destroyed), logged as a receiving session logs it, and the next one is
        tried. Result: ``{"message": wire message or None, "set_aside": [{"name",
        "reason": rejection}, ...]}``."""
        set_aside: list[Json] = []
        for claim in mailbox.claims(self.root, _address(address)):
            if isinstance(claim.content, Rejected):
                host.set_aside(self.post, claim, claim.content.reason)
                set_aside.append(_set_aside(claim.name, claim.content))
                continue
            claim.dispose()
            return {"message": message.to_json(claim.content), "set_aside": set_aside}
        return {"message": None, "set_aside": set_aside}

    def op_deliver(
        self,
        session_id: str,
        receiver: str | None = None,
        context: str | None = None,
        fail: int = 0,
        fail_unlink: int = 0,
        crash: str | None = None,
        inbound: str = "accept",
        resume: str = "wake",
        trigger: str = "event",
    ) -> Result:
        """The receiving session of ``session_id`` takes its mail once, as a session
        does: oldest first, through the inbound mode (``PI_POST_INBOUND``: accept,
        ask with no one to ask, refuse, read in any case; anything else accepts)
        and the loop guard, into a context that refuses its first ``fail`` entries
        of this call, each letter unlinked only after its text entered.

        ``receiver`` names the receiving process and its context (default: the
        session id); two names on one session are two receivers racing on its
        mailbox. A receiver lives from its first ``deliver`` (its start-up drain,
        where ``resume`` decides whether waiting mail wakes the session or is
        staged) until it crashes or the next ``open``: its loop guard, its retries
        and the claims it holds carry over between calls. ``context`` is
        ``"ledger"`` (it remembers the ids it holds, as a transcript does; the
        default) or ``"plain"`` (it cannot tell), fixed when the receiver first
        runs; the context outlives a crash, so the receiver's next ``deliver`` is
        a restart that keeps it. ``fail_unlink``: the disk refuses the receiver's
        next that many unlinks. ``crash: "after_entry"``: the receiver dies after
        the first text of this call entered its context and before that letter's
        unlink; its locks end as a dead process's do. ``trigger`` says what runs
        the drain: ``"event"`` (the folder watch saw mail arrive) or ``"poll"``
        (the watch missed it; pipost's drain reads the whole folder either way).

        Result: ``{"entered": [{"message", "text", "on_disk", "wake"}, ...],
        "dropped": [{"name", "reason"}, ...], "set_aside": [{"name", "reason"},
        ...]}``, and ``"crashed"`` (whether it died) when ``crash`` was given —
        ``text`` is what the model reads (SPEC 7), ``on_disk`` whether the letter
        was still in the mailbox when its text entered, ``wake`` whether it came
        as a steer that wakes the session (false: staged for the first prompt);
        ``dropped`` holds messages let go by the mode (``inbound_refused``) or the
        guard (``loop_guard``), ``set_aside`` letters that were not messages. A
        letter whose entry failed waits for its retry delay, at most 60 s of the
        world's clock, before the receiver tries it again."""
        if crash not in (None, "after_entry"):
            raise DriverError(f'deliver: crash must be "after_entry", not {crash!r}')
        if trigger not in ("event", "poll"):
            raise DriverError(f'deliver: trigger must be "event" or "poll", not {trigger!r}')
        if fail < 0 or fail_unlink < 0:
            raise DriverError("deliver: fail and fail_unlink count entries and unlinks: >= 0")
        receiving = self._receiving(receiver or session_id, session_id, context)
        starting = receiving.host is None
        taker = receiving.host or self._receiver(receiving)
        taker.inbound = inbound_mode(inbound)  # the session's modes for this call
        taker.resume = resume_mode(resume)
        receiving.context.begin(fail)
        receiving.disk.begin(fail_unlink, crash_after_entry=crash is not None)
        result = _received(receiving.context, taker.drain(at_startup=starting))
        if receiving.disk.crashed:
            receiving.disk.die()  # the kernel drops a dead process's locks
            receiving.host = None
        if crash is not None:
            result["crashed"] = receiving.disk.crashed
        return result

    def op_race(self, session_id: str, receivers: list[str], context: str | None = None) -> Result:
        """The receivers named in ``receivers`` (two or more, each as in ``deliver``:
        made on first use with a ``context`` of that kind, else running on) take the
        mail of ``session_id`` at the same time, each draining again until the
        mailbox holds nothing more it can take. Result: ``{"receivers": [{"entered",
        "dropped", "set_aside"}, ...]}``, one per receiver in the order named, each
        as ``deliver`` reports it."""
        if len(receivers) < 2 or len(set(receivers)) != len(receivers):
            raise DriverError("race: receivers names two or more receivers, each once")
        runs = [self._receiving(name, session_id, context) for name in receivers]
        takers = [(run.host is None, run.host or self._receiver(run)) for run in runs]
        for run in runs:
            run.context.begin(0, entry_s=RACE_ENTRY_S)
            run.disk.begin(0, crash_after_entry=False)
        address = address_of(session_id)
        outcomes: list[list[Outcome]] = [[] for _ in runs]
        errors: list[BaseException] = []
        start = threading.Barrier(len(runs))

        def take(index: int) -> None:
            starting, taker = takers[index]
            try:
                start.wait()
                idle = 0
                while idle < RACE_IDLE_DRAINS and mailbox.count(self.root, address) > 0:
                    taken = taker.drain(at_startup=starting)
                    starting = False
                    outcomes[index] += taken
                    idle = 0 if taken else idle + 1
                    if not taken:
                        time.sleep(0.001)  # the other receivers hold what is left
            except BaseException as error:  # raised again in the caller's thread
                errors.append(error)

        threads = [threading.Thread(target=take, args=(n,)) for n in range(len(runs))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]
        return {
            "receivers": [
                _received(run.context, taken) for run, taken in zip(runs, outcomes, strict=True)
            ]
        }

    # -- tidying ------------------------------------------------------------------------

    def op_sweep(self) -> Result:
        """Sweep as SPEC 5 allows, stale temporaries first (their age is the clock
        minus their mtime). Result: ``{"records_removed": [address, ...],
        "mailboxes_removed": [address, ...], "temporaries_removed": [path, ...]}``,
        each path below the root (``inbox/<address>/<name>``, ``registry/<name>``)."""
        report = self.post.sweep()
        return {
            "records_removed": list(report.records_removed),
            "mailboxes_removed": list(report.mailboxes_removed),
            "temporaries_removed": list(report.temporaries_removed),
        }

    # -- the wire -----------------------------------------------------------------------

    def op_address_of(self, session_id: str) -> Result:
        """The address of a session id. Result: ``{"address": "s-…"}``."""
        return {"address": address_of(session_id)}

    def op_parse(
        self, text: str | None = None, raw_base64: str | None = None, file_name: str | None = None
    ) -> Result:
        """Parse one letter given as ``text`` or as bytes in ``raw_base64``; with
        ``file_name``, the id must match it. Result: ``{"message": wire message}`` or
        ``{"rejected": rejection}``."""
        if (text is None) == (raw_base64 is None):
            raise DriverError("parse takes exactly one of text and raw_base64")
        if text is not None:
            # A lone surrogate becomes the invalid UTF-8 it would be on disk.
            raw = text.encode("utf-8", errors="surrogatepass")
        else:
            try:
                raw = base64.b64decode(raw_base64 or "", validate=True)
            except binascii.Error as error:
                raise DriverError(f"raw_base64 is not base64: {error}") from None
        parsed = message.parse(raw, file_name)
        if isinstance(parsed, Rejected):
            return {"rejected": _rejection(parsed)}
        return {"message": message.to_json(parsed)}

    # -- helpers ------------------------------------------------------------------------

    def _receiving(self, name: str, session_id: str, kind: str | None) -> Receiving:
        """The receiver called ``name``, made on first use with its context."""
        if kind not in (None, "ledger", "plain"):
            raise DriverError(f'deliver: context must be "ledger" or "plain", not {kind!r}')
        found = self._receivers.get(name)
        if found is None:
            inbox = Path(mailbox.inbox_of(self.root, address_of(session_id)))
            context = RecordingContext(inbox, ledger=kind != "plain")
            found = self._receivers[name] = Receiving(session_id, context, FailingDisk(context))
        if found.session_id != session_id:
            raise DriverError(f"deliver: receiver {name!r} receives for another session")
        if kind is not None and found.context.ledger != (kind == "ledger"):
            raise DriverError(f"deliver: the context of receiver {name!r} is not {kind!r}")
        return found

    def _receiver(self, receiving: Receiving) -> host.Host:
        """A receiving process starts for ``receiving``: pipost's Host over the
        world's disk, its record left to the world (register, heartbeat)."""
        record = registry.read(self.root, address_of(receiving.session_id))
        receiving.host = host.Host(
            self.post,
            receiving.session_id,
            record.cwd if record is not None else "/",
            receiving.context,
            kernel_events=False,
            unlink=receiving.disk.unlink,
            monotonic=lambda: self.elapsed / 1000,  # the guard and retries: the world's
        )
        receiving.disk.stop = receiving.host.request_stop
        return receiving.host

    def _record_of(self, session_id: str) -> Record:
        record = registry.read(self.root, address_of(session_id))
        if record is None:
            raise Refused(NoRecord(session_id))
        return record

    def _sender(self, cwd: str, label: str | None, session: str | None) -> Sender:
        if session is None:
            return Sender(kind="process", name=label or process_name(cwd), cwd=cwd)
        address = address_of(session)
        record = registry.read(self.root, address)
        if record is None:
            return Sender("session", default_name(cwd, address), address, cwd)
        return Sender("session", record.name, address, record.cwd)

    def _caller(self, cwd: str, home: str | None) -> Caller:
        return Caller(cwd=cwd, home=home or self.home, canonical=os.path.realpath)

    def _candidate(self, record: Record) -> Candidate:
        """The session of a record just written or read, its mailbox counted below
        the root the directory opens (the one place a candidate is made)."""
        with self.post.directory() as directory:
            return directory.candidate(record)

    def _session(self, candidate: Candidate) -> Result:
        return {
            "address": candidate.address,
            "record": record_json(candidate.record),
            "presence": candidate.presence.value,
            "queued": candidate.queued,
        }


class RecordingContext:
    """The context of a receiving session the suite drives: it keeps what entered
    and can be told to refuse its next entries. With a ``ledger`` it can say which
    ids it holds, as a transcript can; without, it cannot, as a command cannot."""

    def __init__(self, inbox: Path, *, ledger: bool) -> None:
        self.inbox = inbox
        self.ledger = ledger
        self._held: set[str] = set()
        self.begin(0)

    def begin(self, failures: int, *, entry_s: float = 0.0) -> None:
        self.entries: list[Result] = []
        self._failures_left = failures
        self.entry_s = entry_s
        """How long an entry takes (a race: as a model's does, so receivers overlap)."""

    def holds(self, message_id: str) -> bool | None:
        return message_id in self._held if self.ledger else None

    def enter(self, delivery: host.Delivery) -> bool:
        if self._failures_left > 0:
            self._failures_left -= 1
            return False
        on_disk = (self.inbox / delivery.message.file_name).exists()
        if self.entry_s:
            time.sleep(self.entry_s)
        self.entries.append(
            {
                "message": message.to_json(delivery.message),
                "text": delivery.text,
                "on_disk": on_disk,
                "wake": delivery.wake,
            }
        )
        self._held.add(delivery.message.id)
        return True


class FailingDisk:
    """The disk under one receiver of the world, where the scenario makes it fail:
    it refuses the receiver's next unlinks, or the receiver dies at the unlink that
    follows an entry. Every other unlink is the real one."""

    def __init__(self, context: RecordingContext) -> None:
        self.context = context
        self.stop: Callable[[], None] = lambda: None
        """Ends the receiver's drain: after a crash it takes nothing more (the
        receiver's own request_stop, once it runs)."""
        self._kept: list[mailbox.Claim] = []
        """Claims whose unlink was refused: the receiver holds them, locked."""
        self.begin(0, crash_after_entry=False)

    def begin(self, failures: int, *, crash_after_entry: bool) -> None:
        self._failures_left = failures
        self._crash_after_entry = crash_after_entry
        self.crashed = False

    def unlink(self, claim: mailbox.Claim) -> bool:
        if self._crash_after_entry and self.context.entries and not self.crashed:
            self.crashed = True  # the text entered; the process dies before the unlink
            self.stop()
            return self._refused(claim)
        if self._failures_left > 0:
            self._failures_left -= 1
            return self._refused(claim)
        if not claim.dispose_or_hold():
            return self._refused(claim)
        if claim in self._kept:
            self._kept.remove(claim)
        return True

    def _refused(self, claim: mailbox.Claim) -> bool:
        if claim not in self._kept:
            self._kept.append(claim)
        return False

    def die(self) -> None:
        """The receiver is gone: every claim it held ends, its letters queued again."""
        for claim in self._kept:
            claim.release()
        self._kept.clear()


@dataclass
class Receiving:
    """One receiver of the world: the session it receives for, its context (which
    outlives a crash), its disk, and its running process (None once it crashed)."""

    session_id: str
    context: RecordingContext
    disk: FailingDisk
    host: host.Host | None = None


# -- the JSON-lines transport (SPEC 11; docs/conformance.md) ------------------------------

Opener: TypeAlias = Callable[[Path, str, int], Driver]
"""Makes a fresh world: (root, home, now) → a driver over it."""


def open_pipost(root: Path, home: str, now: int) -> Driver:
    return InProcessDriver(root, home=home, now=now)


def serve(
    stdin: TextIO,
    stdout: TextIO,
    opener: Opener = open_pipost,
    implementation: dict[str, Json] | None = None,
) -> None:
    """Answer requests, one JSON object per line, until ``stdin`` ends.

    A request is ``{"id": any, "op": name, "args": {...}}``; the answer, on one line
    and in order, is ``{"id": same, "result": {...}}`` or, for a misuse of the
    interface, ``{"id": same, "error": text}``. ``open`` (``root``, ``home``,
    ``now``, ``protocol``) starts a fresh world and must come before any other
    operation; it answers ``{"root", "protocol", "implementation"}``, the last
    what the drivers ``opener`` makes are (by default pipost: a port's shim
    written over serve names its own)."""
    about = implementation if implementation is not None else pipost_implementation()
    driver: Driver | None = None
    for line in stdin:
        if not line.strip():
            continue
        request_id: Json = None
        try:
            try:
                request = json.loads(line)
            except json.JSONDecodeError as error:
                raise DriverError(f"not a JSON line: {error}") from None
            if not isinstance(request, dict):
                raise DriverError("a request is a JSON object")
            request_id = request.get("id")
            op, args = request.get("op"), request.get("args", {})
            if not isinstance(op, str) or not isinstance(args, dict):
                raise DriverError("a request has an op (a string) and args (an object)")
            if op == "open":
                driver = opener(*_open_arguments(args))
                opened = {"root": args["root"], "protocol": PROTOCOL, "implementation": about}
                answer: dict[str, Json] = {"id": request_id, "result": opened}
            elif driver is None:
                raise DriverError(f"{op} before open: open a world first")
            else:
                answer = {"id": request_id, "result": driver.call(op, **args)}
        except DriverError as error:
            answer = {"id": request_id, "error": str(error)}
        # ASCII escapes carry lone surrogates (undecodable text) intact.
        stdout.write(json.dumps(answer) + "\n")
        stdout.flush()


def _open_arguments(args: dict[str, Json]) -> tuple[Path, str, int]:
    root, home, now = args.get("root"), args.get("home"), args.get("now", DEFAULT_NOW)
    unknown = set(args) - {"root", "home", "now", "protocol"}
    if unknown:
        raise DriverError(f"open: unknown arguments {sorted(unknown)}")
    if args.get("protocol") != PROTOCOL or isinstance(args.get("protocol"), bool):
        raise DriverError(
            f"open: this driver speaks protocol {PROTOCOL}, not {args.get('protocol')!r}"
        )
    if not isinstance(root, str) or not os.path.isabs(root):
        raise DriverError("open: root must be an absolute path")
    if not isinstance(home, str):
        raise DriverError("open: home must be a string")
    if not isinstance(now, int) or isinstance(now, bool):
        raise DriverError("open: now must be an integer (ms)")
    return Path(root), home, now


def _address(text: str) -> str:
    """Addresses are checked before any path is built from them (INV-22)."""
    if not is_address(text):
        raise Refused(MalformedAddress(text))
    return text


def reason(refusal: Refusal) -> dict[str, Json]:
    """A refusal as the protocol carries it: its code, pipost's words for it and its
    facts, the sessions among them as their addresses."""
    found: dict[str, Json] = {"code": refusal.code, "text": format.refusal(refusal)}
    for name in refusal.facts:
        value = getattr(refusal, name)
        if isinstance(value, tuple):  # sessions: the candidates or the reachable ones
            value = [candidate.address for candidate in value]
        found[name] = value
    return found


def _received(context: RecordingContext, outcomes: list[Outcome]) -> Result:
    """What one receiver's drains took: the entries its context recorded, the
    messages it dropped and the letters it set aside, oldest first."""
    return {
        "entered": list[Json](context.entries),
        "dropped": [
            {"name": o.name, "reason": _drop_reason(o.reason or "")}
            for o in outcomes
            if o.action is Action.DROP
        ],
        "set_aside": [_set_aside(o.name, o.rejected) for o in outcomes if o.rejected],
    }


_GUARD_FACTS: dict[str, Result] = {
    "duplicate": {"window_ms": DUPLICATE_WINDOW_MS},
    "rate": {"window_ms": RATE_WINDOW_MS, "limit": RATE_LIMIT},
}
"""The loop guard's rules, by the word its logged reason starts with, and their facts."""


def _drop_reason(logged: str) -> Result:
    """Why a receiver dropped a message, as the protocol says it: the code of the
    rule (the inbound mode, or the loop guard and which of its rules), its facts,
    and the reason pipost logged as the text."""
    rule = logged.split(":", 1)[0]
    if rule in _GUARD_FACTS:
        return {"code": "loop_guard", "text": logged, "rule": rule, **_GUARD_FACTS[rule]}
    return {"code": "inbound_refused", "text": logged}


def _letter(name: str, content: message.Message | Rejected) -> Result:
    if isinstance(content, Rejected):
        return {"name": name, "rejected": _rejection(content)}
    return {"name": name, "message": message.to_json(content)}


def _set_aside(name: str, rejected: Rejected) -> Json:
    """An entry of ``set_aside`` (take, deliver): the letter and why it is no message."""
    return {"name": name, "reason": _rejection(rejected)}


def _rejection(rejected: Rejected) -> Result:
    """Why bytes are not a message, as the protocol carries it: the code, pipost's
    words and the code's facts (docs/conformance.md, "Values")."""
    return {"code": rejected.code, "text": rejected.reason, **rejected.facts}


def _check_arguments(op: str, operation: Callable[..., Result], args: dict[str, Json]) -> None:
    """Refuse a missing, unknown, null or mistyped argument before the operation runs.

    A defaulted argument is an omitted key (docs/conformance.md): null is no value of
    any argument, so a caller that sends it for "the default" is told so, not
    silently served the default."""
    signature, hints = _signature_of(operation)
    try:
        signature.bind(**args)
    except TypeError as error:
        raise DriverError(f"{op}: {error}") from None
    for name, value in args.items():
        if value is None:
            raise DriverError(f"{op}: {name} is null; leave an argument out for its default")
        if not _conforms(value, hints[name]):
            raise DriverError(f"{op}: {name} must be {hints[name]}, not {value!r}")


_SIGNATURES: dict[object, tuple[inspect.Signature, dict[str, Any]]] = {}


def _signature_of(operation: Callable[..., Result]) -> tuple[inspect.Signature, dict[str, Any]]:
    """An operation's parameters and their types, read once per method: reading the
    type hints costs more than most operations do."""
    method = getattr(operation, "__func__", operation)  # the same for every driver
    if method not in _SIGNATURES:
        _SIGNATURES[method] = (inspect.signature(operation), typing.get_type_hints(operation))
    return _SIGNATURES[method]


def _conforms(value: object, hint: object) -> bool:
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        return any(_conforms(value, option) for option in typing.get_args(hint))
    if origin is list:
        (item,) = typing.get_args(hint)
        return isinstance(value, list) and all(_conforms(v, item) for v in value)
    if hint is int:  # Python counts True as an integer; JSON does not
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(hint, type) and isinstance(value, hint)
