"""Deposit cost per letter against the raw floor, durable and not, in one run.

    python benchmarks/deposit.py [--rounds N] [--batch B]

The floor is the bare maildir step in a tight loop on the same file system:
exclusive create, write, fsync, rename into place, fsync the folder (durable),
or create, write and rename only (non-durable), with the same bytes a deposit
writes. The subject is mailbox.deposit, which adds the folder lock, the count
against the cap of 50 and its checks. The two alternate letter by letter, the
first of each pair switching sides; both folders are emptied between rounds
(untimed), so a mailbox never reaches its cap.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

from measure import Figure, Report, interleaved, median, ms

from pipost import files, mailbox
from pipost.address import address_of
from pipost.message import Message, Sender, encode, new_message

TARGET = address_of("bench-deposit-target")
SENDER = Sender("process", "bench-deposit", cwd="/tmp")


def raw_write(folder: Path, name: str, data: bytes, durable: bool) -> None:
    """The floor: what any durable maildir deposit must do, and nothing else."""
    temporary = folder / (name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(temporary, folder / name)
    if durable:
        folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(folder_fd)
        finally:
            os.close(folder_fd)


def fresh_messages(count: int) -> list[Message]:
    now = time.time_ns() // 1_000_000
    return [new_message(SENDER, f"deposit benchmark letter {i}", now) for i in range(count)]


def clear(folder: Path) -> None:
    for name in os.listdir(folder):
        os.unlink(folder / name)


def floor_sample(folder: Path, letters: Iterator[Message], durable: bool) -> float:
    message = next(letters)
    data = encode(message)  # the subject encodes inside deposit; the floor has its bytes
    started = time.perf_counter()
    raw_write(folder, message.file_name, data, durable)
    return time.perf_counter() - started


def deposit_sample(root: Path, letters: Iterator[Message], durable: bool) -> float:
    message = next(letters)
    started = time.perf_counter()
    with files.make_root(root) as top:  # a send opens the root once, as here
        mailbox.deposit(top, TARGET, message, durable=durable)
    return time.perf_counter() - started


def compare(work: Path, rounds: int, batch: int, durable: bool) -> tuple[list[float], list[float]]:
    """Floor and deposit letter by letter in alternation, ``batch`` of each per round."""
    root = work / "post"
    raw_folder = work / "raw"
    raw_folder.mkdir(mode=0o700)
    floors: list[float] = []
    deposits: list[float] = []
    for _ in range(rounds):
        round_floors, round_deposits = interleaved(
            partial(floor_sample, raw_folder, iter(fresh_messages(batch)), durable),
            partial(deposit_sample, root, iter(fresh_messages(batch)), durable),
            batch,
        )
        floors += round_floors
        deposits += round_deposits
        clear(raw_folder)
        clear(Path(mailbox.inbox_of(root, TARGET)))
    return floors, deposits


def figure(
    key: str,
    title: str,
    floor: str,
    limit: float | None,
    floors: list[float],
    deposits: list[float],
) -> Figure:
    """``limit``: the goal as a most allowed ratio to the floor; None for context."""
    cost, floor_cost = median(deposits), median(floors)
    return Figure(
        key=key,
        title=title,
        seconds=cost,
        floor_seconds=floor_cost,
        floor=floor,
        goal="context" if limit is None else f"≤ {limit:g}× floor",
        met=None if limit is None else cost <= limit * floor_cost,
        samples=len(deposits),
        note=f"{1 / cost:,.0f} letters/s against {1 / floor_cost:,.0f}/s",
    )


def measure(rounds: int, batch: int) -> Report:
    if not 0 < batch < mailbox.CAP:
        raise ValueError(f"a batch must fit in one mailbox (below {mailbox.CAP})")
    with tempfile.TemporaryDirectory() as durable_work:
        durable_floors, durable_deposits = compare(Path(durable_work), rounds, batch, True)
    with tempfile.TemporaryDirectory() as quick_work:
        quick_floors, quick_deposits = compare(Path(quick_work), rounds, batch, False)
    return Report(
        figures=[
            figure(
                "deposit_durable",
                "durable deposit, per letter",
                "write + fsync + rename + fsync folder",
                1.5,
                durable_floors,
                durable_deposits,
            ),
            figure(
                "deposit_non_durable",
                "non-durable deposit, per letter",
                "write + rename",
                None,
                quick_floors,
                quick_deposits,
            ),
        ],
        distributions_ms={
            "durable deposit: floor": ms(durable_floors),
            "durable deposit": ms(durable_deposits),
        },
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--batch", type=int, default=20)
    args = parser.parse_args()
    print(measure(args.rounds, args.batch).dumps())


if __name__ == "__main__":
    main()
