"""The accounts of nox -s mutation (tools/mutation.py): every mutant that lived is
matched with a reviewed account by its function and its change, so renumbering keeps
an account and a changed line does not; an account left with no mutant is stale; the
score leaves the equivalent mutants out. And the reviewed accounts read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# tools/ holds scripts, not a package (as tests/test_mutants_table.py imports mutants).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import mutation

DIFF = "\n".join(
    [
        "--- src/pipost/policy.py",
        "+++ src/pipost/policy.py",
        "@@ -1,3 +1,3 @@",
        " def x_verdict(hops):",
        "-    if hops > LIMIT:  ",  # the trailing spaces are not part of the change
        "+    if hops >= LIMIT:",
        "         return REFUSE",
    ]
)
CHANGE = "-    if hops > LIMIT:\n+    if hops >= LIMIT:"
MUTANT = "pipost.policy.x_verdict__mutmut_7"


def account(verdict: str = "equivalent", change: str = CHANGE) -> mutation.Account:
    return mutation.Account("pipost.policy.x_verdict", change, verdict, "why")


def test_a_package_of_src_pipost_is_judged_as_a_module_its_records_beside_its_init() -> None:
    """mutmut mutates src/pipost/schemas/__init__.py too and names its mutants as the
    package's: a run reports them, and keeps their verdicts, as those of schemas."""
    modules = mutation.every_module()
    assert "schemas" in modules and "policy" in modules and "__init__" not in modules
    assert mutation.module_of("pipost.schemas.x_load__mutmut_2") == "schemas"
    schemas = mutation.MUTANTS / "src" / "pipost" / "schemas" / "__init__.py.meta"
    assert mutation.records_of("schemas") == schemas
    assert mutation.records_of("policy") == mutation.MUTANTS / "src" / "pipost" / "policy.py.meta"


FILES = {
    "tests/helpers.py": "h1",
    "tests/test_policy.py": "p1",
    "tests/test_host.py": "o1",
    "src/pipost_conformance/features/loops.feature": "f1",
    "tools/under_mutmut/test_features.py": "t1",
}
REACHING = ["tests/test_policy.py::test_a[1]", "tools/under_mutmut/test_features.py::test_f[x]"]


@pytest.mark.parametrize(
    ("change", "judged_again"),
    [
        ({"tests/test_host.py": "o2"}, False),  # a test module none of its tests is in
        ({"tests/test_other.py": "n1"}, False),  # a new one, reaching it nowhere in the books
        ({"tests/test_policy.py": "p2"}, True),  # the module of a test that reaches it
        ({"tools/under_mutmut/test_features.py": "t2"}, True),
        ({"tests/helpers.py": "h2"}, True),  # what every test may use
        ({"src/pipost_conformance/features/loops.feature": "f2"}, True),
        ({"tests/conftest.py": "c1"}, True),
    ],
)
def test_a_survivor_is_judged_again_when_its_tests_or_what_every_test_shares_change(
    change: dict[str, str], judged_again: bool
) -> None:
    before = mutation.reach_digest(REACHING, FILES)
    assert (mutation.reach_digest(REACHING, FILES | change) != before) is judged_again


def test_a_survivor_is_judged_again_when_the_books_map_another_test_to_its_function() -> None:
    before = mutation.reach_digest(REACHING, FILES)
    assert mutation.reach_digest(REACHING[:1], FILES) != before
    assert mutation.reach_digest([*REACHING, "tests/test_host.py::test_b"], FILES) != before
    assert mutation.reach_digest([*REACHING, "tests/test_policy.py::test_c"], FILES) == before


def test_a_change_is_the_lines_removed_and_added_without_headers_or_context() -> None:
    assert mutation.change_of(DIFF) == CHANGE


def test_a_mutant_names_its_function_and_module() -> None:
    assert mutation.function_of("pipost.policy.x_verdict__mutmut_12") == "pipost.policy.x_verdict"
    assert mutation.module_of("pipost.policy.x_verdict__mutmut_12") == "policy"


