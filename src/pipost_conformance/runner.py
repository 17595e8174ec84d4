"""Run the specification against an implementation and report its verdicts (SPEC 11).

    pi-post conformance [--impl COMMAND] [--cli COMMAND] [--features PATH ...]
                        [--name REGEX] [--no-machines] [--list]
                        [--report FILE] [--json FILE] [--junit FILE]
                        [--expect FILE] [--write-expectations FILE]
                        [--require INV-NN|must|driver|cli ...] [--validate] [--timeout S]
                        [--seed N]

``--impl`` runs the driver scenarios against the implementation that COMMAND
serves over JSON lines (docs/conformance.md), ``--cli`` the command-line scenarios
against a CLI as in SPEC 8; with neither, pipost runs in this process. COMMAND
runs from the folder the kit was started in, and the paths of the options are
from there too. The state machines of machines/ (all of them honour
PIPOST_IMPL) run too, on a small budget. The kit is this package: the features,
their steps and the machines ship in it, so an installed pipost runs it from
anywhere (``pip install "pipost[conformance]"`` brings behave, pytest,
hypothesis and jsonschema, which it runs them with).

Verdicts are per assertion: a failed assertion counts against the invariants its
step names (``@checks``) and the scenario goes on; a failing Given/When, an error
answer or a crash of the implementation is an *error* of the scenario, an
unanswered call a *timeout*, an operation the implementation does not offer
*unsupported*. Each scenario is MUST or SHOULD; the matrix shows both results per
invariant. The kit judges two parts apart (SPEC 11.2): the driver part (the
driver scenarios and the state machines) and the command line (the ``@cli``
scenarios). The implementation conforms to v1 when every MUST row of both parts
passes; a run that could check only one says so ("driver part conforms; command
line not checked").

Exit status: 0 when no MUST scenario failed, errored or timed out, something was
checked, no expected failure passed, and every ``--require``d row or part
passed (``--require must``: the run conforms to v1); 1 otherwise; 2 when the run
itself broke.
"""

from __future__ import annotations

import argparse
import ast
import html
import json
import os
import random
import re
import shlex
import subprocess
import sys
import tempfile
import textwrap
import xml.etree.ElementTree as ElementTree
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NoReturn, TextIO

KIT = Path(__file__).resolve().parent
"""This package's folder, where behave and pytest run and the paths the reports show
start: in a source checkout src/pipost_conformance, else where pipost is installed."""
FEATURES = KIT / "features"
MACHINES = KIT / "machines"
IN_FOLDER = KIT / "in_folder.py"
MACHINE_PROFILE = "conformance"
SEEDS = 2**32
"""--seed takes 0 … SEEDS - 1; a run without one draws one."""
OUTPUT_TAIL_LINES = 30
EXCHANGE_SHOWN = 12
"""The last calls of a scenario's driver exchange that the Markdown and HTML reports show."""

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
    "INV-18": "loops are bounded in rate; echoes stop",
    "INV-19": "the boundary is on every delivery and cannot be forged",
    "INV-20": "inbound and resume modes",
    "INV-21": "wire compatibility with pi-post 0.7, both directions",
    "INV-22": "a hostile filesystem is refused, not followed",
    "INV-23": "failures are contained",
}
TIERS = ("must", "should")
DEFAULT_TIER = "must"
"""The tier a scenario without a valid tier counts in (a kit defect, reported): a
failure is never hidden by a missing tag."""
PASS, FAIL, ERROR, TIMEOUT, UNSUPPORTED = "pass", "fail", "error", "timeout", "unsupported"
EXPECTED_FAIL, UNEXPECTED_PASS = "expected-fail", "unexpected-pass"
UNOBSERVED = "not-checked"
"""Not run: the kit cannot observe it here (no strace to trace system calls with)."""
OUTCOMES = (PASS, FAIL, ERROR, TIMEOUT, UNSUPPORTED, UNOBSERVED, EXPECTED_FAIL, UNEXPECTED_PASS)
NOT_PASSING = (FAIL, ERROR, TIMEOUT)
"""What an implementation did wrong: each of these is a MUST scenario's breach."""
WORST_FIRST = (
    FAIL,
    ERROR,
    TIMEOUT,
    UNEXPECTED_PASS,
    EXPECTED_FAIL,
    UNOBSERVED,
    PASS,
    UNSUPPORTED,
)
"""How a row's results combine: the first of these that occurs is the row's. A row
part of which the kit could not observe is not a pass, whatever else of it passed."""
CHECKED = (PASS, FAIL, EXPECTED_FAIL, UNEXPECTED_PASS)
"""Results of an item whose assertions ran to a verdict."""
DRIVER, CLI = "driver", "cli"
PARTS = {DRIVER: "driver part", CLI: "command line"}
"""What the kit judges apart (SPEC 11.2), as the verdict names them: a scenario
tagged @cli is of the command line; every other scenario and the state machines
are of the driver part."""
CONFORMS, DOES_NOT_CONFORM, NOT_CHECKED = "conforms", "does not conform", "not checked"
_INV = re.compile(r"INV-\d\d")
_BRACKETED = re.compile(r"\[(INV-\d\d(?:[ ,]+INV-\d\d)*)\]")
_MACHINE_TIER = re.compile(r"^Tier: *(\w+) *$", re.MULTILINE)


# -- what a scenario is: its id, its tier, its invariants ---------------------------------------


def slug(name: str) -> str:
    """``"A body over the cap (<count>)"`` → ``a-body-over-the-cap-count``."""
    return "-".join(re.findall(r"[a-z0-9]+", name.lower()))


def scenario_id(feature_file: str, name: str, row: int | None = None) -> str:
    """The stable id of a scenario (protocol §4): ``<feature stem>/<slug of its
    name>``, and ``@<row>`` for a row of an outline (counted over its examples)."""
    found = f"{Path(feature_file).stem}/{slug(name)}"
    return found if row is None else f"{found}@{row}"


def tier_of(own_tags: Iterable[str], inherited_tags: Iterable[str]) -> tuple[str, str]:
    """The tier and, when the tags do not give exactly one, the kit defect: the
    scenario's own tier tag wins over its feature's."""
    for tags in (set(own_tags), set(inherited_tags)):
        tiers = sorted(tags & set(TIERS))
        if len(tiers) == 1:
            return tiers[0], ""
        if tiers:
            return DEFAULT_TIER, "tagged both @must and @should"
    return DEFAULT_TIER, "no tier tag (@must or @should)"


@dataclass(frozen=True)
class Listed:
    """A scenario of the kit, as the run lists and reports it."""

    id: str
    name: str
    location: str
    tags: tuple[str, ...]
    tier: str
    tier_defect: str
    invariants: tuple[str, ...]


