"""``pi-post``: the command line, compatible with the pi-post 0.7 CLI (SPEC 8).

Output lines, error texts and exit codes follow what the reference printed;
a command imports only what it uses (the receiving side, the drop log and the
driver load with the commands that need them), since ``send`` runs from hooks
on every tool call and its start-up is most of its cost.
where pipost differs on purpose, DESIGN.md lists it. Errors go to stderr as
``pi-post: <text>`` with exit 1, never as a traceback.
"""

from __future__ import annotations

import errno
import io
import os
import sys

from pipost import files, format, mailbox
from pipost.address import address_of, is_address, process_name
from pipost.message import BODY_CAP, Rejected, Sender
from pipost.post import Post, Refused, default_root, os_caller, wall_clock_ms
from pipost.refusals import BodyTooLarge, NoTargets

TYPE_CHECKING = False
if TYPE_CHECKING:
    import enum
    from collections.abc import Callable, Mapping, Sequence
    from typing import NoReturn, TextIO

    from pipost.post import DiskDirectory
    from pipost.session import Candidate, ProcessTable

USAGE = (
    "usage: pi-post send --to <target> [--to <target> …] [--body <text>] [--from <label>]"
    " [--reply-to <addr>|none]\n"
    "       pi-post list [--all] | resolve <target> | peek <target> | whoami\n"
)

