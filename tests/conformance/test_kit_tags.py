"""The kit's own tagging (SPEC 11): every scenario of features/ has exactly one
tier and an id no other scenario has (ids are stable: they name scenarios in
reports and expectation files), and every ``@then`` step names the invariants
it checks with ``@checks``, under the step decorator, so that its failures count
for those rows only."""

from __future__ import annotations

import ast
from pathlib import Path

from pipost_conformance import runner as conformance

STEPS = conformance.FEATURES / "steps"


def test_every_scenario_has_exactly_one_tier() -> None:
    defects = [
        f"{s.id} ({s.location}): {s.tier_defect}"
        for s in conformance.listed_scenarios([str(conformance.FEATURES)], None)
        if s.tier_defect
    ]
    assert defects == []


def test_no_two_scenarios_share_an_id() -> None:
    ids = [s.id for s in conformance.listed_scenarios([str(conformance.FEATURES)], None)]
    assert ids and [i for i in set(ids) if ids.count(i) > 1] == []


def _name(decorator: ast.expr) -> str:
    called = decorator.func if isinstance(decorator, ast.Call) else decorator
    return called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")


def unmarked_then_steps(folder: Path) -> list[str]:
    """``@then`` steps without ``@checks`` below their step decorators, or naming
    something that is no invariant."""
    found = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef):
                continue
            names = [_name(d) for d in node.decorator_list]
            if "then" not in names:
                continue
            where = f"{path.name}:{node.lineno} {node.name}"
            if "checks" not in names or names.index("checks") < names.index("then"):
                found.append(f"{where}: no @checks under @then")
                continue
            marked = node.decorator_list[names.index("checks")]
            assert isinstance(marked, ast.Call)
            named = [arg.value for arg in marked.args if isinstance(arg, ast.Constant)]
            if not named or any(inv not in conformance.INVARIANTS for inv in named):
                found.append(f"{where}: @checks{tuple(named)} names no invariant of SPEC 9")
    return found


def test_the_check_finds_an_unmarked_step() -> None:
    toy = Path(__file__).parent / "verdict_features" / "steps"
    assert [line.split(" ", 1)[1] for line in unmarked_then_steps(toy)] == [
        "unmarked_fails: no @checks under @then"
    ]


def test_every_then_step_names_the_invariants_it_checks() -> None:
    assert unmarked_then_steps(STEPS) == []
