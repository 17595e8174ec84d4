"""The table of nox -s mutation (tools/mutation.py): mutmut's statuses counted per module,
a package and a module inside one by their dotted names, and the score of those judged."""

from __future__ import annotations

import sys
from pathlib import Path

# tools/ holds scripts, not a package (as tests/test_mutants_table.py imports mutants).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import mutation


def test_each_module_is_named_as_mutmut_names_its_mutants() -> None:
    modules = mutation.every_module()
    assert {"address", "schemas"} <= set(modules) and "__init__" not in modules
    assert mutation.module_of("pipost.schemas.x_load__mutmut_2") == "schemas"
    assert mutation.module_of("pipost.host.xǁHostǁserve__mutmut_16") == "host"
    assert mutation.module_of("pipost.contract.gate.x_main__mutmut_1") == "contract.gate"


def test_the_score_is_killed_of_judged_and_waiting_mutants_are_left_out_of_it() -> None:
    statuses = {
        "pipost.address.x_a__mutmut_1": "killed",
        "pipost.address.x_a__mutmut_2": "timeout",
        "pipost.address.x_a__mutmut_3": "segfault",
        "pipost.address.x_a__mutmut_4": "survived",
        "pipost.address.x_a__mutmut_5": "not checked",
        "pipost.contract.gate.x_b__mutmut_1": "no tests",
        "pipost.contract.gate.x_b__mutmut_2": "killed",
        "pipost.policy.x_c__mutmut_1": "not checked",
    }
    lines = mutation.table(statuses, ["address", "contract.gate", "policy"])
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:]}
    # mutants, waiting, killed, lived, score
    assert rows == {
        "address": ["5", "1", "3", "1", "75.0", "%"],
        "contract.gate": ["2", "0", "1", "1", "50.0", "%"],
        "policy": ["1", "1", "0", "0", "-"],
        "all": ["8", "2", "4", "2", "66.7", "%"],
    }
    assert lines[0].split() == ["module", "mutants", "waiting", "killed", "lived", "score"]
