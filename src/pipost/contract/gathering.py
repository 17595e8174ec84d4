"""The contract, part by part, gathered from the code that carries it out.

The contract is what another implementation must agree on to share a folder with
this one, or to be judged by this suite (SPEC 1, 3, 8, 11.3). :data:`PARTS`
splits it, each part with its own version (:func:`versions`): the message
(letters' ``v``), the record (records' ``v``), the address rule, the tree's
names and modes, the interop rules (locks, caps, windows, timings), the command
line's lines and exit statuses, the ``--json`` documents, the driver protocol.

A part's content (see :mod:`pipost.contract.compatibility`) is gathered, not declared:
the shipped schema of its version, the constants the code enforces, and the
results of running the cases of the vectors (``pipost_conformance/vectors``) and
the command lines of ``corpus.json`` (plus every input a pin already holds whole)
through the public functions in this process —
:func:`pipost.message.parse` and ``encode``, the record's codec,
:func:`pipost.address.address_of`, the command line — and of one scripted
exchange whose locks and renames are recorded. So a change of the parser, the
encoder or the derivation moves the content, whatever the schema says.

The gate that judges it is :mod:`pipost.contract.gate` (``pi-post contract``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from pipost import (
    cli,
    documents,
    driver,
    driver_protocol,
    droplog,
    files,
    host,
    listeners,
    mailbox,
    message,
    policy,
    post,
    quarantine,
    registry,
    resolve,
    schemas,
    session,
)
from pipost.address import ADDRESS_PATTERN, address_of
from pipost.contract.compatibility import (
    Content,
    Json,
    PartVerdict,
    Pins,
    from_data,
    judge,
    kind_of,
    latest,
    to_data,
)
from pipost.format import DAY_MS
from pipost_conformance import VECTORS, vector_bytes, vectors

PARTS: Final = ("message", "record", "address", "tree", "interop", "cli", "documents", "driver")

# The parts no file on disk carries a version of. The message, the record, the
# documents and the driver protocol write theirs (see versions()).
DECLARED: Final[dict[str, int]] = {"address": 1, "tree": 1, "interop": 1, "cli": 1}

PINS_FILE: Final = Path(__file__).with_name("pins.json")
CORPUS_FILE: Final = Path(__file__).with_name("corpus.json")

_ANNOTATIONS = frozenset({"title", "description", "$comment", "examples"})
_LONG = 160  # a result string longer than this is pinned by its digest


class CorpusError(Exception):
    """A corpus entry that contradicts the input a pin holds under the same name."""


def versions() -> dict[str, int]:
    """The version of each part this implementation carries out now."""
    return {
        "message": message.VERSION,
        "record": session.VERSION,
        **DECLARED,
        "documents": documents.VERSION,
        "driver": driver_protocol.PROTOCOL,
    }


def load_corpus(path: Path = CORPUS_FILE) -> dict[str, dict[str, dict[str, Json]]]:
    """Part → kind (parse, encode, derive, output) → entry name → input: the command
    lines of ``corpus.json`` and the cases of the vectors of this version."""
    data: dict[str, dict[str, dict[str, Json]]] = json.loads(path.read_text(encoding="utf-8"))
    for (part, kind), vector_kind in VECTOR_KINDS.items():
        cases = vectors(vector_kind, _manifest_of(part, versions()[part]))
        data.setdefault(part, {})[kind] = {
            name: _corpus_input(vector_kind, given) for name, (given, _) in cases.items()
        }
    return data


def _manifest_of(part: str, version: int) -> int:
    """The newest manifest of the vectors whose ``part`` is at ``version`` or below:
    until a bump brings its own vectors, the version before's cases hold."""
    found = [
        int(path.name[1:].split(".")[0])
        for path in VECTORS.glob("v*.manifest.json")
        if json.loads(path.read_text(encoding="utf-8"))["parts"][part] <= version
    ]
    return max(found)


# (part, kind of facet) → the kind of vector whose cases it gathers.
VECTOR_KINDS: Final = {
    ("message", "parse"): "letter",
    ("message", "encode"): "letter-written",
    ("record", "parse"): "record",
    ("record", "encode"): "record-written",
    ("address", "derive"): "address",
}

