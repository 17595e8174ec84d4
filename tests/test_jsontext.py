"""jsontext: the same JSON text as the json module, without importing it; and, where
there is no _json accelerator (PyPy), the same text through json itself. Each test
of the text runs on both: the second is a copy of jsontext loaded without _json,
with json's pure-Python scanner and encoder beneath it."""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
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


def without_accelerator() -> ModuleType:
    """A copy of jsontext as it loads where there is no _json: json's modules are
    loaded afresh for it with _json out of reach, so they are their pure-Python
    selves. The json and _json this process already had are put back after. The copy
    has jsontext's own name (it is not put in sys.modules), so that a tool that tells
    code by its module's name, as mutmut picks the mutant to run, takes it for
    jsontext."""
    saved = {
        name: module
        for name, module in sys.modules.items()
        if name in ("_json", "json") or name.startswith("json.")
    }
    for name in saved:
        del sys.modules[name]
    sys.modules["_json"] = None  # type: ignore[assignment]  # an import of it fails
    try:
        spec = importlib.util.spec_from_file_location(jsontext.__name__, jsontext.__file__)
        assert spec is not None and spec.loader is not None
        copy = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(copy)
        return copy
    finally:
        for name in [n for n in sys.modules if n in ("_json", "json") or n.startswith("json.")]:
            del sys.modules[name]
        sys.modules.update(saved)


PURE_PYTHON = without_accelerator()
both = pytest.mark.parametrize(
    "implementation", [jsontext, PURE_PYTHON], ids=["_json", "json without _json"]
)


@pytest.fixture(autouse=True)
def scanners_built_afresh() -> None:
    """Each test builds the scanners it uses: one cached by an earlier test, or by
    the process this one was forked from (as mutmut forks), would hide how one is
    made."""
    for implementation in (jsontext, PURE_PYTHON):
        implementation._scanners.clear()


def test_without_the_accelerator_jsontext_runs_on_json_in_python() -> None:
    assert PURE_PYTHON._ACCELERATED is False
    assert inspect.isfunction(PURE_PYTHON.encode_basestring)
    assert inspect.ismethod(PURE_PYTHON._scanner(None, None))  # JSONDecoder.raw_decode
    assert PURE_PYTHON.decode('{"a":[1]}') == {"a": [1]}
    # This process's own jsontext still drives _json.
    assert jsontext._ACCELERATED is True
    assert not inspect.ismethod(jsontext._scanner(None, None))


def dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@both
@given(value=values)
@example(value=10**400)
@example(value='\x00\x1f\x7f\u2028\ud800"\\/')
def test_encode_writes_what_json_writes(implementation: ModuleType, value: object) -> None:
    assert implementation.encode(value) == dumps(value)


@both
def test_encode_writes_an_int_subclass_as_its_number(implementation: ModuleType) -> None:
    class Shown(int):
        def __repr__(self) -> str:
            return "Shown"

    assert implementation.encode([Shown(7)]) == dumps([Shown(7)]) == "[7]"


@both
@pytest.mark.parametrize("value", [1.5, (1, 2), {1: "one"}, {"a": object()}])
def test_encode_refuses_what_pipost_never_writes(implementation: ModuleType, value: object) -> None:
    with pytest.raises(TypeError):
        implementation.encode(value)


@both
def test_encode_refuses_a_value_json_refuses_in_json_s_words(implementation: ModuleType) -> None:
    for value in (object(), {"a": [object()]}):
        with pytest.raises(TypeError) as refused:
            dumps(value)
        with pytest.raises(TypeError, match=f"^{re.escape(str(refused.value))}$"):
            implementation.encode(value)


@both
@pytest.mark.parametrize("key", [1, None, ("a",)], ids=["int", "None", "tuple"])
def test_encode_refuses_a_key_that_is_not_a_string_naming_its_type(
    implementation: ModuleType, key: object
) -> None:
    # json writes int, None and the other scalars as keys; pipost's keys are names.
    with pytest.raises(TypeError, match=f"not {type(key).__name__}$"):
        implementation.encode({"a": 1, key: 2})