def list_feature(feature: Any) -> list[tuple[Any, Listed]]:
    """Each scenario of a parsed behave feature, an outline's rows included, with
    what the run knows of it."""
    found: list[tuple[Any, Listed]] = []
    outline, row = None, 0
    for item in feature.walk_scenarios(with_outlines=True):
        if hasattr(item, "examples"):
            outline, row = item, 0
            continue
        in_outline = outline is not None and any(item is s for s in outline.scenarios)
        row = row + 1 if in_outline else 0
        name = str(outline.name if in_outline and outline is not None else item.name).strip()
        own = [str(tag) for tag in item.tags]
        effective = [str(tag) for tag in item.effective_tags]
        tier, defect = tier_of(own, set(effective) - set(own))
        listed = Listed(
            id=scenario_id(str(feature.filename), name, row if in_outline else None),
            name=str(item.name).strip(),
            location=f"{_relative(str(item.location.filename))}:{item.location.line}",
            tags=tuple(sorted(set(effective))),
            tier=tier,
            tier_defect=defect,
            invariants=tuple(sorted({t for t in effective if _INV.fullmatch(t)})),
        )
        found.append((item, listed))
    return found


def _relative(file_name: str) -> str:
    """A feature file's name below the kit (``features/…``), as the reports show it."""
    path = Path(file_name).resolve()
    return str(path.relative_to(KIT)) if path.is_relative_to(KIT) else file_name


PIPOST_ONLY_TAG = "pipost-only"
"""Scenarios of what pipost adds beyond SPEC 8 (doctor, --json): nox -s check runs
them on pipost; they are no part of the contract, so no conformance run has them."""


def listed_scenarios(features: Sequence[str], name: str | None) -> list[Listed]:
    """The scenarios a run of these features (and name filter) would run."""
    from behave.parser import parse_file  # only this command needs behave itself

    pattern = re.compile(name) if name else None
    paths: list[Path] = []
    for given in features or [str(FEATURES)]:
        path = Path(given)
        paths += sorted(path.glob("**/*.feature")) if path.is_dir() else [path]
    found = []
    for path in paths:
        feature = parse_file(str(path))  # type: ignore[no-untyped-call]  # behave has no types
        for _, listed in list_feature(feature):
            if PIPOST_ONLY_TAG in listed.tags:
                continue
            if pattern is None or pattern.search(listed.name):
                found.append(listed)
    return found


# -- verdicts ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Assertion:
    step: str
    invariants: tuple[str, ...]
    passed: bool
    error: str = ""


@dataclass(frozen=True)
class Item:
    """A scenario or a state-machine test, with its verdict."""

    id: str
    name: str
    kind: str
    """"scenario" or "machine"."""
    location: str
    tier: str
    invariants: tuple[str, ...]
    """The invariants it is tagged with (a machine test: those it states)."""
    results: dict[str, str]
    """Invariant → this item's result for it."""
    result: str
    """The item's own outcome (one of OUTCOMES)."""
    error: str = ""
    """The first error, or why it did not run."""
    tier_defect: str = ""
    assertions: tuple[Assertion, ...] = ()
    exchange: tuple[dict[str, Any], ...] = ()
    """The driver calls of the scenario, in order, with their answers."""
    expected: str = ""
    """Why the expectations file says it fails, when it does."""
    part: str = DRIVER
    """Which part of the contract it judges: DRIVER or CLI."""


def judge(
    invariants: Sequence[str], assertions: Sequence[Assertion], stopped: str | None
) -> tuple[dict[str, str], str]:
    """Per invariant results and the outcome of a scenario from its assertions and
    from how it stopped (None: it ran to its end; else error, timeout or
    unsupported). A failed assertion fails the invariants its step names, and only
    those; an invariant with no failed assertion has the scenario's ending."""
    failed = {inv for a in assertions if not a.passed for inv in a.invariants}
    named = {inv for a in assertions for inv in a.invariants}
    ending = stopped or PASS
    results = {inv: FAIL if inv in failed else ending for inv in sorted(set(invariants) | named)}
    return results, FAIL if failed else ending


def item_from_verdict(line: dict[str, Any]) -> Item:
    """A scenario from the verdict line features/environment.py wrote for it."""
    assertions = tuple(
        Assertion(str(a["step"]), tuple(a["invariants"]), bool(a["passed"]), str(a["error"]))
        for a in line["assertions"]
    )
    stopped = line.get("stopped")
    results, outcome = judge(
        line["invariants"], assertions, stopped["outcome"] if stopped else None
    )
    errors = [a.error for a in assertions if not a.passed]
    errors += [str(stopped["error"])] if stopped else []
    return Item(
        id=str(line["id"]),
        name=str(line["name"]),
        kind="scenario",
        location=str(line["location"]),
        tier=str(line["tier"]),
        invariants=tuple(line["invariants"]),
        results=results,
        result=outcome,
        error=errors[0] if errors else "",
        tier_defect=str(line.get("tier_defect", "")),
        assertions=assertions,
        exchange=tuple(line.get("exchange", ())),
        part=CLI if CLI in line.get("tags", ()) else DRIVER,
    )


def machine_items(junit: Path, module: Path) -> list[Item]:
    """The tests of one state-machine module from pytest's JUnit XML: a failure whose
    message names invariants in brackets (``[INV-15] …``) fails those rows and says
    nothing of the others; any other failure is an error of all the test's
    invariants; a skip is unsupported, with its reason. A test's invariants are
    those its docstring names, else its module docstring's (``stated_invariants``)."""
    stated = stated_invariants(module)
    tier = machine_tier(module)
    relative = str(module.relative_to(KIT))
    dotted = relative.removesuffix(".py").replace("/", ".")
    items = []
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        in_class = str(case.get("classname", "")).removeprefix(dotted).lstrip(".")
        name = "::".join(part for part in (in_class, str(case.get("name", ""))) if part)
        invariants = of_test(stated, name)
        failure = case.find("failure")
        error = case.find("error")
        skipped = case.find("skipped")
        if failure is not None:
            message = str(failure.get("message", ""))
            text = _raised(failure.text or "")
            named = _BRACKETED.search(message) or _BRACKETED.search(text)
            if named:
                failed = tuple(sorted(set(_INV.findall(named.group(1)))))
                results, result = dict.fromkeys(failed, FAIL), FAIL
            else:
                results, result = dict.fromkeys(invariants, ERROR), ERROR
                text = "the failure names no invariant ([INV-NN] …):\n" + text
            said = text or message
        elif error is not None:
            results, result = dict.fromkeys(invariants, ERROR), ERROR
            said = (error.text or str(error.get("message", ""))).strip()
        elif skipped is not None:
            results, result = dict.fromkeys(invariants, UNSUPPORTED), UNSUPPORTED
            said = str(skipped.get("message", "")).removeprefix("Skipped: ")
        else:
            results, result, said = dict.fromkeys(invariants, PASS), PASS, ""
        items.append(
            Item(
                id=f"{relative}::{name}",
                name=name,
                kind="machine",
                location=relative,
                tier=tier,
                invariants=invariants,
                results=results,
                result=result,
                error=said,
            )
        )
    return items


