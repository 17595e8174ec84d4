"""The thin I/O layer: every open, write, rename, flush and lock pipost makes on disk.

Kept apart so that the decisions stay pure and so that tests can stand between
pipost and the disk (to record what was flushed, or to fail a write). The rules
here are the maildir rules: create exclusively, flush the file, rename into
place, flush the folder.

Nothing below the root is reached by a path. The root is opened once, without
following a symlink, and checked; every folder and file under it is then opened
relative to the descriptor of the folder that holds it, again without following
a symlink (INV-22). So a symlink swapped in for ``inbox/`` or a mailbox after a
check is refused, never followed, and a path is never walked twice. Paths are
kept only to name things in messages.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import TracebackType
    from typing import Self

StrPath = str | os.PathLike[str]
"""The root as callers hold it; nothing below it is reached by a path."""

DIR_MODE = 0o700
FILE_MODE = 0o600

_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
# A FIFO or a device opened non-blocking never stalls us; it is refused after fstat.
# A terminal named like a letter must not become this process's controlling one.
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
_APPEND = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY

LOCK_WAIT_S = 5.0
"""How long pipost waits for a lock before it gives up, naming the holder. A deposit,
a sweep of one mailbox, a line of the drop log, a listener joining hold theirs for
milliseconds (an fsync or two); a holder still there after this long is stopped or
stuck, and waiting on would block a sender, a sweep or a listener without limit."""
LOCK_POLL_S = 0.005
"""Between two tries of a lock that is held: short, and the same for every waiter,
so that none is favoured for having waited less."""


class UnsafePath(OSError):
    """A symlink, or something other than what pipost expects, stands at a path."""


class Vanished(OSError):
    """A folder was removed (by a sweep) while we waited for its lock."""


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data``: a disk that fills takes part of a write and
    says so only at the next one (ENOSPC, EFBIG), which is raised."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


_WRITE_FIXES = {
    errno.ENOSPC: "its disk is full (free some space on it)",
    errno.EDQUOT: "the disk quota is used up (free some space, or raise the quota)",
    errno.EFBIG: "it reached the file size limit (raise it: ulimit -f)",
    errno.EROFS: "its file system is read-only (remount it read-write)",
}


def write_trouble(what: str, error: OSError) -> str:
    """Why ``what`` could not be written, and the fix where the cause has a usual one."""
    cause = _WRITE_FIXES.get(error.errno or 0) or error.strerror or str(error)
    return f"{what} cannot be written: {cause}"


class LockTimeout(OSError):
    """A lock another process still held when LOCK_WAIT_S had passed."""


def hold_lock(fd: int, path: str, *, shared: bool = False) -> None:
    """Take the ``flock`` of ``fd`` (exclusive, or shared), waiting at most LOCK_WAIT_S;
    then LockTimeout, naming the holder where the system says who it is. Tried
    without blocking, again and again, so the wait has a bound and a signal handler
    that asks to stop is heard within it."""
    operation = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        left = deadline - time.monotonic()
        if left <= 0:
            raise LockTimeout(errno.ETIMEDOUT, _held_by(lock_holders(fd)), path)
        time.sleep(min(LOCK_POLL_S, left))


def _held_by(pids: list[int]) -> str:
    """What a LockTimeout says: who holds the lock, and what to do about it."""
    waited = f"for more than {LOCK_WAIT_S:g} s"
    if not pids:
        return f"locked by another process {waited}"
    shown = ", ".join(map(str, pids))
    return (
        f"locked by pid {shown} {waited}; if it is stopped, resume it (kill -CONT {shown}) "
        "or end it"
    )


LOCKS_TABLE = "/proc/locks"
"""Where Linux lists the locks held, with their holders' pids; elsewhere the holder
of a lock is not said."""


def lock_holders(fd: int) -> list[int]:
    """The pids holding a lock on the file ``fd`` is open on, from LOCKS_TABLE; empty
    where the system does not say (another system, another file system)."""
    info = os.fstat(fd)
    try:
        with open(LOCKS_TABLE, encoding="ascii", errors="replace") as table:
            text = table.read()
    except OSError:
        return []
    return holders_in(text, os.major(info.st_dev), os.minor(info.st_dev), info.st_ino)


def holders_in(table: str, major: int, minor: int, inode: int) -> list[int]:
    """The pids that hold (not await) a lock on the file ``major:minor:inode`` in the
    text of /proc/locks: ``1: FLOCK  ADVISORY  WRITE 4242 fe:00:2146867 0 EOF``, the
    device in hex; a waiter's line has ``->`` after the number."""
    wanted = f"{major:02x}:{minor:02x}:{inode}"
    pids = set()
    for line in table.splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[1] != "->" and fields[5] == wanted:
            pid = fields[4]
            if pid.isdigit() and int(pid) > 0:  # 0: a holder outside our pid namespace
                pids.add(int(pid))
    return sorted(pids)