# A record's fields on disk → session.Record's arguments.
_RECORD_ARGUMENTS: Final = {
    "sessionId": "session_id",
    "startedAt": "started_at",
    "lastSeen": "last_seen",
    "pidStart": "pid_start",
}


def _corpus_input(vector_kind: str, given: Json) -> Json:
    """A vector's input as the gate's case holds it (and its pins digested it)."""
    assert isinstance(given, dict)
    if vector_kind == "address":
        return given["sessionId"]
    if vector_kind == "record-written":
        fields = given["record"]
        assert isinstance(fields, dict)
        return {"record": {_RECORD_ARGUMENTS.get(k, k): v for k, v in fields.items()}}
    return given


def inputs_of(content: Content) -> dict[str, dict[str, Json]]:
    """The corpus a content was gathered from: kind → name → input."""
    found: dict[str, dict[str, Json]] = {}
    for facet, value in content.items():
        if isinstance(value, dict) and "input" in value:
            kind, name = facet.split(":", 1)
            found.setdefault(kind, {})[name] = value["input"]
    return found


def corpus_for(
    part: str, corpus: Mapping[str, Mapping[str, Mapping[str, Json]]], pins: Pins
) -> dict[str, dict[str, Json]]:
    """The inputs a part is gathered from: those its latest pin holds, then the
    corpus file's new ones. An entry the file changes under a pinned name is an
    error: a pinned case is never rewritten, only added to."""
    merged: dict[str, dict[str, Json]] = {}
    pinned = _latest_content(pins, part)
    for kind, held in inputs_of(pinned).items():
        merged[kind] = dict(held)
    for kind, given_entries in corpus.get(part, {}).items():
        into = merged.setdefault(kind, {})
        entries: Mapping[str, Json] = given_entries
        for name, given in entries.items():
            if name in into and json.dumps(into[name], sort_keys=True) != json.dumps(
                given, sort_keys=True
            ):
                raise CorpusError(
                    f"corpus entry {part}/{kind}/{name} differs from the input its pin holds; "
                    "a pinned case is never rewritten: add the new case under a new name"
                )
            into.setdefault(name, given)
    return merged


def gather(part: str, inputs: Mapping[str, Mapping[str, Json]]) -> Content:
    """The content of ``part`` as this implementation has it, for these inputs."""
    return _GATHERERS[part](inputs)


def gather_all(
    pins: Pins, corpus: Mapping[str, Mapping[str, Mapping[str, Json]]]
) -> dict[str, Content]:
    exchange = _Exchange.run()
    contents = {}
    for part in PARTS:
        inputs = corpus_for(part, corpus, pins)
        contents[part] = exchange.facets(part) | gather(part, inputs)
    return contents


def load_pins(path: Path = PINS_FILE) -> Pins:
    return from_data(json.loads(path.read_text(encoding="utf-8")))


def save_pins(pins: Pins, path: Path = PINS_FILE) -> None:
    """Written whole to a temporary beside it and renamed over it: never half a file."""
    text = json.dumps(to_data(pins), indent=1, ensure_ascii=False) + "\n"
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def judge_all(pins: Pins, contents: Mapping[str, Content]) -> list[PartVerdict]:
    """Each part now, against its pins."""
    now = versions()
    return [judge(part, now[part], contents[part], pins) for part in PARTS]


def _latest_content(pins: Pins, part: str) -> Content:
    newest = latest(pins, part, below=versions()[part] + 1)
    return {} if newest is None else newest[2].content


# -- facets of a schema ---------------------------------------------------------------


def semantic(schema: Json) -> Json:
    """A JSON Schema without its prose: rewording documentation changes no contract."""
    if isinstance(schema, dict):
        return {k: semantic(v) for k, v in schema.items() if k not in _ANNOTATIONS}
    if isinstance(schema, list):
        return [semantic(item) for item in schema]
    return schema


def schema_facets(schema: Mapping[str, Any]) -> Content:
    """An object schema as facets: ``field:<name>`` per property, ``required``,
    ``closed`` (whether unknown fields are refused), and ``schema`` for the rest."""
    whole = semantic(dict(schema))
    assert isinstance(whole, dict)
    properties = whole.pop("properties", {})
    assert isinstance(properties, dict)
    facets: Content = {f"field:{name}": value for name, value in properties.items()}
    required = whole.pop("required", [])
    assert isinstance(required, list)
    names: list[Json] = [*sorted(str(name) for name in required)]
    facets["required"] = names
    facets["closed"] = whole.pop("additionalProperties", True) is False
    facets["schema"] = whole
    return facets


