"""The command line as a separate process (SPEC 8): records, letters and hostile
files laid out by hand as pi-post 0.7 writes them, the command run with PI_POST_DIR
set, and what it printed and wrote read back. Nothing here goes through the driver,
so these steps hold any CLI compatible with pi-post 0.7 to the same account
(environment.py picks it).

They assert the contract, not pipost's wording: exit codes, the ``pi-post: ``
prefix of an error, the facts an output must name (an address, a handle, a
path), the bytes on disk, and that no raw control character reaches the terminal.
pipost's own texts are pinned in tests/test_cli.py and tests/test_format.py.

Step text may spell a control character as ``\x1b`` (escape), ``\x07`` (bell),
``\u202e`` (a bidi override): such arguments are unescaped before use."""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema
from behave import given, then, when
from behave.runner import Context
from referencing import Registry, Resource

from pipost_conformance import INTEROP, SCHEMAS
from pipost_conformance.client import Json
from pipost_conformance.features.steps.feature_world import (
    QUOTED,
    QUOTED_LIST,
    checks,
    dict_of,
    letter_bytes,
    list_of,
    quoted_items,
    text_of,
    tree_changes,
    use_regular_expressions,
    valid_letter,
    write_private,
)

use_regular_expressions()

RUN_TIMEOUT_S = 30.0
LETTER_ID = r"[0-9]{13}-[0-9a-f]{8}"
RECEIPT = re.compile(rf"(queued|delivered) (s-[0-9a-f]{{12}}) ({LETTER_ID})")
_PLACEHOLDER = re.compile(r"\{scratch\}|\{([\w-]+)\.address\}")
UNSAFE_ON_A_TERMINAL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"
)
"""What a terminal or a reader acts on rather than shows: C0 controls but the tab
and the line feed (ESC, BEL, backspace, CR, ...), DEL, C1 controls (CSI is
U+009B), bidi controls, line and paragraph separators, and the bytes that are not
UTF-8 (read back as lone surrogates; a raw 0x9B is CSI to a terminal in an 8-bit
mode)."""
WIRE_KEYS = ["v", "id", "from", "replyTo", "sentAt", "body"]
SENDER_KEYS = ["kind", "name", "address", "cwd"]
"""The order of a letter's keys as pi-post 0.7 writes them (SPEC 1.2)."""


def address_of(session_id: str) -> str:
    """The address rule of SPEC 1.1, stated again so that these steps need nothing
    of the implementation under test."""
    return "s-" + hashlib.sha256(b"session\0" + session_id.encode("utf-8")).hexdigest()[:12]


def unescape(text: str) -> str:
    r"""``\x1b``, ``\u202e``, ``\n``, ``\t`` and ``\\`` in step text → the characters
    they name; everything else, non-ASCII included, as it is."""
    return _ESCAPE.sub(lambda found: found.group().encode().decode("unicode_escape"), text)


_ESCAPE = re.compile(r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|[ntr\\])")


@dataclass
class Ran:
    code: int
    stdout: str
    stderr: str
    """What it printed, read as UTF-8; bytes that are not UTF-8 become lone surrogates."""


def snapshot(base: Path) -> dict[str, str]:
    """Every path under ``base``, links not followed: kind, mode, inode, mtime and
    content (a link's target). Reading must leave all of it as it was: a file
    rewritten with the same bytes, or a folder something was made and removed in,
    shows too."""
    found: dict[str, str] = {}
    if not os.path.lexists(base):
        return found
    pending = [base]
    while pending:
        path = pending.pop()
        info = os.lstat(path)
        kind = stat.S_IFMT(info.st_mode)
        what = f"{oct(stat.S_IMODE(info.st_mode))} inode {info.st_ino} mtime {info.st_mtime_ns}"
        if stat.S_ISLNK(info.st_mode):
            what = f"link -> {os.readlink(path)} {what}"
        elif stat.S_ISDIR(info.st_mode):
            what = f"folder {what}"
            pending += [path / name for name in os.listdir(path)]
        elif stat.S_ISREG(info.st_mode):
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            what = f"file sha256:{digest} {what}"
        else:
            what = f"kind {kind:o} {what}"
        found[str(path.relative_to(base))] = what
    return found


