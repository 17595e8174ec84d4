"""The wall time of the whole gate, ``nox -s check``, run once.

    python benchmarks/check_time.py --with-check

It takes minutes and loads the machine, so it runs only when asked; without
--with-check the figure is reported as not measured. It has no floor: the goal
is the budget, well under ten minutes.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import time
from pathlib import Path

from cold_start import venv_bin
from measure import Figure, Report

BUDGET_S = 600.0
REPOSITORY = Path(__file__).resolve().parent.parent


def nox_program() -> str:
    """The nox beside this interpreter, else the one on PATH."""
    beside = Path(venv_bin("nox"))
    if beside.exists():
        return str(beside)
    found = shutil.which("nox")
    if found is None:
        raise RuntimeError("nox is not installed")
    return found


def measure(with_check: bool) -> Report:
    title = "`nox -s check` wall time"
    if not with_check:
        figure = Figure(
            key="check_wall_time",
            title=title,
            seconds=None,
            floor_seconds=None,
            floor="—",
            goal="< 10 min",
            met=None,
            samples=0,
            note="not measured in this run (run_all.py --with-check)",
        )
        return Report(figures=[figure])
    started = time.perf_counter()
    done = subprocess.run(
        [nox_program(), "-s", "check"],
        cwd=REPOSITORY,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
        timeout=3 * BUDGET_S,
    )
    seconds = time.perf_counter() - started
    passed = done.returncode == 0
    figure = Figure(
        key="check_wall_time",
        title=title,
        seconds=seconds,
        floor_seconds=None,
        floor="—",
        goal="< 10 min",
        met=seconds < BUDGET_S if passed else None,  # a failed gate stops early: no verdict
        samples=1,
        note="the gate passed" if passed else f"the gate FAILED (exit {done.returncode})",
    )
    tail = done.stdout.splitlines()[-8:]
    return Report(figures=[figure], extra={} if passed else {"check_failure_tail": tail})


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--with-check", action="store_true")
    print(measure(parser.parse_args().with_check).dumps())


if __name__ == "__main__":
    main()