def _defs_facets(schema: Mapping[str, Any], kind: str, *path: str) -> Content:
    """A schema whose ``$defs`` (at ``path``) are named things: ``<kind>:<name>`` each."""
    whole = semantic(dict(schema))
    assert isinstance(whole, dict)
    holder: Any = whole
    for key in path:
        holder = holder[key]
    defs = holder.pop("$defs", {})
    facets: Content = {f"{kind}:{name}": value for name, value in defs.items()}
    facets["schema"] = whole
    return facets


# -- the message ----------------------------------------------------------------------


def _message(inputs: Mapping[str, Mapping[str, Json]]) -> Content:
    facets = schema_facets(schemas.load(f"message.v{message.VERSION}"))
    facets["pattern:id"] = message.ID_PATTERN
    facets |= _constants("message")
    for name, given in inputs.get("parse", {}).items():
        raw, file_name = vector_bytes(given)
        facets[f"parse:{name}"] = _case(given, _parsed_letter, raw, file_name)
    for name, given in inputs.get("encode", {}).items():
        facets[f"encode:{name}"] = _case(given, _encoded_letter, given)
    return facets


def _parsed_letter(raw: bytes, file_name: str | None) -> Json:
    return _read_letter(message.parse(raw, file_name))


def _encoded_letter(given: Json) -> Json:
    return _shorten(message.encode(_letter(given)).decode())


def _read_letter(read: message.Message | message.Rejected) -> Json:
    if isinstance(read, message.Rejected):
        return {"rejected": read.code, **read.facts}
    return {"accepted": _shorten(message.to_json(read))}


def _letter(given: Json) -> message.Message:
    assert isinstance(given, dict) and isinstance(given["message"], dict)
    fields: dict[str, Any] = given["message"]
    return message.Message(
        id=fields["id"],
        sender=message.Sender(**fields["from"]),
        sent_at=fields["sentAt"],
        body=fields["body"],
        reply_to=fields.get("replyTo"),
    )


# -- the record -----------------------------------------------------------------------


def _record(inputs: Mapping[str, Mapping[str, Json]]) -> Content:
    facets = schema_facets(schemas.load(f"record.v{session.VERSION}"))
    sample = session.Record("s-000000000000", "id", "name", "/", 0, 0, pid=1, pid_start="start")
    facets["written"] = list(session.to_json(sample))
    facets |= _constants("record")
    for name, given in inputs.get("parse", {}).items():
        raw, file_name = vector_bytes(given)
        facets[f"parse:{name}"] = _case(given, _parsed_record, raw, file_name)
    for name, given in inputs.get("encode", {}).items():
        assert isinstance(given, dict) and isinstance(given["record"], dict)
        facets[f"encode:{name}"] = _case(given, _encoded_record, given["record"])
    return facets


def _parsed_record(raw: bytes, file_name: str | None) -> Json:
    return _read_record(session.parse(raw, file_name))


def _encoded_record(fields: dict[str, Any]) -> Json:
    return _shorten(session.encode(session.Record(**fields)).decode())


def _read_record(read: session.Record | message.Rejected) -> Json:
    if isinstance(read, message.Rejected):
        return {"rejected": read.code, **read.facts}
    fields = {name: getattr(read, name) for name in read.__slots__}
    return {"accepted": _shorten({k: v for k, v in fields.items() if v not in (None, {})})}


# -- the address ----------------------------------------------------------------------


def _address(inputs: Mapping[str, Mapping[str, Json]]) -> Content:
    facets: Content = {"pattern:address": ADDRESS_PATTERN}
    for name, given in inputs.get("derive", {}).items():
        assert isinstance(given, str)
        facets[f"derive:{name}"] = _case(given, address_of, given)
    return facets


# -- the tree and the interop rules -----------------------------------------------------

_SAMPLE_ADDRESS = "s-000000000000"
_SAMPLE_ID = "0000000000000-00000000"


