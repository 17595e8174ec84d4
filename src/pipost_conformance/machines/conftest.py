"""Shared by the state machines: each one counts the examples (runs) and steps it
took, and the counts are printed at the end of the pytest run, so that a gate
run and a thorough run can be compared by what they actually explored."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, settings

from pipost_conformance.machines.driving import missing_operations, operations_of

EXAMPLES: Counter[str] = Counter()
STEPS: Counter[str] = Counter()


def count_example(machine: str) -> None:
    """Call from the machine's __init__: one more example (a fresh run)."""
    EXAMPLES[machine] += 1


def count_step(machine: str) -> None:
    """Call from every rule (or from one @invariant, which runs after each step)."""
    STEPS[machine] += 1


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Under pytest-xdist the machines run in worker processes: each hands its counts
    to the controlling process, which prints the sum (pytest_testnodedown)."""
    to_controller = getattr(session.config, "workeroutput", None)
    if to_controller is not None:
        to_controller["machines"] = {"examples": dict(EXAMPLES), "steps": dict(STEPS)}


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, which may be absent
def pytest_testnodedown(node: object, error: object) -> None:
    counts = getattr(node, "workeroutput", {}).get("machines")
    if counts:
        EXAMPLES.update(counts["examples"])
        STEPS.update(counts["steps"])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not EXAMPLES:
        return
    terminalreporter.section("state machines: examples and steps explored")
    for machine in sorted(EXAMPLES):
        terminalreporter.write_line(
            f"{machine}: {EXAMPLES[machine]} examples, {STEPS[machine]} steps"
        )


# A conformance run (pi-post conformance) drives the machines through another
# implementation, over a pipe: it asks for this smaller budget with
# --hypothesis-profile=conformance.
settings.register_profile(
    "conformance",
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "operations(*ops): the driver operations this test calls, where they are fewer "
        "than its module's docstring names",
    )


@pytest.fixture(autouse=True)
def offered_operations(request: pytest.FixtureRequest) -> None:
    """A machine that calls an operation the implementation does not offer skips
    itself, naming the operations (read from ``capabilities`` once per test). It
    needs what its module's docstring names, or what its ``operations`` mark says."""
    marked = request.node.get_closest_marker("operations")
    needed = list(marked.args) if marked else operations_of(request.module.__doc__)
    if needed is None:
        return
    missing = missing_operations(needed)
    if missing:
        pytest.skip("the implementation does not offer: " + ", ".join(missing))
