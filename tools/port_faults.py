"""The kit's own score on a foreign implementation: deliberate faults in the Node
port (ports/node), each switched on alone, each judged by the conformance kit
(``nox -s port_faults``; issue 37, item 8).

A fault is a textual edit of one file under ports/node — the exact ``old`` text,
which must occur exactly once, and what replaces it — with the invariants of SPEC 9
it is meant to break, its tier, and the part of the kit that judges it (feature
files, a scenario name, the state machines or not, the driver shim or the command
line), chosen so that a fault runs in seconds to a minute rather than the whole kit.

Before anything runs the table is checked: every ``old`` text occurs once, every
feature file exists, every invariant is one of SPEC 9; a problem is said with its
fault and nothing runs (exit 2). Then every selection runs once against an
unedited copy of the port: a selection that fails without a fault would prove
nothing, so the run stops there (exit 1).

For each fault the port is copied to a scratch folder, the edit applied there
(``node --check`` must still accept the file: a fault that does not parse would
be "caught" for nothing) and ``pi-post conformance --json`` run against the copy.
The fault is *caught* when the kit says so — a MUST fault: the run does not conform
(exit status 1); a SHOULD fault: a row of it does not pass — and a row of an
invariant the fault breaks did not pass. It is *charged to its own invariant*
when such a row failed by an assertion (not an error or a timeout). The *extra
rows* are the rows that failed (by an assertion) of invariants the fault was not
meant to break: blame misplaced. A fault marked ``blind`` is one no black-box
scenario of this kit can see yet, with the reason; it runs and is reported like
the others, but does not fail the run.

Usage: python tools/port_faults.py [FAULT ...] [--timeout SECONDS] [--markdown FILE]
Exits 0 when every MUST fault that is not blind was caught and charged to its own
invariant, 1 when one was not (or a selection fails unedited), 2 when the table
does not fit the port.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PORT = Path("ports") / "node"
FEATURES = REPO / "src" / "pipost_conformance" / "features"
SPEC = REPO / "SPEC.md"
TIERS = ("must", "should")
KIT_CALL_TIMEOUT_S = 15
"""How long one call of the kit to the shim may take: a fault that hangs the shim
ends as a timeout of its scenario well before the fault's own timeout."""
DEFAULT_TIMEOUT_S = 600.0
SEED = 20260101
"""The state machines' seed: the same examples for every fault and the baseline."""
PASSING = ("pass", "unsupported")
WORST_FIRST = (
    "fail",
    "error",
    "timeout",
    "unexpected-pass",
    "expected-fail",
    "pass",
    "unsupported",
)
"""The kit's order (runner.WORST_FIRST): a row's result is the worst of its items'."""
FAILING = "fail"
OUTPUT_TAIL_LINES = 25


@dataclass(frozen=True)
class Judge:
    """The part of the kit that judges a fault."""

    features: tuple[str, ...]
    """Feature files of the kit (``receiving.feature``)."""
    name: str | None = None
    """A regular expression the scenarios' names must match (behave's ``--name``)."""
    machines: bool = False
    """The state machines run too (all of them: the kit cannot pick one)."""
    cli: bool = False
    """The command line is judged (``--cli``), not the driver shim (``--impl``)."""

    def options(self, port: Path) -> list[str]:
        shim, cli = port / "shim.mjs", port / "cli.mjs"
        part = ["--cli", f"node {cli}"] if self.cli else ["--impl", f"node {shim}"]
        features = ["--features", *(f"features/{file}" for file in self.features)]
        name = ["--name", self.name] if self.name is not None else []
        machines = ["--seed", str(SEED)] if self.machines else ["--no-machines"]
        return [*part, *features, *name, *machines]

    def __str__(self) -> str:
        said = ", ".join(file.removesuffix(".feature") for file in self.features)
        if self.name is not None:
            said += f" /{self.name}/"
        if self.machines:
            said += " + machines"
        return f"{said} (cli)" if self.cli else said


@dataclass(frozen=True)
class Edit:
    old: str
    """Exact text that must occur exactly once in the file."""
    new: str


@dataclass(frozen=True)
class PortFault:
    name: str
    file: str
    """A file under ports/node."""
    edits: tuple[Edit, ...]
    breaks: tuple[str, ...]
    """The invariants of SPEC 9 the fault breaks."""
    tier: str
    """must or should: the tier SPEC gives what the fault breaks."""
    judge: Judge
    blind: str = ""
    """Why no black-box scenario of the kit can see the fault yet; empty: it can."""


def fault(
    name: str,
    file: str,
    old: str,
    new: str,
    breaks: str,
    judge: Judge,
    *,
    tier: str = "must",
    blind: str = "",
) -> PortFault:
    return PortFault(name, file, (Edit(old, new),), tuple(breaks.split()), tier, judge, blind)


