"""The machines' verdicts: each names the invariant it checks, and a defect of one
invariant fails that one only. Each case runs a machine against pipost with one
deliberate fault (an in-process driver with one operation bent) and reads the
failures Hypothesis reports: every one must start with the invariant's id in
brackets. Also the verdict helpers themselves, and the skip of a machine whose
operations the implementation does not offer.

These test the kit on pipost; they are not a check of a port."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from pipost import driver, host, mailbox, message, policy, refusals
from pipost.driver import InProcessDriver
from pipost.driver_protocol import DEFAULT_NOW, Json
from pipost.post import Refused
from pipost.session import SWEEP_AFTER_MS
from pipost_conformance.machines import (
    test_hostile_input,
    test_loops_machine,
    test_mailbox_machine,
    test_registry_machine,
    test_resolution_properties,
)
from pipost_conformance.machines.driving import IMPLEMENTATION, missing_operations, operations_of
from pipost_conformance.machines.verdict import SetupFailed, check, violated
from pipost_conformance.runner import MACHINES
from tests.conformance.broken_impl import BrokenDriver

REPO = Path(__file__).resolve().parents[2]

SEARCH = settings(
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    database=None,
    derandomize=True,
    phases=[Phase.generate],  # the first failure is the verdict; shrinking it keeps its check
    suppress_health_check=list(HealthCheck),
)


def failures_of(machine: type[RuleBasedStateMachine] | Callable[[], None]) -> list[str]:
    """The messages of every failure Hypothesis reports for ``machine`` (a state
    machine, or a property test)."""
    try:
        if isinstance(machine, type):
            run_state_machine_as_test(machine, settings=SEARCH)
        else:
            # A @given test keeps the settings of its decoration; these replace them
            # for this run (Hypothesis has no public way to, once decorated).
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(machine, "_hypothesis_internal_use_settings", SEARCH)
                machine()
    except Exception as raised:
        return [str(error) for error in _leaves(raised)]
    return []


def _leaves(raised: BaseException) -> Iterator[BaseException]:
    if isinstance(raised, BaseExceptionGroup):
        for inner in raised.exceptions:
            yield from _leaves(inner)
    else:
        yield raised


def assert_fails_only(
    machine: type[RuleBasedStateMachine] | Callable[[], None], invariant: str
) -> None:
    found = failures_of(machine)
    assert found, f"the machine passed a driver that breaks {invariant}"
    assert all(message.startswith(f"[{invariant}] ") for message in found), found


def drive(monkeypatch: pytest.MonkeyPatch, faulty: type[InProcessDriver]) -> None:
    """The machines get ``faulty`` in this process, whatever port the run names."""
    monkeypatch.delenv(IMPLEMENTATION, raising=False)
    monkeypatch.setattr(driver, "InProcessDriver", faulty)


# -- drivers with one fault each ------------------------------------------------------------
# (Results are spelt dict[str, Json]: the driver reads the operations' type hints in
# this module's names.)


class StalledLooksLive(InProcessDriver):
    """Reports a stalled session as live: presence dishonest (INV-15), nothing else."""

    def _session(self, candidate: object) -> dict[str, Json]:
        found = super()._session(candidate)  # type: ignore[arg-type]
        if found["presence"] == "stalled":
            found["presence"] = "live"
        return found


class ShutdownKeepsThePid(InProcessDriver):
    """A shutdown that only refreshes the record: it keeps the pid (INV-14)."""

    def op_shutdown(self, session_id: str) -> dict[str, Json]:
        return self.op_heartbeat(session_id)


class SweepsTooEarly(InProcessDriver):
    """Sweeps offline records however recently they were seen (INV-17)."""

    def op_sweep(self) -> dict[str, Json]:
        now = self.now
        self.now += SWEEP_AFTER_MS + 1
        try:
            return super().op_sweep()
        finally:
            self.now = now


@pytest.mark.parametrize(
    ("faulty", "invariant"),
    [(StalledLooksLive, "INV-15"), (ShutdownKeepsThePid, "INV-14"), (SweepsTooEarly, "INV-17")],
)
def test_the_registry_machine_fails_only_the_invariant_a_fault_breaks(
    monkeypatch: pytest.MonkeyPatch, faulty: type[InProcessDriver], invariant: str
) -> None:
    drive(monkeypatch, faulty)
    assert_fails_only(test_registry_machine.RegistryMachine, invariant)


class PrefixesRefused(InProcessDriver):
    """Resolve refuses an id prefix (SPEC 4 step 3) that is not a whole id (INV-13);
    a send still resolves it."""

    def op_resolve(self, handle: str, cwd: str, home: str | None = None) -> dict[str, Json]:
        if re.fullmatch(r"[0-9a-fA-F]{8}[0-9a-fA-F-]*", handle) and handle not in (
            "0195f7e0",
            "0195f7e1",
            "deadbeef",
            "c0ffee00",
        ):
            raise Refused(refusals.UnknownTarget(handle, ()))
        return super().op_resolve(handle, cwd, home)


class NineTargetsSent(InProcessDriver):
    """A send to more than 8 handles goes to the first 8 instead of being refused."""

    def op_send(
        self,
        targets: list[str],
        body: str,
        cwd: str,
        label: str | None = None,
        session: str | None = None,
        reply_to: str | None = None,
        home: str | None = None,
    ) -> dict[str, Json]:
        return super().op_send(targets[:8], body, cwd, label, session, reply_to, home)


class TakesBareAddresses(InProcessDriver):
    """What pi-post 0.7 does with an address no session registered: resolve shows it
    bare (no record), where pipost refuses (its SHOULD)."""

    def op_resolve(self, handle: str, cwd: str, home: str | None = None) -> dict[str, Json]:
        try:
            return super().op_resolve(handle, cwd, home)
        except Refused as refused:
            if not isinstance(refused.reason, refusals.UnknownAddress):
                raise
            return {"address": handle, "record": None, "presence": None, "queued": 0}


class BareAddressMisread(TakesBareAddresses):
    """Shows an unregistered address as another one (INV-12: that is a guess)."""

    def op_resolve(self, handle: str, cwd: str, home: str | None = None) -> dict[str, Json]:
        found = super().op_resolve(handle, cwd, home)
        if found["record"] is None and found["address"] == handle:
            found["address"] = "s-000000000001"
        return found


RESOLUTION = test_resolution_properties


@pytest.mark.parametrize(
    ("faulty", "invariant", "prop"),
    [
        (PrefixesRefused, "INV-13", RESOLUTION.test_every_handle_of_a_session_resolves_to_it),
        (PrefixesRefused, "INV-13", RESOLUTION.test_resolution_never_guesses),
        (NineTargetsSent, "INV-12", RESOLUTION.test_a_send_is_atomic_and_capped),
    ],
    ids=["prefix refused, every handle", "prefix refused, never guesses", "nine targets"],
)
def test_the_resolution_properties_fail_only_the_invariant_a_fault_breaks(
    monkeypatch: pytest.MonkeyPatch,
    faulty: type[InProcessDriver],
    invariant: str,
    prop: Callable[[], None],
) -> None:
    drive(monkeypatch, faulty)
    assert_fails_only(prop, invariant)


@pytest.mark.parametrize(
    "prop",
    [
        RESOLUTION.test_resolution_never_guesses,
        RESOLUTION.test_resolve_is_total,
    ],
    ids=["never guesses", "total"],
)
def test_taking_an_unregistered_address_as_it_is_passes_what_is_must(
    monkeypatch: pytest.MonkeyPatch, prop: Callable[[], None]
) -> None:
    """Refusing an address with neither record nor mailbox is a SHOULD (SPEC 4):
    the MUST properties accept a port that takes it as it is, and not one that
    shows it as something else."""
    drive(monkeypatch, TakesBareAddresses)
    assert failures_of(prop) == []
    if prop is RESOLUTION.test_resolution_never_guesses:
        monkeypatch.setattr(driver, "InProcessDriver", BareAddressMisread)
        assert_fails_only(prop, "INV-12")


def test_a_fault_of_resolve_is_not_held_against_a_send(monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch is judged by SPEC 4, not by what the implementation's resolve said."""
    drive(monkeypatch, PrefixesRefused)
    assert failures_of(RESOLUTION.test_a_send_is_atomic_and_capped) == []


