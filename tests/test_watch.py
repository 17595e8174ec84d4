"""The folder watch: a letter renamed into the mailbox ends the wait at once (kernel
events: inotify on Linux, kqueue on macOS and the BSDs), wake() ends it from
anywhere, and without events only the timeout does, which is why the host polls as
well (SPEC 3; INV-23).

Each test that needs kernel events runs twice: with this system's watch, and with
kqueue, which on Linux is the double below (DESIGN §14 says what it cannot show).

No timing is asserted: each wait runs in a thread with a timeout far longer than
the test may take, and the test asserts that the thread has finished.
"""

from __future__ import annotations

import ctypes
import os
import select
import stat
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from pipost import watch
from pipost.watch import FolderWatch
from tests.helpers import open_descriptors

NEVER_S = 30.0
"""A wait this long would outlast the test: a wait that ended was ended by something."""
JOIN_S = 10.0


# -- kqueue where the system has none: a double on inotify ------------------------------

KQUEUE_CONSTANTS = {
    "KQ_FILTER_VNODE": -4,
    "KQ_EV_ADD": 0x0001,
    "KQ_EV_CLEAR": 0x0020,
    "KQ_NOTE_DELETE": 0x0001,
    "KQ_NOTE_WRITE": 0x0002,
    "KQ_NOTE_RENAME": 0x0020,
}
"""select's names for macOS's <sys/event.h> values."""

IN_NONBLOCK_CLOEXEC = 0o4000 | 0o2000000
NOTES_AS_INOTIFY = {
    0x0002: 0x100 | 0x200 | 0x40 | 0x80,  # NOTE_WRITE: IN_CREATE, DELETE, MOVED_FROM, MOVED_TO
    0x0001: 0x400,  # NOTE_DELETE: IN_DELETE_SELF
    0x0020: 0x800,  # NOTE_RENAME: IN_MOVE_SELF
}
"""What a folder's vnode notes are on Linux: NOTE_WRITE is any change of its entries."""


@dataclass(frozen=True)
class Kevent:
    """select.kevent: the fields pipost fills in."""

    ident: int
    filter: int
    flags: int
    fflags: int


class KqueueOnInotify:
    """select.kqueue() as macOS gives it, for what a kqueue watch asks of it: vnode
    events on a folder descriptor, edge-triggered (EV_CLEAR), the queue readable
    while one waits. inotify, on the folder the descriptor names, stands in for the
    kernel, so real renames and unlinks fire the events. Anything else pipost might
    ask is refused, so a watch that asks it fails its test."""

    made: ClassVar[list[KqueueOnInotify]] = []

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._fd = int(self._libc.inotify_init1(IN_NONBLOCK_CLOEXEC))
        assert self._fd >= 0
        self._events: list[Kevent] = []
        self.closed = False
        KqueueOnInotify.made.append(self)

    def fileno(self) -> int:
        return self._fd

    def control(self, changes: list[Kevent] | None, max_events: int, timeout: Any = None) -> Any:
        for change in changes or []:
            self._add(change)
        if max_events == 0:
            return []
        if timeout is None or timeout > 0:
            select.select([self._fd], [], [], timeout)
        try:
            fired = len(os.read(self._fd, 65536)) > 0
        except BlockingIOError:
            fired = False
        # One event per registration at most, as kqueue folds a knote's changes; its
        # notes are the ones asked for (a watch reads none of them).
        return self._events[:max_events] if fired else []

    def _add(self, change: Kevent) -> None:
        assert change.filter == KQUEUE_CONSTANTS["KQ_FILTER_VNODE"], change
        add, clear = KQUEUE_CONSTANTS["KQ_EV_ADD"], KQUEUE_CONSTANTS["KQ_EV_CLEAR"]
        assert change.flags == add | clear, "only edge-triggered additions are modelled"
        assert stat.S_ISDIR(os.fstat(change.ident).st_mode), "only folders are watched"
        mask = 0
        for note, inotify_mask in NOTES_AS_INOTIFY.items():
            if change.fflags & note:
                mask |= inotify_mask
        assert mask and not change.fflags & ~sum(NOTES_AS_INOTIFY), change
        folder = os.readlink(f"/proc/self/fd/{change.ident}")
        assert self._libc.inotify_add_watch(self._fd, os.fsencode(folder), mask) >= 0
        self._events.append(change)

    def close(self) -> None:
        if not self.closed:
            os.close(self._fd)
        self.closed = True


