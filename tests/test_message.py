"""Message schema v1: strict, total parsing and byte-exact encoding (SPEC 1.2; INV-09, INV-21)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pipost import message as message_module
from pipost import schemas
from pipost.message import (
    BODY_CAP,
    LETTER_READ_LIMIT,
    BodyError,
    Message,
    Rejected,
    Sender,
    check_body,
    encode,
    is_message_id,
    new_message,
    parse,
    to_json,
)
from pipost.refusals import BodyNotText, BodyTooLarge, EmptyBody
from pipost_conformance import INTEROP

INTEROP_MESSAGES = sorted((INTEROP / "messages").glob("*.json"))
VALIDATORS = {
    version: jsonschema.Draft202012Validator(schemas.load(f"message.v{version}"))
    for version in message_module.READABLE_VERSIONS
}
"""The schema of each version read: a letter is judged by the schema of its ``v``."""


def letter_name(path: Path) -> str:
    """Fixture files are named ``<address>--<id>.json``; the letter was ``<id>.json``."""
    return path.name.split("--", 1)[1]


# -- the reference's own files ------------------------------------------------------


# Written out here rather than taken from the module, so that a change of the
# module's check cannot silently change what the test expects.
WELL_FORMED_ID = re.compile(r"[0-9]{13}-[0-9a-f]{8}")


@st.composite
def id_like(draw: st.DrawFn) -> str:
    """A well-formed id with at most a few characters changed, added or taken away."""
    text = draw(st.from_regex(WELL_FORMED_ID, fullmatch=True))
    start = draw(st.integers(0, len(text)))
    end = start + draw(st.integers(0, 2))
    return text[:start] + draw(st.text(max_size=2)) + text[end:]


@given(id_like())
@example("1796078509367_deed10f1")
@example("1796078509367-deed10fg")
@example("1796078509367-DEED10F1")
@example("179607850936-deed10f1")
@example("1796078509367-Xeed10f1")  # the nonce's first character
@example("1796078509367-deed10f12")
@example("1796078509367-deed10f1\n")
@example("\u0661796078509367-deed10f1")  # an Arabic-Indic digit one
def test_is_message_id_agrees_with_the_regex(text: str) -> None:
    assert is_message_id(text) == (WELL_FORMED_ID.fullmatch(text) is not None)


def test_an_id_is_its_time_in_13_digits_and_the_nonce_given_or_8_random_hex() -> None:
    assert message_module.make_id(5, "0badcafe") == "0000000000005-0badcafe"
    sender = Sender("process", "cron")
    assert new_message(sender, "hi", 1796078534364, nonce="0badcafe").id == (
        "1796078534364-0badcafe"
    )
    drawn = {message_module.make_id(1796078534364) for _ in range(4)}
    assert len(drawn) == 4
    assert all(is_message_id(made) and made.startswith("1796078534364-") for made in drawn)


def test_a_restamped_copy_carries_its_new_time_in_id_and_sent_at_and_still_parses() -> None:
    """One copy per target, each under a fresh id of its own time (INV-07)."""
    checked = new_message(Sender("process", "cron"), "hi", 1796078534364, nonce="0badcafe")
    copy = message_module.restamped(checked, 1796078534999)
    assert copy.sent_at == 1796078534999
    assert copy.id.startswith("1796078534999-") and copy.id != checked.id
    assert (copy.sender, copy.body, copy.reply_to) == (checked.sender, checked.body, None)
    assert parse(encode(copy), copy.file_name) == copy


def test_there_are_interop_messages() -> None:
    assert len(INTEROP_MESSAGES) >= 8


@pytest.mark.parametrize("path", INTEROP_MESSAGES, ids=lambda path: path.name)
def test_interop_message_parses_and_reencodes_byte_identical(path: Path) -> None:
    raw = path.read_bytes()
    message = parse(raw, letter_name(path))
    assert isinstance(message, Message), message
    assert message.file_name == letter_name(path)
    assert encode(message) == raw


@pytest.mark.parametrize("path", INTEROP_MESSAGES, ids=lambda path: path.name)
def test_interop_message_is_refused_under_another_file_name(path: Path) -> None:
    raw = path.read_bytes()
    assert isinstance(parse(raw, "1796078509367-deed10f1.json"), Rejected)


# -- generated messages -------------------------------------------------------------

addresses = st.from_regex(r"s-[0-9a-f]{12}", fullmatch=True)
nonces = st.from_regex(r"[0-9a-f]{8}", fullmatch=True)
# 13 digits of milliseconds: up to the year 2286.
sent_ats = st.integers(min_value=0, max_value=10**13 - 1)

session_senders = st.builds(
    Sender,
    kind=st.just("session"),
    name=st.text(min_size=1),
    address=addresses,
    cwd=st.none() | st.text(),
)
process_senders = st.builds(
    Sender,
    kind=st.just("process"),
    name=st.text(min_size=1),
    address=st.none(),
    cwd=st.none() | st.text(),
)
senders = session_senders | process_senders


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8"))


def fill(unit: str, size: int) -> str:
    """``unit`` repeated to at most ``size`` bytes, cut at a character boundary."""
    text = unit * (size // utf8_size(unit) + 1)
    while utf8_size(text) > size:
        text = text[:-1]
    return text


near_cap_bodies = st.builds(
    fill,
    st.text(min_size=1, max_size=6),
    st.integers(min_value=BODY_CAP - 16, max_value=BODY_CAP),
)
bodies = (st.text(max_size=400) | near_cap_bodies).filter(lambda body: body.strip() != "")


@st.composite
def messages(draw: st.DrawFn) -> Message:
    return new_message(
        sender=draw(senders),
        body=draw(bodies),
        sent_at=draw(sent_ats),
        reply_to=draw(st.none() | addresses),
        nonce=draw(nonces),
    )


@given(messages())
def test_generated_messages_round_trip_and_validate(message: Message) -> None:
    raw = encode(message)
    assert parse(raw, message.file_name) == message
    assert message.v == message_module.VERSION
    VALIDATORS[message.v].validate(json.loads(raw))


# -- the body cap, in bytes ---------------------------------------------------------


def process_message(body: str) -> Message:
    return new_message(Sender("process", "process:gtm"), body, sent_at=1796078535934)


@pytest.mark.parametrize(
    "body",
    ["é" * (BODY_CAP // 2), "€" * (BODY_CAP // 3) + "é", "x" * BODY_CAP],
    ids=["2-byte", "3-byte", "ascii"],
)
def test_a_body_of_exactly_the_cap_in_bytes_is_accepted(body: str) -> None:
    assert utf8_size(body) == BODY_CAP
    message = process_message(body)
    assert parse(encode(message), message.file_name) == message


@pytest.mark.parametrize(
    "body",
    ["é" * (BODY_CAP // 2) + "x", "x" * (BODY_CAP + 1)],
    ids=["multibyte", "ascii"],
)
def test_a_body_one_byte_over_the_cap_is_refused_with_size_and_cap(body: str) -> None:
    assert utf8_size(body) == BODY_CAP + 1
    with pytest.raises(BodyError) as refusal:
        check_body(body)
    assert refusal.value.refusal == BodyTooLarge(BODY_CAP + 1, BODY_CAP)
    # Uncaught (a caller of the library that does not handle it), it still says why.
    assert str(refusal.value) == f"BodyTooLarge(size={BODY_CAP + 1}, cap={BODY_CAP})"
    with pytest.raises(BodyError):
        process_message(body)


def test_a_file_with_a_body_over_the_cap_is_rejected_though_it_has_few_characters() -> None:
    body = "é" * (BODY_CAP // 2 + 1)
    assert len(body) < BODY_CAP < utf8_size(body)
    data = to_json(process_message("x")) | {"body": body}
    assert isinstance(parse(json.dumps(data, ensure_ascii=False).encode()), Rejected)


@pytest.mark.parametrize("body", ["", " ", "   ", "\n", " \t\r\n "])
def test_an_empty_or_blank_body_is_refused(body: str) -> None:
    with pytest.raises(BodyError) as refusal:
        check_body(body)
    assert refusal.value.refusal == EmptyBody()


def test_a_body_with_unpaired_surrogates_is_refused() -> None:
    with pytest.raises(BodyError) as refusal:
        check_body("half a pair: \ud800")
    assert refusal.value.refusal == BodyNotText()


# -- parse is total -----------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)

VALID = to_json(
    new_message(
        Sender("session", "gtm-summoner", "s-52c78af935a3", "/home/dev/gtm"),
        "hello",
        sent_at=1796078509367,
        reply_to="s-52c78af935a3",
        nonce="deed10f1",
    )
)
SENDER_KEYS = ["kind", "name", "address", "cwd", "extra"]
MESSAGE_KEYS = ["v", "id", "from", "replyTo", "sentAt", "body", "extra"]


@st.composite
def mutated_messages(draw: st.DrawFn) -> dict[str, Any]:
    """A valid message with some fields replaced, removed or added: mostly invalid,
    now and then still valid, so both outcomes of parse are exercised."""
    data = copy.deepcopy(VALID)
    field_values = st.sampled_from(
        ["s-0123456789ab", "process", "session", "", "../../x", 1, 1.0, True, None]
    )
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        inner = draw(st.booleans())
        target = data["from"] if inner and isinstance(data.get("from"), dict) else data
        key = draw(st.sampled_from(SENDER_KEYS if target is not data else MESSAGE_KEYS))
        if draw(st.booleans()):
            target.pop(key, None)
        else:
            target[key] = draw(field_values | json_values)
    return data


@st.composite
def valid_variants(draw: st.DrawFn) -> dict[str, Any]:
    """VALID with its free parts changed: still a valid message."""
    data = copy.deepcopy(VALID)
    sender = data["from"]
    sender["name"] = draw(st.text(min_size=1))
    sender["cwd"] = draw(st.text())
    data["body"] = draw(st.text())
    for optional in draw(st.sets(st.sampled_from(["cwd", "replyTo", "address"]))):
        (data if optional == "replyTo" else sender).pop(optional)
    if "address" not in sender:
        sender["kind"] = "process"
    return data


# About half of these are valid, so properties about what parse accepts are exercised.
letters = mutated_messages() | valid_variants()


def as_bytes(value: object) -> bytes:
    return json.dumps(value).encode("utf-8")


@given(st.binary(max_size=512))
def test_parse_of_arbitrary_bytes_never_raises(raw: bytes) -> None:
    assert isinstance(parse(raw), Message | Rejected)


@given(json_values | letters)
def test_parse_of_arbitrary_json_never_raises(value: object) -> None:
    assert isinstance(parse(as_bytes(value)), Message | Rejected)


@given(letters | json_values)
def test_whatever_parse_accepts_the_schema_accepts(value: object) -> None:
    raw = as_bytes(value)
    parsed = parse(raw)
    if isinstance(parsed, Message):
        VALIDATORS[parsed.v].validate(json.loads(raw))


@given(letters)
def test_whatever_parse_accepts_reencodes_to_the_same_value(value: dict[str, Any]) -> None:
    message = parse(as_bytes(value))
    if isinstance(message, Message):
        assert json.loads(encode(message)) == value


@given(valid_variants())
def test_valid_variants_are_accepted(value: dict[str, Any]) -> None:
    # Keeps the two properties above from passing by rejecting everything.
    assert isinstance(parse(as_bytes(value)), Message)


# -- what parse rejects -------------------------------------------------------------


def with_fields(**changes: object) -> bytes:
    """VALID with top-level fields replaced (a value of ... removes the field)."""
    data = dict(VALID)
    for key, value in changes.items():
        if value is ...:
            data.pop(key)
        else:
            data[key] = value
    return as_bytes(data)


def with_sender(**changes: object) -> bytes:
    sender = dict(VALID["from"])
    for key, value in changes.items():
        if value is ...:
            sender.pop(key)
        else:
            sender[key] = value
    return with_fields(**{"from": sender})


LETTER = VALID["id"] + ".json"
VALID_BYTES = as_bytes(VALID)
DEEP = 100_000


def decoder_error(raw: bytes) -> str:
    """What json itself says of bytes it cannot decode: the tail of pipost's words."""
    with pytest.raises(json.JSONDecodeError) as error:
        json.loads(raw)
    return str(error.value)


