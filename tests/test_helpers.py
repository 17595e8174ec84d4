"""The helpers other tests judge by, where they could be fooled by tests running
beside them (pytest-xdist runs the suite in several processes at once)."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.exchange.conftest import tmpfs
from tests.helpers import finished_or_awaiting, waiters_on_lock


@pytest.fixture
def two_disks(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """Two fresh tmpfs, unmounted at the end."""
    disks = (tmp_path / "one", tmp_path / "other")
    with contextlib.ExitStack() as mounted:
        for disk in disks:
            disk.mkdir(mode=0o700)
            mounted.enter_context(tmpfs(disk, "size=1m"))
        yield disks


def test_a_wait_for_a_folder_on_another_disk_with_the_same_inode_is_not_counted(
    two_disks: tuple[Path, Path],
) -> None:
    one, other = two_disks
    awaited = one / "awaited"
    awaited.mkdir()
    # tmpfs numbers its inodes from the same start on every mount: make folders on
    # the other disk until one has the awaited folder's number
    twin = other / "twin-0"
    twin.mkdir()
    while twin.stat().st_ino < awaited.stat().st_ino:
        twin = other / f"twin-{int(twin.name[5:]) + 1}"
        twin.mkdir()
    if twin.stat().st_ino != awaited.stat().st_ino:
        pytest.skip("this kernel numbers a tmpfs' inodes apart from another's")
    held = os.open(awaited, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(held, fcntl.LOCK_EX)
    twin_held = os.open(twin, os.O_RDONLY | os.O_DIRECTORY)  # as a test holding its lock
    try:
        waiter = os.open(awaited, os.O_RDONLY | os.O_DIRECTORY)
        waiting = finished_or_awaiting(awaited, lambda: fcntl.flock(waiter, fcntl.LOCK_EX))
        assert waiters_on_lock(awaited) == 1
        assert waiters_on_lock(twin) == 0
    finally:
        os.close(held)
        os.close(twin_held)
    waiting.join(timeout=20)
    os.close(waiter)
