"""Whether one contract can replace another: findings, their rules, pins and verdicts.

Theory of operation. A part of the contract (message, record, address …, see
:mod:`pipost.contract.gathering`) has a *content*: a flat mapping of facets, each a name
like ``field:from``, ``limit:mailbox_cap`` or ``parse:session-letter`` and a
JSON value. Comparing two contents of a part gives one :class:`FacetChange` per
facet added, removed or changed, and :data:`RULES` classify each: *compatible*
when every reader of the old contract still accepts what the new one writes
and every letter the old one wrote still reads the same, *breaking* otherwise.

Pins keep, per part and version, the revisions published so far, each a content
and its fingerprint. A compatible change is pinned as the next revision of the
same version; a breaking one only as a new version. A pin that was published
(it is on the base revision) is never rewritten; one that was not may be
replaced while its change is being made.

Pure: contents come in as data; gathering them is :mod:`pipost.contract.gathering`'s,
reading history and printing :mod:`pipost.contract.gate`'s.
"""

from __future__ import annotations

import hashlib
import json
from typing import TypeAlias

from pipost.value import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from typing import Final

Json: TypeAlias = bool | int | float | str | list["Json"] | dict[str, "Json"] | None
Content: TypeAlias = dict[str, Json]
"""Facet name → value."""

ADDED, REMOVED, CHANGED = "added", "removed", "changed"


class Revision(Value):
    __slots__ = ("fingerprint", "content")
    fingerprint: Final[str]
    content: Final[Content]

    def __init__(self, fingerprint: str, content: Content) -> None:
        self.fingerprint = fingerprint
        self.content = content

    @classmethod
    def of(cls, content: Content) -> Revision:
        return cls(fingerprint(content), content)


Pins: TypeAlias = dict[str, dict[int, list[Revision]]]
"""Part → version → its revisions, oldest first."""


class FacetChange(Value):
    """One facet of one part that differs: ``rule`` names what kind of change it is."""

    __slots__ = ("part", "rule", "facet", "change", "before", "after", "breaking")
    part: Final[str]
    rule: Final[str]
    facet: Final[str]
    change: Final[str]
    before: Final[Json]
    after: Final[Json]
    breaking: Final[bool]

    def __init__(
        self,
        part: str,
        rule: str,
        facet: str,
        change: str,
        before: Json,
        after: Json,
        breaking: bool,
    ) -> None:
        self.part = part
        self.rule = rule
        self.facet = facet
        self.change = change
        self.before = before
        self.after = after
        self.breaking = breaking