def judge(*features: str, name: str | None = None, machines: bool = False) -> Judge:
    return Judge(tuple(f"{feature}.feature" for feature in features), name, machines)


def cli(*features: str, name: str | None = None) -> Judge:
    return Judge(tuple(f"{feature}.feature" for feature in features), name, cli=True)


FAULTS: tuple[PortFault, ...] = (
    # -- INV-01, INV-02: addresses ---------------------------------------------------------
    fault(
        "the address hashes another text",
        "lib/wire.mjs",
        'Buffer.from(`session\\0${sessionId}`, "utf8")',
        'Buffer.from(`session:${sessionId}`, "utf8")',
        "INV-01 INV-21",
        judge("addresses"),
    ),
    fault(
        "a directory with no session in it becomes an address",
        "lib/post.mjs",
        "      if (!matches.length) throw unknown(`no session runs in ${where}`, { path: where });",
        "      if (!matches.length) return this.session(addressOf(where), null);",
        "INV-02 INV-12",
        judge("addresses"),
    ),
    # -- INV-03, INV-04: durable, atomic writes ---------------------------------------------
    fault(
        "a letter written in place under its .json name",
        "lib/mailbox.mjs",
        "box.writeDurably(`${id}.json.tmp`, `${id}.json`, ",
        "box.writeNew(`${id}.json`, ",
        "INV-03 INV-04",
        judge("durability", "mailbox", "messages"),
    ),
    fault(
        "a temporary counted as a letter",
        "lib/disk.mjs",
        'return this.names().filter((n) => n.endsWith(".json") && !n.startsWith(".")).sort();',
        'return this.names().filter((n) => n.includes(".json") && !n.startsWith(".")).sort();',
        "INV-03",
        judge("mailbox"),
    ),
    PortFault(
        "no fsync anywhere",
        "lib/disk.mjs",
        (
            Edit(
                "      fs.writeSync(fd, bytes);\n      fs.fsyncSync(fd);\n",
                "      fs.writeSync(fd, bytes);\n",
            ),
            Edit("  fsync() {\n    fs.fsyncSync(this.fd);\n  }", "  fsync() {}"),
        ),
        ("INV-04",),
        "must",
        judge("durability"),
    ),
    # -- INV-05, INV-06, INV-07: taking mail ------------------------------------------------
    fault(
        "a context that fails loses the letter",
        "lib/receive.mjs",
        "      if (!accept(text)) {\n        claim.release();",
        "      if (!accept(text)) {\n        claim.dispose();",
        "INV-05",
        judge("receiving"),
    ),
    fault(
        "a claim without its lock",
        "lib/mailbox.mjs",
        "  if (!flock(found.fd, { wait: false }) || !box.holds(name, found.info)) {",
        "  if (!box.holds(name, found.info)) {",
        "INV-06",
        judge("receiving"),
    ),
    fault(
        "a ledger that forgets what entered",
        "lib/receive.mjs",
        '    return this.kind === "ledger" && this.ids.has(id);',
        "    return false;",
        "INV-06",
        judge("receiving"),
    ),
    fault(
        "a claim the disk would not unlink is let go",
        "lib/receive.mjs",
        "    this.unlinking.set(claim.name, claim.keep());",
        "    claim.release();",
        "INV-06",
        judge("receiving"),
    ),
    fault(
        "newest letter first",
        "lib/mailbox.mjs",
        "      for (const name of box.jsonNames()) {",
        "      for (const name of box.jsonNames().reverse()) {",
        "INV-07",
        judge("mailbox", "receiving", "interop", "messages"),
    ),
    fault(
        "ids not zero-padded",
        "lib/wire.mjs",
        '  return `${String(sentAt).padStart(13, "0")}-${randomHex}`;',
        "  return `${String(sentAt)}-${randomHex}`;",
        "INV-07 INV-21",
        judge("messages", "mailbox"),
    ),
    # -- INV-08, INV-09: caps ----------------------------------------------------------------
    fault(
        "a cap of 51",
        "lib/mailbox.mjs",
        "export const MAILBOX_CAP = 50;",
        "export const MAILBOX_CAP = 51;",
        "INV-08",
        judge("mailbox"),
    ),
    fault(
        "no mailbox lock around count-and-rename",
        "lib/mailbox.mjs",
        "box = keep(lockedChild(inbox, checkedAddress(address), { create: true }));",
        "box = keep(inbox.child(checkedAddress(address), { create: true }));",
        "INV-08",
        judge("durability", "mailbox"),
    ),
    fault(
        "a full mailbox found only after the other targets were written",
        "lib/post.mjs",
        "      const queued = this.mailboxes.count(address);\n",
        "      const queued = 0;\n",
        "INV-08",
        judge("mailbox"),
    ),
    fault(
        "a body one byte over the cap is sent",
        "lib/post.mjs",
        "  if (size > BODY_CAP) {",
        "  if (size > BODY_CAP + 1) {",
        "INV-09",
        judge("bad_input", "messages"),
    ),
    fault(
        "a reader delivers an oversize body",
        "lib/wire.mjs",
        "  if (utf8Length(m.body) > BODY_CAP) "
        'return badField("body", `is over ${BODY_CAP} bytes`);\n',
        "",
        "INV-09 INV-10",
        judge("bad_input", machines=True),
    ),
    fault(
        "a letter read whole",
        "lib/disk.mjs",
        "export function readBounded(fd, limit) {\n",
        "export function readBounded(fd, limit) {\n  return fs.readFileSync(fd);\n",
        "INV-09",
        judge("hostile_input", "bad_input", machines=True),
    ),
    # -- INV-10: what is no message ----------------------------------------------------------
    fault(
        "a bad letter stops the drain",
        "lib/receive.mjs",
        "        if (claim.setAside()) report.set_aside.push("
        "{ name: claim.name, reason: claim.rejected });\n        continue;",
        "        if (claim.setAside()) report.set_aside.push("
        "{ name: claim.name, reason: claim.rejected });\n        break;",
        "INV-10",
        judge("receiving", "hostile_input"),
    ),
    fault(
        "a bad letter deleted, not kept in the quarantine",
        "lib/mailbox.mjs",
        "          fs.renameSync(this.box.at(this.name), folder.at(kept));",
        "          fs.unlinkSync(this.box.at(this.name));",
        "INV-10",
        judge("bad_input", "hostile_input"),
        tier="should",
    ),
    fault(
        "a wrong v read as a message",
        "lib/wire.mjs",
        '  if (m.v !== 1) return badField("v", "must be the integer 1");\n',
        "",
        "INV-10",
        judge("bad_input", machines=True),
    ),
    # -- INV-11: receipts --------------------------------------------------------------------
    fault(
        "a receipt says delivered for a live target at once",
        "lib/post.mjs",
        "        receipts.push({ address, id, delivered: false });",
        "        receipts.push({ address, id, delivered: live.has(address) });",
        "INV-11",
        judge("receiving", "resolution"),
    ),
    fault(
        "the command line says delivered for every letter",
        "cli.mjs",
        'out(`${delivered ? "delivered" : "queued"} ${address} ${id}`)',
        "out(`delivered ${address} ${id}`)",
        "INV-11",
        cli("cli", "cli_handles"),
    ),
    # -- INV-12, INV-13: resolution ----------------------------------------------------------
    fault(
        "nine targets allowed",
        "lib/post.mjs",
        "    if (targets.length > TARGET_CAP) {",
        "    if (targets.length > TARGET_CAP + 1) {",
        "INV-12",
        judge("bad_input", "resolution"),
    ),
    fault(
        "an ambiguous handle guessed",
        "lib/post.mjs",
        "      if (chosen.length === 1) {",
        "      if (chosen.length >= 1) {",
        "INV-12",
        judge("resolution", "bad_input"),
    ),
    fault(
        "an unknown target refused without the reachable sessions",
        "lib/post.mjs",
        "      const reachable = offered.map((s) => s.address);",
        "      const reachable = [];",
        "INV-12",
        judge("bad_input", "resolution"),
        tier="should",
    ),
    fault(
        "an address with neither record nor mailbox is taken",
        "lib/post.mjs",
        "      if (!record && !this.mailboxes.exists(handle)) {",
        "      if (false) {",
        "INV-12",
        judge("addresses"),
        tier="should",
    ),
    fault(
        "a session id prefix no longer finds its session",
        "lib/post.mjs",
        "s.record.sessionId.toLowerCase().startsWith(prefix)",
        "s.record.sessionId.toLowerCase() === prefix",
        "INV-13",
        judge("resolution"),
    ),
    fault(
        "a path handle not resolved through symlinks",
        "lib/post.mjs",
        "      const where = canonical(path.resolve(cwd, expanded));",
        "      const where = path.resolve(cwd, expanded);",
        "INV-13",
        judge("resolution"),
    ),
    fault(
        "the basename of a cwd no longer finds its session",
        "lib/post.mjs",
        "path.basename(s.record.cwd) === handle",
        "s.record.cwd === handle",
        "INV-13",
        judge("resolution"),
    ),
    # -- INV-14, INV-15: records and presence ------------------------------------------------
    fault(
        "shutdown deletes the record",
        "lib/registry.mjs",
        "    const { pid, pidStart, ...kept } = record;\n"
        "    return this.write({ ...kept, lastSeen: now });",
        "    this.remove(record.address);\n    return null;",
        "INV-14",
        judge("registry_presence"),
    ),
    fault(
        "stalled one ms late",
        "lib/registry.mjs",
        '  return now - record.lastSeen > STALL_MS ? "stalled" : "live";',
        '  return now - record.lastSeen > STALL_MS + 1 ? "stalled" : "live";',
        "INV-15",
        judge("registry_presence"),
    ),
    fault(
        "a dead process's session is live",
        "lib/registry.mjs",
        '  if (record.pid === undefined || !processes.exists(record.pid)) return "offline";',
        '  if (record.pid === undefined) return "offline";',
        "INV-15",
        judge("registry_presence"),
    ),
    fault(
        "a reused pid brings the session back",
        "lib/registry.mjs",
        '  if (start !== undefined && start !== record.pidStart) return "offline";\n',
        "",
        "INV-15",
        judge("registry_presence"),
        tier="should",
    ),
    # -- INV-16, INV-17: looking and sweeping ------------------------------------------------
    fault(
        "a listing sweeps",
        "lib/post.mjs",
        "    const every = this.sessions();\n",
        "    this.sweep();\n    const every = this.sessions();\n",
        "INV-16",
        judge("reading"),
    ),
    fault(
        "a sweep removes a mailbox with its mail",
        "lib/post.mjs",
        "            fs.rmdirSync(inbox.at(address));",
        "            fs.rmSync(inbox.at(address), { recursive: true, force: true });",
        "INV-17",
        judge("sweeps"),
    ),
    fault(
        "a record swept after one day",
        "lib/post.mjs",
        "const SWEEP_RECORD_MS = 7 * DAY_MS;",
        "const SWEEP_RECORD_MS = DAY_MS;",
        "INV-17",
        judge("sweeps"),
    ),
    fault(
        "a sweep judges the record it read before the lock",
        "lib/post.mjs",
        "          const record = this.registry.read(address);\n          records.delete(address);",
        "          const record = records.get(address);\n          records.delete(address);",
        "INV-17",
        judge("sweeps"),
    ),
    fault(
        "temporaries swept after an hour",
        "lib/post.mjs",
        "const STALE_TEMP_MS = 36 * 3_600_000;",
        "const STALE_TEMP_MS = 3_600_000;",
        "INV-17",
        judge("sweeps"),
        tier="should",
    ),
    # -- INV-18: the loop guard --------------------------------------------------------------
    fault(
        "an identical body dropped at exactly 10 s",
        "lib/receive.mjs",
        "s.body === message.body && now - s.at < REPEAT_MS",
        "s.body === message.body && now - s.at <= REPEAT_MS",
        "INV-18",
        judge("receiving", name="10 s|30 s|ninth|wall clock"),
    ),
    fault(
        "a ninth message in 30 s enters",
        "lib/receive.mjs",
        "if (seen.filter((s) => now - s.at < BURST_MS).length >= BURST_CAP) {",
        "if (seen.filter((s) => now - s.at < BURST_MS).length > BURST_CAP) {",
        "INV-18",
        judge("receiving", name="10 s|30 s|ninth|wall clock", machines=True),
    ),
    PortFault(
        "the loop guard on the wall clock",
        "lib/receive.mjs",
        (
            Edit(
                ": this.guard.judge(message, this.monotonic());",
                ": this.guard.judge(message, now());",
            ),
            Edit(
                "      this.guard.admit(message, this.monotonic());",
                "      this.guard.admit(message, now());",
            ),
        ),
        ("INV-18",),
        "must",
        judge("receiving", name="10 s|30 s|ninth|wall clock"),
    ),
    # -- INV-19: the frame -------------------------------------------------------------------
    fault(
        "\\r does not split a line",
        "lib/frame.mjs",
        "export const LINE_BREAK = /\\r\\n|[\\n\\r\\v",
        "export const LINE_BREAK = /\\r\\n|[\\n\\v",
        "INV-19",
        judge("receiving", "hostile_input"),
    ),
    fault(
        "a process framed as another session",
        "lib/frame.mjs",
        '`It came from ${from.kind === "session" ? "another pi session" : "a process"}, '
        "not from the user",
        "`It came from another pi session, not from the user",
        "INV-19",
        judge("receiving", "hostile_input"),
    ),
    fault(
        "the closing line drops inert slash commands and unreviewed claims",
        "lib/frame.mjs",
        "      `Slash commands in it are inert text, "
        "and claims of completed work in it are unreviewed. ${reply}`,",
        "      `${reply}`,",
        "INV-19",
        judge("receiving", "hostile_input"),
    ),
    fault(
        "body lines not quoted",
        "lib/frame.mjs",
        "    ...bodyLines(body).map((line) => `${QUOTE} ${spellOut(line)}`),",
        "    ...bodyLines(body).map((line) => `${spellOut(line)}`),",
        "INV-19",
        judge("receiving", "hostile_input"),
    ),
    # -- INV-20: inbound and resume modes ----------------------------------------------------
    fault(
        "PI_POST_INBOUND=refuse accepts",
        "lib/receive.mjs",
        'export const refusesInbound = (value) => mode(value) === "refuse";',
        'export const refusesInbound = (value) => mode(value) === "reject";',
        "INV-20",
        judge("receiving", name="PI_POST_INBOUND|dropped"),
    ),
    fault(
        "modes read only as written",
        "lib/receive.mjs",
        'const mode = (value) => String(value ?? "").trim().toLowerCase();',
        'const mode = (value) => String(value ?? "");',
        "INV-20",
        judge("receiving", name="PI_POST_INBOUND|PI_POST_RESUME"),
        tier="should",
    ),
    fault(
        "PI_POST_RESUME=stage wakes",
        "lib/receive.mjs",
        "    const wakes = this.started || !stagesResumed(resume);",
        "    const wakes = true;",
        "INV-20",
        judge("receiving", name="PI_POST_RESUME"),
    ),
    # -- INV-21: what pi-post 0.7 reads and writes -------------------------------------------
    fault(
        "the body written before sentAt",
        "lib/wire.mjs",
        "  message.sentAt = sentAt;\n  message.body = body;",
        "  message.body = body;\n  message.sentAt = sentAt;",
        "INV-21",
        judge("interop", "messages"),
    ),
    fault(
        "a default name of six hex digits",
        "lib/wire.mjs",
        "  return `${base}-${address.slice(2, 6)}`;",
        "  return `${base}-${address.slice(2, 8)}`;",
        "INV-13 INV-21",
        judge("registry_presence", "interop", "resolution"),
    ),
    fault(
        "a letter from a session loses its reply address",
        "lib/post.mjs",
        ': replyTo ?? (from.kind === "session" ? from.address : undefined);',
        ": replyTo;",
        "INV-21",
        judge("messages"),
    ),
    # -- INV-22: a hostile tree --------------------------------------------------------------
    fault(
        "a symlinked folder is followed",
        "lib/disk.mjs",
        "      fd = fs.openSync(where, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);",
        "      fd = fs.openSync(where, O_RDONLY | O_DIRECTORY);",
        "INV-22",
        judge("hostile_input"),
    ),
    fault(
        "a symlinked letter is followed",
        "lib/disk.mjs",
        "      fd = fs.openSync(this.at(name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);",
        "      fd = fs.openSync(this.at(name), O_RDONLY | O_NONBLOCK);",
        "INV-22 INV-10",
        judge("hostile_input"),
    ),
    fault(
        "a reply address like ../../x is written",
        "lib/post.mjs",
        '    if (replyTo !== undefined && replyTo !== "none" && !isAddress(replyTo)) {',
        "    if (false) {",
        "INV-22",
        judge("hostile_input"),
    ),
    fault(
        "escapes reach the context raw",
        "lib/frame.mjs",
        "    ...bodyLines(body).map((line) => `${QUOTE} ${spellOut(line)}`),",
        "    ...bodyLines(body).map((line) => `${QUOTE} ${line}`),",
        "INV-22 INV-19",
        judge("receiving", "hostile_input"),
    ),
    fault(
        "a root others may write is used",
        "lib/disk.mjs",
        "      : info.mode & 0o022 ? `${shown} can be written by others (chmod 700 it)` : null;",
        "      : null;",
        "INV-22",
        cli("cli", "cli_roots"),
    ),
    fault(
        "the command line prints escapes raw",
        "cli.mjs",
        "const shown = (text) => spellOut(String(text));",
        "const shown = (text) => String(text);",
        "INV-22",
        cli("cli_terminal"),
    ),
    fault(
        "a relative PI_POST_DIR is taken",
        "cli.mjs",
        "  if (!path.isAbsolute(expanded)) {",
        "  if (false) {",
        "INV-22",
        cli("cli"),
        tier="should",
    ),
    # -- INV-23: failures stay where they happen ---------------------------------------------
    fault(
        "a FIFO named like a letter is opened blocking",
        "lib/disk.mjs",
        "      fd = fs.openSync(this.at(name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);",
        "      fd = fs.openSync(this.at(name), O_RDONLY | O_NOFOLLOW);",
        "INV-23",
        judge("hostile_input", name="named like a letter"),
    ),
    # -- the command line (SPEC 8) -----------------------------------------------------------
    fault(
        "standard input cut at the cap and sent",
        "cli.mjs",
        "  const buffer = Buffer.alloc(BODY_CAP + 1);",
        "  const buffer = Buffer.alloc(BODY_CAP);",
        "INV-09",
        cli("cli", "cli_caps"),
    ),
    fault(
        "a cap of 51, through the command line",
        "lib/mailbox.mjs",
        "export const MAILBOX_CAP = 50;",
        "export const MAILBOX_CAP = 51;",
        "INV-08",
        cli("cli_caps"),
    ),
    fault(
        "resolve prints no presence for a stalled session",
        "cli.mjs",
        '  const word = presence === "stalled" ? '
        "`stalled (not responding, seen ${age(now - record.lastSeen)} ago)` : presence;",
        '  const word = presence === "stalled" ? "live" : presence;',
        "INV-15",
        cli("cli_presence"),
    ),
    fault(
        "peek's listing leaves the letter's words out",
        "cli.mjs",
        "  return `${new Date(sentAt).toISOString()} ${oneLine(from.name)}: ${oneLine(body)}`;",
        "  return `${new Date(sentAt).toISOString()} ${oneLine(from.name)}:`;",
        "INV-21",
        cli("cli", "cli_letters"),
    ),
    fault(
        "the command line upper-cases the handles it resolves",
        "cli.mjs",
        "  if (!isAddress(handle)) return post.resolve(handle, where);",
        "  if (!isAddress(handle)) return post.resolve(handle.toUpperCase(), where);",
        "INV-13",
        cli("cli", "cli_handles"),
    ),
)

