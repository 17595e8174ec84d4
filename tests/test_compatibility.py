"""The rules that tell a compatible change from a breaking one, and the pins'
append-only bookkeeping (pure: contents are made up here, nothing is gathered)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipost.contract import compatibility
from pipost.contract.compatibility import (
    ADDED,
    BREAKING,
    CHANGED,
    COMPATIBLE,
    STRAY,
    UNCHANGED,
    UNPINNED,
    Content,
    FacetChange,
    Json,
    PartVerdict,
    PinRefused,
    Pins,
    Revision,
    Rule,
)

LETTER: Json = {"input": {"json": {"v": 1}}, "result": {"accepted": {"v": 1, "name": "n"}}}


def rules(part: str, before: Content, after: Content) -> list[tuple[str, bool]]:
    return [(f.rule, f.breaking) for f in compatibility.compare(part, before, after)]


@pytest.mark.parametrize(
    ("part", "before", "after", "expected"),
    [
        # A message is closed: any field it gains is refused by the readers of before.
        ("message", {}, {"field:subject": {"type": "string"}}, ("message.field-added", True)),
        ("message", {"field:body": {}}, {}, ("message.field-removed", True)),
        # A record is open: its readers ignore a field they do not know.
        ("record", {}, {"field:host": {"type": "string"}}, ("record.field-added", False)),
        ("record", {"field:host": {}}, {}, ("record.field-removed", True)),
        (
            "record",
            {"written": ["v", "a"]},
            {"written": ["v", "a", "host"]},
            ("record.field-written", False),
        ),
        (
            "record",
            {"written": ["v", "a"]},
            {"written": ["a", "v"]},
            ("record.written-changed", True),
        ),
        (
            "record",
            {"required": ["a"]},
            {"required": ["a", "b"]},
            ("schema.required-changed", True),
        ),
        (
            "message",
            {"limit:body_cap_bytes": 32768},
            {"limit:body_cap_bytes": 65536},
            ("limit.changed", True),
        ),
        (
            "interop",
            {"timing:live_window_ms": 45000},
            {"timing:live_window_ms": 60000},
            ("timing.changed", True),
        ),
        (
            "interop",
            {"lock:claim": ["flock LOCK_EX|LOCK_NB x"]},
            {"lock:claim": []},
            ("lock.changed", True),
        ),
        (
            "interop",
            {"lock:deposit": ["flock LOCK_EX x/", "flock LOCK_EX|LOCK_NB y"]},
            {"lock:deposit": ["flock LOCK_EX|LOCK_NB x/", "flock LOCK_EX|LOCK_NB y"]},
            ("lock.wait-bounded", False),
        ),
        (
            "address",
            {"derive:abc": {"result": "s-1"}},
            {"derive:abc": {"result": "s-2"}},
            ("address.derivation-changed", True),
        ),
        ("driver", {}, {"op:ping": {}}, ("driver.op-added", False)),
        ("driver", {"op:ping": {}}, {}, ("driver.op-removed", True)),
        ("documents", {}, {"def:new": {}}, ("documents.def-added", False)),
        ("message", {}, {"parse:new-case": LETTER}, ("corpus.entry-added", False)),
        ("message", {"parse:old-case": LETTER}, {}, ("corpus.entry-removed", True)),
        ("tree", {"mode:file": "0600"}, {"mode:file": "0644"}, ("tree.mode-changed", True)),
    ],
)
def test_each_change_has_its_rule(
    part: str, before: Content, after: Content, expected: tuple[str, bool]
) -> None:
    assert rules(part, before, after) == [expected]


def test_a_record_that_reads_with_more_is_compatible_and_one_that_reads_otherwise_breaks() -> None:
    assert isinstance(LETTER, dict)
    more: Json = {
        "input": LETTER["input"],
        "result": {"accepted": {"v": 1, "name": "n", "host": "h"}},
    }
    other: Json = {"input": LETTER["input"], "result": {"accepted": {"v": 1, "name": "m"}}}
    refused: Json = {"input": LETTER["input"], "result": {"rejected": "bad_field", "field": "v"}}
    assert rules("record", {"parse:x": LETTER}, {"parse:x": more}) == [("record.reads-more", False)]
    assert rules("record", {"parse:x": LETTER}, {"parse:x": other}) == [("parse.changed", True)]
    assert rules("record", {"parse:x": LETTER}, {"parse:x": refused}) == [("parse.changed", True)]
    # A message is closed: reading a letter differently is breaking, whatever it gains.
    assert rules("message", {"parse:x": LETTER}, {"parse:x": more}) == [("parse.changed", True)]


def test_a_record_written_with_more_keys_is_compatible_reordered_it_breaks() -> None:
    def written(text: str) -> Content:
        return {"encode:x": {"input": {}, "result": text}}

    before = written('{"v":1,"a":2}')
    assert rules("record", before, written('{"v":1,"a":2,"host":"h"}')) == [
        ("record.writes-more", False)
    ]
    assert rules("record", before, written('{"a":2,"v":1}')) == [("encoding.changed", True)]
    assert rules("message", before, written('{"v":1,"a":2,"s":1}')) == [("encoding.changed", True)]


def test_a_value_read_or_written_as_another_json_type_breaks_though_python_finds_it_equal() -> None:
    """1, 1.0 and true are equal to Python, not to a reader: a record whose pid reads or
    is written as true or 1.0 is refused where it was 1 (a bool is no int to it)."""

    def read(accepted: Json) -> Content:
        return {"parse:x": {"input": {}, "result": {"accepted": accepted}}}

    def written(text: str) -> Content:
        return {"encode:x": {"input": {}, "result": text}}

    for other in (True, 1.0):
        assert rules("record", read({"pid": 1}), read({"pid": other, "host": "h"})) == [
            ("parse.changed", True)
        ]
    for text in ('{"pid":true,"host":"h"}', '{"pid":1.0}'):
        assert rules("record", written('{"pid":1}'), written(text)) == [("encoding.changed", True)]
    assert rules("record", read({"pid": 1}), read({"pid": 1, "host": "h"})) == [
        ("record.reads-more", False)
    ]


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (["flock LOCK_EX x/"], ["flock LOCK_SH|LOCK_NB x/"]),  # shared: no longer exclusive
        (["flock LOCK_EX x/"], ["flock LOCK_EX|LOCK_NB y/"]),  # another file
        (["flock LOCK_EX x/"], ["flock LOCK_EX|LOCK_NB x/", "flock LOCK_EX|LOCK_NB x/"]),
        (["flock LOCK_EX x/", "flock LOCK_EX y"], ["flock LOCK_EX|LOCK_NB y", "flock LOCK_EX x/"]),
        (["flock LOCK_EX|LOCK_NB x"], ["flock LOCK_EX|LOCK_NB|LOCK_NB x"]),
        (["flock LOCK_EX x/"], []),
        ("flock LOCK_EX x/", "flock LOCK_EX|LOCK_NB x/"),  # not a list of locks
        ([1], ["flock LOCK_EX|LOCK_NB x/"]),
        (["lockf LOCK_EX x/"], ["lockf LOCK_EX|LOCK_NB x/"]),
    ],
)
def test_only_a_wait_made_non_blocking_on_the_same_locks_is_a_bounded_wait(
    before: Json, after: Json
) -> None:
    """A lock tried without blocking (and again, to a bound) still excludes every other
    holder: compatible. A lock made shared, moved to another file, added, reordered or
    dropped is not that change: it breaks."""
    assert rules("interop", {"lock:deposit": before}, {"lock:deposit": after}) == [
        ("lock.changed", True)
    ]


def test_a_facet_is_of_the_kind_its_name_has_before_the_first_colon() -> None:
    """A corpus entry's name may hold a colon: the kind is what comes before the first."""
    assert compatibility.kind_of("parse:a:b") == "parse"
    assert rules("interop", {"limit:a:b": 1}, {"limit:a:b": 2}) == [("limit.changed", True)]


