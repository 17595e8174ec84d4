"""``pi-post doctor``: a health check of the post office that changes nothing.

Two halves, as everywhere in pipost. :func:`survey` is the thin I/O part: it
looks at the tree, the process table, the kernel and the pins of the wire
contract shipped with pipost (it runs none of the contract gate), and gathers
what it saw into a :class:`PostOfficeFacts` snapshot, reading only (INV-16).
:func:`diagnose` is pure: it turns a snapshot into findings. A finding is data — a stable code, a
severity (``ok`` or ``attention``), the text and the fix — from which both the
text output (:func:`report`) and the ``--json`` document are made.

A check is one function from the facts to findings, listed in CHECKS; the codes it
can give are in CODES (docs/json.md and schemas/cli.v1.schema.json list them
too). Adding a check is one entry in each, and the fact it needs gathered in
survey.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shlex
import stat
import sys

from pipost import files, format, listeners, mailbox, message, quarantine, registry, watch
from pipost.address import is_address, resume_handle
from pipost.droplog import LIMIT as DROP_LOG_LIMIT
from pipost.droplog import LOG_NAME, ROTATED_NAME
from pipost.host import POLL_S
from pipost.session import (
    HEARTBEAT_MS,
    TEMPORARY_STALE_MS,
    Presence,
    presence,
    temporary_is_sweepable,
)
from pipost.value import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from typing import Final

    from pipost.files import Folder, StrPath
    from pipost.session import ProcessTable, Record

OK = "ok"
ATTENTION = "attention"

NEAR_CAP = mailbox.CAP * 4 // 5
"""A mailbox with 40 or more letters queued is near the cap of 50: four fifths full,
ten sends from refusing every further one."""

FOLDER_ROLES = ("root", "registry", "inbox", "mailbox", "quarantine", "log", "listeners")
FOLDER_FAULTS = ("symlink", "not-folder", "owner", "mode", "unreadable")

CODES = frozenset(
    {
        "root-ok",
        "root-missing",
        "registry-ok",
        "registry-missing",
        "inbox-ok",
        "inbox-missing",
        *(f"{role}-{fault}" for role in FOLDER_ROLES for fault in FOLDER_FAULTS),
        "kernel-watch-ok",
        "kernel-watch-unavailable",
        "start-times-ok",
        "start-times-unavailable",
        "temporaries-ok",
        "stale-temporary",
        "quarantine-ok",
        "quarantine-held",
        "quarantine-full",
        "drop-log-ok",
        "drop-log-oversize",
        "records-ok",
        "dead-pid",
        "recycled-pid",
        "stalled",
        "mailboxes-ok",
        "mailbox-near-cap",
        "mailbox-full",
        "listeners-ok",
        "listeners-several",
        "contract-ok",
        "contract-mismatch",
    }
)
"""Every code a finding can have. A code names a condition and never changes its
meaning; scripts may rely on it (the text is for people and may be reworded)."""


class Finding(Value):
    __slots__ = ("code", "severity", "text", "fix", "subject")
    code: Final[str]
    severity: Final[str]
    text: Final[str]
    fix: Final[str | None]
    """What to do about it; None for what needs nothing."""
    subject: Final[str | None]
    """What it is about: a path or an address; None for the machine as a whole."""

    def __init__(
        self,
        code: str,
        severity: str,
        text: str,
        fix: str | None = None,
        subject: str | None = None,
    ) -> None:
        self.code = code
        self.severity = severity
        self.text = text
        self.fix = fix
        self.subject = subject


# -- the snapshot -------------------------------------------------------------------


class FolderFacts(Value):
    """One folder of the tree as lstat and an attempt to list it saw it."""

    __slots__ = ("role", "path", "kind", "owner", "mode", "error", "address")
    role: Final[str]
    """One of FOLDER_ROLES."""
    path: Final[str]
    kind: Final[str]
    """"missing", "symlink", "not-folder", "folder", or "unreadable" (a folder
    that could not be opened or listed: ``error`` says why)."""
    owner: Final[int | None]
    mode: Final[int | None]
    """Permission bits (no file type)."""
    error: Final[str | None]
    address: Final[str | None]
    """The mailbox's address (role "mailbox")."""

    def __init__(
        self,
        role: str,
        path: str,
        kind: str,
        owner: int | None = None,
        mode: int | None = None,
        error: str | None = None,
        address: str | None = None,
    ) -> None:
        self.role = role
        self.path = path
        self.kind = kind
        self.owner = owner
        self.mode = mode
        self.error = error
        self.address = address


