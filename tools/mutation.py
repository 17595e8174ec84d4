"""Mutation testing by a tool nobody here tuned (``nox -s mutation``): mutmut 3 over the
modules of src/pipost, then the score per module and in all, and every mutant that
lived, each judged against the reviewed accounts in tools/survivors/<module>.toml.

mutmut (configured in pyproject.toml's [tool.mutmut]) copies src/ into mutants/, every
function of src/pipost behind a trampoline that runs the mutant MUTANT_UNDER_TEST
names, and runs the pytest tests that reach a mutated function against it, two
mutants at a time; mutants/ keeps the verdicts, so a rerun tests again only what
changed. Processes the tests start load the mutated code too: mutants/src comes first
on their PYTHONPATH, and tools/under_mutmut/ (also on it) records which functions they
reach for mutmut's books; the features run as pytest tests from there.

A mutant lives when no test fails against it ("survived"), or when no test reaches
its function ("no tests"). Each must have an account: ``equivalent`` (it cannot
change behaviour; not counted in the score) or ``uncovered`` (behaviour no invariant
covers, with the reason; counted as not killed). An account names the function and
the change, as ``mutmut show`` prints its lines, so renumbered mutants keep theirs.

Usage: python tools/mutation.py [MODULE ...]   (default: every module of src/pipost)
Exits 0 when every mutant is judged and every one that lived has an account and every
account a mutant; 1 otherwise; 2 when mutmut could not run.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parent.parent
MUTANTS = REPOSITORY / "mutants"
PACKAGE = Path("src") / "pipost"
ACCOUNTS = Path(__file__).resolve().parent / "survivors"
"""One file of accounts a module: <module>.toml."""
UNDER_MUTMUT = Path(__file__).resolve().parent / "under_mutmut"
JUDGED_AGAINST = MUTANTS / "lived-judged-against.json"
"""Mutant → what it was last judged against (reach_digest): a mutant that lived is
judged again when that changes."""
STATS = MUTANTS / "mutmut-stats.json"
"""mutmut's books: which tests reach each function, and each test's time."""
RECORDED = MUTANTS / "functions-recorded.json"
"""The functions there were, and the tests (tests_digest), when mutmut last recorded
what every test reaches. It records only tests it has not seen: a function added since
is reached, in its books, by the tests added with it alone, and a test changed since
keeps what it reached before (one whose child now runs the mutant, say, is never run
against the mutants only that child reaches)."""
CHILD_STATS = MUTANTS / "child-stats"
"""Where sitecustomize.py writes what each child of a test reaches (mutmut_children.py)."""
KEPT = Path(__file__).resolve().parent / "verdicts"
"""mutmut's verdicts kept in the repository, a file a module (<module>.json): mutants/
is git-ignored and a run from scratch takes hours, so a fresh clone goes on from them.
A verdict stands while mutmut's hash of its function's source is the same."""
WORKERS = 2
"""The machine is shared: at most two mutants run at once."""

KILLED, LIVED = "killed", "lived"
NO_TESTS = 33
STATUS_BY_EXIT_CODE: dict[int | None, str] = {
    1: KILLED,
    3: KILLED,
    0: LIVED,
    5: LIVED,
    NO_TESTS: LIVED,
}
STATUS_BY_EXIT_CODE |= dict.fromkeys((36, 24, -24, 152, 255, -9, -11, -1), KILLED)
"""mutmut's exit codes for a mutant (mutmut.stats): a failing test, a time-out (the
tests' CPU budget ran out), a kill after it, and the tests' process dying of a signal
the mutant brought about (a crash in ctypes, a hang-up it sent) are a kill; a pass,
and no test, let the mutant live; anything else is a mutant not judged."""
VERDICTS = ("equivalent", "uncovered")


@dataclass(frozen=True)
class Account:
    function: str
    change: str
    verdict: str
    reason: str


def change_of(diff: str) -> str:
    """The lines a mutant removes and adds, as mutmut show prints them, without the
    file headers and the context, and with the trailing spaces dropped."""
    lines = diff.splitlines()
    kept = [
        line.rstrip() for line in lines if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    return "\n".join(kept)


def function_of(mutant: str) -> str:
    """pipost.message.x_parse__mutmut_12 → pipost.message.x_parse"""
    return mutant.rpartition("__mutmut_")[0]


def module_of(mutant: str) -> str:
    return mutant.split(".")[1]


def read_accounts(text: str) -> list[Account]:
    """An account file: [[mutant]] tables of function, change, verdict, reason."""
    accounts = []
    for entry in tomllib.loads(text).get("mutant", []):
        account = Account(
            function=entry["function"],
            change=change_of(entry["change"]),
            verdict=entry["verdict"],
            reason=entry["reason"].strip(),
        )
        if account.verdict not in VERDICTS:
            known = ", ".join(VERDICTS)
            wrong = f"verdict {account.verdict!r} is not one of {known}"
            raise ValueError(f"{account.function}: {wrong}")
        if not account.reason:
            raise ValueError(f"{account.function}: an account gives its reason")
        accounts.append(account)
    return accounts


@dataclass(frozen=True)
class Judgement:
    """Every mutant's fate, and what the accounts say of those that lived."""

    status: dict[str, str]
    changes: dict[str, str]
    accounted: dict[str, Account]
    unaccounted: list[str]
    stale: list[Account]