@dataclass
class Shell:
    """A user at a shell: where they work, what they ran and what it printed."""

    command: list[str] | None
    """The command line under test; None: pipost's, run in this process."""
    scratch: Path
    addresses: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    ran: Ran | None = None
    changes: list[str] = field(default_factory=list)
    """What the last command changed anywhere in the scratch folder."""
    letter_id: str | None = None
    environment: dict[str, str] = field(default_factory=dict)
    """What the scenario set in the environment, over PI_POST_DIR and HOME."""

    @property
    def root(self) -> Path:
        return self.scratch / "post"

    def expand(self, text: str) -> str:
        def substitute(match: re.Match[str]) -> str:
            if match.group(1) is None:
                return str(self.scratch)
            assert match.group(1) in self.addresses, f"no session {match.group(1)!r}"
            return self.addresses[match.group(1)]

        return _PLACEHOLDER.sub(substitute, text)

    def run(self, args: list[str], stdin: str | None = None) -> Ran:
        assert self.cwd is not None, "the scenario says nowhere where I work"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PI_")}
        env.update(PI_POST_DIR=str(self.root), HOME=str(self.scratch / "home"))
        env.update(self.environment)
        before = snapshot(self.scratch)
        if self.command is None:
            self.ran = _run_in_process(args, env, self.cwd, stdin)
        else:
            done = subprocess.run(
                [*self.command, *args],
                cwd=self.cwd,
                env=env,
                input=(stdin or "").encode("utf-8"),
                capture_output=True,
                timeout=RUN_TIMEOUT_S,
                check=False,
            )
            self.ran = Ran(
                done.returncode,
                done.stdout.decode("utf-8", "surrogateescape"),
                done.stderr.decode("utf-8", "surrogateescape"),
            )
        self.changes = tree_changes(before, snapshot(self.scratch))
        return self.ran

    def last(self) -> Ran:
        assert self.ran is not None, "nothing was run yet"
        return self.ran

    def mailbox(self, label: str) -> Path:
        return self.root / "inbox" / self.addresses[label]

    def letter(self, label: str) -> Path:
        assert self.letter_id is not None, "no letter was sent yet"
        return self.mailbox(label) / f"{self.letter_id}.json"

    def sent_letter_path(self) -> Path:
        assert self.letter_id is not None, "no letter was sent yet"
        found = list(self.root.glob(f"inbox/*/{self.letter_id}.json"))
        assert len(found) == 1, f"{len(found)} files named {self.letter_id}.json"
        return found[0]

    def sent_letter(self) -> dict[str, object]:
        found = json.loads(self.sent_letter_path().read_bytes())
        assert isinstance(found, dict), found
        return found

    def letters_in(self, label: str) -> list[str]:
        """The letters queued for a session, as every reader counts them."""
        folder = self.mailbox(label)
        if not folder.is_dir():
            return []
        return sorted(n for n in os.listdir(folder) if n.endswith(".json") and n[0] != ".")


class LetterTaker:
    """A receiver of the kit's own standing in for a live session's: it unlinks each
    letter of one mailbox as it lands, as a receiver does once the text entered, and
    notes how long after its writing (its mtime) it took it."""

    POLL_S = 0.005

    def __init__(self, mailbox: Path) -> None:
        self.mailbox = mailbox
        self.taken_after_s: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._take, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _take(self) -> None:
        while not self._stop.wait(self.POLL_S):
            try:
                names = [n for n in os.listdir(self.mailbox) if n.endswith(".json")]
            except FileNotFoundError:
                continue
            for name in names:
                letter = self.mailbox / name
                try:
                    written = letter.stat().st_mtime
                    letter.unlink()
                except FileNotFoundError:
                    continue
                self.taken_after_s[name] = time.time() - written


def _run_in_process(args: list[str], env: dict[str, str], cwd: Path, stdin: str | None) -> Ran:
    """pipost's command line without a process of its own: the same code as
    ``python -m pipost``, without the interpreter's start-up on every step."""
    from pipost import cli

    out, err = io.StringIO(), io.StringIO()
    context = cli.Invocation(
        environ=env,
        cwd=str(cwd),
        stdin=io.TextIOWrapper(io.BytesIO((stdin or "").encode("utf-8"))),
        stdout=out,
        stderr=err,
    )
    code = cli.run(args, context)
    return Ran(code, out.getvalue(), err.getvalue())


def shell(context: Context) -> Shell:
    if "shell" not in context:
        command = context.implementation.cli
        context.shell = Shell(None if command is None else list(command), context.scratch)
    found = context.shell
    assert isinstance(found, Shell)
    return found


# -- the post office, laid out by hand ---------------------------------------------------


def _write_record(
    context: Context,
    label: str,
    session_id: str,
    cwd: str,
    name: str,
    running: dict[str, object] | None = None,
    unseen_ms: int | None = None,
) -> None:
    """A session's record as pi-post 0.7 writes it: offline (no pid) and seen a
    minute ago, or, with ``running``, the pid (and pidStart) of one that says it
    runs, seen just now unless ``unseen_ms`` says otherwise. Its folder is made."""
    me = shell(context)
    folder = Path(unescape(me.expand(cwd)))
    folder.mkdir(parents=True, exist_ok=True)
    address = address_of(session_id)
    now = int(time.time() * 1000)
    if unseen_ms is None:
        unseen_ms = 0 if running else 60_000
    record: dict[str, object] = {
        "v": 1,
        "address": address,
        "sessionId": session_id,
        "name": name.replace("{default}", f"{folder.name}-{address[2:6]}"),
        "cwd": str(folder),
        **(running or {}),
        "startedAt": now - 3_600_000,
        "lastSeen": now - unseen_ms,
    }
    data = json.dumps(record, ensure_ascii=False).encode("utf-8")
    write_private(me.root / "registry" / f"{address}.json", data)
    me.addresses[label] = address


@given(f"a session {QUOTED} with id {QUOTED} in {QUOTED}, offline")
def offline_session(context: Context, label: str, session_id: str, cwd: str) -> None:
    _write_record(context, label, session_id, cwd, label)


@given(f"a session {QUOTED} with id {QUOTED} named by default, in {QUOTED}, offline")
def offline_unnamed_session(context: Context, label: str, session_id: str, cwd: str) -> None:
    _write_record(context, label, session_id, cwd, "{default}")


@given(f"a session {QUOTED} with id {QUOTED} in {QUOTED}, running as this process")
def session_of_this_process(context: Context, label: str, session_id: str, cwd: str) -> None:
    _write_record(context, label, session_id, cwd, label, {"pid": os.getpid()})


@given(
    f"a session {QUOTED} with id {QUOTED} in {QUOTED}, running as this process "
    "but silent for (\\d+) seconds"
)
def session_silent(context: Context, label: str, session_id: str, cwd: str, seconds: str) -> None:
    running: dict[str, object] = {"pid": os.getpid()}
    _write_record(context, label, session_id, cwd, label, running, unseen_ms=int(seconds) * 1000)