HELP = {
    "send": """\
usage: pi-post send --to <target> [--to <target> …] [--body <text>] [--from <label>]
                    [--reply-to <addr>|none]

Queue a message for up to 8 sessions. A target is an address (s-…), a directory
path, a session id or a unique prefix of one (8+ hex characters), a session name
or the basename of a session's directory. Every target is resolved before
anything is written: one unknown or ambiguous target refuses the whole send.

The body comes from --body or standard input, at most 32768 bytes of UTF-8.
Prints one line per target: "delivered <address> <id>" when a live session took
the message within 1.5 s, otherwise "queued <address> <id>".

  --from <label>       sender name (default: $PI_POST_FROM, else process:<cwd basename>)
  --reply-to <addr>    where replies go (default: $PI_POST_REPLY_TO, else the
                       address of $PI_SESSION_ID); "none" sends no reply address
""",
    "list": """\
usage: pi-post list [--all] [--json]

List registered sessions, live first: name, address, presence, queued mail,
directory and the handle to resume the session with. Offline sessions unseen
for over a day with nothing queued are summarised unless --all is given.

  --all    list those sessions too
  --json   print one JSON document instead (docs/json.md): per session its
           address, name, session id, cwd, presence, queued count, pid, times
           and resume handle, and how many were left out
""",
    "resolve": """\
usage: pi-post resolve [--json] <target>

Show the session a target names: name, address, session id, presence, directory
and the command that resumes it. Refuses, listing the candidates, when the
target is ambiguous.

  --json   print one JSON document instead (docs/json.md): the target, its
           address, queued count and session (null for an address no session
           registered); a refusal still goes to stderr with exit 1
""",
    "peek": """\
usage: pi-post peek [--json] <target>

Show the messages queued for a session, oldest first, without taking them.

  --json   print one JSON document instead (docs/json.md): the address and per
           letter its file name and id, sender, reply address, time and body,
           or why it is not a message
""",
    "whoami": """\
usage: pi-post whoami

Print the address of the session this shell runs in ($PI_SESSION_ID).
""",
    "listen": """\
usage: pi-post listen --session-id <id> [--name <name>] [--cwd <dir>] [--also]
                      [--transcript <file> | --exec <command>]
                      [--exec-timeout <seconds>]

Make this process a receiving session: register its address, take its mail as
it arrives (and what waited), and mark it offline on SIGTERM or SIGINT.
A session has one listener: a second one is refused, naming the running one.

  --also               run beside the listener the session already has: each
                       message still enters one of them, once, and the record
                       stays live until the last of them stops
  --transcript <file>  append one JSON line per message, flushed before the
                       message is taken off disk; the transcript is the ledger
                       that makes delivery exactly once across crashes
  --exec <command>     run the command (sh -c) once per message, the framed text
                       on its stdin and PI_POST_MESSAGE_ID, PI_POST_MESSAGE_FROM,
                       PI_POST_MESSAGE_REPLY_TO (empty without a reply address)
                       and PI_POST_WAKE (1 when the text wakes the session, 0
                       when it waits for its first prompt) in its environment,
                       which names this session as PI_SESSION_ID and
                       PI_SESSION_ADDRESS (a send from it replies from here);
                       exit 0 means taken, anything else (or a command that
                       cannot start) leaves the message queued for a retry
                       (said on stderr, with the reason).
                       The command runs in a process group of its own; on
                       SIGTERM or SIGINT that group gets SIGTERM, then
                       SIGKILL 1 s later, and the message stays queued
  --exec-timeout <seconds>
                       end a command still running after this long (default
                       600), counted as a failure and retried
  (neither)            one JSON line per message on standard output; when its
                       reader goes away the listener ends (as by SIGPIPE),
                       the message it could not write left queued

PI_POST_INBOUND=accept|ask|refuse and PI_POST_RESUME=wake|stage apply.
""",
    "log": """\
usage: pi-post log [--json]

Show the messages receiving sessions dropped or set aside, with the reason
(never the body), oldest first; also letters a session had to leave queued
because it could not remove them once taken (reason "kept: ...").

  --json   print one JSON document instead (docs/json.md): per drop its time,
           address, letter, sender and reason
""",
    "demo": """\
usage: pi-post demo

Run a short, narrated exchange between real pi-post processes in a throwaway
folder: live and queued delivery, collecting mail on resume, a reply loop cut
by the guard, and a sweep that keeps mail. Touches nothing of yours. Ctrl-C,
SIGTERM or SIGHUP end it early, its processes stopped and its folder removed.
""",
    "quarantine": """\
usage: pi-post quarantine [--json]

Show the letters receiving sessions set aside because they were not messages
(malformed, oversize, a symlink...), with the reason, oldest first per address.
They stay under quarantine/ in $PI_POST_DIR, at most 20 per address.

  --json   print one JSON document instead (docs/json.md): per letter its
           address, file name, reason, when it was set aside and its path
""",
    "driver": """\
usage: pi-post driver

Serve the conformance driver protocol on standard input and output, one JSON
object per line (docs/conformance.md): the operations the features and state
machines use, over pipost. pi-post conformance --impl "pi-post driver" runs
the suite through it; a port ships the same thin shim over its own library.
""",
    "contract": """\
usage: pi-post contract [--against REV|auto] [--format text|json|github] [--tree DIR]
       pi-post contract --pin [--against REV|auto] [--tree DIR]
       pi-post contract bump PART [--tree DIR]
       pi-post contract diff PART@V[.R] PART@V[.R] [--format text|json] [--tree DIR]

The contract gate (docs/contract.md). Judge each part of the contract (message,
record, address, tree, interop, cli, documents, driver) of the source checkout
holding the working directory, or of DIR, or else of the installed package:
its schemas, constants and behaviour on the corpus against its pins, and say
for each change whether it is compatible or breaking, with the commands that
resolve it. Exit 0 unchanged or compatible, 1 breaking without a bump (or not
pinned, or a pin rewritten), 2 the gate could not run.

  --against REV   also check that no pin published at the git revision REV was
                  rewritten; auto: the merge base with main (on main, HEAD~1)
  --format F      text (default), json (one document), github (annotations)
  --pin           pin what changed: a compatible change as the next revision,
                  a bumped version as its first; refuses a breaking change
                  without a bump and a contract that contradicts itself
  bump PART       start the next version of PART: its version, the versions
                  its parser reads, and a copy of its schema for the new version
  diff A B        the changes between two pins, e.g. message@1 message@2
""",
    "conformance": """\
usage: pi-post conformance [--impl COMMAND] [--cli COMMAND] [--features PATH ...]
                           [--name REGEX] [--no-machines] [--list]
                           [--report FILE] [--json FILE] [--junit FILE]
                           [--expect FILE] [--write-expectations FILE]
                           [--require INV-NN|must|driver|cli ...] [--validate]
                           [--timeout S] [--seed N]

The conformance kit (docs/conformance.md): run pi-post's specification — its
features and state machines — against an implementation and say, per invariant,
whether its MUST and SHOULD checks passed and whether it conforms to v1, which
takes both parts: the driver part (--impl) and the command line (--cli). Needs
the kit's test dependencies: pip install "pipost[conformance]". COMMAND runs
from this folder, and the paths below are from here too. Exit 0 when no MUST
check failed, 1 when one did, 2 when the run could not be made.

  --impl COMMAND        the driver scenarios and the state machines against the
                        implementation COMMAND serves (JSON lines on stdin/stdout)
  --cli COMMAND         the command-line scenarios against COMMAND (SPEC 8)
                        (neither: pipost, in this process)
  --features PATH ...   only these feature files or folders
  --name REGEX          only the scenarios whose name matches
  --no-machines         leave out the state machines
  --list                print every scenario and machine test id, its tier and
                        invariants; run nothing
  --report FILE         write the matrix: Markdown, or HTML if FILE ends in .html
  --json FILE           write the JSON report (conformance-report.v1)
  --junit FILE          write JUnit XML, one testcase per scenario and test
  --expect FILE         expected failures, one '<id> <reason>' a line
  --write-expectations FILE
                        write this run's failures as such a file
  --require ROW ...     exit 1 unless these rows (INV-NN) pass their MUST
                        checks; driver, cli: unless that part conforms; must:
                        unless the run conforms to v1 (both parts)
  --validate            check every request and answer against the driver
                        protocol's schema
  --timeout S           seconds one call may take (default 60)
  --seed N              the state machines' Hypothesis seed (0 to 2**32 - 1;
                        default: drawn, and printed with the summary to replay)
""",
    "doctor": """\
usage: pi-post doctor [--json]

Check the health of the post office and change nothing: the folders (symlinks,
owner, mode), the kernel watch, process start times, stale temporary files, the
quarantine and the drop log, records naming a process that ended or hangs,
mailboxes near the cap (40 or more of 50 queued), sessions with more than one
listener running, and the wire contract. One finding per line, with its fix;
exit 0 when nothing needs attention, 1 when something does.

  --json   print one JSON document instead (docs/json.md): per finding a stable
           code, its severity (ok or attention), the text and the fix
""",
    "sweep": """\
usage: pi-post sweep

Remove registry records of sessions offline for over 7 days whose mailbox is
empty, and empty mailbox folders that no record names. Mail is never removed.
First it removes the temporary files (*.tmp in mailboxes and in registry/) that
a writer which died left behind: those untouched for more than 36 hours.
""",
}

