"""The command line as a separate process (SPEC 8): records laid out by hand as
pi-post 0.7 writes them, the command run with PI_POST_DIR set, and the files it
wrote read back. Nothing here goes through the driver, so these steps hold any
CLI compatible with pi-post 0.7 to the same account (environment.py picks it)."""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import re
import shlex
import stat
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema
from behave import given, then, when
from behave.runner import Context
from feature_world import (
    FIXTURES,
    QUOTED,
    QUOTED_LIST,
    dict_of,
    fingerprint,
    letter_bytes,
    list_of,
    quoted_items,
    text_of,
    tree_changes,
    use_regular_expressions,
    valid_letter,
    write_private,
)
from referencing import Registry, Resource

from pipost.driver import Json

use_regular_expressions()

RUN_TIMEOUT_S = 30.0
LETTER_ID = r"[0-9]{13}-[0-9a-f]{8}"
_PLACEHOLDER = re.compile(r"\{scratch\}|\{([\w-]+)\.address\}")


def address_of(session_id: str) -> str:
    """The address rule of SPEC 1.1, stated again so that these steps need nothing
    of the implementation under test."""
    return "s-" + hashlib.sha256(b"session\0" + session_id.encode("utf-8")).hexdigest()[:12]


@dataclass
class Ran:
    code: int
    stdout: str
    stderr: str


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
        before = fingerprint(self.root)
        if self.command is None:
            self.ran = _run_in_process(args, env, self.cwd, stdin)
        else:
            done = subprocess.run(
                [*self.command, *args],
                cwd=self.cwd,
                env=env,
                input=stdin or "",
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT_S,
                check=False,
            )
            self.ran = Ran(done.returncode, done.stdout, done.stderr)
        self.changes = tree_changes(before, fingerprint(self.root))
        return self.ran

    def last(self) -> Ran:
        assert self.ran is not None, "nothing was run yet"
        return self.ran

    def letter(self, label: str) -> Path:
        assert self.letter_id is not None, "no letter was sent yet"
        return self.root / "inbox" / self.addresses[label] / f"{self.letter_id}.json"

    def sent_letter(self) -> dict[str, object]:
        assert self.letter_id is not None, "no letter was sent yet"
        (path,) = self.root.glob(f"inbox/*/{self.letter_id}.json")
        found = json.loads(path.read_bytes())
        assert isinstance(found, dict), found
        return found


def _run_in_process(args: list[str], env: dict[str, str], cwd: Path, stdin: str | None) -> Ran:
    """pipost's command line without a process of its own: the same code as
    ``python -m pipost``, without the interpreter's start-up on every step."""
    from pipost import cli

    out, err = io.StringIO(), io.StringIO()
    context = cli.Context(
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
) -> None:
    """An offline session's record, seen a minute ago; ``running`` gives the pid (and
    pidStart) of one that says it runs, seen just now."""
    me = shell(context)
    folder = Path(me.expand(cwd))
    folder.mkdir(parents=True, exist_ok=True)
    address = address_of(session_id)
    now = int(time.time() * 1000)
    record: dict[str, object] = {
        "v": 1,
        "address": address,
        "sessionId": session_id,
        "name": name.replace("{default}", f"{folder.name}-{address[2:6]}"),
        "cwd": str(folder),
        **(running or {}),
        "startedAt": now - 3_600_000,
        "lastSeen": now if running else now - 60_000,
    }
    write_private(me.root / "registry" / f"{address}.json", json.dumps(record).encode())
    me.addresses[label] = address


@given(f"a session {QUOTED} with id {QUOTED} in {QUOTED}, offline")
def offline_session(context: Context, label: str, session_id: str, cwd: str) -> None:
    _write_record(context, label, session_id, cwd, label)


@given(f"a session {QUOTED} with id {QUOTED} named by default, in {QUOTED}, offline")
def offline_unnamed_session(context: Context, label: str, session_id: str, cwd: str) -> None:
    _write_record(context, label, session_id, cwd, "{default}")


