"""Session addresses and the grammar of handles.

An address names a conversation: ``s-`` + the first 12 lowercase hex characters
of SHA-256 over ``"session" NUL sessionId``. It is a pure function of the session
id (INV-01), so every process and every restart derives the same one. Only
sessions have addresses; a directory path is a query that *resolves* to a
session (INV-02), never an address of its own.

Everything here is pure: no filesystem, no clock.
"""

from __future__ import annotations

import posixpath

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final, Literal

    Kind = Literal["address", "path", "session id prefix", "name"]

# The grammar, for the schemas; is_address checks it by hand, as importing ``re``
# would cost a hook-run ``send`` more than the send itself.
ADDRESS_PATTERN = r"^s-[0-9a-f]{12}$"
_LOWER_HEX = frozenset("0123456789abcdef")
_HEX = frozenset("0123456789abcdefABCDEF")
_HEX_OR_DASH = _HEX | {"-"}


def address_of(session_id: str) -> str:
    """The address of the conversation ``session_id`` (the wire contract, SPEC 1.1)."""
    import hashlib  # here, not at the top: sending to an address never hashes

    digest = hashlib.sha256(b"session\0" + session_id.encode("utf-8")).hexdigest()
    return "s-" + digest[:12]


def is_address(text: str) -> bool:
    """True only for a well-formed address; safe to use as a path component."""
    return len(text) == 14 and text.startswith("s-") and _LOWER_HEX.issuperset(text[2:])


def checked(text: str) -> str:
    """``text`` if it is an address, else ValueError: the one check an address passes
    before it names a file or a folder (INV-22)."""
    if not is_address(text):
        raise ValueError(f"not an address: {text!r}")
    return text


def default_name(cwd: str, address: str) -> str:
    """Name of an unnamed session: its folder's name, ``-``, address characters 3–6."""
    return f"{_folder_name(cwd)}-{address[2:6]}"


def process_name(cwd: str) -> str:
    """Name of a process that sends without one (no ``--from``): ``process:`` and the
    name of its working directory."""
    return f"process:{_folder_name(cwd)}"


def _folder_name(cwd: str) -> str:
    """The basename of ``cwd``, trailing slashes trimmed; the root's is ``root``."""
    return posixpath.basename(cwd.rstrip("/")) or "root"


def resume_handle(session_id: str) -> str:
    """The short session handle pi accepts: the first three groups of the id."""
    return "-".join(session_id.split("-")[:3])


class HandleKind:
    """What a target string is taken for first (SPEC 4). Only ADDRESS and PATH are
    final: the other kinds fall through to names when they match no session id.

    Plain strings rather than an ``enum``, whose import a hook-run ``send`` would pay."""

    ADDRESS: Final = "address"
    PATH: Final = "path"
    SESSION_ID_PREFIX: Final = "session id prefix"
    NAME: Final = "name"


def classify_handle(handle: str) -> Kind:
    if is_address(handle):
        return HandleKind.ADDRESS
    if handle in ("~", ".", "..") or handle.startswith("~/") or "/" in handle:
        return HandleKind.PATH
    if _is_session_id_prefix(handle):
        return HandleKind.SESSION_ID_PREFIX
    return HandleKind.NAME


def _is_session_id_prefix(handle: str) -> bool:
    # At least 8 leading hex characters, so that a short word that happens to be
    # hex ("cafe", "bead") is never taken for an id; then hex and dashes.
    return len(handle) >= 8 and _HEX.issuperset(handle[:8]) and _HEX_OR_DASH.issuperset(handle[8:])


def expand_path(handle: str, cwd: str, home: str) -> str:
    """Absolute, normalised form of a path handle, before symlinks are followed.

    Following symlinks needs the filesystem; the caller does that on the result."""
    if handle == "~" or handle.startswith("~/"):
        handle = home + handle[1:]
    joined = posixpath.join(cwd, handle)
    return posixpath.normpath(joined)
