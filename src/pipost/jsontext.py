"""The JSON text of letters and records, without the import cost of ``json``.

``json`` imports ``re`` (for its decoder and its number scanner), which costs a
hook-run ``send`` more than the send itself. The C accelerator ``_json`` that
``json`` is built on needs no ``re``: this module drives it directly. Where there
is no ``_json`` (PyPy), it uses ``json`` itself, and pays for ``re``.

:func:`encode` writes what ``json.dumps(value, ensure_ascii=False,
separators=(",", ":"))`` writes, for the values pipost writes (dicts with string
keys, lists, strings, ints, booleans and None). :func:`decode` reads what
``json.loads`` reads, with the same hooks, and fails where it fails.
"""

from __future__ import annotations

try:
    from _json import encode_basestring, make_scanner

    _ACCELERATED = True
except ImportError:  # no C accelerator: json's own scanner and encoder, in Python
    from json.encoder import encode_basestring

    _ACCELERATED = False

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    PairsHook = Callable[[list[tuple[str, Any]]], Any]
    ConstantHook = Callable[[str], Any]

# What JSON counts as whitespace; str.strip() would take more (e.g. "\x0b").
_SPACE = " \t\n\r"
_CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def encode(value: object) -> str:
    parts: list[str] = []
    _encode(value, parts.append)
    return "".join(parts)


def _encode(value: object, out: Callable[[str], None]) -> None:
    if isinstance(value, str):
        out(encode_basestring(value))
    elif value is None:
        out("null")
    elif value is True:
        out("true")
    elif value is False:
        out("false")
    elif isinstance(value, int):
        # int's own repr, as json writes it, even for a subclass with another repr.
        out(int.__repr__(value))
    elif isinstance(value, dict):
        out("{")
        for index, (key, item) in enumerate(value.items()):
            if not isinstance(key, str):
                raise TypeError(f"keys must be str, not {type(key).__name__}")
            out("," if index else "")
            out(encode_basestring(key))
            out(":")
            _encode(item, out)
        out("}")
    elif isinstance(value, list):
        out("[")
        for index, item in enumerate(value):
            out("," if index else "")
            _encode(item, out)
        out("]")
    else:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


class _Context:
    """The settings ``_json``'s scanner reads, as ``json.JSONDecoder`` holds them."""

    strict = True
    object_hook = None
    parse_float = float
    parse_int = int

    def __init__(
        self, object_pairs_hook: PairsHook | None, parse_constant: ConstantHook | None
    ) -> None:
        self.object_pairs_hook = object_pairs_hook
        self.parse_constant = parse_constant or _CONSTANTS.__getitem__


def decode(
    text: str,
    *,
    object_pairs_hook: PairsHook | None = None,
    parse_constant: ConstantHook | None = None,
) -> Any:
    """``json.loads(text, object_pairs_hook=..., parse_constant=...)``.

    Raises RecursionError for nesting too deep, as ``json`` does, and otherwise
    ValueError: the hooks' own, or ``json.JSONDecodeError`` with its message."""
    scan = _scanner(object_pairs_hook, parse_constant)
    start = len(text) - len(text.lstrip(_SPACE))
    try:
        value, end = scan(text, start)
    except RecursionError:
        raise
    except (StopIteration, ValueError, SystemError):
        return _decode_with_json(text, object_pairs_hook, parse_constant)
    # The value ends in a non-space character, so only spaces follow it exactly
    # when stripping them leaves the text ``end`` long.
    if len(text.rstrip(_SPACE)) != end:
        return _decode_with_json(text, object_pairs_hook, parse_constant)
    return value


_scanners: dict[tuple[PairsHook | None, ConstantHook | None], Callable[[str, int], Any]] = {}
"""One scanner per pair of hooks, built once: building one costs as much as a
record's scan. ``json`` shares its default decoder the same way."""


def _scanner(
    object_pairs_hook: PairsHook | None, parse_constant: ConstantHook | None
) -> Callable[[str, int], Any]:
    key = (object_pairs_hook, parse_constant)
    scan = _scanners.get(key)
    if scan is None:
        if _ACCELERATED:
            # typeshed asks for a scanner, though _json reads only the attributes.
            context = _Context(object_pairs_hook, parse_constant)
            scan = make_scanner(context)  # type: ignore[arg-type]
        else:
            from json import JSONDecoder

            decoder = JSONDecoder(
                object_pairs_hook=object_pairs_hook, parse_constant=parse_constant
            )
            scan = decoder.raw_decode  # the scanner, its StopIteration said as a JSONDecodeError
        _scanners[key] = scan
    return scan


def _decode_with_json(
    text: str, object_pairs_hook: PairsHook | None, parse_constant: ConstantHook | None
) -> Any:
    """Let ``json`` itself find the error and word it.

    Bad text is rare, and ``_json`` cannot say what is wrong by itself: on Python
    3.11 it raises ``json.decoder.JSONDecodeError`` only when ``json.decoder`` is
    already imported, and a bare SystemError otherwise."""
    import json

    return json.loads(text, object_pairs_hook=object_pairs_hook, parse_constant=parse_constant)
