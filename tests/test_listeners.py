"""Who listens: one lock file per running listener of an address, held for its
lifetime; a file whose lock can be taken is stale (INV-06, INV-14, INV-15)."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pipost import files, listeners
from pipost.address import address_of
from tests.helpers import VanishingFolders, open_descriptors, removed_while_awaited, tree_snapshot

ADDRESS = address_of("listened-session")
HOLDER = """
import sys
from pipost import listeners
place = listeners.join(sys.argv[1], sys.argv[2])
print("joined", flush=True)
sys.stdin.read()  # hold the place until the test closes stdin, or kills us
"""


def folder(root: Path) -> Path:
    return root / "listeners" / ADDRESS


def another_listener(root: Path) -> subprocess.Popen[str]:
    """A listener in another process, holding its place until it is ended."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(root), ADDRESS],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "joined\n"
    return process


def test_no_folder_means_no_listener_and_asking_creates_nothing(tmp_path: Path) -> None:
    root = tmp_path / "post"
    assert listeners.running(root, ADDRESS) == []
    assert not root.exists()


def test_a_listener_that_joins_is_running_until_it_leaves(tmp_path: Path) -> None:
    root = tmp_path / "post"
    place = listeners.join(root, ADDRESS)
    assert listeners.running(root, ADDRESS) == [os.getpid()]
    (name,) = os.listdir(folder(root))
    assert name.startswith(f"{os.getpid()}.") and name.endswith(".lock")

    place.leave()
    assert listeners.running(root, ADDRESS) == []
    assert os.listdir(root / "listeners") == [], "the last to leave removes the folder"


def test_a_second_listener_is_refused_unless_it_runs_beside_the_first_on_purpose(
    tmp_path: Path,
) -> None:
    root = tmp_path / "post"
    first = listeners.join(root, ADDRESS)
    before = tree_snapshot(root)
    with pytest.raises(listeners.AlreadyListening) as refused:
        listeners.join(root, ADDRESS)
    assert (refused.value.address, refused.value.pids) == (ADDRESS, [os.getpid()])
    assert tree_snapshot(root) == before, "a refused listener adds nothing"

    second = listeners.join(root, ADDRESS, beside_others=True)
    assert listeners.running(root, ADDRESS) == [os.getpid(), os.getpid()]

    second.leave()
    assert listeners.running(root, ADDRESS) == [os.getpid()]
    assert folder(root).is_dir(), "the folder stays while a listener runs"
    first.leave()


def test_a_refusal_names_the_address_and_every_running_listener() -> None:
    refused = listeners.AlreadyListening(ADDRESS, [12, 345])
    assert str(refused) == f"{ADDRESS} already has a listener: pid 12, 345"


def test_a_listener_in_another_process_is_seen_and_asking_changes_nothing(
    tmp_path: Path,
) -> None:
    root = tmp_path / "post"
    other = another_listener(root)
    try:
        before = tree_snapshot(root)
        assert listeners.running(root, ADDRESS) == [other.pid]
        assert tree_snapshot(root) == before
        with pytest.raises(listeners.AlreadyListening) as refused:
            listeners.join(root, ADDRESS)
        assert refused.value.pids == [other.pid]
    finally:
        other.kill()
        other.wait()


def test_a_killed_listener_leaves_a_stale_file_that_the_next_one_removes(
    tmp_path: Path,
) -> None:
    root = tmp_path / "post"
    other = another_listener(root)
    other.send_signal(signal.SIGKILL)
    other.wait()
    (stale,) = os.listdir(folder(root))
    assert stale.startswith(f"{other.pid}.")

    assert listeners.running(root, ADDRESS) == [], "the kernel dropped its lock"
    assert os.listdir(folder(root)) == [stale], "asking removes nothing"
    place = listeners.join(root, ADDRESS)
    assert stale not in os.listdir(folder(root))
    place.leave()


def test_only_a_listeners_plain_file_counts_and_other_names_are_left_alone(
    tmp_path: Path,
) -> None:
    root = tmp_path / "post"
    files.make(root, "listeners", ADDRESS).close()
    others = ["123.lock", "notes.txt", "x.abcd.lock"]
    for name in others:
        (folder(root) / name).write_text("")
    target = tmp_path / "target"
    target.write_text("untouched")
    (folder(root) / "456.abcd.lock").symlink_to(target)

    assert listeners.running(root, ADDRESS) == [], "a link is no lock, and is not followed"
    place = listeners.join(root, ADDRESS)
    assert listeners.running(root, ADDRESS) == [os.getpid()]
    place.leave()
    assert sorted(os.listdir(folder(root))) == others, "the link went as stale, nothing else"
    assert target.read_text() == "untouched"


