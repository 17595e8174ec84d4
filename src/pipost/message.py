"""The message: one message per file, ``<id>.json`` (SPEC 1.2).

The schema is a wire contract shared with pi-post 0.7; it changes only with a
bump of ``v``. pipost writes :data:`VERSION` and reads every version in
:data:`READABLE_VERSIONS`, each by its own rules (:data:`RULES`), so a bump never
strands the letters queued before it; a parsed letter keeps its ``v``. Parsing
is strict and total: :func:`parse` turns *any* bytes into either a
:class:`Message` or a :class:`Rejected` carrying the reason, and never raises.
Encoding matches what the reference writes byte for byte: compact JSON,
keys in the reference's order, non-ASCII text unescaped.
"""

from __future__ import annotations

import os

from pipost import jsontext
from pipost.address import is_address
from pipost.refusals import BodyNotText, BodyTooLarge, EmptyBody, Refusal
from pipost.value import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Final, Literal

    SenderKind = Literal["session", "process"]
    RejectionCode = Literal[
        "oversize",
        "not_utf8",
        "not_json",
        "too_deep",
        "duplicate_key",
        "not_object",
        "bad_field",
        "id_mismatch",
        "symlink",
        "not_a_file",
        "unreadable",
    ]

VERSION = 1
"""The version pipost writes (letters' ``v``): always the last of READABLE_VERSIONS."""
READABLE_VERSIONS = (1,)
"""The versions :func:`parse` accepts: every version published, as mail waits at any
age and a bump must not strand the letters queued before it."""


class Rules(Value):
    """What a letter of one version may carry, where versions differ."""

    __slots__ = ("fields", "sender_fields", "body_cap")
    fields: Final[frozenset[str]]
    sender_fields: Final[frozenset[str]]
    body_cap: Final[int]
    """Largest body, in bytes of UTF-8 (not characters)."""

    def __init__(
        self, fields: frozenset[str], sender_fields: frozenset[str], body_cap: int
    ) -> None:
        self.fields = fields
        self.sender_fields = sender_fields
        self.body_cap = body_cap


RULES = {
    1: Rules(
        fields=frozenset(("v", "id", "from", "replyTo", "sentAt", "body")),
        sender_fields=frozenset(("kind", "name", "address", "cwd")),
        body_cap=32768,
    ),
}
"""The rules that differ between versions, keyed by the version that brought them:
a letter is judged by the row of its ``v``, or, when its version changed none of
them, by the row of the latest version before it."""


def rules_of(version: int) -> Rules:
    """The rules a letter of ``version`` (a readable one) is judged by."""
    return RULES[max(since for since in RULES if since <= version)]


BODY_CAP = rules_of(VERSION).body_cap
"""Largest body pipost sends, in bytes of UTF-8 (not characters)."""

# A JSON string can spell one byte of body as six (``\\u0000``), and the envelope
# adds names and a cwd: no valid letter of any readable version is larger than this,
# so no reader ever needs to read past it (INV-09).
LETTER_READ_LIMIT = 6 * max(rules_of(v).body_cap for v in READABLE_VERSIONS) + 64 * 1024

# The grammar, for the schemas; is_message_id checks it by hand, as importing
# ``re`` would cost a hook-run ``send`` more than the send itself.
ID_PATTERN = r"^[0-9]{13}-[0-9a-f]{8}$"
_DIGITS = frozenset("0123456789")
_LOWER_HEX = frozenset("0123456789abcdef")
SUFFIX = ".json"


class Sender(Value):
    # In the order of the fields, which Value's repr and replace follow.
    __slots__ = ("kind", "name", "address", "cwd")
    kind: Final[SenderKind]
    name: Final[str]
    address: Final[str | None]
    cwd: Final[str | None]

    def __init__(
        self, kind: SenderKind, name: str, address: str | None = None, cwd: str | None = None
    ) -> None:
        self.kind = kind
        self.name = name
        self.address = address
        self.cwd = cwd

    @property
    def key(self) -> str:
        """Who this is for the loop guard: the address when it has one, else the name."""
        return self.address or self.name


class Message(Value):
    __slots__ = ("id", "sender", "sent_at", "body", "reply_to", "v")
    id: Final[str]
    sender: Final[Sender]
    sent_at: Final[int]
    body: Final[str]
    reply_to: Final[str | None]
    v: Final[int]
    """The letter's version: the one pipost writes, unless read from a letter."""

    def __init__(
        self,
        id: str,
        sender: Sender,
        sent_at: int,
        body: str,
        reply_to: str | None = None,
        v: int | None = None,
    ) -> None:
        self.id = id
        self.sender = sender
        self.sent_at = sent_at
        self.body = body
        self.reply_to = reply_to
        self.v = VERSION if v is None else v

    @property
    def file_name(self) -> str:
        return self.id + SUFFIX


