"""The features, for nox -s mutation: mutmut runs pytest tests only, so each feature
file is a test here. behave runs it in a child process, which loads the mutated code
(mutants/src is first on its PYTHONPATH) and whose reach mutmut_children.py records;
it stops at the first scenario that fails, which kills the mutant."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

FEATURES = Path(__file__).resolve().parents[2] / "src" / "pipost_conformance" / "features"


@pytest.mark.parametrize("feature", sorted(path.name for path in FEATURES.glob("*.feature")))
def test_the_feature_passes(feature: str) -> None:
    behave = [sys.executable, "-m", "behave", "--stop", "--format", "null"]
    ran = subprocess.run([*behave, str(FEATURES / feature)], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