@pytest.fixture(params=["this system's watch", "kqueue"])
def kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Which kernel watch the test drives: kqueue is the double where the system has none."""
    double = request.param == "kqueue" and not hasattr(select, "kqueue")
    if double:
        monkeypatch.setattr(KqueueOnInotify, "made", [])
        monkeypatch.setattr(select, "kqueue", KqueueOnInotify, raising=False)
        monkeypatch.setattr(select, "kevent", Kevent, raising=False)
        for name, value in KQUEUE_CONSTANTS.items():
            monkeypatch.setattr(select, name, value, raising=False)
    yield str(request.param)
    if double:
        assert KqueueOnInotify.made, "the watch never asked for a kqueue"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    return inbox


@pytest.fixture
def watches() -> Iterator[list[FolderWatch]]:
    made: list[FolderWatch] = []
    yield made
    for made_watch in made:
        made_watch.wake()  # a waiting thread must not outlive its test
        made_watch.close()


def waiting(watch: FolderWatch) -> threading.Thread:
    thread = threading.Thread(target=watch.wait, args=(NEVER_S,), daemon=True)
    thread.start()
    return thread


def deposit_by_rename(folder: Path, name: str) -> None:
    """As a sender does: write beside the folder, then rename in."""
    temporary = folder.parent / (name + ".tmp")
    temporary.write_text("{}")
    os.rename(temporary, folder / name)


def test_a_letter_renamed_into_the_folder_ends_the_wait(
    kernel: str, folder: Path, watches: list[FolderWatch]
) -> None:
    watch = FolderWatch(folder)
    watches.append(watch)
    assert watch.uses_kernel_events

    thread = waiting(watch)
    deposit_by_rename(folder, "0001796078534257-00000001.json")
    thread.join(JOIN_S)

    assert not thread.is_alive()


def test_an_event_before_the_wait_is_not_missed(
    kernel: str, folder: Path, watches: list[FolderWatch]
) -> None:
    watch = FolderWatch(folder)
    watches.append(watch)
    deposit_by_rename(folder, "0001796078534257-00000002.json")

    thread = waiting(watch)
    thread.join(JOIN_S)

    assert not thread.is_alive()


def test_a_file_written_in_place_ends_the_wait(
    kernel: str, folder: Path, watches: list[FolderWatch]
) -> None:
    watch = FolderWatch(folder)
    watches.append(watch)

    thread = waiting(watch)
    (folder / "0001796078534257-00000003.json.tmp").write_text("{}")
    thread.join(JOIN_S)

    assert not thread.is_alive()


def test_an_event_is_consumed_by_the_wait_that_saw_it(
    kernel: str, folder: Path, watches: list[FolderWatch]
) -> None:
    watch = FolderWatch(folder)
    watches.append(watch)
    deposit_by_rename(folder, "0001796078534257-00000004.json")
    watch.wait(NEVER_S)  # returns at once: the event is queued

    thread = waiting(watch)
    thread.join(0.3)
    assert thread.is_alive()  # nothing new: this wait goes on
    watch.wake()
    thread.join(JOIN_S)
    assert not thread.is_alive()


def test_wake_ends_the_wait(kernel: str, folder: Path, watches: list[FolderWatch]) -> None:
    watch = FolderWatch(folder)
    watches.append(watch)
    assert watch.uses_kernel_events

    thread = waiting(watch)
    watch.wake()
    thread.join(JOIN_S)

    assert not thread.is_alive()


def test_without_kernel_events_a_letter_does_not_end_the_wait(
    folder: Path, watches: list[FolderWatch]
) -> None:
    watch = FolderWatch(folder, kernel_events=False)
    watches.append(watch)

    thread = waiting(watch)
    deposit_by_rename(folder, "0001796078534257-00000005.json")
    thread.join(0.3)

    # Only the host's poll would find this letter: the reason it polls (INV-23).
    assert thread.is_alive()
    watch.wake()
    thread.join(JOIN_S)
    assert not thread.is_alive()


def test_a_short_timeout_ends_a_wait_that_nothing_else_ends(
    kernel: str, folder: Path, watches: list[FolderWatch]
) -> None:
    watch = FolderWatch(folder)
    watches.append(watch)

    thread = threading.Thread(target=watch.wait, args=(0.05,), daemon=True)
    thread.start()
    thread.join(JOIN_S)

    assert not thread.is_alive()


def test_many_wakes_never_block_the_waker(folder: Path, watches: list[FolderWatch]) -> None:
    # wake() runs in signal handlers: a full pipe must not block or raise.
    watch = FolderWatch(folder, kernel_events=False)
    watches.append(watch)
    for _ in range(100_000):
        watch.wake()

    thread = waiting(watch)
    thread.join(JOIN_S)
    assert not thread.is_alive()


# -- waiting for a receipt: the letter's removal -------------------------------------------


def wait_gone_while_removed(folder: Path) -> list[bool]:
    """What wait_gone said when the letter it waits on was removed under it."""
    letter = folder / "0000000000001-00000000.json"
    letter.write_bytes(b"{}")
    started = threading.Event()
    outcome: list[bool] = []

    def wait() -> None:
        started.set()
        outcome.append(watch.wait_gone(letter, NEVER_S))

    waiter = threading.Thread(target=wait)
    waiter.start()
    started.wait(JOIN_S)
    os.unlink(letter)
    waiter.join(JOIN_S)
    assert not waiter.is_alive()
    return outcome


def test_wait_gone_returns_when_the_letter_is_removed(kernel: str, folder: Path) -> None:
    assert wait_gone_while_removed(folder) == [True]


def test_wait_gone_polls_where_the_kernel_cannot_tell(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watch, "_kernel_watch", lambda folder, mask, notes: None)
    assert wait_gone_while_removed(folder) == [True]


def test_wait_gone_reports_a_letter_that_stays(kernel: str, folder: Path) -> None:
    letter = folder / "0000000000001-00000000.json"
    letter.write_bytes(b"{}")
    assert watch.wait_gone(letter, 0.05) is False
    assert watch.wait_gone(folder / "never-there.json", NEVER_S) is True


# -- kqueue's own descriptors --------------------------------------------------------------


@pytest.mark.parametrize("kernel", ["kqueue"], indirect=True)
def test_a_kqueue_watch_leaves_no_descriptor_open(kernel: str, folder: Path) -> None:
    before = open_descriptors()
    made = FolderWatch(folder)
    assert made.uses_kernel_events
    made.close()
    assert watch.wait_gone(folder / "0000000000001-00000000.json", NEVER_S)
    assert open_descriptors() == before


@pytest.mark.parametrize("kernel", ["kqueue"], indirect=True)
def test_a_kqueue_watch_is_not_set_through_a_symlink(
    kernel: str, folder: Path, tmp_path: Path
) -> None:
    link = tmp_path / "link"
    link.symlink_to(folder)
    watched, through_link = FolderWatch(folder), FolderWatch(link)
    try:
        assert watched.uses_kernel_events
        assert not through_link.uses_kernel_events  # the host's poll still finds the mail
    finally:
        watched.close()
        through_link.close()


# -- where the kernel cannot watch -----------------------------------------------------------


def test_a_system_with_neither_kqueue_nor_inotify_waits_by_timeout_and_polls(
    folder: Path, watches: list[FolderWatch], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(select, "kqueue", raising=False)
    monkeypatch.setattr(sys, "platform", "sunos5")
    made = FolderWatch(folder)
    watches.append(made)
    assert not made.uses_kernel_events
    assert wait_gone_while_removed(folder) == [True]


class NoInotify:
    """libc when inotify refuses: no instance left (EMFILE: max_user_instances), or no
    watch (ENOSPC: max_user_watches; ENOENT: the folder is gone)."""

    def __init__(self, refused: str) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._refused = refused

    def __getattr__(self, name: str) -> Any:
        if name == self._refused:
            return lambda *arguments: -1
        return getattr(self._libc, name)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
@pytest.mark.parametrize("refused", ["inotify_init1", "inotify_add_watch"])
def test_where_inotify_refuses_the_watch_falls_back_to_polling_and_leaks_nothing(
    folder: Path, watches: list[FolderWatch], monkeypatch: pytest.MonkeyPatch, refused: str
) -> None:
    monkeypatch.setattr(watch, "_spare_instances", [])
    monkeypatch.setattr(watch, "_libc", lambda: NoInotify(refused))
    before = open_descriptors()
    made = FolderWatch(folder)
    assert not made.uses_kernel_events
    made.close()
    assert open_descriptors() == before
    assert wait_gone_while_removed(folder) == [True]
    assert open_descriptors() == before


@pytest.mark.parametrize("kernel", ["kqueue"], indirect=True)
@pytest.mark.parametrize("refused", ["kqueue", "control"])
def test_where_kqueue_refuses_the_watch_falls_back_to_polling_and_leaks_nothing(
    kernel: str, folder: Path, monkeypatch: pytest.MonkeyPatch, refused: str
) -> None:
    """kqueue() with no descriptor left, or a kevent the kernel refuses to add."""

    def no_descriptor_left() -> KqueueOnInotify:
        KqueueOnInotify().close()  # asked for, as the fixture checks
        raise OSError(24, "Too many open files")

    def refusing_control(self: KqueueOnInotify, *arguments: Any) -> Any:
        raise OSError(22, "Invalid argument")

    if refused == "kqueue":
        monkeypatch.setattr(select, "kqueue", no_descriptor_left)
    else:
        monkeypatch.setattr(KqueueOnInotify, "control", refusing_control)
    before = open_descriptors()
    made = FolderWatch(folder)
    assert not made.uses_kernel_events
    made.close()
    assert wait_gone_while_removed(folder) == [True]
    assert open_descriptors() == before


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
def test_a_forked_child_does_not_share_the_parent_s_spare_inotify_instances(
    folder: Path,
) -> None:
    assert watch.wait_gone(folder / "0000000000001-00000000.json", NEVER_S)
    spares = list(watch._spare_instances)
    assert spares  # the receipt wait keeps its instance for the next one
    report_read, report_write = os.pipe()
    child = os.fork()
    if child == 0:  # the forked child reports through the pipe
        still_open = [fd for fd in spares if os.path.exists(f"/proc/self/fd/{fd}")]
        os.write(report_write, repr((watch._spare_instances, still_open)).encode())
        os._exit(0)
    os.close(report_write)
    _, status = os.waitpid(child, 0)
    with os.fdopen(report_read) as report:
        assert report.read() == "([], [])"
    assert os.waitstatus_to_exitcode(status) == 0
    assert watch._spare_instances == spares


def test_draining_a_wake_pipe_whose_writer_is_gone_ends() -> None:
    """The end of the pipe ends the drain as an empty pipe does: it never spins."""
    wake_read, wake_write = os.pipe()
    os.write(wake_write, b"!" * 10)
    os.close(wake_write)
    drained = threading.Thread(target=watch._drain, args=(wake_read,), daemon=True)
    drained.start()
    drained.join(JOIN_S)
    assert not drained.is_alive()
    assert os.read(wake_read, 1) == b""
    os.close(wake_read)
