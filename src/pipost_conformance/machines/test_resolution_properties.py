"""Resolution over generated registries (SPEC 4): INV-12, INV-13.

Tier: must
Operations: advance_clock, register, shutdown, process_stop, process_recycle,
record, resolve, send, count.

Each example builds a real tmp tree (folders sharing a basename, a folder whose
name looks like hex, symlinks to folders) and registers sessions in it through
the driver: named and unnamed, sharing cwds, registered through symlinks, with
session ids that share their first 8 hex characters, live, stalled and offline
(shut down, crashed, or with a recycled pid). Then:

- resolve is total: any string gets a session or a refusal, never an exception;
- it never guesses: every handle gets what SPEC 4 says step by step, and where
  more than one session of the top rank matches the deciding step, a refusal
  that lists them;
- a batch is atomic: one handle SPEC 4 refuses refuses the send, which writes
  nothing (the tree is byte-identical), and more than 8 handles are refused;
- every handle of a session resolves to it where it is unambiguous: address,
  session id, unique prefix, name, default name, cwd basename, path, symlinked path.

Through the driver only (and the folder, for a byte-identical tree), so a
conformance run points it at a port with PIPOST_IMPL. Which sessions are running
is what the implementation reports (whether presence is honest is the registry
machine's to judge); a record that does not hold its canonical cwd and (default)
name is a world this module cannot judge resolution in: an error, not a verdict.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import posixpath
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from pipost.address import address_of
from pipost_conformance.client import Driver, Json, Result
from pipost_conformance.machines import driving
from pipost_conformance.machines.common import tree_snapshot
from pipost_conformance.machines.driving import SCRATCH, refusal_code, setup
from pipost_conformance.machines.verdict import SetupFailed, check

MAX_TARGETS = 8
STALL_MS = 60_000
"""Past the 45 s a record stays live without a heartbeat."""

# Two folders share the basename "app"; "deadbeef" looks like a session id prefix.
FOLDERS = ("work/alpha", "work/beta", "work/app", "other/app", "work/deadbeef")
LINKS = {
    "links/alpha": "work/alpha",
    "links/app": "other/app",
    "links/deadbeef": "work/deadbeef",
    "links/gamma": "links/gamma-real",  # a folder reached only through its link
}
CALLER_CWD = "work"
"""Where relative path handles start, under the world's root."""

ID_STEMS = ("0195f7e0", "0195f7e1", "deadbeef", "c0ffee00")
PLAIN_IDS = ("session-one", "review", "alpha")
NAMES = (None, "builder", "reviewer", "alpha", "app", "deadbeef")
PRESENCES = ("live", "stalled", "shut down", "crashed", "pid recycled")
RUNNING = ("live", "stalled")

_HEX_PREFIX = re.compile(r"[0-9a-fA-F]{8}[0-9a-fA-F-]*")
_ADDRESS = re.compile(r"s-[0-9a-f]{12}")


# -- generated registries ---------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    session_id: str
    name: str | None
    folder: str
    """A key of FOLDERS, or of LINKS when the session registered through a symlink."""
    presence: str


hex_tails = st.text("0123456789abcdef", min_size=4, max_size=4)
session_ids = st.one_of(
    st.builds("{}-{}".format, st.sampled_from(ID_STEMS), hex_tails),
    st.sampled_from(ID_STEMS),  # an id that is exactly the prefix of another
    st.sampled_from(PLAIN_IDS),
)
specs = st.builds(
    Spec,
    session_id=session_ids,
    name=st.sampled_from(NAMES),
    folder=st.sampled_from(FOLDERS + tuple(LINKS)),
    presence=st.sampled_from(PRESENCES),
)
registries = st.lists(specs, min_size=1, max_size=6, unique_by=lambda s: s.session_id)


@st.composite
def distinct_registries(draw: st.DrawFn) -> list[Spec]:
    """Sessions no two of which share a handle: distinct ids (and 8-character
    prefixes), names, folders and basenames, none of them hex-like."""
    count = draw(st.integers(1, 4))
    stems = draw(st.permutations(ID_STEMS))[:count]
    folders = draw(st.permutations(["work/alpha", "work/beta", "other/app", "links/gamma"]))
    names = draw(st.permutations(["builder", "reviewer", "tester", "scribe"]))
    found = []
    for stem, folder, name in zip(stems, folders, names, strict=False):
        found.append(
            Spec(
                session_id=f"{stem}-{draw(hex_tails)}",
                name=draw(st.sampled_from([None, name])),
                folder=folder,
                presence=draw(st.sampled_from(PRESENCES)),
            )
        )
    return found