def test_every_rule_id_is_unique_documented_and_the_last_rows_classify_anything() -> None:
    ids = [rule.id for rule in compatibility.RULES]
    assert len(ids) == len(set(ids))
    documented = (Path(__file__).parents[1] / "docs" / "contract.md").read_text(encoding="utf-8")
    assert [
        i
        for i in ids
        if f"`{i}`" not in documented and f"`{i.rsplit('-', 1)[0]}-" not in documented
    ] == []
    assert rules("interop", {"whatever": 1}, {"whatever": 2}) == [("facet.changed", True)]


def test_the_first_rule_that_fits_part_kind_change_and_condition_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """classify takes the first rule that fits: its parts (none: any part), its kind, its
    change and its condition each decide, and its id and breaking are what the finding
    says. The table is made here, in the test: RULES are made at import."""

    def raised(before: Json, after: Json) -> bool:
        return isinstance(before, int) and isinstance(after, int) and after > before

    table = (
        Rule("records-only", ["record"], "limit", CHANGED, False, "-"),
        Rule("raised", [], "limit", CHANGED, False, "-", raised),
        Rule("limit-added", [], "limit", ADDED, False, "-"),
        Rule("other-change", [], "*", CHANGED, True, "-"),
    )
    monkeypatch.setattr(compatibility, "RULES", table)
    assert rules("record", {"limit:x": 2}, {"limit:x": 1}) == [("records-only", False)]
    assert rules("message", {"limit:x": 1}, {"limit:x": 2}) == [("raised", False)]
    assert rules("message", {"limit:x": 2}, {"limit:x": 1}) == [("other-change", True)]
    assert rules("message", {}, {"limit:x": 1}) == [("limit-added", False)]
    assert rules("message", {"timing:x": 1}, {"timing:x": 2}) == [("other-change", True)]


