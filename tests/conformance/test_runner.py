"""The conformance runner end to end (SPEC 11): verdicts per assertion on toy
scenarios whose outcomes are known; pipost through ``pi-post driver`` gives the
verdicts it gives in this process; a deliberately broken implementation fails the
rows of the invariants it breaks, and only those; expectations, the exit
statuses, ``--list``, and COMMAND run from the caller's folder.

Each run is a small selection of scenarios, to keep the gate fast; the whole
suite runs with ``nox -s conformance``."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pipost import schemas
from pipost_conformance import runner
from pipost_conformance.machines.driving import operations_of

REPO = Path(__file__).resolve().parents[2]
RUNNER = [sys.executable, "-m", "pipost", "conformance"]
KIT = "src/pipost_conformance/features"
"""The features of the kit, from this repository, where the runs start."""
BROKEN = f"{sys.executable} {REPO / 'tests' / 'conformance' / 'broken_impl.py'}"
VERDICTS = "tests/conformance/verdict_features"
RESOLUTION = f"{KIT}/resolution.feature"
FEATURES = ["receiving", "bad_input", "resolution"]
SCENARIOS = [
    "oldest first",
    "still on disk",
    "context that fails",
    "body over the cap",
    "unknown target",
    "found by its name",
]
SELECTION = [
    *("--features", *(f"{KIT}/{name}.feature" for name in FEATURES)),
    *("--name", "|".join(SCENARIOS)),
    "--no-machines",
]
RUN_TIMEOUT_S = 300
REPORTS = jsonschema.Draft202012Validator(schemas.load("conformance-report.v1"))


@dataclass(frozen=True)
class Report:
    code: int
    report: dict[str, Any]
    output: str

    def results(self) -> dict[str, dict[str, str]]:
        """Scenario id → its result per invariant."""
        return {s["id"]: s["results"] for s in self.report["scenarios"]}

    def outcomes(self) -> dict[str, str]:
        return {s["id"]: s["result"] for s in self.report["scenarios"]}

    def scenario(self, scenario_id: str) -> dict[str, Any]:
        found: list[dict[str, Any]] = self.report["scenarios"]
        (scenario,) = [s for s in found if s["id"] == scenario_id]
        return scenario


def run(folder: Path, *args: str, cwd: Path = REPO, env: dict[str, str] | None = None) -> Report:
    report = folder / "report.json"
    done = subprocess.run(
        [*RUNNER, *args, "--json", str(report)],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert report.exists(), done.stdout + done.stderr
    found = json.loads(report.read_text(encoding="utf-8"))
    REPORTS.validate(found)
    return Report(done.returncode, found, done.stdout + done.stderr)


@pytest.fixture
def foreign_plugin(tmp_path: Path) -> dict[str, str]:
    """An environment in which a pytest plugin is installed that fails as it loads:
    the kit's pytest must load none but Hypothesis's (runner.PYTEST)."""
    site = tmp_path / "site"
    info = site / "foreign_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: foreign-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\nforeign = foreign_plugin\n")
    (site / "foreign_plugin.py").write_text(
        "raise RuntimeError('a pytest plugin of the environment was loaded')\n"
    )
    return {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> Report:
    return run(tmp_path_factory.mktemp("verdicts"), "--features", VERDICTS, "--no-machines")


def test_a_failed_assertion_counts_for_its_invariant_only_and_the_scenario_goes_on(
    verdicts: Report,
) -> None:
    scenario = verdicts.scenario(
        "verdicts/a-failed-assertion-fails-only-the-invariant-its-step-names"
    )
    assert scenario["results"] == {"INV-05": "pass", "INV-10": "fail"}
    assert scenario["result"] == "fail"
    assert [(a["invariants"], a["passed"]) for a in scenario["assertions"]] == [
        (["INV-10"], False),
        (["INV-05"], True),
    ]
    assert scenario["error"] == "Then the INV-10 assertion fails: the letter was not set aside"
    assert [call["op"] for call in scenario["exchange"]] == ["advance_clock", "advance_clock"]


def test_a_step_that_checks_two_invariants_fails_the_one_its_message_names(
    verdicts: Report,
) -> None:
    scenario = verdicts.scenario(
        "verdicts/a-step-that-checks-two-invariants-fails-the-one-its-message-names"
    )
    assert scenario["results"] == {"INV-05": "pass", "INV-10": "fail"}
    assert [(a["invariants"], a["passed"]) for a in scenario["assertions"]] == [
        (["INV-10"], False),
        (["INV-05"], True),
    ]


def test_a_step_that_checks_two_invariants_fails_only_the_one_the_scenario_pins(
    verdicts: Report,
) -> None:
    scenario = verdicts.scenario(
        "verdicts/a-step-that-checks-two-invariants-fails-only-the-one-the-scenario-pins"
    )
    assert scenario["results"] == {"INV-05": "pass", "INV-10": "fail"}
    assert [(a["invariants"], a["passed"]) for a in scenario["assertions"]] == [
        (["INV-10"], False),
        (["INV-05"], True),
    ]


def test_an_assertion_of_an_invariant_the_scenario_does_not_pin_is_a_precondition(
    verdicts: Report,
) -> None:
    # It fails no row, INV-08's least of all: the scenario stops, an error of its own.
    scenario = verdicts.scenario(
        "verdicts/an-assertion-of-an-invariant-the-scenario-does-not-pin-is-a-precondition"
    )
    assert scenario["results"] == {"INV-05": "error", "INV-10": "error"}
    assert scenario["result"] == "error"
    assert scenario.get("assertions", []) == []
    assert "a precondition failed" in scenario["error"]
    assert "the 51st letter went in" in scenario["error"]


def test_an_error_of_a_scenario_is_not_a_failure_of_its_invariants(verdicts: Report) -> None:
    results = verdicts.results()
    for scenario, outcome in [
        ("verdicts/a-failing-precondition-is-an-error", "error"),
        ("verdicts/an-assertion-step-that-names-no-invariant-is-an-error", "error"),
        ("verdicts/an-error-answer-is-an-error", "error"),
        ("verdicts/an-unanswered-call-is-a-timeout", "timeout"),
    ]:
        assert results[scenario] == {"INV-05": outcome, "INV-10": outcome}, scenario
    unmarked = verdicts.scenario("verdicts/an-assertion-step-that-names-no-invariant-is-an-error")
    assert "the step names no invariant (@checks): it was queued" in unmarked["error"]
    answered = verdicts.scenario("verdicts/an-error-answer-is-an-error")
    assert answered["exchange"][-1]["op"] == "no_such_op"
    assert "unknown operation 'no_such_op'" in answered["exchange"][-1]["error"]


def test_tiers_kit_defects_and_the_exit_status_of_the_toy_run(verdicts: Report) -> None:
    tiers = {s["id"]: (s["tier"], s.get("tier_defect")) for s in verdicts.report["scenarios"]}
    assert tiers["verdicts/a-failing-precondition-is-an-error"] == ("should", None)
    assert tiers["verdicts/every-assertion-passes"] == ("must", "tagged both @must and @should")
    rows = {(row["id"], row["tier"]): row["result"] for row in verdicts.report["invariants"]}
    assert rows == {
        ("INV-05", "must"): "error",
        ("INV-05", "should"): "error",
        ("INV-10", "must"): "fail",
        ("INV-10", "should"): "error",
    }
    assert verdicts.code == 1
    assert verdicts.report["conforms"] is False


def test_plain_behave_still_stops_a_scenario_at_its_first_failed_assertion() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "behave", "--format", "plain", "--no-capture", VERDICTS],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 1
    first = done.stdout.split("Scenario: a failed assertion fails only")[1].split("Scenario:")[0]
    assert "Then the INV-10 assertion fails ... failed" in first
    assert "And the INV-05 assertion passes ... passed" not in first  # it never ran


def changed_results(run: Report, baseline: Report) -> dict[str, dict[str, str]]:
    """Scenario → the results per invariant that differ from the baseline's."""
    found = {}
    for scenario, results in run.results().items():
        base = baseline.results()[scenario]
        differ = {inv: result for inv, result in results.items() if base.get(inv) != result}
        if differ:
            found[scenario] = differ
    return found