def _raised(report: str) -> str:
    """What pytest's report of a failure says was raised (its ``E`` lines: the
    message and Hypothesis's falsifying example), else the whole report."""
    said = [line[1:] for line in report.splitlines() if line.startswith("E ")]
    return textwrap.dedent("\n".join(said)).strip() if said else report.strip()


def module_invariants(path: Path) -> tuple[str, ...]:
    """The INV ids the module's docstring names: what the machine checks."""
    return tuple(sorted(set(_INV.findall(_docstring(path)))))


def stated_invariants(path: Path) -> dict[str, tuple[str, ...]]:
    """What each test of a machine module checks: test name (``function`` or
    ``Class::method``, as its pytest id names it) → the INV ids its docstring
    names, for each test (pytest's ``test*`` functions, in ``Test*`` classes or
    not) whose docstring names some; ``""`` → the module's, the default of a test
    that states none."""
    found = {"": module_invariants(path)}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                named = sorted(set(_INV.findall(ast.get_docstring(node) or "")))
                if named and node.name.startswith("test"):
                    found[prefix + node.name] = tuple(named)
            elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                visit(node.body, f"{prefix}{node.name}::")

    visit(ast.parse(path.read_text(encoding="utf-8")).body, "")
    return found


def of_test(stated: dict[str, tuple[str, ...]], name: str) -> tuple[str, ...]:
    """The invariants a test states (``stated_invariants``), by the name in its id:
    a parametrised test's ``[…]`` is left off."""
    return stated.get(name.partition("[")[0], stated[""])


def machine_tier(path: Path) -> str:
    """A machine's tier: its docstring's ``Tier: must|should`` line, else must."""
    found = _MACHINE_TIER.search(_docstring(path))
    return found.group(1) if found and found.group(1) in TIERS else DEFAULT_TIER


