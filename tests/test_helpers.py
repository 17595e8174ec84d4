"""The helpers other tests judge by, where they could be fooled by tests running
beside them (pytest-xdist runs the suite in several processes at once)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import finished_or_awaiting, waiters_on_lock


@pytest.fixture
def two_disks(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """Two fresh tmpfs, unmounted at the end."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root on Linux (CI runs as root)")
    disks = (tmp_path / "one", tmp_path / "other")
    mounted: list[Path] = []
    try:
        for disk in disks:
            disk.mkdir()
            done = subprocess.run(
                ["mount", "-t", "tmpfs", "tmpfs", str(disk)], capture_output=True, check=False
            )
            if done.returncode != 0:
                pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace')}")
            mounted.append(disk)
        yield disks
    finally:
        for disk in mounted:
            subprocess.run(["umount", "-l", str(disk)], check=False)


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
    try:
        waiter = os.open(awaited, os.O_RDONLY | os.O_DIRECTORY)
        waiting = finished_or_awaiting(awaited, lambda: fcntl.flock(waiter, fcntl.LOCK_EX))
        assert waiters_on_lock(awaited) == 1
        assert waiters_on_lock(twin) == 0
    finally:
        os.close(held)
    waiting.join(timeout=20)
    os.close(waiter)
