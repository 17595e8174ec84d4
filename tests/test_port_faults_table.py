"""The Node port's fault table (tools/port_faults.py, ``nox -s port_faults``) is sound.

Cheap: no kit run. A fault whose ``old`` text no longer occurs exactly once in
ports/node cannot be switched on, and one that names an invariant SPEC 9 does not
have, or a feature file the kit does not hold, would be judged against nothing;
either would let the table rot while the port changes. And the verdict of a run
counts what issue 37 asks: caught, charged to its own row, the extra rows."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

# tools/ holds scripts, not a package: mypy checks tools/port_faults.py as the
# module "port_faults", and so is it imported here.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import port_faults

PORT = port_faults.REPO / port_faults.PORT
NAMES = [item.name for item in port_faults.FAULTS]
BY_NAME = dict(zip(NAMES, port_faults.FAULTS, strict=True))


def test_fault_names_are_unique_so_each_can_be_run_alone() -> None:
    assert len(set(NAMES)) == len(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_every_old_text_occurs_exactly_once_in_the_port(name: str) -> None:
    problems = port_faults.edit_problems(BY_NAME[name], PORT)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", NAMES)
def test_every_fault_names_invariants_of_spec_9_a_tier_and_feature_files_of_the_kit(
    name: str,
) -> None:
    item = BY_NAME[name]
    assert item.breaks and set(item.breaks) <= port_faults.spec_invariants()
    assert item.tier in port_faults.TIERS
    for feature in item.judge.features:
        assert (port_faults.FEATURES / feature).is_file(), feature


def test_the_table_spans_every_invariant_both_tiers_and_the_command_line() -> None:
    faults = port_faults.FAULTS
    assert len(port_faults.spec_invariants()) == 23
    assert {inv for item in faults for inv in item.breaks} == port_faults.spec_invariants()
    assert len(faults) >= 40
    assert {item.tier for item in faults} == set(port_faults.TIERS)
    assert any(item.judge.cli for item in faults)


NO_SUCH_ROW = f"INV-{99}"  # spelled so that the reference check of test_spec skips it


def test_the_table_check_says_what_does_not_fit() -> None:
    real = port_faults.FAULTS[0]
    gone = port_faults.fault(
        "a fault for the test",
        real.file,
        "no such text",
        "",
        NO_SUCH_ROW,
        port_faults.judge("no_such"),
    )
    problems = port_faults.table_problems([gone, gone], PORT)
    said = "\n".join(problems)
    assert "is named twice" in said
    assert "0 times; rewrite it" in said
    assert f"[{NO_SUCH_ROW!r}] invariant of SPEC 9" in said
    assert "no feature file no_such.feature" in said
    assert port_faults.table_problems(port_faults.FAULTS, PORT) == []


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.parametrize("name", NAMES)
def test_every_fault_changes_its_file_and_node_still_parses_it(name: str, tmp_path: Path) -> None:
    item = BY_NAME[name]
    copy = port_faults.copy_port(tmp_path / "node")
    port_faults.apply(item, copy)  # raises unless node --check accepts the file
    assert (copy / item.file).read_bytes() != (PORT / item.file).read_bytes()


def test_a_selection_runs_the_part_it_judges_and_the_machines_only_when_asked() -> None:
    port = Path("/p")
    driver = port_faults.judge("receiving", name="10 s").options(port)
    assert driver[:2] == ["--impl", "node /p/shim.mjs"]
    assert driver[2:4] == ["--features", "features/receiving.feature"]
    assert "--no-machines" in driver and driver[driver.index("--name") + 1] == "10 s"
    command_line = port_faults.cli("cli_caps").options(port)
    assert command_line[:2] == ["--cli", "node /p/cli.mjs"]
    machines = port_faults.judge("mailbox", machines=True).options(port)
    assert "--no-machines" not in machines and "--seed" in machines


# -- the verdict of one fault's run ---------------------------------------------------


def scenario(item_id: str, tier: str, **results: str) -> dict[str, object]:
    worst = next(r for r in port_faults.WORST_FIRST if r in results.values())
    return {
        "id": item_id,
        "tier": tier,
        "results": {k.replace("_", "-"): v for k, v in results.items()},
        "result": worst,
    }


def kit_run(exit_status: int, *scenarios: dict[str, object]) -> port_faults.KitRun:
    return port_faults.KitRun({"exit_status": exit_status, "scenarios": list(scenarios)}, "", 1.0)


CAP = BY_NAME["a cap of 51"]


def test_a_fault_failing_its_own_row_is_caught_and_charged_and_other_failures_are_extra() -> None:
    run = kit_run(
        1,
        scenario("mailbox/cap", "must", INV_08="fail", INV_05="fail"),
        scenario("mailbox/order", "must", INV_07="error"),
        scenario("mailbox/fine", "must", INV_03="pass"),
    )
    found = port_faults.verdict(CAP, run, set())
    assert found.caught and found.charged
    assert found.extra == ("INV-05 must",)
    assert found.elsewhere == ("INV-07 must error",)


def test_an_error_of_its_own_row_is_caught_but_not_charged_a_timeout_is_charged() -> None:
    found = port_faults.verdict(
        CAP, kit_run(1, scenario("mailbox/cap", "must", INV_08="error")), set()
    )
    assert found.caught and not found.charged and found.own == "error"
    hung = port_faults.verdict(
        CAP, kit_run(1, scenario("mailbox/cap", "must", INV_08="timeout")), set()
    )
    assert hung.caught and hung.charged


def test_a_run_that_conforms_has_not_caught_a_must_fault() -> None:
    found = port_faults.verdict(
        CAP, kit_run(0, scenario("mailbox/cap", "must", INV_08="pass")), set()
    )
    assert not found.caught and found.counts


def test_what_fails_without_the_fault_is_no_evidence_for_it_or_against_another_row() -> None:
    run = kit_run(
        1,
        scenario("hostile/kept", "should", INV_10="fail"),
        scenario("mailbox/cap", "must", INV_08="fail"),
    )
    quarantine = BY_NAME["a bad letter deleted, not kept in the quarantine"]
    assert not port_faults.verdict(quarantine, run, {"hostile/kept"}).caught
    assert port_faults.verdict(CAP, run, {"hostile/kept"}).extra == ()
    assert port_faults.verdict(CAP, run, set()).extra == ("INV-10 should",)


def test_a_should_fault_is_caught_by_its_row_though_the_run_exits_0() -> None:
    quarantine = BY_NAME["a bad letter deleted, not kept in the quarantine"]
    run = kit_run(0, scenario("bad_input/kept", "should", INV_10="fail"))
    found = port_faults.verdict(quarantine, run, set())
    assert found.caught and found.charged and not found.counts


def test_a_kit_that_wrote_no_report_caught_nothing() -> None:
    found = port_faults.verdict(CAP, port_faults.KitRun(None, "Traceback", 1.0), set())
    assert not found.caught and found.broken == "Traceback"
