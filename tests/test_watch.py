"""The folder watch: a letter renamed into the mailbox ends the wait at once (kernel
events: inotify on Linux, kqueue on macOS and the BSDs), wake() ends it from
anywhere, and without events only the timeout does, which is why the host polls as
well (SPEC 3; INV-23).

Each test that needs kernel events runs twice: with this system's watch, and with
kqueue, which on Linux is the double below (DESIGN §14 says what it cannot show).

No timing is asserted: each wait runs in a thread with a timeout far longer than
the test may take, and the test asserts that the wait has returned.
"""

from __future__ import annotations

import ctypes
import errno
import operator
import os
import select
import shutil
import stat
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import pytest

from pipost import watch
from pipost.watch import FolderWatch
from tests.helpers import open_descriptors

NEVER_S = 30.0
"""A wait this long would outlast the test: a wait that ended was ended by something."""
JOIN_S = 10.0
REAL_SELECT = select.select
"""The double's own looks use it: tests that note what the watch asks of select.select
replace that, and the double's looks are not the watch's."""


# -- kqueue where the system has none: a double on inotify ------------------------------

KQUEUE_CONSTANTS = {
    "KQ_FILTER_VNODE": -4,
    "KQ_EV_ADD": 0x0001,
    "KQ_EV_CLEAR": 0x0020,
    "KQ_EV_ERROR": 0x4000,
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
    """select.kevent: the fields pipost fills in, and data (an error's errno)."""

    ident: int
    filter: int
    flags: int
    fflags: int
    data: int = 0


class KqueueOnInotify:
    """select.kqueue() as macOS gives it, for what a kqueue watch asks of it: vnode
    events on a folder descriptor, edge-triggered (EV_CLEAR), the queue readable
    while one waits. inotify, on the folder the descriptor names, stands in for the
    kernel, so real renames and unlinks fire the events. Anything else pipost might
    ask is refused, so a watch that asks it fails its test."""

    made: ClassVar[list[KqueueOnInotify]] = []
    refusing: ClassVar[int | None] = None
    """An errno: the kernel refuses every registration with it (a test sets it)."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._fd = int(self._libc.inotify_init1(IN_NONBLOCK_CLOEXEC))
        assert self._fd >= 0
        self.registered: list[Kevent] = []
        self.closed = False
        KqueueOnInotify.made.append(self)

    def fileno(self) -> int:
        return self._fd

    def control(
        self, changes: Iterable[Kevent] | None, max_events: int, timeout: Any = None, /
    ) -> list[Kevent]:
        """kqueue.control's arguments as select checks them, and kevent(2) as macOS
        runs it: the changes are made, then, only where max_events leaves room, the
        events that wait are returned, waited for up to timeout (None: forever)."""
        if self.closed:
            raise ValueError("I/O operation on closed kqueue object")
        max_events = operator.index(max_events)  # an int, as select's argument: not None
        if max_events < 0:
            raise ValueError(f"Length of eventlist must be 0 or positive, got {max_events}")
        if timeout is not None and not isinstance(timeout, (int, float)):
            raise TypeError(f"timeout argument must be a number or None, got {timeout!r}")
        if timeout is not None and timeout < 0:
            raise ValueError("timeout must be positive or None")
        refused: list[Kevent] = []
        for change in changes if changes is not None else ():
            if not isinstance(change, Kevent):
                raise TypeError("changelist must be an iterable of select.kevent objects")
            if self.refusing is None:
                self._add(change)
            elif len(refused) < max_events:  # where the event list has room, kevent(2)
                error = KQUEUE_CONSTANTS["KQ_EV_ERROR"]  # reports a refusal in it, not raised
                refused.append(replace(change, flags=change.flags | error, data=self.refusing))
            else:
                raise OSError(self.refusing, os.strerror(self.refusing))
        if refused or max_events == 0:
            return refused  # the kernel looks for events only with room, none taken by errors
        if not self._readable(0):
            if timeout is None:  # fails the test where macOS would hang it
                raise AssertionError("kevent would wait forever: no event waits")
            if not self._readable(timeout):
                return []
        while self._readable(0):
            os.read(self._fd, 65536)
        # One event per registration at most, as kqueue folds a knote's changes; its
        # notes are the ones asked for (a watch reads none of them).
        return self.registered[:max_events]

    def _readable(self, timeout: float) -> bool:
        return bool(REAL_SELECT([self._fd], [], [], timeout)[0])

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
        self.registered.append(change)

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


class Waiting(threading.Thread):
    """wait(timeout) on a watch, in a thread. ``returned`` tells a wait that returned
    from one that raised: that one ends its thread too, and no event ended it."""

    def __init__(self, folder_watch: FolderWatch, timeout: float) -> None:
        super().__init__(daemon=True)
        self._watch, self._timeout = folder_watch, timeout
        self.returned = False

    def run(self) -> None:
        self._watch.wait(self._timeout)
        self.returned = True


def waiting(folder_watch: FolderWatch, timeout: float = NEVER_S) -> Waiting:
    thread = Waiting(folder_watch, timeout)
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

    assert thread.returned


def test_an_event_before_the_wait_is_not_missed(
    kernel: str, folder: Path, watches: list[FolderWatch]
) -> None:
    watch = FolderWatch(folder)
    watches.append(watch)
    deposit_by_rename(folder, "0001796078534257-00000002.json")

    thread = waiting(watch)
    thread.join(JOIN_S)

    assert thread.returned


def test_a_file_written_in_place_ends_the_wait(
    kernel: str, folder: Path, watches: list[FolderWatch]
) -> None:
    watch = FolderWatch(folder)
    watches.append(watch)

    thread = waiting(watch)
    (folder / "0001796078534257-00000003.json.tmp").write_text("{}")
    thread.join(JOIN_S)

    assert thread.returned


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
    assert thread.returned


def test_wake_ends_the_wait(kernel: str, folder: Path, watches: list[FolderWatch]) -> None:
    watch = FolderWatch(folder)
    watches.append(watch)
    assert watch.uses_kernel_events

    thread = waiting(watch)
    watch.wake()
    thread.join(JOIN_S)

    assert thread.returned


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
    assert thread.returned


def test_a_closed_watch_holds_no_kernel_events(kernel: str, folder: Path) -> None:
    made = FolderWatch(folder)
    assert made.uses_kernel_events
    made.close()
    assert not made.uses_kernel_events


def test_a_short_timeout_ends_a_wait_that_nothing_else_ends(
    kernel: str, folder: Path, watches: list[FolderWatch]
) -> None:
    watch = FolderWatch(folder)
    watches.append(watch)

    thread = waiting(watch, 0.05)
    thread.join(JOIN_S)

    assert thread.returned


def test_many_wakes_never_block_the_waker(folder: Path) -> None:
    # wake() runs in signal handlers: a full pipe must not block or raise.
    watch = FolderWatch(folder, kernel_events=False)
    woken: list[bool] = []

    def wake_many() -> None:
        for _ in range(100_000):
            watch.wake()
        woken.append(True)

    # In a thread, so that a wake that blocks fails the test; not woken at the end, as
    # the fixture would, for that wake would block too (closing ends the waker's).
    waker = threading.Thread(target=wake_many, daemon=True)
    try:
        waker.start()
        waker.join(JOIN_S)
        assert woken

        thread = waiting(watch)
        thread.join(JOIN_S)
        assert thread.returned
    finally:
        watch.close()


def test_wakes_are_consumed_by_the_wait_they_ended(
    folder: Path, watches: list[FolderWatch], monkeypatch: pytest.MonkeyPatch
) -> None:
    watch = FolderWatch(folder, kernel_events=False)
    watches.append(watch)
    for _ in range(3):
        watch.wake()
    watch.wait(NEVER_S)  # returns at once: woken

    found: list[list[Any]] = []
    real_select = select.select

    def noted_select(readable: Any, writable: Any, failed: Any, timeout: float) -> Any:
        ready = real_select(readable, writable, failed, timeout)
        found.append(ready[0])
        return ready

    monkeypatch.setattr(select, "select", noted_select)
    watch.wait(0)  # a look, not a wait: whether anything is left to wake it
    assert found == [[]]


def test_a_wait_asks_select_to_wait_no_longer_than_its_timeout(
    folder: Path, watches: list[FolderWatch], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Asked, not timed: the timeout select is given. One already past waits not at all
    (select refuses a negative timeout)."""
    asked: list[float] = []
    real_select = select.select

    def noted_select(readable: Any, writable: Any, failed: Any, timeout: float) -> Any:
        asked.append(timeout)
        return real_select(readable, writable, failed, timeout)

    monkeypatch.setattr(select, "select", noted_select)
    watch = FolderWatch(folder, kernel_events=False)
    watches.append(watch)
    watch.wait(0.05)
    watch.wait(-1.0)
    assert asked == [0.05, 0.0]


# -- waiting for a receipt: the letter's removal -------------------------------------------


def wait_gone_while_removed(folder: Path) -> list[bool]:
    """What wait_gone said when the letter it waits on was removed while it waited
    (in select on its watch, or in a poll's sleep): removed before that, its first
    look would find the letter gone, and neither the watch nor the poll would run."""
    letter = folder / "0000000000001-00000000.json"
    letter.write_bytes(b"{}")
    waits = threading.Event()
    outcome: list[bool] = []
    real_select, real_sleep = select.select, time.sleep

    def noted_select(*arguments: Any) -> Any:
        waits.set()
        return real_select(*arguments)

    def noted_sleep(seconds: float) -> None:
        waits.set()
        real_sleep(seconds)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(select, "select", noted_select)
        patch.setattr(time, "sleep", noted_sleep)
        waiter = threading.Thread(target=lambda: outcome.append(watch.wait_gone(letter, NEVER_S)))
        waiter.start()
        waits.wait(JOIN_S)
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


class ClockOfWaits:
    """time.monotonic as wait_gone reads it, moved on by its waits alone: select.select
    and time.sleep only look, and move the clock by what they were asked and a
    microsecond, as a real wait ends a little after its time. So how long wait_gone
    waits is asked, not timed; waits past ``budget`` fail the test, not hang it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, budget: float) -> None:
        self.now = 1000.0
        self.asked: list[float] = []
        self._end = self.now + budget + 0.001
        monkeypatch.setattr(time, "monotonic", lambda: self.now)
        monkeypatch.setattr(select, "select", self._select)
        monkeypatch.setattr(time, "sleep", self._sleep)

    def _select(self, readable: Any, writable: Any, failed: Any, timeout: float) -> Any:
        self._wait(timeout)
        ready = REAL_SELECT(readable, writable, failed, 0)
        self.now += 1e-6 if any(ready) else timeout + 1e-6
        return ready

    def _sleep(self, seconds: float) -> None:
        self._wait(seconds)
        self.now += seconds + 1e-6

    def _wait(self, seconds: float) -> None:
        assert seconds is not None and seconds >= 0 and self.now + seconds <= self._end, seconds
        self.asked.append(seconds)


def test_wait_gone_waits_out_its_time_for_a_letter_that_stays(
    kernel: str, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    letter = folder / "0000000000001-00000000.json"
    letter.write_bytes(b"{}")
    clock = ClockOfWaits(monkeypatch, budget=0.5)
    assert watch.wait_gone(letter, 0.5) is False
    assert clock.asked == [0.5]  # one wait for all its time: a removal would end it
    assert watch.wait_gone(folder / "never-there.json", NEVER_S) is True
    assert clock.asked == [0.5]  # a letter already gone is not waited for


def test_wait_gone_polls_every_10_ms_where_the_kernel_cannot_tell(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watch, "_kernel_watch", lambda folder, mask, notes: None)
    letter = folder / "0000000000001-00000000.json"
    letter.write_bytes(b"{}")
    clock = ClockOfWaits(monkeypatch, budget=0.5)
    assert watch.wait_gone(letter, 0.5) is False
    assert max(clock.asked) <= 0.01
    assert sum(clock.asked) == pytest.approx(0.5, abs=0.001)


def test_wait_gone_of_no_time_looks_once_and_sets_no_watch(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not worth a watch: setting one costs more than the look."""

    def no_watch(folder: str, mask: int, notes: tuple[str, ...]) -> None:
        raise AssertionError("a wait of no time set a watch")

    monkeypatch.setattr(watch, "_kernel_watch", no_watch)
    letter = folder / "0000000000001-00000000.json"
    letter.write_bytes(b"{}")
    assert watch.wait_gone(letter, 0) is False
    assert watch.wait_gone(letter, -1.0) is False
    assert watch.wait_gone(folder / "never-there.json", 0) is True


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
@pytest.mark.parametrize("in_its_place", ["a symlink to the folder", "a file"])
def test_a_kqueue_watch_is_set_on_the_folder_alone_not_on_what_takes_its_place(
    kernel: str, folder: Path, tmp_path: Path, in_its_place: str
) -> None:
    """O_NOFOLLOW and O_DIRECTORY: a watch is not set through a symlink swapped in
    for the folder, nor on a file; the host's poll still finds the mail."""
    stand_in = tmp_path / "stand-in"
    if in_its_place == "a file":
        stand_in.write_bytes(b"")
    else:
        stand_in.symlink_to(folder)
    watched, on_stand_in = FolderWatch(folder), FolderWatch(stand_in)
    try:
        assert watched.uses_kernel_events
        assert not on_stand_in.uses_kernel_events
    finally:
        watched.close()
        on_stand_in.close()


@pytest.mark.parametrize("kernel", ["kqueue"], indirect=True)
def test_a_kqueue_watch_registers_exactly_the_notes_its_wait_needs(
    kernel: str, folder: Path
) -> None:
    """New letters change the folder's entries (NOTE_WRITE); a receipt wait also ends
    when the folder itself is deleted (NOTE_DELETE). Nothing else may wake either."""
    FolderWatch(folder).close()
    assert watch.wait_gone(folder / "never-there.json", NEVER_S)
    write, delete = KQUEUE_CONSTANTS["KQ_NOTE_WRITE"], KQUEUE_CONSTANTS["KQ_NOTE_DELETE"]
    registered = [change.fflags for queue in KqueueOnInotify.made for change in queue.registered]
    assert registered == [write, write | delete]


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

    ERRORS: ClassVar[dict[str, int]] = {
        "inotify_init1": errno.EMFILE,
        "inotify_add_watch": errno.ENOSPC,
    }

    def __init__(self, refused: str) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._refused = refused

    def __getattr__(self, name: str) -> Any:
        if name == self._refused:
            return self._fail
        return getattr(self._libc, name)

    def _fail(self, *arguments: Any) -> int:
        ctypes.set_errno(self.ERRORS[self._refused])  # where ctypes.get_errno() reads it
        return -1


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


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
@pytest.mark.parametrize(
    ("refused", "why"),
    [
        (
            "inotify_init1",
            f"{os.strerror(errno.EMFILE)} "
            "(inotify instances: fs.inotify.max_user_instances, or ulimit -n)",
        ),
        (
            "inotify_add_watch",
            f"{os.strerror(errno.ENOSPC)} (inotify watches: fs.inotify.max_user_watches)",
        ),
    ],
)
def test_a_watch_inotify_refuses_keeps_why_with_the_limit_reached(
    folder: Path,
    watches: list[FolderWatch],
    monkeypatch: pytest.MonkeyPatch,
    refused: str,
    why: str,
) -> None:
    """Issue 38, item 3: the session says why it polls (Host.start). The errors of
    inotify's limits are the kernel's words for other things ("No space left on
    device" for the watches), so the limit is named beside them."""
    monkeypatch.setattr(watch, "_spare_instances", [])
    monkeypatch.setattr(watch, "_libc", lambda: NoInotify(refused))
    made = FolderWatch(folder)
    watches.append(made)
    assert made.refused == why
    assert FolderWatch(folder, kernel_events=False).refused is None  # not asked: not refused


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
def test_an_inotify_watch_lost_with_its_folder_says_so_and_polls(
    folder: Path, watches: list[FolderWatch]
) -> None:
    """Issue 38, item 3: the folder removed under the watch (a sweep, a person) ends
    it; the kernel says so (IN_IGNORED), and the watch keeps why and polls."""
    made = FolderWatch(folder)
    watches.append(made)
    assert made.uses_kernel_events and made.lost is None
    (folder / "0000000000001-00000000.json").write_bytes(b"{}")
    made.wait(JOIN_S)  # a letter: the watch stands
    assert made.uses_kernel_events and made.lost is None

    shutil.rmtree(folder)
    made.wait(JOIN_S)  # returns at once: the kernel tells of the end of the watch

    assert made.lost is not None and "the folder is gone" in made.lost
    assert not made.uses_kernel_events


def test_a_watch_the_kernel_sets_is_not_refused(
    kernel: str, folder: Path, watches: list[FolderWatch]
) -> None:
    made = FolderWatch(folder)
    watches.append(made)
    assert made.uses_kernel_events and made.refused is None


@pytest.mark.parametrize("kernel", ["kqueue"], indirect=True)
@pytest.mark.parametrize("refused", ["kqueue", "the registration"])
def test_where_kqueue_refuses_the_watch_falls_back_to_polling_and_leaks_nothing(
    kernel: str, folder: Path, monkeypatch: pytest.MonkeyPatch, refused: str
) -> None:
    """kqueue() with no descriptor left, or a kevent the kernel refuses to add (which
    kevent(2) reports among the events, not raised, if the call asks for any)."""

    def no_descriptor_left() -> KqueueOnInotify:
        KqueueOnInotify().close()  # asked for, as the fixture checks
        raise OSError(errno.EMFILE, "Too many open files")

    if refused == "kqueue":
        monkeypatch.setattr(select, "kqueue", no_descriptor_left)
    else:
        monkeypatch.setattr(KqueueOnInotify, "refusing", errno.EINVAL)
    before = open_descriptors()
    made = FolderWatch(folder)
    assert not made.uses_kernel_events
    assert made.refused == os.strerror(errno.EMFILE if refused == "kqueue" else errno.EINVAL)
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


def test_forgetting_the_spares_closes_each_and_keeps_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a forked child runs (the test above), run in this process too: mutmut
    books a function to the tests that reach it in its own process, not in a fork."""
    kept = [*os.pipe(), *os.pipe()]
    monkeypatch.setattr(watch, "_spare_instances", list(kept))
    watch._forget_spares()
    assert watch._spare_instances == []
    assert not [fd for fd in kept if is_open(fd)]


def is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:  # EBADF
        return False
    return True


def inotify_watches(instance: int) -> list[str]:
    """The watches an inotify instance holds, as /proc shows them."""
    with open(f"/proc/self/fdinfo/{instance}") as info:
        return [line for line in info if line.startswith("inotify wd:")]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
def test_a_spare_inotify_instance_holds_no_watch(folder: Path) -> None:
    """A watch left on a spare would wake the next receipt wait with the changes of
    the folder it watched, and use up max_user_watches, one more each wait."""
    receipt_wait = watch._kernel_watch(folder, *watch._REMOVALS)
    assert receipt_wait is not None
    assert inotify_watches(receipt_wait.fileno())  # /proc shows the watch it holds
    receipt_wait.finish()
    assert receipt_wait.fileno() in watch._spare_instances
    assert inotify_watches(receipt_wait.fileno()) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
def test_an_inotify_instance_on_descriptor_0_is_a_watch(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process started with its standard input closed (a detached listener) gets
    descriptor 0 for its first instance: a valid one, only -1 is a refusal."""
    monkeypatch.setattr(watch, "_spare_instances", [])
    standard_input = os.dup(0)
    os.close(0)
    try:
        receipt_wait = watch._kernel_watch(folder, *watch._REMOVALS)
        assert receipt_wait is not None
        assert receipt_wait.fileno() == 0
        receipt_wait.close()
    finally:
        os.dup2(standard_input, 0)
        os.close(standard_input)


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