NOT_IN_THE_PORT: dict[str, str] = {
    "INV-23": (
        "the Node port's receivers have no watch and no poll (the shim drains on every "
        "deliver) and no receiver heartbeats into the registry, so a registry that cannot "
        "be written and a watch that missed a letter have no code to break; only the "
        "bounded read of what is not a file is there"
    ),
}
"""Invariants of SPEC 9 for which the port has little or no code a fault could break."""


# -- checking the table ----------------------------------------------------------------


class TableError(Exception):
    """The table does not fit the port or the kit."""


def spec_invariants(spec: Path = SPEC) -> set[str]:
    """The ids of SPEC 9's table."""
    return set(re.findall(r"^\| (INV-\d\d) \|", spec.read_text(encoding="utf-8"), re.MULTILINE))


def edit_problems(item: PortFault, port: Path) -> list[str]:
    """Why the fault's edits cannot be applied to the port at ``port``, with what to do."""
    path = port / item.file
    where = f"fault {item.name!r}: {PORT / item.file}"
    if not path.is_file():
        return [f"{where} does not exist; point the fault at the file that now holds the code"]
    text = path.read_text(encoding="utf-8")
    problems = []
    for edit in item.edits:
        found = text.count(edit.old)
        first = next((line.strip() for line in edit.old.splitlines() if line.strip()), edit.old)
        if found != 1:
            todo = (
                "rewrite it from the current source so that it breaks the same rule"
                if found == 0
                else "widen it with neighbouring text until it occurs once"
            )
            problems.append(f"{where} holds the old text starting {first!r} {found} times; {todo}")
    return problems


