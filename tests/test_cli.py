"""The command line: the reference's transcripts replayed in-process (INV-21),
reading without side effects (INV-16), help and errors that a person can use, no
traceback on bad input, and no raw escape sequence on a terminal."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import pytest

from pipost import cli, host, mailbox, registry
from pipost.address import address_of
from pipost.message import Sender, new_message
from pipost.post import Post
from pipost.registry import Record
from tests.helpers import (
    NOW,
    FakeProcessTable,
    FixedClock,
    make_message,
    make_record,
    tree_snapshot,
    write_record,
)

if TYPE_CHECKING:
    from pipost.registry import ProcessTable

INTEROP = Path(__file__).parent / "fixtures" / "interop"
REFERENCE = json.loads((INTEROP / "cli-transcripts.json").read_text(encoding="utf-8"))
TRANSCRIPTS: list[dict[str, Any]] = REFERENCE["transcripts"]
ID = r"[0-9]{13}-[0-9a-f]{8}"
RECEIPT_LINE = re.compile(rf"(queued|delivered) (s-[0-9a-f]{{12}}) ({ID})")
PLACEHOLDER = re.compile(r"<([0-9]+) bytes of '(.)'>")
REFUSALS_WITH_REACHABLE = (" is not an address, a session id", "no session is registered in ")


@dataclass
class Ran:
    code: int
    stdout: str
    stderr: str


def run(
    argv: Sequence[str],
    root: Path,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str = "/home/dev",
    stdin: str = "",
    clock: FixedClock | None = None,
    processes: ProcessTable | None = None,
    stdout: TextIO | None = None,
) -> Ran:
    """``pi-post argv`` in-process, with nothing taken from this process's environment."""
    out = stdout if stdout is not None else io.StringIO()
    err = io.StringIO()
    context = cli.Context(
        environ={"PI_POST_DIR": str(root), "HOME": str(root.parent), **(env or {})},
        cwd=cwd,
        stdin=io.StringIO(stdin),
        stdout=out,
        stderr=err,
        clock=clock or FixedClock(),
        processes=processes or FakeProcessTable(),
        receipt_wait=0.2,
    )
    code = cli.run(argv, context)
    shown = out.getvalue() if isinstance(out, io.StringIO) else ""
    return Ran(code, shown, err.getvalue())


# -- replaying the reference's transcripts ------------------------------------------------


