"""The kit observes how a port writes (INV-03, INV-04; features/durability.feature):
copies of the Node port with one fault each (tests/conformance/broken_impl.py,
PORT_FAULTS) fail the row of that fault and no other, and a run that cannot trace
says *not checked*, never *pass*."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pipost import schemas
from pipost_conformance import tracing
from tests.conformance.broken_impl import broken_port

REPO = Path(__file__).resolve().parents[2]
DURABILITY = "src/pipost_conformance/features/durability.feature"
IN_FLIGHT = "a deposit in flight is not counted, peeked or taken"
TRACED = "renamed into place and flushed|a claim reads the letter"
RUN_TIMEOUT_S = 300
REPORTS = jsonschema.Draft202012Validator(schemas.load("conformance-report.v1"))

needs_tracing = pytest.mark.skipif(
    not sys.platform.startswith("linux") or shutil.which("strace") is None,
    reason="tracing a port's system calls needs strace on Linux",
)
needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="the Node port needs node")


def conformance(folder: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The JSON report of ``pi-post conformance`` over the durability scenarios."""
    report = folder / "report.json"
    argv = [sys.executable, "-m", "pipost", "conformance", "--no-machines", "--json", str(report)]
    done = subprocess.run(
        [*argv, "--features", DURABILITY, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert report.exists(), done.stdout + done.stderr
    found: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    REPORTS.validate(found)
    assert found["exit_status"] == done.returncode
    return found


def must_rows(report: dict[str, Any]) -> dict[str, str]:
    return {row["id"]: row["result"] for row in report["invariants"] if row["tier"] == "must"}


@needs_tracing
@needs_node
@pytest.mark.parametrize(
    ("fault", "broken"),
    [("write-in-place", "INV-03"), ("no-fsync", "INV-04"), ("no-mailbox-lock", "INV-08")],
)
def test_a_port_that_writes_against_spec_1_fails_that_row_alone(
    tmp_path: Path, fault: str, broken: str
) -> None:
    shim = broken_port(fault, tmp_path / "port")
    report = conformance(tmp_path, "--impl", f"node {shim}")
    rows = {"INV-03", "INV-04", "INV-08"}
    assert must_rows(report) == {inv: "fail" if inv == broken else "pass" for inv in rows}
    assert not report["conforms"]
    assert report["exit_status"] == 1
    failed = [s for s in report["scenarios"] if s["result"] != "pass"]
    # The deposit and the record are written by the faulty code; the claim is not,
    # and only the deposit counts a mailbox.
    assert failed and all(s["results"][broken] == "fail" for s in failed)
    assert all(r == "pass" for s in failed for inv, r in s["results"].items() if inv != broken)
    assert len(failed) == (1 if broken == "INV-08" else 2)


def test_without_strace_the_rows_are_not_checked_and_the_run_does_not_conform(
    tmp_path: Path,
) -> None:
    """PATH holds this Python's folder alone (pipost runs from it), so no strace:
    the traced scenarios are not checked, with the reason, and the rows they
    belong to are not checked either, whatever else of them passed."""
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}
    mailbox = "src/pipost_conformance/features/mailbox.feature"
    report = conformance(tmp_path, mailbox, "--name", f"{IN_FLIGHT}|{TRACED}", env=env)
    rows = {"INV-03", "INV-04", "INV-08"}
    assert {k: v for k, v in must_rows(report).items() if k in rows} == {
        "INV-03": "not-checked",
        "INV-04": "not-checked",
        "INV-08": "not-checked",
    }
    counts = {row["id"]: row["counts"] for row in report["invariants"] if row["id"] in rows}
    assert counts == {
        "INV-03": {"pass": 1, "not-checked": 3},
        "INV-04": {"not-checked": 3},
        "INV-08": {"not-checked": 1},
    }
    unobserved = [s for s in report["scenarios"] if s["result"] == "not-checked"]
    assert len(unobserved) == 3
    assert {s["error"] for s in unobserved} == {
        "system calls are traced with strace, which is not on PATH"
    }
    assert not report["conforms"]
    assert report["exit_status"] == 0
    assert "driver part not checked: 3 MUST rows not-checked" in report["summary"]


def test_a_machine_that_refuses_ptrace_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An strace that cannot attach (a container without CAP_SYS_PTRACE) is no
    tracer: the reason is strace's own last word, and nothing is judged."""
    fake = tmp_path / "strace"
    fake.write_text(
        "#!/bin/sh\necho 'strace: attach: ptrace(PTRACE_SEIZE, 7): Operation not permitted' >&2\n"
        "exit 1\n",
        encoding="utf-8",
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    tracing.why_untraceable.cache_clear()
    try:
        why = tracing.why_untraceable()
    finally:
        tracing.why_untraceable.cache_clear()
    if sys.platform.startswith("linux"):
        assert why == (
            "strace cannot trace here: "
            "strace: attach: ptrace(PTRACE_SEIZE, 7): Operation not permitted"
        )
    else:
        assert why is not None and "Linux only" in why