# -- a world on disk ----------------------------------------------------------------------


def default_name_of(cwd: str, address: str) -> str:
    """SPEC 1.3: basename of the cwd, ``-``, address characters 3–6."""
    return f"{posixpath.basename(cwd)}-{address[2:6]}"


@dataclass(frozen=True)
class Known:
    """A registered session as SPEC 1.3 and 4 see it."""

    session_id: str
    name: str
    cwd: str
    running: bool

    @property
    def address(self) -> str:
        return address_of(self.session_id)

    @property
    def default_name(self) -> str:
        return default_name_of(self.cwd, self.address)


@dataclass
class World:
    tmp: Path
    driver: Driver
    sessions: list[Known]

    @property
    def cwd(self) -> str:
        return str(self.tmp / CALLER_CWD)

    @property
    def home(self) -> str:
        return str(self.tmp)

    def resolve(self, handle: str) -> Result:
        return self.driver.call("resolve", handle=handle, cwd=self.cwd, home=self.home)


@contextlib.contextmanager
def world(specs: list[Spec]) -> Iterator[World]:
    """The tree, then the sessions: the stalled ones register first and the clock
    moves past the live window before the others do."""
    tmp = Path(tempfile.mkdtemp(prefix="pipost-resolve-", dir=SCRATCH)).resolve()
    try:
        for folder in (*FOLDERS, *LINKS.values()):
            (tmp / folder).mkdir(parents=True, exist_ok=True)
        for link, folder in LINKS.items():
            (tmp / link).symlink_to(tmp / folder)
        driver = driving.new_driver(tmp)
        stalled = [spec for spec in specs if spec.presence == "stalled"]
        rest = [spec for spec in specs if spec.presence != "stalled"]
        registered = [_register(driver, tmp, spec) for spec in stalled]
        setup(driver.call("advance_clock", ms=STALL_MS), "advance_clock")
        registered += [_register(driver, tmp, spec) for spec in rest]
        known = []
        for session in registered:
            presence = setup(driver.call("record", address=session.address), "record")["presence"]
            known.append(dataclasses.replace(session, running=presence in RUNNING))
        yield World(tmp, driver, known)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _register(driver: Driver, tmp: Path, spec: Spec) -> Known:
    args: dict[str, Json] = {"session_id": spec.session_id, "cwd": str(tmp / spec.folder)}
    if spec.name is not None:
        args["name"] = spec.name
    record = setup(driver.call("register", **args), "register")["record"]
    pid = record.get("pid") if isinstance(record, dict) else None
    if not isinstance(record, dict) or not isinstance(pid, int):
        raise SetupFailed(f"register of {spec.session_id!r} answered no record with a pid")
    if spec.presence == "shut down":
        setup(driver.call("shutdown", session_id=spec.session_id), "shutdown")
        setup(driver.call("process_stop", pid=pid), "process_stop")
    elif spec.presence == "crashed":
        setup(driver.call("process_stop", pid=pid), "process_stop")
    elif spec.presence == "pid recycled":
        setup(driver.call("process_recycle", pid=pid), "process_recycle")
    cwd = os.path.realpath(tmp / spec.folder)
    name = spec.name or default_name_of(cwd, address_of(spec.session_id))
    if (record["cwd"], record["name"]) != (cwd, name):
        raise SetupFailed(
            f"SPEC 1.3: the record of {spec.session_id!r} holds cwd {record['cwd']!r} and "
            f"name {record['name']!r}, not {cwd!r} and {name!r}"
        )
    return Known(spec.session_id, name, cwd, running=spec.presence in RUNNING)


# -- SPEC 4, step by step -------------------------------------------------------------------


@dataclass(frozen=True)
class Expected:
    address: str | None
    """The session the handle names, or None for a refusal."""
    candidates: tuple[str, ...] = ()
    """For an ambiguous handle: the addresses the refusal must list."""