def judge(
    status: Mapping[str, str],
    changes: Mapping[str, str],
    accounts: Iterable[Account],
    modules: Iterable[str],
) -> Judgement:
    """Match the mutants that lived (their changes in ``changes``) with the accounts of
    the modules judged; an account that matches none of them is stale, unless it
    matches a mutant mutmut has not judged yet (its change in ``changes`` too)."""
    by_key = {(a.function, a.change): a for a in accounts if a.function.split(".")[1] in modules}
    accounted: dict[str, Account] = {}
    unaccounted = []
    for mutant, fate in status.items():
        if fate != LIVED:
            continue
        account = by_key.get((function_of(mutant), changes[mutant]))
        if account is None:
            unaccounted.append(mutant)
        else:
            accounted[mutant] = account
    used = set(accounted.values())
    waiting = {
        (function_of(mutant), changes[mutant])
        for mutant, fate in status.items()
        if fate not in (KILLED, LIVED) and mutant in changes
    }
    stale = [a for key, a in by_key.items() if a not in used and key not in waiting]
    return Judgement(dict(status), dict(changes), accounted, unaccounted, stale)


def every_account() -> list[Account]:
    """The accounts of every module; a file holds only its own module's."""
    accounts = []
    for path in sorted(ACCOUNTS.glob("*.toml")):
        read = read_accounts(path.read_text(encoding="utf-8"))
        strays = sorted({a.function for a in read if module_of(a.function) != path.stem})
        if strays:
            raise ValueError(f"{path.name} accounts for another module's {', '.join(strays)}")
        accounts += read
    return accounts


def table(judgement: Judgement, modules: Iterable[str]) -> list[str]:
    """The score per module and in all: killed of the mutants judged and not equivalent
    (``waiting``: not judged yet)."""
    lines = [
        f"{'module':<14}{'mutants':>8}{'waiting':>8}{'killed':>8}{'equiv.':>8}{'uncov.':>8}"
        f"{'unacc.':>8}{'score':>9}"
    ]
    everything: Counter[str] = Counter()
    for module in [*modules, None]:
        if module is None:
            counted, name = everything, "all"
        else:
            counted = _counts(judgement, module)
            everything += counted
            name = module
        judged = counted["mutants"] - counted["waiting"] - counted["equivalent"]
        score = f"{100 * counted['killed'] / judged:.1f} %" if judged else "-"
        lines.append(
            f"{name:<14}{counted['mutants']:>8}{counted['waiting']:>8}{counted['killed']:>8}"
            f"{counted['equivalent']:>8}{counted['uncovered']:>8}{counted['unaccounted']:>8}"
            f"{score:>9}"
        )
    return lines