@pytest.fixture(scope="module")
def in_process(tmp_path_factory: pytest.TempPathFactory) -> Report:
    return run(tmp_path_factory.mktemp("in-process"), *SELECTION)


def test_pipost_in_process_passes_the_selection(in_process: Report) -> None:
    assert in_process.code == 0, in_process.output
    assert set(in_process.outcomes().values()) == {"pass"}
    rows = {row["id"] for row in in_process.report["invariants"] if row["result"] == "pass"}
    # Only the invariants the scenarios are tagged with: "holds it once" checks INV-06
    # too, but no scenario of the selection is about INV-06, so it judges none.
    assert rows == {*("INV-05", "INV-07", "INV-09", "INV-12", "INV-13")}
    assert in_process.report["implementation"]["name"] == "pipost"


def test_pipost_through_pi_post_driver_gives_the_same_verdicts(
    tmp_path: Path, in_process: Report
) -> None:
    through_driver = run(tmp_path, "--impl", "pi-post driver", *SELECTION)
    assert through_driver.code == 0, through_driver.output
    assert through_driver.results() == in_process.results()


def test_a_broken_implementation_fails_the_rows_of_what_it_breaks_and_nothing_else(
    tmp_path: Path, in_process: Report
) -> None:
    """The toy breaks INV-05 (unlink-first) and INV-09 (oversize-body), and has no
    ``resolve``: the scenarios that need it are unsupported, with the reason.
    Nothing else fails: not INV-06 for the letter lost ("holds it once" says which
    of its two invariants failed), not INV-08 for the body written past the cap
    ("the refused body was written nowhere" checks INV-09)."""
    broken = run(tmp_path, "--impl", f"{BROKEN} --lacks resolve", *SELECTION)
    assert broken.code == 1, broken.output
    changed = changed_results(broken, in_process)
    body_cap = "bad_input/a-body-over-the-cap-is-refused-with-its-size-and-the-cap-count-character"
    still_on_disk = (
        "a-letter-is-still-on-disk-when-its-text-enters-the-context-and-leaves-only-after"
    )
    assert changed == {
        f"receiving/{still_on_disk}": {"INV-05": "fail"},
        "receiving/a-context-that-fails-keeps-the-letter-queued-and-a-retry-delivers-it": {
            "INV-05": "fail",
        },
        **{f"{body_cap}@{row}": {"INV-09": "fail"} for row in (1, 2, 3)},
        "resolution/a-session-is-found-by-its-kind@2": {"INV-13": "unsupported"},
    }
    unsupported = broken.scenario("resolution/a-session-is-found-by-its-kind@2")
    assert unsupported["error"] == "the implementation does not offer: resolve"


