"""Mutation testing by a tool nobody here tuned (``nox -s mutation``): mutmut 3 over the
modules of src/pipost, then the features and the process-level exchanges on what the
gate's pytest tests let live, and the score per module and in all, and the survivors.

mutmut (configured in pyproject.toml's [tool.mutmut]) copies src/ into mutants/, every
function of src/pipost behind a trampoline that runs the mutant MUTANT_UNDER_TEST
names, and runs the pytest tests that reach a mutated function against it, in its own
process; mutants/ keeps the verdicts, so a rerun mutates and tests again only what
changed. pi-post commands that tests start load the mutated code too: mutants/src comes
first on their PYTHONPATH, and they inherit MUTANT_UNDER_TEST (the folder beside this
file makes them run the original code while mutmut records which tests reach what).

A function only child processes run has no pytest test on mutmut's books, so its
mutants count as untested; those and the survivors then run the behave features and
tests/exchange (each stopping at its first failure) with the mutant switched on. Those
verdicts are kept in mutants/ as well, against the function's hash and the features'
and exchanges' text, and a rerun judges again only what changed.

Usage: python tools/mutation.py [MODULE ...]   (default: every module of src/pipost)
Exits 0 once every mutant is judged (survivors are printed, not failed on), 1 when
mutmut could not run or a mutant could not be judged.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MUTANTS = REPO / "mutants"
MUTATED_PACKAGE = MUTANTS / "src" / "pipost"
CHILDREN = Path(__file__).resolve().parent / "mutation_children"
FEATURES = "src/pipost_conformance/features"
EXCHANGES = "tests/exchange"
FEATURE_VERDICTS = MUTANTS / "pipost-features.json"
WORKERS = 2
"""The machine is shared: at most two mutants run at once."""
FEATURES_TIMEOUT_S = 1200.0

KILLED = "killed"
SURVIVED = "survived"
UNTESTED = "no tests"
TIMEOUT = "timeout"
BY_FEATURES = "killed by features"
STATUS_BY_EXIT_CODE = {1: KILLED, 3: KILLED, 0: SURVIVED, 5: UNTESTED, 33: UNTESTED}
STATUS_BY_EXIT_CODE |= dict.fromkeys((36, 24, -24, 152, 255), TIMEOUT)
"""mutmut's exit codes for a mutant's run (mutmut.stats); anything else is not judged."""
KILLS = (KILLED, TIMEOUT, BY_FEATURES)


def environment() -> dict[str, str]:
    """Mutated code first for every process, the gate's hypothesis profile."""
    path = [str(MUTANTS / "src"), str(CHILDREN)]
    return os.environ | {"PYTHONPATH": os.pathsep.join(path), "HYPOTHESIS_PROFILE": "gate"}


def run_mutmut(modules: list[str]) -> int:
    mutmut = Path(sys.executable).with_name("mutmut")
    names = [f"pipost.{module}.*" for module in modules]
    command = [str(mutmut), "run", "--max-children", str(WORKERS), *names]
    # On PYTHONPATH before mutmut fills it: a folder missing when Python starts is
    # remembered as holding nothing, and the tests would import no pipost_conformance.
    (MUTANTS / "src").mkdir(parents=True, exist_ok=True)
    return subprocess.run(command, cwd=REPO, env=environment(), check=False).returncode


def verdicts(modules: list[str]) -> dict[str, dict[str, object]]:
    """Module → mutmut's record of it (mutants/src/pipost/<module>.py.meta)."""
    metas = (
        [MUTATED_PACKAGE / f"{module}.py.meta" for module in modules]
        if modules
        else sorted(MUTATED_PACKAGE.glob("*.py.meta"))
    )
    return {
        meta.name.removesuffix(".py.meta"): json.loads(meta.read_text(encoding="utf-8"))
        for meta in metas
        if meta.exists()
    }