def _pid_of_an_ended_process() -> int:
    ended = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True)
    pid = int(ended.stdout)
    assert not os.path.exists(f"/proc/{pid}"), "the pid was taken again at once"
    return pid


@given(f"a session {QUOTED} with id {QUOTED} in {QUOTED} whose pid no process has")
def session_of_a_dead_pid(context: Context, label: str, session_id: str, cwd: str) -> None:
    running = {"pid": _pid_of_an_ended_process(), "pidStart": "12345"}
    _write_record(context, label, session_id, cwd, label, running)


@given(
    f"a session {QUOTED} with id {QUOTED} in {QUOTED}, seen just now, whose pid is that of "
    "a process that ended"
)
def session_of_an_ended_process(context: Context, label: str, session_id: str, cwd: str) -> None:
    # As pi-post 0.7 writes it: a pid, no pidStart.
    _write_record(context, label, session_id, cwd, label, {"pid": _pid_of_an_ended_process()})


@given(f"a session {QUOTED} with id {QUOTED} in {QUOTED} whose pid another process has now")
def session_of_a_recycled_pid(context: Context, label: str, session_id: str, cwd: str) -> None:
    # This process runs under the pid, but did not start at clock tick 1.
    _write_record(context, label, session_id, cwd, label, {"pid": os.getpid(), "pidStart": "1"})


@given(f"a session {QUOTED} whose name, folder and session id carry the escapes {QUOTED}, offline")
def session_with_escapes(context: Context, label: str, escapes: str) -> None:
    raw = unescape(escapes)
    folder = f"{{scratch}}/{label}{raw}folder"
    _write_record(context, label, f"{label}-{raw}-id", folder, f"{raw}{label}{raw}")


@given(f"I work in {QUOTED}")
def work_in(context: Context, cwd: str) -> None:
    me = shell(context)
    me.cwd = Path(me.expand(cwd))
    me.cwd.mkdir(parents=True, exist_ok=True)


@given(f"the folder {QUOTED} is a symlink to {QUOTED}")
def folder_symlink(context: Context, link: str, target: str) -> None:
    me = shell(context)
    Path(me.expand(link)).symlink_to(me.expand(target), target_is_directory=True)


@given(f"the folder {QUOTED}")
def a_folder(context: Context, folder: str) -> None:
    Path(shell(context).expand(folder)).mkdir(parents=True, exist_ok=True)


@given("there is no post office folder yet")
def no_post_office(context: Context) -> None:
    shutil.rmtree(shell(context).root)


@given(f"the mailbox of {QUOTED} holds the letter pi-post 0.7 wrote, {QUOTED}")
def reference_letter(context: Context, label: str, name: str) -> None:
    reference_letter_renamed(context, label, name, name)


@given(f"the mailbox of {QUOTED} holds the letter pi-post 0.7 wrote, {QUOTED}, named {QUOTED}")
def reference_letter_renamed(context: Context, label: str, name: str, named: str) -> None:
    """A letter as the reference wrote it, in a file of another name when ``named``
    is not ``name``: its id then is not its file name."""
    me = shell(context)
    address = me.addresses[label]
    data = (INTEROP / "messages" / f"{address}--{name}").read_bytes()
    write_private(me.root / "inbox" / address / named, data)


@given(f"the mailbox of {QUOTED} holds (\\d+) letters")
def letters_queued(context: Context, label: str, count: str) -> None:
    me = shell(context)
    for number in range(int(count)):
        letter = valid_letter(f"{1796078534000 + number:013d}-{number:08x}", f"letter {number}")
        write_private(me.mailbox(label) / f"{letter['id']}.json", letter_bytes(letter))


@given(
    f"the session id {QUOTED}, which no record names, has a mailbox holding (\\d+) letters, "
    f"called {QUOTED}"
)
def mailbox_without_record(context: Context, session_id: str, count: str, label: str) -> None:
    shell(context).addresses[label] = address_of(session_id)
    letters_queued(context, label, count)


@given(f"a letter queued for {QUOTED} whose sender name and body carry the escapes {QUOTED}")
def letter_with_escapes(context: Context, label: str, escapes: str) -> None:
    raw = unescape(escapes)
    letter = valid_letter("1796078534999-e5ca9e00", f"look {raw} here\nand\there {raw}")
    letter["from"] = {"kind": "process", "name": f"{raw}eve{raw}", "cwd": f"/tmp/{raw}"}
    write_private(shell(context).mailbox(label) / f"{letter['id']}.json", letter_bytes(letter))


@given(f"a file in the mailbox of {QUOTED} named with the escapes {QUOTED}")
def file_named_with_escapes(context: Context, label: str, escapes: str) -> None:
    me = shell(context)
    folder = os.fsencode(me.mailbox(label))
    name = unescape(escapes).encode("utf-8") + b"\x9b.json"  # and a C1 byte that is not UTF-8
    write_private(Path(os.fsdecode(folder + b"/" + name)), b"{}")


@given(f"the mailbox of {QUOTED} holds a file {QUOTED} that is not JSON")
def not_json_letter(context: Context, label: str, name: str) -> None:
    write_private(shell(context).mailbox(label) / name, b"not json")


@given(f"the mailbox of {QUOTED} holds a deposit in flight untouched for (\\d+) hours")
def stale_deposit(context: Context, label: str, hours: str) -> None:
    temporary = shell(context).mailbox(label) / "1796000000000-0badf00d.json.tmp"
    write_private(temporary, b'{"v":1,"id":"17960')
    _aged(temporary, int(hours))