class SessionFacts(Value):
    __slots__ = ("record", "presence", "pid_token")
    record: Final[Record]
    presence: Final[Presence]
    pid_token: Final[str | None]
    """What the process table says of the recorded pid now: None when no process
    has it (or no pid is recorded), else its start token ("" when unknown)."""

    def __init__(self, record: Record, presence: Presence, pid_token: str | None) -> None:
        self.record = record
        self.presence = presence
        self.pid_token = pid_token


class Temporary(Value):
    """A file in a mailbox or in registry/ that is neither a letter nor a record."""

    __slots__ = ("path", "name", "age_ms")
    path: Final[str]
    name: Final[str]
    age_ms: Final[int]
    """Since it was last written."""

    def __init__(self, path: str, name: str, age_ms: int) -> None:
        self.path = path
        self.name = name
        self.age_ms = age_ms


class ContractFacts(Value):
    """The newest pin of the message schema pipost ships, at or below the version it
    speaks (``matches_pin``: that version itself)."""

    __slots__ = ("version", "fingerprint", "matches_pin")
    version: Final[int]
    fingerprint: Final[str]
    matches_pin: Final[bool]

    def __init__(self, version: int, fingerprint: str, matches_pin: bool) -> None:
        self.version = version
        self.fingerprint = fingerprint
        self.matches_pin = matches_pin


class PostOfficeFacts(Value):
    """Everything the checks decide from, gathered at one moment."""

    __slots__ = (
        "root",
        "uid",
        "now",
        "linux",
        "folders",
        "kernel_watch",
        "start_times",
        "sessions",
        "queued",
        "temporaries",
        "quarantined",
        "drop_log",
        "listening",
        "contract",
    )
    root: Final[str]
    uid: Final[int]
    now: Final[int]
    linux: Final[bool]
    """Where inotify and /proc are to be expected, so their absence is a fault; the
    kernel watch elsewhere is kqueue (watch.py)."""
    folders: Final[tuple[FolderFacts, ...]]
    """The folders looked at; one that was not reached (below a folder that was
    missing or unusable) is not among them."""
    kernel_watch: Final[bool]
    start_times: Final[bool]
    """Whether the process table tells this process's start time."""
    sessions: Final[tuple[SessionFacts, ...]]
    queued: Final[dict[str, int]]
    """Letters queued per mailbox folder that could be read, by address."""
    temporaries: Final[tuple[Temporary, ...]]
    quarantined: Final[dict[str, int]]
    """Letters set aside per address."""
    drop_log: Final[tuple[int, int]]
    """Bytes in drops.jsonl and drops.jsonl.1 (0 when absent)."""
    listening: Final[dict[str, tuple[int, ...]]]
    """The pids of the listeners that run, by address (listeners.running)."""
    contract: Final[ContractFacts]

    def __init__(
        self,
        root: str,
        uid: int,
        now: int,
        linux: bool,
        folders: tuple[FolderFacts, ...],
        kernel_watch: bool,
        start_times: bool,
        contract: ContractFacts,
        sessions: tuple[SessionFacts, ...] = (),
        queued: dict[str, int] | None = None,
        temporaries: tuple[Temporary, ...] = (),
        quarantined: dict[str, int] | None = None,
        drop_log: tuple[int, int] = (0, 0),
        listening: dict[str, tuple[int, ...]] | None = None,
    ) -> None:
        self.root = root
        self.uid = uid
        self.now = now
        self.linux = linux
        self.folders = folders
        self.kernel_watch = kernel_watch
        self.start_times = start_times
        self.contract = contract
        self.sessions = sessions
        self.queued = {} if queued is None else queued
        self.temporaries = temporaries
        self.quarantined = {} if quarantined is None else quarantined
        self.drop_log = drop_log
        self.listening = {} if listening is None else listening

    def folder(self, role: str) -> FolderFacts | None:
        """The first folder of ``role`` that was looked at."""
        return next((folder for folder in self.folders if folder.role == role), None)

    def mailboxes(self) -> int:
        return sum(1 for folder in self.folders if folder.role == "mailbox")

    def usable(self, role: str) -> bool:
        """Whether the folder of ``role`` was there and pipost could use it."""
        folder = self.folder(role)
        return folder is not None and _folder_fault(folder, self.uid) is None