OVERVIEW = (
    USAGE
    + """       pi-post listen --session-id <id> [--name <name>] [--cwd <dir>] [--also]
                      [--transcript <file> | --exec <command> [--exec-timeout <seconds>]]
       pi-post log | quarantine | doctor | sweep | demo | driver | contract | conformance
       pi-post help [<command>]
       pi-post --version

pi-post passes text between agent sessions on one machine through files under
$PI_POST_DIR (default ~/.pi/agent/post). Run 'pi-post help <command>' or
'pi-post <command> --help' for the options of a command.
"""
)


class UsageError(Exception):
    """Bad arguments; the text is for the user."""


class HelpRequested(Exception):
    """--help or -h stood where an option can stand."""


class StdoutClosed(Exception):
    """Whoever read standard output went away (``pi-post list | head -1``): not an
    error of the command, so not an OSError that run() would report."""


class Invocation:
    """One run of a command: what it may touch, injectable so that tests run it
    in-process. A command reads standard input as bytes, from ``stdin.buffer``."""

    def __init__(
        self,
        environ: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        processes: ProcessTable | None = None,
        receipt_wait: float | None = None,
    ) -> None:
        self.environ: Mapping[str, str] = dict(os.environ) if environ is None else environ
        self.cwd = cwd
        self.stdin: TextIO = sys.stdin if stdin is None else stdin
        self.stdout: TextIO = sys.stdout if stdout is None else stdout
        self.stderr: TextIO = sys.stderr if stderr is None else stderr
        self.clock = clock
        self.processes = processes  # None: Post watches the real process table
        self.receipt_wait = receipt_wait

    def working_dir(self) -> str:
        return self.cwd or os.getcwd()

    def post(self) -> Post:
        post = Post(default_root(dict(self.environ)), clock=self.clock, processes=self.processes)
        if self.receipt_wait is not None:
            post.receipt_wait = self.receipt_wait
        return post

    def say(self, line: str) -> None:
        try:
            self.stdout.write(format.terminal(line) + "\n")
            self.stdout.flush()
        except BrokenPipeError:
            raise StdoutClosed from None