@pytest.mark.parametrize("fault", ["unlink-first", "oversize-body"])
def test_each_fault_alone_fails_only_its_own_rows(
    tmp_path: Path, in_process: Report, fault: str
) -> None:
    alone = run(tmp_path, "--impl", f"{BROKEN} --fault {fault}", *SELECTION)
    failed = {
        inv
        for results in alone.results().values()
        for inv, result in results.items()
        if result != "pass"
    }
    assert (
        failed
        == {
            "unlink-first": {"INV-05"},
            "oversize-body": {"INV-09"},
        }[fault]
    )
    # the console shows each failure, where it is and the calls that led to it, and
    # one summary: behave's own, which counted otherwise, is left out
    failing = [item for item, result in alone.outcomes().items() if result == "fail"]
    assert failing
    for scenario_id in failing:
        assert f"\nFAIL {scenario_id} (MUST; " in alone.output, alone.output
    assert "    last calls:\n" in alone.output
    assert "scenarios passed" not in alone.output


def kit_tree() -> set[Path]:
    """The files of the kit's folder, but for the bytecode Python caches."""
    return {path for path in (REPO / KIT).parent.rglob("*") if "__pycache__" not in path.parts}


REGISTRY_MACHINE = "machines/test_registry_machine.py::TestRegistryMachine::runTest"


def lacking_all_but_the_registry_machine() -> str:
    """--lacks for every operation the other machines call and the registry's does
    not (their modules' docstrings say which), so that they skip."""

    def operations(path: Path) -> set[str]:
        return set(operations_of(ast.get_docstring(ast.parse(path.read_text())) or "") or [])

    registry, *others = sorted(runner.machine_files(), key=lambda p: "registry" not in p.name)
    lacks = set().union(*map(operations, others)) - operations(registry)
    return " ".join(f"--lacks {op}" for op in sorted(lacks))