def _tree(inputs: Mapping[str, Mapping[str, Json]]) -> Content:
    root = Path("ROOT")
    letter = Path(mailbox.inbox_of(root, _SAMPLE_ADDRESS)) / (_SAMPLE_ID + message.SUFFIX)
    set_aside = Path(quarantine.quarantine_of(root, _SAMPLE_ADDRESS)) / "<name>"
    listener = Path(listeners.FOLDER, _SAMPLE_ADDRESS, "<pid>.<nonce>" + listeners.SUFFIX)

    def named(path: str | Path) -> str:
        text = str(Path(path).relative_to(root)) if Path(path).is_relative_to(root) else str(path)
        return text.replace(_SAMPLE_ADDRESS, "<address>").replace(_SAMPLE_ID, "<id>")

    return {
        "name:record": named(registry.record_path(root, _SAMPLE_ADDRESS)),
        "name:letter": named(letter),
        "name:letter_in_flight": named(letter) + mailbox.TMP_SUFFIX,
        "name:set_aside": named(set_aside),
        "name:set_aside_reason": named(set_aside) + quarantine.REASON_SUFFIX,
        "name:drop_log": f"log/{droplog.LOG_NAME}",
        "name:drop_log_rotated": f"log/{droplog.ROTATED_NAME}",
        "name:listener": named(listener),
        "mode:folder": f"{files.DIR_MODE:04o}",
        "mode:file": f"{files.FILE_MODE:04o}",
    }


def _interop(inputs: Mapping[str, Mapping[str, Json]]) -> Content:
    return _constants("interop")


# Facet → (module, name) of the constants that are part of the contract: gathered from
# the module, and where the gate points when one changed.
_CONSTANTS: Final[dict[str, dict[str, tuple[Any, str]]]] = {
    "message": {
        "limit:body_cap_bytes": (message, "BODY_CAP"),
        "limit:read_limit": (message, "LETTER_READ_LIMIT"),
    },
    "record": {"limit:read_limit": (session, "RECORD_READ_LIMIT")},
    "interop": {
        "limit:mailbox_cap": (mailbox, "CAP"),
        "limit:body_cap_bytes": (message, "BODY_CAP"),
        "limit:letters_per_rate_window": (policy, "RATE_LIMIT"),
        "limit:targets_per_send": (resolve, "MAX_TARGETS"),
        "limit:set_aside_per_address": (quarantine, "CAP"),
        "limit:drop_log_bytes": (droplog, "LIMIT"),
        "timing:rate_window_ms": (policy, "RATE_WINDOW_MS"),
        "timing:duplicate_window_ms": (policy, "DUPLICATE_WINDOW_MS"),
        "timing:heartbeat_ms": (session, "HEARTBEAT_MS"),
        "timing:live_window_ms": (session, "LIVE_WINDOW_MS"),
        "timing:sweep_after_ms": (session, "SWEEP_AFTER_MS"),
        "timing:temporary_stale_ms": (session, "TEMPORARY_STALE_MS"),
        "timing:receipt_wait_s": (post, "RECEIPT_WAIT_S"),
        "timing:poll_s": (host, "POLL_S"),
    },
}


def _constants(part: str) -> Content:
    return {facet: getattr(module, name) for facet, (module, name) in _CONSTANTS[part].items()}


def constant_of(part: str, facet: str) -> tuple[str, str] | None:
    """The file (from the tree's root) and the line's start where a constant facet is
    set, or None for a facet that is no constant."""
    found = _CONSTANTS.get(part, {}).get(facet)
    if found is None:
        return None
    module, name = found
    return f"src/pipost/{Path(module.__file__).name}", f"{name} ="