def _options(
    args: Sequence[str],
    command: str,
    *,
    flags: frozenset[str] = frozenset(),
    valued: frozenset[str] = frozenset(),
    positional_allowed: bool = True,
) -> tuple[dict[str, list[str]], list[str]]:
    """``--name value``, ``--name=value`` and bare flags; the rest is positional.
    ``--help`` counts only where an option can stand, never as a value."""
    found: dict[str, list[str]] = {}
    positional: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg == "--":
            positional += args[index:]
            break
        if arg in ("--help", "-h"):
            raise HelpRequested
        if not arg.startswith("--"):
            positional.append(arg)
            continue
        name, has_value, value = arg.partition("=")
        if name in flags:
            if has_value:
                raise UsageError(f"{name} takes no value")
            found.setdefault(name, []).append("")
        elif name in valued:
            if not has_value:
                if index >= len(args):
                    raise UsageError(f"{name} needs a value")
                value = args[index]
                index += 1
            found.setdefault(name, []).append(value)
        else:
            raise UsageError(
                f"unknown option {arg.split('=')[0]} for {command} (see pi-post {command} --help)"
            )
    if positional and not positional_allowed:
        raise UsageError(f"{command} takes no arguments (see pi-post {command} --help)")
    return found, positional


def _one(positional: list[str], command: str, what: str) -> str:
    if len(positional) != 1:
        raise UsageError(f"{command} takes one {what} (see pi-post {command} --help)")
    return positional[0]


def _text(value: str, source: str) -> str:
    """``value``, from the command line or the environment, as the UTF-8 text its
    bytes are, whatever the locale Python decoded them with (a C locale without
    UTF-8 mode takes only ASCII); bytes that are not UTF-8, which arrive as lone
    surrogates, are refused, saying where they came from."""
    try:
        return os.fsencode(value).decode("utf-8")
    except UnicodeError:
        raise UsageError(f"{source} is not valid UTF-8 text") from None


def _session_address(session_id: str, source: str) -> str:
    """The address of a session id from the command line or the environment."""
    return address_of(_text(session_id, source))


def _reply_to(option: list[str] | None, ctx: Invocation) -> str | None:
    source = "--reply-to" if option else "PI_POST_REPLY_TO"
    value = option[-1] if option else ctx.environ.get("PI_POST_REPLY_TO")
    if value is None or value == "":
        session_id = ctx.environ.get("PI_SESSION_ID")
        return _session_address(session_id, "PI_SESSION_ID") if session_id else None
    if value == "none":
        return None
    if not is_address(_text(value, source)):
        raise UsageError(
            f"{source} must be an address (s- and 12 hex characters) or none, "
            f"not {format.visible(value)!r}"
        )
    return value


def _body(options: dict[str, list[str]], ctx: Invocation) -> str:
    """The body from --body, else from standard input: read as bytes and no further
    than one byte past the cap, so that endless input (``yes | pi-post send``) is
    refused at once and a large one never fills memory."""
    if "--body" in options:
        return _text(options["--body"][-1], "--body")
    if ctx.stdin is None or ctx.stdin.isatty():
        return ""
    raw = ctx.stdin.buffer.read(BODY_CAP + 1)
    if len(raw) > BODY_CAP:
        raise Refused(BodyTooLarge(None, BODY_CAP))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError("standard input is not valid UTF-8 text") from None


def cmd_send(args: Sequence[str], ctx: Invocation) -> int:
    options, positional = _options(
        args, "send", valued=frozenset({"--to", "--body", "--from", "--reply-to"})
    )
    if positional:
        raise UsageError("send takes its targets as --to <target> (see pi-post send --help)")
    handles = [_text(handle, "--to") for handle in options.get("--to", [])]
    if not handles:
        raise Refused(NoTargets())
    cwd = _text(ctx.working_dir(), "the working directory")
    if "--from" in options:
        label = _text(options["--from"][-1], "--from")
    else:
        label = _text(ctx.environ.get("PI_POST_FROM") or "", "PI_POST_FROM")
    label = label or process_name(cwd)
    reply_to = _reply_to(options.get("--reply-to"), ctx)
    body = _body(options, ctx)  # checked before the targets are resolved, as DESIGN §4 says
    sender = Sender(kind="process", name=label, cwd=cwd)
    ctx.post().send(
        handles,
        body,
        sender,
        os_caller(cwd, dict(ctx.environ)),
        reply_to=reply_to,
        on_deposit=lambda r: ctx.say(format.receipt(r.delivered, r.address, r.message_id)),
    )
    return 0


