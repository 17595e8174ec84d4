"""The sweep (SPEC 5; INV-17): it removes what the rules of
:mod:`pipost.session` allow and nothing else — records of sessions offline for
over 7 days with nothing queued, empty mailbox folders no record names, and
before those the temporaries that writers which died left behind.

A first look at the registry only picks the records worth a closer one: each is
read again and judged once the mailbox's lock is held, since the session may have
started meanwhile; a starting listener registers under that same lock
(host.Host.start), so none registers between that reading and the unlink.
Neither a record nor a mailbox of a session whose listener runs (listeners.py) is
ever removed, whatever the record says or whether there is one: a listener that
could not write its record still receives (INV-23).
"""

from __future__ import annotations

import stat

from pipost import files, listeners
from pipost.address import is_address
from pipost.registry import read_named, record_name, records_in
from pipost.session import (
    Presence,
    mailbox_is_sweepable,
    presence,
    record_is_sweepable,
    temporary_is_sweepable,
)
from pipost.value import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

    from pipost.files import Folder, StrPath
    from pipost.session import ProcessTable


class SweepReport(Value):
    __slots__ = ("records_removed", "mailboxes_removed", "temporaries_removed")
    records_removed: Final[tuple[str, ...]]
    mailboxes_removed: Final[tuple[str, ...]]
    temporaries_removed: Final[tuple[str, ...]]
    """Stale temporaries, as paths below the root: ``inbox/<address>/<name>`` or
    ``registry/<name>``."""

    def __init__(
        self,
        records_removed: tuple[str, ...],
        mailboxes_removed: tuple[str, ...],
        temporaries_removed: tuple[str, ...] = (),
    ) -> None:
        self.records_removed = records_removed
        self.mailboxes_removed = mailboxes_removed
        self.temporaries_removed = temporaries_removed


def sweep(root: StrPath, now: int, processes: ProcessTable) -> SweepReport:
    """Remove what SPEC 5 allows and nothing else. Each decision is taken under the
    mailbox's lock, so a deposit racing the sweep is never lost (INV-17). Stale
    temporaries go first, so that one left by a writer that died keeps nothing."""
    top = files.open_root(root)
    if top is None:
        return SweepReport((), ())
    with top:
        registry = top.walk("registry")
        inbox = top.walk("inbox")
        stale: list[str] = []
        try:
            if registry is not None:
                stale += _remove_stale_temporaries(registry, "registry", now)
            removed_records = _sweep_records(top, registry, inbox, now, processes, stale)
            removed_mailboxes = _sweep_mailboxes(top, registry, inbox, now, stale)
        finally:
            for folder in (registry, inbox):
                if folder is not None:
                    folder.close()
    return SweepReport(tuple(removed_records), tuple(removed_mailboxes), tuple(stale))


def _remove_stale_temporaries(folder: Folder, where: str, now: int) -> list[str]:
    """Unlink the temporaries in ``folder`` that writers which died left behind,
    their age taken from their mtime; returns them as ``where/<name>``. The caller
    holds the lock that the folder's writers take, where they take one."""
    removed: list[str] = []
    for name in sorted(folder.names()):
        try:
            info = folder.lstat(name)
        except FileNotFoundError:
            continue
        age_ms = now - info.st_mtime_ns // 1_000_000
        # Only a plain file: a link or a folder named like one is not a writer's.
        if stat.S_ISREG(info.st_mode) and temporary_is_sweepable(name, age_ms):
            try:
                folder.unlink(name)
            except FileNotFoundError:
                continue
            removed.append(f"{where}/{name}")
    if removed:
        folder.flush()
    return removed


def _sweep_records(
    top: Folder,
    registry: Folder | None,
    inbox: Folder | None,
    now: int,
    processes: ProcessTable,
    stale: list[str],
) -> list[str]:
    removed: list[str] = []
    if registry is None:
        return removed
    for record in records_in(registry):
        state = presence(record, now, processes)
        if state is not Presence.OFFLINE:
            continue
        if not record_is_sweepable(state, record.last_seen, now, 0, False):
            continue  # seen within 7 days at the first look: no closer one needed
        with _MailboxHeld(inbox, record.address, now, stale) as held:
            # Read again under the lock: the session may have started since.
            current = read_named(registry, record_name(record.address))
            if current is None:
                continue
            state = presence(current, now, processes)
            receiving = _listening(top, record.address)
            if record_is_sweepable(state, current.last_seen, now, held, receiving):
                registry.unlink(record_name(record.address))
                removed.append(record.address)
    if removed:
        registry.flush()
    return removed


def _sweep_mailboxes(
    top: Folder, registry: Folder | None, inbox: Folder | None, now: int, stale: list[str]
) -> list[str]:
    removed: list[str] = []
    if inbox is None:
        return removed
    for address in sorted(name for name in inbox.names() if is_address(name)):
        with _MailboxHeld(inbox, address, now, stale) as entries:
            # Asked of an empty folder alone, each only if the answer before it was no.
            recorded = entries == 0 and _recorded(registry, address)
            receiving = entries == 0 and not recorded and _listening(top, address)
            if mailbox_is_sweepable(recorded, entries, receiving) and inbox.remove_empty(address):
                removed.append(address)
    if removed:
        inbox.flush()
    return removed


def _recorded(registry: Folder | None, address: str) -> bool:
    """Whether a readable record names ``address`` now."""
    return registry is not None and read_named(registry, record_name(address)) is not None


def _listening(top: Folder, address: str) -> bool:
    """Whether a listener of ``address`` runs (its file in listeners/ is locked); a
    folder of listeners that cannot be read is taken for one that runs: the sweep
    keeps what it cannot judge."""
    try:
        return bool(listeners.running_below(top, address))
    except OSError:
        return True


class _MailboxHeld:
    """A mailbox's lock while the sweep decides, entering with how many entries the
    folder holds once its stale temporaries are removed (added to ``stale``); a
    mailbox that is absent (or was just removed) holds none and has nothing to lock."""

    def __init__(self, inbox: Folder | None, address: str, now: int, stale: list[str]) -> None:
        self._folder = None if inbox is None else inbox.child(address)
        self._where = f"inbox/{address}"
        self._now = now
        self._stale = stale

    def __enter__(self) -> int:
        if self._folder is None:
            return 0
        try:
            self._folder.lock().__enter__()
        except files.Vanished:
            return 0
        except BaseException:  # a holder past the bound (LockTimeout): the sweep stops
            self._folder.close()
            raise
        self._stale += _remove_stale_temporaries(self._folder, self._where, self._now)
        return len(self._folder.names())

    def __exit__(self, *exc_info: object) -> None:
        if self._folder is not None:
            self._folder.close()  # closing releases the lock