# -- the checks (pure) --------------------------------------------------------------


def _folder_fault(folder: FolderFacts, uid: int) -> str | None:
    """One of FOLDER_FAULTS, "missing", or None for a folder pipost can use."""
    if folder.kind in ("missing", "symlink", "not-folder"):
        return folder.kind
    if folder.owner is not None and folder.mode is not None:
        privacy = files.privacy_fault(folder.owner, folder.mode, uid)
        if privacy is not None:
            return privacy
    return "unreadable" if folder.kind == "unreadable" else None


def _folder_problem(folder: FolderFacts, fault: str, uid: int) -> Finding:
    path = shlex.quote(folder.path)
    text, fix = {
        "symlink": (
            f"{folder.path} is a symlink, which pi-post never follows",
            "point PI_POST_DIR at the real folder"
            if folder.role == "root"
            else f"put the folder it points to in its place (mv it to {path})",
        ),
        "not-folder": (
            f"{folder.path} is not a folder",
            f"move it out of the way: mv {path} {shlex.quote(folder.path + '.not-a-folder')}",
        ),
        "owner": (
            f"{folder.path} is owned by uid {folder.owner}, not by you (uid {uid}); "
            "pi-post only uses folders of your own",
            f"chown {uid} {path} (as root), or set PI_POST_DIR to a post office of your own",
        ),
        "mode": (
            f"{folder.path} is writable by others (mode {folder.mode or 0:04o}): whoever "
            "can write there can forge mail",
            f"chmod 700 {path}",
        ),
        "unreadable": (f"{folder.path} cannot be read: {folder.error}", f"chmod 700 {path}"),
    }[fault]
    return Finding(f"{folder.role}-{fault}", ATTENTION, text, fix, folder.path)


def _folder_check(
    facts: PostOfficeFacts, role: str, ok: Callable[[FolderFacts], str], missing: str
) -> list[Finding]:
    """The finding about one of the root, registry/ and inbox/, if it was looked at."""
    folder = facts.folder(role)
    if folder is None:
        return []
    fault = _folder_fault(folder, facts.uid)
    if fault is None:
        return [Finding(f"{role}-ok", OK, ok(folder), subject=folder.path)]
    if fault == "missing":
        return [Finding(f"{role}-missing", OK, missing, subject=folder.path)]
    return [_folder_problem(folder, fault, facts.uid)]


def _problems_of(facts: PostOfficeFacts, role: str) -> list[Finding]:
    """Findings about the folders of ``role`` pipost cannot use (a missing one is fine)."""
    found = []
    for folder in facts.folders:
        fault = _folder_fault(folder, facts.uid) if folder.role == role else None
        if fault is not None and fault != "missing":
            found.append(_folder_problem(folder, fault, facts.uid))
    return found


def check_root(facts: PostOfficeFacts) -> list[Finding]:
    return _folder_check(
        facts,
        "root",
        lambda root: f"{root.path} is a private folder of yours (mode {root.mode or 0:04o})",
        f"there is no post office at {facts.root} yet: the first send or listen makes it "
        "(PI_POST_DIR chooses another)",
    )


def check_registry(facts: PostOfficeFacts) -> list[Finding]:
    return _folder_check(
        facts,
        "registry",
        lambda _: f"the registry holds {_plural(len(facts.sessions), 'readable record')}",
        "no session has registered yet (there is no registry/ folder)",
    )


def check_inbox(facts: PostOfficeFacts) -> list[Finding]:
    return _folder_check(
        facts,
        "inbox",
        lambda _: f"inbox/ holds {_plural(facts.mailboxes(), 'mailbox folder')}",
        "no mail has been sent yet (there is no inbox/ folder)",
    )


def check_kernel_watch(facts: PostOfficeFacts) -> list[Finding]:
    if facts.kernel_watch:
        return [
            Finding(
                "kernel-watch-ok",
                OK,
                f"the kernel watch ({'inotify' if facts.linux else 'kqueue'}) works: "
                "mail enters a listening session as it arrives",
            )
        ]
    polling = f"listening sessions look for mail every {POLL_S:g} s instead"
    if not facts.linux:
        return [
            Finding(
                "kernel-watch-unavailable",
                OK,
                f"this system has no kernel watch pipost can use: {polling}",
            )
        ]
    return [
        Finding(
            "kernel-watch-unavailable",
            ATTENTION,
            f"the kernel watch (inotify) could not be set up: {polling}",
            "raise the limits (sysctl fs.inotify.max_user_instances and "
            "fs.inotify.max_user_watches), or end what holds the instances",
        )
    ]


