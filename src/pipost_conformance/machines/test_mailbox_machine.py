"""One address, several senders, a receiving session and a plain receiver, sweeps
and a clock that jumps (SPEC 1, 3, 5): INV-03, INV-05, INV-06, INV-07, INV-08,
INV-16, INV-17.

Tier: must
Operations: set_clock, advance_clock, process_stop, register, shutdown, send, take,
deliver, peek, count, list, resolve, record, sweep.

A state machine over one session's address, through the driver only (and the
files on disk, whose names and layout are the wire contract), so a conformance
run points it at a port with PIPOST_IMPL. Three processes send to the address
and one floods it to the cap; letters are taken one at a time (``take``) or by
the session's receiver (``deliver``, whose context may refuse its first entries);
the session ends and starts again, time passes by seconds or weeks, sweeps run,
and peek, count, list, resolve and record look.

After every step each accepted message is accounted for: taken + entered +
dropped is 0 while its letter is on disk and 1 once it is gone — gone without
being taken is a loss (INV-05), taken twice or taken and still queued a double
delivery (INV-06). At the end the clock moves past every retry and rate window
and the rest is taken, so that nothing accepted is left unaccounted for. Each
check names its invariant and judges only its own; the machine stops at the first
violation. Crashes inside a receiver are pipost's to show (test_mailbox_crashes.py).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from pipost.address import address_of
from pipost_conformance.client import Json, Result
from pipost_conformance.machines import driving
from pipost_conformance.machines.common import NOW, tree_snapshot
from pipost_conformance.machines.conftest import count_example, count_step
from pipost_conformance.machines.driving import SCRATCH, integer, refusal_code, setup
from pipost_conformance.machines.verdict import SetupFailed, check, violated

MACHINE = "mailbox"


SESSION = "machine-receiver"
ADDRESS = address_of(SESSION)
SENDERS = ("ann", "bob", "cy")
MAILBOX_CAP = 50
SECOND_MS = 1000
WEEK_MS = 7 * 24 * 3600 * SECOND_MS
LATER_MS = 2 * WEEK_MS
"""How far the clock moves before the final drain: past any retry delay and
every loop guard window."""


class MailboxMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        count_example(MACHINE)
        self.base = Path(tempfile.mkdtemp(prefix="pipost-mailbox-", dir=SCRATCH)).resolve()
        self.root = self.base / "post"
        self.inbox = self.root / "inbox" / ADDRESS
        self.driver = driving.new_driver(self.base)
        self._world("set_clock", now=NOW)
        self.accepted: set[str] = set()
        self.taken: Counter[str] = Counter()
        """Per message id: how often take returned it, deliver entered it or dropped it."""
        self.recorded = False
        self.pid: int | None = None
        self.written = 0
        self.whole: set[tuple[str, int, int, int]] = set()
        """Letters read whole, by name, inode, size and mtime."""

    def teardown(self) -> None:
        try:
            # After a failing step the failure is reported as it is; the final drain
            # runs only on a machine that got through every step.
            if sys.exc_info()[1] is None:
                self._everything_is_taken_at_the_end()
        finally:
            shutil.rmtree(self.base, ignore_errors=True)

    def _world(self, op: str, **args: Json) -> Result:
        return setup(self.driver.call(op, **args), op)

    # -- what is on disk (SPEC 1: inbox/<address>/<id>.json) ---------------------------

    def _letters(self) -> list[str]:
        if not self.inbox.is_dir():
            return []
        return sorted(n for n in os.listdir(self.inbox) if n.endswith(".json") and n[0] != ".")

    def _known(self) -> bool:
        return self.recorded or self.inbox.is_dir()

    # -- the session ----------------------------------------------------------------

    @initialize()
    def the_session_starts(self) -> None:
        self._start()

    @precondition(lambda self: self.pid is None)
    @rule()
    def the_session_starts_again(self) -> None:
        self._start()

    def _start(self) -> None:
        self.base.joinpath("work").mkdir(exist_ok=True)
        started = self._world("register", session_id=SESSION, cwd=str(self.base / "work"))
        record = started.get("record")
        pid = record.get("pid") if isinstance(record, dict) else None
        self.pid = integer(pid, "the pid of a new record")
        self.recorded = True

    @precondition(lambda self: self.pid is not None)
    @rule()
    def the_session_ends(self) -> None:
        """A clean shutdown; the process exits. The record stays, offline (INV-14)."""
        if self.pid is None:
            raise SetupFailed("the session of the model has no pid")
        self._world("shutdown", session_id=SESSION)
        self._world("process_stop", pid=self.pid)
        self.pid = None

    # -- senders --------------------------------------------------------------------

    @rule(sender=st.sampled_from(SENDERS), letters=st.integers(1, 4))
    def letters_arrive(self, sender: str, letters: int) -> None:
        for _ in range(letters):
            self._send(sender)

    @rule()
    def senders_fill_the_mailbox(self) -> None:
        """Senders that each send once, until the mailbox refuses: at exactly 50."""
        for _ in range(MAILBOX_CAP + 1):
            if not self._send(f"flood-{self.written}"):
                return
        violated("INV-08", f"{MAILBOX_CAP + 1} sends in a row to {ADDRESS} and none refused")

    def _send(self, sender: str) -> bool:
        """One letter from process ``sender``; False when the send was refused."""
        known, before = self._known(), self._letters()
        # A snapshot only where a refusal is allowed; any other refusal is a violation.
        snapshot = tree_snapshot(self.root) if len(before) >= MAILBOX_CAP or not known else None
        self.written += 1  # distinct bodies: the guard drops only for rate
        result = self.driver.call(
            "send",
            targets=[ADDRESS],
            body=f"{sender} #{self.written}",
            cwd=str(self.base),
            label=sender,
        )
        if "failed" in result:
            raise SetupFailed(f"send to {ADDRESS}: {result}")
        if "refused" in result:
            event("send refused")
            code = refusal_code(result)
            if len(before) >= MAILBOX_CAP:
                check(
                    code == "mailbox_full",
                    "INV-08",
                    f"a send to the full mailbox was refused as {code}",
                )
            elif known:
                violated("INV-08", f"a send with {len(before)} queued was refused: {result}")
            else:  # neither record nor mailbox: pipost's SHOULD is to refuse
                check(
                    code == "unknown_address",
                    "INV-13",
                    f"a send to {ADDRESS} (neither record nor mailbox) was refused as {code}",
                )
            check(
                tree_snapshot(self.root) == snapshot,
                "INV-08",
                f"a refused send changed the folder: {result}",
            )
            return False
        check(
            len(before) < MAILBOX_CAP,
            "INV-08",
            f"a send to {ADDRESS} with {len(before)} queued was accepted",
        )
        receipts = result.get("receipts")
        receipt = receipts[0] if isinstance(receipts, list) and len(receipts) == 1 else None
        message_id = receipt.get("id") if isinstance(receipt, dict) else None
        if not isinstance(message_id, str):
            raise SetupFailed(f"a send answered no receipt with an id: {result}")
        check(
            f"{message_id}.json" in self._letters(),
            "INV-05",
            f"the accepted message {message_id} is not in the mailbox",
        )
        self.accepted.add(message_id)
        return True

    # -- receivers --------------------------------------------------------------------

    @rule()
    def a_plain_receiver_takes_one(self) -> None:
        """The oldest letter (INV-07), once (INV-06); nothing when there is none (INV-05)."""
        letters = self._letters()
        taken = self._world("take", address=ADDRESS)
        message = taken.get("message")
        if not letters:
            check(message is None, "INV-06", f"take of an empty mailbox gave {taken}")
            return
        if not isinstance(message, dict):
            violated("INV-05", f"take gave no message, {len(letters)} letters queued: {taken}")
        message_id = str(message.get("id"))
        check(
            f"{message_id}.json" == letters[0],
            "INV-07",
            f"take gave {message_id}, the oldest letter is {letters[0]}",
        )
        self.taken[message_id] += 1

    @rule(fail=st.integers(0, 2))
    def the_session_takes_its_mail(self, fail: int) -> None:
        """Its receiver delivers oldest first; a context that refuses an entry keeps
        the letter for later."""
        letters = self._letters()
        delivered = self._world("deliver", session_id=SESSION, fail=fail)
        entered = [_entered_id(entry) for entry in _list(delivered, "entered")]
        dropped = [
            str(entry.get("name")).removesuffix(".json")
            for entry in _list(delivered, "dropped")
            if isinstance(entry, dict)
        ]
        check(
            entered == sorted(entered),
            "INV-07",
            f"a deliver entered {entered}, not oldest first",
        )
        for message_id in entered + dropped:
            check(
                f"{message_id}.json" in letters,
                "INV-06",
                f"a deliver took {message_id}, which was not queued",
            )
            self.taken[message_id] += 1
        if dropped:
            event("the loop guard dropped a message")

    # -- time, sweeps, reading ------------------------------------------------------

    @rule(ms=st.one_of(st.integers(0, 60 * SECOND_MS), st.integers(WEEK_MS, 2 * WEEK_MS)))
    def time_passes(self, ms: int) -> None:
        """Seconds, or past the 7 days after which an offline record may be swept."""
        self._world("advance_clock", ms=ms)

    @rule()
    def sweep(self) -> None:
        """Messages outrank tidiness (INV-17): a mailbox that holds mail and the record
        of its session stay."""
        letters = self._letters()
        record = self._world("record", address=ADDRESS).get("record")
        report = self._world("sweep")
        if letters:
            check(
                self._letters() == letters,
                "INV-17",
                f"a sweep changed a mailbox that holds mail: {report}",
            )
            check(
                ADDRESS not in _list(report, "mailboxes_removed"),
                "INV-17",
                f"a sweep removed a mailbox that holds mail: {report}",
            )
            if record is not None:
                check(
                    ADDRESS not in _list(report, "records_removed"),
                    "INV-17",
                    f"a sweep removed the record of a session with mail: {report}",
                )
        if ADDRESS in _list(report, "records_removed"):
            event("sweep removed the record")
            self.recorded = False

    @rule()
    def look(self) -> None:
        """Peek, count, list, resolve and record change nothing on disk (INV-16), and
        say what is there."""
        before = tree_snapshot(self.root)
        letters = _list(self._world("peek", address=ADDRESS), "letters")
        queued = self._world("count", address=ADDRESS)["count"]
        self._world("list", all=True)
        self.driver.call("resolve", handle=SESSION, cwd=str(self.base))
        self._world("record", address=ADDRESS)
        check(tree_snapshot(self.root) == before, "INV-16", "looking changed the folder")
        names = [str(letter.get("name")) for letter in letters if isinstance(letter, dict)]
        check(
            names == self._letters(),
            "INV-16",
            f"peek shows {names}, the mailbox holds {self._letters()}",
        )
        check(queued == len(names), "INV-16", f"count says {queued}, peek shows {len(names)}")

    # -- after every step -------------------------------------------------------------

    @invariant()
    def at_most_fifty(self) -> None:
        count_step(MACHINE)
        letters = self._letters()
        check(len(letters) <= MAILBOX_CAP, "INV-08", f"{len(letters)} letters queued")

    @invariant()
    def letters_are_whole(self) -> None:
        """What a reader finds is a whole message that was accepted, and no deposit
        left its letter in flight (``<id>.json.tmp``) behind. A letter in place is
        never written again, so letters already read whole are not read again."""
        seen = {(name, *_identity(self.inbox / name)) for name in self._letters()}
        if not seen <= self.whole:
            for letter in _list(self._world("peek", address=ADDRESS), "letters"):
                message = letter.get("message") if isinstance(letter, dict) else None
                if not isinstance(message, dict):
                    violated("INV-03", f"a reader found {letter!r}")
                check(
                    message.get("id") in self.accepted,
                    "INV-03",
                    f"a reader found {message.get('id')}, never accepted",
                )
            self.whole |= seen
        in_flight = (
            [n for n in os.listdir(self.inbox) if n.endswith(".tmp")]
            if (self.inbox.is_dir())
            else []
        )
        check(in_flight == [], "INV-03", f"letters left in flight: {in_flight}")

    @invariant()
    def nothing_is_lost(self) -> None:
        on_disk = set(self._letters())
        for message_id in self.accepted:
            if f"{message_id}.json" not in on_disk:
                check(
                    self.taken[message_id] >= 1,
                    "INV-05",
                    f"{message_id} left the mailbox and was neither taken, entered nor dropped",
                )

    @invariant()
    def nothing_is_taken_twice(self) -> None:
        on_disk = set(self._letters())
        for message_id, times in self.taken.items():
            check(times <= 1, "INV-06", f"{message_id} was taken {times} times")
            check(
                f"{message_id}.json" not in on_disk,
                "INV-06",
                f"{message_id} was taken and is still queued",
            )

    def _everything_is_taken_at_the_end(self) -> None:
        """Past every retry delay and rate window, the plain receiver takes what is
        left; then every accepted message was taken, entered or dropped once."""
        self._world("advance_clock", ms=LATER_MS)
        for _ in range(MAILBOX_CAP + 1):
            if not self._letters():
                break
            self.a_plain_receiver_takes_one()
            self.nothing_is_taken_twice()  # as after any take: a letter left is INV-06's
        check(self._letters() == [], "INV-05", f"letters left after the end: {self._letters()}")
        self.nothing_is_lost()
        self.nothing_is_taken_twice()


def _identity(path: Path) -> tuple[int, int, int]:
    info = os.stat(path)
    return info.st_ino, info.st_size, info.st_mtime_ns


def _entered_id(entry: Json) -> str:
    message = entry.get("message") if isinstance(entry, dict) else None
    if not isinstance(message, dict) or not isinstance(message.get("id"), str):
        raise SetupFailed(f"deliver answered an entry that is no message: {entry!r}")
    return str(message["id"])


def _list(result: Result, key: str) -> list[Json]:
    value = result.get(key)
    if not isinstance(value, list):
        raise SetupFailed(f"{key} is not a list: {result}")
    return value


TestMailboxMachine = MailboxMachine.TestCase
TestMailboxMachine.settings = settings(stateful_step_count=30)