class Rejected(Value):
    """Why bytes are not a message (or a record): ``code`` names the rule broken
    (SPEC 10: oversize, not_utf8, not_json, too_deep, duplicate_key, not_object,
    bad_field, id_mismatch; a mailbox adds symlink, not_a_file, unreadable), with its
    one fact as data (the ``limit`` of oversize, the ``key`` of duplicate_key, the
    ``field`` of bad_field, dotted for nested: ``from.kind``); ``reason`` says it in
    pipost's words, as the quarantine keeps it beside the letter. Never carries the
    body."""

    __slots__ = ("code", "reason", "limit", "key", "field")
    code: Final[RejectionCode]
    reason: Final[str]
    limit: Final[int | None]
    key: Final[str | None]
    field: Final[str | None]

    def __init__(
        self,
        code: RejectionCode,
        reason: str,
        *,
        limit: int | None = None,
        key: str | None = None,
        field: str | None = None,
    ) -> None:
        self.code = code
        self.reason = reason
        self.limit = limit
        self.key = key
        self.field = field

    @property
    def facts(self) -> dict[str, int | str]:
        """The facts beside the code, by name: the fields that are set."""
        found = {"limit": self.limit, "key": self.key, "field": self.field}
        return {name: value for name, value in found.items() if value is not None}


def bad_field(field: str, reason: str) -> Rejected:
    """A wrong value, a missing field or an unknown one: ``field`` names it."""
    return Rejected("bad_field", reason, field=field)


def unreadable_version(readable: tuple[int, ...]) -> str:
    """Why a ``v`` is refused, naming the versions that are read."""
    if len(readable) == 1:
        return f"v is not {readable[0]}"
    return f"v is not one of {', '.join(map(str, readable))}"


class EnvelopeError(ValueError):
    """An envelope the message rules refuse at the sender: ``field`` names the field
    (dotted: ``from.name``), the text is the parser's for a letter on disk."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(reason)
        self.field = field


class BodyError(ValueError):
    """A body refused at the sender (empty, not text, or over the cap): ``refusal``
    says which, with its size where that counts."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal)
        self.refusal = refusal


def is_message_id(text: str) -> bool:
    """True only for a well-formed id; safe to use as a path component."""
    return (
        len(text) == 22
        and _DIGITS.issuperset(text[:13])
        and text[13] == "-"
        and _LOWER_HEX.issuperset(text[14:])
    )


def make_id(sent_at: int, nonce: str | None = None) -> str:
    """``<sentAt zero-padded to 13 digits>-<8 lowercase hex>``: ids sort by time."""
    return f"{sent_at:013d}-{nonce if nonce is not None else os.urandom(4).hex()}"


def body_size(body: str) -> int:
    return len(body.encode("utf-8", errors="surrogatepass"))


def check_body(body: str) -> None:
    """Refuse what a sender must not send; a body over the cap with its size."""
    if not body.strip():
        raise BodyError(EmptyBody())
    try:
        size = len(body.encode("utf-8"))
    except UnicodeEncodeError:
        raise BodyError(BodyNotText()) from None
    if size > BODY_CAP:
        raise BodyError(BodyTooLarge(size, BODY_CAP))


def new_message(
    sender: Sender, body: str, sent_at: int, reply_to: str | None = None, nonce: str | None = None
) -> Message:
    """A fresh, valid message; raises BodyError or EnvelopeError for what parse
    would reject. The body is checked once, here (check_body), the envelope after it."""
    check_body(body)
    message = Message(
        id=make_id(sent_at, nonce), sender=sender, sent_at=sent_at, body=body, reply_to=reply_to
    )
    problem = _check_envelope(message)
    if problem is not None:
        assert problem.field is not None  # every rule of the envelope names its field
        raise EnvelopeError(problem.field, problem.reason)
    return message


def restamped(message: Message, sent_at: int) -> Message:
    """The same checked message under a fresh id of ``sent_at``: one copy per target,
    with nothing to check again."""
    return message.replace(id=make_id(sent_at), sent_at=sent_at)


def to_json(message: Message) -> dict[str, Any]:
    sender: dict[str, Any] = {"kind": message.sender.kind, "name": message.sender.name}
    if message.sender.address is not None:
        sender["address"] = message.sender.address
    if message.sender.cwd is not None:
        sender["cwd"] = message.sender.cwd
    data: dict[str, Any] = {"v": message.v, "id": message.id, "from": sender}
    if message.reply_to is not None:
        data["replyTo"] = message.reply_to
    data["sentAt"] = message.sent_at
    data["body"] = message.body
    return data


def encode(message: Message) -> bytes:
    return jsontext.encode(to_json(message)).encode("utf-8")