@given(f"PI_POST_DIR is {QUOTED}")
def post_office_dir(context: Context, value: str) -> None:
    me = shell(context)
    me.environment["PI_POST_DIR"] = unescape(me.expand(value))


@given(f"PI_SESSION_ID is {QUOTED}")
def session_id_is(context: Context, value: str) -> None:
    shell(context).environment["PI_SESSION_ID"] = value


@given(f"HOME is {QUOTED}")
def home_is(context: Context, home: str) -> None:
    me = shell(context)
    me.environment["HOME"] = me.expand(home)


# -- running it ----------------------------------------------------------------------------


@when(f"at the shell I run pi-post (.+?)(?: with {QUOTED} on standard input)?")
def run_pi_post(context: Context, command: str, stdin: str | None = None) -> None:
    me = shell(context)
    text = None if stdin is None else stdin.replace("\\n", "\n")
    me.run(shlex.split(me.expand(command)), stdin=text)


@given("at the shell I ran pi-post (.+)")
def ran_pi_post(context: Context, command: str) -> None:
    me = shell(context)
    ran = me.run(shlex.split(me.expand(command)))
    assert ran.code == 0, ran


@when(f"at the shell I give pi-post the arguments {QUOTED_LIST}")
def run_with_arguments(context: Context, arguments: str) -> None:
    """Each quoted argument as one word, placeholders filled in and escapes
    unescaped: an argument may hold spaces and control characters."""
    me = shell(context)
    me.run([unescape(me.expand(argument)) for argument in quoted_items(arguments)])


@when(f"at the shell I send a body of (\\d+) {QUOTED} characters to {QUOTED}")
def send_long_body(context: Context, count: str, character: str, target: str) -> None:
    shell(context).run(["send", "--to", target, "--body", character * int(count)])


@when(f"at the shell I pipe (\\d+) {QUOTED} characters into pi-post (.+)")
def pipe_into_pi_post(context: Context, count: str, character: str, command: str) -> None:
    me = shell(context)
    me.run(shlex.split(me.expand(command)), stdin=character * int(count))


@when(f"at the shell I send (\\d+) letters to {QUOTED}, one command each")
def send_many(context: Context, count: str, target: str) -> None:
    me = shell(context)
    before = snapshot(me.scratch)
    context.runs = [
        me.run(["send", "--to", target, "--body", f"letter {n}"]) for n in range(int(count))
    ]
    me.changes = tree_changes(before, snapshot(me.scratch))


# -- what it printed -------------------------------------------------------------------------


def _succeeded(ran: Ran) -> None:
    assert ran.code == 0, f"exit {ran.code}: {ran.stderr!r}"


@then(f"it succeeds, printing {QUOTED}")
@checks("INV-21", "INV-11")
def succeeds_printing(context: Context, expected: str) -> None:
    me = shell(context)
    ran = me.last()
    _succeeded(ran)
    pattern = re.escape(me.expand(expected)).replace(re.escape("<id>"), f"({LETTER_ID})")
    found = re.fullmatch(pattern + "\n", ran.stdout)
    receipt = RECEIPT.fullmatch(ran.stdout.removesuffix("\n"))
    if receipt is not None:  # the letter it names is judged by the steps after, whatever
        me.letter_id = receipt.group(3)
    # A receipt with the other word is untrue (SPEC 3.2); anything else is the wording.
    words = {ran.stdout.split(" ", 1)[0], expected.split(" ", 1)[0]}
    blamed = "INV-11" if words == {"queued", "delivered"} else "INV-21"
    assert found, f"[{blamed}] printed {ran.stdout!r}, not {expected!r}"
    if found.groups():
        me.letter_id = found.group(1)


@then(f"it succeeds, printing the lines {QUOTED_LIST}")
@checks("INV-21")
def succeeds_printing_lines(context: Context, lines: str) -> None:
    me = shell(context)
    ran = me.last()
    _succeeded(ran)
    expected = [unescape(me.expand(line)) for line in quoted_items(lines)]
    assert ran.stdout.split("\n") == [*expected, ""], ran.stdout


@then(f"it succeeds, printing a card with {QUOTED}")
@checks("INV-13")
def succeeds_card(context: Context, line: str) -> None:
    me = shell(context)
    ran = me.last()
    _succeeded(ran)
    assert me.expand(line) in ran.stdout.splitlines(), ran.stdout


@then(f"it succeeds, printing a line with {QUOTED_LIST}")
@checks("INV-21")
def succeeds_line_with(context: Context, parts: str) -> None:
    me = shell(context)
    ran = me.last()
    _succeeded(ran)
    wanted = [me.expand(part) for part in quoted_items(parts)]
    lines = [line for line in ran.stdout.splitlines() if all(w in line for w in wanted)]
    assert lines, f"no line with {wanted} in {ran.stdout!r}"


@then(f"the line it printed holds (\\d+) {QUOTED} characters")
@checks("INV-21")
def line_holds(context: Context, count: str, character: str) -> None:
    (line,) = shell(context).last().stdout.splitlines()
    assert line.count(character) == int(count), f"{line.count(character)} of {character!r}"


def _refused(context: Context, parts: str, unsaid: str | None) -> None:
    """Exit 1, nothing on standard output, the error after ``pi-post: `` naming
    each fact (and not ``unsaid``), and nothing changed anywhere in the scratch
    folder."""
    me = shell(context)
    ran = me.last()
    assert ran.code == 1, f"exit {ran.code}, printing {ran.stdout!r} {ran.stderr!r}"
    assert ran.stdout == "", f"printed {ran.stdout!r}"
    assert ran.stderr.startswith("pi-post: "), ran.stderr
    for part in quoted_items(parts):
        assert me.expand(part) in ran.stderr, f"{part!r} not in {ran.stderr!r}"
    if unsaid is not None:
        assert unsaid not in ran.stderr, f"{unsaid!r} in {ran.stderr!r}"
    assert not me.changes, "\n".join(me.changes)


