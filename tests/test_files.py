"""The thin I/O layer: exclusive creation, modes, locks, bounded reads, and never
following a symlink where pipost expects its own folder or file."""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipost import files


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside the post root that a symlink may point at."""
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    """A FIFO; if a test wrongly blocks opening it, opening its write end frees it."""
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    yield path


def run_bounded(action: threading.Thread, fifo: Path) -> None:
    """Run ``action``; should it hang on ``fifo``, unblock it so that the test ends."""
    action.start()
    action.join(timeout=20)
    if action.is_alive():
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        action.join()
        pytest.fail(f"opening the FIFO {fifo} blocked")


# -- folders ----------------------------------------------------------------------


def test_ensure_dirs_creates_every_level_0700(tmp_path: Path) -> None:
    root = tmp_path / "post"
    made = files.ensure_dirs(root, "inbox", "s-0123456789ab")
    assert made == root / "inbox" / "s-0123456789ab"
    for path in (root, root / "inbox", made):
        assert path.is_dir()
        assert mode_of(path) == 0o700


def test_ensure_dirs_accepts_existing_folders(tmp_path: Path) -> None:
    root = tmp_path / "post"
    files.ensure_dirs(root, "inbox")
    (root / "inbox" / "keep").write_text("x")
    assert files.ensure_dirs(root, "inbox") == root / "inbox"
    assert (root / "inbox" / "keep").read_text() == "x"


def test_ensure_dirs_refuses_a_symlink_where_a_folder_should_be(
    tmp_path: Path, outside: Path
) -> None:
    root = tmp_path / "post"
    root.mkdir()
    (root / "inbox").symlink_to(outside)
    with pytest.raises(files.UnsafePath):
        files.ensure_dirs(root, "inbox", "s-0123456789ab")
    assert list(outside.iterdir()) == []


def test_ensure_dirs_refuses_a_symlinked_root(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "post"
    root.symlink_to(outside)
    with pytest.raises(files.UnsafePath):
        files.ensure_dirs(root, "registry")
    assert list(outside.iterdir()) == []


def test_ensure_dirs_refuses_a_file_where_a_folder_should_be(tmp_path: Path) -> None:
    (tmp_path / "inbox").write_text("not a folder")
    with pytest.raises(files.UnsafePath):
        files.ensure_dirs(tmp_path, "inbox")


def test_remove_empty_dir_removes_only_an_empty_folder(tmp_path: Path) -> None:
    empty, full = tmp_path / "empty", tmp_path / "full"
    empty.mkdir()
    full.mkdir()
    (full / "letter.json").write_text("{}")
    assert files.remove_empty_dir(empty) is True
    assert not empty.exists()
    assert files.remove_empty_dir(full) is False
    assert (full / "letter.json").exists()
    assert files.remove_empty_dir(tmp_path / "never-was") is False


def test_list_names_of_an_absent_folder_is_empty(tmp_path: Path) -> None:
    assert files.list_names(tmp_path / "absent") == []
    (tmp_path / "a").write_text("")
    assert files.list_names(tmp_path) == ["a"]


# -- writing ------------------------------------------------------------------------


def test_write_new_writes_0600_and_never_replaces(tmp_path: Path) -> None:
    path = tmp_path / "letter.json"
    files.write_new(path, b"first")
    assert path.read_bytes() == b"first"
    assert mode_of(path) == 0o600
    with pytest.raises(FileExistsError):
        files.write_new(path, b"second")
    assert path.read_bytes() == b"first"


def test_write_new_writes_large_data_whole(tmp_path: Path) -> None:
    data = os.urandom(1 << 20)
    files.write_new(tmp_path / "big", data, durable=False)
    assert (tmp_path / "big").read_bytes() == data


@pytest.mark.parametrize("dangling", [False, True])
def test_write_new_never_writes_through_a_symlink(
    tmp_path: Path, outside: Path, dangling: bool
) -> None:
    target = outside / "target"
    if not dangling:
        target.write_bytes(b"untouched")
    link = tmp_path / "letter.json"
    link.symlink_to(target)
    with pytest.raises(OSError):
        files.write_new(link, b"payload")
    if dangling:
        assert not target.exists()
    else:
        assert target.read_bytes() == b"untouched"


def test_write_new_leaves_nothing_behind_when_the_flush_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError) as raised:
        files.write_new(tmp_path / "letter.json.tmp", b"payload")
    assert raised.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []


def test_rename_then_flush_dir_moves_the_file(tmp_path: Path) -> None:
    files.write_new(tmp_path / "a.tmp", b"data")
    files.rename(tmp_path / "a.tmp", tmp_path / "a.json")
    files.flush_dir(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]


# -- the folder lock ------------------------------------------------------------------


def lock_is_free(path: Path) -> bool:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def test_locked_dir_excludes_other_holders_until_the_block_ends(tmp_path: Path) -> None:
    with files.locked_dir(tmp_path):
        assert not lock_is_free(tmp_path)
    assert lock_is_free(tmp_path)


def test_locked_dir_releases_the_lock_when_the_block_raises(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), files.locked_dir(tmp_path):
        raise RuntimeError("inside")
    assert lock_is_free(tmp_path)


def test_locked_dir_of_an_absent_folder_is_vanished(tmp_path: Path) -> None:
    with pytest.raises(files.Vanished), files.locked_dir(tmp_path / "absent"):
        pass


def test_locked_dir_of_a_folder_removed_while_waiting_is_vanished(tmp_path: Path) -> None:
    folder = tmp_path / "inbox"
    folder.mkdir()
    outcome: list[BaseException | None] = []

    def wait_for_the_lock() -> None:
        try:
            with files.locked_dir(folder):
                outcome.append(None)
        except BaseException as error:
            outcome.append(error)

    waiter = threading.Thread(target=wait_for_the_lock)
    with files.locked_dir(folder):
        waiter.start()
        os.rmdir(folder)  # a sweep, holding the lock
    waiter.join(timeout=20)
    assert not waiter.is_alive()
    assert len(outcome) == 1
    assert isinstance(outcome[0], files.Vanished)


def test_locked_dir_never_follows_a_symlink(tmp_path: Path, outside: Path) -> None:
    link = tmp_path / "inbox"
    link.symlink_to(outside)
    with pytest.raises(OSError), files.locked_dir(link):
        pass
    assert lock_is_free(outside)


# -- claiming a file --------------------------------------------------------------------


def test_try_lock_file_is_exclusive_while_held(tmp_path: Path) -> None:
    path = tmp_path / "letter.json"
    path.write_bytes(b"data")
    first = files.try_lock_file(path)
    assert first is not None
    assert files.try_lock_file(path) is None
    first.close()
    again = files.try_lock_file(path)
    assert again is not None
    again.close()


def test_try_lock_file_of_a_missing_file_is_none(tmp_path: Path) -> None:
    assert files.try_lock_file(tmp_path / "gone.json") is None


def test_try_lock_file_refuses_a_symlink(tmp_path: Path, outside: Path) -> None:
    target = outside / "real.json"
    target.write_bytes(b"data")
    (tmp_path / "letter.json").symlink_to(target)
    with pytest.raises(files.UnsafePath):
        files.try_lock_file(tmp_path / "letter.json")


def test_try_lock_file_refuses_a_fifo_without_blocking(fifo: Path) -> None:
    raised: list[BaseException] = []

    def claim() -> None:
        try:
            files.try_lock_file(fifo)
        except BaseException as error:
            raised.append(error)

    run_bounded(threading.Thread(target=claim), fifo)
    assert len(raised) == 1
    assert isinstance(raised[0], files.UnsafePath)


def test_try_lock_file_of_a_letter_disposed_while_locking_is_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder we raced unlinked the letter before we got its lock: the file we
    hold is no longer in the mailbox, so it is not ours to deliver."""
    path = tmp_path / "letter.json"
    path.write_bytes(b"data")
    real_flock = fcntl.flock

    def disposed_meanwhile(fd: int, operation: int) -> None:
        os.unlink(path)
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", disposed_meanwhile)
    assert files.try_lock_file(path) is None