def test_a_mutant_that_lived_is_accounted_for_by_function_and_change_whatever_its_number() -> None:
    status = {MUTANT: "lived", "pipost.policy.x_verdict__mutmut_8": "killed"}
    judged = mutation.judge(status, {MUTANT: CHANGE}, [account()], ["policy"])
    assert judged.accounted == {MUTANT: account()}
    assert (judged.unaccounted, judged.stale) == ([], [])
    assert mutation.report(judged) == 0


def test_a_mutant_whose_change_is_not_its_accounts_is_unaccounted_and_the_account_stale() -> None:
    changes = {MUTANT: "-    if hops > LIMIT:\n+    if hops > 0:"}
    judged = mutation.judge({MUTANT: "lived"}, changes, [account()], ["policy"])
    assert judged.unaccounted == [MUTANT]
    assert judged.stale == [account()]
    assert mutation.report(judged) == 1


def test_an_account_of_a_mutant_mutmut_has_not_judged_yet_waits_and_is_not_stale() -> None:
    judged = mutation.judge(
        {MUTANT: "not judged (None)"}, {MUTANT: CHANGE}, [account()], ["policy"]
    )
    assert (judged.accounted, judged.stale) == ({}, [])


def test_an_account_of_a_mutant_mutmut_killed_is_stale() -> None:
    judged = mutation.judge({MUTANT: "killed"}, {MUTANT: CHANGE}, [account()], ["policy"])
    assert judged.stale == [account()]


def test_accounts_of_modules_not_judged_are_neither_used_nor_stale() -> None:
    judged = mutation.judge({}, {}, [account()], ["address"])
    assert (judged.accounted, judged.unaccounted, judged.stale) == ({}, [], [])


def test_a_mutant_mutmut_could_not_judge_fails_the_run() -> None:
    judged = mutation.judge({MUTANT: "not judged (-11)"}, {}, [], ["policy"])
    assert mutation.report(judged) == 1


def test_the_score_leaves_out_equivalent_and_waiting_mutants_and_counts_uncovered_as_lived() -> (
    None
):
    names = [f"pipost.policy.x_verdict__mutmut_{n}" for n in range(1, 7)]
    fates = ["killed", "killed", "killed", "lived", "lived", "not judged (None)"]
    status = dict(zip(names, fates, strict=True))
    equivalent = account("equivalent", "-a\n+b")
    uncovered = account("uncovered", "-c\n+d")
    changes = {names[3]: "-a\n+b", names[4]: "-c\n+d"}
    judged = mutation.judge(status, changes, [equivalent, uncovered], ["policy"])
    _, policy, everything = mutation.table(judged, ["policy"])
    assert policy.split() == ["policy", "6", "1", "3", "1", "1", "0", "75.0", "%"]
    assert everything.split()[1:] == policy.split()[1:]


def test_an_account_gives_a_known_verdict_and_a_reason() -> None:
    entry = '[[mutant]]\nfunction = "pipost.policy.x_verdict"\nchange = """\n-a\n+b\n"""\n'
    assert mutation.read_accounts(entry + 'verdict = "equivalent"\nreason = "why"\n') == [
        mutation.Account("pipost.policy.x_verdict", "-a\n+b", "equivalent", "why")
    ]
    with pytest.raises(ValueError, match="not one of"):
        mutation.read_accounts(entry + 'verdict = "fine"\nreason = "why"\n')
    with pytest.raises(ValueError, match="reason"):
        mutation.read_accounts(entry + 'verdict = "uncovered"\nreason = " "\n')


def test_the_reviewed_accounts_read_each_file_of_its_own_module() -> None:
    accounts = mutation.every_account()
    files = {path.stem for path in mutation.ACCOUNTS.glob("*.toml")}
    assert "schemas" in files and files <= set(mutation.every_module())
    assert len(set(accounts)) == len(accounts)


