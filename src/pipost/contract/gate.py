"""The contract gate: ``pi-post contract`` (also ``python -m pipost contract``).

It judges the source tree it is run from (``--tree``, else the checkout holding
the working directory, else the installed package, read-only): every part of
the contract (:mod:`pipost.contract.gathering`) against its pins, the pins against those
of a base revision in git (``--against``), and the schemas against the corpus.
Exit status: 0 unchanged or compatible; 1 breaking without a bump, a version
not pinned, a pin rewritten or a contract that contradicts itself; 2 the gate
could not run. ``--pin`` records what changed (a revision for a compatible
change, a version after a bump); ``bump PART`` starts a new version; ``diff``
prints the changelog between two pins.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, TextIO

import pipost
from pipost.contract import compatibility, gathering
from pipost.contract.compatibility import (
    BREAKING,
    COMPATIBLE,
    EXIT_BREAKING,
    EXIT_CANNOT_RUN,
    EXIT_OK,
    UNCHANGED,
    UNPINNED,
    FacetChange,
    Json,
    PartVerdict,
    PinRefused,
    Pins,
)
from pipost.format import visible
from pipost.value import Value

FORMATS: Final = ("text", "json", "github")
_TREE_VARIABLE = "PIPOST_CONTRACT_TREE"  # set in a re-run on the tree's own code
_PINS_IN_TREE = Path("src", "pipost", "contract", "pins.json")
_PINS_BEFORE_THE_PACKAGE = Path("src", "pipost", "contract_pins.json")  # a base may predate it


class CannotRun(Exception):
    """The gate cannot judge (no history where it was asked for, no tree, bad usage)."""


# -- which tree ---------------------------------------------------------------------


def find_checkout(start: Path) -> Path | None:
    """The pipost source checkout holding ``start``, if any."""
    for folder in (start, *start.parents):
        if (folder / "pyproject.toml").is_file() and (folder / _PINS_IN_TREE).is_file():
            return folder
    return None


def _running_package() -> Path:
    return Path(pipost.__file__).resolve().parent


# -- history --------------------------------------------------------------------------


def _git(tree: Path, *args: str) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(tree), *args], capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        raise CannotRun("git is not installed, so there is no history to compare with") from None
    if done.returncode != 0:
        raise CannotRun(
            done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "git failed"
        )
    return done.stdout.strip()


def base_revision(tree: Path, asked: str) -> tuple[str, str]:
    """The revision to compare with, and how it was chosen. ``auto`` is the merge base
    with main (origin/main when there is no local main); on main itself, the commit
    before. Raises CannotRun, saying why, when the history is not there."""
    _git(tree, "rev-parse", "--git-dir")
    shallow = _git(tree, "rev-parse", "--is-shallow-repository") == "true"
    try:
        if asked != "auto":
            return _git(tree, "rev-parse", "--verify", f"{asked}^{{commit}}"), asked
        head = _git(tree, "rev-parse", "HEAD")
        for branch in ("main", "origin/main"):
            try:
                base = _git(tree, "merge-base", "HEAD", branch)
            except CannotRun:
                continue
            if base != head:
                return base, f"the merge base with {branch}"
            return _git(tree, "rev-parse", "HEAD~1"), f"the commit before {branch}'s head"
        raise CannotRun("there is no main branch to compare with")
    except CannotRun as error:
        if shallow:
            raise CannotRun(
                f"this clone is shallow, so {asked} is not in its history "
                "(git fetch --unshallow brings it)"
            ) from error
        raise


def pins_at(tree: Path, revision: str) -> tuple[Pins | None, str | None]:
    """The pins at ``revision``, or None with a note when there are none to compare."""
    for path in (_PINS_IN_TREE, _PINS_BEFORE_THE_PACKAGE):
        try:
            text = _git(tree, "show", f"{revision}:{path.as_posix()}")
            break
        except CannotRun:
            continue
    else:
        return None, f"{revision[:12]} has no contract pins"
    data = json.loads(text)
    if all(key.isdigit() for key in data):
        return (
            None,
            f"{revision[:12]} keeps its pins in the format before parts; nothing to compare",
        )
    return compatibility.from_data(data), None


# -- the report -----------------------------------------------------------------------


class Problem(Value):
    """Something wrong beyond a part's findings, and where to look."""

    __slots__ = ("rule", "text", "where")
    rule: Final[str]
    text: Final[str]
    where: Final[tuple[str, int] | None]

    def __init__(self, rule: str, text: str, where: tuple[str, int] | None = None) -> None:
        self.rule = rule
        self.text = text
        self.where = where


