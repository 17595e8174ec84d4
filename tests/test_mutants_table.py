"""The fault table of ``nox -s mutants`` (tools/mutants.py) still fits the sources.

A fault whose ``old`` text no longer occurs exactly once cannot be switched on, and
a feature location that no longer starts a scenario selects something else: either
would let the table rot silently while the code changes."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

# tools/ holds scripts, not a package: mypy checks tools/mutants.py as the module
# "mutants", and so is it imported here.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import mutants

FAULT_NAMES = [fault.name for fault in mutants.FAULTS]
BY_NAME = dict(zip(FAULT_NAMES, mutants.FAULTS, strict=True))


def test_fault_names_are_unique_so_each_can_be_chosen_alone() -> None:
    assert len(set(FAULT_NAMES)) == len(FAULT_NAMES)


@pytest.mark.parametrize("name", FAULT_NAMES)
def test_every_old_text_occurs_exactly_once_in_the_current_source(name: str) -> None:
    for edit in BY_NAME[name].edits:
        assert mutants.occurrences(edit, mutants.REPO) == 1, f"{edit.file}: {edit.old!r}"


@pytest.mark.parametrize("name", FAULT_NAMES)
def test_every_fault_changes_its_files_and_still_compiles(name: str, tmp_path: Path) -> None:
    fault = BY_NAME[name]
    shutil.copytree(mutants.REPO / mutants.PACKAGE, tmp_path / mutants.PACKAGE)
    mutants.apply(fault, tmp_path)  # compiles every edited file
    for file in {edit.file for edit in fault.edits}:
        original = (mutants.REPO / mutants.PACKAGE / file).read_text(encoding="utf-8")
        assert (tmp_path / mutants.PACKAGE / file).read_text(encoding="utf-8") != original


@pytest.mark.parametrize("name", FAULT_NAMES)
def test_every_feature_line_in_a_selection_starts_a_scenario(name: str) -> None:
    for item in BY_NAME[name].selection:
        location = re.fullmatch(r"(.+\.feature):(\d+)", item)
        if location is None:
            continue
        lines = (mutants.REPO / location[1]).read_text(encoding="utf-8").splitlines()
        line = lines[int(location[2]) - 1].strip()
        assert line.startswith(("Scenario:", "Scenario Outline:")), f"{item}: {line!r}"