NOT_ADDRESS = "from.address is not an address"
SURROGATES = "text holds unpaired surrogates"
TRUNCATED = VALID_BYTES[:-1]


def field(name: str, text: str) -> tuple[str, dict[str, object], str]:
    return ("bad_field", {"field": name}, text)


# The words name the versions read; the tests of reading every version pin them.
NOT_READ = message_module.unreadable_version(message_module.READABLE_VERSIONS)
CURRENT = message_module.VERSION

REJECTIONS: list[tuple[str, bytes, tuple[str, dict[str, object], str]]] = [
    ("v after the current", with_fields(v=CURRENT + 1), field("v", NOT_READ)),
    ("v 0", with_fields(v=0), field("v", NOT_READ)),
    ("v true", with_fields(v=True), field("v", NOT_READ)),
    (
        "v float",
        VALID_BYTES.replace(f'"v": {CURRENT},'.encode(), f'"v": {CURRENT}.0,'.encode()),
        field("v", NOT_READ),
    ),
    ("v string", with_fields(v=str(CURRENT)), field("v", NOT_READ)),
    ("v missing", with_fields(v=...), field("v", NOT_READ)),
    ("id not a string", with_fields(id=1796078509367), field("id", "id is not a string")),
    (
        "id malformed",
        with_fields(id="1796078509367-DEED10F1"),
        field("id", "id is not <13 digits>-<8 hex>"),
    ),
    (
        "id short",
        with_fields(id="179607850936-deed10f1"),
        field("id", "id is not <13 digits>-<8 hex>"),
    ),
    (
        "id not sentAt",
        with_fields(id="1796078509368-deed10f1"),
        field("id", "id does not carry sentAt"),
    ),
    (
        "sentAt string",
        with_fields(sentAt="1796078509367"),
        field("sentAt", "sentAt is not an integer"),
    ),
    (
        "sentAt float",
        with_fields(sentAt=1796078509367.5),
        field("sentAt", "sentAt is not an integer"),
    ),
    ("sentAt true", with_fields(sentAt=True), field("sentAt", "sentAt is not an integer")),
    ("sentAt missing", with_fields(sentAt=...), field("sentAt", "sentAt is not an integer")),
    ("body number", with_fields(body=5), field("body", "body is not a string")),
    ("body null", with_fields(body=None), field("body", "body is not a string")),
    ("body missing", with_fields(body=...), field("body", "body is not a string")),
    (
        "body over the cap",
        with_fields(body="x" * (BODY_CAP + 1)),
        field("body", f"body is over {BODY_CAP} bytes"),
    ),
    ("from string", with_fields(**{"from": "gtm"}), field("from", "from is not an object")),
    ("from missing", with_fields(**{"from": ...}), field("from", "from is not an object")),
    (
        "kind robot",
        with_sender(kind="robot"),
        field("from.kind", "from.kind is neither session nor process"),
    ),
    (
        "kind missing",
        with_sender(kind=...),
        field("from.kind", "from.kind is neither session nor process"),
    ),
    ("name number", with_sender(name=7), field("from.name", "from.name is not a string")),
    ("name empty", with_sender(name=""), field("from.name", "from.name is empty")),
    ("address path", with_sender(address="../../x"), field("from.address", NOT_ADDRESS)),
    (
        "address number",
        with_sender(address=5),
        field("from.address", "from.address is not a string"),
    ),
    (
        "address null",
        with_sender(address=None),
        field("from.address", "from.address is not a string"),
    ),
    (
        "session without address",
        with_sender(address=...),
        field("from.address", "a session sender has no from.address"),
    ),
    (
        "process with address",
        with_sender(kind="process"),
        field("from.address", "a process sender has no inbox, so no from.address"),
    ),
    ("cwd number", with_sender(cwd=[]), field("from.cwd", "from.cwd is not a string")),
    ("cwd null", with_sender(cwd=None), field("from.cwd", "from.cwd is not a string")),
    (
        "unknown fields in from",
        with_sender(pid=1, os="linux"),
        field("from.os", "unknown fields in from ['os', 'pid']"),
    ),
    ("replyTo path", with_fields(replyTo="../../x"), field("replyTo", "replyTo is not an address")),
    (
        "replyTo upper",
        with_fields(replyTo="S-52C78AF935A3"),
        field("replyTo", "replyTo is not an address"),
    ),
    (
        "replyTo newline",
        with_fields(replyTo="s-52c78af935a3\n"),
        field("replyTo", "replyTo is not an address"),
    ),
    ("replyTo number", with_fields(replyTo=1), field("replyTo", "replyTo is not a string")),
    ("replyTo null", with_fields(replyTo=None), field("replyTo", "replyTo is not a string")),
    (
        "unknown fields",
        with_fields(priority="high", at=1),
        field("at", "unknown fields ['at', 'priority']"),
    ),
    (
        "duplicate keys",
        VALID_BYTES[:-1] + b', "body": "other"}',
        ("duplicate_key", {"key": "body"}, "not JSON: duplicate key 'body'"),
    ),
    (
        "NaN",
        VALID_BYTES.replace(b'"sentAt": 1796078509367', b'"sentAt": NaN'),
        ("not_json", {}, "not JSON: NaN is not JSON"),
    ),
    (
        "Infinity",
        VALID_BYTES.replace(b'"sentAt": 1796078509367', b'"sentAt": Infinity'),
        ("not_json", {}, "not JSON: Infinity is not JSON"),
    ),
    ("deep array", b"[" * DEEP + b"]" * DEEP, ("too_deep", {}, "JSON nested too deeply")),
    (
        "deep field",
        VALID_BYTES[:-1] + b', "x": ' + b"[" * DEEP + b"]" * DEEP + b"}",
        ("too_deep", {}, "JSON nested too deeply"),
    ),
    (
        "non-UTF-8",
        VALID_BYTES.replace(b'"hello"', b'"hel\xfflo"'),
        ("not_utf8", {}, "not UTF-8"),
    ),
    ("surrogate body", VALID_BYTES.replace(b'"hello"', b'"\\ud800"'), field("body", SURROGATES)),
    ("surrogate name", with_sender(name="\ud83d"), field("from.name", SURROGATES)),
    ("surrogate cwd", with_sender(cwd="\udfff"), field("from.cwd", SURROGATES)),
    (
        "oversize",
        VALID_BYTES + b" " * (LETTER_READ_LIMIT + 1 - len(VALID_BYTES)),
        (
            "oversize",
            {"limit": LETTER_READ_LIMIT},
            f"file is larger than {LETTER_READ_LIMIT} bytes",
        ),
    ),
    ("truncated", TRUNCATED, ("not_json", {}, "not JSON: " + decoder_error(TRUNCATED))),
    ("empty file", b"", ("not_json", {}, "not JSON: " + decoder_error(b""))),
    ("array", b"[]", ("not_object", {}, "not a JSON object")),
    ("null", b"null", ("not_object", {}, "not a JSON object")),
]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(raw, expected) for _, raw, expected in REJECTIONS],
    ids=[label for label, _, _ in REJECTIONS],
)
def test_parse_rejects(raw: bytes, expected: tuple[str, dict[str, object], str]) -> None:
    """The code and facts are what the driver carries (SPEC 10); the words are
    pipost's own, kept beside the letter in the quarantine and shown by peek."""
    outcome = parse(raw, LETTER)
    assert isinstance(outcome, Rejected)
    assert (outcome.code, outcome.facts, outcome.reason) == expected