class Report:
    def __init__(self, tree: str, checkout: bool) -> None:
        self.tree = tree
        self.checkout = checkout
        self.against: str | None = None
        self.notes: list[str] = []
        self.verdicts: list[PartVerdict] = []
        self.problems: list[Problem] = []
        self.cannot_run: str | None = None

    @property
    def exit_status(self) -> int:
        if self.cannot_run is not None:
            return EXIT_CANNOT_RUN
        statuses = [v.exit_status for v in self.verdicts]
        return max([*statuses, EXIT_BREAKING if self.problems else EXIT_OK])

    @property
    def verdict(self) -> str:
        if self.cannot_run is not None:
            return "cannot-run"
        if self.exit_status:
            only_unpinned = not self.problems and all(
                v.state in (UNCHANGED, COMPATIBLE, UNPINNED) for v in self.verdicts
            )
            return "unpinned" if only_unpinned else "breaking"
        if any(v.state == COMPATIBLE for v in self.verdicts):
            return "compatible"
        return "unchanged"


def judge_tree(against: str | None, checkout: Path | None) -> Report:
    """The whole gate over the code this process runs."""
    report = Report(str(checkout or _running_package()), checkout is not None)
    pins = gathering.load_pins()
    contents = _contents(pins, report)
    if contents is None:
        return report
    report.verdicts = gathering.judge_all(pins, contents)
    for text in compatibility.edited(pins):
        report.problems.append(Problem("pins.edited", text, _where_pins()))
    try:
        for text in gathering.contradictions(contents):
            report.problems.append(Problem("contract.contradiction", text))
    except gathering.SchemaToolMissing as missing:
        report.notes.append(f"not checked: {missing}")
    for text in gathering.old_mail(pins):
        report.problems.append(Problem("old-mail.unreadable", text))
    for text in gathering.published_schemas(pins):
        report.problems.append(Problem("schema.published-changed", text))
    if against is not None:
        _compare_with_history(report, pins, against, checkout)
    return report


def _contents(pins: Pins, report: Report) -> dict[str, compatibility.Content] | None:
    try:
        return gathering.gather_all(pins, gathering.load_corpus())
    except gathering.CorpusError as error:
        report.problems.append(Problem("corpus.entry-rewritten", str(error), _where_corpus()))
        return None


def _compare_with_history(report: Report, pins: Pins, against: str, checkout: Path | None) -> None:
    if checkout is None:
        report.notes.append("history: not compared: the installed package has no git history")
        return
    try:
        revision, how = base_revision(checkout, against)
    except CannotRun as error:
        if against == "auto":
            report.notes.append(f"history: not compared: {error}")
            return
        report.cannot_run = f"cannot compare with {against}: {error}"
        return
    report.against = revision
    base, note = pins_at(checkout, revision)
    if base is None:
        report.notes.append(f"history: {note}")
        return
    report.notes.append(f"history: compared with {revision[:12]} ({how})")
    for text in compatibility.rewritten(base, pins):
        report.problems.append(
            Problem("pins.rewritten", f"{text} since {revision[:12]}", _where_pins())
        )


# -- where a finding points -----------------------------------------------------------