def _docstring(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    return text.split('"""')[1] if text.startswith('"""') else ""


# -- expectations -----------------------------------------------------------------------------


def read_expectations(path: Path) -> dict[str, str]:
    """Scenario id → reason, one a line: ``<id> <reason>``; blank lines and lines
    starting with ``#`` are comments. A line without a reason is an error."""
    found = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        item_id, _, reason = text.partition(" ")
        if not reason.strip():
            raise ValueError(f"{path}:{number}: {item_id} has no reason (write: <id> <reason>)")
        found[item_id] = reason.strip()
    return found


def expectations_text(items: Sequence[Item]) -> str:
    """An expectations file that expects this run's failures, their first errors as
    the reasons (edit them to say why)."""
    lines = [
        "# Expected failures for pi-post conformance --expect: <scenario id> <reason>",
        "# (written by --write-expectations from the failures of a run)",
    ]
    for item in items:
        if item.result in NOT_PASSING or item.result == EXPECTED_FAIL:
            reason = item.expected or " ".join(item.error.split())[:200] or item.result
            lines.append(f"{item.id} {reason}")
    return "\n".join(lines) + "\n"


def expect(item: Item, reason: str) -> Item:
    """An item the expectations file says fails. The expectation is about the item
    as a whole: while it still fails it is expected-fail, and so are the rows it
    fails, while the rows it passes count as passes; once it passes as a whole it is
    an unexpected-pass, in every row, which fails the run until the file is updated.
    An item that did not run (unsupported) stays as it is."""
    if item.result == PASS:
        results = dict.fromkeys(item.results, UNEXPECTED_PASS)
        return replace(item, results=results, result=UNEXPECTED_PASS, expected=reason)
    if item.result not in NOT_PASSING:
        return replace(item, expected=reason)
    results = {
        inv: EXPECTED_FAIL if result in NOT_PASSING else result
        for inv, result in item.results.items()
    }
    return replace(item, results=results, result=EXPECTED_FAIL, expected=reason)


# -- the run ----------------------------------------------------------------------------------


@dataclass
class Row:
    invariant: str
    title: str
    items: dict[str, list[tuple[Item, str]]] = field(
        default_factory=lambda: {tier: [] for tier in TIERS}
    )
    """Tier → the items with a result for this invariant, each with that result."""

    def result(self, tier: str) -> str | None:
        """The row's result in a tier; None when no item of that tier checks it."""
        results = {result for _, result in self.items[tier]}
        return next((r for r in WORST_FIRST if r in results), None)

    def counts(self, tier: str) -> Counter[str]:
        return Counter(result for _, result in self.items[tier])


@dataclass
class Run:
    implementation: str
    items: list[Item]
    broken: str = ""
    """Why the run itself did not complete, if it did not."""
    about: dict[str, Any] | None = None
    """The implementation's name, version and language, as ``open`` answered them."""
    selected: bool = False
    """Only some of the kit ran (--features, --name, --no-machines)."""
    elsewhere: dict[str, list[str]] = field(default_factory=dict)
    """Invariant → the pytest modules that check it on pipost alone."""
    not_in_run: list[str] = field(default_factory=list)
    """Ids of the expectations file that this run did not meet."""
    required: list[str] = field(default_factory=list)
    seed: int | None = None
    """The seed the state machines ran with (None: none ran); --seed replays it."""

    def rows(self, part: str | None = None) -> list[Row]:
        """One row per invariant, of every item or of one part's."""
        rows = {inv: Row(inv, title) for inv, title in INVARIANTS.items()}
        for item in self.items:
            if part is not None and item.part != part:
                continue
            for inv, result in item.results.items():
                row = rows.setdefault(inv, Row(inv, "(not in SPEC 9)"))
                row.items[item.tier].append((item, result))
        return [rows[inv] for inv in sorted(rows)]

    def parts(self) -> dict[str, str]:
        """Each part this run holds MUST items of, judged on its own rows: CONFORMS
        when every one passes, NOT_CHECKED when one (or all) was never checked,
        else DOES_NOT_CONFORM. A part of which the run holds nothing is not checked,
        unless the run was a selection, which may leave a part out."""
        judged = {}
        for part in PARTS:
            results = {row.result("must") for row in self.rows(part)} - {None}
            if not results:
                if not self.selected:
                    judged[part] = NOT_CHECKED
                continue
            if results == {PASS}:
                judged[part] = CONFORMS
            elif results <= {PASS, UNSUPPORTED, UNOBSERVED}:
                judged[part] = NOT_CHECKED
            else:
                judged[part] = DOES_NOT_CONFORM
        return judged

    def unchecked_rows(self, part: str, result: str = UNSUPPORTED) -> list[str]:
        return [row.invariant for row in self.rows(part) if row.result("must") == result]

    def conforms(self) -> bool:
        """Every MUST row of each part was checked and passed (of the selection that
        ran): conforming to v1 takes both parts, unless a selection left one out."""
        parts = self.parts()
        return bool(parts) and not self.broken and set(parts.values()) == {CONFORMS}

    def checked(self) -> bool:
        return any(item.result in CHECKED for item in self.items)

    def breaches(self) -> list[str]:
        """Why the exit status is 1, one line each; empty when it is 0."""
        found = [
            f"{item.id}: MUST {item.result}"
            for item in self.items
            if item.tier == "must" and item.result in NOT_PASSING
        ]
        found += [
            f"{item.id}: passes, but the expectations say it fails: update the file"
            for item in self.items
            if item.result == UNEXPECTED_PASS
        ]
        if not self.checked():
            found.append("nothing was checked: every scenario was unsupported or none ran")
        rows = {row.invariant: row for row in self.rows()}
        parts = self.parts()
        for wanted in self.required:
            if wanted == "must":
                if not self.conforms():
                    found.append(f"--require must: {self.parts_said()}")
                continue
            if wanted in PARTS:
                if parts.get(wanted) != CONFORMS:
                    said = parts.get(wanted, "not in this run")
                    found.append(f"--require {wanted}: the {PARTS[wanted]} {said}")
                continue
            row = rows.get(wanted)
            result = row.result("must") if row else None
            if result != PASS:
                found.append(f"--require {wanted}: its MUST result is {result or 'not checked'}")
        return found

    def status(self) -> int:
        if self.broken:
            return 2
        return 1 if self.breaches() else 0

    def why(self) -> list[str]:
        """Why the exit status is not 0, one line each: why the run broke (2), else
        its breaches (1); empty when it is 0."""
        return [self.broken] if self.broken else self.breaches()

    def counts(self, kind: str) -> Counter[str]:
        return Counter(item.result for item in self.items if item.kind == kind)

    def defects(self) -> list[Item]:
        return [item for item in self.items if item.tier_defect]

    def not_checked(self) -> Counter[str]:
        """Each reason an item did not run, with how many it kept from running."""
        return Counter(
            item.error for item in self.items if item.result in (UNSUPPORTED, UNOBSERVED)
        )

    def parts_said(self) -> str:
        """Each part's verdict: "driver part conforms; command line not checked"."""
        said = []
        for part, judged in self.parts().items():
            if judged == DOES_NOT_CONFORM:
                must = Counter(row.result("must") for row in self.rows(part))
                failed = [f"{n} {r}" for r, n in sorted(must.items(), key=str) if r and r != PASS]
                said.append(f"{PARTS[part]}: MUST rows {', '.join(failed)}")
            elif judged == NOT_CHECKED:
                rows = []
                for result in (UNSUPPORTED, UNOBSERVED):
                    unchecked = self.unchecked_rows(part, result)
                    if unchecked:
                        named = (
                            f"{len(unchecked)} MUST rows" if len(unchecked) > 1 else unchecked[0]
                        )
                        rows.append(f"{named} {result}")
                hint = f" (run with --{'cli' if part == CLI else 'impl'})"
                # Nothing of the part ran: it wants its option, unless what kept it
                # from running is that the kit could not observe it here.
                unobserved = self.unchecked_rows(part, UNOBSERVED)
                hint = hint if self.parts_run(part) == 0 and not unobserved else ""
                unchecked_rows = f": {', '.join(rows)}" if rows else ""
                said.append(f"{PARTS[part]} not checked{hint}{unchecked_rows}")
            else:
                said.append(f"{PARTS[part]} conforms")
        return "; ".join(said) or "nothing of either part ran"

    def parts_run(self, part: str) -> int:
        """How many of the part's items reached a verdict."""
        return sum(1 for item in self.items if item.part == part and item.result in CHECKED)

    def verdict(self) -> str:
        scope = " (of the scenarios selected)" if self.selected else ""
        if self.broken:
            return "the run broke: no verdict"
        if self.conforms():
            return f"conforms to v1{scope}: every MUST row passes ({self.parts_said()})"
        return f"does not conform to v1{scope}: {self.parts_said()}"

    def summary(self) -> str:
        def said(counts: Counter[str]) -> str:
            return ", ".join(f"{counts[o]} {o}" for o in OUTCOMES if counts[o]) or "none"

        seed = f" (--seed {self.seed} replays them)" if self.seed is not None else ""
        return (
            f"{self.verdict()}; scenarios: {said(self.counts('scenario'))}; "
            f"state machines: {said(self.counts('machine'))}{seed}"
        )


# -- running ----------------------------------------------------------------------------------


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment, with the folder of this Python first on PATH, so that a
    command like "pi-post driver" is the one installed beside it."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(extra or {})
    return env


def from_folder(command: str, folder: Path) -> str:
    """COMMAND as run from ``folder`` whatever the current directory of whoever starts
    it (behave and pytest run from the repository)."""
    return shlex.join([sys.executable, str(IN_FOLDER), str(folder), *shlex.split(command)])


def with_paths_from(command: str, folder: Path) -> str:
    """COMMAND with each word that names a file relative to ``folder`` made absolute:
    the command-line scenarios run a CLI in folders of their own."""
    words = []
    for word in shlex.split(command):
        named = folder / word
        words.append(str(named) if "/" in word and named.exists() else word)
    return shlex.join(words)


def run_behave(
    impl: str | None,
    cli: str | None,
    features: Sequence[str],
    name: str | None,
    work: Path,
    out: TextIO,
) -> tuple[list[Item], dict[str, Any] | None, str]:
    """Run behave with verdicts per assertion, its progress shown as it comes; the
    text says why there are none. behave's own summary is left out: it counts what
    the kit does not (a failed assertion is not a failed scenario here), and the
    kit's summary follows the run."""
    verdicts = work / "verdicts.jsonl"
    argv = [sys.executable, "-m", "behave", "--format", "progress", "--no-skipped"]
    argv += ["--no-summary"]
    argv += ["-D", f"verdicts={verdicts}"]
    argv += [f"-D{key}={value}" for key, value in (("impl", impl), ("cli", cli)) if value]
    argv += ["--name", name] if name else []
    argv += ["--tags", f"not @{PIPOST_ONLY_TAG}"]
    argv += list(features) or [str(FEATURES)]
    said: deque[str] = deque(maxlen=OUTPUT_TAIL_LINES)
    with subprocess.Popen(
        argv,
        cwd=KIT,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as behave:
        assert behave.stdout is not None  # asked for above
        for line in behave.stdout:
            out.write(line)
            out.flush()
            said.append(line.rstrip("\n"))
    returncode = behave.returncode
    lines = []
    if verdicts.exists():
        lines = [json.loads(line) for line in verdicts.read_text(encoding="utf-8").splitlines()]
    about = next((line["implementation"] for line in lines if line["kind"] == "run"), None)
    items = [item_from_verdict(line) for line in lines if line["kind"] == "scenario"]
    tail = "\n".join(said)
    if not any(line["kind"] == "run" for line in lines):
        return items, about, f"behave exited with status {returncode} before a run:\n{tail}"
    if returncode != 0 and not any(item.result not in (PASS, UNSUPPORTED) for item in items):
        return items, about, f"behave exited with status {returncode}, nothing failing:\n{tail}"
    return items, about, ""


def machine_files() -> list[Path]:
    """The state machines that can run against another implementation."""
    return [
        path for path in sorted(MACHINES.glob("test_*.py")) if "PIPOST_IMPL" in path.read_text()
    ]


PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
PYTEST += ["-c", os.devnull, f"--rootdir={KIT}", "-p", "_hypothesis_pytestplugin"]
"""pytest over the machines of this package, whatever folder, configuration file or
plugins are around it: no ini file (pi-post's own, or one above where pipost is
installed), no plugin but Hypothesis's (whatever else is installed would change the
run, and costs each start: pyfakefs alone doubled it), and the test ids start at the
kit (``machines/test_….py::…``). Run it with PYTEST_ENV in the environment: without
it, Hypothesis's plugin would load twice, which pytest refuses."""
PYTEST_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def run_machines(impl: str | None, work: Path, out: TextIO, seed: int) -> tuple[list[Item], str]:
    """Each machine module in a pytest of its own, with Hypothesis's ``seed``: what a
    run found, the same seed finds again (the scratch folder keeps no examples)."""
    items: list[Item] = []
    for path in machine_files():
        env = child_env(PYTEST_ENV)
        if impl:
            env["PIPOST_IMPL"] = impl
        else:
            env.pop("PIPOST_IMPL", None)
        junit = work / f"{path.stem}.xml"
        argv = [
            *PYTEST,
            f"--hypothesis-profile={MACHINE_PROFILE}",
            f"--hypothesis-seed={seed}",
            f"--junitxml={junit}",
            str(path),
        ]
        # From the scratch folder: Hypothesis keeps its examples where it runs, and
        # the kit writes nothing but the reports asked for.
        done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True)
        relative = path.relative_to(KIT)
        if not junit.exists():
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-OUTPUT_TAIL_LINES:])
            return items, f"pytest of {relative} wrote no results:\n{tail}"
        found = machine_items(junit, path)
        out.write(f"state machine {relative}: {dict(Counter(i.result for i in found))}\n")
        items += found
    return items, ""


