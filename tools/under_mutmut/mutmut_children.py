"""A pytest plugin for nox -s mutation (tools/mutation.py loads it with -p): when
mutmut has recorded which tests reach which function ("stats"), it adds what the
tests' child processes reached, which sitecustomize.py wrote to mutants/child-stats/,
one file per child, its first line naming the test that started it. So a function
only a pi-post command or a listener runs is tested by the tests that start them,
the features among them (test_features.py).

Against a mutant, it runs the quickest tests first: mutmut stops at the first test
that fails, and the first it would run may be a state machine of a minute. A test
that runs far past its unmutated time (HANG_FACTOR times, plus HANG_GRACE_S; its
setup, untimed by mutmut, as if it took HANG_GRACE_S) fails as hung: mutmut's own
time-out, over all of a mutant's tests, would hold a worker for many minutes for
each mutant that makes a loop spin. And it leaves out the tests of
the kit's runner (NOT_AGAINST_A_MUTANT): they judge the runner's reports and run
pipost only as the implementation the kit is run against, through the features and
machines that run against the mutant directly; they are a sixth of the time the
mutants' tests would take. The transport's tests stay: they are the tests of the
driver's own serve and SubprocessDriver.

And a test that writes into the code under test (mutants/src) fails, its writing
undone: a mutant of `pi-post contract bump` once bumped mutants/src itself, and every
mutant after it ran against a message v2 and was "killed" by that alone."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

import pytest

CHILD_STATS = Path(
    os.environ.get(
        "PIPOST_MUTATION_RECORDS",  # set by tools/mutation.py
        Path(__file__).resolve().parents[2] / "mutants" / "child-stats",
    )
)
NOT_AGAINST_A_MUTANT = ("tests/conformance/", "tests/invariants/test_machine_verdicts.py")
# ...but the transport's tests drive pipost.driver's own serve and SubprocessDriver.
AGAINST_A_MUTANT_ALL_THE_SAME = ("tests/conformance/test_transport.py",)


TEST = "PIPOST_MUTATION_TEST"
"""The test running, for the children it starts to name in their records."""


HANG_FACTOR, HANG_GRACE_S = 6, 10.0

_MADE_BY_MUTMUT = Path(__file__).resolve().parents[2] / "mutants" / "src"
UNDER_TEST = Path(os.environ.get("PIPOST_MUTATION_UNDER_TEST", _MADE_BY_MUTMUT))
"""The code the mutants run, as mutmut made it: read as this plugin loads, in mutmut's
own process, before it forks a worker for each mutant."""
MUTMUTS_OWN = (".meta", ".spans")  # what mutmut writes there as it judges


CACHES = ("__pycache__", ".hypothesis")
"""Written beside the code by what runs it, and no part of it: Python's bytecode, and
Hypothesis's constants, which it keeps in the folder a process starts in (a test of
the kit's runner starts one in the kit's folder, in the clean run before the mutants)."""


def _files_under(root: Path) -> dict[Path, os.stat_result]:
    return {
        path: path.stat()
        for path in root.rglob("*")
        if path.is_file() and not set(CACHES) & set(path.parts) and path.suffix not in MUTMUTS_OWN
    }


STATS_AS_MADE = {path: (s.st_size, s.st_mtime_ns) for path, s in _files_under(UNDER_TEST).items()}
AS_MADE = {path: path.read_bytes() for path in STATS_AS_MADE}


class WroteIntoTheCode(AssertionError):
    """A test against a mutant changed the code under test."""


class Hung(BaseException):
    """A test against a mutant ran far past its unmutated time. Not an Exception, so
    that no ``except Exception`` of the code under test swallows it."""


def _recording() -> bool:
    return os.environ.get("MUTANT_UNDER_TEST") == "stats"


def _against_a_mutant() -> bool:
    return os.environ.get("MUTANT_UNDER_TEST", "") not in ("", "stats", "fail")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _against_a_mutant():
        return
    from mutmut.state import state

    left_out = [
        item
        for item in items
        if item.nodeid.startswith(NOT_AGAINST_A_MUTANT)
        and not item.nodeid.startswith(AGAINST_A_MUTANT_ALL_THE_SAME)
    ]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if item not in left_out]
    duration = state().duration_by_test
    items.sort(key=lambda item: duration.get(item.nodeid, 0.0))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """A fixture's time is not recorded: its setup gets the grace of a test of 10 s."""
    with _hung_after(HANG_FACTOR * HANG_GRACE_S + HANG_GRACE_S, f"{item.nodeid} (setup)"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    if not _against_a_mutant():
        return (yield)
    from mutmut.state import state

    limit = HANG_FACTOR * state().duration_by_test.get(item.nodeid, 0.0) + HANG_GRACE_S
    with _hung_after(limit, item.nodeid):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    """The code is looked at once the test's fixtures are gone: under a fake file
    system (pyfakefs) the code is not there to see, and until 2026-12-06 every test
    that ran in one failed against every mutant as having deleted it."""
    if not _against_a_mutant():
        return (yield)
    with _code_kept():
        return (yield)


@contextmanager
def _code_kept() -> Iterator[None]:
    """Undo what the test wrote into the code under test, and fail it for that."""
    try:
        yield
    finally:
        now = _files_under(UNDER_TEST)
        changed = sorted(
            {p for p, s in now.items() if STATS_AS_MADE.get(p) != (s.st_size, s.st_mtime_ns)}
            | (STATS_AS_MADE.keys() - now.keys())
        )
        for path in changed:
            if path in AS_MADE:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(AS_MADE[path])
                os.utime(path, ns=(STATS_AS_MADE[path][1], STATS_AS_MADE[path][1]))
            else:
                path.unlink()
        if changed:
            names = ", ".join(str(p.relative_to(UNDER_TEST)) for p in changed)
            raise WroteIntoTheCode(f"the test wrote into the code under test: {names} (undone)")


@contextmanager
def _hung_after(limit: float, what: str) -> Iterator[None]:
    """Raise Hung in the test if it is still running after ``limit`` seconds, against
    a mutant only."""
    if not _against_a_mutant():
        yield
        return

    def hung(signum: int, frame: FrameType | None) -> None:
        raise Hung(f"{what} ran past {limit:.0f} s against the mutant")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


KILLS = UNDER_TEST.parent / "kills.log"
"""Which test killed each mutant, and how (its failure's first line), one line a kill:
mutmut keeps only that some test failed, and a kill that cannot be real (of a
mutant accounted equivalent) is traced by the test that made it."""


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if _against_a_mutant() and report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        how = (crash.message if crash else report.longreprtext).strip().splitlines() or [""]
        line = "\t".join([os.environ["MUTANT_UNDER_TEST"], report.nodeid, report.when, how[0]])
        with open(KILLS, "a", encoding="utf-8") as log:
            log.write(f"{line} ({report.duration:.1f} s)\n")


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