def pins_of(*revisions: Content, part: str = "message", version: int = 1) -> Pins:
    return {part: {version: [Revision.of(content) for content in revisions]}}


def test_the_verdict_of_a_part_follows_its_findings() -> None:
    pinned = pins_of({"field:v": {"const": 1}})
    judged = compatibility.judge("message", 1, {"field:v": {"const": 1}}, pinned)
    assert (judged.state, judged.revision, judged.exit_status) == (UNCHANGED, 1, 0)
    judged = compatibility.judge("record", 1, {"field:host": {}}, pins_of({}, part="record"))
    assert (judged.state, judged.exit_status) == (COMPATIBLE, 0)
    judged = compatibility.judge("message", 1, {"field:v": {"const": 1}, "field:s": {}}, pinned)
    assert (judged.state, judged.exit_status) == (BREAKING, 1)
    judged = compatibility.judge("message", 2, {"field:v": {"const": 2}}, pinned)
    assert (judged.state, judged.revision, judged.exit_status) == (UNPINNED, None, 1)
    assert [f.facet for f in judged.findings] == ["field:v"]


def test_a_part_never_pinned_is_unpinned_with_nothing_to_be_judged_against() -> None:
    content: Content = {"field:v": {}}
    judged = compatibility.judge("message", 1, content, pins_of({}, part="record"))
    print_ = compatibility.fingerprint(content)
    assert judged == PartVerdict("message", 1, None, UNPINNED, print_, ())
    assert judged.exit_status == 1


def test_a_version_below_the_latest_never_pinned_is_stray_judged_against_the_one_below() -> None:
    """Pins with a gap (v1 and v3): v2 is judged against v1, never against v3."""
    pins: Pins = {
        "message": {
            1: [Revision.of({"field:v": {"const": 1}})],
            3: [Revision.of({"field:v": {"const": 3}})],
        }
    }
    content: Content = {"field:v": {"const": 2}}
    judged = compatibility.judge("message", 2, content, pins)
    changed = FacetChange(
        "message", "message.field-changed", "field:v", CHANGED, {"const": 1}, {"const": 2}, True
    )
    print_ = compatibility.fingerprint(content)
    assert judged == PartVerdict("message", 2, None, STRAY, print_, (changed,))
    assert judged.exit_status == 1