CHECKED_ON_PIPOST_ALONE: dict[str, list[str]] = {
    "INV-03": ["tests/invariants/test_power_loss.py"],
    "INV-04": [
        "tests/invariants/test_power_loss.py",
        "tests/exchange/test_delivery.py",
        "tests/exchange/test_sigkill.py",
    ],
    "INV-05": [
        "tests/invariants/test_mailbox_crashes.py",
        "tests/exchange/test_exec_stop.py",
        "tests/exchange/test_full_disk.py",
        "tests/exchange/test_listeners.py",
        "tests/exchange/test_sigkill.py",
    ],
    "INV-06": [
        "tests/invariants/test_mailbox_crashes.py",
        "tests/exchange/test_delivery.py",
        "tests/exchange/test_full_disk.py",
        "tests/exchange/test_listeners.py",
        "tests/exchange/test_sigkill.py",
    ],
    "INV-09": ["tests/exchange/test_hostile_inbox.py"],
    "INV-10": ["tests/exchange/test_bounded_waits.py", "tests/exchange/test_hostile_inbox.py"],
    "INV-11": ["tests/exchange/test_delivery.py"],
    "INV-14": ["tests/exchange/test_delivery.py", "tests/exchange/test_listeners.py"],
    "INV-15": ["tests/exchange/test_listeners.py"],
    "INV-17": ["tests/exchange/test_sweeps.py"],
    "INV-18": ["tests/exchange/test_loops.py"],
    "INV-20": ["tests/exchange/test_delivery.py"],
    "INV-21": ["tests/exchange/test_interop_inbox.py"],
    "INV-22": ["tests/exchange/test_hostile_inbox.py"],
    "INV-23": [
        "tests/invariants/test_contained_failures.py",
        "tests/exchange/test_bounded_waits.py",
        "tests/exchange/test_exec_stop.py",
        "tests/exchange/test_hostile_inbox.py",
        "tests/exchange/test_listeners.py",
        "tests/exchange/test_sweeps.py",
    ],
}
"""Invariant → the modules of pipost's repository (tests/invariants, tests/exchange)
that check it, by their docstrings, on pipost alone: they drive pipost's own
modules or processes, so they cannot run against another implementation, and do
not ship with the kit. A row nothing of a run checked names them.
tests/conformance/test_installed_kit.py keeps this in step with their docstrings."""


# -- reports ----------------------------------------------------------------------------------


def _cell(text: str) -> str:
    """Text that keeps a Markdown table row in one piece."""
    return " ".join(text.replace("|", "\\|").split())


def _counted(row: Row, tier: str) -> str:
    result = row.result(tier)
    if result is None:
        return "—"
    counts = row.counts(tier)
    said = ", ".join(f"{counts[o]} {o}" for o in OUTCOMES if counts[o])
    return f"**{result}** ({said})"


def row_notes(run: Run, row: Row) -> str:
    """The items that kept the row from passing, or why nothing of it was checked."""
    bad = sorted(
        {item.id for tier in TIERS for item, result in row.items[tier] if result in NOT_PASSING}
    )
    if bad:
        return "not passing: " + ", ".join(bad)
    unobserved = Counter(
        item.error for tier in TIERS for item, result in row.items[tier] if result == UNOBSERVED
    )
    if unobserved:
        said = "; ".join(f"{why} (×{n})" for why, n in unobserved.most_common())
        return f"not checked: {said}"
    if any(result != UNSUPPORTED for tier in TIERS for _, result in row.items[tier]):
        return ""
    reasons = Counter(item.error for tier in TIERS for item, _ in row.items[tier])
    said = "; ".join(f"{why} (×{n})" for why, n in reasons.most_common())
    text = f"not checked: {said}" if said else "no scenario of this run checks it"
    elsewhere = run.elsewhere.get(row.invariant)
    return text + (
        f"; pytest checks it on pipost only: {', '.join(elsewhere)}" if elsewhere else ""
    )