def cmd_list(args: Sequence[str], ctx: Invocation) -> int:
    options, positional = _options(args, "list", flags=frozenset({"--all", "--json"}))
    if positional:
        raise UsageError("list takes no arguments but --all and --json")
    post = ctx.post()
    sessions = post.sessions()
    if "--json" in options:
        from pipost import documents

        listing = documents.listing(sessions, post.clock(), everything="--all" in options)
        ctx.say(documents.dump(listing))
        return 0
    if not sessions:
        ctx.say("no sessions are registered")
        return 0
    # One write: a flush per line costs a registry of thousands a write call each.
    ctx.say("\n".join(format.listing(sessions, post.clock(), everything="--all" in options)))
    return 0


def _lookup(handle: str, ctx: Invocation, directory: DiskDirectory) -> tuple[str, Candidate | None]:
    """The address a read-only command looks at, with its session where one is
    registered (its record read once), in the root ``directory`` has open. A bare
    address is looked at even with no record, as the reference does: looking is not
    sending."""
    if is_address(handle):
        return handle, directory.by_address(handle)
    target = directory.resolve(handle, os_caller(ctx.working_dir(), dict(ctx.environ)))
    return target.address, target.candidate


def cmd_resolve(args: Sequence[str], ctx: Invocation) -> int:
    options, positional = _options(args, "resolve", flags=frozenset({"--json"}))
    handle = _one(positional, "resolve", "target")
    post = ctx.post()
    with post.directory() as directory:
        address, candidate = _lookup(handle, ctx, directory)
    queued = mailbox.count(post.root, address) if candidate is None else candidate.queued
    if "--json" in options:
        from pipost import documents

        ctx.say(documents.dump(documents.resolved(handle, address, queued, candidate)))
        return 0
    if candidate is None:
        lines = format.bare_address_card(address, queued)
    else:
        lines = format.resolve_card(candidate, post.clock())
    for line in lines:
        ctx.say(line)
    return 0


def cmd_peek(args: Sequence[str], ctx: Invocation) -> int:
    options, positional = _options(args, "peek", flags=frozenset({"--json"}))
    handle = _one(positional, "peek", "target")
    # The root opened once: the lookup needs no count, the letters are the count.
    with ctx.post().directory(count_mailboxes=False) as directory:
        address, _ = _lookup(handle, ctx, directory)
        letters = directory.peek(address)
    if "--json" in options:
        from pipost import documents

        ctx.say(documents.dump(documents.peeked(handle, address, letters)))
        return 0
    if not letters:
        ctx.say(f"empty {address}")
    for letter in letters:
        if isinstance(letter.content, Rejected):
            ctx.say(format.peek_rejected(letter.name, letter.content.reason))
        else:
            ctx.say(format.peek_line(letter.content))
    return 0


def cmd_whoami(args: Sequence[str], ctx: Invocation) -> int:
    _options(args, "whoami", positional_allowed=False)
    session_id = ctx.environ.get("PI_SESSION_ID")
    if not session_id:
        raise Refused(
            "PI_SESSION_ID is not set (run inside a pi bash tool, or use an explicit address)"
        )
    ctx.say(_session_address(session_id, "PI_SESSION_ID"))
    return 0


def cmd_sweep(args: Sequence[str], ctx: Invocation) -> int:
    _options(args, "sweep", positional_allowed=False)
    report = ctx.post().sweep()
    for path in report.temporaries_removed:
        ctx.say(f"removed stale temporary {format.visible(path)}")
    for address in report.records_removed:
        ctx.say(f"removed record {address}")
    for address in report.mailboxes_removed:
        ctx.say(f"removed empty mailbox {address}")
    if not (report.temporaries_removed or report.records_removed or report.mailboxes_removed):
        ctx.say("nothing to sweep")
    return 0


