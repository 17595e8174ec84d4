"""Run the specification against an implementation and write the INV matrix (SPEC 11).

    python tools/conformance.py [--impl COMMAND] [--cli COMMAND] [--report FILE]
                                [--features PATH ...] [--name REGEX] [--no-machines]

``--impl`` runs the driver scenarios against the implementation that COMMAND
serves over JSON lines (docs/conformance.md), ``--cli`` the command-line scenarios
against a CLI as in SPEC 8; with neither, pipost runs in this process. Scenarios
the implementation cannot run are skipped with the reason, and reported apart
from failures. The state machines of tests/invariants that honour PIPOST_IMPL run
too, on a small budget (the Hypothesis profile "conformance" of
tests/invariants/conftest.py).

``--report`` writes the matrix: one row per invariant, pass / fail / skip, with
the failing scenarios or the reasons for skipping — Markdown, or a small HTML
page when FILE ends in .html. Exits 1 when anything failed, 2 when the run itself
broke (behave wrote no results), else 0.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MACHINES = REPO / "tests" / "invariants"
MACHINE_PROFILE = "conformance"
OUTPUT_TAIL_LINES = 30

INVARIANTS = {
    "INV-01": "an address is a pure function of the session id",
    "INV-02": "only sessions have addresses; a directory is a query",
    "INV-03": "a reader never sees half a message",
    "INV-04": "a reported send survives a crash or power loss",
    "INV-05": "nothing is lost: unlinked only after entry or a recorded drop",
    "INV-06": "no double delivery",
    "INV-07": "oldest first, per mailbox",
    "INV-08": "at most 50 queued; a refused send writes nothing",
    "INV-09": "the 32 KiB body cap, at send and at read",
    "INV-10": "a malformed file is set aside, never poisons later drains",
    "INV-11": "delivered only if the message vanished while the target was live",
    "INV-12": "resolution refuses rather than guesses; atomic batch; at most 8",
    "INV-13": "every handle resolves",
    "INV-14": "a record outlives its process; shutdown marks it offline",
    "INV-15": "presence is honest, a recycled pid included",
    "INV-16": "reading has no side effects",
    "INV-17": "messages outrank tidiness: sweeps",
    "INV-18": "loops terminate structurally",
    "INV-19": "the boundary is on every delivery and cannot be forged",
    "INV-20": "inbound and resume modes",
    "INV-21": "wire compatibility with pi-post 0.7, both directions",
    "INV-22": "a hostile filesystem is refused, not followed",
    "INV-23": "failures are contained",
}
_INV_TAG = re.compile(r"INV-\d\d")
_FAILED = {"failed", "error", "hook_error", "cleanup_error", "undefined", "untested", "pending"}


@dataclass(frozen=True)
class Scenario:
    name: str
    location: str
    invariants: tuple[str, ...]
    status: str
    """passed, failed or skipped (errors and undefined steps count as failed)."""
    reason: str = ""
    """Why it was skipped, or the first error of a failure."""


@dataclass(frozen=True)
class Machine:
    path: str
    invariants: tuple[str, ...]
    status: str
    output: str = ""


@dataclass
class Row:
    invariant: str
    title: str
    passed: list[Scenario] = field(default_factory=list)
    failed: list[Scenario] = field(default_factory=list)
    skipped: list[Scenario] = field(default_factory=list)
    machines: list[Machine] = field(default_factory=list)

    @property
    def status(self) -> str:
        if self.failed or any(m.status == "failed" for m in self.machines):
            return "fail"
        if self.passed or any(m.status == "passed" for m in self.machines):
            return "pass"
        return "skip"

    def notes(self, elsewhere: Sequence[str] = ()) -> str:
        """What the row needs said; ``elsewhere`` are the pytest modules that check
        the invariant on pipost alone."""
        if self.status == "fail":
            names = [s.name for s in self.failed]
            names += [f"state machine {m.path}" for m in self.machines if m.status == "failed"]
            return "failing: " + "; ".join(names)
        if self.status == "skip":
            reasons = Counter(s.reason for s in self.skipped)
            reasons.update(m.output for m in self.machines if m.status == "skipped")
            said = "; ".join(f"{why} (×{n})" for why, n in reasons.most_common())
            text = f"skipped: {said}" if said else "no scenario of this run is tagged with it"
            where = f"; pytest checks it on pipost only: {', '.join(elsewhere)}"
            return text + (where if elsewhere else "")
        if self.skipped:
            return f"{len(self.skipped)} skipped"
        return ""


@dataclass
class Run:
    implementation: str
    scenarios: list[Scenario]
    machines: list[Machine]
    broken: str = ""
    """Why the run itself did not complete, if it did not."""
    elsewhere: dict[str, list[str]] = field(default_factory=dict)
    """Invariant → the pytest modules that check it on pipost alone."""

    def notes(self, row: Row) -> str:
        return row.notes(self.elsewhere.get(row.invariant, ()))

    def rows(self) -> list[Row]:
        rows = {inv: Row(inv, title) for inv, title in INVARIANTS.items()}
        for scenario in self.scenarios:
            for inv in scenario.invariants:
                row = rows.setdefault(inv, Row(inv, "(not in SPEC 9)"))
                getattr(row, scenario.status).append(scenario)
        for machine in self.machines:
            for inv in machine.invariants:
                rows.setdefault(inv, Row(inv, "(not in SPEC 9)")).machines.append(machine)
        return [rows[inv] for inv in sorted(rows)]

    def counts(self) -> Counter[str]:
        return Counter(s.status for s in self.scenarios)

    @property
    def failed(self) -> bool:
        return bool(
            self.broken
            or self.counts()["failed"]
            or any(m.status == "failed" for m in self.machines)
        )

    def not_checked(self) -> Counter[str]:
        """Each reason for skipping, with how many scenarios it skipped."""
        return Counter(s.reason for s in self.scenarios if s.status == "skipped")

    def summary(self) -> str:
        counts = self.counts()
        rows = Counter(row.status for row in self.rows())
        machines = Counter(m.status for m in self.machines)
        return (
            f"scenarios: {counts['passed']} passed, {counts['failed']} failed, "
            f"{counts['skipped']} skipped; state machines: {machines['passed']} passed, "
            f"{machines['failed']} failed, {machines['skipped']} skipped; invariants: "
            f"{rows['pass']} pass, {rows['fail']} fail, {rows['skip']} skip"
        )


# -- running ---------------------------------------------------------------------------------


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment, with the folder of this Python first on PATH, so that a
    command like "pi-post driver" is the one installed beside it."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(extra or {})
    return env


def run_behave(
    impl: str | None, cli: str | None, features: Sequence[str], name: str | None, work: Path
) -> tuple[list[Scenario], str]:
    """Run behave and read its JSON results; the text says why there are none."""
    results, skip_log = work / "behave.json", work / "skipped.jsonl"
    argv = [sys.executable, "-m", "behave", "--format", "json", "--outfile", str(results)]
    argv += ["--format", "progress", "--no-skipped", "-D", f"skip_log={skip_log}"]
    argv += [f"-D{key}={value}" for key, value in (("impl", impl), ("cli", cli)) if value]
    argv += ["--name", name] if name else []
    argv += list(features) or ["features"]
    done = subprocess.run(argv, cwd=REPO, env=child_env(), capture_output=True, text=True)
    sys.stdout.write(done.stdout)
    try:
        data = json.loads(results.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-OUTPUT_TAIL_LINES:])
        return [], f"behave exited with status {done.returncode} and no results:\n{tail}"
    scenarios = read_scenarios(data, read_skips(skip_log))
    if done.returncode != 0 and not any(s.status == "failed" for s in scenarios):
        tail = "\n".join(done.stdout.splitlines()[-OUTPUT_TAIL_LINES:])
        return (
            scenarios,
            f"behave exited with status {done.returncode}, no scenario failing:\n{tail}",
        )
    return scenarios, ""


def read_skips(path: Path) -> dict[str, str]:
    if not path.exists():
        return {}
    entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return {str(entry["location"]): str(entry["reason"]) for entry in entries}


def read_scenarios(data: object, skips: dict[str, str]) -> list[Scenario]:
    """Scenarios from behave's JSON formatter, their INV tags from the scenario and
    its feature, a skip's reason from the skip log environment.py keeps."""
    found = []
    for feature in data if isinstance(data, list) else []:
        feature_tags = [str(tag) for tag in feature.get("tags", [])]
        for element in feature.get("elements", []):
            if element.get("type") != "scenario":
                continue
            tags = feature_tags + [str(tag) for tag in element.get("tags", [])]
            invariants = tuple(sorted({t for t in tags if _INV_TAG.fullmatch(t)}))
            name, location = str(element["name"]).strip(), str(element.get("location", ""))
            status = str(element.get("status", "untested"))
            if status == "skipped":
                reason = skips.get(location, "skipped")
                found.append(Scenario(name, location, invariants, "skipped", reason))
            elif status in _FAILED:
                found.append(Scenario(name, location, invariants, "failed", _error(element)))
            else:
                found.append(Scenario(name, location, invariants, "passed"))
    return found


