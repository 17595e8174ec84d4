"""Power loss at every point (INV-03, INV-04): a deposit that returned is on disk whole,
and no reader can ever find half a message, whatever was cut. On pipost alone, not a
check of a port: it records pipost's own writes and flushes, which no driver operation
can show.

A state machine drives the real mailbox, receiving session, registry and sweep over
a recording layer (tests/invariants/fsmodel.py); after every step, each new cut of
the recorded operations is judged by the model of what survives power loss. The
model is shown to catch a deposit that neither flushes its file nor its folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from pipost import format, mailbox, registry, session
from pipost.address import address_of
from pipost.host import Delivery, Host
from pipost.message import Message, Sender, encode, new_message
from pipost.post import Post
from pipost_conformance.machines.conftest import count_example, count_step
from tests.helpers import DAY_MS, NOW, FakeProcessTable, FixedClock, deposit
from tests.invariants.fsmodel import (
    DirNode,
    FileNode,
    Flush,
    Link,
    PowerLossModel,
    Recorder,
    Returned,
    every_cut,
)

RECEIVER = "power-loss-receiver"
ADDRESSES = (address_of(RECEIVER), address_of("power-loss-no-record"))
"""A mailbox with a receiving session, and one without a record (swept when empty)."""

PROCESS_TOKEN = "boot-1"

SCRATCH = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
"""Where each example's root goes: a memory filesystem where there is one, as every
folder flush on a disk costs milliseconds. What survives power loss is the model's
judgement from the recorded operations, not the disk's."""


