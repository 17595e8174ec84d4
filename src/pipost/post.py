"""The post office: one root folder, a clock and a process table, and the
operations every front end shares (the CLI, the receiving session, the driver the
specification talks to). Decisions live in the pure modules; this wires them to
the disk.
"""

from __future__ import annotations

import os
import time

from pipost import files, format, mailbox, registry
from pipost.message import BodyError, EnvelopeError, new_message, restamped
from pipost.refusals import BadEnvelope, MailboxFull, Refusal
from pipost.registry import OsProcessTable
from pipost.resolve import Caller, Target, resolve, resolve_all
from pipost.session import Candidate, Presence, listing_order, presence
from pipost.value import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Final, Self

    from pipost.files import StrPath
    from pipost.message import Message, Sender
    from pipost.session import ProcessTable, Record
    from pipost.sweep import SweepReport

RECEIPT_WAIT_S = 1.5
"""How long a sender waits for a live target to take the message."""


def default_root(environ: Mapping[str, str]) -> str:
    """The post office every command uses: ``$PI_POST_DIR`` (``~`` expanded against
    HOME), else ``~/.pi/agent/post``. A relative PI_POST_DIR is refused: it would
    name a different post office in every working directory."""
    configured = environ.get("PI_POST_DIR")
    if not configured:
        return os.path.join(home_of(environ), ".pi", "agent", "post")
    if configured == "~" or configured.startswith("~/"):
        configured = home_of(environ) + configured[1:]
    if not os.path.isabs(configured):
        raise Refused(
            f"PI_POST_DIR must be an absolute path or start with ~/, not "
            f"{format.visible(configured)!r} (a relative one names another post office "
            "in every directory)"
        )
    return configured