def check_start_times(facts: PostOfficeFacts) -> list[Finding]:
    if facts.start_times:
        return [
            Finding(
                "start-times-ok",
                OK,
                "process start times can be read: a recycled pid is told from the session "
                "that registered it",
            )
        ]
    fallback = "presence falls back to the pid and the heartbeat, so a recycled pid looks alive"
    if not facts.linux:
        return [
            Finding(
                "start-times-unavailable",
                OK,
                f"this system gives no process start times: {fallback}",
            )
        ]
    return [
        Finding(
            "start-times-unavailable",
            ATTENTION,
            f"process start times cannot be read from /proc: {fallback}",
            "mount /proc (mount -t proc proc /proc)",
        )
    ]


def check_temporaries(facts: PostOfficeFacts) -> list[Finding]:
    if not facts.usable("root"):
        return []
    stale = [t for t in facts.temporaries if temporary_is_sweepable(t.name, t.age_ms)]
    if not stale:
        return [
            Finding(
                "temporaries-ok",
                OK,
                "no temporary file in the mailboxes or the registry is older than "
                f"{TEMPORARY_STALE_MS // 3_600_000} hours",
            )
        ]
    return [
        Finding(
            "stale-temporary",
            ATTENTION,
            f"{t.path} was left by a writer that died: untouched for {format.age(t.age_ms)}",
            "pi-post sweep",
            t.path,
        )
        for t in stale
    ]


def check_quarantine(facts: PostOfficeFacts) -> list[Finding]:
    if not facts.usable("root"):
        return []
    problems = _problems_of(facts, "quarantine")
    if problems:
        return problems
    if not facts.quarantined:
        return [Finding("quarantine-ok", OK, "the quarantine is empty")]
    found = []
    names = _names(facts)
    for address, count in sorted(facts.quarantined.items()):
        path = shlex.quote(quarantine.quarantine_of(facts.root, address))
        fix = f"read them with pi-post quarantine, then remove them: rm -r {path}"
        who = _who(names, address)
        if count >= quarantine.CAP:
            text = (
                f"{who} has {count} letters in quarantine, the cap: each new one removes the oldest"
            )
            found.append(Finding("quarantine-full", ATTENTION, text, fix, address))
        else:
            text = (
                f"{who} has {_plural(count, 'letter')} in quarantine (not messages: malformed, "
                "oversize, a symlink...)"
            )
            found.append(Finding("quarantine-held", ATTENTION, text, fix, address))
    return found


def check_drop_log(facts: PostOfficeFacts) -> list[Finding]:
    if not facts.usable("root"):
        return []
    problems = _problems_of(facts, "log")
    if problems:
        return problems
    current, rotated = facts.drop_log
    log = os.path.join(facts.root, "log", LOG_NAME)
    oversize = []
    for name, size in ((LOG_NAME, current), (ROTATED_NAME, rotated)):
        if size > DROP_LOG_LIMIT:
            path = os.path.join(facts.root, "log", name)
            text = (
                f"{path} is {_size(size)}, over the {_size(DROP_LOG_LIMIT)} at which receivers "
                "rotate the drop log: something other than pi-post wrote it"
            )
            fix = f"move it away: mv {shlex.quote(path)} {shlex.quote(path + '.old')}"
            oversize.append(Finding("drop-log-oversize", ATTENTION, text, fix, path))
    if oversize:
        return oversize
    if not current and not rotated:
        return [Finding("drop-log-ok", OK, "no receiver has dropped a message", subject=log)]
    return [
        Finding(
            "drop-log-ok",
            OK,
            f"the drop log holds {_size(current + rotated)} (it rotates at "
            f"{_size(DROP_LOG_LIMIT)}, keeping one old file); pi-post log shows it",
            subject=log,
        )
    ]


