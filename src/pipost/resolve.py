"""Resolution: every handle resolves, nothing is guessed (SPEC 4; INV-12, INV-13).

A target is tried as, in order: an address; a path (matched against the
canonical cwd of each record); a session id or a unique prefix of one (at least
8 leading hex characters; an exact id of any shape also counts); a name, the
default name included; the basename of a record's cwd. The first step that
matches anything decides. Among its matches, sessions whose process exists
outrank offline ones; exactly one left resolves, more is refused with every
candidate listed, none is refused with the reachable sessions listed. A refusal
is data (:mod:`pipost.refusals`): the kind and its facts, which format words.

Pure: the directory of sessions and the canonicalisation of paths are handed in.
"""

from __future__ import annotations

from pipost.address import HandleKind, classify_handle, default_name, expand_path
from pipost.refusals import (
    Ambiguous,
    NoSessionIn,
    NoTargets,
    Refusal,
    TooManyTargets,
    UnknownAddress,
    UnknownTarget,
)
from pipost.value import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Final, Protocol

    from pipost.session import Candidate, Record

    class Directory(Protocol):
        """What resolution reads: the sessions, their presence, the mailboxes."""

        def by_address(self, address: str) -> Candidate | None: ...

        def candidates(self) -> Sequence[Candidate]:
            """Every session, in listing order (live first, then by last seen)."""
            ...

        def has_mailbox(self, address: str) -> bool: ...


MAX_TARGETS = 8


class Target(Value):
    """A resolved target; ``candidate`` is None for a mailbox with no record."""

    __slots__ = ("address", "candidate")
    address: Final[str]
    candidate: Final[Candidate | None]

    def __init__(self, address: str, candidate: Candidate | None) -> None:
        self.address = address
        self.candidate = candidate


class Caller(Value):
    """Where relative paths start, and how an existing path is canonicalised."""

    __slots__ = ("cwd", "home", "canonical")
    cwd: Final[str]
    home: Final[str]
    canonical: Final[Callable[[str], str]]

    def __init__(self, cwd: str, home: str, canonical: Callable[[str], str]) -> None:
        self.cwd = cwd
        self.home = home
        self.canonical = canonical


def resolve(handle: str, directory: Directory, caller: Caller) -> Target | Refusal:
    kind = classify_handle(handle)
    if kind == HandleKind.ADDRESS:
        return _by_address(handle, directory)
    candidates = directory.candidates()
    if kind == HandleKind.PATH:
        path = expand_path(handle, caller.cwd, caller.home)
        try:
            path = caller.canonical(path)
        except ValueError:  # a NUL or an unpaired surrogate: no folder has such a name
            return NoSessionIn(handle, path, _reachable(candidates))
        matches = [c for c in candidates if c.record.cwd == path]
        if not matches:
            return NoSessionIn(handle, path, _reachable(candidates))
        return _decide(handle, matches)
    for step in _NAME_STEPS:
        matches = [c for c in candidates if step(handle, c.record)]
        if matches:
            return _decide(handle, matches)
    return UnknownTarget(handle, _reachable(candidates))


def resolve_all(
    handles: Sequence[str], directory: Directory, caller: Caller
) -> list[Target] | Refusal:
    """All or nothing: the first refusal refuses the batch. Handles that name one
    session collapse to one target, in the order first named."""
    if not handles:
        return NoTargets()
    if len(handles) > MAX_TARGETS:
        return TooManyTargets(len(handles), MAX_TARGETS)
    targets: dict[str, Target] = {}
    for handle in handles:
        outcome = resolve(handle, directory, caller)
        if isinstance(outcome, Refusal):
            return outcome
        targets.setdefault(outcome.address, outcome)
    return list(targets.values())


def _by_address(address: str, directory: Directory) -> Target | Refusal:
    found = directory.by_address(address)
    if found is not None:
        return Target(address, found)
    if directory.has_mailbox(address):
        return Target(address, None)
    # pi-post 0.7 would create a mailbox nobody reads; the reference refuses.
    return UnknownAddress(address)


def _exact_session_id(handle: str, record: Record) -> bool:
    return handle == record.session_id


def _session_id_prefix(handle: str, record: Record) -> bool:
    return classify_handle(handle) == HandleKind.SESSION_ID_PREFIX and (
        record.session_id.lower().startswith(handle.lower())
    )


def _name(handle: str, record: Record) -> bool:
    return handle in (record.name, default_name(record.cwd, record.address))


def _cwd_basename(handle: str, record: Record) -> bool:
    return record.cwd.rstrip("/").rsplit("/", 1)[-1] == handle


_NAME_STEPS: tuple[Callable[[str, Record], bool], ...] = (
    _exact_session_id,
    _session_id_prefix,
    _name,
    _cwd_basename,
)


def _decide(handle: str, matches: list[Candidate]) -> Target | Refusal:
    running = [c for c in matches if c.presence.process_exists]
    remaining = running or matches
    if len(remaining) == 1:
        return Target(remaining[0].address, remaining[0])
    return Ambiguous(handle, tuple(remaining))


def _reachable(candidates: Sequence[Candidate]) -> tuple[Candidate, ...]:
    return tuple(c for c in candidates if c.presence.process_exists) or tuple(candidates)
