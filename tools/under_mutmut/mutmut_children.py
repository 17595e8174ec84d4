"""A pytest plugin for nox -s mutation (tools/mutation.py loads it with -p): when
mutmut has recorded which tests reach which function ("stats"), it adds what the
tests' child processes reached, which sitecustomize.py wrote to mutants/child-stats/,
one file per child, its first line naming the test that started it. So a function
only a pi-post command or a listener runs is tested by the tests that start them,
the features among them (test_features.py).

Against a mutant, it runs the quickest tests first: mutmut stops at the first test
that fails, and the first it would run may be a state machine of a minute."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHILD_STATS = Path(__file__).resolve().parents[2] / "mutants" / "child-stats"


TEST = "PIPOST_MUTATION_TEST"
"""The test running, for the children it starts to name in their records."""


def _recording() -> bool:
    return os.environ.get("MUTANT_UNDER_TEST") == "stats"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.environ.get("MUTANT_UNDER_TEST", "") in ("", "stats", "fail"):
        return
    from mutmut.state import state

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