def test_an_account_in_another_modules_file_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = '[[mutant]]\nfunction = "pipost.policy.x_verdict"\nchange = "-a\\n+b"\n'
    (tmp_path / "host.toml").write_text(entry + 'verdict = "equivalent"\nreason = "why"\n')
    monkeypatch.setattr(mutation, "ACCOUNTS", tmp_path)
    with pytest.raises(ValueError, match=r"host\.toml accounts for another module's"):
        mutation.every_account()


@pytest.mark.parametrize("change", [CHANGE, '-    end = "\\n"\n+    end = "\\r\\n"'])
def test_a_draft_reads_back_as_the_account_of_its_mutant_once_filled_in(change: str) -> None:
    (drafted,) = mutation.draft([MUTANT], {MUTANT: change})
    with pytest.raises(ValueError, match="not one of"):
        mutation.read_accounts(drafted)
    filled = drafted.replace('verdict = ""', 'verdict = "equivalent"')
    filled = filled.replace('reason = ""', 'reason = "why"')
    accounts = mutation.read_accounts(filled)
    judged = mutation.judge({MUTANT: "lived"}, {MUTANT: change}, accounts, ["policy"])
    assert judged.accounted == {MUTANT: account(change=change)}


def test_the_functions_unrecorded_are_those_of_mutants_added_since_every_test_was_recorded() -> (
    None
):
    mutants = [
        MUTANT,
        "pipost.policy.x_verdict__mutmut_8",
        "pipost.files.x__make_parents__mutmut_1",
    ]
    recorded = {"pipost.policy.x_verdict", "pipost.files.x_make_root"}
    assert mutation.functions_unrecorded(mutants, recorded) == {"pipost.files.x__make_parents"}


def test_a_mutant_said_to_have_no_tests_is_judged_again_once_the_books_map_tests_to_it() -> None:
    verdicts = {
        MUTANT: mutation.NO_TESTS,  # its function now reached: judged again
        "pipost.files.x__make_parents__mutmut_1": mutation.NO_TESTS,  # still no test
        "pipost.policy.x_verdict__mutmut_8": 0,  # survived its tests: not this rule's
    }
    reached = {"pipost.policy.x_verdict"}
    assert mutation.reached_since(verdicts, reached) == {MUTANT}


def test_the_first_run_names_the_mutants_not_judged_or_else_makes_mutmuts_copies_and_books() -> (
    None
):
    judged, waiting = {MUTANT: 1}, {MUTANT: 1, "pipost.policy.x_verdict__mutmut_8": None}
    first = mutation.first_run
    assert first(["policy"], judged, chosen=False, books=True) == []
    assert first(["policy"], {}, chosen=True, books=True) == ["pipost.policy.*"]
    assert first(["policy"], waiting, chosen=True, books=False) == [
        "pipost.policy.x_verdict__mutmut_8"
    ]
    assert first(["policy"], judged, chosen=True, books=True) is None
    # a fresh clone: every mutant judged by the kept verdicts, but no mutated copy yet
    assert first(["policy"], judged, chosen=True, books=False) == []


def test_mutants_judged_again_go_in_two_runs_those_with_no_account_first() -> None:
    other = "pipost.policy.x_verdict__mutmut_8"
    changes = {MUTANT: CHANGE, other: "-    return REFUSE\n+    return None"}
    assert mutation.unaccounted_first([MUTANT, other], changes, [account()]) == [
        [other],
        [MUTANT],
    ]
    assert mutation.unaccounted_first([MUTANT], changes, []) == [[MUTANT]]
    assert mutation.unaccounted_first([MUTANT], changes, [account()]) == [[MUTANT]]
    assert mutation.unaccounted_first([], {}, [account()]) == []


def test_a_mutant_a_run_judged_is_one_whose_time_mutmut_recorded_during_it() -> None:
    """A stopped run judged some of the mutants it was given: those are the ones whose
    time is new or other than before it."""
    given = ["m_1", "m_2", "m_3", "m_4"]
    before = {"m_1": 1.5, "m_2": 2.0, "other_1": 1.0}
    after = {"m_1": 1.5, "m_2": 7.25, "m_3": 0.5, "other_1": 9.0}
    assert mutation.judged_during(given, before, after) == {"m_2", "m_3"}


