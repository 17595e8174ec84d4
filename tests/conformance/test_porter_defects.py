"""Defects a porter found in the conformance runner (SPEC 11; tools/conformance.py):
the exit status of a misused ``--require``, reports that agree with the exit status,
expectations about scenarios, machine tests credited with what they check, and
``--list`` printing the machine test ids that ``--expect`` takes."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

# tools/ holds scripts, not a package (see test_verdicts.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import conformance
from conformance import Item, Run

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


def _scenario(item_id: str, results: dict[str, str], result: str) -> Item:
    return Item(
        id=item_id,
        name=item_id,
        kind="scenario",
        location=f"features/{item_id.split('/')[0]}.feature:3",
        tier="must",
        invariants=tuple(results),
        results=results,
        result=result,
        error="Then it holds: no" if result != "pass" else "",
    )


def _expected_run(*items: Item) -> Run:
    run = Run("pipost (in process)", list(items))
    conformance.apply_expectations(run, {item.id: "not done yet" for item in items})
    return run


def _junit_verdicts(run: Run) -> dict[str, str]:
    """JUnit testcase name → its verdict element's tag (or "pass")."""
    suite = ElementTree.fromstring(conformance.junit_xml(run))
    return {
        str(case.get("name")): next((child.tag for child in case), "pass")
        for case in suite.iter("testcase")
    }


def test_an_expected_failure_that_still_fails_keeps_the_rows_it_passes_as_passes() -> None:
    run = _expected_run(_scenario("interop/old", {"INV-01": "fail", "INV-21": "pass"}, "fail"))
    (item,) = run.items
    assert (item.result, item.results) == (
        "expected-fail",
        {"INV-01": "expected-fail", "INV-21": "pass"},
    )
    rows = {row.invariant: row.result("must") for row in run.rows()}
    assert (rows["INV-01"], rows["INV-21"]) == ("expected-fail", "pass")
    assert run.status() == 0
    report = conformance.json_report(run)
    assert report["exit_status"] == 0
    cells = {(r["id"], r["tier"]): r["result"] for r in report["invariants"]}
    assert (cells["INV-01", "must"], cells["INV-21", "must"]) == ("expected-fail", "pass")
    assert report["scenarios"][0]["results"] == item.results
    assert "unexpected-pass" not in conformance.markdown(run)
    assert _junit_verdicts(run) == {"interop/old [MUST]": "skipped"}


def test_an_expected_failure_that_passes_as_a_whole_fails_the_run_in_every_report() -> None:
    run = _expected_run(_scenario("interop/fixed", {"INV-01": "pass", "INV-21": "pass"}, "pass"))
    (item,) = run.items
    assert (item.result, item.results) == (
        "unexpected-pass",
        {"INV-01": "unexpected-pass", "INV-21": "unexpected-pass"},
    )
    assert run.status() == 1
    assert conformance.json_report(run)["exit_status"] == 1
    assert "## Why the exit status is 1" in conformance.markdown(run)
    assert _junit_verdicts(run) == {"interop/fixed [MUST]": "failure"}