def canonical(value: Json) -> bytes:
    """One byte string per JSON value: keys sorted, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def fingerprint(content: Content) -> str:
    return "sha256:" + hashlib.sha256(canonical(pinned_form(content))).hexdigest()


# The kinds of facet that are cases of the vectors (pipost_conformance/vectors): a pin
# keeps each as the digest of its input and result, the vectors keep the values.
DIGESTED_KINDS: Final = frozenset({"parse", "encode", "derive"})


def pinned_form(content: Content) -> Content:
    """``content`` as a pin keeps it: each case of the vectors as its digest."""
    return {facet: _pinned_value(facet, value) for facet, value in content.items()}


def _pinned_value(facet: str, value: Json) -> Json:
    if kind_of(facet) in DIGESTED_KINDS and isinstance(value, dict) and "input" in value:
        return "sha256:" + hashlib.sha256(canonical(value)).hexdigest()
    return value


def kind_of(facet: str) -> str:
    """``parse:x`` → ``parse``; a facet without a colon is its own kind."""
    return facet.split(":", 1)[0]


# -- the rules --------------------------------------------------------------------------


def _reads_more(before: Json, after: Json) -> bool:
    """A record that read before reads now with every field it had, and more."""
    old, new = _accepted(before), _accepted(after)
    return old is not None and new is not None and _keeps(old, new)


def _writes_more(before: Json, after: Json) -> bool:
    """A record written now has every key it had, in the same order, and more."""
    old, new = _result(before), _result(after)
    if not (isinstance(old, str) and isinstance(new, str)):
        return False
    try:
        old_data, new_data = json.loads(old), json.loads(new)
    except ValueError:  # a long record kept as its digest: no keys to compare
        return False
    if not (isinstance(old_data, dict) and isinstance(new_data, dict)):
        return False
    kept = [key for key in new_data if key in old_data]
    return _keeps(old_data, new_data) and kept == list(old_data)


def _keeps(old: dict[str, Json], new: dict[str, Json]) -> bool:
    """Every key of ``old`` is in ``new`` with the same JSON value: ``1``, ``1.0`` and
    ``true`` are three values (Python's ``==`` finds them equal)."""
    return all(key in new and canonical(new[key]) == canonical(value) for key, value in old.items())


def _only_appended(before: Json, after: Json) -> bool:
    return isinstance(before, list) and isinstance(after, list) and after[: len(before)] == before


def _waits_bounded(before: Json, after: Json) -> bool:
    """The same locks of the same files, in the same order, some of them now tried
    without blocking (``LOCK_NB`` added; pipost tries again until a bound): whoever
    holds one still excludes every other holder, and a waiter no longer waits
    without limit."""
    if not (isinstance(before, list) and isinstance(after, list)) or len(before) != len(after):
        return False
    return all(
        old == new or _lock_with_nb(old) == new for old, new in zip(before, after, strict=True)
    )


def _lock_with_nb(taken: Json) -> str | None:
    """``flock LOCK_EX <file>`` as tried without blocking: ``flock LOCK_EX|LOCK_NB <file>``."""
    if not isinstance(taken, str):
        return None
    call, _, rest = taken.partition(" ")
    operation, _, where = rest.partition(" ")
    if call != "flock" or "LOCK_NB" in operation.split("|"):
        return None
    return f"{call} {operation}|LOCK_NB {where}"


def _accepted(value: Json) -> dict[str, Json] | None:
    result = _result(value)
    if isinstance(result, dict) and isinstance(result.get("accepted"), dict):
        accepted = result["accepted"]
        assert isinstance(accepted, dict)
        return accepted
    return None


def _result(value: Json) -> Json:
    return value.get("result") if isinstance(value, dict) else None


Condition: TypeAlias = "Callable[[Json, Json], bool] | None"


class Rule(Value):
    """How a change to facets of one kind is classified. A rule applies to ``parts``
    (empty: every part), facets of ``kind`` and one ``change`` (added, removed,
    changed), when ``condition`` holds of (before, after); the first rule that
    applies wins."""

    __slots__ = ("id", "parts", "kind", "change", "breaking", "condition", "why")
    id: Final[str]
    parts: Final[frozenset[str]]
    kind: Final[str]
    change: Final[str]
    breaking: Final[bool]
    condition: Final[Condition]
    why: Final[str]

    def __init__(
        self,
        id: str,
        parts: Iterable[str],
        kind: str,
        change: str,
        breaking: bool,
        why: str,
        condition: Condition = None,
    ) -> None:
        self.id = id
        self.parts = frozenset(parts)
        self.kind = kind
        self.change = change
        self.breaking = breaking
        self.condition = condition
        self.why = why


_ANY = "*"
_OPEN = ("record",)  # a reader ignores fields it does not know (SPEC 1.3)
_CLOSED = ("message",)  # an unknown field is bad_field (SPEC 1.2)

RULES: Final = (
    # Closed messages: a reader of the old version refuses any field it does not know.
    Rule("message.field-added", _CLOSED, "field", ADDED, True, "old readers refuse it"),
    Rule("message.field-removed", _CLOSED, "field", REMOVED, True, "old letters carry it"),
    Rule("message.field-changed", _CLOSED, "field", CHANGED, True, "readers disagree on it"),
    # Open records: a new optional field is ignored by old readers.
    Rule("record.field-added", _OPEN, "field", ADDED, False, "old readers ignore it"),
    Rule("record.field-removed", _OPEN, "field", REMOVED, True, "old records carry it"),
    Rule("record.field-changed", _OPEN, "field", CHANGED, True, "readers disagree on it"),
    Rule(
        "record.field-written",
        _OPEN,
        "written",
        CHANGED,
        False,
        "old readers ignore a field they do not know",
        _only_appended,
    ),
    Rule("record.written-changed", _OPEN, "written", CHANGED, True, "old readers expect it"),
    Rule("schema.required-changed", (), "required", CHANGED, True, "one side skips the other's"),
    Rule("schema.openness-changed", (), "closed", CHANGED, True, "unknown fields judged apart"),
    Rule("schema.changed", (), "schema", CHANGED, True, "readers judge a file apart"),
    # Behaviour, from the corpus.
    Rule(
        "record.reads-more",
        _OPEN,
        "parse",
        CHANGED,
        False,
        "what read before reads the same, with more",
        _reads_more,
    ),
    Rule("parse.changed", (), "parse", CHANGED, True, "readers judge the same bytes apart"),
    Rule(
        "record.writes-more",
        _OPEN,
        "encode",
        CHANGED,
        False,
        "old readers ignore the added keys",
        _writes_more,
    ),
    Rule("encoding.changed", (), "encode", CHANGED, True, "the bytes on disk differ"),
    Rule("address.derivation-changed", (), "derive", CHANGED, True, "every address moves"),
    Rule("address.pattern-changed", (), "pattern", CHANGED, True, "addresses judged apart"),
    Rule("limit.changed", (), "limit", CHANGED, True, "two writers disagree on a cap"),
    Rule("timing.changed", (), "timing", CHANGED, True, "presence or waits judged apart"),
    Rule(
        "lock.wait-bounded",
        (),
        "lock",
        CHANGED,
        False,
        "the same locks exclude each other; a waiter gives up after a bound",
        _waits_bounded,
    ),
    Rule("lock.changed", (), "lock", CHANGED, True, "two writers no longer exclude each other"),
    Rule("tree.name-changed", (), "name", CHANGED, True, "the other side looks elsewhere"),
    Rule("tree.mode-changed", (), "mode", CHANGED, True, "files made with other modes"),
    Rule("tree.renames-changed", (), "renames", CHANGED, True, "temporaries named apart"),
    Rule("cli.output-changed", (), "output", CHANGED, True, "scripts read these lines"),
    Rule("driver.op-added", (), "op", ADDED, False, "old kits never call it"),
    Rule("driver.op-removed", (), "op", REMOVED, True, "old kits call it"),
    Rule("driver.op-changed", (), "op", CHANGED, True, "old kits call it otherwise"),
    Rule("documents.def-added", (), "def", ADDED, False, "fields may be added within a version"),
    Rule("documents.def-removed", (), "def", REMOVED, True, "old readers expect it"),
    Rule("documents.def-changed", (), "def", CHANGED, True, "old readers read it otherwise"),
    # A new corpus entry pins behaviour that was already there: compatible. An entry
    # removed would unpin it, and the corpus of a pin is never shortened.
    Rule("corpus.entry-added", (), _ANY, ADDED, False, "a new case of behaviour already there"),
    Rule("corpus.entry-removed", (), _ANY, REMOVED, True, "a pinned case left unchecked"),
    Rule("facet.changed", (), _ANY, CHANGED, True, "a pinned fact changed"),
)


def classify(part: str, facet: str, change: str, before: Json, after: Json) -> Rule:
    kind = kind_of(facet)
    for rule in RULES:
        if rule.parts and part not in rule.parts:
            continue
        if rule.kind not in (kind, _ANY) or rule.change != change:
            continue
        if rule.condition is not None and not rule.condition(before, after):
            continue
        return rule
    raise AssertionError(f"no rule for {change} {facet} of {part}")  # the last rows cover all


def compare(part: str, before: Content, after: Content) -> list[FacetChange]:
    """Every facet of ``part`` that differs between two of its contents, in facet order."""
    found = []
    for facet in sorted(set(before) | set(after)):
        if facet not in after:
            change, old, new = REMOVED, before[facet], None
        elif facet not in before:
            change, old, new = ADDED, None, after[facet]
        elif canonical(_pinned_value(facet, before[facet])) == canonical(
            _pinned_value(facet, after[facet])
        ):
            continue
        else:
            change, old, new = CHANGED, before[facet], after[facet]
        rule = classify(part, facet, change, old, new)
        found.append(FacetChange(part, rule.id, facet, change, old, new, rule.breaking))
    return found


# -- verdicts ---------------------------------------------------------------------------

UNCHANGED = "unchanged"
COMPATIBLE = "compatible"  # differs from its pin, compatibly: pin it as a revision
BREAKING = "breaking"  # differs from its pin, breaking it, under the same version
UNPINNED = "unpinned"  # a version with no pin yet
STRAY = "stray"  # a version below the latest pinned that was never pinned

EXIT_OK, EXIT_BREAKING, EXIT_CANNOT_RUN = 0, 1, 2
_EXIT: Final = {UNCHANGED: 0, COMPATIBLE: 0, BREAKING: 1, UNPINNED: 1, STRAY: 1}


class PartVerdict(Value):
    """One part judged against its pins: ``findings`` against the latest pin of its
    version (or, for a version not pinned yet, of the version before)."""

    __slots__ = ("part", "version", "revision", "state", "fingerprint", "findings")
    part: Final[str]
    version: Final[int]
    revision: Final[int | None]
    state: Final[str]
    fingerprint: Final[str]
    findings: Final[tuple[FacetChange, ...]]

    def __init__(
        self,
        part: str,
        version: int,
        revision: int | None,
        state: str,
        fingerprint: str,
        findings: tuple[FacetChange, ...],
    ) -> None:
        self.part = part
        self.version = version
        self.revision = revision
        self.state = state
        self.fingerprint = fingerprint
        self.findings = findings

    @property
    def exit_status(self) -> int:
        return _EXIT[self.state]


def latest(pins: Pins, part: str, below: int | None = None) -> tuple[int, int, Revision] | None:
    """The newest pinned (version, revision number from 1, revision) of ``part``, among
    versions below ``below`` when given."""
    versions = [v for v in pins.get(part, {}) if below is None or v < below]
    if not versions:
        return None
    version = max(versions)
    revisions = pins[part][version]
    return version, len(revisions), revisions[-1]


def judge(part: str, version: int, content: Content, pins: Pins) -> PartVerdict:
    print_ = fingerprint(content)
    pinned = pins.get(part, {})
    if version in pinned:
        revisions = pinned[version]
        findings = tuple(compare(part, revisions[-1].content, content))
        if not findings:
            state = UNCHANGED
        elif any(f.breaking for f in findings):
            state = BREAKING
        else:
            state = COMPATIBLE
        return PartVerdict(part, version, len(revisions), state, print_, findings)
    before = latest(pins, part, below=version)
    findings = () if before is None else tuple(compare(part, before[2].content, content))
    newest = latest(pins, part)
    state = STRAY if newest is not None and newest[0] > version else UNPINNED
    return PartVerdict(part, version, None, state, print_, findings)


# -- pinning ----------------------------------------------------------------------------


class PinRefused(Exception):
    """A pin that would rewrite what was published, or pin a breaking change under a
    version already published; the text says what to do instead."""


def pin(
    part: str, version: int, content: Content, pins: Pins, published: Pins | None
) -> tuple[Pins, str]:
    """``pins`` with ``content`` pinned for (``part``, ``version``), and what was done.

    ``published`` are the pins of the base revision (None: every pin counts as
    published). The latest revision of a version may be replaced only if it was not
    published; a breaking change needs a new version, one above the latest."""
    revision = Revision.of(content)
    revisions = list(pins.get(part, {}).get(version, []))
    out = {name: dict(versions) for name, versions in pins.items()}
    out.setdefault(part, {})
    if revisions and revisions[-1].fingerprint == revision.fingerprint:
        return pins, f"{part} v{version}: already pinned as revision {len(revisions)}"
    if revisions:
        fixed = _published_count(published, part, version, len(revisions))
        base = revisions[fixed - 1].content if fixed else None
        if base is not None:
            breaking = [f for f in compare(part, base, content) if f.breaking]
            if breaking:
                rules = ", ".join(sorted({f.rule for f in breaking}))
                raise PinRefused(
                    f"{part} v{version} was published; this change breaks it ({rules}): "
                    f"bump the version (pi-post contract bump {part}) and pin again, "
                    "or undo the change"
                )
        kept = revisions[:fixed]
        out[part][version] = [*kept, revision]
        replaced = len(kept) < len(revisions)
        number = len(kept) + 1
        verb = "replaced unpublished" if replaced else "pinned"
        return out, f"{part} v{version}: {verb} revision {number} {revision.fingerprint}"
    newest = latest(pins, part)
    if newest is not None and version != newest[0] + 1:
        raise PinRefused(
            f"{part} v{version} cannot be pinned: the latest pinned version is "
            f"v{newest[0]}, so the next is v{newest[0] + 1}"
        )
    out[part][version] = [revision]
    return out, f"{part} v{version}: pinned revision 1 {revision.fingerprint}"


def _published_count(published: Pins | None, part: str, version: int, present: int) -> int:
    if published is None:
        return present
    return min(present, len(published.get(part, {}).get(version, [])))


def rewritten(base: Pins, now: Pins) -> list[str]:
    """Every revision published at the base that ``now`` no longer keeps as it was."""
    problems = []
    for part, versions in sorted(base.items()):
        for version, revisions in sorted(versions.items()):
            kept = now.get(part, {}).get(version, [])
            for number, revision in enumerate(revisions, 1):
                if number > len(kept):
                    problems.append(f"{part} v{version} revision {number} was removed")
                elif kept[number - 1] != revision:
                    problems.append(f"{part} v{version} revision {number} was re-pinned")
    return problems


def edited(pins: Pins) -> list[str]:
    """Every revision whose fingerprint is not that of the content it keeps."""
    return [
        f"{part} v{version} revision {number}: its content was edited by hand"
        for part, versions in sorted(pins.items())
        for version, revisions in sorted(versions.items())
        for number, revision in enumerate(revisions, 1)
        if fingerprint(revision.content) != revision.fingerprint
    ]


def to_data(pins: Pins) -> dict[str, Json]:
    return {
        part: {
            str(version): [
                {"fingerprint": r.fingerprint, "content": pinned_form(r.content)} for r in revisions
            ]
            for version, revisions in sorted(versions.items())
        }
        for part, versions in sorted(pins.items())
    }


def from_data(data: Mapping[str, Json]) -> Pins:
    pins: Pins = {}
    for part, versions in data.items():
        if not isinstance(versions, dict):
            raise ValueError(f"pins of {part!r} are not an object")
        pins[part] = {}
        for version, revisions in versions.items():
            if not isinstance(revisions, list):
                raise ValueError(f"pins of {part} v{version} are not a list")
            pins[part][int(version)] = [_revision(item) for item in revisions]
    return pins


def _revision(item: Json) -> Revision:
    if not (
        isinstance(item, dict)
        and isinstance(item.get("fingerprint"), str)
        and isinstance(item.get("content"), dict)
    ):
        raise ValueError("a pin is not {fingerprint, content}")
    kept = item["content"]
    print_ = item["fingerprint"]
    assert isinstance(kept, dict) and isinstance(print_, str)
    content = pinned_form(kept)
    # Pins written before the vectors kept each case whole, fingerprinted as it
    # stood: read as the digests they are now, unless edited by hand since.
    if content != kept and print_ == "sha256:" + hashlib.sha256(canonical(kept)).hexdigest():
        print_ = fingerprint(content)
    return Revision(print_, content)
