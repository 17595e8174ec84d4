"""Defects a porter found in the conformance runner (SPEC 11; pi-post conformance):
the exit status of a misused ``--require``, reports that agree with the exit status,
expectations about scenarios, machine tests credited with what they check, and
``--list`` printing the machine test ids that ``--expect`` takes."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from pipost_conformance import runner as conformance
from pipost_conformance.runner import Item, Run

RUNNER = [sys.executable, "-m", "pipost", "conformance"]


def test_a_require_that_names_no_row_is_a_misused_run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("PIPOST_TIMEOUT", "PIPOST_VALIDATE"):  # main() sets them for its children
        monkeypatch.delenv(variable, raising=False)
    no_row = f"INV-{99}"  # spelled so, as no reference to SPEC 9 (tests/test_spec.py)
    addresses = str(conformance.FEATURES / "addresses.feature")
    argv = ["--features", addresses, "--no-machines", "--require", no_row]
    assert conformance.main(argv) == 2
    assert f"--require {no_row}: no such row" in capsys.readouterr().err


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


HOSTILE = conformance.MACHINES / "test_hostile_input.py"
HOSTILE_JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="3">
<testcase classname="machines.test_hostile_input"
  name="test_parse_survives_arbitrary_bytes" />
<testcase classname="machines.test_hostile_input"
  name="test_a_huge_valid_looking_letter_is_rejected">
  <failure message="KeyError: 'rejected'">Traceback ...</failure>
</testcase>
<testcase classname="machines.test_hostile_input"
  name="test_listing_and_resolving_over_a_hostile_registry_only_ever_refuse" />
</testsuite></testsuites>
"""


def test_a_machine_test_credits_only_the_invariants_it_states(tmp_path: Path) -> None:
    junit = tmp_path / "results.xml"
    junit.write_text(HOSTILE_JUNIT, encoding="utf-8")
    parse, huge, registry = conformance.machine_items(junit, HOSTILE)
    assert parse.results == dict.fromkeys(("INV-09", "INV-10", "INV-21", "INV-22"), "pass")
    assert huge.results == {"INV-10": "error"}  # no [INV-NN]: an error of what it states
    assert registry.results == dict.fromkeys(("INV-10", "INV-13", "INV-16", "INV-22"), "pass")
    registry_machine = conformance.MACHINES / "test_registry_machine.py"
    stated = conformance.stated_invariants(registry_machine)
    assert stated == {"": conformance.module_invariants(registry_machine)}  # states none


def _judged(function: ast.FunctionDef, helpers: dict[str, ast.FunctionDef]) -> set[str]:
    """The INV ids a function's check()/violated() calls pass, its helpers' included."""
    found: set[str] = set()
    for node in ast.walk(function):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        if node.func.id in ("check", "violated"):
            found |= {
                arg.value
                for arg in node.args
                if isinstance(arg, ast.Constant)
                and isinstance(arg.value, str)
                and arg.value.startswith("INV-")
            }
        elif node.func.id in helpers and helpers[node.func.id] is not function:
            found |= _judged(helpers[node.func.id], helpers)
    return found


def test_each_hostile_input_test_states_the_invariants_its_checks_judge() -> None:
    tree = ast.parse(HOSTILE.read_text(encoding="utf-8"))
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    stated = conformance.stated_invariants(HOSTILE)
    tests = [name for name in functions if name.startswith("test_")]
    assert len(tests) == 8
    for name in tests:
        assert set(stated.get(name, ())) == _judged(functions[name], functions), name
    assert set(stated[""]) == {inv for name in tests for inv in stated[name]}


def test_list_prints_the_machine_test_ids_that_the_reports_and_expect_use(
    tmp_path: Path,
) -> None:
    listed = subprocess.run(
        [*RUNNER, "--list", "--features", str(conformance.FEATURES / "addresses.feature")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    lines = {line.split("\t")[0]: line.split("\t")[1:] for line in listed.stdout.splitlines()}
    machines = {test_id: said for test_id, said in lines.items() if "::" in test_id}
    hostile = "machines/test_hostile_input.py"
    assert machines[f"{hostile}::test_a_huge_valid_looking_letter_is_rejected"] == [
        "MUST",
        "INV-10",
    ]
    assert "machines/test_registry_machine.py::TestRegistryMachine::runTest" in machines
    assert all(test_id.startswith("machines/") for test_id in machines)
    assert not [line for line in lines if line.endswith(".py")]  # module paths match no --expect
    # The ids a run reports for these tests (from pytest's JUnit XML) are the listed ones.
    junit = tmp_path / "results.xml"
    subprocess.run(
        [*conformance.PYTEST, f"--junitxml={junit}", "-k", "huge or truncated", hostile],
        cwd=conformance.KIT,
        env={**os.environ, **conformance.PYTEST_ENV},
        capture_output=True,
        timeout=120,
        check=True,
    )
    reported = {item.id for item in conformance.machine_items(junit, conformance.KIT / hostile)}
    assert len(reported) == 2
    assert reported <= set(machines)


def test_a_machine_test_a_cli_only_run_cannot_run_keeps_its_listed_id() -> None:
    test_id = (
        f"{HOSTILE.relative_to(conformance.KIT)}::test_a_huge_valid_looking_letter_is_rejected"
    )
    item = conformance.not_run(test_id, "CLI-only implementation")
    assert (item.id, item.result, item.results) == (
        test_id,
        "unsupported",
        {"INV-10": "unsupported"},
    )