def cmd_listen(args: Sequence[str], ctx: Invocation) -> int:
    import resource  # at the start: with no descriptor left, no module can be read
    import signal

    from pipost import host, listeners, policy

    options, positional = _options(
        args,
        "listen",
        flags=frozenset({"--also"}),
        valued=frozenset(
            {"--session-id", "--name", "--cwd", "--transcript", "--exec", "--exec-timeout"}
        ),
    )
    if positional:
        raise UsageError("listen takes no positional arguments (see pi-post listen --help)")
    session_id = (options.get("--session-id") or [""])[-1]
    if not session_id:
        raise UsageError("listen requires --session-id <id>")
    if "--transcript" in options and "--exec" in options:
        raise UsageError("listen takes --transcript or --exec, not both")
    if "--exec-timeout" in options and "--exec" not in options:
        raise UsageError("--exec-timeout applies to --exec only")
    cwd = ctx.working_dir()
    if "--cwd" in options:
        given = options["--cwd"][-1]
        cwd = os.path.join(cwd, given)
        if not given or not os.path.isdir(cwd):
            raise UsageError(f"--cwd must be an existing directory, not {format.visible(given)!r}")
    cwd = os.path.realpath(cwd)
    environ = dict(ctx.environ)
    address = _session_address(session_id, "--session-id")
    environ.update(PI_SESSION_ID=session_id, PI_SESSION_ADDRESS=address)
    context: host.Context
    if "--transcript" in options:
        from pathlib import Path  # here, not at the top: only a transcript needs it

        context = host.TranscriptContext(Path(options["--transcript"][-1]))
    elif "--exec" in options:
        timeout = options.get("--exec-timeout")
        context = host.ExecContext(
            options["--exec"][-1],
            environ,
            _seconds(timeout[-1], "--exec-timeout") if timeout else host.EXEC_TIMEOUT_S,
        )
    else:
        context = host.StreamContext(ctx.stdout)
    receiver = host.Host(
        ctx.post(),
        session_id,
        cwd,
        context,
        name=options["--name"][-1] if "--name" in options else None,
        inbound=policy.inbound_mode(_mode_setting(ctx, "PI_POST_INBOUND", policy.Inbound)),
        resume=policy.resume_mode(_mode_setting(ctx, "PI_POST_RESUME", policy.Resume)),
        say=lambda line: _warn_if_possible(ctx, line),
        also="--also" in options,
    )
    previous = {
        sig: signal.signal(sig, lambda *_: receiver.request_stop())
        for sig in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        receiver.start()
        _warn_if_possible(ctx, f"listening as {receiver.address}")
        receiver.serve()
    except listeners.AlreadyListening as running:
        raise Refused(f"{running} (stop it, or pass --also to run this one beside it)") from None
    except host.ContextGone:  # said by the host; ends as any command whose reader went away
        raise StdoutClosed from None
    except OSError as error:
        if error.errno not in host.OUT_OF_DESCRIPTORS:
            raise
        if error.errno == errno.EMFILE:
            soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
            why = f"this process may have at most {soft} files open: raise ulimit -n"
        else:
            why = "the system's table of open files is full: close some, or raise fs.file-max"
        raise Refused(
            f"cannot go on receiving: {error.strerror} ({why}, then start it again); "
            "its mail stays queued"
        ) from None
    finally:
        receiver.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


def _seconds(value: str, option: str) -> float:
    """A positive, finite number of seconds (``30``, ``1.5``)."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):  # also false for nan
        raise UsageError(
            f"{option} must be a positive number of seconds, not {format.visible(value)!r}"
        )
    return seconds


def _warn(ctx: Invocation, line: str) -> None:
    ctx.stderr.write(format.terminal(f"pi-post: {line}") + "\n")
    ctx.stderr.flush()


def _mode_setting(ctx: Invocation, variable: str, modes: type[enum.Enum]) -> str | None:
    """A mode variable as set; one that names no mode means the default, as
    documented, and gets one warning."""
    from pipost import policy

    value = ctx.environ.get(variable)
    if policy.is_unknown_mode(modes, value):
        words = ", ".join(mode.value for mode in modes)
        _warn(
            ctx,
            f"{variable}={format.visible(value or '')!r} is none of {words}; "
            f"taken as {policy.mode_word(modes, value)}",
        )
    return value


def _warn_if_possible(ctx: Invocation, line: str) -> None:
    """A receiving session's report: a session whose standard error is gone goes on
    taking mail (INV-23), saying nothing."""
    try:
        _warn(ctx, line)
    except (OSError, ValueError):  # ValueError: the stream was closed
        pass


def cmd_log(args: Sequence[str], ctx: Invocation) -> int:
    from pipost import droplog

    options, _ = _options(args, "log", flags=frozenset({"--json"}), positional_allowed=False)
    drops = list(droplog.read(ctx.post().root))
    if "--json" in options:
        from pipost import documents

        ctx.say(documents.dump(documents.drops(drops)))
        return 0
    if not drops:
        ctx.say("the drop log is empty")
    for drop in drops:
        ctx.say(
            f"{format.iso_time(drop.at)} {drop.address} {format.visible(drop.letter)} "
            f"from {format.visible(drop.sender)}: {format.visible(drop.reason)}"
        )
    return 0


def cmd_quarantine(args: Sequence[str], ctx: Invocation) -> int:
    options, _ = _options(args, "quarantine", flags=frozenset({"--json"}), positional_allowed=False)
    root = ctx.post().root
    files.check_root(root)
    from pipost import quarantine

    entries = quarantine.quarantined(root)
    if "--json" in options:
        from pipost import documents

        ctx.say(documents.dump(documents.quarantine(root, entries)))
        return 0
    if not entries:
        ctx.say("the quarantine is empty")
    for entry in entries:
        ctx.say(f"{entry.address} {format.visible(entry.name)} — {format.visible(entry.reason)}")
    return 0


def cmd_doctor(args: Sequence[str], ctx: Invocation) -> int:
    options, _ = _options(args, "doctor", flags=frozenset({"--json"}), positional_allowed=False)
    from pipost import doctor

    post = ctx.post()
    facts = doctor.survey(post.root, post.clock(), post.processes)
    findings = doctor.diagnose(facts)
    if "--json" in options:
        from pipost import documents

        ctx.say(documents.dump(documents.doctor(facts, findings)))
    else:
        ctx.say("\n".join(doctor.report(findings)))
    return 0 if doctor.healthy(findings) else 1


def cmd_demo(args: Sequence[str], ctx: Invocation) -> int:
    _options(args, "demo", positional_allowed=False)
    from pipost import demo

    return demo.run(ctx.say)


def cmd_driver(args: Sequence[str], ctx: Invocation) -> int:
    _options(args, "driver", positional_allowed=False)
    from pipost import driver

    driver.serve(ctx.stdin, ctx.stdout)
    return 0


def cmd_contract(args: Sequence[str], ctx: Invocation) -> int:
    """The contract gate, in a child interpreter: it gathers the contract from this
    module among others, so importing it here would close a circle (DESIGN §10)."""
    if any(arg in ("--help", "-h") for arg in args):
        raise HelpRequested
    import subprocess  # here: only the gate needs it

    import pipost

    package_folder = os.path.dirname(os.path.dirname(os.path.abspath(pipost.__file__)))
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}  # the same pipost, in UTF-8
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_folder, env.get("PYTHONPATH")]))
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pipost.contract", *args],
            cwd=ctx.working_dir(),
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            encoding="utf-8",
            errors="replace",
            check=False,
        )
    except OSError as error:  # a working directory that is gone: the gate could not run
        where = f"{format.visible(str(error.filename))}: " if error.filename else ""
        ctx.stderr.write(f"pi-post: {where}{error.strerror or error}\n")
        return 2  # as the gate says it (docs/contract.md)
    ctx.stdout.write(done.stdout)
    ctx.stderr.write(done.stderr)
    return done.returncode


def cmd_conformance(args: Sequence[str], ctx: Invocation) -> int:
    if any(arg in ("--help", "-h") for arg in args):
        raise HelpRequested
    from pipost_conformance import runner  # the kit, and what it imports, only here

    return runner.main(args, ctx.stdout, ctx.stderr, cwd=ctx.working_dir())


COMMANDS: dict[str, Callable[[Sequence[str], Invocation], int]] = {
    "send": cmd_send,
    "list": cmd_list,
    "resolve": cmd_resolve,
    "peek": cmd_peek,
    "whoami": cmd_whoami,
    "sweep": cmd_sweep,
    "listen": cmd_listen,
    "log": cmd_log,
    "quarantine": cmd_quarantine,
    "doctor": cmd_doctor,
    "demo": cmd_demo,
    "driver": cmd_driver,
    "contract": cmd_contract,
    "conformance": cmd_conformance,
}


def run(argv: Sequence[str], ctx: Invocation) -> int:
    if not argv:
        ctx.stdout.write(USAGE)
        return 0
    command, args = argv[0], list(argv[1:])
    if command in ("-h", "--help", "help"):
        if not args or args[0] in ("-h", "--help", "help"):
            ctx.stdout.write(OVERVIEW)
            return 0
        if args[0] not in HELP:
            ctx.stderr.write(
                f"pi-post: unknown command {format.visible(args[0])!r} "
                "(pi-post help lists the commands)\n"
            )
            return 1
        ctx.stdout.write(HELP[args[0]])
        return 0
    if command == "--version":
        from importlib import metadata  # only here: loading it costs more than a send

        try:
            version = metadata.version("pipost")
        except metadata.PackageNotFoundError:
            ctx.stderr.write("pi-post: pipost is not installed, so it has no version\n")
            return 1
        ctx.say(f"pi-post {version}")
        return 0
    handler = COMMANDS.get(command)
    if handler is None:
        ctx.stdout.write(USAGE)
        return 1
    try:
        return handler(args, ctx)
    except HelpRequested:
        ctx.stdout.write(HELP[command])
        return 0
    except (Refused, UsageError) as error:
        ctx.stderr.write(format.terminal(f"pi-post: {error}") + "\n")
    except OSError as error:
        where = f"{format.visible(str(error.filename))}: " if error.filename else ""
        ctx.stderr.write(format.terminal(f"pi-post: {where}{error.strerror or error}") + "\n")
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    _stand_in_for_closed_streams()
    _write_utf8()
    ctx = Invocation()
    try:
        code = run(sys.argv[1:] if argv is None else argv, ctx)
        ctx.stdout.flush()  # here, so that what run() left buffered meets a closed pipe too
        return code
    except KeyboardInterrupt:
        return 130
    except (StdoutClosed, BrokenPipeError):
        return _end_on_a_closed_pipe()


class _Closed(io.TextIOBase):
    """A standard stream the process was started without (its descriptor closed, so
    Python gives None). Output written to it fails as on a closed descriptor, so that
    the command says so and fails; errors, with nowhere to be said, are dropped."""

    def __init__(self, name: str, *, said: bool) -> None:
        self._name = name
        self._said = said

    def write(self, text: str) -> int:
        if self._said:
            raise OSError(errno.EBADF, f"standard {self._name} is closed")
        return len(text)


def _stand_in_for_closed_streams() -> None:
    if sys.stdout is None:
        sys.stdout = _Closed("output", said=True)
    if sys.stderr is None:
        sys.stderr = _Closed("error", said=False)


def _write_utf8() -> None:
    """Standard output and error in UTF-8, as the letters, the arguments and standard
    input are, whatever the locale says: a name a C or Latin-1 locale cannot
    encode must not end a command with a traceback (nor a JSON line be cut)."""
    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None) or ""
        if encoding.lower().replace("-", "").replace("_", "") != "utf8":
            reconfigure = getattr(stream, "reconfigure", None)
            if reconfigure is not None:
                reconfigure(encoding="utf-8", errors=stream.errors)  # stderr's kept


def _end_on_a_closed_pipe() -> int:
    """End as coreutils do when their reader goes away: without a word, killed by
    SIGPIPE (a shell shows status 141), whatever output was still held."""
    import signal  # here: only a closed pipe needs it

    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGPIPE)
    return 128 + signal.SIGPIPE  # our parent blocked SIGPIPE: the status a shell would show


def exit_now(code: int) -> NoReturn:
    """End the process with ``code`` without the interpreter's teardown.

    Freeing every module and object at exit costs a hook-run send about a fifth
    of its cold start, and a command that ran no thread has nothing left to do:
    its files are closed and its letters flushed to disk. So once stdout and
    stderr are flushed the process ends at once. A command that started threads
    (they import threading) gets the normal exit, which waits for them."""
    if "threading" in sys.modules:
        sys.exit(code)
    # Never reached under coverage, which loads threading in every process it measures:
    # the tests of exit_now run it in processes of their own, unmeasured (test_cli.py).
    try:  # pragma: no cover
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # pragma: no cover
        sys.exit(code)  # the normal exit reports what could not be written
    os._exit(code)  # pragma: no cover
