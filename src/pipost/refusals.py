"""Refusals as data: why a lookup or a send does not go ahead (SPEC 4, 8; INV-08).

Each class is one kind of refusal and its fields are the facts; none of them holds
prose. Resolution, the body check, the mailboxes and the post office refuse with
these values, :func:`pipost.format.refusal` turns each kind into the text the
reference printed, and a front end that is not a terminal (the conformance
driver) can pass the kind and its facts on instead.

Beside each kind, as data, is what it is called on the driver protocol (SPEC 11):
its ``code``, the ``facts`` (the fields the protocol names, in its spelling: the
sessions of a refusal as their addresses) and its ``outcome`` — ``refused`` for a
refusal of the contract, ``failed`` for a file system that failed the operation.

Pure, and on the send path: plain :class:`~pipost.value.Value` classes.
"""

from __future__ import annotations

from pipost.value import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import ClassVar, Final

    from pipost.session import Candidate

    Queued = tuple[tuple[str, str], ...]
    """Copies of the refused send already deposited for other targets: (address, id)."""


class Refusal(Value):
    """One reason to refuse; each subclass is a kind."""

    __slots__ = ()
    code: ClassVar[str]
    """The kind's name on the driver protocol, snake_case."""
    facts: ClassVar[tuple[str, ...]] = ()
    """The fields the protocol passes on beside the code and the text."""
    outcome: ClassVar[str] = "refused"


# -- resolution (SPEC 4) ----------------------------------------------------------


class UnknownTarget(Refusal):
    """``handle`` is no address, session id, directory or name of a session;
    ``reachable`` are the sessions the refusal offers instead (live ones, else all)."""

    __slots__ = ("handle", "reachable")
    code = "unknown_target"
    facts = ("handle", "reachable")
    handle: Final[str]
    reachable: Final[tuple[Candidate, ...]]

    def __init__(self, handle: str, reachable: tuple[Candidate, ...]) -> None:
        self.handle = handle
        self.reachable = reachable


class NoSessionIn(Refusal):
    """The directory ``handle`` (``path`` once expanded and canonical) is the cwd
    of no registered session."""

    __slots__ = ("handle", "path", "reachable")
    code = "unknown_target"
    facts = ("handle", "path", "reachable")
    handle: Final[str]
    path: Final[str]
    reachable: Final[tuple[Candidate, ...]]

    def __init__(self, handle: str, path: str, reachable: tuple[Candidate, ...]) -> None:
        self.handle = handle
        self.path = path
        self.reachable = reachable


class Ambiguous(Refusal):
    """``handle`` matches every one of ``candidates`` equally well."""

    __slots__ = ("handle", "candidates")
    code = "ambiguous_target"
    facts = ("handle", "candidates")
    handle: Final[str]
    candidates: Final[tuple[Candidate, ...]]

    def __init__(self, handle: str, candidates: tuple[Candidate, ...]) -> None:
        self.handle = handle
        self.candidates = candidates


class UnknownAddress(Refusal):
    """No session registered ``address`` and it has no mailbox."""

    __slots__ = ("address",)
    code = "unknown_address"
    facts = ("address",)
    address: Final[str]

    def __init__(self, address: str) -> None:
        self.address = address


class NoTargets(Refusal):
    """A send that names no target."""

    __slots__ = ()
    code = "no_targets"


class TooManyTargets(Refusal):
    """``count`` targets named in one send, over the ``cap``."""

    __slots__ = ("count", "cap")
    code = "too_many_targets"
    facts = ("count", "cap")
    count: Final[int]
    cap: Final[int]

    def __init__(self, count: int, cap: int) -> None:
        self.count = count
        self.cap = cap


# -- the message (SPEC 1.2) -------------------------------------------------------


class EmptyBody(Refusal):
    """A body that is empty or only white space."""

    __slots__ = ()
    code = "empty_body"


class BodyNotText(Refusal):
    """A body holding unpaired surrogates (undecodable bytes): no UTF-8 spells it."""

    __slots__ = ()
    code = "body_not_text"


class BodyTooLarge(Refusal):
    """A body of ``size`` bytes of UTF-8, over the ``cap``; ``size`` is None for one
    read from a stream no further than one byte past the cap, where only "more than
    the cap" is known."""

    __slots__ = ("size", "cap")
    code = "body_too_large"
    facts = ("size", "cap")
    size: Final[int | None]
    cap: Final[int]

    def __init__(self, size: int | None, cap: int) -> None:
        self.size = size
        self.cap = cap


class BadEnvelope(Refusal):
    """A sender or reply address that the message rules refuse: ``field`` names the
    field (dotted: ``from.name``), ``problem`` is the rule's own reason, as the
    parser gives it for a letter on disk."""

    __slots__ = ("field", "problem")
    code = "bad_envelope"
    facts = ("field",)
    field: Final[str]
    problem: Final[str]

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem


# -- the mailboxes (SPEC 3) -------------------------------------------------------


class MailboxFull(Refusal):
    """The mailbox of ``address`` holds ``queued`` letters, the ``cap``."""

    __slots__ = ("address", "queued", "cap", "already_queued")
    code = "mailbox_full"
    facts = ("address", "queued", "cap")
    address: Final[str]
    queued: Final[int]
    cap: Final[int]
    already_queued: Final[Queued]

    def __init__(self, address: str, queued: int, cap: int, already_queued: Queued = ()) -> None:
        self.address = address
        self.queued = queued
        self.cap = cap
        self.already_queued = already_queued


class CannotWrite(Refusal):
    """The file system would not let a letter into the mailbox of ``address``
    (its ``folder``), for ``reason`` (the system's words: "Permission denied")."""

    __slots__ = ("address", "folder", "reason", "already_queued")
    code = "cannot_write"
    facts = ("address",)
    outcome = "failed"
    address: Final[str]
    folder: Final[str]
    reason: Final[str]
    already_queued: Final[Queued]

    def __init__(self, address: str, folder: str, reason: str, already_queued: Queued = ()) -> None:
        self.address = address
        self.folder = folder
        self.reason = reason
        self.already_queued = already_queued


# -- the driver's world (SPEC 11) ---------------------------------------------------
# What the conformance driver refuses of the world a scenario keeps: its fake
# processes and the sessions' records.


class PidRunning(Refusal):
    """A process was to start with ``pid``, which a running process has."""

    __slots__ = ("pid",)
    code = "pid_running"
    facts = ("pid",)
    pid: Final[int]

    def __init__(self, pid: int) -> None:
        self.pid = pid


class NoProcess(Refusal):
    """No running process has ``pid``."""

    __slots__ = ("pid",)
    code = "no_process"
    facts = ("pid",)
    pid: Final[int]

    def __init__(self, pid: int) -> None:
        self.pid = pid


class NoRecord(Refusal):
    """The session ``session_id`` has no record to refresh or to mark offline."""

    __slots__ = ("session_id",)
    code = "no_record"
    facts = ("session_id",)
    session_id: Final[str]

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id


class MalformedAddress(Refusal):
    """``address`` is not an address: no path is built from it (INV-22)."""

    __slots__ = ("address",)
    code = "malformed_address"
    facts = ("address",)
    address: Final[str]

    def __init__(self, address: str) -> None:
        self.address = address