@given(f"I work in {QUOTED}")
def work_in(context: Context, cwd: str) -> None:
    me = shell(context)
    me.cwd = Path(me.expand(cwd))
    me.cwd.mkdir(parents=True, exist_ok=True)


@given(f"the mailbox of {QUOTED} holds the letter pi-post 0.7 wrote, {QUOTED}")
def reference_letter(context: Context, label: str, name: str) -> None:
    me = shell(context)
    address = me.addresses[label]
    data = (FIXTURES / "messages" / f"{address}--{name}").read_bytes()
    write_private(me.root / "inbox" / address / name, data)


@given(f"PI_POST_DIR is {QUOTED}")
def post_office_dir(context: Context, value: str) -> None:
    shell(context).environment["PI_POST_DIR"] = value


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


@when(f"at the shell I send a body of (\\d+) {QUOTED} characters to {QUOTED}")
def send_long_body(context: Context, count: str, character: str, target: str) -> None:
    shell(context).run(["send", "--to", target, "--body", character * int(count)])


@when(f"at the shell I pipe (\\d+) {QUOTED} characters into pi-post (.+)")
def pipe_into_pi_post(context: Context, count: str, character: str, command: str) -> None:
    me = shell(context)
    me.run(shlex.split(me.expand(command)), stdin=character * int(count))


# -- what it printed -------------------------------------------------------------------------


@then(f"it succeeds, printing {QUOTED}")
def succeeds_printing(context: Context, expected: str) -> None:
    me = shell(context)
    ran = me.last()
    assert ran.code == 0, f"exit {ran.code}: {ran.stderr!r}"
    pattern = re.escape(me.expand(expected)).replace(re.escape("<id>"), f"({LETTER_ID})")
    found = re.fullmatch(pattern + "\n", ran.stdout)
    assert found, f"printed {ran.stdout!r}, not {expected!r}"
    if found.groups():
        me.letter_id = found.group(1)


@then(f"it succeeds, printing a card with {QUOTED}")
def succeeds_card(context: Context, line: str) -> None:
    me = shell(context)
    ran = me.last()
    assert ran.code == 0, f"exit {ran.code}: {ran.stderr!r}"
    assert me.expand(line) in ran.stdout.splitlines(), ran.stdout


@then(f"it succeeds, printing a line with {QUOTED_LIST}")
def succeeds_line_with(context: Context, parts: str) -> None:
    me = shell(context)
    ran = me.last()
    assert ran.code == 0, f"exit {ran.code}: {ran.stderr!r}"
    wanted = [me.expand(part) for part in quoted_items(parts)]
    lines = [line for line in ran.stdout.splitlines() if all(w in line for w in wanted)]
    assert lines, f"no line with {wanted} in {ran.stdout!r}"


@then(f"it fails, saying {QUOTED_LIST}")
def fails_saying(context: Context, parts: str) -> None:
    me = shell(context)
    ran = me.last()
    assert ran.code == 1, f"exit {ran.code}, printing {ran.stdout!r}"
    assert ran.stderr.startswith("pi-post: "), ran.stderr
    for part in quoted_items(parts):
        assert me.expand(part) in ran.stderr, f"{part!r} not in {ran.stderr!r}"


@then(f"it fails, saying {QUOTED_LIST}, not {QUOTED}")
def fails_saying_not(context: Context, parts: str, unsaid: str) -> None:
    fails_saying(context, parts)
    stderr = shell(context).last().stderr
    assert unsaid not in stderr, f"{unsaid!r} in {stderr!r}"


@then("the command wrote nothing")
def wrote_nothing(context: Context) -> None:
    changes = shell(context).changes
    assert not changes, "\n".join(changes)


# -- the files it wrote ----------------------------------------------------------------------


@then(f"the mailbox of {QUOTED} holds just that letter, in a file 0600 named after its id")
def mailbox_holds_letter(context: Context, label: str) -> None:
    me = shell(context)
    letter = me.letter(label)
    assert sorted(os.listdir(letter.parent)) == [letter.name], os.listdir(letter.parent)
    mode = stat.S_IMODE(os.lstat(letter).st_mode)
    assert mode == 0o600, oct(mode)
    assert me.sent_letter()["id"] == me.letter_id


