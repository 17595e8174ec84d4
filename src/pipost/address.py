"""Session addresses and the grammar of handles.

An address names a conversation: ``s-`` + the first 12 lowercase hex characters
of SHA-256 over ``"session" NUL sessionId``. It is a pure function of the session
id (INV-01), so every process and every restart derives the same one. Only
sessions have addresses; a directory path is a query that *resolves* to a
session (INV-02), never an address of its own.

Everything here is pure: no filesystem, no clock.
"""

from __future__ import annotations

import enum
import hashlib
import posixpath
import re

ADDRESS_PATTERN = r"^s-[0-9a-f]{12}$"
_ADDRESS_RE = re.compile(r"s-[0-9a-f]{12}")
# A session-id prefix starts with at least 8 hex characters, so that a short
# word that happens to be hex ("cafe", "bead") is never taken for an id.
_SESSION_ID_PREFIX_RE = re.compile(r"[0-9a-fA-F]{8}[0-9a-fA-F-]*")


def address_of(session_id: str) -> str:
    """The address of the conversation ``session_id`` (the wire contract, SPEC 1.1)."""
    digest = hashlib.sha256(b"session\0" + session_id.encode("utf-8")).hexdigest()
    return "s-" + digest[:12]


def is_address(text: str) -> bool:
    """True only for a well-formed address; safe to use as a path component."""
    return _ADDRESS_RE.fullmatch(text) is not None


def default_name(cwd: str, address: str) -> str:
    """Name of an unnamed session: basename of its cwd, ``-``, address characters 3–6."""
    base = posixpath.basename(cwd.rstrip("/")) or "root"
    return f"{base}-{address[2:6]}"


def resume_handle(session_id: str) -> str:
    """The short session handle pi accepts: the first three groups of the id."""
    return "-".join(session_id.split("-")[:3])


class HandleKind(enum.Enum):
    """What a target string is taken for first (SPEC 4). Only ADDRESS and PATH are
    final: the other kinds fall through to names when they match no session id."""

    ADDRESS = "address"
    PATH = "path"
    SESSION_ID_PREFIX = "session id prefix"
    NAME = "name"


def classify_handle(handle: str) -> HandleKind:
    if is_address(handle):
        return HandleKind.ADDRESS
    if handle in ("~", ".", "..") or handle.startswith("~/") or "/" in handle:
        return HandleKind.PATH
    if _SESSION_ID_PREFIX_RE.fullmatch(handle):
        return HandleKind.SESSION_ID_PREFIX
    return HandleKind.NAME


def expand_path(handle: str, cwd: str, home: str) -> str:
    """Absolute, normalised form of a path handle, before symlinks are followed.

    Following symlinks needs the filesystem; the caller does that on the result."""
    if handle == "~" or handle.startswith("~/"):
        handle = home + handle[1:]
    joined = posixpath.join(cwd, handle)
    return posixpath.normpath(joined)
