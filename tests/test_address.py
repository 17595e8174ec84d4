"""Addresses and the grammar of handles (SPEC 1.1, 4; INV-01, INV-02)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipost.address import (
    HandleKind,
    address_of,
    checked,
    classify_handle,
    default_name,
    expand_path,
    is_address,
    process_name,
    resume_handle,
)
from pipost_conformance import vectors

VECTORS = [
    {"sessionId": sent["sessionId"], "address": expected["address"]}
    for sent, expected in vectors("address").values()
]

# Written out here rather than taken from the module, so a change of the module's
# pattern cannot silently change what the test expects.
WELL_FORMED = re.compile(r"s-[0-9a-f]{12}")
SESSION_ID_PREFIX = re.compile(r"[0-9a-fA-F]{8}[0-9a-fA-F-]*")


# Each id given with its case (pytest.param), not as a list of ids beside the cases: pytest
# escapes the strings of such a list in place, so a second collection in one process
# (mutmut's) would escape them again and find no test of that name.
@pytest.mark.parametrize(
    "vector", [pytest.param(vector, id=repr(vector["sessionId"])) for vector in VECTORS]
)
def test_address_matches_the_reference_vectors(vector: dict[str, str]) -> None:
    assert address_of(vector["sessionId"]) == vector["address"]


def test_the_vectors_cover_more_than_one_case() -> None:
    # Guards the parametrised test above against an emptied fixture.
    assert len(VECTORS) >= 10


@given(st.text())
def test_address_is_a_well_formed_pure_function_of_the_session_id(session_id: str) -> None:
    first = address_of(session_id)
    assert address_of(session_id) == first
    assert WELL_FORMED.fullmatch(first)
    assert is_address(first)


@given(st.text(min_size=1), st.text(min_size=1))
def test_different_session_ids_get_different_addresses(one: str, other: str) -> None:
    # 48 bits of SHA-256: a collision among generated ids would be a bug, not luck.
    if one != other:
        assert address_of(one) != address_of(other)


address_like = st.one_of(
    st.from_regex(r"s-[0-9a-f]{12}", fullmatch=True),
    st.from_regex(r"[sS]-[0-9a-fA-F]{10,14}\n?", fullmatch=True),
    st.text(),
)


@given(address_like)
def test_is_address_agrees_with_the_regex(text: str) -> None:
    assert is_address(text) == (WELL_FORMED.fullmatch(text) is not None)


@pytest.mark.parametrize(
    "text",
    [
        "s-0123456789ab\n",  # "$" in a regex would let this through
        "\ns-0123456789ab",
        "s-0123456789AB",
        "S-0123456789ab",
        "s-0123456789a",
        "s-0123456789abc",
        "s-g123456789ab",  # the first of the twelve is checked too
        "../../x",
        "s-../../../etc",
        "",
    ],
)
def test_is_address_refuses_near_misses(text: str) -> None:
    assert not is_address(text)


@pytest.mark.parametrize(
    ("handle", "kind"),
    [
        ("s-52c78af935a3", HandleKind.ADDRESS),
        ("~", HandleKind.PATH),
        (".", HandleKind.PATH),
        ("..", HandleKind.PATH),
        ("~/work", HandleKind.PATH),
        ("./cache-fix", HandleKind.PATH),
        ("../cache-fix", HandleKind.PATH),
        ("/home/dev/gtm", HandleKind.PATH),
        ("dev/gtm", HandleKind.PATH),
        ("s-52c78af935a3/", HandleKind.PATH),
        ("019a3f30", HandleKind.SESSION_ID_PREFIX),
        ("019A3F30", HandleKind.SESSION_ID_PREFIX),
        ("019a3f30-1111", HandleKind.SESSION_ID_PREFIX),
        ("019a3f30-1111-7222-8333-444455556666", HandleKind.SESSION_ID_PREFIX),
        ("deadbeef", HandleKind.SESSION_ID_PREFIX),
        ("019a3f3", HandleKind.NAME),  # 7 hex characters: too short for a prefix
        ("cafe", HandleKind.NAME),
        ("019a3f3g", HandleKind.NAME),
        ("019a3f30g", HandleKind.NAME),  # eight hex characters, then neither hex nor a dash
        ("019a3f30-g", HandleKind.NAME),
        ("-019a3f30", HandleKind.NAME),
        ("gtm-summoner", HandleKind.NAME),
        ("cache-fix-d510", HandleKind.NAME),
        ("~dev", HandleKind.NAME),
        ("s-52c78af935a", HandleKind.NAME),
        ("S-52C78AF935A3", HandleKind.NAME),
    ],
)
def test_classify_handle(handle: str, kind: str) -> None:
    assert classify_handle(handle) == kind


prefix_like = st.one_of(
    st.from_regex(r"[0-9a-fA-F-]{6,12}[0-9a-gA-G/-]{0,6}", fullmatch=True),
    st.text(),
)


@given(prefix_like)
def test_a_session_id_prefix_is_what_the_regex_says(handle: str) -> None:
    # No such handle is an address or a path, so the regex alone decides the kind.
    is_prefix = classify_handle(handle) == HandleKind.SESSION_ID_PREFIX
    assert is_prefix == (SESSION_ID_PREFIX.fullmatch(handle) is not None)


def test_default_name_is_cwd_basename_and_address_characters_3_to_6() -> None:
    assert default_name("/home/dev/cache-fix", "s-d51010b8f7a1") == "cache-fix-d510"


@pytest.mark.parametrize(
    ("cwd", "name"),
    [("/", "root-d510"), ("//", "root-d510"), ("/srv/BOX", "BOX-d510"), ("/srv/X/", "X-d510")],
)
def test_default_name_of_the_root_is_root_and_only_slashes_are_trimmed(cwd: str, name: str) -> None:
    assert default_name(cwd, "s-d51010b8f7a1") == name


@pytest.mark.parametrize(
    ("cwd", "name"),
    [("/home/dev/gtm", "process:gtm"), ("/", "process:root"), ("/srv/BOX/", "process:BOX")],
)
def test_a_process_without_a_name_is_named_after_its_folder_as_a_session_is(
    cwd: str, name: str
) -> None:
    assert process_name(cwd) == name


def test_an_address_is_checked_before_it_names_a_file_and_a_refusal_shows_the_text() -> None:
    assert checked("s-d51010b8f7a1") == "s-d51010b8f7a1"
    with pytest.raises(ValueError) as refused:
        checked("s-../../etc")
    assert str(refused.value) == "not an address: 's-../../etc'"


def test_default_name_ignores_a_trailing_slash() -> None:
    assert default_name("/home/dev/cache-fix/", "s-d51010b8f7a1") == "cache-fix-d510"


@given(
    st.lists(st.text(alphabet="abcxyz-_. ", min_size=1), min_size=1),
    st.from_regex(r"s-[0-9a-f]{12}", fullmatch=True),
)
def test_default_name_ends_with_the_address_characters_3_to_6(
    parts: list[str], address: str
) -> None:
    cwd = "/" + "/".join(parts)
    assert default_name(cwd, address).endswith("-" + address[2:6])


@pytest.mark.parametrize(
    ("session_id", "handle"),
    [
        ("019a3f2e-7c41-7b3a-9d2e-5f1c8a4b6e01", "019a3f2e-7c41-7b3a"),
        ("019a3f30-1111-7222-8333-444455556666", "019a3f30-1111-7222"),
        ("019a3f2e-7c41", "019a3f2e-7c41"),
        ("abc", "abc"),
    ],
)
def test_resume_handle_is_the_first_three_groups(session_id: str, handle: str) -> None:
    assert resume_handle(session_id) == handle


@pytest.mark.parametrize(
    ("handle", "expanded"),
    [
        ("~", "/home/dev"),
        ("~/cache-fix", "/home/dev/cache-fix"),
        (".", "/home/dev/gtm"),
        ("..", "/home/dev"),
        ("../cache-fix/", "/home/dev/cache-fix"),
        ("/srv//x/./y/../z", "/srv/x/z"),
        ("sub/dir", "/home/dev/gtm/sub/dir"),
    ],
)
def test_expand_path(handle: str, expanded: str) -> None:
    assert expand_path(handle, cwd="/home/dev/gtm", home="/home/dev") == expanded
