"""Defects a porter found in the conformance runner (SPEC 11; tools/conformance.py):
the exit status of a misused ``--require``, reports that agree with the exit status,
expectations about scenarios, machine tests credited with what they check, and
``--list`` printing the machine test ids that ``--expect`` takes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# tools/ holds scripts, not a package (see test_verdicts.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import conformance
from conformance import Run

REPO = Path(__file__).resolve().parents[2]


def test_a_require_that_names_no_row_is_a_misused_run(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--features", "features/addresses.feature", "--no-machines", "--require", "INV-99"]
    assert conformance.main(argv) == 2
    assert "--require INV-99: no such row" in capsys.readouterr().err


def test_the_reports_of_a_broken_run_say_why_its_exit_status_is_2() -> None:
    run = Run("--impl 'node /nonexistent.mjs'", [], broken="behave exited with status 1")
    assert run.status() == 2
    page = conformance.markdown(run)
    assert "## Why the exit status is 2: the run broke" in page
    assert "exit status is 1" not in page
    assert "nothing was checked" not in page
    report = conformance.json_report(run)
    assert (report["exit_status"], report["why"]) == (2, ["behave exited with status 1"])
    assert "Why the exit status is 2" in conformance.html_page(run)