def _counts(judgement: Judgement, module: str) -> Counter[str]:
    counted: Counter[str] = Counter()
    for mutant, fate in judgement.status.items():
        if module_of(mutant) != module:
            continue
        counted["mutants"] += 1
        if fate == KILLED:
            counted["killed"] += 1
        elif mutant in judgement.accounted:
            counted[judgement.accounted[mutant].verdict] += 1
        elif fate == LIVED:
            counted["unaccounted"] += 1
        else:
            counted["waiting"] += 1
    return counted


# -- running mutmut ------------------------------------------------------------------


def environment() -> dict[str, str]:
    """Mutated code first for every process, and the gate's (reproducible) examples.
    Bytecode is written: a mutated module holds every mutant of its functions, and
    compiling it again in each child would cost a second a process."""
    path = [str(MUTANTS / "src"), str(UNDER_MUTMUT)]
    kept = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return kept | {
        "PYTHONPATH": os.pathsep.join(path),
        "HYPOTHESIS_PROFILE": "gate",
        "PIPOST_MUTATION_RECORDS": str(CHILD_STATS),  # sitecustomize.py
    }


def run_mutmut(names: list[str], deadline: float | None) -> str:
    """mutmut run: with no names, the mutants of new or changed functions; with names
    (globs allowed), those mutants, whatever their verdicts. FINISHED, FAILED, or
    STOPPED at the deadline (time.monotonic()), what it judged till then kept."""
    mutmut = Path(sys.executable).with_name("mutmut")
    command = [str(mutmut), "run", "--max-children", str(WORKERS), *names]
    # On PYTHONPATH before mutmut fills it: a folder missing when Python starts is
    # remembered as holding nothing, and the tests would import no pipost_conformance.
    (MUTANTS / "src").mkdir(parents=True, exist_ok=True)
    CHILD_STATS.mkdir(exist_ok=True)
    CHILD_STATS.chmod(0o1777)  # some tests run their child as another user
    return run_until(command, deadline)


FINISHED, FAILED, STOPPED = "finished", "failed", "stopped"


def run_until(command: list[str], deadline: float | None) -> str:
    """Run ``command`` from the repository; at the deadline, interrupt it as Ctrl-C
    would. mutmut then stops its workers and keeps every verdict it has recorded: the
    mutants it was testing stay not judged (never killed by the stop)."""
    process = subprocess.Popen(
        command, cwd=REPOSITORY, env=environment(), preexec_fn=_heeding_ctrl_c
    )
    try:
        code = process.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)
        process.wait()
        return STOPPED
    return FINISHED if code == 0 else FAILED


def _heeding_ctrl_c() -> None:
    """In mutmut's process before it starts: it heeds the interrupt even when this
    tool runs as a job a shell started in the background, which ignores it (and
    would hand that on, so that the deadline never stopped mutmut)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


TEST_FOLDERS = ("tests", "src/pipost_conformance", "tools/under_mutmut")
"""What the tests run against a mutant are made of: the tests, the kit, this folder."""


def test_files() -> dict[str, str]:
    """Each file of TEST_FOLDERS (its path from the repository) → the digest of its bytes."""
    files = {}
    for folder in TEST_FOLDERS:
        for path in sorted((REPOSITORY / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                name = path.relative_to(REPOSITORY).as_posix()
                files[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return files


def tests_digest() -> str:
    """The tests as a whole (test_files): when they change, mutmut's books may be stale."""
    return _digest(test_files())


def reach_digest(tests: Iterable[str], files: Mapping[str, str]) -> str:
    """What a mutant that lived was judged against: the test modules of the tests that
    reach its function (mutmut's node ids), and every file of the tests that is not a
    test module (helpers, fixtures, features, steps), which any test may use. A change
    of another test module cannot kill it: once the books are recorded again, a test
    that now reaches its function is among its tests, and the digest changes."""
    own = {test.partition("::")[0] for test in tests}
    return _digest(
        {name: digest for name, digest in files.items() if name in own or not _is_test_module(name)}
    )


