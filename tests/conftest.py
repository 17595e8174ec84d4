"""Shared pytest configuration: Hypothesis profiles, the machine's time zone, the
``pi-post driver`` fixture, and each failure named as soon as it is known.

Profiles:
- ``gate`` (default): quick enough for every CI run, and the same examples every run.
- ``thorough``: many more examples; select with ``HYPOTHESIS_PROFILE=thorough``
  (or ``nox -s thorough``).
"""

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from pipost_conformance.client import SubprocessDriver
from pipost_conformance.machines import conftest as machines
from tests.helpers import PIPOST_DRIVER

# The gate's verdicts are the same from run to run (and for mutation testing, from
# mutant to mutant): each test draws the examples its own hash seeds, and nothing is
# replayed from an earlier run's database. The thorough profile keeps exploring, even
# where Hypothesis, seeing a CI variable, would make its default profile derandomized.
settings.register_profile(
    "gate",
    max_examples=50,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough",
    max_examples=1000,
    deadline=None,
    derandomize=False,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "gate"))


TIME_ZONES = ("UTC0", "<+1345>-13:45")
"""UTC, and a zone far from it whose offset has minutes and moves the date (POSIX
rules, so no time zone database is needed): what pipost prints is UTC in both."""


@pytest.fixture(params=TIME_ZONES)
def time_zone(request: pytest.FixtureRequest) -> Iterator[str]:
    """The machine's time zone (TZ), for a test of a time pipost prints: it runs
    once under each of TIME_ZONES, so the gate does not depend on where it runs."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = request.param
    time.tzset()
    try:
        yield request.param
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


SHORT_LOCK_WAIT_S = 0.2


@pytest.fixture
def short_bound(monkeypatch: pytest.MonkeyPatch) -> float:
    """pipost's bound on a lock wait (files.LOCK_WAIT_S, a few seconds), shortened for
    a test in this process whose lock is held by a stopped process."""
    from pipost import files

    monkeypatch.setattr(files, "LOCK_WAIT_S", SHORT_LOCK_WAIT_S)
    return SHORT_LOCK_WAIT_S


@pytest.fixture
def pipost_driver(tmp_path: Path) -> Iterator[SubprocessDriver]:
    """``pi-post driver`` through the kit's client, opened on a fresh root."""
    driver = SubprocessDriver(PIPOST_DRIVER, timeout_s=30)
    driver.open(tmp_path / "post", home=str(tmp_path))
    yield driver
    driver.close()


def pytest_configure(config: pytest.Config) -> None:
    machines.pytest_configure(config)  # the kit's marker, for tests/invariants' machines
    if not hasattr(config, "workerinput"):  # the process that prints (pytest-xdist)
        config.pluginmanager.register(FailuresAsTheyHappen(config), "failures-as-they-happen")


class FailuresAsTheyHappen:
    """Prints "FAILED <test> - <message>" the moment a test fails, as the summary
    at the end would: a gate run takes minutes, and its details come only then."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(trylast=True)  # after the reporter's own "F"
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if not report.failed or terminal is None:
            return
        if not terminal.currentfspath:  # pytest-xdist's line of dots names no file
            terminal.write("\n")
        crash = getattr(report.longrepr, "reprcrash", None)
        message = crash.message.splitlines()[0] if crash is not None and crash.message else ""
        kind = "FAILED" if report.when == "call" else f"ERROR at {report.when} of"
        terminal.write_line(f"{kind} {report.nodeid} - {message}", red=True)