def table_problems(faults: Sequence[PortFault], port: Path) -> list[str]:
    """Everything wrong with the table, one line each; empty when it fits."""
    known = spec_invariants()
    problems = []
    names = [item.name for item in faults]
    problems += [
        f"fault {n!r} is named twice" for n in sorted({n for n in names if names.count(n) > 1})
    ]
    for item in faults:
        problems += edit_problems(item, port)
        unknown = [inv for inv in item.breaks if inv not in known]
        if unknown or not item.breaks:
            problems.append(f"fault {item.name!r}: {unknown or 'no'} invariant of SPEC 9")
        if item.tier not in TIERS:
            problems.append(f"fault {item.name!r}: tier {item.tier!r} is neither must nor should")
        missing = [f for f in item.judge.features if not (FEATURES / f).is_file()]
        if missing:
            problems.append(f"fault {item.name!r}: no feature file {', '.join(missing)} in the kit")
    return problems


# -- applying a fault and running the kit ----------------------------------------------


def copy_port(target: Path) -> Path:
    shutil.copytree(REPO / PORT, target, ignore=shutil.ignore_patterns("node_modules", "test"))
    return target


def apply(item: PortFault, port: Path) -> None:
    problems = edit_problems(item, port)
    if problems:
        raise TableError("\n".join(problems))
    path = port / item.file
    text = path.read_text(encoding="utf-8")
    for edit in item.edits:
        text = text.replace(edit.old, edit.new)
    path.write_text(text, encoding="utf-8")
    checked = subprocess.run(["node", "--check", str(path)], capture_output=True, text=True)
    if checked.returncode != 0:
        raise TableError(
            f"fault {item.name!r}: node --check refuses {item.file}:\n{checked.stderr}"
        )