def privacy_fault(owner: int, mode: int, uid: int) -> str | None:
    """Why a folder is not private to ``uid``: "owner" (someone else's) or "mode"
    (others can write into it); None when it is. Whoever can write there can forge
    mail or swap in a symlink."""
    if owner != uid:
        return "owner"
    if mode & 0o022:
        return "mode"
    return None


def check_private(path: str, info: os.stat_result) -> None:
    """Refuse a folder that is not private (privacy_fault), saying what to fix."""
    uid = os.geteuid()
    fault = privacy_fault(info.st_uid, info.st_mode, uid)
    if fault == "owner":
        raise UnsafePath(
            errno.EPERM,
            f"owned by uid {info.st_uid}, not by you (uid {uid}); "
            "pi-post only uses folders of your own",
            path,
        )
    if fault == "mode":
        raise UnsafePath(
            errno.EPERM,
            f"writable by others (mode {stat.S_IMODE(info.st_mode):04o}); "
            f"make it private: chmod 700 {path}",
            path,
        )


def open_root(root: StrPath) -> Folder | None:
    """Open the root folder, refusing a symlink, a non-folder or a folder that is not
    private; None when there is no root yet (nothing sent or registered)."""
    path = root_path(root)
    try:
        fd = os.open(path, _FOLDER)
    except FileNotFoundError:
        return None
    except OSError as error:
        # O_NOFOLLOW with O_DIRECTORY reports a symlink as ELOOP or as ENOTDIR.
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            if stat.S_ISLNK(os.lstat(path).st_mode):
                raise UnsafePath(
                    errno.ELOOP,
                    "a symlink, which pi-post never follows; point PI_POST_DIR at the real folder",
                    path,
                ) from None
            raise UnsafePath(errno.ENOTDIR, "not a folder", path) from None
        raise
    return Folder.checked(fd, path)


def make_root(root: StrPath) -> Folder:
    """The root folder, made (0700) with its parents if missing: ``~/.pi/agent`` may
    not exist yet."""
    found = open_root(root)
    if found is not None:
        return found
    parent_path, name = os.path.split(os.path.abspath(root_path(root)))
    _make_parents(parent_path)
    # The root's parents are the user's business: they may be links, or /tmp.
    with Folder(os.open(parent_path, os.O_RDONLY | os.O_DIRECTORY), parent_path) as parent:
        return parent.make(name)


def _make_parents(path: str) -> None:
    """Every missing folder of ``path`` made, each 0700 (os.makedirs gives its mode to
    the last one only); one that stands already is left as it is."""
    above = os.path.dirname(path)
    if above != path and not os.path.isdir(above):
        _make_parents(above)
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        if not os.path.isdir(path):
            raise


def root_path(root: StrPath) -> str:
    """The root as a path to open or lstat: "post/" would follow a symlink "post"
    despite O_NOFOLLOW."""
    return os.fspath(root).rstrip("/") or "/"


def check_root(root: StrPath) -> bool:
    """Refuse an unsafe root before anything in it is trusted; False when absent."""
    folder = open_root(root)
    if folder is None:
        return False
    folder.close()
    return True


def walk(root: StrPath, first: str, *rest: str) -> Folder | None:
    """The folder ``root/first/rest...``, each level opened from the one above it;
    None when a level (the root included) is missing."""
    top = open_root(root)
    if top is None:
        return None
    with top:
        return top.walk(first, *rest)


def make(root: StrPath, first: str, *rest: str) -> Folder:
    """The folder ``root/first/rest...``, each missing level made (0700, flushed)."""
    with make_root(root) as top:
        return top.make(first, *rest)


