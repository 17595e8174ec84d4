"""Hostile input, generated: the strategies and the layers of a hostile tree that
test_hostile_input.py (here), which judges an implementation through the driver,
and pipost's own test_hostile_parsers.py (tests/invariants in its repository),
which judges pipost's parsers and words, share. Bytes no writer meant as a letter
or a record, and folder trees laid out by someone who wants a reader to crash,
follow a link, read a gigabyte or build a path from a field.

The grammars are restated here rather than imported, so that a loosened
``is_address`` or ``is_message_id`` is caught, not trusted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from pipost import session
from pipost.address import address_of
from pipost.message import BODY_CAP, LETTER_READ_LIMIT, Message, Sender, encode, new_message
from pipost.session import Record
from pipost_conformance import INTEROP
from pipost_conformance.machines.common import NOW
from pipost_conformance.machines.driving import SCRATCH

THOROUGH = os.environ.get("HYPOTHESIS_PROFILE") == "thorough"


def budget(gate: int, thorough: int) -> settings:
    """Examples for the active profile. The parse and record fuzzers together run
    over 100,000 inputs under "thorough" and a few seconds' worth under "gate"; a
    conformance run (its profile, conftest.py) keeps its own small budget."""
    if settings.get_current_profile_name() == "conformance":
        return settings(suppress_health_check=list(HealthCheck))
    return settings(
        max_examples=thorough if THOROUGH else gate,
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
            HealthCheck.function_scoped_fixture,  # a driver per test, not per example
        ],
    )


ADDRESS_GRAMMAR = re.compile(r"s-[0-9a-f]{12}", re.ASCII)
ID_GRAMMAR = re.compile(r"[0-9]{13}-[0-9a-f]{8}", re.ASCII)

REFERENCE_LETTERS = tuple(
    path.read_bytes().strip() for path in sorted((INTEROP / "messages").glob("*.json"))
)


def _reference_records() -> tuple[dict[str, Any], ...]:
    fixture = json.loads((INTEROP / "cli-transcripts.json").read_text(encoding="utf-8"))
    found = []
    for entry in fixture["fixture"]:
        record = dict(entry["record"])
        record["pid"] = 4242  # the fixture holds a placeholder text there
        found.append(record)
    return tuple(found)


REFERENCE_RECORDS = _reference_records()


# -- hostile values -------------------------------------------------------------------

ANSI_ESCAPES = ("\x1b[31m", "\x1b[2J\x1b[H", "\x1b]0;owned\x07", "\x9b1m", "\x1b[6n", "\x1bc")
PATH_LIKE = (
    "../../x",
    "../../../../etc/passwd",
    "/etc/passwd",
    "s-../../x123",
    "s-0123456789ab/../../x",
    "./s-0123456789ab",
    "s-0123456789ab\n",
    "s-0123456789ab\x00",
    "S-0123456789AB",
    "s-0123456789a\u0661",
    "s-0123456789aB",
    "~",
    "..",
    ".",
    "",
    " ",
    "0000000000001-00000000/../../x",
    "1796078534000-deed10f1\n",
    "1796078534000-deed10f1.json",
    "\u0661796078534000-deed10f1",
)

texts = st.text(max_size=24)
with_escapes = st.builds(
    lambda before, escape, after: before + escape + after,
    texts,
    st.sampled_from(ANSI_ESCAPES),
    texts,
)
control_texts = st.text(st.characters(min_codepoint=0, max_codepoint=0x9F), min_size=1, max_size=16)
# A lone surrogate is valid JSON as "\ud800" but is no text: encoded with
# ensure_ascii it arrives as that escape, without it as bytes that are not UTF-8.
with_lone_surrogate = st.builds(
    lambda before, code, after: before + chr(code) + after,
    texts,
    st.integers(0xD800, 0xDFFF),
    texts,
)
# Around the body cap and the read limit, in one-byte and two-byte characters.
huge_texts = st.builds(
    lambda char, size: char * (size // len(char.encode("utf-8"))),
    st.sampled_from(["x", "é", "\x1b"]),
    st.sampled_from([BODY_CAP - 1, BODY_CAP, BODY_CAP + 1, BODY_CAP + 2, LETTER_READ_LIMIT + 1]),
)
hostile_strings = st.one_of(
    st.sampled_from(PATH_LIKE), with_escapes, control_texts, with_lone_surrogate, huge_texts, texts
)
hostile_values: st.SearchStrategy[Any] = st.one_of(
    hostile_strings,
    st.none(),
    st.booleans(),
    st.integers(-(2**80), 2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.lists(st.integers() | texts, max_size=3),
    st.dictionaries(texts, st.integers() | texts, max_size=3),
)

# -- letters ------------------------------------------------------------------------

# Built from bytes rather than from the grammars' regexes: as valid, and much cheaper.
addresses = st.binary(min_size=6, max_size=6).map(lambda raw: "s-" + raw.hex())
nonces = st.binary(min_size=4, max_size=4).map(bytes.hex)
not_blank = st.text(min_size=1, max_size=120).filter(lambda body: body.strip() != "")
bodies = not_blank | with_escapes.filter(lambda body: body.strip() != "")
sender_names = st.text(min_size=1, max_size=30) | with_escapes.filter(bool)
sender_cwds = st.none() | st.text(max_size=40)
sent_ats = st.integers(0, 10**13 - 1)
reply_tos = st.none() | addresses


@st.composite
def messages(draw: st.DrawFn) -> Message:
    name, cwd = draw(sender_names), draw(sender_cwds)
    if draw(st.booleans()):
        sender = Sender("session", name, address=draw(addresses), cwd=cwd)
    else:
        sender = Sender("process", name, cwd=cwd)
    return new_message(
        sender,
        draw(bodies),
        draw(sent_ats),
        reply_to=draw(reply_tos),
        nonce=draw(nonces),
    )


valid_letters = st.sampled_from(REFERENCE_LETTERS) | messages().map(encode)

MESSAGE_FIELDS = (
    "v",
    "id",
    "from",
    "from.kind",
    "from.name",
    "from.address",
    "from.cwd",
    "replyTo",
    "sentAt",
    "body",
    "stranger",
    "from.stranger",
)


def _dumps(data: Any, ensure_ascii: bool) -> bytes:
    """JSON as a careless writer makes it: NaN allowed, lone surrogates kept."""
    text = json.dumps(data, ensure_ascii=ensure_ascii, allow_nan=True)
    return text.encode("utf-8", "surrogatepass")


AFFIXES = ("\n", "\r\n", "\x00", " ", "/", "/../../x", "/..", ".json", "\u200b", "\x1b[0m")
PATH_BEARING = ("id", "replyTo", "from.address", "address")


@st.composite
def near_misses(draw: st.DrawFn, valid: str) -> str:
    """A well-formed address or id, bent just out of its grammar: what a loose check
    (a prefix match, a "$" that allows a newline, Unicode digits) would let through."""
    how = draw(st.sampled_from(["suffix", "prefix", "upper", "shorter", "longer", "digit"]))
    if how == "suffix":
        return valid + draw(st.sampled_from(AFFIXES))
    if how == "prefix":
        return draw(st.sampled_from(["../../", "./", "/", " ", "\n", "x"])) + valid
    if how == "upper":
        return valid.upper() if valid.upper() != valid else "S" + valid[1:]
    if how == "shorter":
        return valid[:-1]
    if how == "longer":
        return valid + "0"
    return re.sub("[0-9]", "\u0661", valid, count=1) if re.search("[0-9]", valid) else valid + "1"


@st.composite
def mutated(draw: st.DrawFn, letters: st.SearchStrategy[bytes], fields: tuple[str, ...]) -> bytes:
    """A valid letter or record with one field replaced by a hostile value, or removed.
    A path-bearing field is as often bent just out of its grammar."""
    data = json.loads(draw(letters))
    field_path = draw(st.sampled_from(fields))
    *outer, key = field_path.split(".")
    target = data
    for part in outer:
        target = target[part]
    if draw(st.integers(0, 9)) == 0:
        target.pop(key, None)
    elif field_path in PATH_BEARING and draw(st.booleans()):
        current = target.get(key)
        target[key] = draw(near_misses(current if isinstance(current, str) else draw(addresses)))
    else:
        target[key] = draw(hostile_values)
    return _dumps(data, ensure_ascii=draw(st.booleans()))


def _nest(depth: int, kind: str) -> str:
    if kind == "array":
        return "[" * depth + "1" + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


depths = st.sampled_from([2, 100, 999, 1000, 1001, 5000, 50_000, 100_000, 130_000]) | st.integers(
    1, 140_000
)


@dataclass(frozen=True)
class Spliced:
    raw: bytes
    original: bytes
    how: str
    must_reject: bool
    """True where DESIGN.md rules the text out: duplicate keys, NaN, a number that
    is not an integer, stray text, a byte-order mark."""


@st.composite
def spliced(draw: st.DrawFn, letters: st.SearchStrategy[bytes]) -> Spliced:
    """Damage only the text can carry: duplicate keys, NaN and friends, numbers of
    thousands of digits, deep nesting, a byte-order mark, stray text around it; and,
    as a control, whitespace around it, which changes nothing."""
    original = draw(letters)
    text = json.dumps(json.loads(original), ensure_ascii=False, separators=(",", ":"))
    first_key = re.match(r'\{"(\w+)"', text)
    assert first_key is not None
    key = draw(st.sampled_from(["v", "body", "id", "sentAt", "from", "replyTo", first_key[1]]))
    number = draw(
        st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "1.0", "-0", "01", "9" * 5000])
    )
    how = draw(
        st.sampled_from(
            ["duplicate", "number", "nested", "bom", "trailing", "leading", "whitespace"]
        )
    )
    # A key spliced in first is a duplicate, or a field of the wrong type.
    must_reject = how != "whitespace"
    if how == "duplicate":
        spliced_text = text.replace(
            "{", f'{{"{first_key[1]}":{json.dumps(draw(hostile_values))},', 1
        )
    elif how == "number":
        spliced_text = re.sub(r'"(v|sentAt|startedAt|lastSeen|pid)":-?\d+', rf'"\1":{number}', text)
        must_reject = number != "-0"  # -0 is the integer 0
    elif how == "nested":
        nested = _nest(draw(depths), draw(st.sampled_from(["array", "object"])))
        spliced_text = text.replace("{", f'{{"{key}":{nested},', 1)
    elif how == "bom":
        spliced_text = "\ufeff" + text
    elif how == "trailing":
        spliced_text = text + draw(st.sampled_from(["x", "{}", "\x00", ",", "]"]))
    elif how == "leading":
        spliced_text = draw(st.sampled_from(["x", "[", "\x00", "//", "\x1b[2J"])) + text
    else:
        spliced_text = " \r\n\t" + text + "\n"
    return Spliced(spliced_text.encode("utf-8", "surrogatepass"), original, how, must_reject)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | texts,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
    max_leaves=12,
)


@st.composite
def flipped(draw: st.DrawFn, letters: st.SearchStrategy[bytes]) -> bytes:
    """A valid letter with a few bytes overwritten, inserted or removed."""
    raw = bytearray(draw(letters))
    for _ in range(draw(st.integers(1, 4))):
        where = draw(st.integers(0, len(raw) - 1))
        byte = draw(
            st.sampled_from([0x00, 0x22, 0x5C, 0x7B, 0x7D, 0x80, 0xC3, 0xFF]) | st.integers(0, 255)
        )
        action = draw(st.sampled_from(["set", "insert", "delete"]))
        if action == "set":
            raw[where] = byte
        elif action == "insert":
            raw.insert(where, byte)
        else:
            del raw[where]
    return bytes(raw)


arbitrary_bytes = st.one_of(
    st.binary(max_size=600),
    json_values.map(lambda value: _dumps(value, ensure_ascii=False)),
    st.sampled_from([b"", b"{}", b"[]", b"null", b"\xef\xbb\xbf{}", b"\x00" * 64]),
)

file_names = st.none() | st.sampled_from(["../../x.json", "x.json", ".json", "\x1b[2J.json"])

# -- session.parse -------------------------------------------------------------------

session_ids = st.text(min_size=1, max_size=40) | st.uuids().map(str)
record_cwds = st.text(min_size=1, max_size=40)
record_times = st.integers(0, NOW)
pids = st.none() | st.integers(1, 2**22)


@st.composite
def records(draw: st.DrawFn) -> Record:
    session_id = draw(session_ids)
    return Record(
        address=address_of(session_id),
        session_id=session_id,
        name=draw(sender_names),
        cwd=draw(record_cwds),
        started_at=draw(record_times),
        last_seen=draw(record_times),
        pid=draw(pids),
        pid_start=None,
    )


valid_record_bytes = st.sampled_from(
    [json.dumps(record).encode() for record in REFERENCE_RECORDS]
) | records().map(session.encode)
RECORD_FIELDS = (
    "v",
    "address",
    "sessionId",
    "name",
    "cwd",
    "pid",
    "pidStart",
    "startedAt",
    "lastSeen",
    "stranger",
)


hostile_records = st.one_of(
    arbitrary_bytes,
    flipped(valid_record_bytes),
    mutated(valid_record_bytes, RECORD_FIELDS),
    spliced(valid_record_bytes).map(lambda case: case.raw),
    valid_record_bytes.map(lambda raw: raw[: len(raw) // 2]),
    valid_record_bytes,
)


# -- a hostile tree on disk -------------------------------------------------------------


@contextlib.contextmanager
def scratch_tree() -> Iterator[Path]:
    """A private folder per example (a fixture's tmp_path would be shared by all),
    in memory where there is one: records and letters are flushed as they are written."""
    base = Path(os.path.realpath(tempfile.mkdtemp(prefix="pipost-hostile-", dir=SCRATCH)))
    try:
        yield base
    finally:
        shutil.rmtree(base)


def tree_state(base: Path) -> dict[str, tuple[int, int, int, str]]:
    """Every path under ``base``: mode, size, mtime, and a link's target or the hash
    of a file's first MiB (a sparse GiB is never read whole); symlinks are not
    followed and FIFOs not opened."""
    state = {}
    for folder, folder_names, file_names in os.walk(base):
        for name in ["", *folder_names, *file_names]:
            path = os.path.join(folder, name) if name else folder
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                content = os.readlink(path)
            elif stat.S_ISREG(info.st_mode):
                with open(path, "rb") as opened:
                    content = hashlib.sha256(opened.read(1 << 20)).hexdigest()
            else:
                content = ""
            state[path] = (info.st_mode, info.st_size, info.st_mtime_ns, content)
    return state


def write_file(path: Path, data: bytes, *, size: int | None = None) -> None:
    """A 0600 file; ``size`` beyond the data makes the rest a hole (a sparse file)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        if size is not None:
            os.ftruncate(fd, size)
    finally:
        os.close(fd)


def plant_hazard(path: Path, kind: str, payload: bytes, outside: Path) -> None:
    """Lay something that is not what a reader expects at ``path``."""
    if kind == "symlink":
        target = outside / (path.name + ".target")
        write_file(target, payload)
        os.symlink(target, path)
    elif kind == "dangling symlink":
        os.symlink(outside / "nowhere" / path.name, path)
    elif kind == "symlink to a folder":
        os.symlink(outside, path)
    elif kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "folder":
        os.mkdir(path, 0o700)
        write_file(path / "inside.json", payload)
    elif kind == "sparse 1 GiB":
        write_file(path, payload[:100], size=1 << 30)
    elif kind == "empty":
        write_file(path, b"")
    else:
        raise ValueError(f"no such hazard {kind!r}")


HAZARDS = (
    "symlink",
    "dangling symlink",
    "symlink to a folder",
    "fifo",
    "folder",
    "sparse 1 GiB",
    "empty",
)


@dataclass(frozen=True)
class RegistryEntry:
    kind: str
    record: Record
    other: Record
    """A second session: whose address a misfiled or mismatched record carries."""
    damage: bytes


REGISTRY_KINDS = (
    "valid",
    "valid",
    "garbage",
    "half-written",
    "address not of sessionId",
    "filed under another address",
    "dot file",
    "temporary",
    "oversize",
    *HAZARDS,
)


registry_entries = st.builds(
    RegistryEntry,
    kind=st.sampled_from(REGISTRY_KINDS),
    record=records(),
    other=records(),
    damage=st.binary(max_size=200),
).filter(lambda entry: entry.record.address != entry.other.address)


def lay_registry_entry(folder: Path, outside: Path, entry: RegistryEntry) -> bool:
    """Write one entry; True if it is a record a reader must list."""
    record, data = entry.record, session.encode(entry.record)
    name = record.address + ".json"
    if entry.kind == "valid":
        write_file(folder / name, data)
        return True
    if entry.kind == "garbage":
        # Not a record by construction: whatever the bytes, they are not UTF-8.
        write_file(folder / name, b"\xff" + entry.damage)
    elif entry.kind == "half-written":
        write_file(folder / name, data[: len(data) // 2])
    elif entry.kind == "address not of sessionId":
        lying = session.to_json(record) | {"address": entry.other.address}
        write_file(folder / (entry.other.address + ".json"), json.dumps(lying).encode())
    elif entry.kind == "filed under another address":
        write_file(folder / (entry.other.address + ".json"), data)
    elif entry.kind == "dot file":
        write_file(folder / ("." + name), data)
    elif entry.kind == "temporary":
        write_file(folder / (name + ".tmp"), data)
    elif entry.kind == "oversize":
        write_file(folder / name, data[:-1] + b" " * session.RECORD_READ_LIMIT + b"}")
    else:
        plant_hazard(folder / name, entry.kind, data, outside)
    return False


def file_name_of(entry: RegistryEntry) -> str:
    misplaced = ("address not of sessionId", "filed under another address")
    return (entry.other if entry.kind in misplaced else entry.record).address


def hostile_handles(entries: list[RegistryEntry]) -> st.SearchStrategy[str]:
    """What a user might type: every name, id, prefix, address and cwd the tree
    mentions (good or bad), and hostile text."""
    mentioned: list[str] = []
    for entry in entries:
        for record in (entry.record, entry.other):
            mentioned += [
                record.name,
                record.session_id,
                record.session_id[:8],
                record.address,
                record.cwd,
                os.path.basename(record.cwd),
            ]
    known = [handle for handle in mentioned if handle]
    return st.sampled_from(known) | hostile_strings.filter(lambda handle: len(handle) < 4096)


RECEIVER = "hostile-inbox-receiver"
RECEIVER_ADDRESS = address_of(RECEIVER)

BAD_LETTERS = (
    "garbage",
    "truncated",
    "under another id",
    "replyTo ../../x",
    "from.address ../../x",
    "wrong type",
    "duplicate key",
    "NaN sentAt",
    "deeply nested",
    "oversize",
    *HAZARDS,
)
IGNORED = ("dot file", "in flight")
"""Not letters at all (SPEC 1): a reader never touches them."""


@dataclass(frozen=True)
class InboxEntry:
    kind: str
    message: Message
    damage: bytes
    name: str


# File names are bytes: os.fsdecode gives the undecodable ones as lone surrogates.
NOT_UTF8_STEM = os.fsdecode(b"\xff\xfe\x1b[2J")
bad_names = (
    st.one_of(
        st.builds(lambda at, nonce: f"{at:013d}-{nonce}", sent_ats, nonces),
        st.sampled_from(["x", "y", "\x1b[2J", "é", "s-0123456789ab", " ", "a\nb", NOT_UTF8_STEM]),
        st.text(
            st.characters(blacklist_categories=["Cs"], blacklist_characters="/\x00"),
            min_size=1,
            max_size=12,
        ),
    )
    .map(lambda stem: stem + ".json")
    .filter(lambda name: not name.startswith("."))
)
"""Dot files are not letters at all; the kind "dot file" lays those."""

inbox_entries = st.builds(
    InboxEntry,
    kind=st.sampled_from(("good",) * 4 + BAD_LETTERS + IGNORED),
    message=messages(),
    damage=st.binary(max_size=200),
    name=bad_names,
)


def bad_letter_bytes(entry: InboxEntry) -> bytes:
    """Bytes that are not a message filed under ``entry.name``, by construction."""
    letter = json.loads(encode(entry.message))
    whole = encode(entry.message)
    if entry.kind == "garbage":
        return b"\xff" + entry.damage
    if entry.kind == "truncated":
        return whole[: len(entry.damage) % len(whole)]
    if entry.kind == "under another id":
        return whole  # filed under a name that is not its id (the names differ, see below)
    if entry.kind == "replyTo ../../x":
        return json.dumps(letter | {"replyTo": "../../x"}).encode()
    if entry.kind == "from.address ../../x":
        sender = letter["from"] | {"kind": "session", "address": "../../x"}
        return json.dumps(letter | {"from": sender}).encode()
    if entry.kind == "wrong type":
        return json.dumps(letter | {"sentAt": str(letter["sentAt"])}).encode()
    if entry.kind == "duplicate key":
        return b'{"body":"first",' + whole[1:]
    if entry.kind == "NaN sentAt":
        return re.sub(rb'"sentAt":\d+', b'"sentAt":NaN', whole)
    if entry.kind == "deeply nested":
        return whole[:-1] + b',"deep":' + _nest(100_000, "array").encode() + b"}"
    assert entry.kind == "oversize"
    return whole[:-1] + b" " * LETTER_READ_LIMIT + b"}"


@dataclass
class HostileInbox:
    good: dict[str, Message]
    """name -> the message it holds, which must be delivered once."""
    bad: set[str]
    """Names that must be set aside."""
    untouched: dict[str, bytes]
    """Names a reader must leave alone, with their bytes."""
    link_targets: dict[Path, bytes]


def lay_inbox(inbox: Path, outside: Path, entries: list[InboxEntry]) -> HostileInbox:
    laid = HostileInbox({}, set(), {}, {})
    used: set[str] = set()
    for number, entry in enumerate(entries):
        message = entry.message
        if entry.kind == "good":
            # A sender of its own for each, so the loop guard has nothing to drop.
            message = new_message(
                Sender("process", f"sender-{number}"),
                message.body,
                message.sent_at,
                reply_to=message.reply_to,
                nonce=message.id[-8:],
            )
        name = {
            "good": message.file_name,
            "dot file": "." + message.file_name,
            "in flight": message.file_name + ".tmp",
        }.get(entry.kind, entry.name)
        if entry.kind == "under another id" and name == message.file_name:
            name = "x" + name
        if name in used:
            continue
        used.add(name)
        path = inbox / name
        if entry.kind == "good":
            write_file(path, encode(message))
            laid.good[name] = message
        elif entry.kind in IGNORED:
            write_file(path, encode(message))
            laid.untouched[name] = encode(message)
        elif entry.kind in HAZARDS:
            plant_hazard(path, entry.kind, encode(message), outside)
            laid.bad.add(name)
        else:
            write_file(path, bad_letter_bytes(entry))
            laid.bad.add(name)
    for target in outside.iterdir():
        laid.link_targets[target] = target.read_bytes()
    return laid


def is_letter_name(name: str) -> bool:
    """``*.json`` as a shell glob sees it (dot files are not matched)."""
    return name.endswith(".json") and not name.startswith(".")
