"""Verdicts per assertion (SPEC 11; pi-post conformance): a failed assertion counts
against the invariants its step names and no other; a scenario that stops early is
an error, a timeout or unsupported, never a failure of its tags; a state machine's
failure fails the invariants in brackets at the start of its message; tiers and
stable ids come from the feature files."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipost_conformance import runner as conformance
from pipost_conformance.runner import Assertion


def test_a_failed_assertion_counts_against_only_the_invariants_its_step_names() -> None:
    assertions = [
        Assertion("Then the letter is set aside", ("INV-10",), passed=False, error="kept"),
        Assertion("And the body cap holds", ("INV-09",), passed=True),
        Assertion("And nothing changed on disk", ("INV-16",), passed=True),
    ]
    results, outcome = conformance.judge(["INV-09", "INV-10"], assertions, None)
    assert results == {"INV-09": "pass", "INV-10": "fail", "INV-16": "pass"}
    assert outcome == "fail"


def test_a_scenario_that_stops_is_not_a_failure_of_its_tags() -> None:
    passed = [Assertion("Then it is queued", ("INV-05",), passed=True)]
    for ending in ("error", "timeout", "unsupported"):
        results, outcome = conformance.judge(["INV-05", "INV-07"], passed, ending)
        assert results == {"INV-05": ending, "INV-07": ending}
        assert outcome == ending
    failed = [Assertion("Then it is queued", ("INV-05",), passed=False, error="gone")]
    results, outcome = conformance.judge(["INV-05", "INV-07"], failed, "error")
    assert results == {"INV-05": "fail", "INV-07": "error"}
    assert outcome == "fail"


def test_a_verdict_line_gives_the_first_error_in_the_order_things_happened() -> None:
    line = {
        "id": "f/s",
        "name": "s",
        "location": "features/f.feature:3",
        "tier": "should",
        "tier_defect": "",
        "invariants": ["INV-10"],
        "assertions": [
            {"step": "Then a", "invariants": ["INV-10"], "passed": False, "error": "Then a: no"},
        ],
        "stopped": {"outcome": "error", "error": "When b: DriverError: unknown operation"},
        "exchange": [{"op": "take", "args": {}, "error": "DriverError: unknown operation"}],
    }
    item = conformance.item_from_verdict(line)
    assert (item.result, item.error, item.tier) == ("fail", "Then a: no", "should")
    assert item.results == {"INV-10": "fail"}
    assert item.exchange[0]["op"] == "take"


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="machines.test_registry_machine.TestRegistry" name="runTest">
  <failure message="AssertionError: [INV-15] presence of s-1 is live, expected offline">
machines/verdict.py:35: in check
E   AssertionError: [INV-15] presence of s-1 is live, expected offline
E   Failing test case: &lt;state machine&gt;
E   state = RegistryMachine()
E   state.register(pid=4)
E   state.recycle(pid=4)</failure>
</testcase>
<testcase classname="machines.test_registry_machine" name="test_two">
  <failure message="KeyError: 'presence'">Traceback ...</failure>
</testcase>
<testcase classname="machines.test_registry_machine" name="test_three">
  <skipped message="the implementation does not offer: sweep" type="pytest.skip" />
</testcase>
<testcase classname="machines.test_registry_machine" name="test_four" />
</testsuite></testsuites>
"""


def test_a_machine_failure_fails_the_invariants_its_message_names(tmp_path: Path) -> None:
    junit = tmp_path / "results.xml"
    junit.write_text(JUNIT, encoding="utf-8")
    module = conformance.MACHINES / "test_registry_machine.py"
    invariants = conformance.module_invariants(module)  # its docstring's
    assert {"INV-14", "INV-15", "INV-17"} <= set(invariants)
    bracketed, unnamed, skipped, passed = conformance.machine_items(junit, module)
    path = "machines/test_registry_machine.py"
    assert bracketed.id == f"{path}::TestRegistry::runTest"
    assert (bracketed.result, bracketed.results) == ("fail", {"INV-15": "fail"})
    assert bracketed.error == (  # what was raised, with the falsifying steps
        "AssertionError: [INV-15] presence of s-1 is live, expected offline\n"
        "Failing test case: <state machine>\n"
        "state = RegistryMachine()\nstate.register(pid=4)\nstate.recycle(pid=4)"
    )
    assert unnamed.id == f"{path}::test_two"
    assert unnamed.result == "error"
    assert unnamed.results == dict.fromkeys(invariants, "error")
    assert unnamed.error.startswith("the failure names no invariant")
    assert skipped.result == "unsupported"
    assert skipped.error == "the implementation does not offer: sweep"
    assert passed.results == dict.fromkeys(invariants, "pass")


def test_a_machine_tier_is_its_docstring_line_and_must_without_one(tmp_path: Path) -> None:
    should = tmp_path / "test_should.py"
    should.write_text('"""A machine (INV-17).\n\nTier: should\n"""\n', encoding="utf-8")
    plain = tmp_path / "test_plain.py"
    plain.write_text('"""A machine (INV-17)."""\n', encoding="utf-8")
    assert conformance.machine_tier(should) == "should"
    assert conformance.machine_tier(plain) == "must"


@pytest.mark.parametrize(
    ("own", "inherited", "tier"),
    [
        (["should"], ["must"], ("should", "")),
        ([], ["must"], ("must", "")),
        (["INV-05"], ["should", "INV-07"], ("should", "")),
        ([], [], ("must", "no tier tag (@must or @should)")),
        (["must", "should"], [], ("must", "tagged both @must and @should")),
        ([], ["must", "should"], ("must", "tagged both @must and @should")),
    ],
)
def test_a_scenario_tier_is_its_own_tag_else_its_feature_tag(
    own: list[str], inherited: list[str], tier: tuple[str, str]
) -> None:
    assert conformance.tier_of(own, inherited) == tier


FEATURE = """@INV-07 @must
Feature: a toy

  @INV-05
  Scenario: Letters enter, oldest first!
    Given nothing

  @should
  Scenario Outline: a body of <count> × <character> is refused
    Given nothing

    Examples: one
      | count | character |
      | 1     | x         |
      | 2     | y         |

    Examples: two
      | count | character |
      | 3     | z         |
"""


def test_scenario_ids_are_stable_and_name_each_row_of_an_outline(tmp_path: Path) -> None:
    feature = tmp_path / "toy.feature"
    feature.write_text(FEATURE, encoding="utf-8")
    listed = conformance.listed_scenarios([str(feature)], None)
    assert [(s.id, s.tier, s.invariants) for s in listed] == [
        ("toy/letters-enter-oldest-first", "must", ("INV-05", "INV-07")),
        ("toy/a-body-of-count-character-is-refused@1", "should", ("INV-07",)),
        ("toy/a-body-of-count-character-is-refused@2", "should", ("INV-07",)),
        ("toy/a-body-of-count-character-is-refused@3", "should", ("INV-07",)),
    ]
    assert [s.id for s in conformance.listed_scenarios([str(feature)], "oldest")] == [
        "toy/letters-enter-oldest-first"
    ]


def test_expectations_are_lines_of_an_id_and_a_reason(tmp_path: Path) -> None:
    path = tmp_path / "expected.txt"
    path.write_text("# why\n\nf/a  not capped yet\nf/b@2 drops are not logged\n", encoding="utf-8")
    assert conformance.read_expectations(path) == {
        "f/a": "not capped yet",
        "f/b@2": "drops are not logged",
    }
    path.write_text("f/a\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"expected.txt:1: f/a has no reason"):
        conformance.read_expectations(path)