def _is_test_module(name: str) -> bool:
    base = name.rpartition("/")[2]
    return base.startswith("test_") and base.endswith(".py")


def _digest(files: Mapping[str, str]) -> str:
    digest = hashlib.sha256()
    for name, content in sorted(files.items()):
        digest.update(f"{name}\0{content}\0".encode())
    return digest.hexdigest()


def judged_against_today() -> Callable[[str], str]:
    """Mutant → the reach_digest of its function's tests, by today's files and books."""
    files = test_files()
    tests = (_read_json(STATS) or {}).get("tests_by_mangled_function_name", {})
    by_function: dict[str, str] = {}

    def of(mutant: str) -> str:
        function = function_of(mutant)
        if function not in by_function:
            by_function[function] = reach_digest(tests.get(function, ()), files)
        return by_function[function]

    return of


def run(modules: list[str], chosen: bool, deadline: float | None) -> str:
    """When the tests have changed since mutmut last recorded what every test reaches,
    it records every test again before it judges anything. New and changed mutants
    first (of chosen modules: those not judged yet, by
    name, as mutmut judges again every mutant it is given by name); then, again, each
    mutant that lived against other tests than today's (those that reach its function,
    and what every test shares: reach_digest), or of a function added since
    mutmut last recorded every test (which it then records again), or said to have no
    tests by books that now map tests to its function; last, of chosen
    modules, the mutants mutmut made meanwhile (as it starts, of the functions changed
    since its last run; it judges only those it is given by name). Of the mutants
    judged again, those with no account go first: they are what a run is for, and one
    that lives costs minutes. What mutmut judged, for the first time or again, is noted
    as judged against today's tests, even in a stopped run."""
    restore_kept()
    digest = tests_digest()
    recording_everything = not STATS.exists()  # mutmut records every test when it has no books
    if not recording_everything and _tests_recorded() != digest:
        record_every_test_again()
        recording_everything = True
    before = mutmut_verdicts(modules)
    first = first_run(modules, before, chosen=chosen, books=not recording_everything)
    against = judged_against()
    outcome = FINISHED
    judged_before = {m for m, code in before.items() if code is not None}

    def note_newly_judged() -> None:
        judged = {m for m, code in mutmut_verdicts(modules).items() if code is not None}
        today = judged_against_today()
        against.update({m: today(m) for m in judged - judged_before})

    if first is not None:
        outcome = run_mutmut(first, deadline)
        note_newly_judged()
        if recording_everything and _every_test_recorded():  # even if stopped since
            _note_functions_recorded(digest)
    if outcome == FINISHED:
        unrecorded = functions_unrecorded(mutmut_verdicts(every_module()), _functions_recorded())
        verdicts = mutmut_verdicts(modules)
        lived = [m for m, code in verdicts.items() if STATUS_BY_EXIT_CODE.get(code) == LIVED]
        reached = reached_since(verdicts, _functions_reached())
        today = judged_against_today()
        again = sorted(
            m
            for m in lived
            if against.get(m) != today(m) or function_of(m) in unrecorded or m in reached
        )
        if again and unrecorded:
            record_every_test_again()
        for batch in unaccounted_first(again, _changes_in_mutants(again), every_account()):
            times = durations(modules)
            outcome = run_mutmut(batch, deadline)
            today = judged_against_today()  # the books may have been recorded again
            against |= {m: today(m) for m in judged_during(batch, times, durations(modules))}
            if outcome != FINISHED:
                break
        if outcome == FINISHED and again and unrecorded:
            _note_functions_recorded(digest)
    if outcome == FINISHED and chosen:
        made = sorted(m for m, code in mutmut_verdicts(modules).items() if code is None)
        if made:
            outcome = run_mutmut(made, deadline)
    note_newly_judged()
    JUDGED_AGAINST.write_text(json.dumps(against, indent=1), "utf-8")
    return outcome