def expand(arg: str) -> str:
    """``<32768 bytes of 'é'>`` -> that many bytes of UTF-8."""
    match = PLACEHOLDER.fullmatch(arg)
    if match is None:
        return arg
    size, char = int(match.group(1)), match.group(2)
    width = len(char.encode("utf-8"))
    assert size % width == 0
    return char * (size // width)


def fixture_records() -> list[dict[str, Any]]:
    """The reference's registry, with lastSeen relative to NOW and a live pid."""
    records = []
    for entry in REFERENCE["fixture"]:
        record = dict(entry["record"])
        if record.get("pid") == "<pid of a live process>":
            record["pid"] = os.getpid()
        record["lastSeen"] = NOW - entry["lastSeenAgoMs"]
        records.append(record)
    return records


def reference_time(transcript: dict[str, Any]) -> int | None:
    """When the reference ran a send: the time in the first id it printed."""
    found = re.search(ID, transcript["stdout"])
    return int(found.group()[:13]) if found else None


@dataclass
class Replayed:
    transcript: dict[str, Any]
    ran: Ran
    letters: dict[str, bytes] = field(default_factory=dict)
    """Letters this command added, by ``<address>/<name>``."""


def letters_under(root: Path) -> dict[str, bytes]:
    found = {}
    for address in mailbox.mailbox_addresses(root):
        for name in mailbox.letter_names(root, address):
            found[f"{address}/{name}"] = (root / "inbox" / address / name).read_bytes()
    return found


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> list[Replayed]:
    """Every transcript, in file order, against one root: later ones see the mail
    earlier ones queued. The clock starts when the reference's fixture was made
    and moves to the reference's own send times, so that peek shows its times."""
    root = tmp_path_factory.mktemp("replay") / "post"
    (root / "registry").mkdir(parents=True)
    for record in fixture_records():
        path = root / "registry" / f"{record['address']}.json"
        path.write_text(json.dumps(record), encoding="utf-8")
    clock = FixedClock(NOW)
    results = []
    for transcript in TRANSCRIPTS:
        clock.now = reference_time(transcript) or clock.now
        before = letters_under(root)
        assert transcript["argv"][0] == "pi-post"
        ran = run(
            [expand(arg) for arg in transcript["argv"][1:]],
            root,
            env=transcript["env"],
            cwd=transcript["cwd"],
            stdin=transcript["stdin"] or "",
            clock=clock,
            processes=registry.OsProcessTable(),
        )
        added = {k: v for k, v in letters_under(root).items() if k not in before}
        results.append(Replayed(transcript, ran, added))
    return results


def reference_letter(address: str, message_id: str) -> dict[str, Any] | None:
    path = INTEROP / "messages" / f"{address}--{message_id}.json"
    if not path.exists():
        return None
    data: dict[str, Any] = json.loads(path.read_bytes())
    return data


def without_id(letter: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in letter.items() if k not in ("id", "sentAt")}


def assert_same_receipts(replay: Replayed) -> None:
    """Receipt lines equal but for the random id; each letter written equals the
    one the reference wrote, but for id and sentAt."""
    expected_lines = replay.transcript["stdout"].splitlines()
    actual_lines = replay.ran.stdout.splitlines()
    assert len(actual_lines) == len(expected_lines)
    assert len(replay.letters) == len(expected_lines)
    for expected, actual in zip(expected_lines, actual_lines, strict=True):
        wanted = RECEIPT_LINE.fullmatch(expected)
        got = RECEIPT_LINE.fullmatch(actual)
        assert wanted is not None
        assert got is not None, actual
        assert got.group(1, 2) == wanted.group(1, 2)
        written = json.loads(replay.letters[f"{got.group(2)}/{got.group(3)}.json"])
        assert written["id"] == got.group(3)
        assert written["id"].startswith(f"{written['sentAt']:013d}-")
        reference = reference_letter(wanted.group(2), wanted.group(3))
        if reference is not None:
            assert without_id(written) == without_id(reference)


def assert_refusal_with_reachable_sessions(expected: str, actual: str) -> None:
    """Divergence (a): pipost adds the reachable sessions after the reference's line."""
    first, *extra = actual.splitlines()
    assert first + "\n" == expected
    live = [r for r in fixture_records() if "pid" in r]
    assert extra == [
        "reachable sessions:",
        *(f"  {r['name']} ({r['address']}) — {r['cwd']}" for r in live),
    ]


def test_the_replay_covers_every_transcript(replayed: list[Replayed]) -> None:
    assert [r.transcript["label"] for r in replayed] == [t["label"] for t in TRANSCRIPTS]
    assert len(TRANSCRIPTS) >= 30


@pytest.mark.parametrize("index", range(len(TRANSCRIPTS)), ids=[t["label"] for t in TRANSCRIPTS])
def test_transcript(replayed: list[Replayed], index: int) -> None:
    replay = replayed[index]
    expected = replay.transcript
    assert replay.ran.code == expected["exit"]
    if RECEIPT_LINE.search(expected["stdout"]):
        assert_same_receipts(replay)
    else:
        assert replay.ran.stdout == expected["stdout"]
        assert replay.letters == {}
    if any(marker in expected["stderr"] for marker in REFUSALS_WITH_REACHABLE):
        assert_refusal_with_reachable_sessions(expected["stderr"], replay.ran.stderr)
    else:
        assert replay.ran.stderr == expected["stderr"]


def test_every_reference_letter_was_written_alike(replayed: list[Replayed]) -> None:
    """Each letter of the reference corresponds to one this replay wrote."""
    written = [json.loads(raw) for r in replayed for raw in r.letters.values()]
    for path in sorted((INTEROP / "messages").glob("*.json")):
        reference = without_id(json.loads(path.read_bytes()))
        assert reference in [without_id(letter) for letter in written], path.name


# -- reading has no side effects (INV-16) -------------------------------------------------

LIVE_PID = 7007


@dataclass
class Tree:
    root: Path
    live: Record
    offline: Record
    twins: tuple[Record, Record]
    orphan: str
    project: Path


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    """Records, letters (a malformed one among them), a quarantine, a deposit in
    flight and a registry temporary: everything a reader might trip over."""
    root = tmp_path / "post"
    project = tmp_path / "project"
    project.mkdir()
    shared = tmp_path / "shared"
    shared.mkdir()
    live = write_record(
        root,
        make_record(
            "019a0000-1111-7222-8333-444455556666",
            os.path.realpath(project),
            name="builder",
            pid=LIVE_PID,
            pid_start="t",
        ),
    )
    offline = write_record(
        root, make_record("019b0000-aaaa-7bbb-8ccc-dddddddddddd", "/home/dev/cache-fix")
    )
    twins = (
        write_record(
            root, make_record("019c0000-0000-7000-8000-00000000000a", os.path.realpath(shared))
        ),
        write_record(
            root, make_record("019c0000-0000-7000-8000-00000000000b", os.path.realpath(shared))
        ),
    )
    for offset in range(3):
        mailbox.deposit(root, offline.address, make_message(NOW + offset, body=f"m{offset}"))
    folder = root / "inbox" / offline.address
    (folder / "0000000000001-deadbeef.json").write_bytes(b'{"v":1,"id":"trunc')
    (folder / f"{make_message(NOW + 9).id}.json.tmp").write_bytes(b'{"v":1')
    mailbox.deposit(root, live.address, make_message(NOW, body="for the live one"))
    bad = mailbox.claim(root, live.address, mailbox.letter_names(root, live.address)[0])
    assert bad is not None
    bad.set_aside("set aside by the test")
    (root / "registry" / f".{live.address}.0badc0de.tmp").write_bytes(b'{"v":1,')
    orphan = address_of("sess-orphan")
    mailbox.deposit(root, orphan, make_message(NOW, body="nobody reads this"))
    return Tree(root, live, offline, twins, orphan, project)


def test_reading_leaves_the_tree_byte_identical(tree: Tree) -> None:
    root, live, offline = tree.root, tree.live, tree.offline
    processes = FakeProcessTable({LIVE_PID: "t"})
    handles = [
        live.address,
        offline.address,
        tree.orphan,
        "s-0123456789ab",  # no record, no mailbox
        "builder",
        offline.name,
        "cache-fix",
        str(tree.project),
        "/home/dev/cache-fix",
        ".",
        "~/project",
        offline.session_id,
        offline.session_id[:8],
        "019c0000",  # ambiguous prefix
        str(tree.twins[0].cwd),  # ambiguous directory
        "nobody",
        "/no/such/dir",
    ]
    commands: list[list[str]] = [["list"], ["list", "--all"], ["whoami"], ["help"]]
    commands += [["resolve", handle] for handle in handles]
    commands += [["peek", handle] for handle in handles]
    before = tree_snapshot(root)
    outcomes = []
    for argv in commands:
        outcomes.append(
            run(
                argv,
                root,
                env={"PI_SESSION_ID": live.session_id, "HOME": str(tree.project.parent)},
                cwd=str(tree.project),
                processes=processes,
            )
        )
        for address in mailbox.mailbox_addresses(root):
            mailbox.count(root, address)
            mailbox.peek(root, address)
    assert tree_snapshot(root) == before
    assert {o.code for o in outcomes} == {0, 1}  # both answers and refusals were read


def test_the_readers_saw_the_tree(tree: Tree) -> None:
    """The tree of the side-effect test is what it claims to be."""
    processes = FakeProcessTable({LIVE_PID: "t"})
    listing = run(["list", "--all"], tree.root, processes=processes).stdout
    assert f"builder — {tree.live.address} (live)" in listing
    assert f"{tree.offline.address} (offline 0s ago, 4 queued)" in listing
    peeked = run(["peek", tree.offline.address], tree.root).stdout.splitlines()
    assert peeked[0].startswith("(not a message: 0000000000001-deadbeef.json")
    assert len(peeked) == 4
    assert run(["peek", tree.live.address], tree.root).stdout == f"empty {tree.live.address}\n"
    assert run(["resolve", tree.orphan], tree.root).stdout.endswith("queued:   1\n")


# -- help and usage -----------------------------------------------------------------------


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
@pytest.mark.parametrize("form", ["--help", "-h", "help"])
def test_every_command_has_help(tmp_path: Path, command: str, form: str) -> None:
    argv = ["help", command] if form == "help" else [command, form]
    ran = run(argv, tmp_path / "post")
    assert ran.code == 0
    assert ran.stdout.startswith(f"usage: pi-post {command}")
    assert ran.stderr == ""
    assert not (tmp_path / "post").exists()


@pytest.mark.parametrize("argv", [["--help"], ["-h"], ["help"]])
def test_help_names_every_command(tmp_path: Path, argv: list[str]) -> None:
    ran = run(argv, tmp_path / "post")
    assert ran.code == 0
    assert ran.stdout.startswith("usage: pi-post ")
    for command in cli.COMMANDS:
        assert command in ran.stdout


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
@pytest.mark.parametrize("option", ["--bogus", "--bogus=1"])
def test_an_unknown_option_is_refused(tmp_path: Path, command: str, option: str) -> None:
    ran = run([command, option], tmp_path / "post")
    assert ran.code == 1
    assert ran.stdout == ""
    assert ran.stderr.startswith("pi-post: unknown option --bogus ")
    assert ran.stderr.count("\n") == 1


# -- bad input: a clear refusal, never a traceback, nothing written ---------------------------


@pytest.fixture
def target(tmp_path: Path) -> Record:
    return write_record(tmp_path / "post", make_record("sess-target", "/home/dev/target"))


BAD_ARGV: list[tuple[list[str], dict[str, str]]] = [
    (["send"], {}),
    (["send", "--to"], {}),
    (["send", "--to", "target", "--body"], {}),
    (["send", "--to", "target", "stray"], {}),
    (["send", "--to", "nobody", "--body", "x"], {}),
    (["send", "--to", "s-0123456789ab", "--body", "x"], {}),
    (["send", "--to", "s-../../etc", "--body", "x"], {}),
    (["send", "--to", "../../etc", "--body", "x"], {}),
    (["send", "--to", "", "--body", "x"], {}),
    (["send", "--to", "\x1b[31mred", "--body", "x"], {}),
    (["send", "--to", "target", "--body", ""], {}),
    (["send", "--to", "target", "--body", "x" * 40_000], {}),
    (["send", "--to", "target", "--body", "bad \udcff bytes"], {}),
    (["send", "--to", "target", "--body", "x", "--from", "bad \udcff bytes"], {}),
    (["send", "--to", "target", "--body", "x", "--reply-to", "../../x"], {}),
    (["send", "--to", "target", "--body", "x", "--reply-to", "\udcff"], {}),
    (["send", "--to", "target", "--body", "x"], {"PI_POST_REPLY_TO": "../../x"}),
    (["send", "--to", "target", "--body", "x"], {"PI_SESSION_ID": "bad \udcff bytes"}),
    (["send", *["--to", "target"] * 9, "--body", "x"], {}),
    (["whoami"], {}),
    (["whoami"], {"PI_SESSION_ID": "bad \udcff bytes"}),
    (["list", "extra"], {}),
    (["list", "--all=yes"], {}),
    (["resolve"], {}),
    (["resolve", "a", "b"], {}),
    (["resolve", ""], {}),
    (["resolve", "\udcff"], {}),
    (["resolve", "s-ZZZZZZZZZZZZ"], {}),
    (["peek"], {}),
    (["peek", "../../.."], {}),
    (["peek", "~/../../x"], {}),
    (["peek", "nobody"], {}),
]


def bad_input_id(argv: list[str], env: dict[str, str]) -> str:
    shown = " ".join(argv)[:60] + "".join(f" {name}={value}" for name, value in env.items())
    return ascii(shown)


@pytest.mark.parametrize(
    ("argv", "env"), BAD_ARGV, ids=[bad_input_id(argv, env) for argv, env in BAD_ARGV]
)
def test_bad_input_is_refused_cleanly_and_writes_nothing(
    tmp_path: Path, target: Record, argv: list[str], env: dict[str, str]
) -> None:
    root = tmp_path / "post"
    before = tree_snapshot(root)
    ran = run(argv, root, env=env)
    assert ran.code == 1
    assert ran.stdout == ""
    assert ran.stderr.startswith("pi-post: ")
    assert "Traceback" not in ran.stderr
    assert "\x1b" not in ran.stderr
    assert tree_snapshot(root) == before


@pytest.mark.parametrize("root_kind", ["a file", "a symlink to a folder", "a folder inside a file"])
@pytest.mark.parametrize("argv", [["list"], ["send", "--to", "s-0123456789ab", "--body", "x"]])
def test_an_unusable_root_is_refused_cleanly(
    tmp_path: Path, root_kind: str, argv: list[str]
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "file").write_text("not a folder")
    root = {
        "a file": tmp_path / "file",
        "a symlink to a folder": tmp_path / "link",
        "a folder inside a file": tmp_path / "file" / "post",
    }[root_kind]
    if root_kind == "a symlink to a folder":
        root.symlink_to(elsewhere)
    ran = run(argv, root)
    assert "Traceback" not in ran.stderr
    if argv[0] == "send":
        assert ran.code == 1
        assert ran.stderr.startswith("pi-post: ")
    assert list(elsewhere.iterdir()) == []


def test_bytes_that_are_not_utf8_never_cause_a_traceback(tmp_path: Path, target: Record) -> None:
    """Real processes get undecodable argv and environment bytes as surrogates."""
    root = tmp_path / "post"
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("PI_")}
    base_env["PI_POST_DIR"] = str(root)
    invocations: list[tuple[list[str | bytes], dict[str, str | bytes]]] = [
        (["send", "--to", "target", "--body", "x", "--from", b"\xff"], {}),
        (["send", "--to", "target", "--body", "x"], {"PI_SESSION_ID": b"\xff"}),
        (["whoami"], {"PI_SESSION_ID": b"\xff"}),
        (["resolve", b"\xff\xfe"], {}),
    ]
    before = tree_snapshot(root)
    for argv, env in invocations:
        command: list[str | bytes] = [sys.executable, "-m", "pipost", *argv]
        done = subprocess.run(
            command,
            env={**base_env, **env},
            cwd=tmp_path,
            capture_output=True,
            timeout=60,
        )
        assert b"Traceback" not in done.stderr, (argv, env, done.stderr)
        assert done.returncode == 1, (argv, env)
        assert done.stderr.startswith(b"pi-post: "), (argv, env)
    assert tree_snapshot(root) == before