def test_of_listeners_that_start_together_exactly_one_runs(tmp_path: Path) -> None:
    """Joins are decided under the folder's lock: never both refused, never both in."""
    root = tmp_path / "post"
    places: list[listeners.Listening] = []
    refusals: list[list[int]] = []
    start = threading.Barrier(8)

    def join() -> None:
        start.wait()
        try:
            places.append(listeners.join(root, ADDRESS))
        except listeners.AlreadyListening as refused:
            refusals.append(refused.pids)

    threads = [threading.Thread(target=join) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert len(places) == 1
    assert refusals == [[os.getpid()]] * 7
    places[0].leave()
    assert listeners.running(root, ADDRESS) == []


def test_a_listeners_folder_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "post"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    files.make_root(root).close()
    (root / "listeners").symlink_to(elsewhere)
    with pytest.raises(files.UnsafePath):
        listeners.join(root, ADDRESS, beside_others=True)
    with pytest.raises(files.UnsafePath):
        listeners.running(root, ADDRESS)
    assert list(elsewhere.iterdir()) == []


def test_a_listener_that_left_or_let_go_touches_nothing_again(tmp_path: Path) -> None:
    """leave() after leave() or close() does nothing: its descriptors are closed, and
    their numbers may by then name another listener's files."""
    root = tmp_path / "post"
    gone = listeners.join(root, ADDRESS)
    gone.leave()
    let_go = listeners.join(root, ADDRESS)
    let_go.close()
    (stale,) = os.listdir(folder(root))
    place = listeners.join(root, ADDRESS)
    (name,) = os.listdir(folder(root))
    assert name != stale, "the stale file went as the next listener joined"

    gone.leave()
    let_go.leave()
    assert listeners.running(root, ADDRESS) == [os.getpid()]
    assert os.listdir(folder(root)) == [name]
    place.leave()


def test_a_listener_whose_post_office_moved_away_still_removes_its_file(tmp_path: Path) -> None:
    root = tmp_path / "post"
    place = listeners.join(root, ADDRESS)
    moved = tmp_path / "moved"
    root.rename(moved)
    place.leave()
    assert os.listdir(folder(moved)) == [], "its file went; the folder is left to the next"
    assert not root.exists()


def test_a_listener_that_cannot_remove_its_file_leaves_it_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "post"
    place = listeners.join(root, ADDRESS)

    def refused(held: files.Folder, name: str) -> None:
        raise PermissionError(13, "Permission denied", held.name(name))

    with monkeypatch.context() as disk:
        disk.setattr(files.Folder, "unlink", refused)
        place.leave()
    assert listeners.running(root, ADDRESS) == [], "no longer held: stale"
    (stale,) = os.listdir(folder(root))
    again = listeners.join(root, ADDRESS)
    assert stale not in os.listdir(folder(root))
    again.leave()


def test_a_listener_joining_as_the_last_one_leaves_joins_the_folder_made_again(
    tmp_path: Path,
) -> None:
    """The folder removed (by the last listener to leave) while the join waited for
    its lock: the join starts again, in a folder of its own."""
    root = tmp_path / "post"
    files.make(root, "listeners", ADDRESS).close()
    before = open_descriptors()
    place = removed_while_awaited(folder(root), lambda: listeners.join(root, ADDRESS))
    assert listeners.running(root, ADDRESS) == [os.getpid()]
    place.leave()
    assert open_descriptors() == before


def test_a_folder_of_listeners_that_keeps_vanishing_is_said_and_leaks_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "post"
    vanishing = VanishingFolders(monkeypatch)
    monkeypatch.setattr(listeners, "_JOIN_ATTEMPTS", 3)
    before = open_descriptors()
    with pytest.raises(OSError) as failed:
        listeners.join(root, ADDRESS)
    assert failed.value.strerror == "the folder of listeners kept vanishing"
    assert failed.value.errno == errno.EAGAIN
    assert failed.value.filename == str(folder(root))
    assert vanishing.asked == 3
    assert open_descriptors() == before


def test_a_listener_whose_listeners_folder_is_swapped_for_a_link_leaves_without_following_it(
    tmp_path: Path,
) -> None:
    """Leaving walks listeners/ again, which is refused once a link stands there: the
    listener still lets go of its lock (its file stays, stale, for the next to join)."""
    root = tmp_path / "post"
    place = listeners.join(root, ADDRESS)
    (root / "listeners").rename(root / "elsewhere")
    (root / "listeners").symlink_to(root / "elsewhere")

    place.leave()

    (root / "listeners").unlink()
    (root / "elsewhere").rename(root / "listeners")
    assert listeners.running(root, ADDRESS) == []
    assert len(os.listdir(folder(root))) == 1


JOIN_WITH_THE_LOCK_ON_DESCRIPTOR_0 = """
import os, sys
from pipost import files, listeners

create_locked = files.Folder.create_locked

def on_descriptor_0(folder, name):
    os.close(0)  # as in a process started with its standard input closed
    return create_locked(folder, name)

files.Folder.create_locked = on_descriptor_0
place = listeners.join(sys.argv[1], sys.argv[2])
assert place._handle.fd == 0, place._handle.fd
place.leave()
print(sorted(os.listdir(sys.argv[1])))
"""


def test_a_listener_whose_lock_got_descriptor_0_leaves_all_the_same(tmp_path: Path) -> None:
    root = tmp_path / "post"
    said = subprocess.run(
        [sys.executable, "-c", JOIN_WITH_THE_LOCK_ON_DESCRIPTOR_0, str(root), ADDRESS],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert said.stdout.split() == ["['listeners']"]
    assert os.listdir(root / "listeners") == [], "the last to leave removes the folder"