def test_a_claim_read_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b"x" * 100_000)
    handle = files.try_lock_file(path)
    assert handle is not None
    try:
        assert handle.read(1000) == b"x" * 1001
    finally:
        handle.close()


# -- bounded reads ----------------------------------------------------------------------


def test_read_bounded_reads_at_most_one_byte_past_the_limit(tmp_path: Path) -> None:
    (tmp_path / "small").write_bytes(b"abc")
    (tmp_path / "large").write_bytes(b"y" * 200_000)
    assert files.read_bounded(tmp_path / "small", 10) == b"abc"
    assert files.read_bounded(tmp_path / "large", 150_000) == b"y" * 150_001


def test_read_bounded_of_a_missing_file_is_none(tmp_path: Path) -> None:
    assert files.read_bounded(tmp_path / "missing", 10) is None


def test_read_bounded_refuses_a_symlink(tmp_path: Path, outside: Path) -> None:
    (outside / "secret").write_bytes(b"secret")
    (tmp_path / "record.json").symlink_to(outside / "secret")
    with pytest.raises(files.UnsafePath):
        files.read_bounded(tmp_path / "record.json", 100)


def test_read_bounded_refuses_a_folder(tmp_path: Path) -> None:
    (tmp_path / "record.json").mkdir()
    with pytest.raises(files.UnsafePath):
        files.read_bounded(tmp_path / "record.json", 100)