def first_run(
    modules: list[str], before: Mapping[str, int | None], *, chosen: bool, books: bool
) -> list[str] | None:
    """What mutmut is given first: no names (it judges the mutants of new and changed
    functions), names, or nothing to run (None). Without its books (mutants/ rebuilt
    from the kept verdicts, every mutant judged), mutmut must still run once, to make
    the mutated copies and record what each test reaches, before any is judged again."""
    if not chosen:
        return []
    if not before:
        return [f"pipost.{module}.*" for module in modules]
    waiting = sorted(m for m, code in before.items() if code is None)
    return waiting or (None if books else [])


def unaccounted_first(
    mutants: list[str], changes: Mapping[str, str], accounts: Iterable[Account]
) -> list[list[str]]:
    """The mutants to judge again in batches, those with no account first (each batch
    one mutmut run, as mutmut picks its own order within a run); no empty batch."""
    keys = {(account.function, account.change) for account in accounts}
    accounted = {m for m in mutants if (function_of(m), changes[m]) in keys}
    batches = [sorted(set(mutants) - accounted), sorted(accounted)]
    return [batch for batch in batches if batch]


def judged_during(
    mutants: Iterable[str], before: Mapping[str, float], after: Mapping[str, float]
) -> set[str]:
    """Which of ``mutants`` a run judged, by mutmut's durations before and after it:
    mutmut records a mutant's time as it records its verdict, so one the run judged
    has a time it did not have before (a stopped run judged only some)."""
    return {m for m in mutants if m in after and before.get(m) != after[m]}


def durations(modules: Iterable[str]) -> dict[str, float]:
    """Mutant → how long its last judging took, from mutmut's records."""
    return _recorded(modules, "durations_by_key")


def _changes_in_mutants(mutants: list[str]) -> dict[str, str]:
    """The changes of these mutants, each module's mutated copy in mutants/ parsed once."""
    modules = {module_of(m) for m in mutants}
    sources = {m: (MUTANTS / source_of(m)).read_text(encoding="utf-8") for m in modules}
    return changes_of(mutants, sources)


def functions_unrecorded(verdicts: Iterable[str], recorded: set[str]) -> set[str]:
    """The functions of these mutants that mutmut's books may map to too few tests:
    those added since it last recorded what every test reaches."""
    return {function_of(mutant) for mutant in verdicts} - recorded


def reached_since(verdicts: Mapping[str, int | None], reached: set[str]) -> set[str]:
    """The mutants mutmut found no test for whose function its books now map to tests:
    "no tests" was said of books mutmut had not finished (an interrupted recording),
    not of the tests."""
    return {m for m, code in verdicts.items() if code == NO_TESTS and function_of(m) in reached}


def _functions_reached() -> set[str]:
    books = _read_json(STATS) or {}
    return {f for f, tests in books.get("tests_by_mangled_function_name", {}).items() if tests}


def _functions_recorded() -> set[str]:
    return set(recorded_note(_read_json(RECORDED)).get("functions", []))


def _tests_recorded() -> str | None:
    return recorded_note(_read_json(RECORDED)).get("tests")


def recorded_note(note: Any) -> dict[str, Any]:
    """RECORDED as read: a note of 2026-12-06 or before is the list of functions alone,
    recorded against tests it does not name."""
    if isinstance(note, list):
        return {"functions": note}
    return note if isinstance(note, dict) else {}


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text("utf-8")) if path.exists() else None


def _note_functions_recorded(digest: str) -> None:
    functions = {function_of(mutant) for mutant in mutmut_verdicts(every_module())}
    note = {"functions": sorted(functions), "tests": digest}
    RECORDED.write_text(json.dumps(note, indent=1), "utf-8")


def _every_test_recorded() -> bool:
    """mutmut saves its books only once it has recorded every test it was to record:
    books that name a test's time are whole."""
    return bool((_read_json(STATS) or {}).get("duration_by_test"))


