"""Registry and presence over time (SPEC 2, 5): INV-01, INV-05, INV-08, INV-13,
INV-14, INV-15, INV-17.

Tier: must
Operations: set_clock, advance_clock, process_stop, process_recycle, register,
heartbeat, shutdown, send, take, sweep, record, list.

A state machine runs sessions through their lives — register, heartbeat, stall,
crash, pid reuse, shutdown, resume — while mail is deposited and taken and sweeps
run at any age, and compares what the implementation reports with a small model
of the specification after every step. It talks to the implementation only
through the driver (SPEC 11) and reads the folder only for whether a mailbox
exists, so a conformance run points it at a port with PIPOST_IMPL.

Each check names one invariant, and the model keeps its own truth rather than
taking the implementation's answer for another invariant: a session whose record
is gone is INV-14's failure, not a presence to judge (INV-15). Where the
specification leaves room — refusing an address with neither record nor mailbox,
sweeping every record that may go, sweeping when a session starts, telling a
reused pid only where the record holds the start time (``pidStart``) — the model
follows what the implementation chose and checks only what must hold. Like any
machine it stops at its first violation (Hypothesis reports more only if it meets
them in other examples): fix that one and run again to see the next.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from pipost.address import address_of
from pipost_conformance.client import Json, Result
from pipost_conformance.machines import driving
from pipost_conformance.machines.common import NOW
from pipost_conformance.machines.conftest import count_example, count_step
from pipost_conformance.machines.driving import SCRATCH, integer, refusal_code, setup
from pipost_conformance.machines.verdict import SetupFailed, check, violated

MACHINE = "registry and presence"


SECOND_MS = 1000
DAY_MS = 24 * 3600 * SECOND_MS
LIVE_WINDOW_MS = 45 * SECOND_MS
"""SPEC 2: refreshed within 45 s is live."""
SWEEP_AFTER_MS = 7 * DAY_MS
"""SPEC 5: a record may go only when unseen for more than 7 days."""
MAILBOX_CAP = 50

SESSION_IDS = (
    "0195f7e0-6c1a-7d2e-9f00-1a2b3c4d5e6f",
    "0195f7e0-6c1a-7d2e-9f00-ffffffffffff",
    "review-session",
)
NAMES = (None, "builder", "reviewer")

# Clock moves: a beat's worth, either side of the live window and of the sweep
# age, and jumps of hours to a year.
TIME_STEPS = st.one_of(
    st.integers(1, 60 * SECOND_MS),
    st.sampled_from(
        [
            LIVE_WINDOW_MS,
            LIVE_WINDOW_MS + 1,
            SWEEP_AFTER_MS,
            SWEEP_AFTER_MS + 1,
            365 * DAY_MS,
        ]
    ),
    st.integers(60 * SECOND_MS, 30 * DAY_MS),
)


@dataclass
class Session:
    """What the specification says about one session, kept beside the implementation."""

    session_id: str
    cwd: str
    recorded: bool = False
    pid: int | None = None
    birth: int | None = None
    """Which process that had ``pid`` registered (a recycled pid is a new birth)."""
    last_seen: int = 0
    queued: int = 0

    @property
    def address(self) -> str:
        return address_of(self.session_id)


class RegistryMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        count_example(MACHINE)
        self.tmp = Path(tempfile.mkdtemp(prefix="pipost-registry-", dir=SCRATCH)).resolve()
        self.driver = driving.new_driver(self.tmp)
        self._looked: dict[tuple[object, ...], Result] = {}
        self.now = integer(self._world("set_clock", now=NOW)["now"], "the clock")
        self.births: dict[int, int] = {}
        """The model's process table: pid -> the birth of the process that has it."""
        self._born = itertools.count(1)
        self.sessions: list[Session] = []
        for number, session_id in enumerate(SESSION_IDS):
            cwd = self.tmp / f"work-{number}"
            cwd.mkdir()
            self.sessions.append(Session(session_id, str(cwd)))

    def teardown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _call(self, op: str, **args: Json) -> Result:
        self._looked.clear()  # any operation but a look may change what a look sees
        return self.driver.call(op, **args)

    def _world(self, op: str, **args: Json) -> Result:
        return setup(self._call(op, **args), op)

    def _look(self, op: str, **args: Json) -> Result:
        """A read (record, list), asked once between two other operations: reading has
        no side effects, so the invariants after a step share what they read."""
        key = (op, *sorted(args.items()))
        if key not in self._looked:
            self._looked[key] = setup(self.driver.call(op, **args), op)
        return self._looked[key]

    # -- the model ------------------------------------------------------------------

    def presence(self, session: Session) -> str:
        """SPEC 2, with the pid's identity: a recycled pid is offline."""
        if session.pid is None or self.births.get(session.pid) != session.birth:
            return "offline"
        return "live" if self.now - session.last_seen <= LIVE_WINDOW_MS else "stalled"

    def presence_by_pid(self, session: Session) -> str:
        """SPEC 2 for a record without the process's start time: a reused pid cannot
        be told from the process that registered, so any process under it counts."""
        if session.pid is None or session.pid not in self.births:
            return "offline"
        return "live" if self.now - session.last_seen <= LIVE_WINDOW_MS else "stalled"

    def allowed_presence(self, session: Session, record: dict[str, Json]) -> set[str]:
        """What SPEC 2 lets the implementation say: a reused pid is told apart only
        where the record holds the process's start time."""
        allowed = {self.presence(session)}
        if "pidStart" not in record:
            allowed.add(self.presence_by_pid(session))
        return allowed

    def running(self) -> list[Session]:
        return [s for s in self.sessions if s.recorded and self.presence(s) != "offline"]

    def with_pid(self) -> list[Session]:
        return [s for s in self.sessions if s.recorded and s.pid is not None]

    def has_mailbox(self, session: Session) -> bool:
        """The mailbox folder exists (SPEC 1: ``inbox/<address>/``)."""
        return (self.tmp / "post" / "inbox" / session.address).is_dir()

    def addressable(self) -> list[Session]:
        return [s for s in self.sessions if s.recorded or self.has_mailbox(s)]

    # -- a session's life -------------------------------------------------------------

    @rule(index=st.integers(0, len(SESSION_IDS) - 1), name=st.sampled_from(NAMES))
    def register(self, index: int, name: str | None) -> None:
        """A session starts, or resumes (the same session id again), in a new process."""
        count_step(MACHINE)
        session = self.sessions[index]
        args: dict[str, Json] = {"session_id": session.session_id, "cwd": session.cwd}
        if name is not None:
            args["name"] = name
        result = self._world("register", **args)
        self._swept_as_it_started(session)
        check(
            result["address"] == session.address,
            "INV-01",
            f"{session.session_id!r} registered as {result['address']}, not {session.address}",
        )
        check(
            result["presence"] == "live",
            "INV-15",
            f"{session.address} just registered is {result['presence']}, not live",
        )
        pid = integer(_record(result, "register")["pid"], "the pid of a new record")
        self.births[pid] = next(self._born)
        session.recorded = True
        session.pid, session.birth, session.last_seen = pid, self.births[pid], self.now

    @precondition(lambda self: self.running())
    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        count_step(MACHINE)
        session = data.draw(st.sampled_from(self.running()), label="session")
        result = self._world("heartbeat", session_id=session.session_id)
        session.last_seen = self.now
        check(
            result["presence"] == "live",
            "INV-15",
            f"{session.address} after a beat from the process that registered is "
            f"{result['presence']}, not live",
        )

    @rule(ms=TIME_STEPS)
    def time_passes(self, ms: int) -> None:
        """Without heartbeats: live sessions stall; offline records age toward a sweep."""
        count_step(MACHINE)
        self.now = integer(self._world("advance_clock", ms=ms)["now"], "the clock")

    @precondition(lambda self: self.running())
    @rule(data=st.data())
    def crash(self, data: st.DataObject) -> None:
        """The process dies without shutting down: the record keeps a dead pid."""
        count_step(MACHINE)
        session = data.draw(st.sampled_from(self.running()), label="session")
        if session.pid is None:
            raise SetupFailed("a running session of the model has no pid")
        self._world("process_stop", pid=session.pid)
        del self.births[session.pid]

    @precondition(lambda self: self.with_pid())
    @rule(data=st.data())
    def recycle_pid(self, data: st.DataObject) -> None:
        """Whatever had the recorded pid ends, and a stranger gets that pid."""
        count_step(MACHINE)
        session = data.draw(st.sampled_from(self.with_pid()), label="session")
        if session.pid is None:
            raise SetupFailed("a session of the model with a pid has none")
        self._world("process_recycle", pid=session.pid)
        self.births[session.pid] = next(self._born)

    @precondition(lambda self: self.running())
    @rule(data=st.data(), process_ends=st.booleans())
    def shutdown(self, data: st.DataObject, process_ends: bool) -> None:
        """The session ends cleanly; its process may live on (pi without the session)."""
        count_step(MACHINE)
        session = data.draw(st.sampled_from(self.running()), label="session")
        pid = session.pid
        if pid is None:
            raise SetupFailed("a running session of the model has no pid")
        result = self._world("shutdown", session_id=session.session_id)
        record = result["record"]
        if not isinstance(record, dict):
            violated("INV-14", f"shutdown of {session.address} left no record: {result}")
        check("pid" not in record, "INV-14", f"shutdown of {session.address} kept the pid")
        check(
            result["presence"] == "offline",
            "INV-14",
            f"{session.address} after its shutdown is {result['presence']}, not offline",
        )
        session.pid, session.birth, session.last_seen = None, None, self.now
        if process_ends:
            self._world("process_stop", pid=pid)
            del self.births[pid]

    # -- mail -------------------------------------------------------------------------

    @rule(index=st.integers(0, len(SESSION_IDS) - 1))
    def deposit(self, index: int) -> None:
        """A process sends to the session's address, whatever its presence."""
        count_step(MACHINE)
        session = self.sessions[index]
        known = session.recorded or self.has_mailbox(session)
        result = self._call(
            "send", targets=[session.address], body=f"note {self.now}", cwd=str(self.tmp)
        )
        if "failed" in result:
            raise SetupFailed(f"send to {session.address}: {result}")
        if "refused" in result:
            # Refusing an address with neither record nor mailbox is pipost's SHOULD;
            # at the cap every implementation refuses (INV-08).
            code = refusal_code(result)
            if not known:
                check(
                    code == "unknown_address",
                    "INV-13",
                    f"a send to {session.address}, which has neither record nor mailbox, "
                    f"was refused as {code}",
                )
            else:
                check(
                    session.queued >= MAILBOX_CAP,
                    "INV-13",
                    f"a send to {session.address} ({session.queued} queued) was refused: {result}",
                )
                check(
                    code == "mailbox_full",
                    "INV-08",
                    f"a send to the full mailbox {session.address} was refused as {code}",
                )
            queued = self._queued(session)
            check(
                queued == session.queued,
                "INV-08",
                f"a refused send changed the mail of {session.address}: "
                f"{queued} queued, {session.queued} before",
            )
            return
        check(
            session.queued < MAILBOX_CAP,
            "INV-08",
            f"a send to {session.address} with {session.queued} queued was accepted",
        )
        receipts = result.get("receipts")
        check(
            isinstance(receipts, list)
            and [r.get("address") for r in receipts if isinstance(r, dict)] == [session.address],
            "INV-13",
            f"a send to {session.address} reported receipts {receipts!r}",
        )
        session.queued += 1

    @precondition(lambda self: self.addressable())
    @rule(data=st.data())
    def take(self, data: st.DataObject) -> None:
        """The session's receiver takes its oldest letter."""
        count_step(MACHINE)
        session = data.draw(st.sampled_from(self.addressable()), label="session")
        taken = self._world("take", address=session.address)
        if session.queued > 0:
            check(
                taken.get("message") is not None,
                "INV-05",
                f"take of {session.address} found nothing, {session.queued} were queued",
            )
        else:
            check(
                taken.get("message") is None,
                "INV-06",
                f"take of {session.address} found a message, none was queued: {taken}",
            )
        session.queued = max(0, session.queued - 1)

    def _swept_as_it_started(self, started: Session) -> None:
        """SPEC 5 lets a session's start sweep (pi-post 0.7's does): a record of
        another session gone now went by a sweep, which had to be allowed to take it."""
        for session in self.sessions:
            if session is started or not session.recorded:
                continue
            if self._look("record", address=session.address)["record"] is not None:
                continue
            self._judge_swept_record(session)

    def _judge_swept_record(self, session: Session) -> None:
        check(
            self.presence(session) == "offline", "INV-17", f"swept the record of running {session}"
        )
        check(session.queued == 0, "INV-17", f"swept the record of {session}, mail queued")
        check(
            self.now - session.last_seen > SWEEP_AFTER_MS,
            "INV-17",
            f"swept the record of {session}, seen {self.now - session.last_seen} ms ago",
        )
        session.recorded, session.pid, session.birth = False, None, None

    # -- tidying ----------------------------------------------------------------------

    @rule()
    def sweep(self) -> None:
        """SPEC 5 says what may go; whether all of it goes is the implementation's
        choice. Never a record while its process exists, its mailbox holds mail, or
        it was seen within 7 days; never a mailbox that holds mail or has a record."""
        count_step(MACHINE)
        result = self._world("sweep")
        removed = set(_strings(result["records_removed"], "records_removed"))
        folders_removed = set(_strings(result["mailboxes_removed"], "mailboxes_removed"))
        for session in self.sessions:
            if session.address in removed:
                self._judge_swept_record(session)
        for session in self.sessions:
            if session.address in folders_removed:
                check(session.queued == 0, "INV-17", f"swept the mailbox of {session}, mail queued")
                check(
                    not session.recorded,
                    "INV-17",
                    f"swept the mailbox of {session}, which has a record",
                )

    # -- after every step (each invariant judges only its own) --------------------------

    def _queued(self, session: Session) -> int:
        result = self._look("record", address=session.address)
        return integer(result["queued"], f"queued of {session.address}")

    @invariant()
    def mail_is_kept(self) -> None:
        """INV-05: what was queued and not taken is still queued; INV-06: what was
        taken is not queued again."""
        for session in self.sessions:
            queued = self._queued(session)
            check(
                queued >= session.queued,
                "INV-05",
                f"{session.address} holds {queued} letters, {session.queued} were queued",
            )
            check(
                queued <= session.queued,
                "INV-06",
                f"{session.address} holds {queued} letters, {session.queued} were left untaken",
            )

    @invariant()
    def records_outlive_their_processes(self) -> None:
        """INV-14: a record stays until a sweep removes it, pid and all, and shutdown
        takes only the pid."""
        for session in self.sessions:
            record = self._look("record", address=session.address)["record"]
            if not session.recorded:
                check(record is None, "INV-14", f"{session.address} has a record: {record}")
                continue
            if not isinstance(record, dict):
                violated("INV-14", f"the record of {session.address} is gone: {record!r}")
            check(
                record.get("pid") == session.pid,
                "INV-14",
                f"the record of {session.address} has pid {record.get('pid')}, "
                f"expected {session.pid}",
            )

    @invariant()
    def presence_is_honest(self) -> None:
        """INV-15, for every session the implementation holds a record of."""
        for session in self.sessions:
            result = self._look("record", address=session.address)
            record = result["record"]
            if not session.recorded or not isinstance(record, dict):
                continue  # a record that should not be there, or is gone: INV-14's
            check(
                record.get("lastSeen") == session.last_seen,
                "INV-15",
                f"the record of {session.address} was last seen at {record.get('lastSeen')}, "
                f"expected {session.last_seen}",
            )
            allowed = self.allowed_presence(session, record)
            check(
                result["presence"] in allowed,
                "INV-15",
                f"presence of {session.address} is {result['presence']}, "
                f"expected {' or '.join(sorted(allowed))} (SPEC 2)",
            )

    @invariant()
    def the_listing_shows_every_record(self) -> None:
        """INV-14: every record is listed; INV-15: with its presence."""
        listed = self._look("list", all=True)["sessions"]
        if not isinstance(listed, list):
            raise SetupFailed(f"list answered no list of sessions: {listed!r}")
        presence = {e.get("address"): e.get("presence") for e in listed if isinstance(e, dict)}
        recorded = {s.address: s for s in self.sessions if s.recorded}
        check(
            set(presence) == set(recorded),
            "INV-14",
            f"the listing shows {sorted(map(str, presence))}, the records are {sorted(recorded)}",
        )
        for address, shown in presence.items():
            session = recorded.get(str(address))
            if session is not None:
                record = self._look("record", address=session.address)["record"]
                allowed = self.allowed_presence(session, record if isinstance(record, dict) else {})
                check(
                    shown in allowed,
                    "INV-15",
                    f"the listing shows {address} {shown}, expected {' or '.join(sorted(allowed))}",
                )


def _record(result: Result, what: str) -> dict[str, Json]:
    record = result["record"]
    if not isinstance(record, dict):
        raise SetupFailed(f"{what} answered no record: {result}")
    return record


def _strings(value: Json, what: str) -> list[str]:
    if not isinstance(value, list):
        raise SetupFailed(f"{what} is not a list: {value!r}")
    return [str(item) for item in value]


RegistryMachine.TestCase.settings = settings(stateful_step_count=30)
TestRegistryMachine = RegistryMachine.TestCase