def _error(element: dict[str, object]) -> str:
    steps = element.get("steps")
    for step in steps if isinstance(steps, list) else []:
        result = step.get("result", {})
        if result.get("status") in _FAILED:
            message = result.get("error_message") or result.get("status")
            if isinstance(message, list):
                message = " ".join(str(line) for line in message)
            return f"{step.get('keyword', '')} {step.get('name', '')}: {message}".strip()
    return str(element.get("status"))


def machine_files() -> list[Path]:
    """The state machines that can run against another implementation."""
    return [
        path for path in sorted(MACHINES.glob("test_*.py")) if "PIPOST_IMPL" in path.read_text()
    ]


def run_machines(impl: str | None) -> list[Machine]:
    machines = []
    for path in machine_files():
        invariants = _module_invariants(path)
        env = child_env()
        if impl:
            env["PIPOST_IMPL"] = impl
        else:
            env.pop("PIPOST_IMPL", None)
        argv = [sys.executable, "-m", "pytest", "-q", "-rps", "-p", "no:cacheprovider"]
        argv += [f"--hypothesis-profile={MACHINE_PROFILE}", str(path)]
        done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
        lines = done.stdout.splitlines()
        status = "passed" if done.returncode == 0 else "failed"
        tail = "\n".join(lines[-OUTPUT_TAIL_LINES:])
        skips = sorted({line.split(": ", 1)[-1] for line in lines if line.startswith("SKIPPED")})
        if status == "passed" and skips and not any(line.startswith("PASSED") for line in lines):
            status, tail = "skipped", "; ".join(skips)  # every test skipped itself
        print(f"state machine {path.relative_to(REPO)}: {status}")
        machines.append(Machine(str(path.relative_to(REPO)), invariants, status, tail))
    return machines