class _Exchange:
    """One scripted exchange through the driver, in a scratch folder: every ``flock``
    taken and every rename made, per step, with the names templated. The lock protocol
    and the temporaries are what it shows: facets of ``interop`` and ``tree``."""

    SESSION_ID = "019a3f2e-7c41-7b3a-9d2e-5f1c8a4b6e01"

    def __init__(self, locks: dict[str, list[str]], renames: list[str]) -> None:
        self.locks = locks
        self.renames = renames

    def facets(self, part: str) -> Content:
        if part == "interop":
            return {f"lock:{step}": list[Json](taken) for step, taken in self.locks.items()}
        if part == "tree":
            renames: list[Json] = [*sorted(set(self.renames))]
            return {"renames": renames}
        return {}

    @classmethod
    def run(cls) -> _Exchange:
        locks: dict[str, list[str]] = {}
        renames: list[str] = []
        with tempfile.TemporaryDirectory(prefix="pipost-contract-") as scratch:
            root = Path(scratch, "post")
            cwd = Path(scratch, "work")
            cwd.mkdir()
            world = driver.InProcessDriver(root, home=scratch, now=driver_protocol.DEFAULT_NOW)
            address = address_of(cls.SESSION_ID)
            where = {"cwd": str(cwd)}
            steps: list[tuple[str, Callable[[], object]]] = [
                ("register", lambda: world.call("register", session_id=cls.SESSION_ID, **where)),
                ("deposit", lambda: world.call("send", targets=[address], body="hi", **where)),
                ("claim", lambda: world.call("take", address=address)),
                ("deposit_again", lambda: world.call("send", targets=[address], body="2", **where)),
                ("receive", lambda: world.call("deliver", session_id=cls.SESSION_ID)),
                ("shutdown", lambda: world.call("shutdown", session_id=cls.SESSION_ID)),
                (
                    "sweep",
                    lambda: (world.call("advance_clock", ms=8 * DAY_MS), world.call("sweep")),
                ),
            ]
            for step, action in steps:
                taken: list[str] = []
                with _recording(root, taken, renames):
                    try:
                        action()
                    except Exception as error:  # the step's locks so far, and how it ended
                        taken.append(f"raised {type(error).__name__}")
                locks[step] = taken
        return cls(locks, renames)


_ADDRESS_RE = re.compile(r"s-[0-9a-f]{12}")
_ID_RE = re.compile(r"[0-9]{13}-[0-9a-f]{8}")
_LISTENER_RE = re.compile(r"[0-9]+\.[0-9a-f]+\.lock$")
_NONCE_RE = re.compile(r"\.[0-9a-f]{8}\.tmp$")


def _templated(path: str) -> str:
    path = _ADDRESS_RE.sub("<address>", path)
    path = _ID_RE.sub("<id>", path)
    path = _LISTENER_RE.sub("<pid>.<nonce>.lock", path)
    return _NONCE_RE.sub(".<8 hex>.tmp", path)


def _where(root: Path, fd: int) -> str:
    """The templated path below ``root`` of what ``fd`` is open on (``?`` if none)."""
    wanted = os.fstat(fd)
    for folder, names, file_names in os.walk(root):
        for name in [".", *names, *file_names]:
            path = os.path.join(folder, name)
            status = os.lstat(path)
            if (status.st_dev, status.st_ino) == (wanted.st_dev, wanted.st_ino):
                relative = os.path.relpath(os.path.normpath(path), root)
                shown = "<root>" if relative == "." else relative
                return _templated(shown + ("/" if os.path.isdir(path) else ""))
    return "?"