# -- escape sequences never reach a terminal raw -----------------------------------------------

ESCAPES = ("\x1b", "\x07", "\x9b")


@pytest.fixture
def hostile(tmp_path: Path) -> Record:
    """A session whose name, cwd and mail carry terminal escape sequences."""
    root = tmp_path / "post"
    record = write_record(
        root,
        make_record(
            "sess-\x1b[2J-hostile",
            "/home/dev/\x1b]0;owned\x07",
            name="\x1b[31mred\x1b[0m",
            last_seen=NOW - 10,
        ),
    )
    sender = Sender(kind="process", name="\x1b[1mbold\x9b")
    message = new_message(sender, "body \x1b[31m in red\x1b[0m\nand \x07 a bell", NOW)
    mailbox.deposit(root, record.address, message)
    return record


@pytest.mark.parametrize(
    "argv",
    [
        ["list"],
        ["list", "--all"],
        ["resolve", "HOSTILE-ADDRESS"],
        ["resolve", "\x1b[31mred\x1b[0m"],
        ["peek", "HOSTILE-ADDRESS"],
        ["peek", "\x1b[31mred\x1b[0m"],
        ["resolve", "nobody"],
        ["send", "--to", "nobody", "--body", "x"],
    ],
)
def test_escape_sequences_are_spelled_out(tmp_path: Path, hostile: Record, argv: list[str]) -> None:
    argv = [hostile.address if arg == "HOSTILE-ADDRESS" else arg for arg in argv]
    ran = run(argv, tmp_path / "post")
    shown = ran.stdout + ran.stderr
    assert "\\x1b" in shown  # the hostile text was shown, spelled out
    for escape in ESCAPES:
        assert escape not in shown


