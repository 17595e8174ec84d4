"""The folder watch: a letter renamed into the mailbox ends the wait at once (kernel
events on Linux), wake() ends it from anywhere, and without events only the
timeout does, which is why the host polls as well (SPEC 3; INV-23).

No timing is asserted: each wait runs in a thread with a timeout far longer than
the test may take, and the test asserts that the thread has finished.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipost import watch
from pipost.watch import FolderWatch

NEVER_S = 30.0
"""A wait this long would outlast the test: a wait that ended was ended by something."""
JOIN_S = 10.0


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
    folder: Path, watches: list[FolderWatch]
) -> None:
    watch = FolderWatch(folder)
    watches.append(watch)
    assert watch.uses_kernel_events

    thread = waiting(watch)
    deposit_by_rename(folder, "0001796078534257-00000001.json")
    thread.join(JOIN_S)

    assert not thread.is_alive()


def test_an_event_before_the_wait_is_not_missed(folder: Path, watches: list[FolderWatch]) -> None:
    watch = FolderWatch(folder)
    watches.append(watch)
    deposit_by_rename(folder, "0001796078534257-00000002.json")

    thread = waiting(watch)
    thread.join(JOIN_S)

    assert not thread.is_alive()


def test_a_file_written_in_place_ends_the_wait(folder: Path, watches: list[FolderWatch]) -> None:
    watch = FolderWatch(folder)
    watches.append(watch)

    thread = waiting(watch)
    (folder / "0001796078534257-00000003.json.tmp").write_text("{}")
    thread.join(JOIN_S)

    assert not thread.is_alive()


def test_an_event_is_consumed_by_the_wait_that_saw_it(
    folder: Path, watches: list[FolderWatch]
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


@pytest.mark.parametrize("kernel_events", [True, False])
def test_wake_ends_the_wait(folder: Path, watches: list[FolderWatch], kernel_events: bool) -> None:
    watch = FolderWatch(folder, kernel_events=kernel_events)
    watches.append(watch)
    assert watch.uses_kernel_events is kernel_events

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
    folder: Path, watches: list[FolderWatch]
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


@pytest.mark.parametrize("kernel_events", [True, False])
def test_wait_gone_returns_when_the_letter_is_removed(
    folder: Path, kernel_events: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not kernel_events:  # a system without inotify: the wait polls instead
        monkeypatch.setattr(watch, "_inotify_watch", lambda folder, mask: None)
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
    assert outcome == [True]


def test_wait_gone_reports_a_letter_that_stays(folder: Path) -> None:
    letter = folder / "0000000000001-00000000.json"
    letter.write_bytes(b"{}")
    assert watch.wait_gone(letter, 0.05) is False
    assert watch.wait_gone(folder / "never-there.json", NEVER_S) is True
