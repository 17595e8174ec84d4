"""The thin I/O layer: exclusive creation, modes, locks, bounded reads, and never
following a symlink where pipost expects its own folder or file."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pipost import files
from tests.helpers import (
    driverless_device,
    frozen_holder,
    give_to_unprivileged,
    not_blocked,
    open_descriptors,
    removed_while_awaited,
    unix_socket,
    unprivileged_python,
    unprivileged_scratch,
)


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
    """A FIFO; if a test wrongly blocks opening it, opening its other end frees it."""
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    yield path


@pytest.fixture
def here(tmp_path: Path) -> Iterator[files.Folder]:
    """``tmp_path`` (private, as pytest makes it) opened as a pipost folder."""
    folder = files.open_root(tmp_path)
    assert folder is not None
    with folder:
        yield folder


def run_bounded(action: threading.Thread, fifo: Path) -> None:
    """Run ``action``; should it hang on ``fifo``, unblock it so that the test ends."""
    action.start()
    action.join(timeout=20)
    if action.is_alive():
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # frees a blocked writer
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # and a blocked reader
        action.join()
        os.close(reader)
        pytest.fail(f"opening the FIFO {fifo} blocked")


# -- reaching folders from the root ---------------------------------------------------


def test_make_creates_every_level_0700(tmp_path: Path) -> None:
    root = tmp_path / "post"
    with files.make(root, "inbox", "s-0123456789ab") as made:
        assert made.path == str(root / "inbox" / "s-0123456789ab")
    for path in (root, root / "inbox", root / "inbox" / "s-0123456789ab"):
        assert path.is_dir()
        assert mode_of(path) == 0o700


def test_make_accepts_existing_folders(tmp_path: Path) -> None:
    root = tmp_path / "post"
    files.make(root, "inbox").close()
    (root / "inbox" / "keep").write_text("x")
    with files.make(root, "inbox") as inbox:
        assert inbox.names() == ["keep"]
    assert (root / "inbox" / "keep").read_text() == "x"


def test_walk_of_a_missing_level_is_none_and_makes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "post"
    assert files.walk(root, "inbox") is None
    files.make_root(root).close()
    assert files.walk(root, "inbox", "s-0123456789ab") is None
    assert list(root.iterdir()) == []


@pytest.mark.parametrize("reach", ["walk", "make"])
def test_a_symlink_where_a_folder_should_be_is_refused(
    tmp_path: Path, outside: Path, reach: str
) -> None:
    outside.chmod(0o700)
    root = tmp_path / "post"
    root.mkdir(mode=0o700)
    (root / "inbox").symlink_to(outside)
    (outside / "s-0123456789ab").mkdir(mode=0o700)
    with pytest.raises(files.UnsafePath) as refused:
        getattr(files, reach)(root, "inbox", "s-0123456789ab")
    assert "symlink is never followed" in str(refused.value.strerror)
    assert refused.value.errno in (errno.ELOOP, errno.ENOTDIR)  # as the system said it
    assert refused.value.filename == str(root / "inbox")
    assert [p.name for p in outside.iterdir()] == ["s-0123456789ab"]


def test_a_symlinked_root_is_never_written_through(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "post"
    root.symlink_to(outside)
    with pytest.raises(files.UnsafePath):
        files.make(root, "registry")
    assert list(outside.iterdir()) == []


def test_a_file_where_a_folder_should_be_is_refused(here: files.Folder, tmp_path: Path) -> None:
    (tmp_path / "inbox").write_text("not a folder")
    with pytest.raises(files.UnsafePath):
        here.make("inbox")
    with pytest.raises(files.UnsafePath):
        here.child("inbox")


def test_an_open_folder_is_used_by_descriptor_not_by_its_path(
    tmp_path: Path, outside: Path
) -> None:
    """A folder swapped for a symlink after it was opened: what pipost writes still
    lands in the folder it opened and checked, never behind the link."""
    root = tmp_path / "post"
    with files.make(root, "inbox") as inbox:
        (root / "inbox").rename(tmp_path / "moved")
        (root / "inbox").symlink_to(outside)
        inbox.write_new("letter.json", b"{}")
        assert inbox.names() == ["letter.json"]
    assert list(outside.iterdir()) == []
    assert (tmp_path / "moved" / "letter.json").read_bytes() == b"{}"


def test_remove_empty_removes_only_an_empty_folder(here: files.Folder, tmp_path: Path) -> None:
    empty, full = tmp_path / "empty", tmp_path / "full"
    empty.mkdir()
    full.mkdir()
    (full / "letter.json").write_text("{}")
    assert here.remove_empty("empty") is True
    assert not empty.exists()
    assert here.remove_empty("full") is False
    assert (full / "letter.json").exists()
    assert here.remove_empty("never-was") is False


def test_names_lists_the_folder(here: files.Folder, tmp_path: Path) -> None:
    assert here.names() == []
    (tmp_path / "a").write_text("")
    assert here.names() == ["a"]


# -- writing ------------------------------------------------------------------------


def test_write_new_writes_0600_and_never_replaces(here: files.Folder, tmp_path: Path) -> None:
    path = tmp_path / "letter.json"
    here.write_new("letter.json", b"first")
    assert path.read_bytes() == b"first"
    assert mode_of(path) == 0o600
    with pytest.raises(FileExistsError):
        here.write_new("letter.json", b"second")
    assert path.read_bytes() == b"first"


def test_write_new_writes_large_data_whole(here: files.Folder, tmp_path: Path) -> None:
    data = os.urandom(1 << 20)
    here.write_new("big", data, durable=False)
    assert (tmp_path / "big").read_bytes() == data


@pytest.mark.parametrize("dangling", [False, True])
def test_write_new_never_writes_through_a_symlink(
    here: files.Folder, tmp_path: Path, outside: Path, dangling: bool
) -> None:
    target = outside / "target"
    if not dangling:
        target.write_bytes(b"untouched")
    (tmp_path / "letter.json").symlink_to(target)
    with pytest.raises(OSError):
        here.write_new("letter.json", b"payload")
    if dangling:
        assert not target.exists()
    else:
        assert target.read_bytes() == b"untouched"


def test_write_new_leaves_nothing_behind_when_the_flush_fails(
    here: files.Folder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError) as raised:
        here.write_new("letter.json.tmp", b"payload")
    assert raised.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []


def test_rename_then_flush_moves_the_file(here: files.Folder, tmp_path: Path) -> None:
    here.write_new("a.tmp", b"data")
    here.rename("a.tmp", "a.json")
    here.flush()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]


def test_rename_into_another_folder(here: files.Folder, tmp_path: Path) -> None:
    here.write_new("a.json", b"data")
    with here.make("aside") as aside:
        here.rename("a.json", "kept.json", into=aside)
    assert (tmp_path / "aside" / "kept.json").read_bytes() == b"data"
    assert not (tmp_path / "a.json").exists()


def test_open_append_never_follows_a_symlink(
    here: files.Folder, tmp_path: Path, outside: Path
) -> None:
    (tmp_path / "drops.jsonl").symlink_to(outside / "log")
    with pytest.raises(OSError):
        here.open_append("drops.jsonl")
    assert list(outside.iterdir()) == []


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


def test_the_lock_excludes_other_holders_until_the_block_ends(
    here: files.Folder, tmp_path: Path
) -> None:
    with here.lock():
        assert not lock_is_free(tmp_path)
    assert lock_is_free(tmp_path)


def test_the_lock_is_released_when_the_block_raises(here: files.Folder, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), here.lock():
        raise RuntimeError("inside")
    assert lock_is_free(tmp_path)


def test_the_lock_of_a_folder_removed_while_waiting_is_vanished(tmp_path: Path) -> None:
    folder = tmp_path / "inbox"
    folder.mkdir(mode=0o700)
    waiting = files.walk(tmp_path, "inbox")
    assert waiting is not None

    def lock() -> None:
        with waiting, waiting.lock():
            pass

    with pytest.raises(files.Vanished):
        removed_while_awaited(folder, lock)


# -- claiming a file --------------------------------------------------------------------


def test_try_lock_is_exclusive_while_held(here: files.Folder, tmp_path: Path) -> None:
    (tmp_path / "letter.json").write_bytes(b"data")
    first = here.try_lock("letter.json")
    assert first is not None
    assert here.try_lock("letter.json") is None
    first.close()
    again = here.try_lock("letter.json")
    assert again is not None
    again.close()


def test_try_lock_of_a_missing_file_is_none(here: files.Folder) -> None:
    assert here.try_lock("gone.json") is None


def test_try_lock_refuses_a_symlink(here: files.Folder, tmp_path: Path, outside: Path) -> None:
    target = outside / "real.json"
    target.write_bytes(b"data")
    (tmp_path / "letter.json").symlink_to(target)
    with pytest.raises(files.UnsafePath):
        here.try_lock("letter.json")


def test_try_lock_refuses_a_fifo_without_blocking(here: files.Folder, fifo: Path) -> None:
    raised: list[BaseException] = []

    def claim() -> None:
        try:
            here.try_lock(fifo.name)
        except BaseException as error:
            raised.append(error)

    run_bounded(threading.Thread(target=claim), fifo)
    assert len(raised) == 1
    assert isinstance(raised[0], files.UnsafePath)


def test_try_lock_of_a_letter_disposed_while_locking_is_none(
    here: files.Folder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
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
    assert here.try_lock("letter.json") is None


def test_a_claim_read_is_bounded(here: files.Folder, tmp_path: Path) -> None:
    (tmp_path / "big.json").write_bytes(b"x" * 100_000)
    handle = here.try_lock("big.json")
    assert handle is not None
    try:
        assert handle.read(1000) == b"x" * 1001
    finally:
        handle.close()


# -- bounded reads ----------------------------------------------------------------------


def test_read_bounded_reads_at_most_one_byte_past_the_limit(
    here: files.Folder, tmp_path: Path
) -> None:
    (tmp_path / "small").write_bytes(b"abc")
    (tmp_path / "large").write_bytes(b"y" * 200_000)
    assert here.read_bounded("small", 10) == b"abc"
    assert here.read_bounded("large", 150_000) == b"y" * 150_001


def test_read_bounded_of_a_missing_file_is_none(here: files.Folder) -> None:
    assert here.read_bounded("missing", 10) is None


def test_read_bounded_refuses_a_symlink(here: files.Folder, tmp_path: Path, outside: Path) -> None:
    (outside / "secret").write_bytes(b"secret")
    (tmp_path / "record.json").symlink_to(outside / "secret")
    with pytest.raises(files.UnsafePath) as refused:
        here.read_bounded("record.json", 100)
    assert (refused.value.errno, refused.value.strerror, refused.value.filename) == (
        errno.ELOOP,
        "a symlink is never followed",
        str(tmp_path / "record.json"),
    )


def test_read_bounded_refuses_a_folder(here: files.Folder, tmp_path: Path) -> None:
    (tmp_path / "record.json").mkdir()
    with pytest.raises(files.UnsafePath) as refused:
        here.read_bounded("record.json", 100)
    assert (refused.value.errno, refused.value.strerror, refused.value.filename) == (
        errno.EINVAL,
        "not a regular file",
        str(tmp_path / "record.json"),
    )


def test_read_bounded_refuses_a_fifo_without_blocking(here: files.Folder, fifo: Path) -> None:
    raised: list[BaseException] = []

    def read() -> None:
        try:
            here.read_bounded(fifo.name, 100)
        except BaseException as error:
            raised.append(error)

    run_bounded(threading.Thread(target=read), fifo)
    assert len(raised) == 1
    assert isinstance(raised[0], files.UnsafePath)


def readers(here: files.Folder) -> list[Callable[[str], object]]:
    """Every way pipost opens a file to read it: a peek, a claim, a record."""
    return [lambda name: here.read_bounded(name, 100), here.try_lock, here.open_file]


@pytest.mark.parametrize("reading", range(3))
def test_a_socket_named_like_a_letter_is_refused_as_no_regular_file(
    here: files.Folder, tmp_path: Path, reading: int
) -> None:
    """A socket cannot be opened (ENXIO): it is refused as what it is, no regular
    file, like a FIFO, and not as an error of the system that stops the reader."""
    with unix_socket(tmp_path / "socket.json"), pytest.raises(files.UnsafePath) as raised:
        readers(here)[reading]("socket.json")
    assert raised.value.strerror == "not a regular file"
    assert raised.value.filename == str(tmp_path / "socket.json")


def test_a_device_node_no_driver_answers_is_refused_as_no_regular_file(
    here: files.Folder, tmp_path: Path
) -> None:
    driverless_device(tmp_path / "device.json")
    with pytest.raises(OSError) as opened:  # what the system says of it
        os.close(os.open(tmp_path / "device.json", os.O_RDONLY | os.O_NONBLOCK))
    assert opened.value.errno in (errno.ENXIO, errno.ENODEV)
    for reading in readers(here):
        with pytest.raises(files.UnsafePath) as raised:
            reading("device.json")
        assert raised.value.strerror == "not a regular file"


def test_a_file_that_cannot_be_opened_is_still_the_system_s_error(
    here: files.Folder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only what is no regular file is refused as such: a regular file the system
    will not open (an I/O error) keeps the system's error, for the caller to say."""
    (tmp_path / "letter.json").write_bytes(b"{}")
    real_open = os.open

    def failing(path: str, flags: int, *args: object, **kwargs: object) -> int:
        if path == "letter.json":
            raise OSError(errno.EIO, "Input/output error")
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", failing)
    with pytest.raises(OSError) as raised:
        here.read_bounded("letter.json", 10)
    assert not isinstance(raised.value, files.UnsafePath)
    assert raised.value.errno == errno.EIO


