"""The INV matrix of tools/conformance.py, from behave's JSON results: a row fails
with any failing scenario or state machine, passes with a passing one, and is
skipped, with the reasons, when nothing of it ran."""

from __future__ import annotations

import sys
from pathlib import Path

# tools/ holds scripts, not a package: mypy checks tools/conformance.py as the module
# "conformance", and so is it imported here.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import conformance
from conformance import Machine, Run, Scenario


def behave_json(*elements: dict[str, object], tags: list[str] | None = None) -> list[object]:
    return [{"keyword": "Feature", "tags": tags or [], "elements": list(elements)}]


def element(name: str, status: str, *tags: str, location: str = "f.feature:1") -> dict[str, object]:
    return {
        "type": "scenario",
        "name": name,
        "location": location,
        "tags": list(tags),
        "status": status,
    }


def test_results_are_read_with_their_tags_statuses_and_reasons() -> None:
    failed_step = {
        "keyword": "Then",
        "name": "the send is refused",
        "result": {"status": "failed", "error_message": ["ASSERT FAILED:", "it was queued"]},
    }
    data = behave_json(
        element("a", "passed", "INV-05", "listener", location="f.feature:3"),
        {**element("b", "failed", "INV-09", location="f.feature:9"), "steps": [failed_step]},
        element("c", "error", location="f.feature:12"),
        element("d", "skipped", "INV-09", location="f.feature:15"),
        element("e ", "undefined", location="f.feature:18"),
        {"type": "background", "name": "ignored"},
        tags=["INV-21"],
    )
    found = conformance.read_scenarios(data, {"f.feature:15": "CLI-only implementation"})
    assert found == [
        Scenario("a", "f.feature:3", ("INV-05", "INV-21"), "passed"),
        Scenario(
            "b",
            "f.feature:9",
            ("INV-09", "INV-21"),
            "failed",
            "Then the send is refused: ASSERT FAILED: it was queued",
        ),
        Scenario("c", "f.feature:12", ("INV-21",), "failed", "error"),
        Scenario("d", "f.feature:15", ("INV-09", "INV-21"), "skipped", "CLI-only implementation"),
        Scenario("e", "f.feature:18", ("INV-21",), "failed", "undefined"),
    ]


def rows(run: Run) -> dict[str, tuple[str, str]]:
    return {row.invariant: (row.status, run.notes(row)) for row in run.rows()}


def test_a_row_fails_passes_or_is_skipped_by_what_ran() -> None:
    run = Run(
        "toy",
        [
            Scenario("kept", "a:1", ("INV-05",), "passed"),
            Scenario("lost", "a:2", ("INV-05",), "failed", "gone"),
            Scenario("capped", "a:3", ("INV-09",), "passed"),
            Scenario("capped twice", "a:4", ("INV-09",), "skipped", "no deliver"),
            Scenario("boundary", "a:5", ("INV-19",), "skipped", "no deliver"),
            Scenario("forged", "a:6", ("INV-19",), "skipped", "no deliver"),
            Scenario("ask", "a:7", ("INV-20",), "skipped", "CLI-only implementation"),
        ],
        [
            Machine("tests/invariants/test_loops_machine.py", ("INV-18",), "failed"),
            Machine("tests/invariants/test_registry_machine.py", ("INV-14",), "passed"),
        ],
        elsewhere={"INV-04": ["tests/exchange/test_sigkill.py"], "INV-05": ["x.py"]},
    )
    found = rows(run)
    assert found["INV-05"] == ("fail", "failing: lost")
    assert found["INV-09"] == ("pass", "1 skipped")
    assert found["INV-19"] == ("skip", "skipped: no deliver (×2)")
    assert found["INV-20"] == ("skip", "skipped: CLI-only implementation (×1)")
    assert found["INV-18"] == (
        "fail",
        "failing: state machine tests/invariants/test_loops_machine.py",
    )
    assert found["INV-14"] == ("pass", "")
    assert found["INV-01"] == ("skip", "no scenario of this run is tagged with it")
    assert found["INV-04"] == (
        "skip",
        "no scenario of this run is tagged with it; "
        "pytest checks it on pipost only: tests/exchange/test_sigkill.py",
    )
    assert len(found) == len(conformance.INVARIANTS)
    assert run.failed
    assert run.not_checked() == {"no deliver": 3, "CLI-only implementation": 1}


def test_a_run_fails_only_by_a_failure_or_by_breaking() -> None:
    skipped = Scenario("s", "a:1", ("INV-05",), "skipped", "no deliver")
    assert not Run("toy", [Scenario("p", "a:2", ("INV-05",), "passed"), skipped], []).failed
    assert Run("toy", [], [], broken="behave exited with status 2").failed


def test_the_markdown_matrix_keeps_each_row_on_one_line() -> None:
    run = Run("toy", [Scenario("a | b\nc", "a:1", ("INV-05",), "failed", "x")], [])
    page = conformance.markdown(run)
    (row,) = [line for line in page.splitlines() if line.startswith("| INV-05 ")]
    assert row.endswith("| — | failing: a \\| b c |")
    assert "- a \\| b c (a:1): x\n" in page
    assert "## Not checked\n\n- nothing\n" in page


def test_the_html_matrix_escapes_what_it_shows() -> None:
    run = Run("<toy>", [Scenario("<b>", "a:1", ("INV-05",), "skipped", "a & b")], [])
    page = conformance.html_page(run)
    assert "<title>Conformance matrix: &lt;toy&gt;</title>" in page
    assert '<tr class="skip"><td>INV-05</td>' in page
    assert "<li>a &amp; b: 1 scenarios</li>" in page
    assert "<b>" not in page