def test_the_latest_pin_below_a_version_is_the_newest_strictly_below_it() -> None:
    first, second, third = Revision.of({"a": 1}), Revision.of({"a": 2}), Revision.of({"a": 3})
    pins: Pins = {"message": {1: [first, second], 2: [third]}}
    assert compatibility.latest(pins, "message") == (2, 1, third)
    assert compatibility.latest(pins, "message", below=2) == (1, 2, second)
    assert compatibility.latest(pins, "message", below=1) is None
    assert compatibility.latest(pins, "record") is None


def test_a_compatible_change_is_pinned_as_the_next_revision_of_its_version() -> None:
    published = pins_of({}, part="record")
    pins, said = compatibility.pin("record", 1, {"field:host": {}}, published, published)
    assert said.startswith("record v1: pinned revision 2 sha256:")
    assert [r.content for r in pins["record"][1]] == [{}, {"field:host": {}}]


def test_an_unpublished_revision_is_replaced_and_a_published_one_never_is() -> None:
    published = pins_of({}, part="record")
    draft, _ = compatibility.pin("record", 1, {"field:host": {}}, published, published)
    again, said = compatibility.pin("record", 1, {"field:hosts": {}}, draft, published)
    assert said.startswith("record v1: replaced unpublished revision 2")
    assert [r.content for r in again["record"][1]] == [{}, {"field:hosts": {}}]
    # With no history to tell, every pin counts as published: it is kept, one is added.
    grown: Content = {"field:host": {}, "field:port": {}}
    kept, _ = compatibility.pin("record", 1, grown, draft, None)
    assert [r.content for r in kept["record"][1]] == [{}, {"field:host": {}}, grown]
    with pytest.raises(PinRefused, match=r"record\.field-removed"):
        compatibility.pin("record", 1, {"field:hosts": {}}, draft, None)


def test_a_breaking_change_to_a_published_version_is_refused_saying_how_to_bump() -> None:
    """The refusal names each rule the change breaks, once, and the command to bump."""
    published = pins_of({"field:v": {}})
    said = (
        "message v1 was published; this change breaks it "
        "(message.field-added, message.field-removed): "
        "bump the version (pi-post contract bump message) and pin again, or undo the change"
    )
    with pytest.raises(PinRefused, match=f"^{re.escape(said)}$"):
        compatibility.pin("message", 1, {"field:a": {}, "field:b": {}}, published, published)


def test_a_version_is_pinned_only_next_to_the_latest() -> None:
    published = pins_of({})
    pins, said = compatibility.pin("message", 2, {"field:v": {}}, published, published)
    assert said.startswith("message v2: pinned revision 1")
    assert pins["message"] == {1: published["message"][1], 2: [Revision.of({"field:v": {}})]}
    with pytest.raises(PinRefused, match="the next is v2"):
        compatibility.pin("message", 3, {}, published, published)


def test_the_next_version_follows_the_latest_version_not_its_count_of_revisions() -> None:
    published = pins_of({}, {"field:v": {}})  # v1, in two revisions
    _, said = compatibility.pin("message", 2, {"field:s": {}}, published, published)
    assert said.startswith("message v2: pinned revision 1")
    with pytest.raises(PinRefused, match=r"the latest pinned version is v1, so the next is v2$"):
        compatibility.pin("message", 3, {}, published, published)


def test_a_part_never_pinned_is_pinned_at_its_first_revision_beside_the_others() -> None:
    published = pins_of({})
    pins, said = compatibility.pin("record", 1, {"field:host": {}}, published, published)
    assert said.startswith("record v1: pinned revision 1 sha256:")
    assert pins == {**published, "record": {1: [Revision.of({"field:host": {}})]}}