def test_open_append_refuses_a_fifo_without_waiting_for_a_reader(
    here: files.Folder, fifo: Path
) -> None:
    raised: list[BaseException] = []

    def append() -> None:
        try:
            os.close(here.open_append(fifo.name))
        except BaseException as error:
            raised.append(error)

    run_bounded(threading.Thread(target=append), fifo)
    assert len(raised) == 1
    assert isinstance(raised[0], files.UnsafePath)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_open_append_refuses_a_fifo_that_has_a_reader(here: files.Folder, fifo: Path) -> None:
    """With a reader the FIFO opens at once: it is still no log, and refused."""
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(files.UnsafePath):
            here.open_append(fifo.name)
    finally:
        os.close(reader)


def test_open_append_refuses_a_socket(here: files.Folder, tmp_path: Path) -> None:
    with unix_socket(tmp_path / "drops.jsonl"), pytest.raises(files.UnsafePath):
        here.open_append("drops.jsonl")


# -- locks held past the bound ------------------------------------------------------------


def test_a_folder_lock_held_by_a_stopped_process_is_given_up_naming_it(
    here: files.Folder, tmp_path: Path, short_bound: float
) -> None:
    def lock() -> None:
        with here.lock():
            pass

    with frozen_holder(tmp_path) as pid:
        raised = not_blocked(lock)
    assert isinstance(raised, files.LockTimeout), raised
    assert raised.filename == str(tmp_path)
    assert f"locked by pid {pid} for more than 0.2 s" in str(raised.strerror)
    assert f"kill -CONT {pid}" in str(raised.strerror)
    assert lock_is_free(tmp_path), "the lock is still held after giving up"
    with here.lock():  # and it is taken again once the holder is gone
        assert not lock_is_free(tmp_path)