class Transcript:
    """A context that keeps what entered it (a transcript fsyncs each entry): the
    model learns of every entry through the recorder."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.ids: set[str] = set()

    def holds(self, message_id: str) -> bool | None:
        return message_id in self.ids

    def enter(self, delivery: Delivery) -> bool:
        self.ids.add(delivery.message.id)
        self.recorder.entered(delivery.message.id)
        return True


class PowerLossMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        count_example("power loss")
        self.base = Path(tempfile.mkdtemp(prefix="pipost-power-", dir=SCRATCH))
        self.root = self.base / "post"
        self.recorder = Recorder(self.base)
        self.patches = self.recorder.install()
        self.model = PowerLossModel(str(self.base))
        self.judged = 0
        self.clock = FixedClock(NOW)
        self.processes = FakeProcessTable()
        self.post = Post(self.root, clock=self.clock, processes=self.processes, receipt_wait=0.0)
        self.transcript = Transcript(self.recorder)
        self.host: Host | None = None
        self.sent = 0

    def teardown(self) -> None:
        try:
            if self.host is not None:
                self.host.stop()
        finally:
            self.patches.close()
            shutil.rmtree(self.base, ignore_errors=True)

    # -- senders --------------------------------------------------------------------

    @initialize()
    def first_letter(self) -> None:
        self.deposit(ADDRESSES[0])

    @rule(address=st.sampled_from(ADDRESSES))
    def deposit(self, address: str) -> None:
        self.sent += 1
        # One sender per letter: the loop guard never drops one (a drop is no entry).
        message = new_message(
            Sender(kind="process", name=f"sender-{self.sent}"),
            f"letter {self.sent}",
            self.clock(),
            nonce=f"{self.sent:08x}",
        )
        try:
            path = deposit(self.root, address, message)
        except mailbox.MailboxAtCap:
            return
        self.recorder.returned(message.id, path, encode(message))

    # -- the receiving session --------------------------------------------------------

    @precondition(lambda self: self.host is None)
    @rule()
    def start_receiver(self) -> None:
        self.processes.tokens[os.getpid()] = PROCESS_TOKEN
        self.host = Host(self.post, RECEIVER, str(self.base), self.transcript, kernel_events=False)
        self.host.start()

    @precondition(lambda self: self.host is not None)
    @rule()
    def drain(self) -> None:
        assert self.host is not None
        self.host.drain()

    @precondition(lambda self: self.host is not None)
    @rule()
    def stop_receiver(self) -> None:
        assert self.host is not None
        self.host.stop()
        self.host = None
        self.processes.tokens.clear()

    @rule(address=st.sampled_from(ADDRESSES))
    def take_one_letter(self, address: str) -> None:
        """A bare receiver (one without a session record) enters the oldest letter and
        disposes of it."""
        taken = self._claim_oldest(address)
        if taken is not None:
            claim, message = taken
            self.transcript.enter(Delivery(message, format.frame(message), wake=True))
            claim.dispose()

    @rule(address=st.sampled_from(ADDRESSES), after_entry=st.booleans())
    def receiver_dies_holding_a_letter(self, address: str, after_entry: bool) -> None:
        """It dies before the unlink, before or after the entry: the kernel releases its
        lock and the letter stays."""
        taken = self._claim_oldest(address)
        if taken is not None:
            claim, message = taken
            if after_entry:
                self.transcript.enter(Delivery(message, format.frame(message), wake=True))
            claim.release()

    def _claim_oldest(self, address: str) -> tuple[mailbox.Claim, Message] | None:
        claim = next(mailbox.claims(self.root, address), None)  # the oldest one free
        if claim is None:
            return None
        assert isinstance(claim.content, Message), claim.content
        return claim, claim.content

    # -- tidying and time -------------------------------------------------------------

    @rule(days=st.sampled_from([0, 1, 8]))
    def time_passes(self, days: int) -> None:
        self.clock.now += days * DAY_MS + 1

    @rule()
    def sweep(self) -> None:
        report = self.post.sweep()
        for address in report.records_removed:
            event(f"sweep removed the record of {address}")
        for address in report.mailboxes_removed:
            event(f"sweep removed the mailbox {address}")

    # -- the power cut ----------------------------------------------------------------

    @invariant()
    def every_cut_survives_power_loss(self) -> None:
        count_step("power loss")
        ops = self.recorder.ops
        while self.judged < len(ops):
            self.model.apply(ops[self.judged])
            self.judged += 1
            after = self.model.check()
            assert after.ok, f"power lost after operation {self.judged}: {after}"


TestPowerLoss = PowerLossMachine.TestCase
TestPowerLoss.settings = settings(stateful_step_count=30)


# -- the model catches what it is there to catch ----------------------------------------


def _deposit_recorded(base: Path, *, durable: bool) -> tuple[Recorder, str]:
    recorder = Recorder(base)
    message = new_message(Sender(kind="process", name="process:cut"), "hello", NOW)
    with recorder.install():
        path = deposit(base / "post", ADDRESSES[0], message, durable=durable)
    recorder.returned(message.id, path, encode(message))
    return recorder, path


def _replayed(base: Path, recorder: Recorder) -> PowerLossModel:
    model = PowerLossModel(str(base))
    for op in recorder.ops:
        model.apply(op)
    return model


def test_a_deposit_that_flushes_nothing_is_lost_to_power_loss(tmp_path: Path) -> None:
    recorder, letter = _deposit_recorded(tmp_path, durable=False)
    after = _replayed(tmp_path, recorder).check()
    assert after.lost == (str(letter),)
    assert after.partial == (str(letter),)


def test_a_durable_deposit_survives_a_cut_anywhere(tmp_path: Path) -> None:
    recorder, letter = _deposit_recorded(tmp_path, durable=True)
    assert [verdict for _, verdict in every_cut(tmp_path, recorder.ops) if not verdict.ok] == []
    assert str(letter) in _replayed(tmp_path, recorder).durable_files()


def test_a_rename_is_durable_only_once_its_folder_is_flushed(tmp_path: Path) -> None:
    folder = (str(tmp_path), 0)
    letter = FileNode(b"{}", durable=True)
    model = PowerLossModel(str(tmp_path))
    model.apply(Link(folder, "a.json", letter))
    model.apply(Returned("a", str(tmp_path / "a.json"), b"{}"))
    assert model.check().lost == (str(tmp_path / "a.json"),)
    model.apply(Flush(folder))
    assert model.check().ok
    assert model.durable_files() == {str(tmp_path / "a.json"): letter}


def test_a_new_folder_is_durable_only_once_its_parent_is_flushed(tmp_path: Path) -> None:
    base = (str(tmp_path), 0)
    inbox = (str(tmp_path / "inbox"), 1)
    letter = FileNode(b"{}", durable=True)
    model = PowerLossModel(str(tmp_path))
    model.apply(Link(base, "inbox", DirNode(inbox)))
    model.apply(Link(inbox, "a.json", letter))
    model.apply(Flush(inbox))
    assert model.durable_files() == {}
    model.apply(Flush(base))
    assert model.durable_files() == {str(tmp_path / "inbox" / "a.json"): letter}


def test_a_record_replaced_in_place_is_whole_at_every_cut(tmp_path: Path) -> None:
    """The registry replaces a record by a rename over it: old or new, never half."""
    recorder = Recorder(tmp_path)
    root = tmp_path / "post"
    with recorder.install():
        record = registry.register(root, RECEIVER, str(tmp_path), NOW, pid=1)
        registry.heartbeat(root, record, NOW + 30_000)
    assert [verdict for _, verdict in every_cut(tmp_path, recorder.ops) if not verdict.ok] == []
    durable = _replayed(tmp_path, recorder).durable_files()
    record_file = durable[str(registry.record_path(root, address_of(RECEIVER)))]
    assert session.parse(record_file.data) == registry.replace_last_seen(record, NOW + 30_000)