@contextlib.contextmanager
def _recording(root: Path, locks: list[str], renames: list[str]) -> Iterator[None]:
    import fcntl

    real_flock, real_rename = fcntl.flock, os.rename
    flags = {fcntl.LOCK_EX: "LOCK_EX", fcntl.LOCK_SH: "LOCK_SH", fcntl.LOCK_NB: "LOCK_NB"}

    def flock(fd: int, operation: int) -> None:
        if operation != fcntl.LOCK_UN:
            shown = "|".join(name for bit, name in flags.items() if operation & bit)
            locks.append(f"flock {shown} {_where(root, fd)}")
        real_flock(fd, operation)

    def rename(
        source: Any, target: Any, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None
    ) -> None:
        here = "" if src_dir_fd is None else _where(root, src_dir_fd)
        there = "" if dst_dir_fd is None else _where(root, dst_dir_fd)
        renames.append(f"{_templated(here + str(source))} -> {_templated(there + str(target))}")
        real_rename(source, target, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    fcntl.flock, os.rename = flock, rename  # type: ignore[assignment]
    try:
        yield
    finally:
        fcntl.flock, os.rename = real_flock, real_rename


# -- the command line -----------------------------------------------------------------

_CLI_NOW = driver_protocol.DEFAULT_NOW
_LIVE_SESSION = "019a3f2e-7c41-7b3a-9d2e-5f1c8a4b6e01"
_OFFLINE_SESSION = "019a3f2e-7c41-7b3a-9d2e-5f1c8a4b6e02"


def _cli(inputs: Mapping[str, Mapping[str, Json]]) -> Content:
    """Each entry runs ``pi-post`` in this process on a fresh post office holding one
    live and one offline session: its exit status, its standard output (ids
    templated) and whether its standard error starts ``pi-post: `` (SPEC 8: the lines
    and statuses are the contract; the wording of errors is a SHOULD)."""
    facets: Content = {}
    for name, given in inputs.get("output", {}).items():
        facets[f"output:{name}"] = _case(given, _run_cli, given)
    return facets


def _run_cli(given: Json) -> Json:
    assert isinstance(given, dict) and isinstance(given["argv"], list)
    with tempfile.TemporaryDirectory(prefix="pipost-contract-") as scratch:
        root, cwd = Path(scratch, "post"), Path(scratch, "work")
        cwd.mkdir()
        world = driver.InProcessDriver(root, home=scratch, now=_CLI_NOW - 120_000)
        world.call("register", session_id=_OFFLINE_SESSION, cwd=str(cwd), name="cache-fix")
        world.call("shutdown", session_id=_OFFLINE_SESSION)
        world.now = _CLI_NOW - 5_000
        world.call("register", session_id=_LIVE_SESSION, cwd=str(cwd), name="gtm-summoner")
        env = {"PI_POST_DIR": str(root), "HOME": scratch}
        extra = given.get("env", {})
        assert isinstance(extra, dict)
        env.update({k: str(v) for k, v in extra.items()})
        stdin = given.get("stdin", "")
        assert isinstance(stdin, str)
        out, err = io.StringIO(), io.StringIO()
        context = cli.Invocation(
            environ=env,
            cwd=str(cwd),
            stdin=_BytesStdin(stdin.encode()),
            stdout=out,
            stderr=err,
            clock=lambda: _CLI_NOW,
            processes=world.processes,
            receipt_wait=0.0,
        )
        status = cli.run([str(a) for a in given["argv"]], context)
        real = os.path.realpath(scratch)
    lines = [
        _templated(line).replace(real, "<scratch>").replace(scratch, "<scratch>")
        for line in out.getvalue().splitlines()
    ]
    shown: list[Json] = list(lines)
    return {"status": status, "stdout": shown, "stderr_prefix": err.getvalue()[:9]}


class _BytesStdin(io.TextIOWrapper):
    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data), encoding="utf-8")


# -- the documents and the driver protocol ------------------------------------------------


def _documents(inputs: Mapping[str, Mapping[str, Json]]) -> Content:
    return _defs_facets(schemas.load(f"cli.v{documents.VERSION}"), *_DEFS["documents"])


def _driver(inputs: Mapping[str, Mapping[str, Json]]) -> Content:
    return _defs_facets(schemas.load(f"driver.v{driver_protocol.PROTOCOL}"), *_DEFS["driver"])


_GATHERERS: Final[dict[str, Callable[[Mapping[str, Mapping[str, Json]]], Content]]] = {
    "message": _message,
    "record": _record,
    "address": _address,
    "tree": _tree,
    "interop": _interop,
    "cli": _cli,
    "documents": _documents,
    "driver": _driver,
}


def _case(given: Json, outcome: Callable[..., Json], *args: Any) -> Json:
    """A corpus case: its input and what came of it. An exception is an outcome too (the
    parser must never raise): the gate names the case instead of crashing."""
    try:
        result = outcome(*args)
    except Exception as error:
        result = {"raised": type(error).__name__}
    return {"input": given, "result": result}


