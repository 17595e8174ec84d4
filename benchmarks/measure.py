"""What every benchmark here shares: timing a figure and its floor interleaved in
one run, medians and percentiles, and the Figure a benchmark reports.

The machines these run on are shared and noisy, so a figure is only ever read
as a ratio to a floor measured in the same run: the two are sampled in
alternation (the order flipped every round, so neither always runs on a warmer
cache or a quieter moment), and medians are reported. Nothing here asserts a
timing; a benchmark says whether a goal was met, it does not fail.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

Sample = Callable[[], float]
"""Runs once and returns the seconds its timed part took (setup stays untimed)."""


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def run_timed(argv: list[str], env: dict[str, str] | None = None, timeout: float = 600) -> float:
    """Seconds from starting ``argv`` to its exit; raises if it fails.

    Waits for the exit in one blocking call: ``subprocess.run(timeout=…)`` polls
    with sleeps that double from 0.5 ms to 50 ms, which rounds a 20 ms process up
    to 32 ms. A timer kills the process at ``timeout`` instead."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
    watchdog = threading.Timer(timeout, process.kill)
    watchdog.start()
    try:
        code = process.wait()
    finally:
        watchdog.cancel()
    elapsed = time.perf_counter() - started
    if code != 0:
        raise subprocess.CalledProcessError(code, argv)
    return elapsed


def interleaved(floor: Sample, subject: Sample, rounds: int) -> tuple[list[float], list[float]]:
    """``rounds`` samples of each, alternating, the first of each pair switching sides."""
    floors: list[float] = []
    subjects: list[float] = []
    for round_index in range(rounds):
        if round_index % 2 == 0:
            floors.append(floor())
            subjects.append(subject())
        else:
            subjects.append(subject())
            floors.append(floor())
    return floors, subjects


def median(values: list[float]) -> float:
    return statistics.median(values)


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile (``fraction`` 0.99 for p99)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def ms(values: list[float]) -> list[float]:
    """Seconds to milliseconds, rounded to the microsecond, for results.json."""
    return [round(value * 1000, 3) for value in values]


@dataclass(frozen=True)
class Figure:
    """One row of the table: a median cost, the floor it is read against, a goal."""

    key: str
    title: str
    seconds: float | None
    """None when the figure was not measured in this run (it says why in ``note``)."""
    floor_seconds: float | None
    floor: str
    """What the floor is, in a few words."""
    goal: str
    met: bool | None
    """None: no goal, the figure is context."""
    samples: int
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.seconds is None or not self.floor_seconds:
            return None
        return self.seconds / self.floor_seconds

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["ratio"] = None if self.ratio is None else round(self.ratio, 3)
        return data


@dataclass
class Report:
    """What one benchmark hands back: table rows, raw distributions (ms) for the
    plot, and anything else worth keeping in results.json."""

    figures: list[Figure] = field(default_factory=list)
    distributions_ms: dict[str, list[float]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def merge(self, other: Report) -> None:
        self.figures += other.figures
        self.distributions_ms.update(other.distributions_ms)
        self.extra.update(other.extra)

    def to_json(self) -> dict[str, Any]:
        return {
            "figures": [figure.to_json() for figure in self.figures],
            "distributions_ms": self.distributions_ms,
            **self.extra,
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)