def record_every_test_again() -> None:
    """Make every test new to mutmut, so that its next run records again what each
    reaches (adding to what it knew; its verdicts are kept)."""
    books = _read_json(STATS)
    books["duration_by_test"] = {}
    STATS.write_text(json.dumps(books), "utf-8")


def judged_against() -> dict[str, str]:
    """Mutant that lived → the reach_digest it was judged against (JUDGED_AGAINST)."""
    return _read_json(JUDGED_AGAINST) or {}


def records_of(module: str) -> Path:
    """mutmut's records of a module's mutants: beside its mutated copy, <source>.meta."""
    return MUTANTS / f"{source_of(module)}.meta"


def source_of(module: str) -> Path:
    """A module's source: src/pipost/<module>.py, or <module>/__init__.py for a package
    (schemas), whose mutants mutmut names as the package's (pipost.schemas.x_load__…)."""
    path = PACKAGE / f"{module}.py"
    return path if (REPOSITORY / path).exists() else PACKAGE / module / "__init__.py"


def every_module() -> list[str]:
    """The modules and packages of src/pipost, each a name a mutant's second part gives."""
    package = REPOSITORY / PACKAGE
    files = [path.stem for path in package.glob("*.py") if path.stem != "__init__"]
    return sorted(files + [path.parent.name for path in package.glob("*/__init__.py")])


def mutmut_verdicts(modules: list[str]) -> dict[str, int | None]:
    """Mutant → mutmut's exit code, from its records (mutants/src/pipost/<module>.py.meta)."""
    return _recorded(modules, "exit_code_by_key")


def _recorded(modules: Iterable[str], key: str) -> dict[str, Any]:
    """Mutant → what mutmut's records of these modules hold for it under ``key``."""
    found: dict[str, Any] = {}
    for module in modules:
        meta = records_of(module)
        if meta.exists():
            found |= json.loads(meta.read_text(encoding="utf-8"))[key]
    return found


def changes_of(mutants: Iterable[str], sources: Mapping[str, str]) -> dict[str, str]:
    """Each mutant's change, from mutmut's mutated copy of its module: in ``sources``
    (module → the copy, parsed once: a parse of a copy takes seconds), or else the
    one in mutants/ (which mutmut indexes)."""
    import libcst
    from mutmut.mutation.diff_apply import (
        get_diff_for_mutant,
        read_mutant_function,
        read_original_function,
    )

    os.chdir(REPOSITORY)  # mutmut finds its records from the repository's root
    parsed = {module: libcst.parse_module(code) for module, code in sources.items()}
    changes = {}
    for mutant in mutants:
        copy = parsed.get(module_of(mutant))
        if copy is None:
            diff = get_diff_for_mutant(mutant, path=source_of(module_of(mutant)))
        else:
            original, mutated = (
                libcst.Module([function]).code.strip().split("\n")
                for function in (
                    read_original_function(copy, mutant),
                    read_mutant_function(copy, mutant),
                )
            )
            diff = "\n".join(difflib.unified_diff(original, mutated, lineterm=""))
        changes[mutant] = change_of(diff)
    return changes


# -- the verdicts kept in the repository ---------------------------------------------


Kept = dict[str, dict[str, object]]
"""A module's kept verdicts: function → {"hash": mutmut's hash of its source,
"verdicts": its mutants' exit codes (mutant 1 first; null: not judged),
"lived_against": mutant number → the reach_digest a mutant that lived was judged against}."""


def kept_of(meta: Mapping[str, object], against: Mapping[str, str], module: str) -> Kept:
    """What mutmut's records of a module (its .meta) say, to keep."""
    codes = meta["exit_code_by_key"]
    hashes = meta["hash_by_function_name"]
    assert isinstance(codes, dict) and isinstance(hashes, dict)
    by_function: dict[str, dict[int, int | None]] = {function: {} for function in hashes}
    for mutant, code in codes.items():
        function, _, number = mutant.removeprefix(f"pipost.{module}.").rpartition("__mutmut_")
        by_function.setdefault(function, {})[int(number)] = code
    kept: Kept = {}
    for function in sorted(hashes):
        numbered = by_function[function]
        lived = {
            str(n): against[f"pipost.{module}.{function}__mutmut_{n}"]
            for n, code in numbered.items()
            if STATUS_BY_EXIT_CODE.get(code) == LIVED
            and f"pipost.{module}.{function}__mutmut_{n}" in against
        }
        kept[function] = {
            "hash": hashes[function],
            "verdicts": [numbered.get(n) for n in range(1, len(numbered) + 1)],
            "lived_against": dict(sorted(lived.items(), key=lambda item: int(item[0]))),
        }
    return kept