def test_read_bounded_refuses_a_fifo_without_blocking(fifo: Path) -> None:
    raised: list[BaseException] = []

    def read() -> None:
        try:
            files.read_bounded(fifo, 100)
        except BaseException as error:
            raised.append(error)

    run_bounded(threading.Thread(target=read), fifo)
    assert len(raised) == 1
    assert isinstance(raised[0], files.UnsafePath)


# -- whose folders: ownership and modes (SPEC 10) ---------------------------------------


def test_a_missing_root_is_no_error_for_readers(tmp_path: Path) -> None:
    assert files.check_root(tmp_path / "post") is False
    assert not (tmp_path / "post").exists()


def test_ensure_dirs_creates_the_root_and_its_missing_parents_private(tmp_path: Path) -> None:
    root = tmp_path / "home" / ".pi" / "agent" / "post"
    inbox = files.ensure_dirs(root, "inbox")
    assert inbox == root / "inbox"
    assert mode_of(root) == 0o700
    assert mode_of(inbox) == 0o700


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702, 0o720])
def test_a_root_others_can_write_is_refused_with_the_fix(tmp_path: Path, mode: int) -> None:
    root = tmp_path / "post"
    root.mkdir()
    root.chmod(mode)
    with pytest.raises(files.UnsafePath) as refused:
        files.check_root(root)
    assert f"mode {mode:04o}" in str(refused.value.strerror)
    assert f"chmod 700 {root}" in str(refused.value.strerror)
    with pytest.raises(files.UnsafePath):
        files.ensure_dirs(root, "inbox")
    assert not (root / "inbox").exists()


def test_a_readable_root_is_accepted(tmp_path: Path) -> None:
    root = tmp_path / "post"
    root.mkdir()
    root.chmod(0o755)
    assert files.check_root(root) is True


def test_a_root_owned_by_someone_else_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "post"
    root.mkdir(mode=0o700)
    owner = os.lstat(root).st_uid
    monkeypatch.setattr(os, "geteuid", lambda: owner + 4242)  # we are someone else
    with pytest.raises(files.UnsafePath) as refused:
        files.check_root(root)
    assert f"owned by uid {owner}, not by you (uid {owner + 4242})" in str(refused.value.strerror)


def test_a_symlinked_root_is_refused_not_followed(tmp_path: Path, outside: Path) -> None:
    outside.chmod(0o700)
    root = tmp_path / "post"
    root.symlink_to(outside)
    with pytest.raises(files.UnsafePath) as refused:
        files.check_root(root)
    assert "symlink" in str(refused.value.strerror)
    with pytest.raises(files.UnsafePath):
        files.ensure_dirs(root, "inbox")
    assert list(outside.iterdir()) == []


def test_a_group_writable_mailbox_folder_is_refused_when_listed(tmp_path: Path) -> None:
    folder = tmp_path / "inbox"
    folder.mkdir(mode=0o700)
    folder.chmod(0o770)
    with pytest.raises(files.UnsafePath):
        files.list_names(folder)