@then(f"that letter is a v1 message from the process {QUOTED} in {QUOTED}, with no reply address")
def letter_from_process(context: Context, name: str, cwd: str) -> None:
    me = shell(context)
    letter = me.sent_letter()
    assert letter["v"] == 1, letter
    assert letter["from"] == {"kind": "process", "name": name, "cwd": me.expand(cwd)}, letter
    assert "replyTo" not in letter, letter
    assert isinstance(me.letter_id, str)
    assert letter["sentAt"] == int(me.letter_id[:13]), letter
    assert set(letter) == {"v", "id", "from", "sentAt", "body"}, sorted(letter)


@then(f"the body of that letter is {QUOTED}")
def letter_body(context: Context, body: str) -> None:
    found = shell(context).sent_letter()["body"]
    assert found == body.replace("\\n", "\n"), found


@then(f"the body of that letter is (\\d+) {QUOTED} characters")
def letter_long_body(context: Context, count: str, character: str) -> None:
    found = shell(context).sent_letter()["body"]
    assert found == character * int(count), f"a body of {len(str(found))} characters"


# -- pipost's additions to the command line: doctor and the --json documents --------------
# Laid out as pipost writes them, and read back through the schema shipped with it.

SCHEMAS = Path(__file__).resolve().parents[2] / "src" / "pipost" / "schemas"
STALE_AFTER_H = 36


def _documents() -> jsonschema.Draft202012Validator:
    def load(name: str) -> dict[str, object]:
        found = json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))
        assert isinstance(found, dict)
        return found

    wire = [load("message.v1"), load("record.v1")]
    referenced = Registry().with_resources(
        (str(schema["$id"]), Resource.from_contents(schema)) for schema in wire
    )
    return jsonschema.Draft202012Validator(load("cli.v1"), registry=referenced)


def document(context: Context) -> dict[str, Json]:
    assert "document" in context, "no document was printed yet"
    return dict_of(context.document)


def _aged(path: Path, hours: int) -> None:
    moment = time.time() - hours * 3600
    os.utime(path, (moment, moment))


@given(f"a session {QUOTED} with id {QUOTED} in {QUOTED}, running as this process")
def session_of_this_process(context: Context, label: str, session_id: str, cwd: str) -> None:
    _write_record(context, label, session_id, cwd, label, {"pid": os.getpid()})


@given(f"a session {QUOTED} with id {QUOTED} in {QUOTED} whose pid no process has")
def session_of_a_dead_pid(context: Context, label: str, session_id: str, cwd: str) -> None:
    ended = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True)
    pid = int(ended.stdout)
    assert not os.path.exists(f"/proc/{pid}"), "the pid was taken again at once"
    _write_record(context, label, session_id, cwd, label, {"pid": pid, "pidStart": "12345"})


@given(f"a session {QUOTED} with id {QUOTED} in {QUOTED} whose pid another process has now")
def session_of_a_recycled_pid(context: Context, label: str, session_id: str, cwd: str) -> None:
    # This process runs under the pid, but did not start at clock tick 1.
    _write_record(context, label, session_id, cwd, label, {"pid": os.getpid(), "pidStart": "1"})


@given(f"the mailbox of {QUOTED} holds (\\d+) letters")
def letters_queued(context: Context, label: str, count: str) -> None:
    me = shell(context)
    for number in range(int(count)):
        letter = valid_letter(f"{1796078534000 + number:013d}-{number:08x}", f"letter {number}")
        write_private(
            me.root / "inbox" / me.addresses[label] / f"{letter['id']}.json", letter_bytes(letter)
        )


@given(f"the mailbox of {QUOTED} holds a file {QUOTED} that is not JSON")
def not_json_letter(context: Context, label: str, name: str) -> None:
    me = shell(context)
    write_private(me.root / "inbox" / me.addresses[label] / name, b"not json")