def verdicts_kept(kept: Kept, module: str, hashes: Mapping[str, str]) -> dict[str, int | None]:
    """Mutant → exit code, of the functions whose hash is still ``hashes``' (today's)."""
    codes: dict[str, int | None] = {}
    for function, entry in kept.items():
        verdicts = entry["verdicts"]
        assert isinstance(verdicts, list)
        same = hashes.get(function) == entry["hash"]
        for n, code in enumerate(verdicts, 1):
            codes[f"pipost.{module}.{function}__mutmut_{n}"] = code if same else None
    return codes


def against_kept(kept: Kept, module: str) -> dict[str, str]:
    """Mutant that lived → the reach_digest it was judged against."""
    against: dict[str, str] = {}
    for function, entry in kept.items():
        lived = entry["lived_against"]
        assert isinstance(lived, dict)
        for n, digest in lived.items():
            against[f"pipost.{module}.{function}__mutmut_{n}"] = digest
    return against


def read_kept(module: str) -> Kept | None:
    path = KEPT / f"{module}.json"
    return json.loads(path.read_text("utf-8")) if path.exists() else None


def keep_verdicts(modules: Iterable[str]) -> None:
    """Write what mutmut's records say of these modules into tools/verdicts/."""
    against = judged_against()
    KEPT.mkdir(exist_ok=True)
    for module in modules:
        meta = records_of(module)
        if meta.exists():
            kept = kept_of(json.loads(meta.read_text("utf-8")), against, module)
            (KEPT / f"{module}.json").write_text(
                json.dumps(kept, indent=1, ensure_ascii=False) + "\n", "utf-8"
            )


def restore_kept() -> None:
    """Where mutants/ holds no records of a module, make them of its kept verdicts:
    mutmut, as it makes the module's mutants, keeps the verdicts of the functions
    whose hash has not changed, and judges the others."""
    against = judged_against()
    for module in every_module():
        meta = records_of(module)
        kept = read_kept(module)
        if meta.exists() or kept is None:
            continue
        hashes = {function: str(entry["hash"]) for function, entry in kept.items()}
        records = {
            "exit_code_by_key": verdicts_kept(kept, module, hashes),
            "hash_by_function_name": hashes,
            "type_check_error_by_key": {},
            "durations_by_key": {},
            "estimated_durations_by_key": {},
        }
        meta.parent.mkdir(parents=True, exist_ok=True)
        meta.write_text(json.dumps(records, indent=1), "utf-8")
        against |= against_kept(kept, module)
    MUTANTS.mkdir(exist_ok=True)
    JUDGED_AGAINST.write_text(json.dumps(against, indent=1), "utf-8")


