"""A deliberately broken implementation: pipost behind the driver protocol, with
faults a port could plausibly have, to prove that the conformance kit catches
them and names the invariant each breaks.

    python tests/conformance/broken_impl.py [--fault NAME ...] [--lacks OP ...]

oversize-body   a send writes a body over the 32 KiB cap instead of refusing it (INV-09)
unlink-first    the receiving session unlinks each letter before its text enters the
                context, so a context that fails loses it (INV-05)
stale-presence  ``record`` reports every session that has a record live, a crashed or
                shut down one included (INV-15)
count-errors    ``count`` is offered but answers an error, as a shim that crashes in it
                would: the scenarios calling it end in an error, which fails no row
count-hangs     ``count`` never answers: the scenarios calling it time out

With no --fault, oversize-body and unlink-first are on. --lacks leaves an operation
out of the capabilities (and refuses it), as a port that has not written it yet would.

``broken_port`` plants a fault in a copy of the Node port (ports/node) instead, for
what only a port's own system calls show (PORT_FAULTS):

write-in-place  a letter or record is written under its .json name, no temporary, no
                rename (INV-03)
no-fsync        nothing is ever flushed (INV-04)
no-mailbox-lock a deposit counts and renames without the mailbox folder's flock (INV-08)
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from pipost import files, host, mailbox, message
from pipost.driver import InProcessDriver, Receiving, RecordingContext, serve
from pipost.driver_protocol import DriverError, Json, Result
from pipost.message import Sender
from pipost.resolve import Caller

FAULTS = ("oversize-body", "unlink-first", "stale-presence", "count-errors", "count-hangs")
HANG_S = 3600
"""Long enough for any per-call timeout; the suite kills a toy that hangs."""
DEFAULT_FAULTS = ("oversize-body", "unlink-first")


NODE_PORT = Path(__file__).resolve().parents[2] / "ports" / "node"
PORT_FAULTS: dict[str, tuple[str, str, str]] = {
    "write-in-place": (
        "lib/disk.mjs",
        """    this.writeNew(tempName, bytes);
    try {
      fs.renameSync(this.at(tempName), this.at(finalName));
    } catch (e) {
      fs.rmSync(this.at(tempName), { force: true });
      throw e;
    }
    this.fsync();""",
        """    const inPlace = O_WRONLY | O_CREAT | fs.constants.O_TRUNC | O_NOFOLLOW;
    this.writeNew(finalName, bytes, inPlace);
    this.fsync();""",
    ),
    "no-fsync": ("lib/disk.mjs", "fs.fsyncSync(", "void ("),
    "no-mailbox-lock": (
        "lib/disk.mjs",
        "    flock(folder.fd, { wait: true });\n    if (parent.holds(",
        "    if (parent.holds(",
    ),
}
"""Fault → (file of the port, its text, what replaces every occurrence of it)."""


def broken_port(fault: str, into: Path) -> Path:
    """A copy of the Node port in ``into`` with ``fault`` planted; its shim."""
    shutil.copytree(NODE_PORT, into, ignore=shutil.ignore_patterns("node_modules"))
    name, old, new = PORT_FAULTS[fault]
    source = into / name
    text = source.read_text(encoding="utf-8")
    assert old in text, f"{fault}: {name} no longer holds the text the fault replaces"
    source.write_text(text.replace(old, new), encoding="utf-8")
    return into / "shim.mjs"


class BrokenDriver(InProcessDriver):
    def __init__(
        self, root: Path, *, home: str, now: int, faults: frozenset[str], lacks: frozenset[str]
    ) -> None:
        super().__init__(root, home=home, now=now)
        self.faults = faults
        self.lacks = lacks

    def call(self, op: str, **args: Json) -> Result:
        if op in self.lacks:
            raise DriverError(f"unknown operation {op!r} (see capabilities)")
        if op == "count" and "count-errors" in self.faults:
            raise DriverError("count: the toy crashed counting")
        if op == "count" and "count-hangs" in self.faults:
            time.sleep(HANG_S)
        result = super().call(op, **args)
        if op == "record" and "stale-presence" in self.faults and result["record"] is not None:
            return {**result, "presence": "live"}
        return result

    def op_capabilities(self) -> Result:
        offered = super().op_capabilities()["ops"]
        assert isinstance(offered, list)
        return {"ops": [op for op in offered if op not in self.lacks]}

    def op_send(
        self,
        targets: list[str],
        body: str,
        cwd: str,
        label: str | None = None,
        session: str | None = None,
        reply_to: str | None = None,
        home: str | None = None,
    ) -> Result:
        if "oversize-body" not in self.faults or message.body_size(body) <= message.BODY_CAP:
            return super().op_send(targets, body, cwd, label, session, reply_to, home)
        caller = Caller(cwd=cwd, home=home or self.home, canonical=os.path.realpath)
        receipts: list[Json] = []
        for handle in targets:
            address = self.post.resolve(handle, caller).address
            letter = message.Message(
                message.make_id(self.now),
                Sender("process", label or "toy", cwd=cwd),
                self.now,
                body,
            )
            with files.make_root(self.root) as top:
                mailbox.deposit(top, address, letter)
            receipts.append({"address": address, "id": letter.id, "delivered": False})
        return {"receipts": receipts}

    def _receiver(self, receiving: Receiving) -> host.Host:
        receiver = super()._receiver(receiving)
        if "unlink-first" in self.faults:
            receiver.context = UnlinkingFirst(receiving.context)
        return receiver


class UnlinkingFirst:
    """A receiving session's context that takes each letter off disk first, then
    enters its text: the unlink is no longer a receipt of anything."""

    def __init__(self, context: RecordingContext) -> None:
        self.context = context

    def holds(self, message_id: str) -> bool | None:
        return self.context.holds(message_id)

    def enter(self, delivery: host.Delivery) -> bool:
        (self.context.inbox / delivery.message.file_name).unlink(missing_ok=True)
        return self.context.enter(delivery)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fault", action="append", choices=FAULTS)
    parser.add_argument("--lacks", action="append", default=[])
    args = parser.parse_args()
    faults, lacks = frozenset(args.fault or DEFAULT_FAULTS), frozenset(args.lacks)

    def opener(root: Path, home: str, now: int) -> BrokenDriver:
        return BrokenDriver(root, home=home, now=now, faults=faults, lacks=lacks)

    serve(sys.stdin, sys.stdout, opener)


if __name__ == "__main__":
    main()