class Folder:
    """An open folder of pipost's tree; names are reached relative to it."""

    __slots__ = ("fd", "path")

    def __init__(self, fd: int, path: str) -> None:
        self.fd = fd
        self.path = path
        """For messages only: nothing is opened by it."""

    @classmethod
    def checked(cls, fd: int, path: str) -> Folder:
        """Take ``fd`` over, closing it if the folder is not private."""
        try:
            check_private(path, os.fstat(fd))
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, path)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def name(self, name: str) -> str:
        """The path of ``name`` in this folder, for messages."""
        return os.path.join(self.path, name)

    # -- folders ------------------------------------------------------------------------

    def child(self, name: str) -> Folder | None:
        """The sub-folder ``name``, or None when absent; a symlink, a file or a folder
        that is not private stands there: UnsafePath."""
        try:
            fd = os.open(name, _FOLDER, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.ENOTDIR):
                raise UnsafePath(
                    error.errno, "not a folder (a symlink is never followed)", self.name(name)
                ) from None
            raise
        return Folder.checked(fd, self.name(name))

    def walk(self, first: str, *rest: str) -> Folder | None:
        """A new Folder for ``first/rest...`` below this one; None when a level is missing."""
        folder = self.child(first)
        for part in rest:
            if folder is None:
                return None
            with folder:
                folder = folder.child(part)
        return folder

    def make(self, first: str, *rest: str) -> Folder:
        """A new Folder for ``first/rest...`` below this one, missing levels made (0700)."""
        folder = self._make_one(first)
        for part in rest:
            with folder:
                folder = folder._make_one(part)
        return folder

    def _make_one(self, name: str) -> Folder:
        while True:
            try:
                os.mkdir(name, DIR_MODE, dir_fd=self.fd)
            except FileExistsError:
                pass
            else:
                self.flush()  # the new name must survive power loss
            made = self.child(name)
            if made is not None:
                return made
            # An empty mailbox swept away since mkdir saw it: make it again.

    def remove_empty(self, name: str) -> bool:
        """rmdir; False when the folder is not empty (a racing deposit) or gone."""
        try:
            os.rmdir(name, dir_fd=self.fd)
        except OSError as error:
            if error.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
                return False
            raise
        return True

    def names(self) -> list[str]:
        return os.listdir(self.fd)

    def lock(self) -> FolderLock:
        """The folder's exclusive lock, for a ``with`` block.

        Deposits count and rename under it, and a sweep removes the folder under
        it; a deposit that wakes up holding the lock of a removed folder gets
        Vanished and starts again. The kernel drops the lock if the holder dies; a
        holder that lives but stops (SIGSTOP) is waited for LOCK_WAIT_S at most
        (LockTimeout)."""
        return FolderLock(self)

    def flush(self) -> None:
        """Make a create, rename or unlink in this folder survive power loss."""
        os.fsync(self.fd)

    def why_unwritable(self) -> str | None:
        """Why this process cannot add or remove names in this folder, with the fix;
        None when it can. The kernel is asked with the effective ids, as it will ask
        when an unlink comes (root passes any mode bits)."""
        if os.access(".", os.W_OK | os.X_OK, dir_fd=self.fd, effective_ids=True):
            return None
        if os.fstatvfs(self.fd).f_flag & os.ST_RDONLY:
            return f"on a read-only file system: remount it read-write ({self.path})"
        return f"read-only for uid {os.geteuid()}: chmod u+w {self.path}"

    # -- files --------------------------------------------------------------------------

    def exists(self, name: str) -> bool:
        try:
            os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True

    def lstat(self, name: str) -> os.stat_result:
        return os.stat(name, dir_fd=self.fd, follow_symlinks=False)

    def write_new(self, name: str, data: bytes, *, durable: bool = True) -> None:
        """Write a file that must not exist yet (O_EXCL, never through a symlink);
        on any failure nothing is left behind."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        fd = os.open(name, flags, FILE_MODE, dir_fd=self.fd)
        try:
            write_all(fd, data)
            if durable:
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            try:
                os.unlink(name, dir_fd=self.fd)
            except OSError:
                pass
            raise
        os.close(fd)

    def rename(self, name: str, target: str, into: Folder | None = None) -> None:
        """Move ``name`` to ``target`` in this folder or in ``into``."""
        os.rename(name, target, src_dir_fd=self.fd, dst_dir_fd=(into or self).fd)

    def unlink(self, name: str) -> None:
        os.unlink(name, dir_fd=self.fd)

    def open_file(self, name: str) -> OpenFile | None:
        """A regular file opened for reading; None when it is missing. A symlink, a
        FIFO, a socket or anything else that is not a plain file: UnsafePath."""
        try:
            fd = self._open_regular(name, _FILE)
        except FileNotFoundError:
            return None
        handle = OpenFile(fd)
        try:
            handle.size = os.fstat(fd).st_size
        except BaseException:
            handle.close()
            raise
        return handle

    def _open_regular(self, name: str, flags: int) -> int:
        """A descriptor of the regular file ``name``, opened with ``flags`` (never
        blocking, never through a symlink); anything else standing there is refused
        with UnsafePath and left as it is."""
        try:
            fd = os.open(name, flags, FILE_MODE, dir_fd=self.fd)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise UnsafePath(
                    error.errno, "a symlink is never followed", self.name(name)
                ) from None
            # A socket, or a device node no driver answers, cannot be opened at all
            # (ENXIO, ENODEV ...): refused as what it is, not as the system's error.
            if not isinstance(error, (FileNotFoundError, PermissionError)) and self._stands_apart(
                name
            ):
                raise UnsafePath(errno.EINVAL, "not a regular file", self.name(name)) from None
            raise
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise UnsafePath(errno.EINVAL, "not a regular file", self.name(name))
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _stands_apart(self, name: str) -> bool:
        """Whether something other than a regular file stands at ``name``."""
        try:
            return not stat.S_ISREG(self.lstat(name).st_mode)
        except OSError:
            return False

    def read_bounded(self, name: str, limit: int) -> bytes | None:
        """At most ``limit + 1`` bytes of a regular file; None when it is missing."""
        handle = self.open_file(name)
        if handle is None:
            return None
        try:
            return handle.read(limit)
        finally:
            handle.close()

    def try_lock(self, name: str) -> OpenFile | None:
        """Lock the file ``name`` exclusively, or None if another holder has it or it
        is gone. The lock lives as long as the returned descriptor."""
        handle = self.open_file(name)
        if handle is None:
            return None
        try:
            fcntl.flock(handle.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return None
        except BaseException:
            handle.close()
            raise
        if os.fstat(handle.fd).st_nlink == 0:  # disposed by the holder we waited behind
            handle.close()
            return None
        return handle

    def create_locked(self, name: str) -> OpenFile:
        """Create the empty file ``name`` (0600, exclusively, never through a symlink)
        and hold its exclusive lock for as long as the returned descriptor lives; the
        kernel drops it when the holder dies."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        handle = OpenFile(os.open(name, flags, FILE_MODE, dir_fd=self.fd))
        try:
            hold_lock(handle.fd, self.name(name))  # waits out a reader's passing shared lock
        except BaseException:
            handle.close()
            os.unlink(name, dir_fd=self.fd)
            raise
        return handle

    def is_held(self, name: str) -> bool:
        """Whether someone holds the lock of the plain file ``name`` (False when it is
        missing or is no plain file). Asked with a shared lock on a descriptor of our
        own, released at once: asking changes nothing, and a holder never fails
        because someone asked."""
        try:
            handle = self.open_file(name)
        except UnsafePath:
            return False
        if handle is None:
            return False
        try:
            fcntl.flock(handle.fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            handle.close()
        return False

    def open_append(self, name: str) -> int:
        """A descriptor that appends to the regular file ``name`` (created 0600), never
        through a symlink; it reads too, so that the writer can see how the file ends.
        A FIFO, a socket or a device standing there is refused (UnsafePath) without
        waiting for a reader."""
        return self._open_regular(name, _APPEND)


class FolderLock:
    __slots__ = ("folder",)

    def __init__(self, folder: Folder) -> None:
        self.folder = folder

    def __enter__(self) -> Folder:
        hold_lock(self.folder.fd, self.folder.path)
        if os.fstat(self.folder.fd).st_nlink == 0:
            fcntl.flock(self.folder.fd, fcntl.LOCK_UN)
            raise Vanished  # caught by every caller, which starts again: no text to give
        return self.folder

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        fcntl.flock(self.folder.fd, fcntl.LOCK_UN)


class OpenFile:
    """An open descriptor. From Folder.try_lock it also holds the exclusive lock of a
    claim, which lives as long as the descriptor: the kernel releases it when the
    holder dies, so a crashed receiver never strands a message."""

    __slots__ = ("fd", "size")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.size: int | None = None
        """The file's size when it was opened, where known."""

    def read(self, limit: int) -> bytes:
        """At most ``limit + 1`` bytes, so an oversize file is noticed, never read whole.

        Stops once it has the size the file had when opened, sparing the read that
        would only say "end of file"; letters and records are never written in place."""
        chunks: list[bytes] = []
        remaining = limit + 1
        taken = 0
        while remaining > 0:
            chunk = os.read(self.fd, min(remaining, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
            taken += len(chunk)
            if self.size is not None and taken >= self.size:
                break
        return b"".join(chunks)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