def test_undecodable_file_names_reach_a_strict_terminal_spelled_out(tmp_path: Path) -> None:
    """A file name that is not UTF-8 arrives as lone surrogates, which a terminal
    stream that only takes UTF-8 refuses: peek shows it spelled out instead."""
    root = tmp_path / "post"
    record = write_record(root, make_record("sess-odd-file", "/home/dev/x"))
    mailbox.deposit(root, record.address, make_message(NOW))
    folder = os.fsencode(root / "inbox" / record.address)
    os.close(os.open(folder + b"/\xff\xfe.json", os.O_WRONLY | os.O_CREAT, 0o600))
    written = io.BytesIO()
    terminal = io.TextIOWrapper(written, encoding="utf-8", errors="strict")
    ran = run(["peek", record.address], root, stdout=terminal)
    terminal.flush()
    assert ran.code == 0, ran.stderr
    shown = written.getvalue().decode("utf-8").splitlines()
    assert len(shown) == 2
    assert shown[1].startswith("(not a message: \\udcff\\udcfe.json — ")


# -- listen: one listener per session, and a working directory that exists ----------------


def test_a_second_listener_is_refused_naming_the_running_one(tmp_path: Path) -> None:
    root = tmp_path / "post"
    session = "listened-twice"
    running = host.Host(Post(root), session, str(tmp_path), host.StreamContext(io.StringIO()))
    running.start()
    try:
        before = tree_snapshot(root)
        ran = run(["listen", "--session-id", session], root)
        assert (ran.code, ran.stdout) == (1, "")
        assert ran.stderr == (
            f"pi-post: {address_of(session)} already has a listener: pid {os.getpid()} "
            "(stop it, or pass --also to run this one beside it)\n"
        )
        assert tree_snapshot(root) == before
    finally:
        running.stop()