READ_AS_MUTMUT_READS = """
import json, sys
from mutmut.runners.harness import ListAllTestsResult
from mutmut.state import state
from mutmut.stats import load_stats

test = sys.argv[1]
loaded = load_stats()
new = sorted(ListAllTestsResult(ids={test}).new_tests())
mapped = {f: sorted(tests) for f, tests in state().tests_by_mangled_function_name.items()}
print(json.dumps({"loaded": loaded, "new": new, "mapped": mapped}))
"""
"""In a process of its own: under mutmut, the test's process may be the one recording
what every test reaches in mutmut's state (a reset_state() here once wiped what it
had recorded of every test before this one)."""


def test_recording_every_test_again_makes_each_new_to_mutmut_and_keeps_what_it_knew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mutmut records what a test reaches only when the test is new to it: read as
    mutmut reads its books, every test is new again, and no test it had mapped to a
    function is forgotten (nor any verdict, which it keeps elsewhere)."""
    test = "tests/test_policy.py::test_a_verdict"
    books = {
        "tests_by_mangled_function_name": {"pipost.policy.x_verdict": [test]},
        "duration_by_test": {test: 0.5},
        "stats_time": 1.0,
    }
    (tmp_path / "mutants").mkdir()
    (tmp_path / "mutants" / "mutmut-stats.json").write_text(json.dumps(books))
    monkeypatch.setattr(mutation, "STATS", tmp_path / "mutants" / "mutmut-stats.json")
    mutation.record_every_test_again()
    read = subprocess.run(
        [sys.executable, "-c", READ_AS_MUTMUT_READS, test],
        cwd=tmp_path,  # where mutmut finds its books
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(read.stdout) == {
        "loaded": True,
        "new": [test],
        "mapped": {"pipost.policy.x_verdict": [test]},
    }


def test_the_note_of_the_last_recording_names_the_tests_it_was_made_against() -> None:
    """A note written before it named the tests (a list of functions) reads as made
    against unknown tests, so the next run records every test again."""
    functions = ["pipost.policy.x_verdict"]
    assert mutation.recorded_note(functions) == {"functions": functions}
    note = {"functions": functions, "tests": "abc"}
    assert mutation.recorded_note(note) == note
    assert mutation.recorded_note(None) == {}


@pytest.mark.parametrize(
    ("books", "whole"),
    [
        (None, False),  # mutmut was stopped before it saved any
        ({"tests_by_mangled_function_name": {}, "duration_by_test": {}}, False),
        ({"tests_by_mangled_function_name": {}, "duration_by_test": {"t": 0.5}}, True),
    ],
)
def test_books_are_whole_once_mutmut_saved_the_time_of_a_test(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, books: object, whole: bool
) -> None:
    """record_every_test_again() empties the times; mutmut saves its books only once it
    has recorded every test, and a run stopped before then leaves them empty."""
    stats = tmp_path / "mutmut-stats.json"
    if books is not None:
        stats.write_text(json.dumps(books))
    monkeypatch.setattr(mutation, "STATS", stats)
    assert mutation._every_test_recorded() is whole


def test_a_recording_is_noted_with_the_tests_it_was_made_against(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What run() compares with today's tests_digest() to know whether mutmut's books
    are stale: the digest noted is the one read back."""
    monkeypatch.setattr(mutation, "RECORDED", tmp_path / "functions-recorded.json")
    monkeypatch.setattr(
        mutation, "mutmut_verdicts", lambda modules: {"pipost.policy.x_verdict__mutmut_1": 1}
    )
    assert mutation._tests_recorded() is None
    mutation._note_functions_recorded("d1")
    assert mutation._tests_recorded() == "d1"
    assert mutation._functions_recorded() == {"pipost.policy.x_verdict"}


