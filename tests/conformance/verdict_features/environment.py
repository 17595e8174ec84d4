"""The kit's own environment (features/environment.py), over the toy scenarios of
this folder: the verdicts of pi-post conformance are checked on scenarios whose
outcomes are known."""

from __future__ import annotations

from pipost_conformance.features.environment import (
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