_REFUSED = f"saying {QUOTED_LIST}(?:, not {QUOTED})?, and writes nothing"


@then(f"it fails for its targets, {_REFUSED}")
@checks("INV-12")
def refused_for_targets(context: Context, parts: str, unsaid: str | None = None) -> None:
    _refused(context, parts, unsaid)


@then(f"it fails for its body, {_REFUSED}")
@checks("INV-09")
def refused_for_body(context: Context, parts: str, unsaid: str | None = None) -> None:
    _refused(context, parts, unsaid)


@then(f"it fails for its body, not naming {QUOTED}, and writes nothing")
@checks("INV-09")
def refused_for_body_alone(context: Context, unsaid: str) -> None:
    _refused(context, "", unsaid)


@then(f"it fails for the full mailbox, {_REFUSED}")
@checks("INV-08")
def refused_for_full_mailbox(context: Context, parts: str, unsaid: str | None = None) -> None:
    _refused(context, parts, unsaid)


@then(f"it refuses the post office folder, {_REFUSED}")
@checks("INV-22")
def refused_post_office(context: Context, parts: str, unsaid: str | None = None) -> None:
    _refused(context, parts, unsaid)


@then("the command wrote nothing")
@checks("INV-16")
def wrote_nothing(context: Context) -> None:
    changes = shell(context).changes
    assert not changes, "\n".join(changes)


@then("it exits (\\d), and the command wrote nothing")
@checks("INV-16")
def exits_and_wrote_nothing(context: Context, code: str) -> None:
    me = shell(context)
    assert me.last().code == int(code), f"exit {me.last().code}: {me.last().stderr!r}"
    wrote_nothing(context)


# -- the cap ---------------------------------------------------------------------------------


@then(f"each of them succeeded, and the mailbox of {QUOTED} holds (\\d+) letters")
@checks("INV-08")
def each_succeeded(context: Context, label: str, count: str) -> None:
    failed = [(n, ran.code, ran.stderr) for n, ran in enumerate(context.runs) if ran.code != 0]
    assert not failed, f"sends that failed: {failed[:3]}"
    queued = shell(context).letters_in(label)
    assert len(queued) == int(count), f"{len(queued)} letters queued"


@then(f"the mailbox of {QUOTED} still holds (\\d+) letters")
@checks("INV-08")
def still_holds(context: Context, label: str, count: str) -> None:
    queued = shell(context).letters_in(label)
    assert len(queued) == int(count), f"{len(queued)} letters queued"


# -- where a handle leads --------------------------------------------------------------------


def _one_letter_to(context: Context, label: str) -> None:
    """Exit 0, one receipt naming the session's address, and the one letter that
    was written in its mailbox under the id the receipt gives."""
    me = shell(context)
    ran = me.last()
    _succeeded(ran)
    address = me.addresses[label]
    receipts = [RECEIPT.fullmatch(line) for line in ran.stdout.splitlines()]
    assert len(receipts) == 1 and receipts[0], f"printed {ran.stdout!r}"
    assert receipts[0].group(2) == address, f"the receipt names {receipts[0].group(2)}"
    written = [change for change in me.changes if "(absent) ->" in change and ".json:" in change]
    assert len(written) == 1, "\n".join(me.changes)
    assert written[0].startswith(f"post/inbox/{address}/{receipts[0].group(3)}.json:"), written
    me.letter_id = receipts[0].group(3)


@then(f"it succeeds, and its one letter is in the mailbox of {QUOTED}, as its receipt says")
@checks("INV-13")
def letter_went_to(context: Context, label: str) -> None:
    _one_letter_to(context, label)


@then(f"it succeeds, writing one letter for them all, in the mailbox of {QUOTED}")
@checks("INV-12")
def one_letter_for_all(context: Context, label: str) -> None:
    _one_letter_to(context, label)


@then(f"the mailbox takes it: one letter, in the mailbox of {QUOTED}")
@checks("INV-08")
def mailbox_takes_it(context: Context, label: str) -> None:
    _one_letter_to(context, label)


@then(f"the body is taken: one letter, in the mailbox of {QUOTED}")
@checks("INV-09")
def body_taken(context: Context, label: str) -> None:
    _one_letter_to(context, label)


# -- presence --------------------------------------------------------------------------------

_PRESENCE_WORD = re.compile(r"\b(live|offline)\b")


def _presence_shown(text: str) -> str:
    """live, offline, or stalled when a line says neither (the reference prints
    "live" and "offline"; pipost says "not responding" for a stalled session)."""
    words = set(_PRESENCE_WORD.findall(text))
    assert len(words) <= 1, f"both live and offline in {text!r}"
    return words.pop() if words else "stalled"


@then(f"the listing shows {QUOTED} as (live|stalled|offline)")
@checks("INV-15")
def listed_as(context: Context, label: str, presence: str) -> None:
    me = shell(context)
    ran = me.last()
    _succeeded(ran)
    address = me.addresses[label]
    lines = [line for line in ran.stdout.splitlines() if address in line]
    assert len(lines) == 1, f"{len(lines)} lines name {address} in {ran.stdout!r}"
    shown = _presence_shown(lines[0].replace(label, ""))
    assert shown == presence, f"{lines[0]!r} shows it {shown}"