@given(f"the mailbox of {QUOTED} holds a deposit in flight untouched for (\\d+) hours")
def stale_deposit(context: Context, label: str, hours: str) -> None:
    me = shell(context)
    temporary = me.root / "inbox" / me.addresses[label] / "1796000000000-0badf00d.json.tmp"
    write_private(temporary, b'{"v":1,"id":"17960')
    _aged(temporary, int(hours))


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
def prints_document(context: Context, code: str, command: str) -> None:
    ran = shell(context).last()
    assert ran.code == int(code), f"exit {ran.code}: {ran.stderr!r}"
    assert ran.stdout.count("\n") == 1, ran.stdout
    found = json.loads(ran.stdout)
    _documents().validate(found)
    assert (found["v"], found["command"]) == (1, command), found
    context.document = found


@then("it prints nothing on standard output")
def prints_nothing(context: Context) -> None:
    assert shell(context).last().stdout == ""


def _codes(context: Context, severity: str | None = None) -> list[str]:
    findings = [dict_of(f) for f in list_of(document(context)["findings"])]
    return [text_of(f["code"]) for f in findings if severity in (None, f["severity"])]


@then("every finding is ok")
def every_finding_ok(context: Context) -> None:
    assert _codes(context, "attention") == [], _codes(context, "attention")
    assert document(context)["healthy"] is True


@then(f"the findings include {QUOTED_LIST}")
def findings_include(context: Context, codes: str) -> None:
    missing = set(quoted_items(codes)) - set(_codes(context))
    assert not missing, f"{sorted(missing)} not in {_codes(context)}"


@then(f"the findings that need attention are, in any order, {QUOTED_LIST}")
def findings_needing_attention(context: Context, codes: str) -> None:
    assert sorted(_codes(context, "attention")) == sorted(quoted_items(codes)), _codes(context)
    assert document(context)["healthy"] is False


@then(f"the finding {QUOTED} is about {QUOTED}")
def finding_subject(context: Context, code: str, subject: str) -> None:
    findings = [dict_of(f) for f in list_of(document(context)["findings"])]
    subjects = [f["subject"] for f in findings if f["code"] == code]
    assert shell(context).expand(subject) in subjects, subjects


@then("it exits (\\d), each finding of that document on a line of its own")
def finding_lines(context: Context, code: str) -> None:
    ran = shell(context).last()
    assert ran.code == int(code), f"exit {ran.code}: {ran.stderr!r}"
    lines = ran.stdout.splitlines()
    for found in _codes(context):
        assert any(found in line for line in lines), (found, lines)


@then(f"the document lists {QUOTED} as (live|stalled|offline) with (\\d+) queued")
def document_lists(context: Context, label: str, presence: str, queued: str) -> None:
    address = shell(context).addresses[label]
    listed = [dict_of(session) for session in list_of(document(context)["sessions"])]
    sessions = {text_of(session["address"]): session for session in listed}
    assert address in sessions, f"{label} ({address}) not in {sorted(sessions)}"
    assert (sessions[address]["presence"], sessions[address]["queued"]) == (presence, int(queued))


@then(f"the document's {QUOTED} is {QUOTED}")
def document_field(context: Context, field_name: str, value: str) -> None:
    assert document(context)[field_name] == shell(context).expand(value), document(context)


@then(f"the document's {QUOTED} is empty")
def document_field_empty(context: Context, field_name: str) -> None:
    assert document(context)[field_name] == [], document(context)


@then(f"the document's {QUOTED} are, each with its {QUOTED_LIST}:")
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
    root.chmod(0o777)
    context.add_cleanup(root.chmod, 0o700)


@given("the post office folder belongs to another user")
def root_of_another_user(context: Context) -> None:
    root = shell(context).root
    owner = os.lstat(root).st_uid
    # Only root may give a folder away; as anyone else the scenario cannot be set up.
    assert os.geteuid() == 0, "giving the folder to another user needs root (CI runs as root)"
    os.chown(root, 4242, -1)
    context.add_cleanup(os.chown, root, owner, -1)


@given("the post office folder is a symlink to another folder")
def root_is_a_symlink(context: Context) -> None:
    root = shell(context).root
    real = Path(str(root) + "-real")
    root.rename(real)
    root.symlink_to(real)
    context.add_cleanup(real.rename, root)
    context.add_cleanup(root.unlink)