def pipost_only() -> dict[str, list[str]]:
    """Invariant → the modules of tests/invariants and tests/exchange that check it
    (by their docstrings) on pipost alone: they cannot run against another
    implementation."""
    found: dict[str, list[str]] = {}
    drivable = set(machine_files())
    for folder in (MACHINES, REPO / "tests" / "exchange"):
        for path in sorted(folder.glob("test_*.py")):
            if path not in drivable:
                for inv in _module_invariants(path):
                    found.setdefault(inv, []).append(str(path.relative_to(REPO)))
    return found


def _module_invariants(path: Path) -> tuple[str, ...]:
    """The INV ids the module's docstring names: what the machine checks."""
    text = path.read_text(encoding="utf-8")
    docstring = text.split('"""')[1] if text.startswith('"""') else ""
    return tuple(sorted(set(_INV_TAG.findall(docstring))))


# -- the matrix ------------------------------------------------------------------------------


def markdown(run: Run) -> str:
    lines = [
        f"# Conformance matrix: {run.implementation}",
        "",
        run.summary(),
        "",
        "| invariant | result | scenarios pass / fail / skip | state machines | notes |",
        "|---|---|---|---|---|",
    ]
    for row in run.rows():
        machines = ", ".join(f"{Path(m.path).stem}: {m.status}" for m in row.machines) or "—"
        counts = f"{len(row.passed)} / {len(row.failed)} / {len(row.skipped)}"
        lines.append(
            f"| {row.invariant} {_cell(row.title)} | **{row.status}** | {counts} | "
            f"{machines} | {_cell(run.notes(row))} |"
        )
    if run.broken:
        lines += ["", "## The run broke", "", "```", run.broken, "```"]
    failures = [s for s in run.scenarios if s.status == "failed"]
    if failures:
        lines += ["", "## Failed", ""]
        lines += [f"- {_cell(s.name)} ({s.location}): {_cell(s.reason)}" for s in failures]
    lines += ["", "## Not checked", ""]
    not_checked = run.not_checked()
    lines += [f"- {why}: {n} scenarios" for why, n in not_checked.most_common()] or ["- nothing"]
    return "\n".join(lines) + "\n"