def parse(raw: bytes, file_name: str | None = None) -> Message | Rejected:
    """Strict, total parse. ``file_name``, when given, must be ``<id>.json``."""
    if len(raw) > LETTER_READ_LIMIT:
        return Rejected(
            "oversize", f"file is larger than {LETTER_READ_LIMIT} bytes", limit=LETTER_READ_LIMIT
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return Rejected("not_utf8", "not UTF-8")
    try:
        data = jsontext.decode(
            text, object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constant
        )
    except RecursionError:
        return Rejected("too_deep", "JSON nested too deeply")
    except _DuplicateKey as error:
        return Rejected("duplicate_key", f"not JSON: {error}", key=error.key)
    except ValueError as error:  # JSONDecodeError and _no_constant's refusal
        return Rejected("not_json", f"not JSON: {error}")
    message = _from_json(data)
    if isinstance(message, Rejected):
        return message
    if file_name is not None and file_name != message.file_name:
        return Rejected("id_mismatch", "id does not match the file name")
    return message


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key = key


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _from_json(data: object) -> Message | Rejected:
    if not isinstance(data, dict):
        return Rejected("not_object", "not a JSON object")
    readable = _is_int(data.get("v")) and data["v"] in READABLE_VERSIONS
    version: int = data["v"] if readable else VERSION
    # A letter of a version this reader does not read is judged by the rules of the
    # version it writes, so the checks keep their order whatever the v.
    rules = rules_of(version)
    unknown = set(data) - rules.fields
    if unknown:
        return bad_field(min(unknown), f"unknown fields {sorted(unknown)}")
    if not readable:
        return bad_field("v", unreadable_version(READABLE_VERSIONS))
    sender = data.get("from")
    if not isinstance(sender, dict):
        return bad_field("from", "from is not an object")
    unknown = set(sender) - rules.sender_fields
    if unknown:
        return bad_field("from." + min(unknown), f"unknown fields in from {sorted(unknown)}")
    kind, name = sender.get("kind"), sender.get("name")
    address, cwd = sender.get("address"), sender.get("cwd")
    if kind not in ("session", "process"):
        return bad_field("from.kind", "from.kind is neither session nor process")
    if not isinstance(name, str):
        return bad_field("from.name", "from.name is not a string")
    # An optional field is absent or a string; null is a bad type, not absence.
    if "address" in sender and not isinstance(address, str):
        return bad_field("from.address", "from.address is not a string")
    if "cwd" in sender and not isinstance(cwd, str):
        return bad_field("from.cwd", "from.cwd is not a string")
    for key in ("id", "body"):
        if not isinstance(data.get(key), str):
            return bad_field(key, f"{key} is not a string")
    if not _is_int(data.get("sentAt")):
        return bad_field("sentAt", "sentAt is not an integer")
    reply_to = data.get("replyTo")
    if "replyTo" in data and not isinstance(reply_to, str):
        return bad_field("replyTo", "replyTo is not a string")
    message = Message(
        id=data["id"],
        sender=Sender(kind=kind, name=name, address=address, cwd=cwd),
        sent_at=data["sentAt"],
        body=data["body"],
        reply_to=reply_to,
        v=version,
    )
    problem = _check(message)
    return message if problem is None else problem


def _check(message: Message) -> Rejected | None:
    """The rules beyond types, for the parser: the envelope's, then the body's."""
    problem = _check_envelope(message)
    if problem is not None:
        return problem
    cap = rules_of(message.v).body_cap
    if body_size(message.body) > cap:
        return bad_field("body", f"body is over {cap} bytes")
    if not _is_text(message.body):
        return bad_field("body", _SURROGATES)
    return None


_SURROGATES = "text holds unpaired surrogates"


def _is_text(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_envelope(message: Message) -> Rejected | None:
    """The rules of everything but the body; shared by the parser and the constructor."""
    sender = message.sender
    if not sender.name:
        return bad_field("from.name", "from.name is empty")
    if sender.address is not None and not is_address(sender.address):
        return bad_field("from.address", "from.address is not an address")
    if sender.kind == "session" and sender.address is None:
        return bad_field("from.address", "a session sender has no from.address")
    if sender.kind == "process" and sender.address is not None:
        return bad_field("from.address", "a process sender has no inbox, so no from.address")
    if message.reply_to is not None and not is_address(message.reply_to):
        return bad_field("replyTo", "replyTo is not an address")
    if not is_message_id(message.id):
        return bad_field("id", "id is not <13 digits>-<8 hex>")
    if message.sent_at < 0 or int(message.id[:13]) != message.sent_at:
        return bad_field("id", "id does not carry sentAt")
    if not _is_text(sender.name):
        return bad_field("from.name", _SURROGATES)
    if not _is_text(sender.cwd or ""):
        return bad_field("from.cwd", _SURROGATES)
    return None
