"""jsontext: the same JSON text as the json module, without importing it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import pipost
from pipost import jsontext

# Any code point, lone surrogates included: a str may hold them, and json passes
# them through unescaped when ensure_ascii is off.
any_text = st.text(st.characters(exclude_categories=()))
scalars = st.none() | st.booleans() | st.integers() | any_text
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=20,
)


def dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@given(values)
@example(10**400)
@example('\x00\x1f\x7f\u2028\ud800"\\/')
def test_encode_writes_what_json_writes(value: object) -> None:
    assert jsontext.encode(value) == dumps(value)


def test_encode_writes_an_int_subclass_as_its_number() -> None:
    class Shown(int):
        def __repr__(self) -> str:
            return "Shown"

    assert jsontext.encode([Shown(7)]) == dumps([Shown(7)]) == "[7]"


@pytest.mark.parametrize("value", [1.5, (1, 2), {1: "one"}, {"a": object()}])
def test_encode_refuses_what_pipost_never_writes(value: object) -> None:
    with pytest.raises(TypeError):
        jsontext.encode(value)


def test_encode_fails_like_json_for_nesting_too_deep() -> None:
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(RecursionError):
        dumps(deep)
    with pytest.raises(RecursionError):
        jsontext.encode(deep)


# -- decoding -----------------------------------------------------------------------


def refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len({key for key, _ in pairs}) != len(pairs):
        raise ValueError("duplicate key")
    return dict(pairs)


def refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


PairsHook = Callable[[list[tuple[str, Any]]], Any] | None
ConstantHook = Callable[[str], Any] | None
pairs_hooks: st.SearchStrategy[PairsHook] = st.sampled_from([None, list, refuse_duplicates])
constant_hooks: st.SearchStrategy[ConstantHook] = st.sampled_from([None, str, refuse_constant])


def outcome(decode: Callable[[], Any]) -> tuple[str, str]:
    """What a decode did, comparable across decoders: the repr tells 1 from 1.0
    and True, -0.0 from 0.0, and shows the order of keys."""
    try:
        return ("value", repr(decode()))
    except (ValueError, RecursionError) as error:
        return (type(error).__name__, str(error))


def assert_decodes_like_json(text: str, pairs_hook: PairsHook, constant_hook: ConstantHook) -> None:
    expected = outcome(
        lambda: json.loads(text, object_pairs_hook=pairs_hook, parse_constant=constant_hook)
    )
    actual = outcome(
        lambda: jsontext.decode(text, object_pairs_hook=pairs_hook, parse_constant=constant_hook)
    )
    assert actual == expected


PIECES = [
    *'{}[],:"\\/-+.eE0123456789u',
    *" \t\n\r",
    *"\x00\x0b\x0c\x1f\xa0\u2028\u3000\ufeff\ud800",
    "true",
    "false",
    "null",
    "NaN",
    "Infinity",
    "-Infinity",
    '"a"',
    "\\u00e9",
    "\\ud83d\\ude00",
    "1" * 5000,
]
jsonish = st.lists(st.sampled_from(PIECES) | any_text, max_size=24).map("".join)


@given(jsonish, pairs_hooks, constant_hooks)
@example('{"a":1,"a":2}', list, None)
@example('{"a":1,"a":2}', refuse_duplicates, None)
@example("[NaN,-Infinity]", None, refuse_constant)
@example("\ufeff[]", None, None)
@example(" \t\n\r[] \r\n\t", None, None)
@example('["tab\tin a string"]', None, None)
@example("\x0b[]", None, None)
@example("[]\x0c", None, None)
def test_decode_reads_or_refuses_any_text_as_json_does(
    text: str, pairs_hook: PairsHook, constant_hook: ConstantHook
) -> None:
    assert_decodes_like_json(text, pairs_hook, constant_hook)


spaces = st.text(" \t\n\r\x0b\x0c\xa0", max_size=4)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | any_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=20,
)
layouts = st.sampled_from(
    [
        {},
        {"separators": (",", ":")},
        {"ensure_ascii": False},
        {"indent": 2},
        {"indent": "\t", "ensure_ascii": False},
    ]
)


@given(json_values, layouts, spaces, spaces, pairs_hooks, constant_hooks)
def test_decode_reads_json_text_in_any_layout_as_json_does(
    value: object,
    layout: dict[str, Any],
    before: str,
    after: str,
    pairs_hook: PairsHook,
    constant_hook: ConstantHook,
) -> None:
    assert_decodes_like_json(
        before + json.dumps(value, **layout) + after, pairs_hook, constant_hook
    )


@given(values)
def test_decode_reads_back_what_encode_writes(value: object) -> None:
    assert repr(jsontext.decode(jsontext.encode(value))) == repr(value)


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a":' * 100_000])
def test_decode_fails_like_json_for_nesting_too_deep(text: str) -> None:
    with pytest.raises(RecursionError):
        json.loads(text)
    with pytest.raises(RecursionError):
        jsontext.decode(text)


# -- the import cost ----------------------------------------------------------------

HEAVY = {
    "re",
    "json",
    "dataclasses",
    "typing",
    "enum",
    "hashlib",
    "secrets",
    "inspect",
    "pathlib",
    "argparse",
}

LETTER = (
    '{"v":1,"id":"1796078534364-bb43be6c","from":{"kind":"process","name":"ci"},'
    '"sentAt":1796078534364,"body":"gate green"}'
)


def test_the_pure_modules_import_nothing_heavy_even_to_read_and_write_a_letter() -> None:
    # The send path runs from hooks on every tool call: each of these modules costs
    # milliseconds at start-up. -S keeps the environment's .pth files out of it.
    code = (
        "import sys\n"
        "import pipost.address, pipost.jsontext, pipost.message, pipost.value\n"
        f"letter = pipost.message.parse({LETTER!r}.encode())\n"
        "assert isinstance(letter, pipost.message.Message), letter\n"
        "assert pipost.message.encode(letter).decode() == " + repr(LETTER) + "\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    source_root = str(Path(pipost.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": source_root}
    loaded = subprocess.run(
        [sys.executable, "-S", "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert "pipost.message" in loaded
    assert HEAVY.isdisjoint(loaded), sorted(HEAVY.intersection(loaded))
