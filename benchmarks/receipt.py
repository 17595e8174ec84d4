"""Receipt latency: from the receiver's unlink to the sender printing
``delivered``, against the kernel's own floor for that notice, in one run.

    python benchmarks/receipt.py [--rounds N]

Each round starts a real ``pi-post send`` to a live session whose receiver is
this process. Once the letter is on disk and the sender is waiting for it to go
(it holds its inotify descriptor), the receiver notes the instant and unlinks
the letter; the sample ends when the sender's ``delivered`` line arrives on the
pipe this process reads. The floor, sampled in alternation, is the same notice
with nothing else in the way: a running child blocked on an inotify watch of a
folder prints a line when a file there is unlinked. On a busy machine both may
wait for a free CPU once woken: the tail (p99) is mostly that.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from cold_start import process_env, venv_bin
from measure import Figure, Report, median, ms, percentile

from pipost import files, registry
from pipost.address import address_of
from pipost.registry import OsProcessTable

SESSION_ID = "bench-receipt-receiver"
# The floor's waiter: the kernel's notice of an unlink, read by a process that
# does nothing else, answered with a line on a pipe.
UNLINK_WAITER = """\
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
watch = libc.inotify_init1(0)
libc.inotify_add_watch(watch, os.fsencode(sys.argv[1]), 0x200)  # IN_DELETE
print("ready", flush=True)
while os.read(watch, 4096):
    print("gone", flush=True)
"""


class UnlinkWaiter:
    """A running child blocked on an inotify watch of ``folder``; each unlink there
    makes it print a line."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", UNLINK_WAITER, str(folder)],
            stdout=subprocess.PIPE,
        )
        self._stdout().readline()  # "ready": the watch is in place

    def sample(self) -> float:
        """Seconds from an unlink to the waiter's line."""
        letter = self.folder / "letter"
        letter.write_bytes(b"floor")
        time.sleep(0.005)  # as for the sender: the waiter is back in its wait
        started = time.perf_counter()
        os.unlink(letter)
        self._stdout().readline()
        return time.perf_counter() - started

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)

    def _stdout(self) -> IO[bytes]:
        if self.process.stdout is None:
            raise RuntimeError("the waiter has no stdout pipe")
        return self.process.stdout


def wait_for(condition: str, check: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll ``check`` every millisecond."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting until {condition}")
        time.sleep(0.001)


def holds_inotify(pid: int) -> bool:
    """Whether the process has an inotify descriptor open: the sender's wait has begun."""
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for descriptor in descriptors:
        try:
            if os.readlink(f"/proc/{pid}/fd/{descriptor}") == "anon_inode:inotify":
                return True
        except OSError:
            continue
    return False


class Receiver:
    """This process as a live session: a fresh record, and a hand that unlinks."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.address = address_of(SESSION_ID)
        self.token = OsProcessTable().start_token(os.getpid())
        self.beat()
        files.make(root, "inbox", self.address).close()
        self.folder = root / "inbox" / self.address

    def beat(self) -> None:
        registry.register(
            self.root,
            SESSION_ID,
            str(self.root.parent),
            time.time_ns() // 1_000_000,
            pid=os.getpid(),
            pid_start=self.token or None,
        )

    def sample(self, env: dict[str, str]) -> tuple[float, str]:
        """Seconds from the unlink to the sender's line, and the line."""
        self.beat()  # stays live (45 s window) however slow the machine is
        sender = subprocess.Popen(
            [venv_bin("pi-post"), "send", "--to", self.address, "--body", "receipt benchmark"],
            env=env,
            stdout=subprocess.PIPE,
        )
        try:
            if sender.stdout is None:
                raise RuntimeError("the sender has no stdout pipe")
            wait_for("the letter is on disk", lambda: any(self.folder.iterdir()))
            wait_for("the sender waits", lambda: holds_inotify(sender.pid), timeout=1.0)
            time.sleep(0.005)  # from opening its watch into its wait
            (letter,) = self.folder.iterdir()
            unlinked = time.perf_counter()
            os.unlink(letter)
            line = sender.stdout.readline()
            arrived = time.perf_counter()
        finally:
            sender.wait(timeout=30)
        return arrived - unlinked, line.decode().strip()


def measure(rounds: int) -> Report:
    latencies: list[float] = []
    floors: list[float] = []
    queued = 0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "post"
        receiver = Receiver(root)
        env = process_env(root)
        waiter_folder = Path(tmp) / "floor"
        waiter_folder.mkdir(mode=0o700)
        waiter = UnlinkWaiter(waiter_folder)
        try:
            for round_index in range(rounds):
                if round_index % 2:
                    floors.append(waiter.sample())
                latency, line = receiver.sample(env)
                if line.startswith("delivered "):
                    latencies.append(latency)
                else:
                    queued += 1  # the sender gave up before the unlink: no receipt to time
                if round_index % 2 == 0:
                    floors.append(waiter.sample())
        finally:
            waiter.close()
    if not latencies:
        raise RuntimeError("no sender saw its receipt")
    p50, floor = median(latencies), median(floors)
    return Report(
        figures=[
            Figure(
                key="receipt_p50",
                title="receipt: unlink → `delivered` printed, p50",
                seconds=p50,
                floor_seconds=floor,
                floor="unlink → line from a process blocked on inotify",
                goal="< 10 ms",
                met=p50 < 0.010,
                samples=len(latencies),
                note=f"{queued} of {rounds} senders printed queued" if queued else "",
            ),
            Figure(
                key="receipt_p99",
                title="receipt: unlink → `delivered` printed, p99",
                seconds=percentile(latencies, 0.99),
                floor_seconds=percentile(floors, 0.99),
                floor="the same floor, p99",
                goal="context",
                met=None,
                samples=len(latencies),
            ),
        ],
        distributions_ms={
            "receipt: floor (inotify waiter)": ms(floors),
            "receipt: unlink → delivered": ms(latencies),
        },
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=30)
    print(measure(parser.parse_args().rounds).dumps())


if __name__ == "__main__":
    main()
