"""The machines' verdicts: each names the invariant it checks, and a defect of one
invariant fails that one only. Each case runs a machine against pipost with one
deliberate fault (an in-process driver with one operation bent) and reads the
failures Hypothesis reports: every one must start with the invariant's id in
brackets. Also the verdict helpers themselves, and the skip of a machine whose
operations the implementation does not offer.

These test the kit on pipost; they are not a check of a port."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from pipost import driver
from pipost.driver import InProcessDriver, Result
from pipost.session import SWEEP_AFTER_MS
from tests.invariants import test_registry_machine
from tests.invariants.verdict import SetupFailed, check, violated

SEARCH = settings(
    max_examples=200,
    stateful_step_count=30,
    deadline=None,
    database=None,
    derandomize=True,
    report_multiple_bugs=True,
    suppress_health_check=list(HealthCheck),
)


def failures_of(machine: type[RuleBasedStateMachine]) -> list[str]:
    """The messages of every failure Hypothesis reports for ``machine``."""
    try:
        run_state_machine_as_test(machine, settings=SEARCH)
    except BaseException as raised:  # noqa: BLE001 - every kind of failure is the answer
        return [str(error) for error in _leaves(raised)]
    return []


def _leaves(raised: BaseException) -> Iterator[BaseException]:
    if isinstance(raised, BaseExceptionGroup):
        for inner in raised.exceptions:
            yield from _leaves(inner)
    else:
        yield raised


def assert_fails_only(machine: type[RuleBasedStateMachine], invariant: str) -> None:
    found = failures_of(machine)
    assert found, f"the machine passed a driver that breaks {invariant}"
    assert all(message.startswith(f"[{invariant}] ") for message in found), found


# -- drivers with one fault each ------------------------------------------------------------


class StalledLooksLive(InProcessDriver):
    """Reports a stalled session as live: presence dishonest (INV-15), nothing else."""

    def _session(self, candidate: object) -> Result:
        found = super()._session(candidate)  # type: ignore[arg-type]
        if found["presence"] == "stalled":
            found["presence"] = "live"
        return found


class ShutdownKeepsThePid(InProcessDriver):
    """A shutdown that only refreshes the record: it keeps the pid (INV-14)."""

    def op_shutdown(self, session_id: str) -> Result:
        return self.op_heartbeat(session_id)


class SweepsTooEarly(InProcessDriver):
    """Sweeps offline records unseen for a day rather than a week (INV-17)."""

    def op_sweep(self) -> Result:
        now = self.now
        self.now += SWEEP_AFTER_MS - 24 * 3600 * 1000
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
    monkeypatch.delenv("PIPOST_IMPL", raising=False)
    monkeypatch.setattr(driver, "InProcessDriver", faulty)
    assert_fails_only(test_registry_machine.RegistryMachine, invariant)


def test_the_registry_machine_passes_pipost() -> None:
    assert failures_of(test_registry_machine.RegistryMachine) == []


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