def html_page(run: Run) -> str:
    def text(value: str) -> str:
        return html.escape(value, quote=True)

    rows = []
    for row in run.rows():
        machines = ", ".join(f"{Path(m.path).stem}: {m.status}" for m in row.machines) or "—"
        rows.append(
            f'<tr class="{row.status}"><td>{text(row.invariant)}</td><td>{text(row.title)}</td>'
            f"<td>{row.status}</td><td>{len(row.passed)} / {len(row.failed)} / "
            f"{len(row.skipped)}</td><td>{text(machines)}</td><td>{text(run.notes(row))}</td></tr>"
        )
    not_checked = "".join(
        f"<li>{text(why)}: {n} scenarios</li>" for why, n in run.not_checked().most_common()
    )
    broken = f"<h2>The run broke</h2><pre>{text(run.broken)}</pre>" if run.broken else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>Conformance matrix: {text(run.implementation)}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; }}
table {{ border-collapse: collapse; }}
td, th {{ border: 1px solid #ccc; padding: 0.3em 0.6em; vertical-align: top; }}
tr.pass td:nth-child(3) {{ background: #d9f2d9; }}
tr.fail td:nth-child(3) {{ background: #f8d0d0; font-weight: bold; }}
tr.skip td:nth-child(3) {{ background: #eeeeee; }}
</style></head><body>
<h1>Conformance matrix: {text(run.implementation)}</h1>
<p>{text(run.summary())}</p>
<table>
<tr><th>invariant</th><th></th><th>result</th><th>scenarios pass / fail / skip</th>
<th>state machines</th><th>notes</th></tr>
{chr(10).join(rows)}
</table>
{broken}
<h2>Not checked</h2><ul>{not_checked or "<li>nothing</li>"}</ul>
</body></html>
"""


def _cell(text: str) -> str:
    """Text that keeps a Markdown table row in one piece."""
    return " ".join(text.replace("|", "\\|").split())


def write_report(run: Run, path: Path) -> None:
    page = html_page(run) if path.suffix.lower() == ".html" else markdown(run)
    path.write_text(page, encoding="utf-8")


# -- the command -----------------------------------------------------------------------------


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="nox -s conformance --", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--impl", help="a command serving the driver protocol on stdin/stdout")
    parser.add_argument("--cli", help="a command line compatible with SPEC 8")
    parser.add_argument("--report", type=Path, help="write the matrix here (.md or .html)")
    parser.add_argument("--features", nargs="*", default=[], help="feature files or folders")
    parser.add_argument("--name", help="only scenarios whose name matches this regex")
    parser.add_argument("--no-machines", action="store_true", help="skip the state machines")
    parser.add_argument(
        "--validate",
        action="store_true",
        help="check every request and answer against schemas/driver.v1 (a violation errs)",
    )
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="seconds a call may take (default 60)"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # behave and the state machines read both from the environment they inherit.
    os.environ["PIPOST_TIMEOUT"] = str(args.timeout)
    os.environ["PIPOST_VALIDATE"] = "1" if args.validate else ""
    parts = [
        f"--impl {args.impl!r}" if args.impl else "",
        f"--cli {args.cli!r}" if args.cli else "",
    ]
    implementation = " ".join(p for p in parts if p) or "pipost (in process)"
    with tempfile.TemporaryDirectory(prefix="pipost-conformance-") as work:
        scenarios, broken = run_behave(args.impl, args.cli, args.features, args.name, Path(work))
    cli_only = bool(args.cli) and not args.impl
    if args.no_machines or cli_only:
        why = "CLI-only implementation" if cli_only else "--no-machines"
        machines = [
            Machine(str(p.relative_to(REPO)), _module_invariants(p), "skipped", why)
            for p in machine_files()
        ]
    else:
        machines = run_machines(args.impl)
    run = Run(implementation, scenarios, machines, broken, pipost_only())
    if args.report is not None:
        write_report(run, args.report)
    print(f"conformance of {implementation}: {run.summary()}")
    for why, count in run.not_checked().most_common():
        print(f"  not checked ({count} scenarios): {why}")
    if broken:
        print(broken, file=sys.stderr)
        return 2
    return 1 if run.failed else 0


if __name__ == "__main__":
    sys.exit(main())