_CODE_OF_KIND: Final = {
    ("message", "parse"): ("src/pipost/message.py", "def parse"),
    ("message", "encode"): ("src/pipost/message.py", "def to_json"),
    ("record", "parse"): ("src/pipost/session.py", "def parse"),
    ("record", "encode"): ("src/pipost/session.py", "def to_json"),
    ("record", "written"): ("src/pipost/session.py", "def to_json"),
    ("address", "derive"): ("src/pipost/address.py", "def address_of"),
    ("address", "pattern"): ("src/pipost/address.py", "ADDRESS_PATTERN = "),
    ("message", "pattern"): ("src/pipost/message.py", "ID_PATTERN = "),
    ("cli", "output"): ("src/pipost/cli.py", "def run"),
    ("interop", "lock"): ("src/pipost/files.py", "fcntl.flock"),
    ("tree", "renames"): ("src/pipost/files.py", "os.rename"),
}


def where(tree: Path, finding: FacetChange) -> tuple[str, int]:
    """The file and line a finding points at, in ``tree``."""
    kind = compatibility.kind_of(finding.facet)
    name = finding.facet.partition(":")[2]
    stem = gathering._SCHEMA_STEMS.get(finding.part)
    vector_kind = gathering.VECTOR_KINDS.get((finding.part, kind))
    if finding.change == compatibility.ADDED and vector_kind is not None:
        return f"src/pipost_conformance/vectors/{vector_kind}/{name}.input.json", 1
    if finding.change == compatibility.ADDED and kind == "output":
        return _line(tree, "src/pipost/contract/corpus.json", f'"{name}"')
    if stem is not None and kind in ("field", "required", "closed", "schema", "def", "op"):
        version = gathering.versions()[finding.part]
        needle = {"required": '"required"', "closed": '"additionalProperties"', "schema": '"$id"'}
        path = f"src/pipost/schemas/{stem.format(version)}.schema.json"
        return _line(tree, path, needle.get(kind, f'"{name}"'))
    if (finding.part, kind) in _CODE_OF_KIND:
        return _line(tree, *_CODE_OF_KIND[finding.part, kind])
    constant = gathering.constant_of(finding.part, finding.facet)
    if constant is not None:
        return _line(tree, *constant)
    relative, pattern = _VERSION_LINES[finding.part]
    return _line(tree, relative, pattern, exact=False)