ADDRESS_HASHES = {"x_checked": "aaa", "x_is_address": "bbb", "x_address_of": "ccc"}
ADDRESS_RECORDS = {
    "exit_code_by_key": {
        "pipost.address.x_checked__mutmut_1": 1,
        "pipost.address.x_checked__mutmut_2": 0,
        "pipost.address.x_checked__mutmut_3": None,
        "pipost.address.x_is_address__mutmut_1": 33,
    },
    "hash_by_function_name": ADDRESS_HASHES,
    "type_check_error_by_key": {},
    "durations_by_key": {},
    "estimated_durations_by_key": {},
}
"""mutmut's records of a module, as its .meta holds them (x_address_of has no mutant)."""
ADDRESS_AGAINST = {
    "pipost.address.x_checked__mutmut_2": "digest-1",
    "pipost.address.x_is_address__mutmut_1": "digest-2",
}


def test_kept_verdicts_read_back_as_mutmuts_records_while_each_functions_hash_holds() -> None:
    kept = mutation.kept_of(ADDRESS_RECORDS, ADDRESS_AGAINST, "address")
    assert kept["x_checked"] == {
        "hash": "aaa",
        "verdicts": [1, 0, None],
        "lived_against": {"2": "digest-1"},
    }
    assert (
        mutation.verdicts_kept(kept, "address", ADDRESS_HASHES)
        == ADDRESS_RECORDS["exit_code_by_key"]
    )
    assert mutation.against_kept(kept, "address") == ADDRESS_AGAINST
    changed = mutation.verdicts_kept(kept, "address", {"x_checked": "new", "x_is_address": "bbb"})
    assert changed == {
        "pipost.address.x_checked__mutmut_1": None,
        "pipost.address.x_checked__mutmut_2": None,
        "pipost.address.x_checked__mutmut_3": None,
        "pipost.address.x_is_address__mutmut_1": 33,
    }


