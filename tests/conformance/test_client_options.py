"""The kit's --validate and --timeout reach the transport (SPEC 11;
docs/conformance.md): a shim whose answers break the schema makes its scenario
err under --validate, naming the operation and the JSON path; a call slower than
--timeout times out."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipost.driver import InProcessDriver
from pipost_conformance import client
from pipost_conformance.client import SubprocessDriver, ValidatingDriver, open_driver
from pipost_conformance.runner import FEATURES

REPO = Path(__file__).resolve().parents[2]
ADDRESSES = str(FEATURES / "addresses.feature")
SCENARIO = [ADDRESSES, "--name", "every vector of the addresses"]
"""A scenario of many address_of calls whose step reads only each answer's address."""
RUNNER = [sys.executable, "-m", "pipost", "conformance"]

SHIM = """
import sys, time
from pathlib import Path
from pipost.driver import InProcessDriver, serve

SLOW_FOR = [float(sys.argv[1])]  # the first address_of takes this long


class Shim(InProcessDriver):
    def call(self, op, **args):
        result = super().call(op, **args)
        if op == "address_of":
            time.sleep(SLOW_FOR.pop() if SLOW_FOR else 0)
            result["checksum"] = 7  # not in the protocol; the steps never look
        return result

serve(sys.stdin, sys.stdout, lambda root, home, now: Shim(root, home=home, now=now))
"""


SLOW_S = 4
"""A slow first call, which passes where no bound is set."""
HANG_S, TIMEOUT_S = 3600, 15
"""A call that outlasts the bound however fast the machine; a bound loose enough for
a loaded machine to start the shim within it (open is timed too): 3 s was not, with
the shim under coverage on 2 cores at load 9 (the run broke, exit 2, instead of
timing the call out). The bounded runs wait the bound out, idle."""


def shim(tmp_path: Path, sleep_s: float) -> str:
    path = tmp_path / "shim.py"
    path.write_text(SHIM, encoding="utf-8")
    return f"{sys.executable} {path} {sleep_s}"


def behave(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "behave", "--format", "plain", "--no-capture", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PIPOST_VALIDATE": "", "PIPOST_TIMEOUT": "", **(env or {})},
    )


def test_validate_makes_a_scenario_err_on_an_answer_outside_the_schema(tmp_path: Path) -> None:
    impl = shim(tmp_path, 0)
    unchecked = behave("-D", f"impl={impl}", *SCENARIO)
    assert unchecked.returncode == 0, unchecked.stdout + unchecked.stderr
    checked = behave("-D", f"impl={impl}", "-D", "validate=1", *SCENARIO)
    assert checked.returncode != 0
    assert (
        "address_of: the answer breaks the protocol at $.result: Additional properties are "
        "not allowed ('checksum' was unexpected)"
    ) in checked.stdout + checked.stderr


def test_the_environment_the_runner_sets_validates_too(tmp_path: Path) -> None:
    checked = behave("-D", f"impl={shim(tmp_path, 0)}", *SCENARIO, env={"PIPOST_VALIDATE": "1"})
    assert checked.returncode != 0
    assert "address_of: the answer breaks the protocol" in checked.stdout + checked.stderr


def test_timeout_bounds_each_call(tmp_path: Path) -> None:
    slow = behave("-D", f"impl={shim(tmp_path, HANG_S)}", "-D", f"timeout={TIMEOUT_S}", *SCENARIO)
    assert slow.returncode != 0
    said = f"CallTimedOut: address_of: no answer within {TIMEOUT_S} s"
    assert said in slow.stdout + slow.stderr


def runner(*args: str) -> int:
    done = subprocess.run(
        [*RUNNER, "--no-machines", "--features", *SCENARIO, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode


def test_the_runner_passes_both_options_on(tmp_path: Path) -> None:
    """The scenario errs only with the option: the answer is outside the schema
    (--validate), the first call outlasts the bound (--timeout)."""
    assert runner("--impl", shim(tmp_path, SLOW_S)) == 0
    assert runner("--impl", shim(tmp_path, HANG_S), "--timeout", str(TIMEOUT_S)) == 1
    assert runner("--impl", shim(tmp_path, 0), "--validate") == 1


@pytest.fixture
def none_shared(monkeypatch: pytest.MonkeyPatch) -> dict[str, SubprocessDriver]:
    """No implementation process opened yet: not the ones tests before this one left
    (nox -s mutation forks each mutant's run from a process whose tests filled it)."""
    shared: dict[str, SubprocessDriver] = {}
    monkeypatch.setattr(client, "_SHARED", shared)
    return shared


def test_open_driver_validates_and_times_as_the_environment_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, none_shared: dict[str, SubprocessDriver]
) -> None:
    in_process = open_driver(tmp_path, home="/home/someone")
    assert isinstance(in_process, InProcessDriver)
    assert (in_process.root, in_process.home) == (tmp_path, "/home/someone")
    monkeypatch.setenv("PIPOST_VALIDATE", "1")
    validating = open_driver(tmp_path, home="/home/someone")
    assert isinstance(validating, ValidatingDriver)
    assert isinstance(validating.driver, InProcessDriver)
    assert validating.driver.home == "/home/someone"
    monkeypatch.setenv("PIPOST_TIMEOUT", "7.5")
    command = f"{sys.executable} -m pipost driver"
    driver = open_driver(tmp_path / "post", home="/", command=command)
    assert isinstance(driver, SubprocessDriver)
    try:
        assert (driver.timeout_s, driver.schema is not None) == (7.5, True)
        assert none_shared == {command: driver}
        assert open_driver(tmp_path / "again", home="/", command=command) is driver
    finally:
        driver.close()


def test_open_driver_without_a_timeout_in_the_environment_gives_a_call_60_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, none_shared: dict[str, SubprocessDriver]
) -> None:
    monkeypatch.delenv("PIPOST_TIMEOUT", raising=False)
    monkeypatch.delenv("PIPOST_VALIDATE", raising=False)
    driver = open_driver(tmp_path / "post", home="/", command=f"{sys.executable} -m pipost driver")
    assert isinstance(driver, SubprocessDriver)
    try:
        assert (driver.timeout_s, driver.schema) == (60.0, None)
    finally:
        driver.close()


def test_open_driver_takes_the_timeout_and_validation_it_is_given_over_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, none_shared: dict[str, SubprocessDriver]
) -> None:
    monkeypatch.setenv("PIPOST_VALIDATE", "1")
    monkeypatch.setenv("PIPOST_TIMEOUT", "7.5")
    command = f"{sys.executable} -u -m pipost driver"  # a process of its own: not shared
    driver = open_driver(
        tmp_path / "post", home="/", command=command, timeout_s=2.5, validate=False
    )
    assert isinstance(driver, SubprocessDriver)
    try:
        assert (driver.timeout_s, driver.schema) == (2.5, None)
    finally:
        driver.close()