def test_a_machine_fails_the_invariant_its_failure_names_and_shows_its_steps(
    tmp_path: Path, foreign_plugin: dict[str, str]
) -> None:
    """The registry machine states INV-14, 15, 17 and more; a toy whose ``record``
    calls every recorded session live breaks presence (INV-15) and only that row
    of the machine fails. The run writes nothing into the kit, which may be an
    installed package (Hypothesis keeps the failing example in the run's scratch
    folder). The toy lacks what only the other machines call, so they skip rather
    than search (and shrink) for ten examples each: this is about the one that fails."""
    before = kit_tree()
    faulty = run(
        tmp_path,
        *("--impl", f"{BROKEN} --fault stale-presence {lacking_all_but_the_registry_machine()}"),
        *("--features", f"{KIT}/addresses.feature", "--name", "no such scenario"),
        *("--seed", "7"),
        env=foreign_plugin,
    )
    assert kit_tree() == before
    assert faulty.report["seed"] == 7  # the seed the machines drew from, to replay them
    assert faulty.report["summary"].endswith("(--seed 7 replays them)")
    assert {
        test: result for test, result in faulty.outcomes().items() if result != "unsupported"
    } == {REGISTRY_MACHINE: "fail"}
    registry = faulty.scenario(REGISTRY_MACHINE)
    assert registry["results"] == {"INV-15": "fail"}
    assert registry["tier"] == "must"
    assert registry["error"].startswith("AssertionError: [INV-15] presence of s-")
    assert "state.register(" in registry["error"]  # the falsifying steps
    assert faulty.code == 1


def test_an_error_answer_is_an_error_of_the_scenario_not_a_failure(tmp_path: Path) -> None:
    errors = run(tmp_path, "--impl", f"{BROKEN} --fault count-errors", *SELECTION)
    assert errors.code == 1
    oldest = errors.scenario("receiving/letters-enter-the-context-oldest-first")
    assert oldest["results"] == {"INV-07": "error"}
    assert "count" in oldest["error"]
    assert not any("fail" in results.values() for results in errors.results().values())


HANG_TIMEOUT_S = 8
"""The bound of the hanging run's calls: the hang costs it whole, and every other call
(a Python shim starting under coverage on a loaded machine, too) must answer within it."""


def test_an_unanswered_call_is_a_timeout_and_the_next_scenario_runs(tmp_path: Path) -> None:
    hangs = run(
        tmp_path,
        *("--impl", f"{BROKEN} --fault count-hangs", "--timeout", str(HANG_TIMEOUT_S)),
        *("--features", f"{KIT}/mailbox.feature"),
        *("--name", "taken oldest first|the order comes from the ids"),
        "--no-machines",
    )
    outcomes = hangs.outcomes()
    taken = "mailbox/messages-are-taken-oldest-first-and-a-taken-message-is-gone"
    assert outcomes == {
        taken: "timeout",
        # it counts nothing, and runs after the timeout, on the implementation restarted
        "mailbox/the-order-comes-from-the-ids-not-from-when-the-files-appeared": "pass",
    }
    error = hangs.scenario(taken)["error"]
    assert f"CallTimedOut: count: no answer within {HANG_TIMEOUT_S} s" in error
    assert set(hangs.results()[taken].values()) == {"timeout"}
    assert hangs.code == 1


def test_expected_failures_keep_the_run_green_until_one_passes(tmp_path: Path) -> None:
    expectations = tmp_path / "expected.txt"
    faulty = ["--impl", f"{BROKEN} --fault oversize-body", *SELECTION]
    first = run(tmp_path, *faulty, "--write-expectations", str(expectations))
    assert first.code == 1
    written = expectations.read_text(encoding="utf-8")
    assert re.findall(r"^bad_input/\S+@\d", written, re.MULTILINE) == [
        f"bad_input/a-body-over-the-cap-is-refused-with-its-size-and-the-cap-count-character@{n}"
        for n in (1, 2, 3)
    ]
    expected = run(tmp_path, *faulty, "--expect", str(expectations))
    assert expected.code == 0, expected.output
    assert sorted(set(expected.outcomes().values())) == ["expected-fail", "pass"]
    fixed = run(tmp_path, *SELECTION, "--expect", str(expectations))
    assert fixed.code == 1
    assert list(fixed.outcomes().values()).count("unexpected-pass") == 3
    assert "passes, but the expectations say it fails" in fixed.output