def test_the_rejection_table_starts_from_a_valid_message() -> None:
    # Each rejection above is one change away from this; it must itself be accepted.
    assert isinstance(parse(VALID_BYTES, LETTER), Message)


def test_id_must_equal_the_file_name() -> None:
    outcome = parse(VALID_BYTES, "1796078509367-deed10f2.json")
    assert outcome == Rejected("id_mismatch", "id does not match the file name")


def test_a_letter_of_exactly_the_read_limit_is_read() -> None:
    padded = VALID_BYTES + b" " * (LETTER_READ_LIMIT - len(VALID_BYTES))
    assert len(padded) == LETTER_READ_LIMIT
    assert isinstance(parse(padded, LETTER), Message)


def test_the_read_limit_holds_the_largest_valid_letter() -> None:
    # Every byte of body spelled as a six-character escape, and long names.
    message = new_message(
        Sender("session", "n" * 1000, "s-52c78af935a3", "/" + "c" * 4000),
        "\x01" * BODY_CAP,
        sent_at=1796078509367,
        reply_to="s-52c78af935a3",
    )
    raw = json.dumps(to_json(message)).encode("utf-8")
    assert len(raw) <= LETTER_READ_LIMIT
    assert parse(raw, message.file_name) == message


def test_new_message_refuses_what_parse_would_reject() -> None:
    with pytest.raises(ValueError, match="replyTo"):
        new_message(Sender("process", "p"), "hi", sent_at=1, reply_to="../../x")
    with pytest.raises(ValueError, match="process sender"):
        new_message(Sender("process", "p", address="s-52c78af935a3"), "hi", sent_at=1)


