"""The kit's own environment (features/environment.py), over the toy scenarios of
this folder: the verdicts of tools/conformance.py are checked on scenarios whose
outcomes are known."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "features"))
from environment import (
    after_all,
    after_scenario,
    before_all,
    before_feature,
    before_scenario,
    before_step,
)

__all__ = [
    "after_all",
    "after_scenario",
    "before_all",
    "before_feature",
    "before_scenario",
    "before_step",
]
