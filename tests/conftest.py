"""Shared pytest configuration: Hypothesis profiles.

Profiles:
- ``gate`` (default): quick enough for every CI run.
- ``thorough``: many more examples; select with ``HYPOTHESIS_PROFILE=thorough``
  (or ``nox -s thorough``).
"""

import os

from hypothesis import HealthCheck, settings

# The kit's marker, for the tests of tests/invariants that import its machines.
from pipost_conformance.machines.conftest import pytest_configure as pytest_configure

settings.register_profile(
    "gate",
    max_examples=50,
    deadline=None,
    derandomize=False,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough",
    max_examples=1000,
    deadline=None,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "gate"))