def test_a_listener_s_lock_file_held_by_a_stopped_reader_is_given_up(
    here: files.Folder, tmp_path: Path, short_bound: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between making its lock file and locking it, a listener may meet a reader
    asking whether it is held (a shared lock, for a moment): one frozen right then is
    waited for no longer than the bound, and the file made for the lock is gone."""
    holders = contextlib.ExitStack()
    pids: list[int] = []
    real_open = os.open

    def made_then_read_by_a_frozen_reader(path: str, flags: int, *args: Any, **kwargs: Any) -> int:
        fd = real_open(path, flags, *args, **kwargs)
        if path == "1.abcd.lock":
            pids.append(holders.enter_context(frozen_holder(tmp_path / path, shared=True)))
        return fd

    monkeypatch.setattr(os, "open", made_then_read_by_a_frozen_reader)
    with holders:
        raised = not_blocked(lambda: here.create_locked("1.abcd.lock"))
    assert isinstance(raised, files.LockTimeout), raised
    assert f"locked by pid {pids[0]} " in str(raised.strerror)
    assert not (tmp_path / "1.abcd.lock").exists()


def test_the_holders_of_a_lock_are_read_from_the_kernel_s_table() -> None:
    """/proc/locks: the holders of the file's lock, not its waiters ("->"), not the
    holders of another file or of the same inode on another device."""
    table = (
        "1: FLOCK  ADVISORY  WRITE 4242 fe:00:2146867 0 EOF\n"
        "1: -> FLOCK  ADVISORY  WRITE 5353 fe:00:2146867 0 EOF\n"
        "2: FLOCK  ADVISORY  READ 4343 fe:00:2146867 0 EOF\n"
        "3: FLOCK  ADVISORY  WRITE 6464 fe:00:2146868 0 EOF\n"
        "4: FLOCK  ADVISORY  WRITE 7575 00:2c:2146867 0 EOF\n"
        "5: OFDLCK ADVISORY  WRITE -1 fe:00:2146867 0 EOF\n"
        "6: FLOCK  ADVISORY  WRITE 0 fe:00:2146867 0 EOF\n"
        "garbage\n"
    )
    assert files.holders_in(table, 0xFE, 0, 2146867) == [4242, 4343]
    assert files.holders_in(table, 0, 0x2C, 2146867) == [7575]
    assert files.holders_in(table, 0xFE, 0, 1) == []


def test_a_lock_whose_holder_cannot_be_found_says_another_process(
    here: files.Folder, tmp_path: Path, short_bound: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "LOCKS_TABLE", str(tmp_path / "no-such-table"))

    def lock() -> None:
        with here.lock():
            pass

    with frozen_holder(tmp_path):
        raised = not_blocked(lock)
    assert isinstance(raised, files.LockTimeout)
    assert raised.strerror == "locked by another process for more than 0.2 s"


# -- whose folders: ownership and modes (SPEC 10) ---------------------------------------


def test_a_missing_root_is_no_error_for_readers(tmp_path: Path) -> None:
    assert files.check_root(tmp_path / "post") is False
    assert files.open_root(tmp_path / "post") is None
    assert not (tmp_path / "post").exists()


def test_make_creates_the_root_and_its_missing_parents_private(tmp_path: Path) -> None:
    root = tmp_path / "home" / ".pi" / "agent" / "post"
    files.make(root, "inbox").close()
    made = [tmp_path / "home", tmp_path / "home" / ".pi", root.parent, root, root / "inbox"]
    assert [mode_of(folder) for folder in made] == [0o700] * len(made)
    assert mode_of(tmp_path) == 0o700  # as pytest made it: a parent that stood is left


def test_the_root_s_parents_that_stand_are_not_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_mkdir = os.mkdir
    made: list[str] = []

    def recorded(path: str, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        if dir_fd is None:
            made.append(path)
        real_mkdir(path, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "mkdir", recorded)
    files.make_root(tmp_path / "home" / ".pi" / "post").close()
    assert made == [str(tmp_path / "home"), str(tmp_path / "home" / ".pi")]


def test_a_root_in_a_folder_its_user_may_enter_but_not_list_is_opened() -> None:
    """Like a home folder of mode 0711: the root is reached by its path."""
    with unprivileged_scratch() as scratch:
        (scratch / "home" / "post").mkdir(parents=True, mode=0o700)
        give_to_unprivileged(scratch)
        (scratch / "home").chmod(0o311)
        make_root = "import sys; from pipost import files; files.make_root(sys.argv[1])"
        made = subprocess.run(
            [*unprivileged_python(make_root), str(scratch / "home" / "post")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert made.returncode == 0, made.stderr


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702, 0o720])
def test_a_root_others_can_write_is_refused_with_the_fix(tmp_path: Path, mode: int) -> None:
    root = tmp_path / "post"
    root.mkdir()
    root.chmod(mode)
    with pytest.raises(files.UnsafePath) as refused:
        files.check_root(root)
    assert (refused.value.errno, refused.value.strerror) == (
        errno.EPERM,
        f"writable by others (mode {mode:04o}); make it private: chmod 700 {root}",
    )
    with pytest.raises(files.UnsafePath):
        files.make(root, "inbox")
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
    assert refused.value.strerror == (
        f"owned by uid {owner}, not by you (uid {owner + 4242}); "
        "pi-post only uses folders of your own"
    )
    assert (refused.value.errno, refused.value.filename) == (errno.EPERM, str(root))


def test_a_symlinked_root_is_refused_not_followed(tmp_path: Path, outside: Path) -> None:
    outside.chmod(0o700)
    root = tmp_path / "post"
    root.symlink_to(outside)
    with pytest.raises(files.UnsafePath) as refused:
        files.check_root(root)
    assert (refused.value.errno, refused.value.strerror, refused.value.filename) == (
        errno.ELOOP,
        "a symlink, which pi-post never follows; point PI_POST_DIR at the real folder",
        str(root),
    )
    with pytest.raises(files.UnsafePath):
        files.make(root, "inbox")
    assert list(outside.iterdir()) == []


def test_only_the_trailing_slashes_of_a_root_are_dropped(tmp_path: Path, outside: Path) -> None:
    """ "post/" would follow the link "post" despite O_NOFOLLOW: the slashes go, and
    nothing else does."""
    outside.chmod(0o700)
    linked = tmp_path / "post"
    linked.symlink_to(outside)
    with pytest.raises(files.UnsafePath) as refused:
        files.check_root(f"{linked}//")
    assert (refused.value.errno, refused.value.filename) == (errno.ELOOP, str(linked))
    real = tmp_path / "boX"
    real.mkdir(mode=0o700)
    assert files.check_root(f"{real}/") is True
    assert [files.root_path(root) for root in ("/", "///")] == ["/", "/"]


def test_a_root_that_is_a_file_is_refused_as_not_a_folder(tmp_path: Path) -> None:
    root = tmp_path / "post"
    root.write_bytes(b"")
    with pytest.raises(files.UnsafePath) as refused:
        files.check_root(root)
    assert (refused.value.errno, refused.value.strerror, refused.value.filename) == (
        errno.ENOTDIR,
        "not a folder",
        str(root),
    )


def test_a_group_writable_mailbox_folder_is_refused_when_opened(tmp_path: Path) -> None:
    folder = tmp_path / "inbox"
    folder.mkdir(mode=0o700)
    folder.chmod(0o770)
    with pytest.raises(files.UnsafePath):
        files.walk(tmp_path, "inbox")


WHY_UNWRITABLE_WITH_ANOTHER_EFFECTIVE_UID = """
import os, sys
from pipost import files
folder = files.open_root(sys.argv[1])
os.setresuid(0, int(sys.argv[2]), 0)
said = folder.why_unwritable()
os.setresuid(0, 0, 0)  # root again, to leave as it came (coverage writes its data then)
print(said)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="only root sets a real uid apart from the effective")
def test_a_folder_is_judged_writable_by_the_effective_uid_not_the_real_one(tmp_path: Path) -> None:
    """What a process may unlink is decided by its effective uid: one whose real uid is
    root but whose effective uid is not is told its folder is read-only for it."""
    nobody = 65534
    asked = [sys.executable, "-c", WHY_UNWRITABLE_WITH_ANOTHER_EFFECTIVE_UID, str(tmp_path)]
    said = subprocess.run(
        [*asked, str(nobody)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    assert said.startswith(f"read-only for uid {nobody}")


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Every os.read of the test: the size asked for, and how many bytes came."""
    real_read = os.read
    seen: list[tuple[int, int]] = []

    def recorded(fd: int, size: int) -> bytes:
        chunk = real_read(fd, size)
        seen.append((size, len(chunk)))
        return chunk

    monkeypatch.setattr(os, "read", recorded)
    return seen


@pytest.mark.parametrize(("limit", "read"), [(1000, b"{}" * 100), (10, b"{}" * 5 + b"{")])
def test_a_read_takes_one_call_for_a_file_smaller_than_a_chunk(
    here: files.Folder, tmp_path: Path, reads: list[tuple[int, int]], limit: int, read: bytes
) -> None:
    """A record or a letter is read in one call, not one more to learn of the end; an
    oversize one too, once it has the byte past the limit that tells it is oversize."""
    (tmp_path / "record.json").write_bytes(b"{}" * 100)
    handle = here.open_file("record.json")
    assert handle is not None
    try:
        assert handle.read(limit) == read
    finally:
        handle.close()
    assert [asked for asked, _ in reads] == [limit + 1]


# -- what the system refuses is said as itself -------------------------------------------

REFUSALS_AS_NOBODY = """
import errno, sys
from pipost import files

scratch = sys.argv[1]

def said(action):
    try:
        result = action()
    except OSError as error:
        return f"{type(error).__name__} {errno.errorcode[error.errno]}"
    return f"returned {result!r}"

post = files.open_root(scratch + "/post")
print("root in a closed folder:", said(lambda: files.open_root(scratch + "/closed/post")))
with post.child("unsearchable") as unsearchable:
    print("folder in an unsearchable one:", said(lambda: unsearchable.child("inner")))
print("file without read permission:", said(lambda: post.open_file("letter.json")))
with post.child("read-only") as read_only:
    print("folder in a read-only one:", said(lambda: read_only.remove_empty("empty")))
"""


def test_what_the_system_refuses_is_said_as_that_not_as_a_link_or_an_absence() -> None:
    """A folder or file pipost may not reach, for want of a permission, is neither
    refused as a symlink nor taken for missing: the caller gets the system's error
    (the command line says it; a receiver sets such a letter aside as unreadable)."""
    with unprivileged_scratch() as scratch:
        (scratch / "closed" / "post").mkdir(parents=True, mode=0o700)
        post = scratch / "post"
        (post / "unsearchable" / "inner").mkdir(parents=True, mode=0o700)
        (post / "read-only" / "empty").mkdir(parents=True, mode=0o700)
        (post / "letter.json").write_bytes(b"{}")
        give_to_unprivileged(scratch)
        (scratch / "closed").chmod(0o600)
        (post / "unsearchable").chmod(0o600)
        (post / "read-only").chmod(0o500)
        (post / "letter.json").chmod(0o000)
        shown = subprocess.run(
            [*unprivileged_python(REFUSALS_AS_NOBODY), str(scratch)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        assert (post / "read-only" / "empty").is_dir()
    assert shown.splitlines() == [
        "root in a closed folder: PermissionError EACCES",
        "folder in an unsearchable one: PermissionError EACCES",
        "file without read permission: PermissionError EACCES",
        "folder in a read-only one: PermissionError EACCES",
    ]


def test_a_folder_swept_away_between_its_making_and_its_opening_is_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "post"
    files.make(root, "inbox").close()
    mailbox = root / "inbox" / "s-0123456789ab"
    opened = files.Folder.child
    swept: list[str] = []

    def swept_first(folder: files.Folder, name: str) -> files.Folder | None:
        if name == mailbox.name and not swept:
            swept.append(name)
            mailbox.rmdir()  # a sweep removes the empty mailbox just made
        return opened(folder, name)

    monkeypatch.setattr(files.Folder, "child", swept_first)
    with files.make(root, "inbox", mailbox.name) as made:
        assert made.path == str(mailbox)
    assert swept == [mailbox.name]
    assert mailbox.is_dir()


def test_a_write_whose_cleanup_fails_too_says_the_write_s_error(
    here: files.Folder, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    def unlink_refused(name: str, *, dir_fd: int) -> None:
        raise OSError(errno.EROFS, "Read-only file system", name)

    monkeypatch.setattr(os, "fsync", disk_full)
    monkeypatch.setattr(os, "unlink", unlink_refused)
    with pytest.raises(OSError) as raised:
        here.write_new("letter.json.tmp", b"payload")
    assert raised.value.errno == errno.ENOSPC


@pytest.mark.parametrize("locking", ["try_lock", "create_locked"])
def test_a_lock_the_file_system_refuses_leaves_nothing_open_or_behind(
    here: files.Folder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, locking: str
) -> None:
    """flock refused (ENOLCK: a file system without locks): the error is the caller's,
    no descriptor stays open, and a lock file made for the lock is gone again."""
    if locking == "try_lock":
        (tmp_path / "letter.json").write_bytes(b"{}")
    before = sorted(os.listdir(tmp_path))
    descriptors = open_descriptors()

    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with pytest.raises(OSError) as raised:
        getattr(here, locking)("letter.json" if locking == "try_lock" else "1.abcd.lock")
    assert raised.value.errno == errno.ENOLCK
    assert open_descriptors() == descriptors
    assert sorted(os.listdir(tmp_path)) == before


def test_create_locked_never_takes_over_a_file_or_writes_through_a_symlink(
    here: files.Folder, tmp_path: Path, outside: Path
) -> None:
    """A listener's lock file is its own: one already there, a listener's or a link
    to elsewhere, is refused and left as it was (INV-22)."""
    (tmp_path / "1.abcd.lock").write_bytes(b"someone's")
    (tmp_path / "2.abcd.lock").symlink_to(outside / "target")
    for name in ("1.abcd.lock", "2.abcd.lock"):
        with pytest.raises(FileExistsError):
            here.create_locked(name)
    assert (tmp_path / "1.abcd.lock").read_bytes() == b"someone's"
    assert list(outside.iterdir()) == []
    umask = os.umask(0o022)  # a umask that lets more through: the mode is still 0600
    try:
        held = here.create_locked("3.abcd.lock")
    finally:
        os.umask(umask)
    assert mode_of(tmp_path / "3.abcd.lock") == 0o600
    held.close()


def test_a_file_that_is_gone_is_held_by_no_one(here: files.Folder, tmp_path: Path) -> None:
    held = here.create_locked("1.abcd.lock")
    assert here.is_held("1.abcd.lock")
    os.unlink(tmp_path / "1.abcd.lock")
    assert not here.is_held("1.abcd.lock")
    held.close()


def test_an_open_file_closed_twice_closes_once(here: files.Folder, tmp_path: Path) -> None:
    """A second close is harmless: it raises nothing, and closes nothing (not the
    descriptor that reused the number)."""
    (tmp_path / "letter.json").write_bytes(b"{}")
    handle = here.open_file("letter.json")
    assert handle is not None
    handle.close()
    reused = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        handle.close()
        os.fstat(reused)
    finally:
        os.close(reused)


CLOSE_A_FILE_OPENED_AS_DESCRIPTOR_0 = """
import errno, os, sys
from pipost import files
def closed_as(fd):
    try:
        os.fstat(fd)
    except OSError as error:
        return errno.errorcode[error.errno]

with files.open_root(sys.argv[1]) as folder:
    os.close(0)  # as in a process started with its standard input closed
    handle = folder.open_file("letter.json")
    assert handle.fd == 0, handle.fd
    handle.close()
    print(closed_as(0))
folder = files.open_root(sys.argv[1])  # descriptor 0 is free again
assert folder.fd == 0, folder.fd
folder.close()
print(closed_as(0))
"""


def test_a_file_or_folder_that_got_descriptor_0_is_closed_too(tmp_path: Path) -> None:
    """A process started without standard input gets descriptor 0 for the first file or
    folder it opens: closing that handle closes it (a claim's lock would be held on
    otherwise)."""
    (tmp_path / "letter.json").write_bytes(b"{}")
    said = subprocess.run(
        [sys.executable, "-c", CLOSE_A_FILE_OPENED_AS_DESCRIPTOR_0, str(tmp_path)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert said.stdout.split() == ["EBADF", "EBADF"]


def test_a_file_larger_than_a_chunk_is_read_with_no_read_that_only_says_it_ended(
    here: files.Folder, tmp_path: Path, reads: list[tuple[int, int]]
) -> None:
    (tmp_path / "letter.json").write_bytes(b"x" * 100_000)
    handle = here.open_file("letter.json")
    assert handle is not None
    try:
        assert handle.read(200_000) == b"x" * 100_000
    finally:
        handle.close()
    assert 0 not in [came for _, came in reads]