def home_of(environ: Mapping[str, str]) -> str:
    """The home that ``~`` means, in paths and in handles alike."""
    return environ.get("HOME") or os.path.expanduser("~")


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Refused(Exception):
    """A send or lookup that must not go ahead. ``reason`` is the refusal as data
    (its kind and facts) where resolution, the body or a mailbox refused, else the
    text of a front end's own refusal (a setting, a driver argument); ``str()`` is
    the text for the user either way."""

    def __init__(self, reason: Refusal | str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        return self.reason if isinstance(self.reason, str) else format.refusal(self.reason)


class Receipt(Value):
    __slots__ = ("address", "message_id", "delivered")
    address: Final[str]
    message_id: Final[str]
    delivered: Final[bool]

    def __init__(self, address: str, message_id: str, delivered: bool) -> None:
        self.address = address
        self.message_id = message_id
        self.delivered = delivered


class Post:
    def __init__(
        self,
        root: StrPath,
        clock: Callable[[], int] = wall_clock_ms,
        processes: ProcessTable | None = None,
        receipt_wait: float = RECEIPT_WAIT_S,
    ) -> None:
        self.root = root
        self.clock = clock
        self.processes: ProcessTable = OsProcessTable() if processes is None else processes
        self.receipt_wait = receipt_wait

    # -- reading (no side effects: INV-16) ----------------------------------------

    def _candidate(self, record: Record, now: int, queued: int) -> Candidate:
        return Candidate(
            record=record, presence=presence(record, now, self.processes), queued=queued
        )

    def directory(self, *, count_mailboxes: bool = True) -> DiskDirectory:
        """The root opened once for one operation's reads (a ``with`` block)."""
        return DiskDirectory(self, self.clock(), count_mailboxes=count_mailboxes)

    def sessions(self) -> list[Candidate]:
        with self.directory() as directory:
            return list(directory.candidates())

    def resolve(self, handle: str, caller: Caller) -> Target:
        with self.directory() as directory:
            return directory.resolve(handle, caller)

    def peek(self, address: str) -> list[mailbox.Letter]:
        with self.directory() as directory:
            return directory.peek(address)

    # -- sending ------------------------------------------------------------------

    def send(
        self,
        handles: Sequence[str],
        body: str,
        sender: Sender,
        caller: Caller,
        reply_to: str | None = None,
        on_deposit: Callable[[Receipt], None] | None = None,
    ) -> list[Receipt]:
        """Check the body and the envelope once, then resolve every target (a refusal
        writes nothing), deposit one copy per target, then wait for the live ones to
        take theirs. The root is opened once for all of it, and each mailbox is
        counted once, under the deposit's lock (DESIGN §4)."""
        try:
            checked = new_message(sender, body, self.clock(), reply_to=reply_to)
        except BodyError as refused:
            raise Refused(refused.refusal) from None
        except EnvelopeError as error:  # the envelope's rules, naming the field
            raise Refused(BadEnvelope(error.field, str(error))) from None
        # Resolving by address reads presence alone: the count that matters is the
        # deposit's, under the mailbox's lock.
        with DiskDirectory(self, self.clock(), count_mailboxes=False) as directory:
            targets = resolve_all(handles, directory, caller)
            if isinstance(targets, Refusal):
                raise Refused(targets)
            top = directory.top
            assert top is not None, "a target resolved, so the post office exists"
            _refuse_a_full_mailbox(top, targets)
            deposited: list[tuple[Target, Message, str]] = []
            for target in targets:
                message = restamped(checked, self.clock())
                try:
                    path = mailbox.deposit(top, target.address, message)
                except (mailbox.MailboxAtCap, mailbox.DepositFailed) as failed:
                    # filled by a racing sender meanwhile, or a folder that cannot be written
                    sent = tuple((t.address, m.id) for t, m, _ in deposited)
                    raise Refused(failed.refusal.replace(already_queued=sent)) from None
                deposited.append((target, message, path))
        receipts = []
        deadline = time.monotonic() + self.receipt_wait
        for target, message, path in deposited:
            live = target.candidate is not None and target.candidate.presence is Presence.LIVE
            delivered = live and mailbox.wait_consumed(path, max(0.0, deadline - time.monotonic()))
            receipt = Receipt(target.address, message.id, delivered)
            if on_deposit is not None:
                on_deposit(receipt)
            receipts.append(receipt)
        return receipts

    # -- tidying ------------------------------------------------------------------

    def sweep(self) -> SweepReport:
        from pipost import sweep  # here, not at the top: a send never sweeps

        if not files.check_root(self.root):
            return sweep.SweepReport((), ())
        return sweep.sweep(self.root, self.clock(), self.processes)


def _refuse_a_full_mailbox(top: files.Folder, targets: Sequence[Target]) -> None:
    """All or nothing: before the first letter is written, refuse a send one of whose
    mailboxes is full. The first target is not counted here: the deposit counts it
    under its lock before anything is written, and that count refuses it. The
    others are counted once each, as a racing sender could fill one after the first
    letter went in (the locked count then refuses it, naming what was queued). Only
    when one is full is the first counted too, so that the refusal names the first
    full mailbox in the order given."""
    queued = {target.address: mailbox.count_in(top, target.address) for target in targets[1:]}
    if all(count < mailbox.CAP for count in queued.values()):
        return
    queued[targets[0].address] = mailbox.count_in(top, targets[0].address)
    full = next(target.address for target in targets if queued[target.address] >= mailbox.CAP)
    raise Refused(MailboxFull(full, queued[full], mailbox.CAP))


class DiskDirectory:
    """resolve.Directory over the registry and inbox folders of the root, opened once
    (refusing an unsafe one) for a ``with`` block; read lazily so that resolving an
    address reads one record, not the registry.

    ``count_mailboxes=False`` (a send) leaves a session found by its address
    uncounted (queued 0): only its presence is read, and the count that matters is
    the deposit's."""

    def __init__(self, post: Post, now: int, *, count_mailboxes: bool) -> None:
        self.post = post
        self.now = now
        self.count_mailboxes = count_mailboxes
        self.top = files.open_root(post.root)
        """The open root; None when there is no post office yet."""
        self._all: list[Candidate] | None = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.top is not None:
            self.top.close()

    def by_address(self, address: str) -> Candidate | None:
        if self.top is None:
            return None
        record = registry.read_in(self.top, address)
        if record is None:
            return None
        return self.candidate(record)

    def candidate(self, record: Record) -> Candidate:
        """The session of ``record`` (one already read), its mailbox counted below
        the open root unless ``count_mailboxes`` is off."""
        queued = 0
        if self.count_mailboxes and self.top is not None:
            queued = _queued_in_root(self.top, record.address)
        return self.post._candidate(record, self.now, queued)

    def resolve(self, handle: str, caller: Caller) -> Target:
        outcome = resolve(handle, self, caller)
        if isinstance(outcome, Refusal):
            raise Refused(outcome)
        return outcome

    def peek(self, address: str) -> list[mailbox.Letter]:
        """Every letter queued for ``address``, read but not claimed (INV-16)."""
        return [] if self.top is None else mailbox.peek(self.top, address)

    def candidates(self) -> Sequence[Candidate]:
        if self._all is None:
            self._all = sorted(self._every_candidate(), key=listing_order)
        return self._all

    def _every_candidate(self) -> list[Candidate]:
        """Every registered session, the registry and inbox/ each opened once: inbox/
        is listed once, so a session without a mailbox folder costs no lookup of one."""
        if self.top is None:
            return []
        registry_folder = self.top.walk("registry")
        if registry_folder is None:
            return []
        with registry_folder:
            found = registry.records_in(registry_folder)
        try:
            inbox = self.top.walk("inbox")
        except files.UnsafePath:  # every mailbox is refused where it is used
            inbox = None
        if inbox is None:
            return [self.post._candidate(record, self.now, 0) for record in found]
        with inbox:
            mailboxes = set(inbox.names())
            return [
                self.post._candidate(
                    record,
                    self.now,
                    _queued_in(inbox, record.address) if record.address in mailboxes else 0,
                )
                for record in found
            ]

    def has_mailbox(self, address: str) -> bool:
        if self.top is None:
            return False
        try:
            folder = mailbox.inbox_in(self.top, address)
        except files.UnsafePath:
            return False
        if folder is None:
            return False
        folder.close()
        return True


def _queued_in_root(top: files.Folder, address: str) -> int:
    """One session's unsafe mailbox folder (a symlink) must not break a listing or a
    send to someone else: it counts as empty here, and is refused by whatever would
    read or write it."""
    try:
        return mailbox.count_in(top, address)
    except files.UnsafePath:
        return 0


def _queued_in(inbox: files.Folder, address: str) -> int:
    try:
        folder = inbox.child(address)
    except files.UnsafePath:
        return 0
    if folder is None:
        return 0
    with folder:
        return len(mailbox.letters_in(folder))


def os_caller(cwd: str | None, environ: Mapping[str, str]) -> Caller:
    return Caller(
        cwd=cwd or os.getcwd(),
        home=home_of(environ),
        canonical=os.path.realpath,  # resolve refuses what no folder can be named
    )