# -- reading every version ----------------------------------------------------------


@pytest.fixture
def bumped(monkeypatch: pytest.MonkeyPatch) -> None:
    """The message version bumped to 2, as a later pipost would have it."""
    monkeypatch.setattr(message_module, "VERSION", 2)
    monkeypatch.setattr(message_module, "READABLE_VERSIONS", (1, 2))


@pytest.mark.usefixtures("bumped")
@pytest.mark.parametrize("path", INTEROP_MESSAGES, ids=lambda path: path.name)
def test_after_a_bump_the_reference_letters_still_parse_and_keep_v1(path: Path) -> None:
    raw = path.read_bytes()
    message = parse(raw, letter_name(path))
    assert isinstance(message, Message), message
    assert message.v == 1
    assert encode(message) == raw


@pytest.mark.usefixtures("bumped")
def test_after_a_bump_a_new_message_is_written_as_the_new_version() -> None:
    message = process_message("hello")
    assert message.v == 2
    assert json.loads(encode(message))["v"] == 2
    assert parse(encode(message), message.file_name) == message


@pytest.mark.usefixtures("bumped")
@pytest.mark.parametrize("v", [0, 3, True, "2"])
def test_after_a_bump_a_version_not_read_is_refused_naming_the_readable_ones(v: object) -> None:
    outcome = parse(with_fields(v=v), LETTER)
    assert outcome == Rejected("bad_field", "v is not one of 1, 2", field="v")


def test_a_version_not_read_is_refused_naming_the_one_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(message_module, "VERSION", 1)
    monkeypatch.setattr(message_module, "READABLE_VERSIONS", (1,))
    assert parse(with_fields(v=2), LETTER) == Rejected("bad_field", "v is not 1", field="v")


@pytest.mark.usefixtures("bumped")
def test_each_letter_is_judged_by_the_rules_of_its_own_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A v2 that narrowed the cap still reads a v1 letter under v1's cap, and the row
    of v1 serves every later version that changed nothing."""
    narrowed = message_module.RULES[1].replace(body_cap=100)
    monkeypatch.setitem(message_module.RULES, 2, narrowed)
    long_body = with_fields(v=1, body="x" * 101)
    assert isinstance(parse(long_body, LETTER), Message)
    v2_letter = with_fields(v=2, body="x" * 101)
    assert parse(v2_letter, LETTER) == Rejected("bad_field", "body is over 100 bytes", field="body")
    assert message_module.rules_of(3) is narrowed
    assert message_module.rules_of(1) is message_module.RULES[1]