@pytest.mark.parametrize("given", ["/nonexistent/project", "absent", "a-file", ""])
def test_listen_refuses_a_cwd_that_is_not_an_existing_directory(tmp_path: Path, given: str) -> None:
    root = tmp_path / "post"
    (tmp_path / "a-file").write_text("not a folder")
    ran = run(["listen", "--session-id", "s", "--cwd", given], root, cwd=str(tmp_path))
    assert (ran.code, ran.stdout) == (1, "")
    assert ran.stderr == f"pi-post: --cwd must be an existing directory, not {given!r}\n"
    assert not root.exists()


def test_listen_help_tells_how_to_run_a_second_listener_on_purpose(tmp_path: Path) -> None:
    shown = run(["listen", "--help"], tmp_path / "post").stdout
    assert "[--also]" in shown.splitlines()[0]
    assert "A session has one listener: a second one is refused, naming the running one." in shown
    assert "  --also               run beside the listener the session already has" in shown


# -- hardening: unsafe roots and the quarantine -------------------------------------------


def test_an_unsafe_root_is_refused_by_every_command_with_the_fix(tmp_path: Path) -> None:
    root = tmp_path / "post"
    root.mkdir()
    root.chmod(0o777)
    for argv in (["list"], ["peek", "s-0123456789ab"], ["send", "--to", "x", "--body", "b"]):
        ran = run(argv, root)
        assert ran.code == 1, argv
        assert ran.stderr == (
            f"pi-post: {root}: writable by others (mode 0777); make it private: chmod 700 {root}\n"
        )


