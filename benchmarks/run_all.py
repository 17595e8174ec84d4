"""Run every benchmark, write benchmarks/results.json and regenerate
docs/performance.md and docs/performance.png (``nox -s bench``).

    python benchmarks/run_all.py [--full] [--with-check]

Small samples by default, so that the whole run takes a few minutes; --full
takes more of everything. Each figure is read as a ratio to a floor measured in
the same run; the load average is recorded beside the results, since the
machines these run on are shared. The plot needs matplotlib (the ``bench``
extra); without it the table is still written.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import check_time
import cold_start
import deposit
import receipt
import receive_latency
import scale
from measure import Figure, Report, median, ms, percentile

REPOSITORY = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Sizes:
    cold_start_rounds: int
    deposit_rounds: int
    deposit_batch: int
    watch_samples: int
    poll_samples: int
    receipt_rounds: int
    scale_rounds: int
    scale_sizes: tuple[int, ...]


QUICK = Sizes(15, 6, 20, 100, 6, 20, 3, (100, 1_000, 10_000))
FULL = Sizes(60, 20, 40, 500, 30, 100, 7, (100, 300, 1_000, 3_000, 10_000))


def receive(sizes: Sizes) -> Report:
    """The lead's receive_latency benchmark, as rows: the watch against the deposit
    each sample made (its floor), and polling only beside it."""
    watch, watch_deposits = receive_latency.measure(True, sizes.watch_samples)
    poll, poll_deposits = receive_latency.measure(False, sizes.poll_samples)
    p50 = median(watch)
    rows = [
        Figure(
            key="deposit_to_context_p50_watch",
            title="deposit → context, p50, with the watch",
            seconds=p50,
            floor_seconds=median(watch_deposits),
            floor="the deposit alone, same samples",
            goal="< 5 ms",
            met=p50 < 0.005,
            samples=len(watch),
        ),
        Figure(
            key="deposit_to_context_p99_watch",
            title="deposit → context, p99, with the watch",
            seconds=percentile(watch, 0.99),
            floor_seconds=percentile(watch_deposits, 0.99),
            floor="the deposit alone, p99",
            goal="context",
            met=None,
            samples=len(watch),
        ),
        Figure(
            key="deposit_to_context_p50_poll",
            title="deposit → context, p50, polling only (every 3 s)",
            seconds=median(poll),
            floor_seconds=median(poll_deposits),
            floor="the deposit alone, same samples",
            goal="context",
            met=None,
            samples=len(poll),
            note="letters arrive at random points of the poll: about half the interval",
        ),
        Figure(
            key="deposit_to_context_p99_poll",
            title="deposit → context, p99, polling only",
            seconds=percentile(poll, 0.99),
            floor_seconds=percentile(poll_deposits, 0.99),
            floor="the deposit alone, p99",
            goal="context",
            met=None,
            samples=len(poll),
        ),
    ]
    return Report(
        figures=rows,
        distributions_ms={
            "deposit → context: deposit alone": ms(watch_deposits),
            "deposit → context: watch": ms(watch),
            "deposit → context: polling only": ms(poll),
        },
    )


def filesystem_of(path: Path) -> str:
    """The file system type of the mount holding ``path`` (Linux; "" elsewhere)."""
    best, kind = "", ""
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            for line in mounts:
                fields = line.split()
                mount_point, mount_kind = fields[1], fields[2]
                if str(path).startswith(mount_point) and len(mount_point) > len(best):
                    best, kind = mount_point, mount_kind
    except OSError:
        return ""
    return kind


def load_average() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def run(sizes: Sizes, with_check: bool) -> tuple[Report, list[dict[str, Any]]]:
    """Every benchmark, the load average noted before each."""
    steps: list[tuple[str, Callable[[], Report]]] = [
        ("cold start", lambda: cold_start.measure(sizes.cold_start_rounds)),
        ("deposit", lambda: deposit.measure(sizes.deposit_rounds, sizes.deposit_batch)),
        ("deposit → context", lambda: receive(sizes)),
        ("receipt", lambda: receipt.measure(sizes.receipt_rounds)),
        ("scale", lambda: scale.measure(sizes.scale_rounds, list(sizes.scale_sizes))),
        ("nox -s check", lambda: check_time.measure(with_check)),
    ]
    report = Report()
    loads: list[dict[str, Any]] = []
    for name, step in steps:
        print(f"run_all: {name} …", file=sys.stderr, flush=True)
        loads.append({"before": name, "load_average": load_average()})
        report.merge(step())
    loads.append({"before": "the end", "load_average": load_average()})
    return report, loads


# -- results.json, the table and the plot ---------------------------------------------


def machine(loads: list[dict[str, Any]]) -> dict[str, Any]:
    import tempfile

    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "temp_filesystem": filesystem_of(Path(tempfile.gettempdir()).resolve()),
        "load_average_1_5_15_min": loads,
    }


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"


def verdict(met: bool | None) -> str:
    return {True: "yes", False: "**no**", None: "—"}[met]


def table(figures: list[Figure]) -> list[str]:
    lines = [
        "| figure | value | floor | ratio | goal | met? |",
        "| --- | ---: | --- | ---: | --- | :---: |",
    ]
    for figure in figures:
        floor = figure.floor
        if figure.floor_seconds is not None:
            floor = f"{duration(figure.floor_seconds)} ({figure.floor})"
        ratio = "—" if figure.ratio is None else f"{figure.ratio:.2f}×"
        lines.append(
            f"| {figure.title} | {duration(figure.seconds)} | {floor} | {ratio} "
            f"| {figure.goal} | {verdict(figure.met)} |"
        )
    return lines


def scale_table(results: dict[str, Any]) -> list[str]:
    sizes: list[int] = results["scale"]["sizes"]
    seconds: dict[str, list[float]] = results["scale"]["seconds"]
    floors: dict[str, list[float]] = results["scale"]["floor_seconds"]
    lines = [
        "| records | " + " | ".join(seconds) + " |",
        "| ---: | " + " | ".join("---:" for _ in seconds) + " |",
    ]
    for index, size in enumerate(sizes):
        cells = [
            f"{duration(values[index])} ({values[index] / floors[name][index]:.1f}×)"
            for name, values in seconds.items()
        ]
        lines.append(f"| {size:,} | " + " | ".join(cells) + " |")
    return lines


def import_table(results: dict[str, Any]) -> list[str]:
    lines = ["| module | self | cumulative |", "| --- | ---: | ---: |"]
    for entry in results["cold_start_imports"]:
        lines.append(
            f"| `{entry['module']}` | {entry['self_ms']:.1f} ms | {entry['cumulative_ms']:.1f} ms |"
        )
    return lines


def figure_by_key(figures: list[Figure], key: str) -> Figure:
    return next(figure for figure in figures if figure.key == key)


def document(report: Report, results: dict[str, Any], plotted: bool) -> str:
    figures = report.figures
    load = results["machine"]["load_average_1_5_15_min"]
    send = figure_by_key(figures, "cold_start_send")
    site = figure_by_key(figures, "cold_start_site")
    imported = figure_by_key(figures, "cold_start_import")
    watch = figure_by_key(figures, "deposit_to_context_p50_watch")
    listed = figure_by_key(figures, "list")
    notes = [f"- {figure.title}: {figure.note}" for figure in figures if figure.note]
    sizes: list[int] = results["scale"]["sizes"]
    parts = [
        "# Performance",
        "",
        "Generated by `nox -s bench` (`benchmarks/run_all.py"
        f"{' --full' if results['mode'] == 'full' else ''}`) on {results['generated_at']};"
        " do not edit by hand. The numbers are in `benchmarks/results.json`.",
        "",
        "Every figure is measured beside its floor in the same run, the two sampled in"
        " alternation, and reported as the median; read the ratio, not the absolute"
        " time. The machine was shared with other work: load average (1, 5, 15 min)"
        f" {load[0]['load_average']} at the start and {load[-1]['load_average']} at the end,"
        f" on {results['machine']['cpus']} CPUs ({results['machine']['platform']},"
        f" Python {results['machine']['python']},"
        f" temporary files on {results['machine']['temp_filesystem'] or 'unknown'}).",
        "",
        *table(figures),
        "",
        *(["Notes:", "", *notes, ""] if notes else []),
        "![latency distributions and cost against registry size](performance.png)",
        "",
        *(
            []
            if plotted
            else ["(The plot was not regenerated in this run: matplotlib is not installed.)", ""]
        ),
        "## The floors",
        "",
        "- Cold start: the bare interpreter of the same venv, `python -I -S -c pass`.",
        "- Durable deposit: exclusive create, write, fsync, rename into place, fsync the"
        " folder, on the same file system with the same bytes; the non-durable floor"
        " drops both fsyncs.",
        "- Deposit → context: the deposit alone (write, flush, rename, flush the folder),"
        " timed inside the same samples.",
        "- Receipt: a running process blocked on an inotify watch, printing a line when"
        " a file is unlinked: the kernel's notice and one wake-up, nothing else.",
        "- Scale: the raw reads a command cannot avoid: every record file (listing, and"
        " resolving by path, id prefix or name, which must look at every session), one"
        " record file (resolving by address), every record plus every mailbox folder"
        " (sweep), the 50 letter files of a full mailbox (peek).",
        "",
        "## Reading the latencies",
        "",
        "Deposit → context counts from the start of the sender's deposit to the moment the"
        " receiving host hands the framed text to its context. The host takes the letter"
        " as soon as it is renamed in, while the sender is still flushing the folder, so"
        f" the figure can be under its floor (here {watch.ratio or 0:.2f}×). What remains"
        " is the sender's fsync of the letter: the 5 ms goal is a property of the disk,"
        f" and here a durable deposit alone took {duration(watch.floor_seconds)}."
        " Polling only, a letter waits for the next 3 s poll: half the interval on average.",
        "",
        "The receipt is timed from the receiver's unlink to the sender's `delivered` line"
        " arriving on a pipe. The sender is woken by the kernel (inotify), not by a poll;"
        " its inotify instance is kept open for reuse rather than closed before printing,"
        " since closing one makes the kernel wait out a grace period (5–20 ms measured"
        " on this machine, which was most of the receipt latency before).",
        "",
        "## Cold start: where the time goes",
        "",
        f"`pi-post send` took {duration(send.seconds)} against {duration(send.floor_seconds)}"
        f" for the bare interpreter ({send.ratio or 0:.2f}×; the goal is 2×). The"
        " interpreter with `site`, which any console script needs to find its package,"
        f" took {site.ratio or 0:.2f}× the floor on its own, and a process that imports"
        f" `pipost.cli` and exits the ordinary way {imported.ratio or 0:.2f}×. The send"
        " imports the same, looks one record up by address and makes a durable deposit"
        " (two fsyncs), but then ends without the interpreter's teardown"
        " (`cli.exit_now`), which is why it can take less than the import alone. By self"
        " time"
        " (`python -X importtime`, median of 3 runs, inflated by the load like"
        " everything else here):",
        "",
        *import_table(results),
        "",
        "The send path loads no standard module that costs more than the send: not `re`,"
        " `json` (letters and records are written and read through the `_json`"
        " accelerator directly, `jsontext.py`), `dataclasses` (records are"
        " `value.Value`s), `typing`, `enum`, `pathlib`, `hashlib`, `secrets` or"
        " `contextlib`, and the `pi-post` console script is written by hand, since the"
        " one pip generates imports `re`. The receiving side, the drop log, the driver,"
        " the watch, `subprocess`, `threading`, `ctypes`, `datetime` and `shlex` stay"
        " unloaded too (all pinned by tests/test_cli.py). What is left is the"
        " interpreter, `site`, and a dozen small pipost modules.",
        "",
        "## Cost against registry size",
        "",
        f"One registry grown through {', '.join(f'{size:,}' for size in sizes)} records,"
        " every hundredth session live, with a tenth as many letters queued as records"
        f" ({results['scale']['queued_at_largest']:,} at {sizes[-1]:,}), fifty to a mailbox"
        " (so the peeked mailbox is full from 500 records on)."
        " Medians, with the ratio to each column's floor:",
        "",
        *scale_table(results),
        "",
        "Resolving by address reads the one record it names, so its cost does not grow"
        " with the registry; listing, sweeping and resolving by anything else read every"
        " record, so they grow linearly, at a roughly constant multiple of the raw reads."
        f" At {sizes[-1]:,} records the raw reads alone took {duration(listed.floor_seconds)}"
        f" here, and the listing {listed.ratio or 0:.1f}× that: the strict parse of each"
        " record (the address recomputed from the session id) and its presence. The"
        " listing opens the root, `registry/` and `inbox/` once, reads every record"
        " relative to the open folder, and lists `inbox/` once, so only the mailboxes"
        " that exist are counted. A sweep reads the registry once, then again, under its"
        " mailbox's lock, each record it would remove (the session may have started"
        " since), and the record of each empty mailbox.",
        "",
    ]
    return "\n".join(parts)


def plot(results: dict[str, Any], path: Path) -> bool:
    """Latency distributions and cost against registry size; False without matplotlib."""
    try:
        import matplotlib  # type: ignore[import-not-found, unused-ignore]  # the bench extra
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # type: ignore[import-not-found, unused-ignore]

    distributions: dict[str, list[float]] = results["distributions_ms"]
    figure, (left, right) = plt.subplots(1, 2, figsize=(14, 6))
    names = list(distributions)
    left.boxplot([distributions[name] for name in names], orientation="horizontal", whis=(1, 99))
    left.set_yticks(range(1, len(names) + 1), names)
    left.set_xscale("log")
    left.set_xlabel("milliseconds (log); whiskers at p1 and p99")
    left.set_title("Latency distributions, each beside its floor")
    sizes: list[int] = results["scale"]["sizes"]
    seconds: dict[str, list[float]] = results["scale"]["seconds"]
    floors: dict[str, list[float]] = results["scale"]["floor_seconds"]
    for name in ("list", "resolve by address", "resolve by name", "sweep"):
        right.plot(sizes, [value * 1000 for value in seconds[name]], marker="o", label=name)
    for name, label in (
        ("list", "floor: read every record"),
        ("resolve by address", "floor: read one record"),
    ):
        right.plot(sizes, [value * 1000 for value in floors[name]], linestyle="--", label=label)
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("registry size (records)")
    right.set_ylabel("milliseconds (median, log)")
    right.set_title("Cost against registry size")
    right.legend()
    figure.suptitle(
        f"pipost benchmarks, {results['generated_at']} "
        f"(load average {results['machine']['load_average_1_5_15_min'][0]['load_average'][0]})"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--full", action="store_true", help="bigger samples (much slower)")
    parser.add_argument("--with-check", action="store_true", help="also time nox -s check")
    parser.add_argument("--results", type=Path, default=REPOSITORY / "benchmarks/results.json")
    parser.add_argument("--docs", type=Path, default=REPOSITORY / "docs")
    args = parser.parse_args()
    report, loads = run(FULL if args.full else QUICK, args.with_check)
    results = {
        "generated_at": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": "full" if args.full else "quick",
        "machine": machine(loads),
        **report.to_json(),
    }
    args.results.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    plotted = plot(results, args.docs / "performance.png")
    (args.docs / "performance.md").write_text(document(report, results, plotted))
    print(f"run_all: wrote {args.results}, {args.docs / 'performance.md'}", file=sys.stderr)
    print("\n".join(table(report.figures)))


if __name__ == "__main__":
    main()