def check_records(facts: PostOfficeFacts) -> list[Finding]:
    if not facts.usable("registry"):
        return []
    found = []
    for session in facts.sessions:
        record = session.record
        who = f"{record.name} ({record.address})"
        resume = (
            f"resume it (cd {shlex.quote(record.cwd)} && pi --session "
            f"{shlex.quote(resume_handle(record.session_id))}) or start its pi-post listen again; "
            "its mail waits queued meanwhile"
        )
        if record.pid is not None and session.presence is Presence.OFFLINE:
            if session.pid_token is None:
                text = (
                    f"{who} records pid {record.pid} as running, but no process has that pid: "
                    "it ended without marking itself offline (a crash?)"
                )
                found.append(Finding("dead-pid", ATTENTION, text, resume, record.address))
            else:
                text = (
                    f"{who} records pid {record.pid} as running, but that pid now belongs to "
                    "another process: it ended without marking itself offline (a crash?)"
                )
                found.append(Finding("recycled-pid", ATTENTION, text, resume, record.address))
        elif session.presence is Presence.STALLED:
            text = (
                f"{who}: pid {record.pid} runs but has not renewed its record for "
                f"{format.age(facts.now - record.last_seen)} (it does every "
                f"{HEARTBEAT_MS // 1000} s): it may hang"
            )
            fix = f"look at pid {record.pid}; if it hangs, end it (kill {record.pid}) and {resume}"
            found.append(Finding("stalled", ATTENTION, text, fix, record.address))
    if found:
        return found
    running = sum(1 for s in facts.sessions if s.presence is Presence.LIVE)
    return [
        Finding(
            "records-ok",
            OK,
            f"{_plural(len(facts.sessions), 'session')} registered, {running} running; no "
            "record names a process that ended or hangs",
        )
    ]


def check_mailboxes(facts: PostOfficeFacts) -> list[Finding]:
    if not facts.usable("inbox"):
        return []
    found = _problems_of(facts, "mailbox")
    names = _names(facts)
    for address, queued in sorted(facts.queued.items()):
        fix = (
            "the session is not reading its mail: resume it, or see what waits with "
            f"pi-post peek {address}"
        )
        who = _who(names, address)
        if queued >= mailbox.CAP:
            text = f"{who} has {queued} letters queued, the cap: every send to it is refused"
            found.append(Finding("mailbox-full", ATTENTION, text, fix, address))
        elif queued >= NEAR_CAP:
            text = f"{who} has {queued} letters queued; sends to it are refused at {mailbox.CAP}"
            found.append(Finding("mailbox-near-cap", ATTENTION, text, fix, address))
    if found:
        return found
    total = sum(facts.queued.values())
    return [
        Finding(
            "mailboxes-ok",
            OK,
            f"{_plural(total, 'letter')} queued; no mailbox holds {NEAR_CAP} or more "
            f"(the cap is {mailbox.CAP})",
        )
    ]


def check_listeners(facts: PostOfficeFacts) -> list[Finding]:
    if not facts.usable("root"):
        return []
    found = _problems_of(facts, "listeners")
    names = _names(facts)
    for address, pids in sorted(facts.listening.items()):
        if len(pids) < 2:
            continue
        listed = ", ".join(map(str, pids))
        text = (
            f"{_who(names, address)} has {len(pids)} listeners (pids {listed}): its mail is "
            "split between them, each message entering one of them"
        )
        fix = (
            "if that is not on purpose (pi-post listen --also), stop all but one: "
            f"kill {' '.join(map(str, pids[1:]))}"
        )
        found.append(Finding("listeners-several", ATTENTION, text, fix, address))
    if found:
        return found
    running = sum(len(pids) for pids in facts.listening.values())
    return [
        Finding(
            "listeners-ok",
            OK,
            f"{_plural(running, 'listener')} running; no session has more than one",
        )
    ]


def check_contract(facts: PostOfficeFacts) -> list[Finding]:
    wire = facts.contract
    said = f"message schema v{wire.version}, fingerprint {wire.fingerprint}"
    if wire.matches_pin:
        return [Finding("contract-ok", OK, f"the wire contract is {said}, as pinned")]
    return [
        Finding(
            "contract-mismatch",
            ATTENTION,
            f"the wire contract this pipost speaks is not pinned; the newest pin it ships "
            f"is {said}: this installation may not speak pi-post v{wire.version}",
            "pi-post contract shows what changed; reinstall pipost",
        )
    ]


