"""Resolution: every handle resolves, nothing is guessed (SPEC 4; INV-12, INV-13)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipost import format
from pipost.address import HandleKind, address_of, classify_handle, default_name, expand_path
from pipost.refusals import (
    Ambiguous,
    NoSessionIn,
    NoTargets,
    Refusal,
    TooManyTargets,
    UnknownAddress,
    UnknownTarget,
)
from pipost.resolve import MAX_TARGETS, Caller, Target, resolve, resolve_all
from pipost.session import Candidate, Presence, Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pipost.resolve import Directory

NOW = 1796078534257


@dataclass
class MemoryDirectory:
    """The sessions and mailboxes resolution sees, held in memory."""

    sessions: list[Candidate]
    mailboxes: set[str] = field(default_factory=set)

    def by_address(self, address: str) -> Candidate | None:
        return next((c for c in self.sessions if c.address == address), None)

    def candidates(self) -> Sequence[Candidate]:
        return self.sessions

    def has_mailbox(self, address: str) -> bool:
        return address in self.mailboxes


def session(
    session_id: str, name: str, cwd: str, presence: Presence = Presence.OFFLINE
) -> Candidate:
    record = Record(
        address=address_of(session_id),
        session_id=session_id,
        name=name,
        cwd=cwd,
        started_at=NOW - 3_600_000,
        last_seen=NOW,
        pid=None if presence is Presence.OFFLINE else 4242,
    )
    return Candidate(record, presence, queued=0)


# The sessions of the reference transcripts.
GTM = session(
    "019a3f2e-7c41-7b3a-9d2e-5f1c8a4b6e01", "gtm-summoner", "/home/dev/gtm", Presence.LIVE
)
CACHE_FIX = session("019a3f2e-7c41-7b3a-9d2e-5f1c8a4b6e02", "cache-fix-d510", "/home/dev/cache-fix")
DASHBOARD = session("019a3f30-1111-7222-8333-444455556666", "dashboard", "/home/dev/old")
OLD_IDEA = session("019a3f31-aaaa-7bbb-8ccc-dddddddddddd", "old-idea", "/home/dev/old")
TWIN_A = session("019a3f32-0000-7000-8000-00000000000a", "twin-a", "/home/dev/shared")
TWIN_B = session("019a3f32-0000-7000-8000-00000000000b", "twin-b", "/home/dev/shared")
# A name that looks like a session-id prefix but matches no session id.
HEXNAME = session("7e570000-0000-7000-8000-000000000001", "deadbeef", "/srv/cafebabe1")
SESSIONS = [GTM, CACHE_FIX, DASHBOARD, OLD_IDEA, TWIN_A, TWIN_B, HEXNAME]
DIRECTORY = MemoryDirectory(SESSIONS)

# /home/dev/link is a symlink to /home/dev/cache-fix.
LINKS = {"/home/dev/link": "/home/dev/cache-fix"}
CALLER = Caller(cwd="/home/dev/gtm", home="/home/dev", canonical=lambda p: LINKS.get(p, p))


def resolved(handle: str, directory: Directory = DIRECTORY) -> Candidate | None:
    outcome = resolve(handle, directory, CALLER)
    assert isinstance(outcome, Target), outcome
    return outcome.candidate


def refused(handle: str, directory: Directory = DIRECTORY) -> str:
    """The text of the refusal of ``handle``."""
    outcome = resolve(handle, directory, CALLER)
    assert isinstance(outcome, Refusal), outcome
    return format.refusal(outcome)


def line_of(candidate: Candidate) -> str:
    record = candidate.record
    return f"  {record.name} ({record.address}) — {record.cwd}"


@pytest.mark.parametrize(
    ("handle", "expected"),
    [
        ("s-52c78af935a3", GTM),  # address
        (CACHE_FIX.address, CACHE_FIX),
        ("gtm-summoner", GTM),  # name
        ("cache-fix-d510", CACHE_FIX),  # name that is also the default name
        (default_name("/home/dev/old", DASHBOARD.address), DASHBOARD),  # default name
        ("cache-fix", CACHE_FIX),  # cwd basename
        ("/home/dev/gtm", GTM),  # absolute path
        ("/home/dev/gtm/", GTM),
        (".", GTM),  # relative to the caller's cwd
        ("../cache-fix", CACHE_FIX),
        ("~/cache-fix", CACHE_FIX),  # home
        ("/home/dev/link", CACHE_FIX),  # symlink, canonicalised
        ("~/link", CACHE_FIX),
        ("019a3f30-1111-7222-8333-444455556666", DASHBOARD),  # session id
        ("019a3f30", DASHBOARD),  # unique prefix
        ("019A3F30-1111", DASHBOARD),  # prefixes are case-insensitive
        ("019a3f2e", GTM),  # two match; the live one outranks the offline one
        ("deadbeef", HEXNAME),  # hex-looking, no such id: a name
        ("cafebabe1", HEXNAME),  # hex-looking, no such id: a cwd basename
    ],
)
def test_every_kind_of_handle_resolves(handle: str, expected: Candidate) -> None:
    assert resolved(handle) == expected


@pytest.mark.parametrize(
    ("cwd", "handle", "found"),
    [
        ("/srv/XBOX", "XBOX", True),  # the whole last component, whatever it ends with
        ("/srv/tools/", "tools", True),  # a record written with a trailing slash
        ("/srv/notes ", "notes ", True),  # a folder whose name ends in a blank
        ("/srv/notes ", "notes", False),  # is not found without it
    ],
)
def test_a_basename_is_the_whole_last_component_of_the_cwd(
    cwd: str, handle: str, found: bool
) -> None:
    """SPEC 4 (INV-13): a basename is equal to the last component of a record's cwd,
    not to a part of it, nor to it with its blanks trimmed."""
    folder = session("0123abcd-5555", "unrelated", cwd)
    outcome = resolve(handle, MemoryDirectory([folder]), CALLER)
    assert (outcome == Target(folder.address, folder)) is found


def test_an_exact_session_id_beats_a_longer_id_it_is_a_prefix_of() -> None:
    short = session("0123abcd-0000", "short", "/a")
    long = session("0123abcd-0000-1111", "long", "/b", Presence.LIVE)
    assert resolved("0123abcd-0000", MemoryDirectory([long, short])) == short


@pytest.mark.parametrize(
    ("handle", "candidates"),
    [
        ("/home/dev/shared", [TWIN_A, TWIN_B]),
        ("shared", [TWIN_A, TWIN_B]),
        ("/home/dev/old", [DASHBOARD, OLD_IDEA]),
        ("019a3f32", [TWIN_A, TWIN_B]),  # ambiguous prefix
    ],
)
def test_ambiguity_is_refused_listing_every_candidate(
    handle: str, candidates: list[Candidate]
) -> None:
    text = refused(handle)
    assert "matches more than one session" in text
    listed = [line for line in text.splitlines() if line.startswith("  ")]
    assert listed == [line_of(c) for c in candidates]


def test_a_running_session_outranks_offline_ones_and_is_the_only_one_listed() -> None:
    stalled = session("aaaa0000-1", "worker", "/w/1", Presence.STALLED)
    offline = session("aaaa0000-2", "worker", "/w/2")
    assert resolved("worker", MemoryDirectory([offline, stalled])) == stalled
    live = session("aaaa0000-3", "worker", "/w/3", Presence.LIVE)
    text = refused("worker", MemoryDirectory([offline, stalled, live]))
    assert line_of(stalled) in text
    assert line_of(live) in text
    assert line_of(offline) not in text


def test_an_unknown_name_is_refused_listing_the_reachable_sessions() -> None:
    text = refused("nobody")
    assert text.startswith(
        '"nobody" is not an address, a session id, a directory with a registered session, '
        "or a known session name"
    )
    assert line_of(GTM) in text
    assert line_of(CACHE_FIX) not in text  # offline while another session runs


def test_with_nothing_running_every_session_is_reachable() -> None:
    text = refused("nobody", MemoryDirectory([CACHE_FIX, DASHBOARD]))
    assert line_of(CACHE_FIX) in text
    assert line_of(DASHBOARD) in text


def test_a_seven_character_hex_handle_is_a_name() -> None:
    assert refused("019a3f3").startswith('"019a3f3" is not an address')


@pytest.mark.parametrize("handle", ["/home/dev/elsewhere", "..", "~", "./gtm"])
def test_a_path_with_no_session_is_refused_naming_the_canonical_path(handle: str) -> None:
    expanded = expand_path(handle, CALLER.cwd, CALLER.home)
    text = refused(handle)
    assert text.startswith(f"no session is registered in {expanded} ")
    assert line_of(GTM) in text


def test_an_unknown_address_without_a_mailbox_is_refused() -> None:
    assert "s-0123456789ab is unknown" in refused("s-0123456789ab")


@pytest.mark.parametrize(
    ("handle", "refusal"),
    [
        ("nobody", UnknownTarget("nobody", (GTM,))),
        ("019a3f3", UnknownTarget("019a3f3", (GTM,))),
        ("/home/dev/elsewhere", NoSessionIn("/home/dev/elsewhere", "/home/dev/elsewhere", (GTM,))),
        ("./gtm", NoSessionIn("./gtm", "/home/dev/gtm/gtm", (GTM,))),
        ("/home/dev/shared", Ambiguous("/home/dev/shared", (TWIN_A, TWIN_B))),
        ("019a3f32", Ambiguous("019a3f32", (TWIN_A, TWIN_B))),
        ("s-0123456789ab", UnknownAddress("s-0123456789ab")),
    ],
)
def test_a_refusal_is_its_kind_and_its_facts(handle: str, refusal: Refusal) -> None:
    """Data, not prose: the handle, the canonical path, the candidates and the
    sessions offered instead, which the texts above are rendered from."""
    assert resolve(handle, DIRECTORY, CALLER) == refusal


@pytest.mark.parametrize("handle", ["/home/dev/g\x00tm", "./g\ud800tm"], ids=["NUL", "surrogate"])
def test_a_path_no_folder_can_have_is_no_session_in_it(handle: str) -> None:
    """A path with a NUL or an unpaired surrogate cannot be canonicalised (the
    system refuses it): it is the cwd of no session, refused with its facts."""
    caller = CALLER.replace(canonical=os.path.realpath)
    expanded = expand_path(handle, CALLER.cwd, CALLER.home)
    assert resolve(handle, DIRECTORY, caller) == NoSessionIn(handle, expanded, (GTM,))


def test_an_unknown_address_with_a_mailbox_resolves_without_a_record() -> None:
    directory = MemoryDirectory(SESSIONS, mailboxes={"s-0123456789ab"})
    assert resolve("s-0123456789ab", directory, CALLER) == Target("s-0123456789ab", None)


# -- batches ------------------------------------------------------------------------


def addresses(outcome: list[Target] | Refusal) -> list[str]:
    assert isinstance(outcome, list), outcome
    return [target.address for target in outcome]


def test_handles_naming_one_session_collapse_in_the_order_first_named() -> None:
    outcome = resolve_all(
        ["cache-fix", "dashboard", "/home/dev/cache-fix", "gtm-summoner"], DIRECTORY, CALLER
    )
    assert addresses(outcome) == [CACHE_FIX.address, DASHBOARD.address, GTM.address]


def test_one_bad_handle_refuses_the_whole_batch() -> None:
    outcome = resolve_all(["cache-fix", "nobody", "dashboard"], DIRECTORY, CALLER)
    assert outcome == UnknownTarget("nobody", (GTM,))


def test_an_ambiguous_handle_refuses_the_whole_batch() -> None:
    outcome = resolve_all(["cache-fix", "/home/dev/shared"], DIRECTORY, CALLER)
    assert outcome == Ambiguous("/home/dev/shared", (TWIN_A, TWIN_B))


def test_eight_targets_are_allowed() -> None:
    assert addresses(resolve_all(["cache-fix"] * MAX_TARGETS, DIRECTORY, CALLER)) == [
        CACHE_FIX.address
    ]


def test_more_than_eight_targets_are_refused_even_when_they_collapse() -> None:
    outcome = resolve_all(["cache-fix"] * (MAX_TARGETS + 1), DIRECTORY, CALLER)
    assert outcome == TooManyTargets(9, MAX_TARGETS)
    assert isinstance(outcome, Refusal)
    assert format.refusal(outcome) == (
        "9 targets in one send; the cap is 8 — a wider fan-out is a broadcast, not a message"
    )


def test_no_targets_are_refused() -> None:
    outcome = resolve_all([], DIRECTORY, CALLER)
    assert outcome == NoTargets()
    assert isinstance(outcome, Refusal)
    assert format.refusal(outcome) == "send requires --to <target>"


# -- properties over generated directories ------------------------------------------

# Small pools, so that generated sessions share prefixes, names and folders.
ID_GROUPS = ["0123abcd", "0123abce", "89abcdef"]
NAMES = ["alpha", "beta", "gamma", "0123abcd", "shared"]
FOLDERS = ["/w/alpha", "/w/shared", "/srv/shared", "/w/0123abcd", "/w/beta"]
PRESENCES = [Presence.LIVE, Presence.STALLED, Presence.OFFLINE]


@st.composite
def directories(draw: st.DrawFn) -> MemoryDirectory:
    ids = draw(
        st.lists(
            st.builds("{}-{}".format, st.sampled_from(ID_GROUPS), st.sampled_from("0123456789")),
            min_size=1,
            max_size=6,
            unique=True,
        )
    )
    sessions = [
        session(
            session_id,
            draw(st.sampled_from(NAMES)),
            draw(st.sampled_from(FOLDERS)),
            draw(st.sampled_from(PRESENCES)),
        )
        for session_id in ids
    ]
    return MemoryDirectory(sessions)


def handles(directory: MemoryDirectory) -> st.SearchStrategy[str]:
    known = [
        text
        for c in directory.sessions
        for text in (
            c.address,
            c.record.session_id,
            c.record.session_id[:8],
            c.record.session_id[:9].upper(),
            c.record.name,
            default_name(c.record.cwd, c.address),
            c.record.cwd,
            c.record.cwd.rsplit("/", 1)[-1],
        )
    ]
    return st.sampled_from(known) | st.sampled_from([*ID_GROUPS, *NAMES, *FOLDERS]) | st.text()


# What each handle kind may match, strongest first; resolution decides at the
# first level anything matches. Stated here on its own terms, to check resolve by.
def match_level(handle: str, record: Record) -> int | None:
    kind = classify_handle(handle)
    if kind == HandleKind.ADDRESS:
        return 0 if handle == record.address else None
    if kind == HandleKind.PATH:
        path = CALLER.canonical(expand_path(handle, CALLER.cwd, CALLER.home))
        return 0 if path == record.cwd else None
    levels = [
        handle == record.session_id,
        kind == HandleKind.SESSION_ID_PREFIX
        and record.session_id.lower().startswith(handle.lower()),
        handle in (record.name, default_name(record.cwd, record.address)),
        handle == record.cwd.rsplit("/", 1)[-1],
    ]
    return levels.index(True) if True in levels else None


@given(st.data(), directories())
def test_resolve_is_total_and_never_picks_among_equals(
    data: st.DataObject, directory: MemoryDirectory
) -> None:
    handle = data.draw(handles(directory))
    outcome = resolve(handle, directory, CALLER)
    assert isinstance(outcome, Target | Refusal)
    if isinstance(outcome, Refusal):
        return
    chosen = outcome.candidate
    assert chosen is not None
    level = match_level(handle, chosen.record)
    assert level is not None
    for other in directory.sessions:
        if other is chosen:
            continue
        other_level = match_level(handle, other.record)
        if other_level is None or other_level > level:
            continue
        # A match as strong as the chosen one is allowed only when it ranks lower.
        assert other_level == level
        assert chosen.presence.process_exists
        assert not other.presence.process_exists


@given(directories())
def test_every_session_resolves_by_address_and_session_id(directory: MemoryDirectory) -> None:
    for candidate in directory.sessions:
        for handle in (candidate.address, candidate.record.session_id):
            outcome = resolve(handle, directory, CALLER)
            assert outcome == Target(candidate.address, candidate)


@given(directories())
def test_a_unique_name_resolves_to_its_session(directory: MemoryDirectory) -> None:
    for candidate in directory.sessions:
        name = candidate.record.name
        own = match_level(name, candidate.record)
        assert own is not None
        rivals = [
            other
            for other in directory.sessions
            if other is not candidate
            and (level := match_level(name, other.record)) is not None
            and level <= own
        ]
        if not rivals:
            assert resolve(name, directory, CALLER) == Target(candidate.address, candidate)


@given(directories(), st.lists(st.sampled_from([*NAMES, *FOLDERS, "nobody"]), max_size=10))
def test_a_batch_resolves_every_handle_or_refuses(
    directory: MemoryDirectory, batch: list[str]
) -> None:
    outcome = resolve_all(batch, directory, CALLER)
    singles = [resolve(handle, directory, CALLER) for handle in batch]
    if not batch or len(batch) > MAX_TARGETS:
        assert isinstance(outcome, Refusal)
    elif any(isinstance(single, Refusal) for single in singles):
        assert isinstance(outcome, Refusal)
        assert outcome in singles
    else:
        first_named = list(dict.fromkeys(s.address for s in singles if isinstance(s, Target)))
        assert addresses(outcome) == first_named