def _shorten(value: Json) -> Json:
    """``value`` with every long string replaced by its length and digest: a body at
    the cap is pinned without keeping 32 KiB of it."""
    import hashlib

    if isinstance(value, str) and len(value) > _LONG:
        digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
        return f"<{len(value)} characters, sha256 {digest}>"
    if isinstance(value, dict):
        return {k: _shorten(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shorten(v) for v in value]
    return value


# -- what must hold before anything is pinned ----------------------------------------------


class SchemaToolMissing(Exception):
    """The schemas cannot be checked against the corpus without ``jsonschema``."""


def contradictions(contents: Mapping[str, Content]) -> list[str]:
    """Where the contract contradicts itself: a schema whose constants are not the
    code's, or a schema that judges a corpus file otherwise than the parser does.
    Raises SchemaToolMissing when the second cannot be checked."""
    now = versions()
    problems = []
    for part, stem in _SCHEMA_STEMS.items():
        schema = contents[part].get("schema")
        if isinstance(schema, dict) and not str(schema.get("$id", "")).endswith(f":v{now[part]}"):
            problems.append(
                f"{part}: the $id of {stem.format(now[part])}.schema.json does not end in "
                f":v{now[part]}, the version the code carries out"
            )
    expected = {
        ("message", "field:v"): {"const": message.VERSION},
        ("record", "field:v"): {"const": session.VERSION},
        ("record", "field:address"): {"type": "string", "pattern": ADDRESS_PATTERN},
        ("message", "field:id"): {"type": "string", "pattern": message.ID_PATTERN},
        ("message", "field:replyTo"): {"type": "string", "pattern": ADDRESS_PATTERN},
    }
    for (part, facet), wanted in expected.items():
        if contents[part].get(facet) != wanted:
            problems.append(
                f"{part}: the schema's {facet.split(':')[1]} is "
                f"{json.dumps(contents[part].get(facet))}, the code's is {json.dumps(wanted)}"
            )
    body = contents["message"].get("field:body")
    if not isinstance(body, dict) or body.get("maxLength") != message.BODY_CAP:
        problems.append(
            f"message: the schema's body maxLength is not the code's cap, {message.BODY_CAP}"
        )
    sender = contents["message"].get("field:from")
    fields = sender.get("properties") if isinstance(sender, dict) else None
    address = fields.get("address") if isinstance(fields, dict) else None
    if not isinstance(address, dict) or address.get("pattern") != ADDRESS_PATTERN:
        problems.append("message: the schema's from.address pattern is not the address grammar")
    spoken = {
        int(v)
        for v in re.findall(r'"protocol": \{"const": ([0-9]+)\}', json.dumps(contents["driver"]))
    }
    if spoken != {driver_protocol.PROTOCOL}:
        problems.append(
            f"driver: its schema's open speaks protocol {sorted(spoken)}, the code "
            f"{driver_protocol.PROTOCOL}"
        )
    # The driver hands over letters and records as read: of every version read.
    carried = json.dumps(contents["driver"])
    for name, read in (
        ("message", message.READABLE_VERSIONS),
        ("record", session.READABLE_VERSIONS),
    ):
        found = {int(v) for v in re.findall(rf"urn:pi-post:schema:{name}:v([0-9]+)", carried)}
        if found != set(read):
            said = ", ".join(f"v{v}" for v in sorted(found))
            wanted = ", ".join(f"v{v}" for v in read)
            problems.append(
                f"driver: its schema carries {name} {said}, but pipost reads {name} {wanted}: "
                f"bump the driver (pi-post contract bump driver) and make its {name} any of "
                f"{wanted}"
            )
    return problems + _schema_disagreements(contents)


def _schema_disagreements(contents: Mapping[str, Content]) -> list[str]:
    """Every corpus file the schema of its version judges otherwise than the parser.
    A file marked ``beyond_schema`` breaks a rule JSON Schema cannot state (the byte
    cap, sentAt in the id, the file name): the schema accepts it, the parser not."""
    try:
        import jsonschema
    except ImportError:
        raise SchemaToolMissing(
            "the schemas cannot be checked against the corpus without jsonschema: "
            "pip install -e '.[dev]'"
        ) from None
    problems = []
    for part in ("message", "record"):
        for facet, case in contents[part].items():
            if kind_of(facet) != "parse":
                continue
            assert isinstance(case, dict) and isinstance(case["input"], dict)
            raw, _ = vector_bytes(case["input"])
            try:
                data = json.loads(raw)
            except (ValueError, RecursionError):
                continue  # not JSON (to this reader): no schema speaks of it
            accepted = isinstance(case["result"], dict) and "accepted" in case["result"]
            valid = jsonschema.Draft202012Validator(_schema_of(part, data)).is_valid(data)
            beyond = "beyond_schema" in case["input"]
            if accepted and not valid:
                problems.append(f"{part}: the schema refuses {facet}, which the parser accepts")
            elif valid and not accepted and not beyond:
                problems.append(
                    f"{part}: the schema accepts {facet}, which the parser rejects; if a rule "
                    "JSON Schema cannot state refuses it, say which in its beyond_schema"
                )
            elif beyond and (accepted or not valid):
                problems.append(
                    f"{part}: {facet} is marked beyond_schema, but the schema refuses it"
                )
    return problems


def _schema_of(part: str, data: object) -> dict[str, Any]:
    """The schema of the version a file says it is, else that of the current one."""
    version = data.get("v") if isinstance(data, dict) else None
    # To JSON Schema 1.0 is the number 1 (the parser refuses it: beyond_schema).
    if type(version) is float and version.is_integer():
        version = int(version)
    if type(version) is int and version != versions()[part]:
        with contextlib.suppress(FileNotFoundError):
            return schemas.load(f"{part}.v{version}")
    return schemas.load(f"{part}.v{versions()[part]}")


def old_mail(pins: Pins) -> list[str]:
    """Every file an earlier pinned version accepted that this parser no longer reads
    as it did: a bump must never strand the mail still queued. The cases are those a
    pin holds whole and those of the vectors kept for that version."""
    readers: dict[str, Callable[[bytes, str | None], Json]] = {
        "message": _parsed_letter,
        "record": _parsed_record,
    }
    problems = []
    for part, read in readers.items():
        for version, revisions in sorted(pins.get(part, {}).items()):
            if version >= versions()[part]:
                continue
            for facet, case in revisions[-1].content.items():
                if kind_of(facet) != "parse" or not isinstance(case, dict):
                    continue
                result = case["result"]
                if not (isinstance(result, dict) and "accepted" in result):
                    continue
                raw, name = vector_bytes(case["input"])
                now = read(raw, name)
                if now != result:
                    problems.append(
                        f"{part} v{version} {facet}: accepted by v{version}, now read as "
                        f"{json.dumps(now, ensure_ascii=False)[:200]}"
                    )
            problems += _old_vectors(part, version)
    return problems


def _old_vectors(part: str, version: int) -> list[str]:
    """The vectors of an earlier ``version`` of ``part`` a parser no longer accepts as
    they expect (SPEC 1: a reader of version N reads the files of every earlier one)."""
    kind = VECTOR_KINDS[part, "parse"]
    problems = []
    for manifest in sorted(VECTORS.glob("v*.manifest.json")):
        if json.loads(manifest.read_text(encoding="utf-8"))["parts"].get(part) != version:
            continue
        for name, (given, expected) in vectors(kind, int(manifest.name[1:].split(".")[0])).items():
            if "accepted" not in expected:
                continue
            now = answer_of(kind, given)
            if now != expected:
                problems.append(
                    f"{part} v{version} {kind} vector {name}: accepted by v{version}, now "
                    f"answered {json.dumps(now, ensure_ascii=False)[:200]}"
                )
    return problems


def answer_of(kind: str, given: Json) -> Json:
    """pipost's answer to a letter or record vector, as its expected file writes one."""
    raw, file_name = vector_bytes(given)
    read = message.parse(raw, file_name) if kind == "letter" else session.parse(raw, file_name)
    if isinstance(read, message.Rejected):
        return {"rejected": {"code": read.code, **read.facts}}
    if isinstance(read, message.Message):
        return {"accepted": message.to_json(read)}
    return {"accepted": session.to_json(read)}


def published_schemas(pins: Pins) -> list[str]:
    """Every schema file of an earlier version that no longer says what its pin does."""
    problems = []
    for part, stem in _SCHEMA_STEMS.items():
        for version, revisions in sorted(pins.get(part, {}).items()):
            if version >= versions()[part]:
                continue
            try:
                schema = schemas.load(stem.format(version))
            except FileNotFoundError:
                continue
            pinned = revisions[-1].content
            facets = (
                schema_facets(schema)
                if part in ("message", "record")
                else _defs_facets(schema, *_DEFS[part])
            )
            changed = sorted(f for f, v in facets.items() if pinned.get(f) != v)
            if changed:
                problems.append(
                    f"{part}: {stem.format(version)}.schema.json, published as v{version}, "
                    f"changed ({', '.join(changed)})"
                )
    return problems


_SCHEMA_STEMS: Final = {
    "message": "message.v{}",
    "record": "record.v{}",
    "documents": "cli.v{}",
    "driver": "driver.v{}",
}
_DEFS: Final = {"documents": ("def",), "driver": ("op", "$defs", "ops")}