def text_digest(*folders: str) -> str:
    """What a feature verdict was reached against: the features' and exchanges' text."""
    digest = hashlib.sha256()
    for folder in folders:
        for path in sorted((REPO / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def function_hash(meta: dict[str, object], mutant: str) -> str:
    function = mutant.rpartition(".")[2].rpartition("__mutmut_")[0]
    hashes = meta["hash_by_function_name"]
    assert isinstance(hashes, dict)
    return str(hashes.get(function, ""))


def pytest_options() -> list[str]:
    """The options mutmut gives pytest (what mutated code cannot pass is left out)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    options = project["tool"]["mutmut"]["pytest_add_cli_args"]
    assert isinstance(options, list)
    return [str(option) for option in options]


def features_kill(mutant: str) -> bool:
    """The features, then the exchanges, with the mutant switched on in mutants/."""
    env = environment() | {"MUTANT_UNDER_TEST": mutant}
    runs = (
        ["-m", "behave", "--stop", "--format", "null", FEATURES],
        ["-m", "pytest", "-x", "-q", *pytest_options(), EXCHANGES],
    )
    for arguments in runs:
        try:
            ran = subprocess.run(
                [sys.executable, *arguments],
                cwd=MUTANTS,
                env=env,
                capture_output=True,
                timeout=FEATURES_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return True  # a mutant that hangs the features is caught
        if ran.returncode != 0:
            return True
    return False


def judge_the_rest(records: dict[str, dict[str, object]]) -> dict[str, str]:
    """Mutant → final status: mutmut's, or the features' for what mutmut let through."""
    kept = json.loads(FEATURE_VERDICTS.read_text("utf-8")) if FEATURE_VERDICTS.exists() else {}
    against = text_digest(FEATURES, EXCHANGES)
    statuses: dict[str, str] = {}
    for meta in records.values():
        exit_codes = meta["exit_code_by_key"]
        assert isinstance(exit_codes, dict)
        for mutant, code in exit_codes.items():
            status = STATUS_BY_EXIT_CODE.get(code, f"not judged ({code})")
            if status in (SURVIVED, UNTESTED):
                key = f"{function_hash(meta, mutant)}:{against}"
                if kept.get(mutant, {}).get("key") != key:
                    print(f"features and exchanges on {mutant}", flush=True)
                    kept[mutant] = {"key": key, "killed": features_kill(mutant)}
                    FEATURE_VERDICTS.write_text(json.dumps(kept, indent=1), encoding="utf-8")
                status = BY_FEATURES if kept[mutant]["killed"] else status
            statuses[mutant] = status
    return statuses


def report(records: dict[str, dict[str, object]], statuses: dict[str, str]) -> bool:
    """The score per module and in all, then the survivors; True if all were judged."""
    print(f"\n{'module':<14}{'mutants':>8}{'killed':>8}{'features':>9}{'lived':>7}{'score':>8}")
    everything: Counter[str] = Counter()
    for module in records:
        counted = Counter(
            status for mutant, status in statuses.items() if mutant.startswith(f"pipost.{module}.")
        )
        everything += counted
        print(row(module, counted))
    print(row("all", everything))
    survivors = [m for m, status in statuses.items() if status in (SURVIVED, UNTESTED)]
    print(f"\n{len(survivors)} survivors (mutmut show NAME prints the change):")
    for mutant in survivors:
        print(f"  {mutant}  [{statuses[mutant]}]")
    unjudged = [m for m, status in statuses.items() if status.startswith("not judged")]
    for mutant in unjudged:
        print(f"pi-post mutation: {mutant} {statuses[mutant]}", file=sys.stderr)
    return not unjudged


def row(name: str, counted: Counter[str]) -> str:
    total = sum(counted.values())
    killed = sum(counted[status] for status in KILLS)
    lived = counted[SURVIVED] + counted[UNTESTED]
    score = f"{100 * killed / total:.1f} %" if total else "-"
    by_mutmut = killed - counted[BY_FEATURES]
    return f"{name:<14}{total:>8}{by_mutmut:>8}{counted[BY_FEATURES]:>9}{lived:>7}{score:>8}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help="modules of src/pipost (default: all)")
    modules = parser.parse_args(argv).modules
    unknown = [m for m in modules if not (REPO / "src" / "pipost" / f"{m}.py").is_file()]
    if unknown:
        parser.error(f"not a module of src/pipost: {' '.join(unknown)}")
    if run_mutmut(modules) != 0:
        return 1
    records = verdicts(modules)
    return 0 if report(records, judge_the_rest(records)) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