def exchange_lines(item: Item, last: int = EXCHANGE_SHOWN) -> list[str]:
    """The end of the scenario's driver exchange, one call a line."""
    shown = item.exchange[-last:]
    earlier = len(item.exchange) - len(shown)
    lines = [f"… {earlier} call{'s' if earlier > 1 else ''} before"] if earlier else []
    for call in shown:
        answer = call.get("result", call.get("error"))
        arrow = "→ error" if "error" in call else "→"
        lines.append(f"{call['op']} {json.dumps(call['args'])} {arrow} {json.dumps(answer)}")
    return lines


FAILURE_LINES_SHOWN = 6
CALLS_SHOWN = 3
CALL_WIDTH = 160


def console_failures(run: Run) -> list[str]:
    """Each item a reader must look at, for the console: its id, tier and rows, where
    it is, the start of its error and its last driver calls (the report has all)."""
    lines = []
    for item in problems(run):
        if item.result == EXPECTED_FAIL:
            continue  # the run's file expects it; the report lists it
        rows = results_said(item)
        lines.append(f"{item.result.upper()} {item.id} ({item.tier.upper()}; {rows})")
        lines.append(f"    at {item.location}")
        error = (item.expected and f"expected to fail: {item.expected}") or item.error
        lines += [f"    {line}" for line in error.splitlines()[:FAILURE_LINES_SHOWN]]
        calls = [_cut(call, CALL_WIDTH) for call in exchange_lines(item, last=CALLS_SHOWN)]
        lines += ["    last calls:", *(f"      {call}" for call in calls)] if calls else []
    return lines


def results_said(item: Item) -> str:
    """An item's result per invariant: ``INV-05 fail, INV-06 pass``."""
    return ", ".join(f"{inv} {result}" for inv, result in item.results.items())


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def problems(run: Run) -> list[Item]:
    """The items a reader must look at: what did not pass, and unexpected passes."""
    return [i for i in run.items if i.result in (*NOT_PASSING, EXPECTED_FAIL, UNEXPECTED_PASS)]


def _identity(run: Run) -> str:
    about = run.about or {}
    known = [str(about[key]) for key in ("name", "version", "language") if about.get(key)]
    return run.implementation + (f" ({' '.join(known)})" if known else "")


def markdown(run: Run) -> str:
    lines = [
        f"# Conformance matrix: {_identity(run)}",
        "",
        run.summary(),
        "",
        "| invariant | MUST | SHOULD | notes |",
        "|---|---|---|---|",
    ]
    for row in run.rows():
        lines.append(
            f"| {row.invariant} {_cell(row.title)} | {_counted(row, 'must')} | "
            f"{_counted(row, 'should')} | {_cell(row_notes(run, row))} |"
        )
    if run.broken:
        lines += ["", "## Why the exit status is 2: the run broke", "", "```", run.broken, "```"]
    elif run.why():
        lines += ["", f"## Why the exit status is {run.status()}", ""]
        lines += [f"- {_cell(why)}" for why in run.why()]
    shown = problems(run)
    if shown:
        lines += ["", "## Failures", ""]
    for item in shown:
        rows = results_said(item)
        lines += [f"### {item.id} ({item.tier.upper()}, {item.result})", ""]
        lines += [f"{item.name} — {item.location}; {rows}", ""]
        if item.expected:
            lines += [f"Expected to fail: {item.expected}", ""]
        lines += ["```", item.error or "(no error)", "```"]
        if item.exchange:
            lines += ["", "Driver exchange (last calls):", "", "```", *exchange_lines(item), "```"]
        lines.append("")
    if run.not_in_run:
        lines += ["", "## Expectations not met by this run", ""]
        lines += [f"- {item_id}" for item_id in run.not_in_run]
    lines += ["", "## Not checked", ""]
    reasons = run.not_checked().most_common()
    lines += [f"- {why}: {n}" for why, n in reasons] or ["- nothing"]
    if run.defects():
        lines += ["", "## Kit defects", ""]
        lines += [f"- {item.id}: {item.tier_defect}" for item in run.defects()]
    return "\n".join(lines) + "\n"


def html_page(run: Run) -> str:
    def text(value: str) -> str:
        return html.escape(value, quote=True)

    def cell(row: Row, tier: str) -> str:
        result = row.result(tier) or "none"
        return f'<td class="{result}">{text(_counted(row, tier).replace("**", ""))}</td>'

    rows = [
        f"<tr><td>{text(row.invariant)}</td><td>{text(row.title)}</td>{cell(row, 'must')}"
        f"{cell(row, 'should')}<td>{text(row_notes(run, row))}</td></tr>"
        for row in run.rows()
    ]
    failures = "".join(
        f"<h3>{text(item.id)} ({item.tier.upper()}, {text(item.result)})</h3>"
        f"<p>{text(item.name)} — {text(item.location)}</p>"
        + (f"<p>Expected to fail: {text(item.expected)}</p>" if item.expected else "")
        + f"<pre>{text(item.error)}</pre>"
        + (f"<pre>{text(chr(10).join(exchange_lines(item)))}</pre>" if item.exchange else "")
        for item in problems(run)
    )
    not_checked = "".join(
        f"<li>{text(why)}: {n}</li>" for why, n in run.not_checked().most_common()
    )
    defects = "".join(f"<li>{text(i.id)}: {text(i.tier_defect)}</li>" for i in run.defects())
    if run.broken:
        why = f"<h2>Why the exit status is 2: the run broke</h2><pre>{text(run.broken)}</pre>"
    else:
        said = "".join(f"<li>{text(line)}</li>" for line in run.why())
        why = f"<h2>Why the exit status is {run.status()}</h2><ul>{said}</ul>" if said else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>Conformance matrix: {text(_identity(run))}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; }}