def spec_resolution(handle: str, world: World) -> Expected:
    sessions = world.sessions
    if _ADDRESS.fullmatch(handle):
        known = [s.address for s in sessions if s.address == handle]
        return Expected(known[0] if known else None)
    if handle in ("~", ".", "..") or handle.startswith("~/") or "/" in handle:
        if handle == "~" or handle.startswith("~/"):
            handle = world.home + handle[1:]
        expanded = posixpath.normpath(posixpath.join(world.cwd, handle))
        try:
            canonical = os.path.realpath(expanded)
        except ValueError:  # a NUL byte or an unpaired surrogate: no folder has that name
            return Expected(None)
        return _decide([s for s in sessions if s.cwd == canonical])
    steps = (
        lambda s: s.session_id == handle,
        lambda s: (
            bool(_HEX_PREFIX.fullmatch(handle)) and s.session_id.lower().startswith(handle.lower())
        ),
        lambda s: handle in (s.name, s.default_name),
        lambda s: posixpath.basename(s.cwd) == handle,
    )
    for step in steps:
        matches = [s for s in sessions if step(s)]
        if matches:
            return _decide(matches)
    return Expected(None)


def _bare_address(handle: str, world: World) -> bool:
    """An address no session registered. Refusing it is pipost's SHOULD (SPEC 4:
    it has neither record nor mailbox); a port may take it as it is instead, so
    these properties accept either."""
    return bool(_ADDRESS.fullmatch(handle)) and spec_resolution(handle, world).address is None


def _decide(matches: list[Known]) -> Expected:
    """Running sessions outrank offline ones; one left resolves, more is refused."""
    top = [s for s in matches if s.running] or matches
    if len(top) == 1:
        return Expected(top[0].address)
    return Expected(None, tuple(s.address for s in top))


def handles_of(session: Known, world: World) -> list[str]:
    """Every way SPEC 4 offers to name ``session``."""
    relative = os.path.relpath(session.cwd, world.cwd)
    found = [
        session.address,
        session.session_id,
        session.name,
        session.default_name,
        posixpath.basename(session.cwd),
        session.cwd,
        relative if "/" in relative else f"./{relative}",
        "~/" + os.path.relpath(session.cwd, world.home),
    ]
    if _HEX_PREFIX.fullmatch(session.session_id[:8]):
        found += [session.session_id[:8], session.session_id[:10].upper()]
    found += [
        str(world.tmp / link) for link, f in LINKS.items() if str(world.tmp / f) == session.cwd
    ]
    return found


def every_handle(world: World) -> list[str]:
    """The handles of every session, and some that name none."""
    strangers = [
        "nobody",
        "s-000000000000",
        "ffffffff",
        "0195f7e",  # 7 hex characters: a name, not a prefix
        "0195F7E0",
        "~",
        ".",
        "..",
        str(world.tmp / "work/nowhere"),
        "links/alpha",  # relative to the caller's cwd, where there is no links/
    ]
    own = [handle for session in world.sessions for handle in handles_of(session, world)]
    return list(dict.fromkeys(own + strangers))


# -- the properties ---------------------------------------------------------------------------


@given(registries)
def test_resolution_never_guesses(specs: list[Spec]) -> None:
    """Each handle resolves to the session SPEC 4 names, or is refused with the
    candidates (INV-12); one that names a session is not refused (INV-13)."""
    with world(specs) as built:
        for handle in every_handle(built):
            expected = spec_resolution(handle, built)
            result = built.resolve(handle)
            if expected.address is not None:
                check(
                    "refused" not in result,
                    "INV-13",
                    f"{handle!r} names {expected.address}, and was refused: {result}",
                )
                check(
                    result.get("address") == expected.address,
                    "INV-12",
                    f"{handle!r} names {expected.address}, and resolved to {result}",
                )
                continue
            if "refused" not in result and _bare_address(handle, built):
                check(
                    result.get("address") == handle and result.get("record") is None,
                    "INV-12",
                    f"the unregistered address {handle!r} resolved to {result}",
                )
                continue
            check("refused" in result, "INV-12", f"{handle!r} should be refused, got {result}")
            for address in expected.candidates:
                check(
                    address in _candidates(result),
                    "INV-12",
                    f"the refusal of {handle!r} does not list the candidate {address}: {result}",
                )