@then("the card shows it (live|stalled|offline)")
@checks("INV-15")
def card_shows(context: Context, presence: str) -> None:
    ran = shell(context).last()
    _succeeded(ran)
    lines = [line for line in ran.stdout.splitlines() if line.startswith("presence:")]
    assert len(lines) == 1, ran.stdout
    shown = _presence_shown(lines[0])
    assert shown == presence, f"{lines[0]!r} shows it {shown}"


# -- what reaches the terminal ---------------------------------------------------------------


@then("it exits (\\d), and nothing it printed holds a raw control character")
@checks("INV-22")
def printed_safely(context: Context, code: str) -> None:
    ran = shell(context).last()
    assert ran.code == int(code), f"exit {ran.code}: {ran.stderr!r}"
    for stream, text in (("standard output", ran.stdout), ("standard error", ran.stderr)):
        raw = UNSAFE_ON_A_TERMINAL.findall(text)
        assert not raw, f"raw {sorted(set(raw))!r} on {stream}: {text!r}"


@then(f"what it printed shows {QUOTED_LIST}")
@checks("INV-22")
def printed_recognisably(context: Context, parts: str) -> None:
    me = shell(context)
    ran = me.last()
    printed = ran.stdout + ran.stderr
    for part in quoted_items(parts):
        assert me.expand(part) in printed, f"{part!r} not in {printed!r}"


@then('what it printed is an error after "pi-post: "')
@checks("INV-22")
def printed_an_error(context: Context) -> None:
    ran = shell(context).last()
    assert ran.stderr.startswith("pi-post: "), ran.stderr


# -- the files it wrote ----------------------------------------------------------------------


@then(f"the mailbox of {QUOTED} holds just that letter, in a file 0600 named after its id")
@checks("INV-21")
def mailbox_holds_letter(context: Context, label: str) -> None:
    me = shell(context)
    letter = me.letter(label)
    assert sorted(os.listdir(letter.parent)) == [letter.name], os.listdir(letter.parent)
    mode = stat.S_IMODE(os.lstat(letter).st_mode)
    assert mode == 0o600, oct(mode)
    assert me.sent_letter()["id"] == me.letter_id


@then(
    f"that letter is a message of the current version from the process {QUOTED} in {QUOTED}, "
    "with no reply address"
)
@checks("INV-21")
def letter_from_process(context: Context, name: str, cwd: str) -> None:
    me = shell(context)
    letter = me.sent_letter()
    assert letter["v"] == MESSAGE_VERSION, letter
    assert letter["from"] == {"kind": "process", "name": name, "cwd": me.expand(cwd)}, letter
    assert "replyTo" not in letter, letter
    assert isinstance(me.letter_id, str)
    assert letter["sentAt"] == int(me.letter_id[:13]), letter
    assert set(letter) == {"v", "id", "from", "sentAt", "body"}, sorted(letter)


@then(f"that letter's reply address is {QUOTED}")
@checks("INV-21")
def letter_reply_to(context: Context, address: str) -> None:
    me = shell(context)
    assert me.sent_letter().get("replyTo") == me.expand(address), me.sent_letter()


@then("that letter has no reply address")
@checks("INV-21")
def letter_without_reply_to(context: Context) -> None:
    letter = shell(context).sent_letter()
    assert "replyTo" not in letter, letter


@then("that letter is the wire form, byte for byte as pi-post 0.7 writes it")
@checks("INV-21")
def letter_is_wire_form(context: Context) -> None:
    """Compact JSON, the keys in the order of SPEC 1.2, non-ASCII as it is, and a
    message of the current version by the schema shipped with the kit."""
    me = shell(context)
    data = me.sent_letter_path().read_bytes()
    letter = json.loads(data)
    assert data == letter_bytes(letter), data
    assert list(letter) == [key for key in WIRE_KEYS if key in letter], list(letter)
    sender = letter["from"]
    assert list(sender) == [key for key in SENDER_KEYS if key in sender], list(sender)
    _schema(f"message.v{MESSAGE_VERSION}").validate(letter)


@then(f"the body of that letter is {QUOTED}")
@checks("INV-21")
def letter_body(context: Context, body: str) -> None:
    found = shell(context).sent_letter()["body"]
    assert found == unescape(body), found


@then(f"the body of that letter is (\\d+) {QUOTED} characters")
@checks("INV-09")
def letter_long_body(context: Context, count: str, character: str) -> None:
    found = shell(context).sent_letter()["body"]
    assert found == character * int(count), f"a body of {len(str(found))} characters"


@then(f"that letter lies in {QUOTED}")
@checks("INV-22")
def letter_lies_in(context: Context, folder: str) -> None:
    me = shell(context)
    path = me.sent_letter_path()
    assert path.parent == Path(me.expand(folder)), path


# -- pipost's additions to the command line: doctor and the --json documents --------------
# Laid out as pipost writes them, and read back through the schema shipped with it.
# Both are reading commands: each of their assertions counts for INV-16 unless it
# reads a fact another invariant states (presence, where a handle leads, a letter
# set aside).

# The message version an implementation of this kit writes: the newest it ships a
# schema of (letters of the versions before it stay readable, and are not written).
MESSAGE_VERSION = max(
    int(path.name.removeprefix("message.v").removesuffix(".schema.json"))
    for path in SCHEMAS.glob("message.v*.schema.json")
)


def _schema(name: str) -> jsonschema.Draft202012Validator:
    def load(name: str) -> dict[str, object]:
        found = json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))
        assert isinstance(found, dict)
        return found

    wire = [load("message.v1"), load("record.v1")]
    referenced = Registry().with_resources(
        (str(schema["$id"]), Resource.from_contents(schema)) for schema in wire
    )
    return jsonschema.Draft202012Validator(load(name), registry=referenced)