table {{ border-collapse: collapse; }}
td, th {{ border: 1px solid #ccc; padding: 0.3em 0.6em; vertical-align: top; }}
td.pass {{ background: #d9f2d9; }}
td.fail, td.error, td.timeout, td.unexpected-pass {{ background: #f8d0d0; font-weight: bold; }}
td.expected-fail {{ background: #f8ecd0; }}
td.unsupported, td.not-checked, td.none {{ background: #eeeeee; }}
</style></head><body>
<h1>Conformance matrix: {text(_identity(run))}</h1>
<p>{text(run.summary())}</p>
<table>
<tr><th>invariant</th><th></th><th>MUST</th><th>SHOULD</th><th>notes</th></tr>
{chr(10).join(rows)}
</table>
{why}
<h2>Failures</h2>{failures or "<p>none</p>"}
<h2>Not checked</h2><ul>{not_checked or "<li>nothing</li>"}</ul>
<h2>Kit defects</h2><ul>{defects or "<li>none</li>"}</ul>
</body></html>
"""


def json_report(run: Run) -> dict[str, Any]:
    """The report as src/pipost/schemas/conformance-report.v1.schema.json describes it."""
    invariants = []
    for row in run.rows():
        for tier in TIERS:
            result = row.result(tier)
            if result is not None:
                counts = dict(row.counts(tier))
                invariants.append(
                    {"id": row.invariant, "tier": tier, "result": result, "counts": counts}
                )
    scenarios = []
    for item in run.items:
        entry: dict[str, Any] = {
            "id": item.id,
            "kind": item.kind,
            "name": item.name,
            "location": item.location,
            "tier": item.tier,
            "part": item.part,
            "invariants": list(item.invariants),
            "results": item.results,
            "result": item.result,
            "error": item.error,
        }
        if item.tier_defect:
            entry["tier_defect"] = item.tier_defect
        if item.expected:
            entry["expected"] = item.expected
        if item.assertions:
            entry["assertions"] = [
                {"step": a.step, "invariants": list(a.invariants), "passed": a.passed}
                | ({"error": a.error} if a.error else {})
                for a in item.assertions
            ]
        if item.result != PASS and item.exchange:
            entry["exchange"] = list(item.exchange)
        scenarios.append(entry)
    return {
        "report": "pipost-conformance",
        "version": 1,
        "implementation": {"command": run.implementation, **(run.about or {})},
        "conforms": run.conforms(),
        "parts": run.parts(),
        **({"seed": run.seed} if run.seed is not None else {}),
        "selected": run.selected,
        "summary": run.summary(),
        "exit_status": run.status(),
        "why": run.why(),
        "invariants": invariants,
        "scenarios": scenarios,
    }


def junit_xml(run: Run) -> str:
    """One testcase per scenario and machine test. A MUST item that did not pass and
    an unexpected pass are failures (errors for error and timeout); a SHOULD item
    that did not pass, an expected failure and an unsupported item are skipped,
    with why: what fails the run fails the CI."""
    suite = ElementTree.Element("testsuite", name="pipost conformance")
    failures = errors = skipped = 0
    for item in run.items:
        classname = item.location.split(":")[0].removesuffix(".feature").replace("/", ".")
        case = ElementTree.SubElement(
            suite, "testcase", classname=classname, name=f"{item.id} [{item.tier.upper()}]"
        )
        first = item.error.splitlines()[0] if item.error else item.result
        detail = item.error + "".join("\n" + line for line in exchange_lines(item, last=50))
        if item.result == UNEXPECTED_PASS or (item.tier == "must" and item.result == FAIL):
            failures += 1
            element = ElementTree.SubElement(case, "failure", message=first[:500])
            element.text = detail if item.result == FAIL else f"expected: {item.expected}"
        elif item.tier == "must" and item.result in (ERROR, TIMEOUT):
            errors += 1
            element = ElementTree.SubElement(case, "error", message=f"{item.result}: {first}"[:500])
            element.text = detail
        elif item.result != PASS:
            skipped += 1
            why = item.expected if item.result == EXPECTED_FAIL else first
            element = ElementTree.SubElement(case, "skipped", message=f"{item.result}: {why}"[:500])
            element.text = detail
    suite.set("tests", str(len(run.items)))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", str(skipped))
    return ElementTree.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def write_report(run: Run, path: Path) -> None:
    page = html_page(run) if path.suffix.lower() == ".html" else markdown(run)
    path.write_text(page, encoding="utf-8")


# -- the command ------------------------------------------------------------------------------


class UsageError(Exception):
    """An option the command cannot take; the text is for the user."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The options of ``pi-post conformance`` (its help: pipost.cli.HELP)."""
    parser = _Parser(prog="pi-post conformance", add_help=False, allow_abbrev=False)
    parser.add_argument("--impl")
    parser.add_argument("--cli")
    parser.add_argument("--features", nargs="*", default=[])
    parser.add_argument("--name")
    parser.add_argument("--no-machines", action="store_true")
    parser.add_argument("--list", action="store_true")
    for report in ("--report", "--json", "--junit", "--expect", "--write-expectations"):
        parser.add_argument(report, type=Path)
    parser.add_argument("--require", nargs="+", default=[])
    parser.add_argument("--validate", action="store_true")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--seed", type=int)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        word = unknown[0]
        said = f"unknown option {word.split('=')[0]}" if word.startswith("-") else repr(word)
        raise UsageError(f"{said} for conformance")
    return args


def missing_dependencies(
    requirements: Iterable[str], installed: Callable[[str], bool]
) -> list[str]:
    """The distributions of pipost's ``conformance`` extra (of its ``requirements``,
    as the installed metadata spells them: ``behave>=1.3; extra == "conformance"``)
    that are not ``installed``."""
    wanted = []
    for requirement in requirements:
        name, _, marker = requirement.partition(";")
        named = _DISTRIBUTION.match(name.strip())
        if named and _CONFORMANCE_EXTRA.search(marker):
            wanted.append(named.group(0))
    return [name for name in wanted if not installed(name)]


_CONFORMANCE_EXTRA = re.compile(r"""extra\s*==\s*["']conformance["']""")
_DISTRIBUTION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _installed_metadata() -> tuple[list[str], Callable[[str], bool]]:
    """pipost's requirements and whether a distribution is installed, as the
    environment's package metadata says (nothing required when pipost runs from a
    source tree it was not installed from)."""
    from importlib import metadata

    def installed(name: str) -> bool:
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            return False
        return True

    try:
        return list(metadata.requires("pipost") or []), installed
    except metadata.PackageNotFoundError:
        return [], installed


def machine_tests(paths: Sequence[Path]) -> list[str]:
    """The pytest ids of the tests of these machine modules, as the reports and
    ``--expect`` name them: collected, not run."""
    if not paths:
        return []
    argv = [*PYTEST, "--collect-only", *(str(path) for path in paths)]
    done = subprocess.run(argv, cwd=KIT, env=child_env(PYTEST_ENV), capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-OUTPUT_TAIL_LINES:])
        raise RuntimeError(f"pytest could not collect the state machines:\n{tail}")
    return [line for line in done.stdout.splitlines() if "::" in line]


def print_list(listed: Sequence[Listed], machine_ids: Sequence[str], out: TextIO) -> None:
    """One line per scenario and per machine test: its id, tier and invariants."""
    for scenario in listed:
        defect = f"  ({scenario.tier_defect})" if scenario.tier_defect else ""
        invariants = ",".join(scenario.invariants) or "-"
        out.write(f"{scenario.id}\t{scenario.tier.upper()}\t{invariants}{defect}\n")
    stated: dict[str, dict[str, tuple[str, ...]]] = {}
    for test_id in machine_ids:
        relative, _, name = test_id.partition("::")
        module = KIT / relative
        if relative not in stated:
            stated[relative] = stated_invariants(module)
        invariants = ",".join(of_test(stated[relative], name)) or "-"
        out.write(f"{test_id}\t{machine_tier(module).upper()}\t{invariants}\n")


def run_kit(args: argparse.Namespace, here: Path, out: TextIO) -> Run:
    parts = [
        f"--impl {args.impl!r}" if args.impl else "",
        f"--cli {args.cli!r}" if args.cli else "",
    ]
    implementation = " ".join(p for p in parts if p) or "pipost (in process)"
    impl = from_folder(args.impl, here) if args.impl else None
    cli = with_paths_from(args.cli, here) if args.cli else None
    features = feature_paths(args.features, here)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(SEEDS)
    with tempfile.TemporaryDirectory(prefix="pipost-conformance-") as work:
        items, about, broken = run_behave(impl, cli, features, args.name, Path(work), out)
        cli_only = bool(args.cli) and not args.impl
        if cli_only and not broken:
            try:
                tests = machine_tests(machine_files())
            except RuntimeError as error:
                tests, broken = [], str(error)
            machines = [not_run(test_id, "CLI-only implementation") for test_id in tests]
        elif args.no_machines or broken:
            machines = []
        else:
            machines, broken = run_machines(impl, Path(work), out, seed)
    return Run(
        implementation,
        items + machines,
        broken,
        about,
        selected=bool(args.features or args.name or args.no_machines),
        elsewhere=CHECKED_ON_PIPOST_ALONE,
        required=list(args.require),
        seed=seed if any(item.result != UNSUPPORTED for item in machines) else None,
    )


def feature_paths(given: Sequence[str], here: Path) -> list[str]:
    """The ``--features`` paths, each from the caller's folder, else, when it names
    nothing there, from the kit's (``features/addresses.feature``, as the reports'
    locations name it): a porter without a checkout can name one."""
    found = []
    for path in given:
        theirs, kits = here / path, KIT / path
        found.append(str(kits if not theirs.exists() and kits.exists() else theirs))
    return found


def not_run(test_id: str, why: str) -> Item:
    """A machine test (by its pytest id) that this run could not run, and why."""
    relative, _, name = test_id.partition("::")
    module = KIT / relative
    invariants = of_test(stated_invariants(module), name)
    return Item(
        id=test_id,
        name=name,
        kind="machine",
        location=relative,
        tier=machine_tier(module),
        invariants=invariants,
        results=dict.fromkeys(invariants, UNSUPPORTED),
        result=UNSUPPORTED,
        error=why,
    )


def apply_expectations(run: Run, expectations: dict[str, str]) -> None:
    known = {item.id for item in run.items}
    run.items = [
        expect(item, expectations[item.id]) if item.id in expectations else item
        for item in run.items
    ]
    run.not_in_run = sorted(set(expectations) - known)


def main(
    argv: Sequence[str],
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    cwd: str | None = None,
) -> int:
    """``pi-post conformance``: COMMAND and the paths of the options are taken from
    ``cwd`` (the caller's folder), whatever folder behave and pytest run in."""
    out = sys.stdout if stdout is None else stdout
    err = sys.stderr if stderr is None else stderr
    here = Path(cwd or os.getcwd())
    try:
        args = parse_args(argv)
    except UsageError as error:
        err.write(f"pi-post: {error} (see pi-post conformance --help)\n")
        return 2
    missing = missing_dependencies(*_installed_metadata())
    if missing:
        err.write(
            f"pi-post: the conformance kit runs with {', '.join(missing)}, which are not "
            """installed: pip install "pipost[conformance]"\n"""
        )
        return 2
    for option in ("report", "json", "junit", "expect", "write_expectations"):
        if getattr(args, option) is not None:
            setattr(args, option, here / getattr(args, option))
    # behave and the state machines read both from the environment they inherit.
    os.environ["PIPOST_TIMEOUT"] = str(args.timeout)
    os.environ["PIPOST_VALIDATE"] = "1" if args.validate else ""
    if args.list:
        features = feature_paths(args.features, here)
        try:
            machine_ids = [] if args.no_machines else machine_tests(machine_files())
        except RuntimeError as error:
            err.write(f"pi-post: conformance --list: {error}\n")
            return 2
        print_list(listed_scenarios(features, args.name), machine_ids, out)
        return 0
    if args.seed is not None and not 0 <= args.seed < SEEDS:
        err.write(f"pi-post: --seed takes 0 to {SEEDS - 1}, not {args.seed}\n")
        return 2
    bad = [r for r in args.require if r not in ("must", *PARTS) and not _INV.fullmatch(r)]
    if bad:
        err.write(f"pi-post: --require takes INV-NN, must, driver or cli, not {', '.join(bad)}\n")
        return 2
    no_row = [r for r in args.require if _INV.fullmatch(r) and r not in INVARIANTS]
    if no_row:
        rows = f"{min(INVARIANTS)} to {max(INVARIANTS)}"
        err.write(f"pi-post: --require {', '.join(no_row)}: no such row (the rows are {rows})\n")
        return 2
    try:
        expectations = read_expectations(args.expect) if args.expect else {}
    except (OSError, ValueError) as error:
        err.write(f"pi-post: --expect: {error}\n")
        return 2
    run = run_kit(args, here, out)
    apply_expectations(run, expectations)
    if args.report is not None:
        write_report(run, args.report)
    if args.json is not None:
        args.json.write_text(json.dumps(json_report(run), indent=2) + "\n", encoding="utf-8")
    if args.junit is not None:
        args.junit.write_text(junit_xml(run), encoding="utf-8")
    if args.write_expectations is not None:
        args.write_expectations.write_text(expectations_text(run.items), encoding="utf-8")
    for line in console_failures(run):
        out.write(line + "\n")
    out.write(f"conformance of {_identity(run)}: {run.summary()}\n")
    for why, count in run.not_checked().most_common():
        out.write(f"  not checked ({count}): {why}\n")
    for why in run.breaches() if not run.broken else []:
        out.write(f"  exit 1: {why}\n")
    if run.defects():
        out.write(f"  kit defects: {len(run.defects())} scenarios without exactly one tier\n")
    if run.broken:
        err.write(run.broken + "\n")
    return run.status()