CHECKS: tuple[Callable[[PostOfficeFacts], list[Finding]], ...] = (
    check_root,
    check_registry,
    check_inbox,
    check_kernel_watch,
    check_start_times,
    check_temporaries,
    check_quarantine,
    check_drop_log,
    check_records,
    check_mailboxes,
    check_listeners,
    check_contract,
)


def diagnose(facts: PostOfficeFacts) -> list[Finding]:
    return [finding for check in CHECKS for finding in check(facts)]


def healthy(findings: Sequence[Finding]) -> bool:
    return all(finding.severity == OK for finding in findings)


def report(findings: Sequence[Finding]) -> list[str]:
    """One line per finding, its fix on the same line, then a summary."""
    lines = []
    for finding in findings:
        fix = f" — fix: {finding.fix}" if finding.fix else ""
        line = f"{finding.severity:<{len(ATTENTION)}} {finding.code}: {finding.text}{fix}"
        lines.append(format.visible(line))
    attention = sum(1 for finding in findings if finding.severity != OK)
    if attention:
        lines.append(
            f"{_plural(attention, 'finding')} {'needs' if attention == 1 else 'need'} attention"
        )
    else:
        lines.append("healthy: nothing needs attention")
    return lines


def _names(facts: PostOfficeFacts) -> dict[str, str]:
    return {session.record.address: session.record.name for session in facts.sessions}