def test_the_quarantine_command_lists_what_was_set_aside(tmp_path: Path) -> None:
    root = tmp_path / "post"
    address = address_of("q-session")
    assert run(["quarantine"], root).stdout == "the quarantine is empty\n"
    folder = root / "inbox" / address
    folder.mkdir(parents=True, mode=0o700)
    (folder / "0000000000001-00000000.json").write_bytes(b"\x1b[31m")
    mailbox.set_aside(root, address, "0000000000001-00000000.json", "not JSON: \x1b[31m")
    ran = run(["quarantine"], root)
    assert ran.code == 0
    assert ran.stdout == f"{address} 0000000000001-00000000.json — not JSON: \\x1b[31m\n"


def test_sending_imports_nothing_it_does_not_use(tmp_path: Path) -> None:
    """`pi-post send` runs from hooks on every tool call: the receiving side, the
    drop log, the driver and the process machinery stay unloaded, and so does every
    standard module that costs a cold start more than the send itself."""
    root = tmp_path / "post"
    address = address_of("lean-send-target")
    (root / "inbox" / address).mkdir(parents=True, mode=0o700)
    root.chmod(0o700)
    probe = (
        "import sys\n"
        "from pipost.cli import main\n"
        f"code = main(['send', '--to', {address!r}, '--body', 'x'])\n"
        "print(code, ' '.join(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env={"PI_POST_DIR": str(root), "PATH": os.environ.get("PATH", "")},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    receipt, modules = done.stdout.splitlines()
    code, *loaded = modules.split()
    assert receipt.startswith(f"queued {address} ") and code == "0"
    assert mailbox.count(root, address) == 1  # the probe really sent
    unused = {
        "pipost.host",
        "pipost.droplog",
        "pipost.driver",
        "pipost.demo",
        "pipost.watch",
        "subprocess",
        "threading",
        "ctypes",
        "signal",
        "select",
        "datetime",
        "shlex",
        "re",
        "json",
        "dataclasses",
        "inspect",
        "typing",
        "enum",
        "pathlib",
        "hashlib",
        "secrets",
        "argparse",
        "contextlib",
    }
    assert set(loaded) & unused == set()


def _run_python(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.pathsep.join(sys.path)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_exit_now_flushes_what_was_printed_and_keeps_the_code(tmp_path: Path) -> None:
    done = _run_python(
        "import sys\n"
        "from pipost.cli import exit_now\n"
        "print('queued', end='')\n"  # to a pipe, stdout is block-buffered: still held
        "sys.stderr.write('err')\n"
        "exit_now(3)\n",
        tmp_path,
    )
    assert done.returncode == 3
    assert done.stdout == "queued"
    assert done.stderr == "err"


def test_exit_now_waits_for_a_thread_like_a_normal_exit(tmp_path: Path) -> None:
    done = _run_python(
        "import pathlib, threading, time\n"
        "from pipost.cli import exit_now\n"
        "def late():\n"
        "    time.sleep(0.3)\n"
        "    pathlib.Path('written-late').write_text('done')\n"
        "threading.Thread(target=late).start()\n"
        "exit_now(0)\n",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "written-late").read_text() == "done"
