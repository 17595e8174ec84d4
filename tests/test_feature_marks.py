"""The features and steps of sending, sessions, the registry, interop and the
tree are marked as SPEC 11's verdicts need (protocol.md §2-§4): every @then step
names the invariants it checks, with ids of DESIGN §12; every scenario has one
tier, @must or @should; no two scenarios of a file share a name."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
STEPS = ["sending_steps", "session_steps", "registry_steps", "interop_steps", "tree_steps"]
FEATURES = ["addresses", "bad_input", "interop", "resolution"]
FEATURES += ["registry_presence", "messages", "reading", "sweeps"]
INVARIANTS = set(re.findall(r"^\| (INV-\d\d) \|", (REPO / "DESIGN.md").read_text(), re.M))


def decorator_name(node: ast.expr) -> str:
    call = node.func if isinstance(node, ast.Call) else node
    return call.id if isinstance(call, ast.Name) else ""


@pytest.mark.parametrize("module", STEPS)
def test_every_then_step_names_the_invariants_it_checks(module: str) -> None:
    tree = ast.parse((REPO / "features" / "steps" / f"{module}.py").read_text())
    thens = 0
    for function in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        names = [decorator_name(d) for d in function.decorator_list]
        if "then" not in names:
            continue
        thens += 1
        # under the step decorator, so that the step behave registers is the marked one
        assert names[-1] == "checks", f"{module}.{function.name}: @checks is not last"
        marked = function.decorator_list[-1]
        assert isinstance(marked, ast.Call)
        ids = {arg.value for arg in marked.args if isinstance(arg, ast.Constant)}
        assert ids and ids <= INVARIANTS, f"{module}.{function.name}: {ids}"
    assert thens, f"{module} has no @then step"


@pytest.mark.parametrize("feature", FEATURES)
def test_every_scenario_has_one_tier_and_a_name_of_its_own(feature: str) -> None:
    lines = (REPO / "features" / f"{feature}.feature").read_text(encoding="utf-8").splitlines()
    feature_tags = next(
        (lines[i - 1].split() for i, line in enumerate(lines) if line.startswith("Feature:") and i),
        [],
    )
    names = []
    for number, line in enumerate(lines):
        scenario = re.match(r"\s*Scenario(?: Outline)?: (.*)", line)
        if scenario is None:
            continue
        names.append(scenario.group(1).strip())
        tags = lines[number - 1].split() if lines[number - 1].strip().startswith("@") else []
        tiers = {t for t in tags if t in ("@must", "@should")}
        tiers = tiers or {t for t in feature_tags if t in ("@must", "@should")}
        assert len(tiers) == 1, f"{feature}.feature:{number + 1} has the tiers {tiers}"
    assert names and len(names) == len(set(names)), f"{feature}: names repeat"