def verdicts_without_records(
    modules: Iterable[str],
) -> tuple[dict[str, int | None], dict[str, str]]:
    """For --report-only, of the modules mutants/ holds no records of: the kept
    verdicts, checked against the mutants mutmut makes of today's source (its
    functions' hashes; a new mutant waits), and the mutated copies (module → code)."""
    from mutmut.mutation.file_mutation import mutate_file_contents

    os.chdir(REPOSITORY)  # mutmut reads its configuration (what not to mutate) from here
    codes: dict[str, int | None] = {}
    sources: dict[str, str] = {}
    for module in modules:
        kept = read_kept(module)
        if records_of(module).exists() or kept is None:
            continue
        path = source_of(module)
        made = mutate_file_contents(str(path), (REPOSITORY / path).read_text("utf-8"))
        judged = verdicts_kept(kept, module, made.hash_by_function_name)
        for name in made.mutant_names:
            mutant = f"pipost.{module}.{name}"
            codes[mutant] = judged.get(mutant)
        sources[module] = made.code
    return codes, sources


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help="modules of src/pipost (default: all)")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="judge the last verdicts (mutants/, or else tools/verdicts/), run nothing",
    )
    parser.add_argument(
        "--minutes",
        type=float,
        help="stop mutmut after this long, keeping what it judged (a later run goes on)",
    )
    parser.add_argument(
        "--draft",
        action="store_true",
        help="print an account to fill in (verdict, reason) for each mutant without one",
    )
    arguments = parser.parse_args(argv)
    every = every_module()
    modules = arguments.modules or every
    unknown = sorted(set(modules) - set(every))
    if unknown:
        parser.error(f"not a module of src/pipost: {' '.join(unknown)}")
    if not arguments.report_only:
        deadline = None if arguments.minutes is None else time.monotonic() + 60 * arguments.minutes
        outcome = run(modules, chosen=bool(arguments.modules), deadline=deadline)
        keep_verdicts(modules)
        if outcome == FAILED:
            print("pi-post mutation: mutmut did not finish", file=sys.stderr)
            return 2
        if outcome == STOPPED:
            print(f"pi-post mutation: stopped after {arguments.minutes:g} minutes (--minutes)")
    else:
        keep_verdicts(modules)  # mutmut may have judged some by name (mutmut run NAME)
    codes = mutmut_verdicts(modules)
    kept_codes, sources = verdicts_without_records(modules)
    codes |= kept_codes
    status = {m: STATUS_BY_EXIT_CODE.get(c, f"not judged ({c})") for m, c in codes.items()}
    lived = [m for m, fate in status.items() if fate == LIVED]
    accounts = every_account()
    named = {account.function for account in accounts}
    waiting = [m for m, fate in status.items() if fate not in (KILLED, LIVED)]
    waiting = [m for m in waiting if function_of(m) in named]
    present = sorted({module_of(mutant) for mutant in codes})  # those with verdicts
    judgement = judge(status, changes_of([*lived, *waiting], sources), accounts, present)
    if arguments.draft:
        print("\n\n".join(draft(judgement.unaccounted, judgement.changes)))
        return 0
    print("\n".join(["", *table(judgement, present)]))
    return report(judgement)


def draft(mutants: Iterable[str], changes: Mapping[str, str]) -> list[str]:
    """An account to fill in for each mutant, its function and change written out (as
    a literal string: a change may hold backslashes); it reads only once a verdict
    and a reason are given."""
    return [
        f"[[mutant]]  # {mutant}\n"
        f'function = "{function_of(mutant)}"\n'
        f"change = '''\n{changes[mutant]}\n'''\n"
        'verdict = ""  # equivalent | uncovered\n'
        'reason = ""'
        for mutant in mutants
    ]


def report(judgement: Judgement) -> int:
    unjudged = {m: s for m, s in judgement.status.items() if s not in (KILLED, LIVED)}
    waiting = [m for m, fate in unjudged.items() if fate == f"not judged ({None})"]
    if waiting:
        print(f"{len(waiting)} mutants not judged yet: a run stopped before it judged them")
    for mutant, fate in unjudged.items():
        if mutant not in waiting:
            print(f"not judged: {mutant}: {fate}")
    for account in judgement.stale:
        print(f"stale account (no mutant that lives or waits has this change): {account.function}")
        print("    " + account.change.replace("\n", "\n    "))
    if judgement.unaccounted:
        print(f"\n{len(judgement.unaccounted)} mutants lived with no account in tools/survivors/")
        print("(each with its change: kill it with a test, or account for it):")
        for mutant in judgement.unaccounted:
            print(f"  {mutant}")
            print("      " + judgement.changes[mutant].replace("\n", "\n      "))
    return 1 if unjudged or judgement.stale or judgement.unaccounted else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
