"""The mutation report: mutmut 3 over src/pipost, and the score per module printed.

``nox -s mutation`` runs it. A report, not a gate: it exits 0 whatever the score, and 2
only when mutmut could not run. Nothing is kept in the repository; mutmut's own state stays
in mutants/ (git-ignored), so a rerun judges only what changed (docs/mutation.md).

Usage: python tools/mutation.py [MODULE ...] [--minutes N]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
PACKAGE = REPOSITORY / "src" / "pipost"
MUTANTS = REPOSITORY / "mutants"
SITE = REPOSITORY / "tools" / "mutmut_site"
"""What every process under mutmut loads first (its sitecustomize.py)."""
WORKERS = 2
"""The machine is shared: at most two mutants run at once."""

KILLED = frozenset({"killed", "timeout", "segfault", "caught by type check"})
LIVED = frozenset({"survived", "no tests"})
"""mutmut's statuses (mutmut.stats) that count: a failing test, a time-out or a crash
the mutant brought about kill it; a pass, or no test reaching it, let it live. Any
other status (not checked, interrupted, suspicious) is not judged."""


def every_module() -> list[str]:
    """The modules of src/pipost by their dotted names below it (a package by its own)."""
    names = []
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:
            names.append(".".join(parts))
    return sorted(names)


def module_of(mutant: str) -> str:
    """pipost.host.xǁHostǁserve__mutmut_16 → host (a function's name holds no dot)."""
    return mutant.rpartition(".")[0].removeprefix("pipost.")


def table(statuses: Mapping[str, str], modules: Sequence[str]) -> list[str]:
    """The score per module and in all: killed of the mutants judged."""
    columns = ("mutants", "waiting", "killed", "lived", "score")
    width = max([14, *(len(m) + 2 for m in modules)])
    lines = ["module".ljust(width) + "".join(f"{c:>9}" for c in columns)]
    everything: Counter[str] = Counter()
    for module in [*modules, None]:
        if module is None:
            counted = everything
        else:
            counted = Counter(_kind(s) for m, s in statuses.items() if module_of(m) == module)
            everything += counted
        mutants = sum(counted.values())
        judged = counted["killed"] + counted["lived"]
        score = f"{100 * counted['killed'] / judged:.1f} %" if judged else "-"
        figures = [mutants, counted["waiting"], counted["killed"], counted["lived"], score]
        lines.append((module or "all").ljust(width) + "".join(f"{f:>9}" for f in figures))
    return lines


def _kind(status: str) -> str:
    return "killed" if status in KILLED else "lived" if status in LIVED else "waiting"


def recorded_statuses() -> dict[str, str]:
    """Mutant → mutmut's status, from its records beside each mutated module (.meta)."""
    from mutmut.stats import status_by_exit_code

    statuses: dict[str, str] = {}
    for meta in sorted((MUTANTS / "src" / "pipost").rglob("*.meta")):
        codes = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
        statuses |= {mutant: status_by_exit_code[code] for mutant, code in codes.items()}
    return statuses


def environment() -> dict[str, str]:
    """The processes the tests start run the mutant too: mutated code first on their
    path (they inherit MUTANT_UNDER_TEST), then mutmut_site/; the gate's reproducible
    examples. Bytecode is written: a mutated module holds every mutant of its
    functions, and compiling it again in each child would cost a second a process."""
    path = os.pathsep.join([str(MUTANTS / "src"), str(SITE)])
    kept = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return kept | {"PYTHONPATH": path, "HYPOTHESIS_PROFILE": "gate"}


def run_mutmut(modules: list[str], deadline: float | None) -> int | None:
    """mutmut run: with no modules, every mutant not judged yet or changed; with
    modules, theirs, judged again. Its exit status, or None when stopped at the
    deadline (time.monotonic()) as Ctrl-C would: mutmut keeps what it judged."""
    mutmut = Path(sys.executable).with_name("mutmut")
    names = [f"pipost.{module}.*" for module in modules]
    # Made before Python starts: a folder missing then is remembered as holding nothing.
    (MUTANTS / "src").mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(
        [str(mutmut), "run", "--max-children", str(WORKERS), *names],
        cwd=REPOSITORY,
        env=environment(),
        preexec_fn=_heeding_ctrl_c,
    )
    try:
        return process.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)
        process.wait()
        return None


def _heeding_ctrl_c() -> None:
    """In mutmut's process: heed the interrupt even when started from a background
    job, which ignores it (and would hand that on)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help="modules of src/pipost (default: all)")
    parser.add_argument("--minutes", type=float, help="stop mutmut after this long")
    arguments = parser.parse_args(argv)
    unknown = sorted(set(arguments.modules) - set(every_module()))
    if unknown:
        parser.error(f"not a module of src/pipost: {' '.join(unknown)}")
    deadline = None if arguments.minutes is None else time.monotonic() + 60 * arguments.minutes
    code = run_mutmut(arguments.modules, deadline)
    if code is None:
        print(f"pi-post mutation: stopped after {arguments.minutes:g} minutes (--minutes)")
    statuses = recorded_statuses()
    modules = arguments.modules or sorted({module_of(mutant) for mutant in statuses})
    print("\n".join(["", *table(statuses, modules)]))
    if code not in (None, 0) or not statuses:
        print(f"pi-post mutation: mutmut did not finish (exit status {code})", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