def _who(names: dict[str, str], address: str) -> str:
    """A session by its name and address; a mailbox no record names by its address."""
    return f"{names[address]} ({address})" if address in names else address


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _size(size: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return _plural(size, "byte")


# -- gathering the facts (I/O that only reads) --------------------------------------


def survey(root: StrPath, now: int, processes: ProcessTable) -> PostOfficeFacts:
    """Look at the post office under ``root``, the machine and the contract, changing
    nothing (INV-16). A folder pipost would refuse is noted, never entered."""
    path = files.root_path(root)
    seen = _Survey(path, now, processes)
    top = seen.open(None, path, "root")
    if top is not None:
        with top:
            seen.descend(top)
    return PostOfficeFacts(
        root=path,
        uid=seen.uid,
        now=now,
        linux=sys.platform.startswith("linux"),
        folders=tuple(seen.folders),
        kernel_watch=_kernel_watch(path if top is not None else _nearest_folder(path)),
        start_times=bool(processes.start_token(os.getpid())),
        contract=wire_contract(PINS_FILE),
        sessions=tuple(seen.sessions),
        queued=seen.queued,
        temporaries=tuple(seen.temporaries),
        quarantined=seen.quarantined,
        drop_log=seen.drop_log,
        listening=seen.listening,
    )


PINS_FILE: Final = os.path.join(os.path.dirname(__file__), "contract", "pins.json")


def wire_contract(pins_file: str) -> ContractFacts:
    """The wire contract as the pins shipped with pipost record it. The contract gate
    (``pi-post contract``, docs/contract.md) holds the code to those pins before a
    release; the doctor reads them and runs none of it."""
    with open(pins_file, "rb") as file:
        text = file.read()
    try:
        revisions = json.loads(text)["message"]
        pinned = max(int(version) for version in revisions if int(version) <= message.VERSION)
        fingerprint = revisions[str(pinned)][-1]["fingerprint"]
        if not isinstance(fingerprint, str):
            raise TypeError(fingerprint)
    except (ValueError, LookupError, TypeError):
        raise OSError(
            errno.EINVAL, "no pin of the wire contract here: reinstall pipost", pins_file
        ) from None
    return ContractFacts(pinned, fingerprint, pinned == message.VERSION)


class _Survey:
    def __init__(self, root: str, now: int, processes: ProcessTable) -> None:
        self.root = root
        self.now = now
        self.processes = processes
        self.uid = os.geteuid()
        self.folders: list[FolderFacts] = []
        self.sessions: list[SessionFacts] = []
        self.queued: dict[str, int] = {}
        self.temporaries: list[Temporary] = []
        self.quarantined: dict[str, int] = {}
        self.drop_log = (0, 0)
        self.listening: dict[str, tuple[int, ...]] = {}

    def open(
        self, parent: Folder | None, name: str, role: str, address: str | None = None
    ) -> Folder | None:
        """Note what stands at ``name``; the folder, opened, when pipost can use it."""
        path = name if parent is None else parent.name(name)
        try:
            info = os.lstat(path) if parent is None else parent.lstat(name)
        except FileNotFoundError:
            self.folders.append(FolderFacts(role, path, "missing", address=address))
            return None
        except OSError as error:
            self.folders.append(
                FolderFacts(role, path, "unreadable", error=_why(error), address=address)
            )
            return None
        kind = "folder"
        if stat.S_ISLNK(info.st_mode):
            kind = "symlink"
        elif not stat.S_ISDIR(info.st_mode):
            kind = "not-folder"
        seen = FolderFacts(role, path, kind, info.st_uid, stat.S_IMODE(info.st_mode), None, address)
        opened = None
        if kind == "folder" and files.privacy_fault(info.st_uid, info.st_mode, self.uid) is None:
            try:
                opened = files.open_root(path) if parent is None else parent.child(name)
                if opened is None:
                    seen = seen.replace(kind="missing")  # removed since lstat saw it
            except OSError as error:
                seen = seen.replace(kind="unreadable", error=_why(error))
        self.folders.append(seen)
        return opened

    @contextlib.contextmanager
    def reading(self, folder: Folder) -> Iterator[Folder]:
        """Read inside ``folder``, closed after; a failure marks it unreadable."""
        noted = len(self.folders) - 1
        try:
            with folder:
                yield folder
        except OSError as error:
            self.folders[noted] = self.folders[noted].replace(kind="unreadable", error=_why(error))

    def descend(self, top: Folder) -> None:
        found = self.open(top, "registry", "registry")
        if found is not None:
            with self.reading(found) as folder:
                for record in registry.records_in(folder):
                    self.sessions.append(self._session(record))
                self.temporaries += self._others(folder)
        found = self.open(top, "inbox", "inbox")
        if found is not None:
            with self.reading(found) as inbox:
                for address in sorted(name for name in inbox.names() if is_address(name)):
                    box = self.open(inbox, address, "mailbox", address)
                    if box is not None:
                        with self.reading(box) as folder:
                            self.queued[address] = len(mailbox.letters_in(folder))
                            self.temporaries += self._others(folder)
        found = self.open(top, "quarantine", "quarantine")
        if found is not None:
            with self.reading(found) as folder:
                for entry in quarantine.quarantined_in(folder):
                    self.quarantined[entry.address] = self.quarantined.get(entry.address, 0) + 1
        found = self.open(top, "log", "log")
        if found is not None:
            with self.reading(found) as folder:
                self.drop_log = (_size_of(folder, LOG_NAME), _size_of(folder, ROTATED_NAME))
        found = self.open(top, "listeners", "listeners")
        if found is not None:
            with self.reading(found) as folder:
                for address in sorted(name for name in folder.names() if is_address(name)):
                    try:
                        pids = listeners.running(self.root, address)
                    except OSError:  # a symlink or a stranger's folder: not entered
                        continue
                    if pids:
                        self.listening[address] = tuple(pids)

    def _session(self, record: Record) -> SessionFacts:
        token = None if record.pid is None else self.processes.start_token(record.pid)
        return SessionFacts(record, presence(record, self.now, self.processes), token)

    def _others(self, folder: Folder) -> list[Temporary]:
        """The files of a folder that are neither letters nor records, with their age."""
        found = []
        for name in folder.names():
            if mailbox.is_letter_name(name):
                continue
            try:
                info = folder.lstat(name)
            except FileNotFoundError:  # renamed into place or removed meanwhile
                continue
            if not stat.S_ISDIR(info.st_mode):
                age = self.now - info.st_mtime_ns // 1_000_000
                found.append(Temporary(folder.name(name), name, age))
        return found


def _size_of(folder: Folder, name: str) -> int:
    try:
        return folder.lstat(name).st_size
    except FileNotFoundError:
        return 0


def _why(error: OSError) -> str:
    where = f" ({format.visible(str(error.filename))})" if error.filename else ""
    return f"{error.strerror or error}{where}"


def _kernel_watch(folder: str) -> bool:
    probe = watch.FolderWatch(folder)
    try:
        return probe.uses_kernel_events
    finally:
        probe.close()


def _nearest_folder(path: str) -> str:
    """The closest existing real folder at or above ``path``, to probe the kernel with."""
    probe = os.path.abspath(path)
    while os.path.islink(probe) or not os.path.isdir(probe):
        probe = os.path.dirname(probe)
    return probe