def test_nothing_checked_exits_1_and_a_required_row_must_pass(tmp_path: Path) -> None:
    nothing = run(
        tmp_path, "--cli", "pi-post", "--features", f"{KIT}/resolution.feature", "--no-machines"
    )
    assert nothing.code == 1
    assert set(nothing.outcomes().values()) == {"unsupported"}
    assert "nothing was checked" in " ".join(nothing.report["why"])
    required = run(tmp_path, *SELECTION, "--require", "INV-05", "INV-01")
    assert required.code == 1
    assert required.report["why"] == ["--require INV-01: its MUST result is not checked"]


def test_a_run_that_breaks_exits_2(tmp_path: Path) -> None:
    done = subprocess.run(
        [*RUNNER, "--impl", "/nonexistent/shim", *SELECTION],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 2
    assert "cannot run /nonexistent/shim" in done.stderr


def test_list_prints_the_scenario_ids_tiers_and_invariants_and_runs_nothing(
    foreign_plugin: dict[str, str],
) -> None:
    done = subprocess.run(
        [*RUNNER, "--list", "--impl", "/nonexistent/shim", "--features", RESOLUTION],
        cwd=REPO,
        env={**os.environ, **foreign_plugin},
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=True,
    )
    lines = done.stdout.splitlines()
    assert lines[0].startswith("resolution/a-session-is-found-by-its-kind@1\tMUST\tINV-13")
    ids = [line.split("\t")[0] for line in lines]
    assert "resolution/a-path-through-a-symlink-finds-the-session-in-the-real-directory" in ids
    assert len(set(ids)) == len(ids)
    assert "machines/test_registry_machine.py::TestRegistryMachine::runTest" in ids


def test_pipost_only_scenarios_are_in_no_conformance_run(tmp_path: Path) -> None:
    # doctor.feature is all @pipost-only: pipost's additions to SPEC 8, no contract
    doctor = f"{KIT}/doctor.feature"
    listed = subprocess.run(
        [*RUNNER, "--list", "--no-machines", "--features", doctor],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    assert listed.stdout == ""
    report = tmp_path / "report.json"
    ran = subprocess.run(
        [*RUNNER, "--cli", "pi-post", "--no-machines", "--features", doctor, "--json", report],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    scenarios = json.loads(report.read_text())["scenarios"]
    assert [s["id"] for s in scenarios if s["id"].startswith("doctor/")] == [], ran.stdout


SHIM = """import sys
from pipost.driver import serve
serve(sys.stdin, sys.stdout)
"""


def test_command_runs_from_the_callers_folder_with_its_relative_paths(tmp_path: Path) -> None:
    porter = tmp_path / "port"
    (porter / "conformance").mkdir(parents=True)
    (porter / "conformance" / "shim.py").write_text(SHIM, encoding="utf-8")
    features = [str(REPO / KIT / "receiving.feature")]
    done = subprocess.run(
        [
            *RUNNER,
            *("--impl", f"{sys.executable} conformance/shim.py"),
            *("--features", *features, "--name", "oldest first", "--no-machines"),
            *("--json", "report.json"),
        ],
        cwd=porter,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((porter / "report.json").read_text(encoding="utf-8"))
    assert [s["result"] for s in report["scenarios"]] == ["pass"]


def test_a_cli_only_run_completes_says_what_it_could_not_check_and_writes_html(
    tmp_path: Path,
) -> None:
    page = tmp_path / "matrix.html"
    report = run(
        tmp_path,
        *("--cli", "pi-post", "--features", f"{KIT}/cli.feature", f"{KIT}/messages.feature"),
        *("--name", "writes one v1 letter|over the cap|zero-padded", "--report", str(page)),
    )
    assert report.code == 0, report.output
    assert report.report["implementation"] == {"command": "--cli 'pi-post'"}  # not pipost's
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!doctype html>")
    assert "<td>INV-21</td><td>wire compatibility with pi-post 0.7, both directions</td>" in text
    assert re.search(r'<td>INV-09</td><td>[^<]*</td><td class="pass">', text), text
    assert "<li>CLI-only implementation: the scenario needs the driver: " in text
    machines = [s["id"] for s in report.report["scenarios"] if s["kind"] == "machine"]
    assert "machines/test_registry_machine.py::TestRegistryMachine::runTest" in machines