@both
def test_encode_fails_like_json_for_nesting_too_deep(implementation: ModuleType) -> None:
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(RecursionError):
        dumps(deep)
    with pytest.raises(RecursionError):
        implementation.encode(deep)


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


def assert_decodes_like_json(
    implementation: ModuleType, text: str, pairs_hook: PairsHook, constant_hook: ConstantHook
) -> None:
    expected = outcome(
        lambda: json.loads(text, object_pairs_hook=pairs_hook, parse_constant=constant_hook)
    )
    actual = outcome(
        lambda: implementation.decode(
            text, object_pairs_hook=pairs_hook, parse_constant=constant_hook
        )
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


@both
@given(text=jsonish, pairs_hook=pairs_hooks, constant_hook=constant_hooks)
@example(text='{"a":1,"a":2}', pairs_hook=list, constant_hook=None)
@example(text='{"a":1,"a":2}', pairs_hook=refuse_duplicates, constant_hook=None)
@example(text="[NaN,-Infinity]", pairs_hook=None, constant_hook=refuse_constant)
@example(text="\ufeff[]", pairs_hook=None, constant_hook=None)
@example(text=" \t\n\r[] \r\n\t", pairs_hook=None, constant_hook=None)
@example(text='["tab\tin a string"]', pairs_hook=None, constant_hook=None)
@example(text="\x0b[]", pairs_hook=None, constant_hook=None)
@example(text="[]\x0c", pairs_hook=None, constant_hook=None)
def test_decode_reads_or_refuses_any_text_as_json_does(
    implementation: ModuleType, text: str, pairs_hook: PairsHook, constant_hook: ConstantHook
) -> None:
    assert_decodes_like_json(implementation, text, pairs_hook, constant_hook)


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


@both
@given(json_values, layouts, spaces, spaces, pairs_hooks, constant_hooks)
def test_decode_reads_json_text_in_any_layout_as_json_does(
    implementation: ModuleType,
    value: object,
    layout: dict[str, Any],
    before: str,
    after: str,
    pairs_hook: PairsHook,
    constant_hook: ConstantHook,
) -> None:
    assert_decodes_like_json(
        implementation, before + json.dumps(value, **layout) + after, pairs_hook, constant_hook
    )


@both
@given(value=values)
def test_decode_reads_back_what_encode_writes(implementation: ModuleType, value: object) -> None:
    assert repr(implementation.decode(implementation.encode(value))) == repr(value)


@both
@given(value=values, before=st.text(" \t\n\r", max_size=3), after=st.text(" \t\n\r", max_size=3))
def test_decode_reads_json_text_by_its_scanner_alone(
    implementation: ModuleType, value: object, before: str, after: str
) -> None:
    """json itself is only asked to word what is wrong: a text that holds a value,
    spaces around it included, never reaches it (its import costs a send)."""

    def json_asked(*_: object) -> object:
        raise AssertionError("json itself read a text the scanner reads")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(implementation, "_decode_with_json", json_asked)
        assert repr(implementation.decode(before + dumps(value) + after)) == repr(value)


@both
@pytest.mark.parametrize("hooks", [(None, None), (list, None), (None, str), (list, str)])
def test_each_pair_of_hooks_has_its_scanner_built_once(
    implementation: ModuleType, hooks: tuple[PairsHook, ConstantHook]
) -> None:
    scanner = implementation._scanner(*hooks)
    assert implementation._scanner(*hooks) is scanner
    others = {(None, None), (list, None), (None, str), (list, str)} - {hooks}
    assert all(implementation._scanner(*other) is not scanner for other in others)


@both
@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a":' * 100_000])
def test_decode_fails_like_json_for_nesting_too_deep(implementation: ModuleType, text: str) -> None:
    with pytest.raises(RecursionError):
        json.loads(text)
    with pytest.raises(RecursionError):
        implementation.decode(text)


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
