"""The fault table of ``nox -s mutants`` (tools/mutants.py) still fits the repository.

A fault whose ``old`` text no longer occurs exactly once cannot be switched on, and
a selection that names a test or scenario that is gone (renamed, moved, retagged)
would run nothing, or something else: either would let the table rot silently while
the code changes. Each problem must be said with its fault, its file and what to do."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# tools/ holds scripts, not a package: mypy checks tools/mutants.py as the module
# "mutants", and so is it imported here.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import mutants

FAULT_NAMES = [fault.name for fault in mutants.FAULTS]
BY_NAME = dict(zip(FAULT_NAMES, mutants.FAULTS, strict=True))
SCENARIO_SELECTIONS = list(
    dict.fromkeys(
        item
        for fault in mutants.FAULTS
        for item in fault.selection
        if isinstance(item, mutants.Scenarios)
    )
)


@pytest.fixture(scope="module")
def collected() -> set[str]:
    """What pytest collects from the test files the table selects (one collection)."""
    return mutants.collected_tests(mutants.FAULTS, mutants.REPO)


def test_fault_names_are_unique_so_each_can_be_chosen_alone() -> None:
    assert len(set(FAULT_NAMES)) == len(FAULT_NAMES)


@pytest.mark.parametrize("name", FAULT_NAMES)
def test_every_old_text_occurs_exactly_once_in_the_current_source(name: str) -> None:
    problems = mutants.edit_problems(BY_NAME[name], mutants.REPO)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", FAULT_NAMES)
def test_every_fault_changes_its_files_and_still_compiles(name: str, tmp_path: Path) -> None:
    fault = BY_NAME[name]
    shutil.copytree(mutants.REPO / mutants.PACKAGE, tmp_path / mutants.PACKAGE)
    mutants.apply(fault, tmp_path)  # compiles every edited file
    for file in {edit.file for edit in fault.edits}:
        original = (mutants.REPO / mutants.PACKAGE / file).read_text(encoding="utf-8")
        assert (tmp_path / mutants.PACKAGE / file).read_text(encoding="utf-8") != original


@pytest.mark.parametrize("name", FAULT_NAMES)
def test_every_selection_names_tests_or_scenarios_that_exist(
    name: str, collected: set[str]
) -> None:
    problems = mutants.selection_problems(BY_NAME[name], mutants.REPO, collected)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("selection", SCENARIO_SELECTIONS, ids=str)
def test_behave_runs_exactly_the_scenarios_the_table_check_matches(
    selection: mutants.Scenarios,
) -> None:
    # The check parses the features itself; behave, given the options the fault's run
    # gets, must agree on how many scenarios that is (a dry run executes no step).
    [command] = mutants.commands([selection])
    done = subprocess.run(
        [*command, "--dry-run"], cwd=mutants.REPO, capture_output=True, text=True, check=True
    )
    summary = re.search(r"^\d+ scenarios? passed, .* (\d+) untested$", done.stdout, re.MULTILINE)
    assert summary is not None, done.stdout
    assert int(summary[1]) == len(mutants.matching_scenarios(selection, mutants.REPO))


# -- the table check can fail, and says what to do ---------------------------------------

A_REAL_EDIT = mutants.FAULTS[0].edits[0]


def a_fault(*selection: mutants.Selection, edit: mutants.Edit = A_REAL_EDIT) -> mutants.Fault:
    return mutants.Fault("a fault for the test", (edit,), selection)


@pytest.mark.parametrize(
    ("selection", "said"),
    [
        (mutants.tests("test_host.py", "test_no_such_test"), "test_host.py::test_no_such_test"),
        (mutants.tests("test_no_such_file.py"), "tests/test_no_such_file.py does not exist"),
        (mutants.feature("no_such.feature"), f"{mutants.FEATURES}/no_such.feature does not exist"),
        (mutants.scenarios("receiving.feature", "no such scenario"), "/no such scenario/"),
        (mutants.tagged("INV-99"), "@INV-99"),
    ],
    ids=["renamed test", "missing test file", "missing feature", "unknown name", "unused tag"],
)
def test_a_selection_that_names_nothing_is_reported_with_its_fault_and_what_to_do(
    selection: mutants.Selection, said: str, collected: set[str]
) -> None:
    [problem] = mutants.selection_problems(a_fault(selection), mutants.REPO, collected)
    assert problem.startswith("fault 'a fault for the test': ")
    assert said in problem
    assert "select" in problem.split(";")[1]


def test_a_test_named_by_the_start_of_another_name_is_not_taken_for_it(
    collected: set[str],
) -> None:
    # test_presence exists; a prefix of it, or of any test, is no test.
    assert mutants.selection_problems(
        a_fault(mutants.tests("test_registry.py", "test_pres")), mutants.REPO, collected
    )


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (mutants.Edit("host.py", "no such text\n", ""), "no longer contains the old text"),
        (mutants.Edit("host.py", "\n", ""), "times; widen it"),
        (mutants.Edit("no_such.py", "x = 1\n", ""), "does not exist; point the edit"),
    ],
    ids=["gone", "repeated", "no such file"],
)
def test_an_old_text_not_found_once_is_reported_with_its_fault_its_file_and_what_to_do(
    edit: mutants.Edit, said: str, tmp_path: Path
) -> None:
    fault = a_fault(edit=edit)
    [problem] = mutants.edit_problems(fault, mutants.REPO)
    assert problem.startswith(f"fault 'a fault for the test': src/pipost/{edit.file} ")
    assert said in problem
    shutil.copytree(mutants.REPO / mutants.PACKAGE, tmp_path / mutants.PACKAGE)
    with pytest.raises(mutants.TableError, match=re.escape(problem)):
        mutants.apply(fault, tmp_path)


def test_the_tool_runs_nothing_and_exits_2_when_the_table_does_not_fit(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = a_fault(
        mutants.tests("test_host.py", "test_no_such_test"),
        edit=mutants.Edit("host.py", "no such text\n", ""),
    )
    monkeypatch.setattr(mutants, "FAULTS", (*mutants.FAULTS, broken))
    assert mutants.main([broken.name]) == 2
    said = capsys.readouterr()
    assert said.out == ""  # no baseline, no fault was run
    assert "fault 'a fault for the test': src/pipost/host.py no longer contains" in said.err
    assert "pytest collects no test tests/test_host.py::test_no_such_test" in said.err