class NoLoopGuard(InProcessDriver):
    """Its receiving sessions admit every message: no rate, no duplicate window."""

    def _receiver(self, receiving: driver.Receiving) -> host.Host:
        receiver = super()._receiver(receiving)
        receiver._guard = AdmitsAll()
        return receiver


class AdmitsAll(policy.LoopGuard):
    def judge(self, sender: str, body: str, now: int) -> policy.Admission:
        return policy.DELIVER


def test_the_loops_machine_fails_inv_18_without_a_loop_guard(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    drive(monkeypatch, NoLoopGuard)
    assert_fails_only(test_loops_machine.LoopsMachine, "INV-18")


class NewestFirst(InProcessDriver):
    """take gives the newest letter rather than the oldest (INV-07)."""

    def op_take(self, address: str) -> dict[str, Json]:
        claims = list(mailbox.claims(self.root, address))
        if not claims:
            return {"message": None, "set_aside": []}
        *older, newest = claims
        for claim in older:
            claim.release()
        newest.dispose()
        assert isinstance(newest.content, message.Message)
        return {"message": message.to_json(newest.content), "set_aside": []}


class TakeLeavesTheLetter(InProcessDriver):
    """take gives the oldest message and leaves its letter queued (INV-06)."""

    def op_take(self, address: str) -> dict[str, Json]:
        for claim in mailbox.claims(self.root, address):
            claim.release()
            assert isinstance(claim.content, message.Message)
            return {"message": message.to_json(claim.content), "set_aside": []}
        return {"message": None, "set_aside": []}


class PeekTouches(InProcessDriver):
    """peek marks the mailbox folder as read by touching it (INV-16)."""

    def op_peek(self, address: str) -> dict[str, Json]:
        letters = super().op_peek(address)
        inbox = mailbox.inbox_of(self.root, address)
        if os.path.isdir(inbox):
            os.utime(inbox, ns=(1, 1))
        return letters


UNLINK_FIRST = functools.partial(
    BrokenDriver, now=DEFAULT_NOW, faults=frozenset({"unlink-first"}), lacks=frozenset()
)


@pytest.mark.parametrize(
    ("faulty", "invariant"),
    [
        (UNLINK_FIRST, "INV-05"),
        (NewestFirst, "INV-07"),
        (TakeLeavesTheLetter, "INV-06"),
        (PeekTouches, "INV-16"),
    ],
    ids=["unlink first", "newest first", "take leaves the letter", "peek touches"],
)
def test_the_mailbox_machine_fails_only_the_invariant_a_fault_breaks(
    monkeypatch: pytest.MonkeyPatch, faulty: type[InProcessDriver], invariant: str
) -> None:
    drive(monkeypatch, faulty)
    assert_fails_only(test_mailbox_machine.MailboxMachine, invariant)


def test_the_mailbox_machine_fails_inv_08_when_the_cap_is_51(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(IMPLEMENTATION, raising=False)
    monkeypatch.setattr(mailbox, "CAP", mailbox.CAP + 1)
    assert_fails_only(test_mailbox_machine.MailboxMachine, "INV-08")


def leaves_it_in_place(post: object, claim: mailbox.Claim, reason: str) -> str:
    """A set-aside that only lets go of the letter: it stays in the mailbox."""
    claim.release()
    return reason


def test_the_hostile_mailbox_fails_inv_10_when_bad_letters_stay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(IMPLEMENTATION, raising=False)
    monkeypatch.setattr(host, "set_aside", leaves_it_in_place)
    assert_fails_only(test_hostile_input.test_a_receiver_drains_a_hostile_mailbox, "INV-10")


# -- the helpers ------------------------------------------------------------------------------


def test_a_violation_starts_with_its_id_in_brackets() -> None:
    with pytest.raises(AssertionError) as failure:
        violated("INV-08", "51 queued")
    assert str(failure.value) == "[INV-08] 51 queued"
    with pytest.raises(AssertionError) as failure:
        check(0, "INV-15", "live, expected offline")
    assert str(failure.value) == "[INV-15] live, expected offline"
    check(1, "INV-15", "holds")


@pytest.mark.parametrize("wrong", ["INV-8", "inv-08", "INV-08 INV-09", "[INV-08]", ""])
def test_an_id_that_is_not_one_is_a_mistake_even_when_the_check_holds(wrong: str) -> None:
    with pytest.raises(ValueError, match="not an invariant id"):
        check(True, wrong, "whatever")
    with pytest.raises(ValueError, match="not an invariant id"):
        violated(wrong, "whatever")


def test_a_setup_failure_is_no_assertion() -> None:
    assert not issubclass(SetupFailed, AssertionError)


# -- operations not offered ---------------------------------------------------------------


class Lacking(InProcessDriver):
    def op_capabilities(self) -> dict[str, Json]:
        offered = super().op_capabilities()["ops"]
        assert isinstance(offered, list)
        return {"ops": [op for op in offered if op not in ("deliver", "process_recycle")]}


def test_the_missing_operations_are_those_capabilities_leave_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(IMPLEMENTATION, raising=False)
    assert missing_operations(["send", "deliver", "process_recycle"]) == []
    monkeypatch.setattr(driver, "InProcessDriver", Lacking)
    assert missing_operations(["send", "deliver", "process_recycle"]) == [
        "deliver",
        "process_recycle",
    ]


def test_a_machine_skips_itself_naming_what_a_port_does_not_offer() -> None:
    """Against a port without process_recycle, the registry machine is skipped with
    the reason, rather than failing on the operation it cannot call."""
    port = f"{sys.executable} tests/conformance/broken_impl.py --fault oversize-body"
    environment = os.environ | {IMPLEMENTATION: f"{port} --lacks process_recycle"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-rps", str(test_registry_machine.__file__)],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    outcomes = [line for line in done.stdout.splitlines() if line.startswith(("PASSED", "SKIP"))]
    assert len(outcomes) == 1, done.stdout
    assert outcomes[0].startswith("SKIPPED"), done.stdout
    assert outcomes[0].endswith(": the implementation does not offer: process_recycle"), outcomes


# -- what each module says ----------------------------------------------------------------

MODULES = sorted(MACHINES.glob("test_*.py")) + sorted(Path(__file__).parent.glob("test_*.py"))
THROUGH_THE_DRIVER = [path for path in MODULES if IMPLEMENTATION in path.read_text()]


def test_the_machines_through_the_driver_are_the_five_the_kit_ships() -> None:
    """A machine of pipost's own tests that took its driver from IMPLEMENTATION would
    never reach a porter: those that do are the kit's (machines/), and only they."""
    assert [path for path in MODULES if path.parent == MACHINES] == THROUGH_THE_DRIVER
    assert [path.stem for path in THROUGH_THE_DRIVER] == [
        "test_hostile_input",
        "test_loops_machine",
        "test_mailbox_machine",
        "test_registry_machine",
        "test_resolution_properties",
    ]


@pytest.mark.parametrize("path", THROUGH_THE_DRIVER, ids=lambda path: path.stem)
def test_a_machine_says_its_invariants_tier_and_operations(path: Path) -> None:
    text = path.read_text()
    docstring = text.split('"""')[1]
    assert re.search(r"INV-\d\d", docstring), "its invariants"
    assert re.search(r"^Tier: (must|should)$", docstring, re.MULTILINE), "its tier line"
    operations = operations_of(docstring)
    assert operations, "its operations"
    called = set(re.findall(r'(?:call|_world|setup)\(\s*"(\w+)"', text))
    called |= set(re.findall(r'driver\.call\(\s*"(\w+)"', text))
    assert called <= set(operations), f"calls {called - set(operations)} it does not name"
    marked = set(re.findall(r'"(\w+)"', " ".join(re.findall(r"mark\.operations\(([^)]*)\)", text))))
    assert marked <= set(operations), f"marks {marked - set(operations)} it does not name"
    assert "from pipost_conformance.machines import driving" in text, "its driver: driving.py"


def test_operations_are_read_from_their_paragraph() -> None:
    doc = "Title: INV-01.\n\nTier: must\nOperations: send, take,\ndeliver.\n\nMore text."
    assert operations_of(doc) == ["send", "take", "deliver"]
    assert operations_of("No operations here.") is None