def test_a_pin_rewritten_or_removed_since_the_base_is_named() -> None:
    base = pins_of({"a": 1})
    assert compatibility.rewritten(base, base) == []
    assert compatibility.rewritten(base, pins_of({"a": 2})) == [
        "message v1 revision 1 was re-pinned"
    ]
    assert compatibility.rewritten(base, {}) == ["message v1 revision 1 was removed"]
    assert compatibility.rewritten(base, pins_of({"a": 1}, {"a": 2})) == []


def test_a_pin_edited_by_hand_is_named_and_pins_round_trip_through_data() -> None:
    pins = pins_of({"a": 1}, {"a": 2})
    assert compatibility.from_data(compatibility.to_data(pins)) == pins
    assert compatibility.edited(pins) == []
    forged = {"message": {1: [Revision(pins["message"][1][0].fingerprint, {"a": 3})]}}
    assert compatibility.edited(forged) == ["message v1 revision 1: its content was edited by hand"]


def test_a_record_encoding_that_is_no_json_object_is_judged_changed_not_a_crash() -> None:
    def written(text: str) -> Content:
        return {"encode:x": {"input": {}, "result": text}}

    digest = "<200 characters, sha256 00>"
    assert rules("record", written('{"v":1}'), written(digest)) == [("encoding.changed", True)]
    assert rules("record", written("[1]"), written("[1,2]")) == [("encoding.changed", True)]
    assert rules("record", written("[1]"), written('{"v":1}')) == [("encoding.changed", True)]
    assert rules("record", written('{"v":1}'), written("[1]")) == [("encoding.changed", True)]


def test_a_record_case_that_is_no_object_is_judged_changed_not_a_crash() -> None:
    """A case is {input, result}; a pin edited to something else is a change all the same."""
    for kind, rule in (("parse", "parse.changed"), ("encode", "encoding.changed")):
        assert rules("record", {f"{kind}:x": "a"}, {f"{kind}:x": ["b"]}) == [(rule, True)]


def test_a_record_encoder_that_raises_is_an_encoding_change_not_more_written() -> None:
    before: Content = {"encode:x": {"input": {}, "result": '{"v":1}'}}
    after: Content = {"encode:x": {"input": {}, "result": {"raised": "KeyError"}}}
    assert rules("record", before, after) == [("encoding.changed", True)]


def test_a_change_no_row_names_is_an_error_not_a_pass() -> None:
    with pytest.raises(AssertionError, match=r"^no rule for renamed field:v of message$"):
        compatibility.classify("message", "field:v", "renamed", None, None)


def test_pinning_what_is_pinned_already_changes_nothing() -> None:
    pins = pins_of({"field:v": {}})
    again, said = compatibility.pin("message", 1, {"field:v": {}}, pins, pins)
    assert (again, said) == (pins, "message v1: already pinned as revision 1")


def test_a_version_never_published_is_replaced_whole_even_by_a_breaking_change() -> None:
    drafted = pins_of({"field:host": {}}, part="record")
    pins, said = compatibility.pin("record", 1, {}, drafted, {})
    assert said.startswith("record v1: replaced unpublished revision 1 sha256:")
    assert [r.content for r in pins["record"][1]] == [{}]


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({"message": []}, "pins of 'message' are not an object"),
        ({"message": {"1": {}}}, "pins of message v1 are not a list"),
        (
            {"message": {"1": [{"fingerprint": 1, "content": {}}]}},
            "a pin is not {fingerprint, content}",
        ),
        (
            {"message": {"1": [{"fingerprint": "f", "content": []}]}},
            "a pin is not {fingerprint, content}",
        ),
    ],
    ids=["versions not an object", "revisions not a list", "no fingerprint", "no content"],
)
def test_pins_of_another_shape_are_refused_saying_what_is_wrong(
    data: dict[str, Json], said: str
) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(said)}$"):
        compatibility.from_data(data)