@given(distinct_registries())
def test_every_handle_of_a_session_resolves_to_it(specs: list[Spec]) -> None:
    """Every way SPEC 4 offers to name a session finds it (INV-13)."""
    with world(specs) as built:
        for session in built.sessions:
            for handle in handles_of(session, built):
                result = built.resolve(handle)
                check(
                    result.get("address") == session.address,
                    "INV-13",
                    f"{handle!r} of {session.address} resolved to {result}",
                )


any_handle = st.one_of(
    st.text(),
    st.text(st.characters(categories=["Cs", "Cc", "P", "L", "Nd"])),  # surrogates, NUL
    st.builds("{}/{}".format, st.text(max_size=8), st.text(max_size=8)),
    st.from_regex(r"\A(s-[0-9a-f]{0,13}|[0-9a-fA-F]{7,12}-?[0-9a-f]{0,4}|~.{0,6})\Z"),
)


@given(registries, st.lists(any_handle, min_size=1, max_size=5))
def test_resolve_is_total(specs: list[Spec], handles: list[str]) -> None:
    """Any text at all resolves to a registered session or is refused (INV-12)."""
    with world(specs) as built:
        addresses = {s.address for s in built.sessions}
        for handle in handles:
            result = built.resolve(handle)  # an exception is an error of the run
            bare = _bare_address(handle, built) and result.get("address") == handle
            check(
                "refused" in result or result.get("address") in addresses or bare,
                "INV-12",
                f"{handle!r} resolved to no registered session: {result}",
            )


@given(registries, st.booleans(), st.data())
def test_a_send_is_atomic_and_capped(
    specs: list[Spec], too_many: bool, data: st.DataObject
) -> None:
    """A batch is refused whole and writes nothing, more than 8 handles included
    (INV-12); one whose every handle resolves is sent (INV-13)."""
    sizes = (MAX_TARGETS + 1, MAX_TARGETS + 2) if too_many else (1, MAX_TARGETS)
    with world(specs) as built:
        handles = data.draw(
            st.lists(st.sampled_from(every_handle(built)), min_size=sizes[0], max_size=sizes[1]),
            label="handles",
        )
        # What each handle names by SPEC 4: the send is judged on its own, not by
        # what the implementation's resolve said (a defect there is INV-12/13's above).
        alone = [spec_resolution(handle, built).address for handle in handles]
        post = built.tmp / "post"
        before = tree_snapshot(post)
        result = built.driver.call(
            "send", targets=list(handles), body="hello", cwd=built.cwd, home=built.home
        )
        if "failed" in result:
            raise SetupFailed(f"send to {handles}: {result}")
        unknown = [h for h, address in zip(handles, alone, strict=True) if address is None]
        taken_bare = "refused" not in result and all(_bare_address(h, built) for h in unknown)
        if len(handles) > MAX_TARGETS:
            check(
                refusal_code(result) == "too_many_targets",
                "INV-12",
                f"a send to {len(handles)} handles was not refused as too many: {result}",
            )
        elif unknown and not taken_bare:
            check("refused" in result, "INV-12", f"a send to {handles} was not refused: {result}")
        else:
            check(
                "refused" not in result,
                "INV-13",
                f"a send to {handles}, each of which resolves, was refused: {result}",
            )
        if "refused" in result:
            check(tree_snapshot(post) == before, "INV-12", f"a refused send to {handles} wrote")
            return
        targets = list(dict.fromkeys(a or h for h, a in zip(handles, alone, strict=True)))
        receipts = result.get("receipts")
        check(
            isinstance(receipts, list)
            and [r.get("address") for r in receipts if isinstance(r, dict)] == targets,
            "INV-12",
            f"a send to {handles} reported {receipts!r}, not one receipt for each of {targets}",
        )
        for address in targets:  # handles naming one session collapse to one copy
            count = setup(built.driver.call("count", address=address), "count")["count"]
            check(count == 1, "INV-12", f"a send to {handles} left {count} letters in {address}")


def _candidates(refusal: Result) -> list[str]:
    """The addresses an ambiguous refusal lists (its ``candidates`` fact)."""
    reason = refusal.get("refused")
    listed = reason.get("candidates") if isinstance(reason, dict) else None
    return [str(address) for address in listed] if isinstance(listed, list) else []