def document(context: Context) -> dict[str, Json]:
    assert "document" in context, "no document was printed yet"
    return dict_of(context.document)


def _aged(path: Path, hours: int) -> None:
    moment = time.time() - hours * 3600
    os.utime(path, (moment, moment))


@given(f"the registry holds a record being replaced for {QUOTED}, untouched for (\\d+) hours")
def stale_record_write(context: Context, label: str, hours: str) -> None:
    me = shell(context)
    temporary = me.root / "registry" / f".{me.addresses[label]}.c0ffee00.tmp"
    write_private(temporary, b'{"v":1,')
    _aged(temporary, int(hours))


@given(f"{QUOTED} has (\\d+) listeners running")
def listeners_running(context: Context, label: str, count: str) -> None:
    """Listeners as pipost's own ``listeners/`` folder shows them (DESIGN §1): one
    file each, named after its pid, held with an exclusive flock while it runs. This
    process holds them until the scenario ends."""
    me = shell(context)
    folder = me.root / "listeners" / me.addresses[label]
    for number in range(int(count)):
        lock = folder / f"{os.getpid()}.{number:08x}.lock"
        write_private(lock, b"")
        held = os.open(lock, os.O_RDONLY)
        fcntl.flock(held, fcntl.LOCK_EX)
        context.add_cleanup(os.close, held)


@given(f"the quarantine of {QUOTED} holds {QUOTED}, set aside because {QUOTED}")
def quarantined_letter(context: Context, label: str, name: str, reason: str) -> None:
    me = shell(context)
    folder = me.root / "quarantine" / me.addresses[label]
    write_private(folder / name, b"not json")
    write_private(folder / f"{name}.reason", f"{reason}\n".encode())


@given(f"the drop log says {QUOTED} for {QUOTED} from {QUOTED} was dropped: {QUOTED}")
def logged_drop(context: Context, letter: str, label: str, sender: str, reason: str) -> None:
    me = shell(context)
    line = {"at": 1796078534257, "address": me.addresses[label], "letter": letter}
    line |= {"from": sender, "reason": reason}
    write_private(me.root / "log" / "drops.jsonl", (json.dumps(line) + "\n").encode())


@then(f"it exits (\\d), printing a {QUOTED} document the shipped schema accepts")
@checks("INV-16")
def prints_document(context: Context, code: str, command: str) -> None:
    ran = shell(context).last()
    assert ran.code == int(code), f"exit {ran.code}: {ran.stderr!r}"
    assert ran.stdout.count("\n") == 1, ran.stdout
    found = json.loads(ran.stdout)
    _schema("cli.v1").validate(found)
    assert (found["v"], found["command"]) == (1, command), found
    context.document = found


@then("it prints nothing on standard output")
@checks("INV-12")
def prints_nothing(context: Context) -> None:
    assert shell(context).last().stdout == ""


def _codes(context: Context, severity: str | None = None) -> list[str]:
    findings = [dict_of(f) for f in list_of(document(context)["findings"])]
    return [text_of(f["code"]) for f in findings if severity in (None, f["severity"])]


@then("every finding is ok")
@checks("INV-16")
def every_finding_ok(context: Context) -> None:
    assert _codes(context, "attention") == [], _codes(context, "attention")
    assert document(context)["healthy"] is True


@then(f"the findings include {QUOTED_LIST}")
@checks("INV-16")
def findings_include(context: Context, codes: str) -> None:
    missing = set(quoted_items(codes)) - set(_codes(context))
    assert not missing, f"{sorted(missing)} not in {_codes(context)}"


@then(f"the findings that need attention are, in any order, {QUOTED_LIST}")
@checks("INV-16")
def findings_needing_attention(context: Context, codes: str) -> None:
    assert sorted(_codes(context, "attention")) == sorted(quoted_items(codes)), _codes(context)
    assert document(context)["healthy"] is False


@then(f"the finding {QUOTED} is about {QUOTED}")
@checks("INV-16")
def finding_subject(context: Context, code: str, subject: str) -> None:
    findings = [dict_of(f) for f in list_of(document(context)["findings"])]
    subjects = [f["subject"] for f in findings if f["code"] == code]
    assert shell(context).expand(subject) in subjects, subjects


@then("it exits (\\d), each finding of that document on a line of its own")
@checks("INV-16")
def finding_lines(context: Context, code: str) -> None:
    ran = shell(context).last()
    assert ran.code == int(code), f"exit {ran.code}: {ran.stderr!r}"
    lines = ran.stdout.splitlines()
    for found in _codes(context):
        assert any(found in line for line in lines), (found, lines)


@then(f"the document names the post office {QUOTED}")
@checks("INV-16")
def document_root(context: Context, root: str) -> None:
    assert document(context)["root"] == shell(context).expand(root), document(context)


@then(f"the document lists {QUOTED} as (live|stalled|offline) with (\\d+) queued")
@checks("INV-15")
def document_lists(context: Context, label: str, presence: str, queued: str) -> None:
    address = shell(context).addresses[label]
    listed = [dict_of(session) for session in list_of(document(context)["sessions"])]
    sessions = {text_of(session["address"]): session for session in listed}
    assert address in sessions, f"{label} ({address}) not in {sorted(sessions)}"
    assert (sessions[address]["presence"], sessions[address]["queued"]) == (presence, int(queued))


@then(f"the document's {QUOTED} is {QUOTED}")
@checks("INV-13")
def document_field(context: Context, field_name: str, value: str) -> None:
    assert document(context)[field_name] == shell(context).expand(value), document(context)