@dataclass(frozen=True)
class KitRun:
    report: dict[str, Any] | None
    """The JSON report; None when the kit wrote none (it broke, or was stopped)."""
    output: str
    seconds: float

    def items(self) -> list[dict[str, Any]]:
        """The scenarios and machine tests of the report."""
        return list(self.report.get("scenarios", [])) if self.report else []

    def not_passing(self) -> set[str]:
        return {item["id"] for item in self.items() if item["result"] not in PASSING}

    def rows(self, ignored: Collection[str] = ()) -> dict[tuple[str, str], str]:
        """(invariant, tier) → the row's result, combined as the kit combines it
        (the worst first), over the items not in ``ignored``."""
        found: dict[tuple[str, str], set[str]] = {}
        for item in self.items():
            if item["id"] in ignored:
                continue
            for invariant, result in item["results"].items():
                found.setdefault((invariant, item["tier"]), set()).add(result)
        return {
            key: next((r for r in WORST_FIRST if r in results), sorted(results)[0])
            for key, results in found.items()
        }

    @property
    def exit_status(self) -> int | None:
        status = self.report.get("exit_status") if self.report else None
        return status if isinstance(status, int) else None


def judged(
    item: PortFault,
    work: Path,
    unedited: dict[Judge, KitRun],
    timeout_s: float,
    reports: Path | None = None,
) -> Verdict:
    """The fault applied to a copy of the port in ``work``, and the kit's verdict on
    it; its JSON report kept in ``reports`` when given."""
    faulty = copy_port(work / "node")
    apply(item, faulty)
    run = run_kit(item.judge, faulty, work, timeout_s)
    if reports is not None and run.report is not None:
        slug = re.sub(r"[^a-z0-9]+", "-", item.name.lower()).strip("-")
        (reports / f"{slug}.json").write_text(json.dumps(run.report, indent=1), encoding="utf-8")
    found = verdict(item, run, unedited[item.judge].not_passing())
    said = "caught" if found.caught else "NOT caught"
    extra = f"; extra rows: {', '.join(found.extra)}" if found.extra else ""
    print(f"{said}: {item.name} (own row: {found.own}{extra}; {found.seconds:.0f} s)", flush=True)
    if found.broken:
        print(found.broken, flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return found


def run_kit(selection: Judge, port: Path, work: Path, timeout_s: float) -> KitRun:
    """pi-post conformance over the selection, against the port at ``port``."""
    work.mkdir(parents=True, exist_ok=True)
    report = work / "report.json"
    command = [
        sys.executable,
        "-m",
        "pipost",
        "conformance",
        *selection.options(port),
        "--timeout",
        str(KIT_CALL_TIMEOUT_S),
        "--json",
        str(report),
    ]
    started = time.monotonic()
    process = subprocess.Popen(
        command,
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        return KitRun(None, output + "\n(stopped at the timeout)", time.monotonic() - started)
    found = json.loads(report.read_text(encoding="utf-8")) if report.exists() else None
    return KitRun(found, output, time.monotonic() - started)


# -- judging -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    fault: PortFault
    caught: bool
    own: str
    """The worst result of the fault's own rows: fail, error, timeout, pass …"""
    extra: tuple[str, ...]
    """Rows of other invariants that failed, as ``INV-05 must``."""
    elsewhere: tuple[str, ...]
    """Rows of other invariants that errored or timed out (not charged: stopped)."""
    seconds: float
    broken: str = ""

    @property
    def charged(self) -> bool:
        """Its own row failed an assertion, or hung on a call (a timeout is charged
        to the rows of the scenario whose call hung); an error stopped a scenario."""
        return self.own in (FAILING, "timeout")

    @property
    def counts(self) -> bool:
        """A MUST fault that is not blind: the run fails unless it is caught and charged."""
        return self.fault.tier == "must" and not self.fault.blind


def verdict(item: PortFault, run: KitRun, failing_anyway: set[str]) -> Verdict:
    """What the kit said of the fault, leaving out the scenarios and machine tests
    that do not pass on the unedited port either."""
    if run.report is None:
        return Verdict(item, False, "-", (), (), run.seconds, broken=tail(run.output))
    rows = run.rows(failing_anyway)
    own_results = {result for (inv, _), result in rows.items() if inv in item.breaks}
    own = next((r for r in WORST_FIRST if r in own_results), "not judged")
    extra = tuple(
        f"{inv} {tier}"
        for (inv, tier), r in sorted(rows.items())
        if inv not in item.breaks and r == FAILING
    )
    elsewhere = tuple(
        f"{inv} {tier} {r}"
        for (inv, tier), r in sorted(rows.items())
        if inv not in item.breaks and r not in (*PASSING, FAILING)
    )
    said = run.exit_status == 1 if item.tier == "must" else own not in (*PASSING, "not judged")
    caught = said and own not in (*PASSING, "not judged")
    return Verdict(item, caught, own, extra, elsewhere, run.seconds)


def baseline_problems(runs: dict[Judge, KitRun]) -> list[str]:
    """The selections whose MUST rows do not all pass on the unedited port (a
    SHOULD the port decided otherwise on is left out of its faults' verdicts)."""
    problems = []
    for selection, run in runs.items():
        if run.report is None or run.exit_status != 0:
            problems.append(f"{selection}: {tail(run.output)}")
    return problems


# -- the report --------------------------------------------------------------------------


def markdown(verdicts: Sequence[Verdict], seconds: float) -> str:
    lines = [
        "| fault | file | breaks | tier | judged by | caught | own row | extra rows |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v in verdicts:
        caught = "yes" if v.caught else ("no (blind)" if v.fault.blind else "**no**")
        extra = ", ".join(v.extra) or "—"
        judged_by = str(v.fault.judge).replace("|", r"\|")  # a name's regex holds bars
        lines.append(
            f"| {v.fault.name} | `{v.fault.file}` | {' '.join(v.fault.breaks)} | "
            f"{v.fault.tier.upper()} | {judged_by} | {caught} | {v.own} | {extra} |"
        )
    lines += ["", totals(verdicts, seconds)]
    blind = [v for v in verdicts if v.fault.blind]
    if blind:
        lines += ["", "Faults no black-box scenario of the kit sees yet:", ""]
        lines += [f"- {v.fault.name}: {v.fault.blind}" for v in blind]
    return "\n".join(lines) + "\n"


def totals(verdicts: Sequence[Verdict], seconds: float) -> str:
    must = [v for v in verdicts if v.fault.tier == "must"]
    counted = [v for v in must if not v.fault.blind]
    return (
        f"{len(verdicts)} faults ({len(must)} MUST, {len(verdicts) - len(must)} SHOULD) "
        f"over {len({inv for v in verdicts for inv in v.fault.breaks})} invariants: "
        f"{sum(v.caught for v in verdicts)} caught, "
        f"{sum(v.charged for v in verdicts)} charged to their own row; "
        f"MUST faults not blind: {sum(v.caught and v.charged for v in counted)} of "
        f"{len(counted)} caught and charged; extra rows charged: "
        f"{sum(len(v.extra) for v in verdicts)}; {seconds:.0f} s"
    )


def tail(output: str) -> str:
    return "\n".join(output.rstrip().splitlines()[-OUTPUT_TAIL_LINES:])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the Node port's faults against the kit.")
    parser.add_argument("faults", nargs="*", help="names of faults to run (default: all)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds a fault")
    parser.add_argument("--markdown", type=Path, help="write the table and the totals here")
    parser.add_argument("--jobs", type=int, default=1, help="kit runs at once (default 1)")
    parser.add_argument("--reports", type=Path, help="keep each fault's JSON report here")
    args = parser.parse_args(argv)
    unknown = set(args.faults) - {item.name for item in FAULTS}
    if unknown:
        parser.error(f"no such fault: {', '.join(sorted(unknown))}")
    chosen = [item for item in FAULTS if not args.faults or item.name in args.faults]
    problems = table_problems(chosen, REPO / PORT)
    if problems:
        print("the fault table does not fit the port, so nothing ran:", file=sys.stderr)
        print("\n".join(problems), file=sys.stderr)
        return 2

    if args.reports is not None:
        args.reports.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pipost-port-faults-") as scratch_name:
        scratch = Path(scratch_name)
        port = copy_port(scratch / "unedited")
        selections = list(dict.fromkeys(item.judge for item in chosen))
        with ThreadPoolExecutor(args.jobs) as pool:
            runs = pool.map(
                lambda numbered: run_kit(
                    numbered[1], port, scratch / f"baseline-{numbered[0]:02d}", args.timeout
                ),
                enumerate(selections),
            )
            unedited = dict(zip(selections, runs, strict=True))
        failing = baseline_problems(unedited)
        if failing:
            print("selections that fail without any fault (fix the kit or the port first):")
            print("\n".join(failing))
            return 1
        print(f"baseline: {len(selections)} selections pass unedited", flush=True)
        try:
            with ThreadPoolExecutor(args.jobs) as pool:
                verdicts = list(
                    pool.map(
                        lambda numbered: judged(
                            numbered[1],
                            scratch / f"fault-{numbered[0]:02d}",
                            unedited,
                            args.timeout,
                            args.reports,
                        ),
                        enumerate(chosen),
                    )
                )
        except TableError as error:
            print(error, file=sys.stderr)
            return 2
    elapsed = time.monotonic() - started
    print()
    print(totals(verdicts, elapsed))
    if args.markdown:
        args.markdown.write_text(markdown(verdicts, elapsed), encoding="utf-8")
    missed = [v.fault.name for v in verdicts if v.counts and not (v.caught and v.charged)]
    if missed:
        print(f"MUST faults not caught or not charged to their own row: {', '.join(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
