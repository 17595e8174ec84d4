"""A pytest plugin for nox -s mutation (tools/mutation.py loads it with -p): when
mutmut has recorded which tests reach which function ("stats"), it adds what the
tests' child processes reached, which sitecustomize.py wrote to mutants/child-stats/,
one file per child, its first line naming the test that started it. So a function
only a pi-post command or a listener runs is tested by the tests that start them,
the features among them (test_features.py).

Against a mutant, it runs the quickest tests first: mutmut stops at the first test
that fails, and the first it would run may be a state machine of a minute. And it
leaves out the tests of the kit's runner (NOT_AGAINST_A_MUTANT): they judge the
runner's reports and run pipost only as the implementation the kit is run against,
through the features and machines that run against the mutant directly; they are a
sixth of the time the mutants' tests would take."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHILD_STATS = Path(__file__).resolve().parents[2] / "mutants" / "child-stats"
NOT_AGAINST_A_MUTANT = ("tests/conformance/", "tests/invariants/test_machine_verdicts.py")


TEST = "PIPOST_MUTATION_TEST"
"""The test running, for the children it starts to name in their records."""


def _recording() -> bool:
    return os.environ.get("MUTANT_UNDER_TEST") == "stats"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("MUTANT_UNDER_TEST", "") in ("", "stats", "fail"):
        return
    from mutmut.state import state

    left_out = [item for item in items if item.nodeid.startswith(NOT_AGAINST_A_MUTANT)]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if item not in left_out]
    duration = state().duration_by_test
    items.sort(key=lambda item: duration.get(item.nodeid, 0.0))


def pytest_runtest_logstart(nodeid: str) -> None:
    if _recording():
        os.environ[TEST] = nodeid


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    os.environ.pop(TEST, None)
    if not _recording() or not CHILD_STATS.is_dir():
        return
    from mutmut.state import state

    books, tests = state().tests_by_mangled_function_name, state().duration_by_test
    for record in CHILD_STATS.iterdir():
        test_id, *functions = record.read_text(encoding="utf-8").splitlines()
        if test_id in tests:  # a test of this run
            for function in functions:
                books[function].add(test_id)
        record.unlink()
