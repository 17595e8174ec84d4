"""Registry and presence over time (SPEC 2, 5; INV-14, INV-15, INV-17).

A state machine runs sessions through their lives — register, heartbeat, stall,
crash, pid reuse, shutdown, resume — while mail is deposited and taken and sweeps
run at any age, and compares what the implementation reports with a small model
of the specification after every step. It talks to the implementation only
through the driver (SPEC 11), so a conformance run can point it at a port.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from pipost.address import address_of
from pipost.driver import Driver, Json, Result, open_driver
from tests.helpers import NOW
from tests.invariants.conftest import count_example, count_step

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


SCRATCH = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
"""Where each example's world goes: a memory filesystem where there is one, as
every record written is flushed (fsync), which on a disk costs milliseconds."""


def new_driver(root: Path) -> Driver:
    """pipost in this process, or the implementation a conformance run names in
    PIPOST_IMPL (docs/conformance.md), over a fresh world at ``root/post``."""
    return open_driver(root / "post", home=str(root), command=os.environ.get("PIPOST_IMPL"))


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
    mailbox: bool = False
    """Whether the inbox folder exists."""

    @property
    def address(self) -> str:
        return address_of(self.session_id)


class RegistryMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        count_example(MACHINE)
        self.tmp = Path(tempfile.mkdtemp(prefix="pipost-registry-", dir=SCRATCH)).resolve()
        self.driver = new_driver(self.tmp)
        self.now = _int(_ok(self.driver.call("set_clock", now=NOW))["now"])
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

    # -- the model ------------------------------------------------------------------

    def presence(self, session: Session) -> str:
        """SPEC 2, with the pid's identity: a recycled pid is offline."""
        if session.pid is None or self.births.get(session.pid) != session.birth:
            return "offline"
        return "live" if self.now - session.last_seen <= LIVE_WINDOW_MS else "stalled"

    def running(self) -> list[Session]:
        return [s for s in self.sessions if s.recorded and self.presence(s) != "offline"]

    def with_pid(self) -> list[Session]:
        return [s for s in self.sessions if s.recorded and s.pid is not None]

    def addressable(self) -> list[Session]:
        return [s for s in self.sessions if s.recorded or s.mailbox]

    # -- a session's life -------------------------------------------------------------

    @rule(index=st.integers(0, len(SESSION_IDS) - 1), name=st.sampled_from(NAMES))
    def register(self, index: int, name: str | None) -> None:
        """A session starts, or resumes (the same session id again), in a new process."""
        count_step(MACHINE)
        session = self.sessions[index]
        args: dict[str, Json] = {"session_id": session.session_id, "cwd": session.cwd}
        if name is not None:
            args["name"] = name
        result = _ok(self.driver.call("register", **args))
        assert result["address"] == session.address, "resume keeps the address"
        assert result["queued"] == session.queued, "mail waiting for a session survives its restart"
        assert result["presence"] == "live"
        pid = _int(_record(result)["pid"])
        self.births[pid] = next(self._born)
        session.recorded = True
        session.pid, session.birth, session.last_seen = pid, self.births[pid], self.now

    @precondition(lambda self: self.running())
    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        count_step(MACHINE)
        session = data.draw(st.sampled_from(self.running()), label="session")
        result = _ok(self.driver.call("heartbeat", session_id=session.session_id))
        session.last_seen = self.now
        assert result["presence"] == "live", "a beat from the process that registered is live"

    @rule(ms=TIME_STEPS)
    def time_passes(self, ms: int) -> None:
        """Without heartbeats: live sessions stall; offline records age toward a sweep."""
        count_step(MACHINE)
        self.now = _int(_ok(self.driver.call("advance_clock", ms=ms))["now"])

    @precondition(lambda self: self.running())
    @rule(data=st.data())
    def crash(self, data: st.DataObject) -> None:
        """The process dies without shutting down: the record keeps a dead pid."""
        count_step(MACHINE)
        session = data.draw(st.sampled_from(self.running()), label="session")
        assert session.pid is not None
        _ok(self.driver.call("process_stop", pid=session.pid))
        del self.births[session.pid]

    @precondition(lambda self: self.with_pid())
    @rule(data=st.data())
    def recycle_pid(self, data: st.DataObject) -> None:
        """Whatever had the recorded pid ends, and a stranger gets that pid."""
        count_step(MACHINE)
        session = data.draw(st.sampled_from(self.with_pid()), label="session")
        assert session.pid is not None
        _ok(self.driver.call("process_recycle", pid=session.pid))
        self.births[session.pid] = next(self._born)

    @precondition(lambda self: self.running())
    @rule(data=st.data(), process_ends=st.booleans())
    def shutdown(self, data: st.DataObject, process_ends: bool) -> None:
        """The session ends cleanly; its process may live on (pi without the session)."""
        count_step(MACHINE)
        session = data.draw(st.sampled_from(self.running()), label="session")
        pid = session.pid
        assert pid is not None
        result = _ok(self.driver.call("shutdown", session_id=session.session_id))
        record = _record(result)
        assert "pid" not in record, "shutdown removes the pid"
        assert result["presence"] == "offline"
        session.pid, session.birth, session.last_seen = None, None, self.now
        if process_ends:
            _ok(self.driver.call("process_stop", pid=pid))
            del self.births[pid]

    # -- mail -------------------------------------------------------------------------

    @rule(index=st.integers(0, len(SESSION_IDS) - 1))
    def deposit(self, index: int) -> None:
        """A process sends to the session's address, whatever its presence."""
        count_step(MACHINE)
        session = self.sessions[index]
        result = self.driver.call(
            "send", targets=[session.address], body=f"note {self.now}", cwd=str(self.tmp)
        )
        if not (session.recorded or session.mailbox):
            assert "refused" in result, "an address with no record and no mailbox is unknown"
            return
        if session.queued >= MAILBOX_CAP:
            assert "refused" in result, "the 51st letter is refused"
            return
        receipts = _ok(result)["receipts"]
        assert isinstance(receipts, list) and len(receipts) == 1
        assert isinstance(receipts[0], dict) and receipts[0]["address"] == session.address
        session.queued += 1
        session.mailbox = True

    @precondition(lambda self: self.addressable())
    @rule(data=st.data())
    def take(self, data: st.DataObject) -> None:
        """The session's receiver takes its oldest letter."""
        count_step(MACHINE)
        session = data.draw(st.sampled_from(self.addressable()), label="session")
        taken = _ok(self.driver.call("take", address=session.address))
        assert (taken["message"] is not None) == (session.queued > 0)
        session.queued = max(0, session.queued - 1)

    # -- tidying ----------------------------------------------------------------------

    @rule()
    def sweep(self) -> None:
        count_step(MACHINE)
        result = _ok(self.driver.call("sweep"))
        removed = set(_strings(result["records_removed"]))
        folders_removed = set(_strings(result["mailboxes_removed"]))
        for session in self.sessions:
            if session.address not in removed:
                continue
            # The invariant itself (INV-17): never while its process exists, its
            # mailbox holds mail, or it was seen within 7 days.
            assert self.presence(session) == "offline", f"swept a running session {session}"
            assert session.queued == 0, f"swept a record whose mailbox holds mail {session}"
            assert self.now - session.last_seen > SWEEP_AFTER_MS, f"swept a recent record {session}"
        sweepable = {
            s.address
            for s in self.sessions
            if s.recorded
            and self.presence(s) == "offline"
            and self.now - s.last_seen > SWEEP_AFTER_MS
            and s.queued == 0
        }
        assert removed == sweepable, "the reference sweeps every record SPEC 5 allows"
        for session in self.sessions:
            if session.address in removed:
                session.recorded, session.pid, session.birth = False, None, None
        empty_unnamed = {
            s.address for s in self.sessions if s.mailbox and not s.recorded and s.queued == 0
        }
        assert folders_removed == empty_unnamed, "only empty mailboxes no record names go"
        for session in self.sessions:
            if session.address in folders_removed:
                session.mailbox = False

    # -- after every step ---------------------------------------------------------------

    @invariant()
    def records_and_presence_match_the_model(self) -> None:
        for session in self.sessions:
            result = _ok(self.driver.call("record", address=session.address))
            assert result["queued"] == session.queued, f"mail of {session.address} changed"
            if not session.recorded:
                assert result["record"] is None, f"{session.address} should have no record"
                continue
            record = _record(result)  # INV-14: it outlives its process
            assert record.get("pid") == session.pid
            assert record["lastSeen"] == session.last_seen
            assert result["presence"] == self.presence(session), (
                f"{session.address}: reported {result['presence']}, "
                f"SPEC 2 says {self.presence(session)}"
            )

    @invariant()
    def the_listing_shows_every_record(self) -> None:
        listed = _ok(self.driver.call("list", all=True))["sessions"]
        assert isinstance(listed, list)
        presence = {
            entry["address"]: entry["presence"] for entry in listed if isinstance(entry, dict)
        }
        assert presence == {s.address: self.presence(s) for s in self.sessions if s.recorded}


def _ok(result: Result) -> Result:
    assert "refused" not in result and "failed" not in result, result
    return result


def _record(result: Result) -> dict[str, Json]:
    record = result["record"]
    assert isinstance(record, dict), f"no record in {result}"
    return record


def _int(value: Json) -> int:
    assert isinstance(value, int), value
    return value


def _strings(value: Json) -> list[str]:
    assert isinstance(value, list)
    return [str(item) for item in value]


RegistryMachine.TestCase.settings = settings(stateful_step_count=30)
TestRegistryMachine = RegistryMachine.TestCase
