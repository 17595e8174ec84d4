"""Cost against registry size: list, resolve (by address, path, id prefix and
name), sweep and peek, each against the raw reads it cannot avoid, in one run.

    python benchmarks/scale.py [--rounds N] [--sizes 100,1000,10000]

One registry grows through the sizes: every record is a session of its own
(every hundredth one live: this process), a tenth as many messages as records
are queued, fifty to a mailbox (1,000 at 10,000 records). The commands run
in-process through cli.run with their output captured; ``pi-post list`` also
runs as a whole process at the largest size. Floors: reading every record file
(open, read, close; what any listing, or resolution by anything but an address,
must do), one record file (resolution by address), the records plus a listing
of every mailbox folder (sweep), the fifty letters of a full mailbox (peek).
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from cold_start import process_env, venv_bin
from measure import Figure, Report, interleaved, median, run_timed, timed

from pipost import cli, files, mailbox, registry, session
from pipost.address import address_of
from pipost.message import Sender, encode, new_message
from pipost.registry import OsProcessTable
from pipost.session import Record

LIVE_EVERY = 100
SHOWN = {
    "list": ("`pi-post list`", "read every record file"),
    "resolve by address": ("`pi-post resolve <address>`", "read one record file"),
    "resolve by path": ("`pi-post resolve <path>`", "read every record file"),
    "resolve by id prefix": ("`pi-post resolve <id prefix>`", "read every record file"),
    "resolve by name": ("`pi-post resolve <name>`", "read every record file"),
    "sweep": ("`pi-post sweep`", "read every record, list every mailbox"),
    "peek of a full mailbox": ("`pi-post peek` of a full mailbox", "read its 50 letter files"),
}
"""How each measured command appears in the table: the command, and its floor."""
CHEAP = ("resolve by address", "peek of a full mailbox")
CHEAP_REPEATS = 10
PROCESS_ROUNDS = 15
"""Samples of the whole-process listing: a process start is noisier than a call in
process, and a median of three let one slow moment decide the figure."""
"""Commands of a few milliseconds get ten times the rounds: their medians are noisier."""
QUEUED_PER_RECORD = 0.1
READ_ALL = (
    "import os, sys\n"
    "for name in os.listdir(sys.argv[1]):\n"
    "    with open(os.path.join(sys.argv[1], name), 'rb') as record:\n"
    "        record.read()\n"
)


def session_id(index: int) -> str:
    return f"{index:08x}-0000-4000-8000-{index:012x}"


class Registry:
    """A post root that grows record by record, with mail queued as it grows."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.root = work / "post"
        self.size = 0
        self.queued = 0
        self.token = OsProcessTable().start_token(os.getpid()) or None
        files.make(self.root, "registry").close()

    def grow(self, size: int) -> None:
        now = time.time_ns() // 1_000_000
        with files.make(self.root, "registry") as folder:
            self._add_records(folder, size, now)
        self.size = size
        self.queue_up_to(int(size * QUEUED_PER_RECORD))

    def _add_records(self, folder: files.Folder, size: int, now: int) -> None:
        for index in range(self.size, size):
            live = index % LIVE_EVERY == 0
            record = Record(
                address=address_of(session_id(index)),
                session_id=session_id(index),
                name=f"bench-{index}",
                cwd=str(self.work / f"project-{index}"),
                started_at=now,
                last_seen=now,  # recent: offline sessions are listed, and no sweep removes them
                pid=os.getpid() if live else None,
                pid_start=self.token if live else None,
            )
            name = registry.record_name(record.address)
            folder.write_new(name, session.encode(record), durable=False)

    def queue_up_to(self, queued: int) -> None:
        sender = Sender("process", "bench-scale")
        now = time.time_ns() // 1_000_000
        for count in range(self.queued, queued):
            address = self.address(count // mailbox.CAP)
            message = new_message(sender, f"queued letter {count}", now)
            with files.make(self.root, "inbox", address) as folder:
                folder.write_new(message.file_name, encode(message), durable=False)
        self.queued = queued

    def address(self, index: int) -> str:
        return address_of(session_id(index))

    def read_all(self) -> None:
        folder = self.root / "registry"
        for name in os.listdir(folder):
            read_raw(folder / name)

    def read_all_and_mailboxes(self) -> None:
        self.read_all()
        inboxes = self.root / "inbox"
        for address in os.listdir(inboxes):
            os.listdir(inboxes / address)

    def read_one(self, index: int) -> None:
        read_raw(Path(registry.record_path(self.root, self.address(index))))

    def read_letters(self, address: str) -> None:
        folder = Path(mailbox.inbox_of(self.root, address))
        for name in os.listdir(folder):
            read_raw(folder / name)


def read_raw(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.read(fd, 1 << 16)
    finally:
        os.close(fd)


def command(work: Path, root: Path, argv: list[str]) -> Callable[[], None]:
    """A pi-post command run in-process, its output captured and checked."""

    def run() -> None:
        out, err = io.StringIO(), io.StringIO()
        context = cli.Invocation(
            environ={"PI_POST_DIR": str(root), "HOME": str(work)},
            cwd=str(work),
            stdin=io.StringIO(),
            stdout=out,
            stderr=err,
        )
        if cli.run(argv, context) != 0:
            raise RuntimeError(f"pi-post {' '.join(argv)} failed: {err.getvalue()}")

    return run


def compare(
    floor: Callable[[], None], subject: Callable[[], None], rounds: int
) -> tuple[float, float]:
    """Medians (floor, subject) of alternated runs."""
    floors, subjects = interleaved(lambda: timed(floor), lambda: timed(subject), rounds)
    return median(floors), median(subjects)


def measure(rounds: int, sizes: list[int]) -> Report:
    curves: dict[str, list[float]] = {}
    floors: dict[str, list[float]] = {}
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(os.path.realpath(tmp))
        grown = Registry(work)
        for size in sorted(sizes):
            grown.grow(size)
            target = size // 2 + 1  # an offline session: one record, no mail
            full = grown.address(0)  # the first mailboxes are full (or as full as it gets)
            cases: dict[str, tuple[Callable[[], None], list[str]]] = {
                "list": (grown.read_all, ["list"]),
                "resolve by address": (
                    partial(grown.read_one, target),
                    ["resolve", grown.address(target)],
                ),
                "resolve by path": (grown.read_all, ["resolve", str(work / f"project-{target}")]),
                "resolve by id prefix": (grown.read_all, ["resolve", session_id(target)[:8]]),
                "resolve by name": (grown.read_all, ["resolve", f"bench-{target}"]),
                "sweep": (grown.read_all_and_mailboxes, ["sweep"]),
                "peek of a full mailbox": (partial(grown.read_letters, full), ["peek", full]),
            }
            for name, (floor, argv) in cases.items():
                repeats = rounds * (CHEAP_REPEATS if name in CHEAP else 1)
                floor_s, subject_s = compare(floor, command(work, grown.root, argv), repeats)
                curves.setdefault(name, []).append(subject_s)
                floors.setdefault(name, []).append(floor_s)
        largest = max(sizes)
        process_floor, process_list = interleaved(
            lambda: run_timed(
                [sys.executable, "-I", "-S", "-c", READ_ALL, str(grown.root / "registry")]
            ),
            lambda: run_timed([venv_bin("pi-post"), "list"], env=process_env(grown.root)),
            max(rounds, PROCESS_ROUNDS),
        )
        queued = grown.queued
    at_largest = {name: values[-1] for name, values in curves.items()}
    floor_at_largest = {name: values[-1] for name, values in floors.items()}
    by_address = curves["resolve by address"]
    flatness = by_address[-1] / by_address[0]
    for name in curves:
        goal, met, note = "context", None, ""
        if name == "list":
            goal, met = "< 0.5 s", at_largest[name] < 0.5
        elif name == "resolve by address":
            goal, met = "flat: largest ≤ 2× smallest registry", flatness <= 2
            note = f"{flatness:.2f}× its cost with {min(sizes):,} records"
        shown, floor_text = SHOWN[name]
        figures.append(
            Figure(
                key=name.replace(" ", "_"),
                title=f"{shown}, {largest:,} records, in-process",
                seconds=at_largest[name],
                floor_seconds=floor_at_largest[name],
                floor=floor_text,
                goal=goal,
                met=met,
                samples=rounds * (CHEAP_REPEATS if name in CHEAP else 1),
                note=note,
            )
        )
    list_process = median(process_list)
    figures.append(
        Figure(
            key="list_process",
            title=f"`pi-post list`, {largest:,} records, whole process",
            seconds=list_process,
            floor_seconds=median(process_floor),
            floor="`python -I -S` reading every record",
            goal="< 0.5 s",
            met=list_process < 0.5,
            samples=len(process_list),
        )
    )
    return Report(
        figures=figures,
        extra={
            "scale": {
                "sizes": sorted(sizes),
                "queued_at_largest": queued,
                "seconds": curves,
                "floor_seconds": floors,
            }
        },
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default="100,1000,10000")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    print(measure(args.rounds, sizes).dumps())


if __name__ == "__main__":
    main()