@pytest.fixture
def scratch_books(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """mutants/ and tools/verdicts/ in a scratch folder."""
    mutants = tmp_path / "mutants"
    monkeypatch.setattr(mutation, "MUTANTS", mutants)
    monkeypatch.setattr(mutation, "JUDGED_AGAINST", mutants / "lived-judged-against.json")
    monkeypatch.setattr(mutation, "KEPT", tmp_path / "verdicts")
    return tmp_path


def test_a_fresh_clone_gets_mutmuts_records_back_from_the_kept_verdicts(
    scratch_books: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mutmut.mutation.data import SourceFileMutationData

    meta = scratch_books / "mutants" / "src" / "pipost" / "address.py.meta"
    meta.parent.mkdir(parents=True)
    meta.write_text(json.dumps(ADDRESS_RECORDS))
    mutation.JUDGED_AGAINST.write_text(json.dumps(ADDRESS_AGAINST))
    mutation.keep_verdicts(["address", "policy"])  # policy: no records, nothing kept
    assert sorted(p.name for p in mutation.KEPT.iterdir()) == ["address.json"]

    (scratch_books / "mutants").rename(scratch_books / "lost")
    mutation.restore_kept()
    monkeypatch.chdir(scratch_books)  # mutmut reads mutants/ from here
    records = SourceFileMutationData(path=Path("src/pipost/address.py"))
    records.load()
    assert records.exit_code_by_key == ADDRESS_RECORDS["exit_code_by_key"]
    assert records.hash_by_function_name == ADDRESS_HASHES
    assert json.loads(mutation.JUDGED_AGAINST.read_text()) == ADDRESS_AGAINST

    before = (mutation.KEPT / "address.json").read_text()
    mutation.keep_verdicts(["address"])
    assert (mutation.KEPT / "address.json").read_text() == before


SAMPLE = """
def verdict(hops):
    if hops > 3:
        return "refuse"
    return "deliver"


def label(name):
    return name.upper()
"""
"""A module to mutate (not one of src/pipost: under mutmut, those are its mutated copies)."""


def test_a_report_without_mutmuts_records_judges_todays_mutants_by_the_kept_verdicts(
    scratch_books: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mutant of a function whose source changed since it was judged (its hash),
    or new since, waits; the others keep their verdicts, and their changes are read
    off the mutated copy mutmut makes of today's source."""
    from mutmut.mutation.file_mutation import mutate_file_contents

    source = scratch_books / mutation.PACKAGE / "sample.py"
    source.parent.mkdir(parents=True)
    source.write_text(SAMPLE)
    monkeypatch.setattr(mutation, "REPOSITORY", scratch_books)
    monkeypatch.chdir(scratch_books)  # changes_of goes there
    made = mutate_file_contents(str(mutation.PACKAGE / "sample.py"), SAMPLE)
    names = [f"pipost.sample.{name}" for name in made.mutant_names]
    verdicts = [n for n in names if "x_verdict__" in n]
    labels = [n for n in names if "x_label__" in n]
    assert len(verdicts) > 2 and labels
    hashes = dict(made.hash_by_function_name) | {"x_label": "changed since"}
    records = {
        "exit_code_by_key": {verdicts[0]: 1, verdicts[1]: 0, labels[0]: 1},  # the rest new
        "hash_by_function_name": hashes,
    }
    mutation.KEPT.mkdir()
    kept = mutation.kept_of(records, {}, "sample")
    (mutation.KEPT / "sample.json").write_text(json.dumps(kept))

    codes, sources = mutation.verdicts_without_records(["sample", "policy"])
    assert set(codes) == set(names)  # policy has no kept verdicts
    assert {n: c for n, c in codes.items() if c is not None} == {verdicts[0]: 1, verdicts[1]: 0}
    change = mutation.changes_of([verdicts[1]], sources)[verdicts[1]]
    assert change.startswith("-") and "\n+" in change
    assert "hops" in change


INTERRUPTIBLE = """
import sys, time
try:
    time.sleep(60)
except KeyboardInterrupt:
    open(sys.argv[1], "w").write("interrupted as by Ctrl-C")
"""


@pytest.mark.parametrize(
    "inherited", [signal.SIG_DFL, signal.SIG_IGN], ids=["foreground", "background"]
)
def test_a_run_past_its_deadline_is_interrupted_as_by_ctrl_c_and_said_stopped(
    tmp_path: Path, inherited: signal.Handlers
) -> None:
    """mutmut keeps its verdicts when interrupted (its workers are stopped, their
    mutants stay not judged): --minutes lets a run that cannot end in time go on later,
    also when the tool runs as a background job, which ignores Ctrl-C."""
    said = tmp_path / "said"
    command = [sys.executable, "-c", INTERRUPTIBLE, str(said)]
    before = signal.signal(signal.SIGINT, inherited)
    try:
        assert mutation.run_until(command, time.monotonic() + 1) == mutation.STOPPED
    finally:
        signal.signal(signal.SIGINT, before)
    assert said.read_text() == "interrupted as by Ctrl-C"


@pytest.mark.parametrize(("code", "outcome"), [(0, mutation.FINISHED), (2, mutation.FAILED)])
def test_a_run_that_ends_before_its_deadline_finished_or_failed_by_its_exit_code(
    code: int, outcome: str
) -> None:
    command = [sys.executable, "-c", f"raise SystemExit({code})"]
    assert mutation.run_until(command, time.monotonic() + 60) == outcome
    assert mutation.run_until(command, None) == outcome


TESTS_THAT_TAKE_TWO_SECONDS = """
import time

import pytest

import mutmut_children

mutmut_children.HANG_GRACE_S = 0.2  # their unmutated time is not recorded: 0 s


def test_two_seconds():
    time.sleep(2)


@pytest.fixture
def slow():
    time.sleep(2)


def test_a_slow_fixture(slow):
    pass
"""


@pytest.mark.parametrize(
    ("under_test", "code"), [("pipost.policy.x_verdict__mutmut_1", 1), ("", 0)]
)
def test_a_test_far_past_its_unmutated_time_fails_as_hung_against_a_mutant_only(
    tmp_path: Path, under_test: str, code: int
) -> None:
    """A mutant that makes a loop spin is killed when its test overruns, not after
    mutmut's time-out over all its tests; the unmutated runs are never cut short."""
    (tmp_path / "test_slow.py").write_text(TESTS_THAT_TAKE_TWO_SECONDS)
    (tmp_path / "code").mkdir()
    plugin = Path(mutation.__file__).parent / "under_mutmut"
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "mutmut_children", "-p", "no:cacheprovider", "-q"],
        cwd=tmp_path,
        env=os.environ
        | {
            "PYTHONPATH": str(plugin),
            "MUTANT_UNDER_TEST": under_test,
            "PIPOST_MUTATION_UNDER_TEST": str(tmp_path / "code"),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == code, ran.stdout + ran.stderr
    hung = [line for line in ran.stdout.splitlines() if line.startswith("E   ") and "Hung" in line]
    assert len(hung) == 2 * code, ran.stdout
    assert any("test_slow.py::test_two_seconds ran past" in line for line in hung) == bool(code)
    assert any("test_a_slow_fixture (setup) ran past" in line for line in hung) == bool(code)
    # each kill is logged beside the code under test, naming its test and how it failed
    kills = tmp_path / "kills.log"
    logged = [line.split("\t")[:3] for line in kills.read_text().splitlines()] if code else []
    assert logged == (
        [
            [under_test, "test_slow.py::test_two_seconds", "call"],
            [under_test, "test_slow.py::test_a_slow_fixture", "setup"],
        ]
        if code
        else []
    )
    assert kills.exists() == bool(code)
    if code:
        assert all("Hung: " in line for line in kills.read_text().splitlines())


STARTS_ITSELF = """
import subprocess, sys
started = int(sys.argv[1])
if started < 40:  # its own bound, so that a failing test starts no more than this
    sys.exit(subprocess.run([sys.executable, __file__, str(started + 1)]).returncode)
"""


@pytest.mark.parametrize(
    ("under_test", "code"), [("pipost.gate.x__rerun_in__mutmut_1", 70), ("", 0)]
)
def test_a_process_that_starts_itself_without_end_stops_past_sixteen_deep_against_a_mutant_only(
    tmp_path: Path, under_test: str, code: int
) -> None:
    """Hundreds of processes, each starting the next, once filled memory and the
    kernel killed mutmut; unmutated, as deep as the code goes."""
    script = tmp_path / "starts_itself.py"
    script.write_text(STARTS_ITSELF)
    plugin = Path(mutation.__file__).parent / "under_mutmut"
    environment = {"PYTHONPATH": str(plugin), "MUTANT_UNDER_TEST": under_test}
    ran = subprocess.run(
        [sys.executable, str(script), "1"],
        env=os.environ | environment | {"PIPOST_MUTATION_DEPTH": "0"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == code, ran.stderr
    assert ("processes nested 17 deep, past 16" in ran.stderr) == bool(code), ran.stderr


RECORDED_CHILD = """
from mutmut.state import state
state()._stats.add("pipost.policy.x_verdict")  # what a trampoline does as it is reached
"""


def test_a_child_records_where_it_is_told_whichever_copy_of_the_recorder_it_loads(
    tmp_path: Path,
) -> None:
    """mutmut copies tools/ into mutants/, and pytest puts the copy of under_mutmut
    first on sys.path; a child started with that copy once wrote its record under
    mutants/mutants/, where nothing is read, and mutmut never learnt what it reached."""
    original = Path(mutation.__file__).parent / "under_mutmut"
    copy = tmp_path / "mutants" / "tools" / "under_mutmut"
    copy.mkdir(parents=True)
    (copy / "sitecustomize.py").write_bytes((original / "sitecustomize.py").read_bytes())
    repository = tmp_path / "repository"  # whose configuration mutmut reads
    (repository / "src").mkdir(parents=True)
    (repository / "pyproject.toml").write_text('[tool.mutmut]\nsource_paths = ["src"]\n')
    records = repository / "mutants" / "child-stats"
    records.mkdir(parents=True)
    for recorder in (original, copy):
        by = recorder.parent.parent.name
        subprocess.run(
            [sys.executable, "-c", RECORDED_CHILD],
            env=os.environ
            | {
                "PYTHONPATH": str(recorder),
                "MUTANT_UNDER_TEST": "stats",
                "PIPOST_MUTATION_TEST": f"tests/test_policy.py::test_by_{by}",
                "PIPOST_MUTATION_RECORDS": str(records),
            },
            cwd=tmp_path,
            check=True,
            timeout=60,
        )
    written = sorted(record.read_text().splitlines() for record in records.iterdir())
    assert written == sorted(
        [f"tests/test_policy.py::test_by_{recorder.parent.parent.name}", "pipost.policy.x_verdict"]
        for recorder in (original, copy)
    )


TESTS_THAT_WRITE_INTO_THE_CODE = """
import os
from pathlib import Path

CODE = Path(os.environ["PIPOST_MUTATION_UNDER_TEST"])


def test_rewrites_a_module():
    (CODE / "pipost" / "message.py").write_text("VERSION = 2\\n")


def test_adds_a_schema():
    (CODE / "pipost" / "message.v2.schema.json").write_text("{}")


def test_writes_beside_the_code():
    (CODE / "pipost" / "message.py.meta").write_text("{}")


def test_leaves_hypothesis_its_cache():
    (CODE / ".hypothesis" / "constants").mkdir(parents=True)
    (CODE / ".hypothesis" / "constants" / "0c163ac806176208").write_text("[]")


def test_runs_in_a_fake_file_system(fs):
    Path("/elsewhere").mkdir()  # the code under test is not in this file system
"""


@pytest.mark.parametrize(("under_test", "code"), [("pipost.gate.x_bump__mutmut_1", 1), ("", 0)])
def test_a_test_that_writes_into_the_code_under_test_fails_and_is_undone_against_a_mutant_only(
    tmp_path: Path, under_test: str, code: int
) -> None:
    """A mutant of bump once bumped mutants/src itself: every mutant judged after it
    ran against a message v2. mutmut's own books beside the code are not the code, nor
    Hypothesis's cache; and a test in a fake file system, where the code is not to be
    seen, deleted nothing (until 2026-12-06, each such test failed every mutant)."""
    package = tmp_path / "code" / "pipost"
    package.mkdir(parents=True)
    module = package / "message.py"
    module.write_text("VERSION = 1\n")
    os.utime(module, ns=(1_000_000_000, 1_000_000_000))
    (tmp_path / "test_writes.py").write_text(TESTS_THAT_WRITE_INTO_THE_CODE)
    plugin = Path(mutation.__file__).parent / "under_mutmut"
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "mutmut_children", "-p", "no:cacheprovider", "-q"],
        cwd=tmp_path,
        env=os.environ
        | {
            "PYTHONPATH": str(plugin),
            "MUTANT_UNDER_TEST": under_test,
            "PIPOST_MUTATION_UNDER_TEST": str(tmp_path / "code"),
            "COLUMNS": "300",  # the summary's lines whole
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == code, ran.stdout + ran.stderr
    failed = [line for line in ran.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    assert failed == (
        [
            "ERROR test_writes.py::test_rewrites_a_module - mutmut_children.WroteIntoTheCode: "
            "the test wrote into the code under test: pipost/message.py (undone)",
            "ERROR test_writes.py::test_adds_a_schema - mutmut_children.WroteIntoTheCode: "
            "the test wrote into the code under test: pipost/message.v2.schema.json (undone)",
        ]
        if code
        else []
    ), ran.stdout
    schema = package / "message.v2.schema.json"
    assert (module.read_text(), schema.exists()) == (
        ("VERSION = 1\n", False) if code else ("VERSION = 2\n", True)
    )
    if code:
        assert module.stat().st_mtime_ns == 1_000_000_000
