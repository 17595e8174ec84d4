"""The thin I/O layer: every write, rename, flush and lock pipost makes on disk.

Kept apart so that the decisions stay pure and so that tests can stand between
pipost and the disk (to record what was flushed, or to fail a write). The rules
here are the maildir rules: create exclusively, flush the file, rename into
place, flush the folder; never follow a symlink where pipost expects a folder
or a file of its own.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from collections.abc import Iterator
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600


class UnsafePath(OSError):
    """A symlink, or something other than what pipost expects, stands at a path."""


class Vanished(OSError):
    """A folder was removed (by a sweep) while we waited for its lock."""


def check_private(path: Path, info: os.stat_result) -> None:
    """Refuse a folder that someone else owns or that others can write into:
    whoever can write there can forge mail or swap in a symlink."""
    uid = os.geteuid()
    if info.st_uid != uid:
        raise UnsafePath(
            errno.EPERM,
            f"owned by uid {info.st_uid}, not by you (uid {uid}); "
            "pi-post only uses folders of your own",
            str(path),
        )
    if info.st_mode & 0o022:
        raise UnsafePath(
            errno.EPERM,
            f"writable by others (mode {stat.S_IMODE(info.st_mode):04o}); "
            f"make it private: chmod 700 {path}",
            str(path),
        )


def check_root(root: Path) -> bool:
    """Refuse an unsafe root folder before anything in it is trusted; False when
    there is no root yet (nothing has been sent or registered)."""
    try:
        info = os.lstat(root)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(info.st_mode):
        raise UnsafePath(
            errno.ELOOP,
            "a symlink, which pi-post never follows; point PI_POST_DIR at the real folder",
            str(root),
        )
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafePath(errno.ENOTDIR, "not a folder", str(root))
    check_private(root, info)
    return True


def ensure_dir(path: Path) -> None:
    """Create ``path`` (0700) if missing; refuse a symlink, a non-folder, or a
    folder that is not private."""
    while True:
        try:
            os.mkdir(path, DIR_MODE)
        except FileExistsError:
            pass
        else:
            flush_dir(path.parent)  # the new name in its parent must survive power loss
            return
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue  # an empty mailbox swept away since mkdir saw it: make it again
        if not stat.S_ISDIR(info.st_mode):
            raise UnsafePath(errno.ENOTDIR, "not a folder (a symlink is never followed)", str(path))
        check_private(path, info)
        return


def ensure_dirs(root: Path, *parts: str) -> Path:
    """``root/parts...``, each level created 0700 and checked, the root included
    (its missing parents too, as ``~/.pi/agent`` may not exist yet)."""
    if not check_root(root):
        os.makedirs(root.parent, DIR_MODE, exist_ok=True)
        ensure_dir(root)
    path = root
    for part in parts:
        path = path / part
        ensure_dir(path)
    return path


def write_new(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write a file that must not exist yet (O_EXCL, never through a symlink);
    on any failure nothing is left behind."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    os.close(fd)


def rename(source: Path, target: Path) -> None:
    os.rename(source, target)


def unlink(path: Path) -> None:
    os.unlink(path)


def flush_dir(path: Path) -> None:
    """Make a rename or unlink in ``path`` survive power loss."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_empty_dir(path: Path) -> bool:
    """rmdir; False when the folder is not empty (a racing deposit) or gone."""
    try:
        os.rmdir(path)
    except OSError as error:
        if error.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
            return False
        raise
    return True


def list_names(path: Path) -> list[str]:
    """Names in a folder; an absent folder is empty. A symlink standing where the
    folder should be is refused, not followed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return []
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafePath(
                error.errno, "not a folder (a symlink is never followed)", str(path)
            ) from None
        raise
    try:
        check_private(path, os.fstat(fd))
        return os.listdir(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def locked_dir(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the folder itself while the block runs.

    Deposits count and rename under it, and a sweep removes the folder under it;
    a deposit that wakes up holding the lock of a removed folder gets Vanished
    and starts again. The kernel drops the lock if the holder dies."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise Vanished(errno.ENOENT, "folder vanished", str(path)) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.fstat(fd).st_nlink == 0:
            raise Vanished(errno.ENOENT, "folder vanished", str(path))
        yield
    finally:
        os.close(fd)  # closing releases the lock


class OpenFile:
    """An open descriptor. From try_lock_file it also holds the exclusive lock of a
    claim, which lives as long as the descriptor: the kernel releases it when the
    holder dies, so a crashed receiver never strands a message."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def read(self, limit: int) -> bytes:
        """At most ``limit + 1`` bytes, so an oversize file is noticed, never read whole."""
        chunks: list[bytes] = []
        remaining = limit + 1
        while remaining > 0:
            chunk = os.read(self.fd, min(remaining, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def try_lock_file(path: Path) -> OpenFile | None:
    """Lock ``path`` exclusively, or None if another holder has it or it is gone.

    Raises UnsafePath for a symlink or a non-regular file (a FIFO never blocks us:
    it is opened non-blocking and refused)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UnsafePath(error.errno, "a symlink is never followed", str(path)) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePath(errno.EINVAL, "not a regular file", str(path))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        if os.fstat(fd).st_nlink == 0:  # disposed by the holder we waited behind
            os.close(fd)
            return None
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise
    return OpenFile(fd)


def read_bounded(path: Path, limit: int) -> bytes | None:
    """Read a regular file without following symlinks, at most ``limit + 1`` bytes;
    None when it is missing. Raises UnsafePath for a symlink or a non-file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UnsafePath(error.errno, "a symlink is never followed", str(path)) from None
        raise
    handle = OpenFile(fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafePath(errno.EINVAL, "not a regular file", str(path))
        return handle.read(limit)
    finally:
        handle.close()
