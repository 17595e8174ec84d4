"""The matrix and the exit status of pi-post conformance, from verdicts: each
invariant has a MUST and a SHOULD result; the run conforms when every MUST row
passes; it exits 1 for a MUST that failed, errored or timed out, for an expected
failure that passed, when nothing was checked, or when a required row did not
pass, and 2 when the run broke. Expectations turn failures into expected-fail."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from dataclasses import replace
from pathlib import Path

import jsonschema

from pipost import schemas
from pipost_conformance import runner as conformance
from pipost_conformance.runner import Item, Run

REPORTS = jsonschema.Draft202012Validator(schemas.load("conformance-report.v1"))


def item(
    item_id: str,
    result: str,
    *invariants: str,
    tier: str = "must",
    error: str = "",
    part: str = "driver",
) -> Item:
    return Item(
        id=item_id,
        name=item_id,
        kind="scenario",
        location=f"features/{item_id.split('/')[0]}.feature:1",
        tier=tier,
        invariants=invariants,
        results=dict.fromkeys(invariants, result),
        result=result,
        error=error,
        part=part,
    )


def cli(item_id: str, result: str, *invariants: str, tier: str = "must") -> Item:
    """A command-line scenario (tagged @cli)."""
    return item(item_id, result, *invariants, tier=tier, part="cli")


def results(run: Run) -> dict[str, tuple[str | None, str | None]]:
    return {row.invariant: (row.result("must"), row.result("should")) for row in run.rows()}


def test_each_invariant_has_a_must_and_a_should_result() -> None:
    run = Run(
        "toy",
        [
            item("a/kept", "pass", "INV-05"),
            item("a/lost", "fail", "INV-05", error="gone"),
            item("a/drop-log", "fail", "INV-05", tier="should"),
            item("a/capped", "pass", "INV-09"),
            item("a/capped-at-read", "unsupported", "INV-09", error="no take"),
            item("a/logged", "pass", "INV-18", tier="should"),
            item("a/forged", "unsupported", "INV-19", error="no deliver"),
            item("a/crashed", "error", "INV-20"),
        ],
    )
    found = results(run)
    assert found["INV-05"] == ("fail", "fail")
    assert found["INV-09"] == ("pass", None)
    assert found["INV-18"] == (None, "pass")
    assert found["INV-19"] == ("unsupported", None)
    assert found["INV-20"] == ("error", None)
    assert found["INV-01"] == (None, None)
    assert len(found) == len(conformance.INVARIANTS)
    assert not run.conforms()
    assert run.not_checked() == {"no take": 1, "no deliver": 1}


def test_the_run_conforms_when_every_must_row_passes_whatever_the_should_rows() -> None:
    run = Run(
        "toy",
        [
            item("a/kept", "pass", "INV-05"),
            item("a/drop-log", "fail", "INV-05", tier="should"),
            cli("cli/sent", "pass", "INV-21"),
        ],
    )
    assert run.conforms()
    assert run.verdict() == (
        "conforms to v1: every MUST row passes (driver part conforms; command line conforms)"
    )
    assert run.status() == 0
    unchecked = Run("toy", [*run.items, item("a/forged", "unsupported", "INV-19")])
    assert not unchecked.conforms()
    assert unchecked.verdict() == (
        "does not conform to v1: driver part not checked: INV-19 unsupported; command line conforms"
    )
    assert unchecked.status() == 0  # a capability left out is not a breach; --require must is


def test_conforming_to_v1_takes_both_parts() -> None:
    driver = [item("a/kept", "pass", "INV-05"), item("a/capped", "pass", "INV-09")]
    no_cli = Run("toy", [*driver, cli("cli/sent", "unsupported", "INV-21")])
    assert not no_cli.conforms()
    assert no_cli.parts() == {"driver": "conforms", "cli": "not checked"}
    assert no_cli.verdict() == (
        "does not conform to v1: driver part conforms; "
        "command line not checked (run with --cli): INV-21 unsupported"
    )
    assert conformance.json_report(no_cli)["parts"] == {"driver": "conforms", "cli": "not checked"}
    assert conformance.json_report(no_cli)["conforms"] is False
    # a row both parts check must pass in each: the driver's pass does not stand for the CLI's
    half = Run(
        "toy", [*driver, cli("cli/sent", "pass", "INV-21"), cli("cli/cap", "unsupported", "INV-09")]
    )
    assert half.parts() == {"driver": "conforms", "cli": "not checked"}
    assert "command line not checked: INV-09 unsupported" in half.verdict()
    # a run that holds nothing of a part has not checked it, unless it was a selection
    assert Run("toy", driver).parts() == {"driver": "conforms", "cli": "not checked"}
    assert Run("toy", driver, selected=True).parts() == {"driver": "conforms"}
    assert Run("toy", driver, selected=True).conforms()
    cli_failing = Run("toy", [*driver, cli("cli/sent", "fail", "INV-21")])
    assert cli_failing.verdict() == (
        "does not conform to v1: driver part conforms; command line: MUST rows 1 fail"
    )


def test_require_names_a_part_or_both() -> None:
    driver = [item("a/kept", "pass", "INV-05")]
    no_cli = [*driver, cli("cli/sent", "unsupported", "INV-21")]
    assert status(*no_cli) == 0  # nothing failed
    assert status(*no_cli, required=("driver",)) == 0
    assert status(*no_cli, required=("cli",)) == 1
    assert status(*no_cli, required=("must",)) == 1
    both = [*driver, cli("cli/sent", "pass", "INV-21")]
    assert status(*both, required=("must", "driver", "cli")) == 0
    assert Run("toy", no_cli, required=["must", "cli"]).breaches() == [
        "--require must: driver part conforms; "
        "command line not checked (run with --cli): INV-21 unsupported",
        "--require cli: the command line not checked",
    ]


def test_a_row_part_of_which_could_not_be_observed_is_not_checked_not_passed() -> None:
    """INV-03 has scenarios that ran and passed, and a traced one no strace could
    observe: the row is not-checked, with the reason, and the run does not conform
    (exit 0, as for an unsupported row)."""
    why = "system calls are traced with strace, which is not on PATH"
    run = Run(
        "toy",
        [
            item("mailbox/in-flight", "pass", "INV-03"),
            item("durability/deposit", "not-checked", "INV-03", error=why),
        ],
    )
    (row,) = [row for row in run.rows() if row.invariant == "INV-03"]
    assert row.result("must") == "not-checked"
    assert conformance.row_notes(run, row) == f"not checked: {why} (×1)"
    assert not run.conforms()
    assert run.verdict() == (
        "does not conform to v1: driver part not checked: INV-03 not-checked; "
        "command line not checked (run with --cli)"
    )
    assert run.status() == 0
    assert run.not_checked() == {why: 1}
    assert "**not-checked** (1 pass, 1 not-checked)" in conformance.markdown(run)
    # Nothing else ran: no option would have run more, so none is suggested.
    alone = Run("toy", run.items[1:], selected=True)
    assert alone.verdict() == (
        "does not conform to v1 (of the scenarios selected): "
        "driver part not checked: INV-03 not-checked"
    )


def status(*items: Item, required: tuple[str, ...] = (), broken: str = "") -> int:
    return Run("toy", list(items), broken=broken, required=list(required)).status()


def test_the_exit_status() -> None:
    passed = item("a/kept", "pass", "INV-05")
    assert status(passed) == 0
    assert status(passed, item("a/lost", "fail", "INV-05")) == 1
    assert status(passed, item("a/crash", "error", "INV-07")) == 1
    assert status(passed, item("a/hang", "timeout", "INV-07")) == 1
    assert status(passed, item("a/log", "fail", "INV-18", tier="should")) == 0
    assert status(passed, item("a/log", "error", "INV-18", tier="should")) == 0
    assert status(passed, item("a/log", "unexpected-pass", "INV-18", tier="should")) == 1
    assert status(passed, item("a/cap", "expected-fail", "INV-09")) == 0
    assert status(item("a/cap", "unsupported", "INV-09")) == 1  # nothing was checked
    assert status() == 1
    assert status(passed, required=("INV-05",)) == 0
    assert status(passed, item("a/forged", "unsupported", "INV-19"), required=("INV-19",)) == 1
    assert status(passed, required=("INV-09",)) == 1  # a required row nothing checked
    assert status(passed, item("a/cap", "expected-fail", "INV-09"), required=("INV-09",)) == 1
    assert status(passed, cli("cli/sent", "pass", "INV-21"), required=("must",)) == 0
    assert status(passed, item("a/forged", "unsupported", "INV-19"), required=("must",)) == 1
    assert status(passed, broken="behave exited with status 2") == 2


def test_an_expected_failure_is_reported_as_such_and_a_pass_of_one_fails_the_run() -> None:
    expected = conformance.expect(item("a/lost", "fail", "INV-05", error="gone"), "no unlink yet")
    assert (expected.result, expected.results, expected.expected) == (
        "expected-fail",
        {"INV-05": "expected-fail"},
        "no unlink yet",
    )
    errored = conformance.expect(item("a/crash", "error", "INV-07"), "crashes")
    assert errored.result == "expected-fail"
    passing = conformance.expect(item("a/kept", "pass", "INV-05"), "no unlink yet")
    assert (passing.result, passing.results) == ("unexpected-pass", {"INV-05": "unexpected-pass"})
    unsupported = conformance.expect(item("a/forged", "unsupported", "INV-19"), "later")
    assert unsupported.result == "unsupported"
    run = Run("toy", [item("a/kept", "pass", "INV-07"), passing])
    assert run.status() == 1
    assert run.breaches() == ["a/kept: passes, but the expectations say it fails: update the file"]


def test_written_expectations_expect_the_failures_of_the_run(tmp_path: Path) -> None:
    items = [
        item("a/kept", "pass", "INV-05"),
        item("a/lost", "fail", "INV-05", error="Then it is queued: gone\nmore"),
        item("a/crash", "timeout", "INV-07", error="When it sends: no answer"),
        item("a/forged", "unsupported", "INV-19", error="no deliver"),
    ]
    path = tmp_path / "expected.txt"
    path.write_text(conformance.expectations_text(items), encoding="utf-8")
    assert conformance.read_expectations(path) == {
        "a/lost": "Then it is queued: gone more",
        "a/crash": "When it sends: no answer",
    }
    run = Run("toy", items)
    conformance.apply_expectations(run, {**conformance.read_expectations(path), "a/gone": "x"})
    outcomes = [i.result for i in run.items]
    assert outcomes == ["pass", "expected-fail", "expected-fail", "unsupported"]
    assert run.not_in_run == ["a/gone"]
    assert run.status() == 0


def sample() -> Run:
    failed = item("bad_input/a-b@1", "fail", "INV-09", error="Then refused: it was queued")
    return Run(
        "--impl 'toy'",
        [
            item("delivery/kept", "pass", "INV-05"),
            Item(**{**failed.__dict__, "exchange": ({"op": "send", "args": {}, "result": {}},)}),
            item("sweeps/drop-log", "fail", "INV-17", tier="should", error="no log"),
            item("sweeps/temporaries", "unsupported", "INV-17", tier="should", error="no sweep"),
        ],
        about={"name": "toy", "version": "0.0.1", "language": "Python"},
    )


def test_the_json_report_follows_its_schema_and_says_what_the_matrix_says() -> None:
    report = conformance.json_report(sample())
    REPORTS.validate(report)
    assert report["implementation"] == {
        "command": "--impl 'toy'",
        "name": "toy",
        "version": "0.0.1",
        "language": "Python",
    }
    assert report["conforms"] is False
    assert report["exit_status"] == 1
    rows = {(row["id"], row["tier"]): row["result"] for row in report["invariants"]}
    assert rows == {
        ("INV-05", "must"): "pass",
        ("INV-09", "must"): "fail",
        ("INV-17", "should"): "fail",
    }
    scenarios = {s["id"]: s for s in report["scenarios"]}
    assert scenarios["bad_input/a-b@1"]["error"] == "Then refused: it was queued"
    assert scenarios["bad_input/a-b@1"]["exchange"] == [{"op": "send", "args": {}, "result": {}}]
    assert "exchange" not in scenarios["delivery/kept"]


def test_the_junit_report_fails_what_fails_the_run_and_skips_the_rest() -> None:
    suite = ElementTree.fromstring(conformance.junit_xml(sample()))
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("4", "1", "2")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    failure = cases["bad_input/a-b@1 [MUST]"].find("failure")
    assert failure is not None
    assert failure.get("message") == "Then refused: it was queued"
    assert "send {} → {}" in (failure.text or "")
    should = cases["sweeps/drop-log [SHOULD]"].find("skipped")
    assert should is not None and should.get("message") == "fail: no log"
    assert list(cases["delivery/kept [MUST]"]) == []


def test_the_markdown_matrix_keeps_each_row_on_one_line_and_shows_each_failure() -> None:
    run = Run("toy", [item("a/b", "fail", "INV-05", error="x | y\nz")])
    page = conformance.markdown(run)
    (row,) = [line for line in page.splitlines() if line.startswith("| INV-05 ")]
    assert row.endswith("| **fail** (1 fail) | — | not passing: a/b |")
    assert "### a/b (MUST, fail)\n" in page
    assert "```\nx | y\nz\n```" in page
    assert "## Not checked\n\n- nothing\n" in page


def test_the_html_matrix_escapes_what_it_shows() -> None:
    run = Run("<toy>", [item("a/<b>", "unsupported", "INV-05", error="a & b")])
    page = conformance.html_page(run)
    assert "<title>Conformance matrix: &lt;toy&gt;</title>" in page
    assert '<td class="unsupported">unsupported (1 unsupported)</td>' in page
    assert "<li>a &amp; b: 1</li>" in page
    assert "<b>" not in page


def test_the_report_schema_is_a_valid_draft_2020_12_schema() -> None:
    schema = schemas.load("conformance-report.v1")
    jsonschema.Draft202012Validator.check_schema(schema)
    results = schema["$defs"]["result"]["enum"]
    assert results == list(conformance.OUTCOMES)


def test_the_seed_the_machines_ran_with_is_in_the_summary_and_the_report() -> None:
    machine = replace(item("m/registry", "pass", "INV-15"), kind="machine")
    seeded = Run("toy", [machine, cli("cli/sent", "pass", "INV-21")], seed=7)
    assert seeded.summary().endswith("state machines: 1 pass (--seed 7 replays them)")
    assert conformance.json_report(seeded)["seed"] == 7
    REPORTS.validate(conformance.json_report(seeded))
    unseeded = Run("toy", [item("a/kept", "pass", "INV-05")])
    assert "seed" not in conformance.json_report(unseeded)
    assert "replays" not in unseeded.summary()