@then(f"the document's {QUOTED} is empty")
@checks("INV-16")
def document_field_empty(context: Context, field_name: str) -> None:
    assert document(context)[field_name] == [], document(context)


@then(f"the document's {QUOTED} are, each with its {QUOTED_LIST}:")
@checks("INV-10")
def document_entries(context: Context, field_name: str, keys: str) -> None:
    me = shell(context)
    assert context.table is not None, "the step needs a table of the entries"
    entries = [dict_of(entry) for entry in list_of(document(context)[field_name])]
    assert len(entries) == len(context.table.rows), entries
    for entry, row in zip(entries, context.table, strict=True):
        for key in quoted_items(keys):
            # "-": the entry has no such field; "<any>": it has one, not empty
            shown, cell = _shown(entry, key), row[key]
            if cell == "<any>":
                assert shown, (key, entry)
            else:
                assert shown == (None if cell == "-" else me.expand(cell)), (key, entry)


def _shown(entry: dict[str, Json], key: str) -> str | None:
    """A field as a table cell: ``from.name`` reaches into an object, a time is its iso."""
    value: Json = entry
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, dict) and "iso" in value:
        value = value["iso"]
    return None if value is None else str(value)


# -- whose post office it is (SPEC 10, INV-22): only the folder is changed here ------------


@given("the post office folder is writable by others")
def root_writable_by_others(context: Context) -> None:
    root = shell(context).root
    root.mkdir(mode=0o700, exist_ok=True)
    root.chmod(0o777)
    context.add_cleanup(root.chmod, 0o700)


@given("the post office folder belongs to another user")
def root_of_another_user(context: Context) -> None:
    root = shell(context).root
    root.mkdir(mode=0o700, exist_ok=True)
    owner = os.lstat(root).st_uid
    # Only root may give a folder away; as anyone else the scenario cannot be set up.
    assert os.geteuid() == 0, "giving the folder to another user needs root (CI runs as root)"
    os.chown(root, 4242, -1)
    context.add_cleanup(os.chown, root, owner, -1)


@given("the post office folder is a symlink to another folder")
def root_is_a_symlink(context: Context) -> None:
    root = shell(context).root
    real = Path(str(root) + "-real")
    root.mkdir(mode=0o700, exist_ok=True)
    root.rename(real)
    root.symlink_to(real)


@given("the post office folder is a file")
def root_is_a_file(context: Context) -> None:
    """Where the folder stood (its tree moved aside, to show it is not reached
    either), a file."""
    root = shell(context).root
    root.mkdir(mode=0o700, exist_ok=True)
    root.rename(Path(str(root) + "-moved"))
    write_private(root, b"not a folder\n")


@given(f"the post office folder is {QUOTED}, writable by others")
def named_root_writable_by_others(context: Context, folder: str) -> None:
    me = shell(context)
    root = Path(unescape(me.expand(folder)))
    root.mkdir(mode=0o700)
    root.chmod(0o777)
    me.environment["PI_POST_DIR"] = str(root)


@given("the (registry|inbox) folder is a symlink to another folder")
def inner_folder_symlink(context: Context, which: str) -> None:
    me = shell(context)
    folder = me.root / which
    real = me.scratch / f"{which}-elsewhere"
    folder.mkdir(mode=0o700, exist_ok=True)
    folder.rename(real)
    folder.symlink_to(real, target_is_directory=True)


@given(f"the mailbox folder of {QUOTED} is a symlink to another folder")
def mailbox_symlink(context: Context, label: str) -> None:
    me = shell(context)
    real = me.scratch / f"mailbox-of-{label}-elsewhere"
    me.mailbox(label).mkdir(mode=0o700, parents=True, exist_ok=True)
    me.mailbox(label).rename(real)
    me.mailbox(label).symlink_to(real, target_is_directory=True)


# -- the receipt from a live session ----------------------------------------------------

TAKEN_WITHIN_S = 1.0
"""A letter taken this soon after its writing vanished well within the 1.5 s a
sender waits (SPEC 3.2): its receipt must say delivered."""
SEND_ATTEMPTS = 3


@given(f"{QUOTED} takes each letter the moment it lands")
def takes_at_once(context: Context, label: str) -> None:
    taker = LetterTaker(shell(context).mailbox(label))
    taker.start()
    context.add_cleanup(taker.stop)
    context.letter_taker = taker


@when(f"at the shell I send {QUOTED} to {QUOTED} until it is taken within a second")
def send_until_taken(context: Context, body: str, label: str) -> None:
    """A precondition, not a verdict: on a machine too busy to take a letter within
    a second in three tries, the scenario errs instead of judging the receipt."""
    me, taker = shell(context), context.letter_taker
    for _ in range(SEND_ATTEMPTS):
        ran = me.run(["send", "--to", label, "--body", body])
        receipt = RECEIPT.fullmatch(ran.stdout.strip())
        assert ran.code == 0 and receipt, f"the send failed: {ran}"
        me.letter_id = receipt.group(3)
        taken_after = taker.taken_after_s.get(f"{me.letter_id}.json")
        if taken_after is not None and taken_after < TAKEN_WITHIN_S:
            return
    raise AssertionError(f"no letter was taken within {TAKEN_WITHIN_S} s in {SEND_ATTEMPTS} sends")


@then("its receipt says (delivered|queued)")
@checks("INV-11")
def receipt_says(context: Context, word: str) -> None:
    ran = shell(context).last()
    receipt = RECEIPT.fullmatch(ran.stdout.strip())
    assert receipt and receipt.group(1) == word, f"printed {ran.stdout!r}"