def _line(tree: Path, path: str, needle: str, *, exact: bool = True) -> tuple[str, int]:
    """The first line of ``path`` holding ``needle`` (a regular expression unless
    ``exact``), or line 1."""
    try:
        lines = (tree / path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return path, 1
    found = (
        n
        for n, line in enumerate(lines, 1)
        if (needle in line if exact else re.search(needle, line))
    )
    return path, next(found, 1)


def _where_pins() -> tuple[str, int]:
    return _PINS_IN_TREE.as_posix(), 1


def _where_corpus() -> tuple[str, int]:
    return "src/pipost/contract/corpus.json", 1


def fixes(verdict: PartVerdict) -> list[str]:
    """The commands that resolve a part's verdict."""
    if verdict.state == COMPATIBLE:
        return [
            f"pi-post contract --pin   # pins {verdict.part} v{verdict.version} revision "
            f"{(verdict.revision or 0) + 1}"
        ]
    if verdict.state == BREAKING:
        return [
            f"pi-post contract bump {verdict.part}   # v{verdict.version} -> "
            f"v{verdict.version + 1}",
            f"# carry the change into {verdict.part} v{verdict.version + 1}, keep reading "
            f"v{verdict.version}; then:",
            "pi-post contract --pin",
            "# or undo the change",
        ]
    if verdict.state == UNPINNED:
        return [f"pi-post contract --pin   # pins {verdict.part} v{verdict.version}"]
    return []


# -- printing -------------------------------------------------------------------------


def _short(value: Json, limit: int = 240) -> str:
    text = visible(json.dumps(value, ensure_ascii=False, sort_keys=True))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _shown(finding: FacetChange) -> list[tuple[str, str]]:
    """What changed, as lines: a corpus case shows its input once and its results (a
    case of the vectors as pinned, by its digest)."""
    values = [v for v in (finding.before, finding.after) if v is not None]
    cases = [v for v in values if isinstance(v, dict) and "input" in v]
    if not cases:
        pairs = [("was ", finding.before), ("now ", finding.after)]
        return [(label, _short(value)) for label, value in pairs if value is not None]
    rows = [("case", _short(cases[0]["input"]))]
    for label, value in (("was ", finding.before), ("now ", finding.after)):
        if isinstance(value, dict):
            result = value["result"]
            rows.append((label, visible(result) if isinstance(result, str) else _short(result)))
        elif value is not None:
            rows.append((label, f"pinned as its digest, {_short(value)}"))
    return rows


def _state_line(verdict: PartVerdict) -> str:
    revision = f" r{verdict.revision}" if verdict.revision else ""
    count = len(verdict.findings)
    said = {
        UNCHANGED: "unchanged",
        COMPATIBLE: f"compatible ({count} changes, not pinned yet)",
        BREAKING: f"BREAKING under the same version ({count} changes)",
        UNPINNED: f"not pinned ({count} changes from the version before)",
        compatibility.STRAY: "below the latest pinned version and never pinned",
    }[verdict.state]
    return f"{verdict.part:<10} v{verdict.version}{revision:<4} {said}  {verdict.fingerprint[:19]}…"


def print_text(report: Report, tree: Path, out: TextIO) -> None:
    kind = "source checkout" if report.checkout else "installed package, read-only"
    out.write(f"contract gate: {report.tree} ({kind})\n")
    for note in report.notes:
        out.write(f"{note}\n")
    if report.cannot_run is not None:
        out.write(f"verdict: cannot run: {report.cannot_run} (exit 2)\n")
        return
    for verdict in report.verdicts:
        out.write(_state_line(verdict) + "\n")
    for verdict in report.verdicts:
        for finding in verdict.findings:
            path, line = where(tree, finding)
            grade = "breaking" if finding.breaking else "compatible"
            out.write(
                f"\n{finding.rule} ({grade}): {finding.part} {finding.facet} {finding.change}\n"
            )
            out.writelines(f"  {label}: {text}\n" for label, text in _shown(finding))
            out.write(f"  at:   {path}:{line}\n")
        commands = fixes(verdict)
        if commands:
            out.write(f"\n{verdict.part}: to resolve\n")
            out.writelines(f"  {command}\n" for command in commands)
    for problem in report.problems:
        out.write(f"\n{problem.rule}: {problem.text}\n")
    out.write(f"\nverdict: {_VERDICTS[report.verdict]} (exit {report.exit_status})\n")


_VERDICTS: Final = {
    "unchanged": "unchanged",
    "compatible": "compatible changes only",
    "unpinned": "a version is not pinned yet",
    "breaking": "the contract breaks its pins",
}


def report_data(report: Report, tree: Path) -> dict[str, Json]:
    findings: list[Json] = []
    for verdict in report.verdicts:
        for finding in verdict.findings:
            path, line = where(tree, finding)
            findings.append(
                {
                    "part": finding.part,
                    "rule": finding.rule,
                    "facet": finding.facet,
                    "change": finding.change,
                    "breaking": finding.breaking,
                    "before": finding.before,
                    "after": finding.after,
                    "file": path,
                    "line": line,
                    "fix": list(fixes(verdict)),
                }
            )
    return {
        "report": "pipost-contract",
        "v": 1,
        "tree": report.tree,
        "checkout": report.checkout,
        "against": report.against,
        "verdict": report.verdict,
        "exit": report.exit_status,
        "cannot_run": report.cannot_run,
        "parts": [
            {
                "part": v.part,
                "version": v.version,
                "revision": v.revision,
                "state": v.state,
                "fingerprint": v.fingerprint,
            }
            for v in report.verdicts
        ],
        "findings": findings,
        "problems": [
            {
                "rule": p.rule,
                "text": p.text,
                "file": p.where[0] if p.where else None,
                "line": p.where[1] if p.where else None,
            }
            for p in report.problems
        ],
        "notes": list(report.notes),
    }


def print_github(report: Report, tree: Path, out: TextIO) -> None:
    """GitHub workflow commands: one annotation per finding and problem, on its file
    and line; then the verdict as a plain line."""
    for note in report.notes:
        out.write(f"::notice title=contract::{_escape(note)}\n")
    if report.cannot_run is not None:
        out.write(f"::error title=contract cannot run::{_escape(report.cannot_run)}\n")
    for verdict in report.verdicts:
        for finding in verdict.findings:
            path, line = where(tree, finding)
            level = "error" if finding.breaking else "warning"
            text = (
                f"{finding.part} {finding.facet} {finding.change} ({finding.rule}). "
                + "; ".join(c for c in fixes(verdict) if not c.startswith("#"))
            )
            out.write(f"::{level} file={path},line={line},title={finding.rule}::{_escape(text)}\n")
    for problem in report.problems:
        place = f"file={problem.where[0]},line={problem.where[1]}," if problem.where else ""
        out.write(f"::error {place}title={problem.rule}::{_escape(problem.text)}\n")
    out.write(f"contract verdict: {report.verdict} (exit {report.exit_status})\n")


def _escape(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


# -- pinning, bumping, diffs ----------------------------------------------------------


def pin_tree(against: str | None, checkout: Path | None, out: TextIO) -> int:
    if checkout is None:
        raise CannotRun("--pin writes into a source checkout: run it in one (or give --tree)")
    pins = gathering.load_pins()
    contents = gathering.gather_all(pins, gathering.load_corpus())
    try:
        problems = gathering.contradictions(contents) + gathering.old_mail(pins)
    except gathering.SchemaToolMissing as missing:
        raise CannotRun(f"nothing was pinned: {missing}") from None
    problems += gathering.published_schemas(pins)
    if problems:
        out.write("pi-post: nothing was pinned: the contract contradicts itself:\n")
        out.writelines(f"  {p}\n" for p in problems)
        out.write("make the schema, the code and the corpus agree, then pin again\n")
        return EXIT_BREAKING
    published = _published(against or "auto", checkout, out)
    lost = [] if published is None else compatibility.rewritten(published, pins)
    if lost:
        out.write("pi-post: nothing was pinned: pins published at the base were lost:\n")
        out.writelines(f"  {text}\n" for text in lost)
        out.write(f"restore them: git checkout <base> -- {_PINS_IN_TREE.as_posix()}\n")
        return EXIT_BREAKING
    done = []
    try:
        for verdict in gathering.judge_all(pins, contents):
            if verdict.state == UNCHANGED:
                continue
            pins, said = compatibility.pin(
                verdict.part, verdict.version, contents[verdict.part], pins, published
            )
            done.append(said)
    except PinRefused as refused:
        out.write(f"pi-post: nothing was pinned: {refused}\n")
        return EXIT_BREAKING
    if done:
        gathering.save_pins(pins)
    out.writelines(f"{line}\n" for line in done or ["every part already matches its pin"])
    return EXIT_OK


def _published(against: str, checkout: Path, out: TextIO) -> Pins | None:
    """The pins of the base revision: those that may never be rewritten. Without
    history every pin counts as published."""
    try:
        revision, _ = base_revision(checkout, against)
    except CannotRun as error:
        if against != "auto":
            raise CannotRun(f"nothing was pinned: cannot compare with {against}: {error}") from None
        out.write(f"history: not compared ({error}): every pin counts as published\n")
        return None
    base, note = pins_at(checkout, revision)
    if note is not None:
        out.write(f"history: {note}\n")
    return base if base is not None else {}


# Where each part's version is written, as the file and its line's pattern: bump
# rewrites it, and a finding with no better place points at it.
_VERSION_LINES: Final[dict[str, tuple[str, str]]] = {
    "message": ("src/pipost/message.py", r"^VERSION = (\d+)$"),
    "record": ("src/pipost/session.py", r"^VERSION = (\d+)$"),
    "documents": ("src/pipost/documents.py", r"^VERSION = (\d+)$"),
    "driver": ("src/pipost/driver_protocol.py", r"^PROTOCOL = (\d+)$"),
    **{
        part: ("src/pipost/contract/gathering.py", rf'"{part}": (\d+)')
        for part in gathering.DECLARED
    },
}


def bump(part: str, checkout: Path | None, out: TextIO) -> int:
    """Start the next version of ``part`` in the source tree: its version, the versions
    its parser reads, and its schema file, copied from the current one."""
    if checkout is None:
        raise CannotRun("bump edits a source checkout: run it in one (or give --tree)")
    if part not in _VERSION_LINES:
        raise CannotRun(f"no part {part!r}; the parts are {', '.join(gathering.PARTS)}")
    relative, pattern = _VERSION_LINES[part]
    path = checkout / relative
    text = path.read_text(encoding="utf-8")
    found = re.search(pattern, text, re.MULTILINE)
    if found is None:
        raise CannotRun(f"{relative} has no version line matching {pattern}")
    old = int(found.group(1))
    new = old + 1
    if old not in gathering.load_pins().get(part, {}):
        raise CannotRun(
            f"{part} v{old} is not pinned yet: carry the change into it and pin it "
            f"(pi-post contract --pin) rather than starting v{new}"
        )
    text = text[: found.start(1)] + str(new) + text[found.end(1) :]
    readable = re.search(r"^READABLE_VERSIONS = \(([^)]*)\)", text, re.MULTILINE)
    if readable is not None:
        versions = [v.strip() for v in readable.group(1).split(",") if v.strip()]
        listed = ", ".join([*versions, str(new)])
        text = (
            text[: readable.start(1)]
            + listed
            + ("," if len(versions) == 0 else "")
            + text[readable.end(1) :]
        )
    stem = gathering._SCHEMA_STEMS.get(part)
    written = None
    if stem is not None:
        source = checkout / "src/pipost/schemas" / f"{stem.format(old)}.schema.json"
        target = source.with_name(f"{stem.format(new)}.schema.json")
        if target.exists():
            raise CannotRun(f"{target.relative_to(checkout)} exists already; nothing was changed")
        schema = json.loads(source.read_text(encoding="utf-8"))
        schema["$id"] = re.sub(rf":v{old}$", f":v{new}", schema["$id"])
        if part in ("message", "record"):
            schema["properties"]["v"] = {**schema["properties"]["v"], "const": new}
        if part == "driver":
            _renumber_protocol(schema, old, new)
        target.write_text(json.dumps(schema, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        written = target.relative_to(checkout)
    path.write_text(text, encoding="utf-8")
    out.write(f"{part}: v{old} -> v{new} in {relative}\n")
    if readable is not None:
        out.write(f"{part}: reads v{old} and v{new} (READABLE_VERSIONS)\n")
    if written is not None:
        out.write(f"{part}: wrote {written}, v{old}'s schema with its $id and v for v{new}\n")
    out.write(
        f"left to you: carry the change into v{new} (its schema and the code; keep reading "
        f"v{old}), then pi-post contract --pin\n"
    )
    return EXIT_OK


def _renumber_protocol(schema: Json, old: int, new: int) -> None:
    """Every ``"protocol": {"const": old}`` of a driver schema (the open op's request
    and answer) made ``new``."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "protocol" and isinstance(value, dict) and value.get("const") == old:
                value["const"] = new
            else:
                _renumber_protocol(value, old, new)
    elif isinstance(schema, list):
        for item in schema:
            _renumber_protocol(item, old, new)


def diff(first: str, second: str, form: str, out: TextIO) -> int:
    """The changelog between two pins: ``message@1`` (latest revision) or ``message@1.2``."""
    pins = gathering.load_pins()
    (part_a, content_a), (part_b, content_b) = _pinned(pins, first), _pinned(pins, second)
    if part_a != part_b:
        raise CannotRun(f"{first} and {second} are pins of different parts")
    findings = compatibility.compare(part_a, content_a, content_b)
    if form == "json":
        data = [
            {
                "rule": f.rule,
                "facet": f.facet,
                "change": f.change,
                "breaking": f.breaking,
                "before": f.before,
                "after": f.after,
            }
            for f in findings
        ]
        out.write(
            json.dumps({"from": first, "to": second, "changes": data}, ensure_ascii=False) + "\n"
        )
        return EXIT_OK
    out.write(f"{first} -> {second}: {len(findings)} changes\n")
    for f in findings:
        grade = "breaking" if f.breaking else "compatible"
        out.write(f"- {f.rule} ({grade}) {f.facet} {f.change}\n")
    return EXIT_OK


def _pinned(pins: Pins, spec: str) -> tuple[str, compatibility.Content]:
    found = re.fullmatch(r"([a-z]+)@(\d+)(?:\.(\d+))?", spec)
    if found is None:
        raise CannotRun(f"{spec!r} is not PART@VERSION or PART@VERSION.REVISION")
    part, version = found.group(1), int(found.group(2))
    revisions = pins.get(part, {}).get(version)
    if not revisions:
        raise CannotRun(f"{part} v{version} is not pinned")
    number = int(found.group(3) or len(revisions))
    if not 1 <= number <= len(revisions):
        raise CannotRun(f"{part} v{version} has no revision {number}")
    return part, revisions[number - 1].content


# -- the command ----------------------------------------------------------------------


def _parse(argv: Sequence[str]) -> tuple[list[str], dict[str, str], set[str]]:
    positional: list[str] = []
    valued: dict[str, str] = {}
    flags: set[str] = set()
    items = list(argv)
    while items:
        item = items.pop(0)
        name, has_value, value = item.partition("=")
        if name in ("--against", "--format", "--tree"):
            if not has_value:
                if not items:
                    raise CannotRun(f"{name} needs a value")
                value = items.pop(0)
            valued[name] = value
        elif item == "--pin":
            flags.add(item)
        elif item.startswith("--"):
            raise CannotRun(f"unknown option {name} for contract (see pi-post contract --help)")
        else:
            positional.append(item)
    return positional, valued, flags


def main(argv: Sequence[str], out: TextIO, err: TextIO, cwd: str) -> int:
    """``pi-post contract ARGS`` (the CLI gives its streams and working directory)."""
    try:
        return _main(list(argv), out, err, Path(cwd))
    except CannotRun as error:
        err.write(f"pi-post: {error}\n")
        return EXIT_CANNOT_RUN


def _main(args: list[str], out: TextIO, err: TextIO, cwd: Path) -> int:
    positional, valued, flags = _parse(args)
    form = valued.get("--format", "text")
    if form not in FORMATS:
        raise CannotRun(f"--format is one of {', '.join(FORMATS)}, not {form!r}")
    given = valued.get("--tree")
    checkout = find_checkout((cwd / given).resolve() if given else cwd)  # as the shell meant it
    if given and checkout is None:
        raise CannotRun(f"{given} is not a pipost source checkout")
    if checkout is not None and (checkout / "src" / "pipost").resolve() != _running_package():
        return _rerun_in(checkout, args, out, err, cwd)
    action: Callable[[], int]
    if positional[:1] == ["bump"] and len(positional) == 2 and "--pin" not in flags:
        action = lambda: bump(positional[1], checkout, out)  # noqa: E731
    elif positional[:1] == ["diff"] and len(positional) == 3:
        action = lambda: diff(positional[1], positional[2], form, out)  # noqa: E731
    elif positional:
        raise CannotRun(f"unexpected {positional[0]!r} (see pi-post contract --help)")
    elif "--pin" in flags:
        action = lambda: pin_tree(valued.get("--against"), checkout, out)  # noqa: E731
    else:
        report = judge_tree(valued.get("--against"), checkout)
        tree = checkout or _running_package().parent.parent
        if form == "json":
            out.write(json.dumps(report_data(report, tree), ensure_ascii=False) + "\n")
        elif form == "github":
            print_github(report, tree, out)
        else:
            print_text(report, tree, out)
        return report.exit_status
    return action()


def _rerun_in(checkout: Path, args: list[str], out: TextIO, err: TextIO, cwd: Path) -> int:
    """Run the gate again on the checkout's own code: the installed copy may be
    another pipost than the tree being judged."""
    if os.environ.get(_TREE_VARIABLE) == str(checkout):
        raise CannotRun(f"could not load pipost from {checkout / 'src'}")
    source = str(checkout / "src")
    env = {**os.environ, _TREE_VARIABLE: str(checkout)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [source, env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "pipost", "contract", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    out.write(done.stdout)
    err.write(done.stderr)
    return done.returncode
