"""The layers of src/pipost, declared once here (DESIGN §10 cites this table), and
the arrows between them: every import a module can make, at its top or inside a
function, except those only the type checker reads (``if TYPE_CHECKING:``).

- a decision module imports only decision modules, and loading it loads neither
  ``pipost.files`` nor ``fcntl`` (checked in a fresh interpreter);
- the runtime — what send, list, listen, peek, resolve, sweep, log, quarantine and
  doctor need — imports no tooling, but for the commands the command line hands
  over to a tooling module (:data:`DISPATCHED`, imported inside that command's
  function only);
- no circle of imports among the modules of src/pipost;
- pipost and the conformance kit (src/pipost_conformance) meet where
  :data:`KIT_ENTRY` and :data:`SHIM_REACHED_FROM` say: pipost imports the kit
  only for ``pi-post conformance``, the kit reaches pipost's shim only to run
  pipost in this process, and the kit's client loads none of pipost's runtime."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers import python_in

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "src" / "pipost"
KIT = REPO / "src" / "pipost_conformance"

DECISIONS = frozenset(
    {
        "pipost.address",
        "pipost.format",
        "pipost.jsontext",
        "pipost.message",
        "pipost.policy",
        "pipost.reception",
        "pipost.refusals",
        "pipost.resolve",
        "pipost.session",
        "pipost.value",
    }
)
"""Pure decisions, tested without a filesystem."""

RUNTIME = frozenset(
    {
        "pipost",
        "pipost.__main__",
        "pipost.cli",
        "pipost.doctor",
        "pipost.documents",
        "pipost.droplog",
        "pipost.files",
        "pipost.host",
        "pipost.listeners",
        "pipost.mailbox",
        "pipost.post",
        "pipost.quarantine",
        "pipost.registry",
        "pipost.sweep",
        "pipost.watch",
    }
)
"""The thin I/O that carries the decisions out, and the command line."""

TOOLING = frozenset(
    {
        "pipost.contract",
        "pipost.contract.__main__",
        "pipost.contract.compatibility",
        "pipost.contract.gate",
        "pipost.contract.gathering",
        "pipost.demo",
        "pipost.driver",
        "pipost.driver_protocol",
        "pipost.schemas",
    }
)
"""The contract gate, the driver protocol's shim and the terms its two ends share, the
demo, the shipped schemas."""

PURE_TOOLING = frozenset({"pipost.contract.compatibility", "pipost.driver_protocol"})
"""Tooling that decides only, held to the decisions' rule of loading no I/O."""

DISPATCHED = {"pipost.demo": "pi-post demo", "pipost.driver": "pi-post driver"}
"""Tooling the command line imports for one command, inside its function. The
contract gate is not among them: it gathers the contract from the command line,
so ``pi-post contract`` runs it in a child interpreter (``python -m
pipost.contract``)."""

IO_MODULES = {"pipost.files", "fcntl"}

KIT_ENTRY = {"pipost.cli": "pipost_conformance.runner"}
"""The one import of the kit in pipost's runtime: ``pi-post conformance`` hands over
to the kit's runner, inside that command's function. Nothing else of the runtime
needs the kit, whose dependencies (behave, pytest, hypothesis, jsonschema) pipost
has not."""
KIT_READ_BY_TOOLING = {"pipost.contract.gathering": "pipost_conformance"}
"""The contract gate (tooling, run as a child by ``pi-post contract``) runs the
kit's vectors: it reads them through the kit's package, which loads only json and
pathlib."""

SHIM = "pipost.driver"
CLIENT = "pipost_conformance.client"
SHIM_REACHED_FROM = {
    CLIENT: "open_driver: pipost itself, in this process",
    "pipost_conformance.features.environment": "pipost's name and version, in this process",
}
"""The modules of the kit that import pipost's shim, each inside a function and only
to run pipost in this process; every other one drives an implementation through
the kit's client (pipost_conformance.client)."""

CLIENT_NEEDS = {"pipost", "pipost.driver_protocol"}
"""What of pipost the kit's client loads: the terms both ends of the protocol share."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


PATHS = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
MODULES = sorted(PATHS)
KIT_PATHS = {module_name(path): path for path in sorted(KIT.rglob("*.py"))}
KNOWN = PATHS | KIT_PATHS
IMPORTABLE = [module for module in MODULES if not module.endswith("__main__")]  # those run


def imports_of(module: str, *, in_functions: bool = True) -> set[str]:
    """The modules of pipost and of the kit ``module`` imports: at its top, and inside
    its functions unless ``in_functions`` is false; never those under ``if
    TYPE_CHECKING:``."""
    found: set[str] = set()

    def named(module: str, alias: str) -> str:
        return f"{module}.{alias}" if f"{module}.{alias}" in KNOWN else module

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for branch in node.orelse:
                visit(branch)
            return
        if not in_functions and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return
        if isinstance(node, ast.ImportFrom) and node.module in KNOWN:
            found.update(named(node.module, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in KNOWN)
        for inner in ast.iter_child_nodes(node):
            visit(inner)

    visit(ast.parse(KNOWN[module].read_text(encoding="utf-8")))
    return found


GRAPH = {module: imports_of(module) for module in KNOWN}
AT_LOAD = {module: imports_of(module, in_functions=False) for module in KNOWN}


def test_every_module_is_in_exactly_one_layer() -> None:
    layers = [DECISIONS, RUNTIME, TOOLING]
    assert sorted(DECISIONS | RUNTIME | TOOLING) == MODULES
    assert sum(len(layer) for layer in layers) == len(MODULES)
    assert PURE_TOOLING <= TOOLING and set(DISPATCHED) <= TOOLING


def test_the_walk_sees_imports_inside_functions_and_skips_those_for_the_checker() -> None:
    assert "pipost.session" in AT_LOAD["pipost.format"]
    assert "pipost.doctor" in GRAPH["pipost.cli"]  # inside cmd_doctor
    assert "pipost.doctor" not in AT_LOAD["pipost.cli"]
    assert "pipost.quarantine" in AT_LOAD["pipost.documents"]
    assert "pipost.droplog" not in GRAPH["pipost.documents"]  # only for the type checker
    assert "pipost_conformance.runner" in GRAPH["pipost.cli"]  # inside cmd_conformance
    assert "pipost.driver_protocol" in AT_LOAD[CLIENT]


@pytest.mark.parametrize("module", sorted(DECISIONS))
def test_a_decision_module_imports_decisions_only(module: str) -> None:
    assert GRAPH[module] <= DECISIONS, f"{module} imports {sorted(GRAPH[module] - DECISIONS)}"


@pytest.mark.parametrize("module", sorted(RUNTIME))
def test_the_runtime_imports_no_tooling_but_a_command_it_hands_over(module: str) -> None:
    tooling = GRAPH[module] & TOOLING
    if module == "pipost.cli":
        assert not tooling & AT_LOAD[module], "a dispatched module is loaded by its command"
        tooling -= set(DISPATCHED)
    assert not tooling, f"{module} imports {sorted(tooling)}"


def loaded_by(module: str, tmp_path: Path) -> set[str]:
    """The modules a fresh interpreter holds once it imported ``module`` alone."""
    printed = python_in(tmp_path, f"import sys, {module}\nprint(' '.join(sys.modules))\n")
    return set(printed.split())


@pytest.mark.parametrize("module", sorted(DECISIONS | PURE_TOOLING))
def test_a_pure_module_loads_no_io_module(module: str, tmp_path: Path) -> None:
    loaded = loaded_by(module, tmp_path)
    assert module in loaded
    assert not loaded & IO_MODULES, f"{module} loads {sorted(loaded & IO_MODULES)}"


def test_the_doctor_loads_no_tooling(tmp_path: Path) -> None:
    """Its health check reads the post office, not the source tree (the gate's)."""
    loaded = loaded_by("pipost.doctor", tmp_path)
    assert "pipost.doctor" in loaded
    assert not loaded & TOOLING, f"pipost.doctor loads {sorted(loaded & TOOLING)}"


@pytest.mark.parametrize("module", IMPORTABLE)
def test_every_module_imports_alone(module: str, tmp_path: Path) -> None:
    """Entered from any side, a circle of ``from x import y`` would fail here."""
    assert module in loaded_by(module, tmp_path)


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each circle of imports, as the path that closes it, found by a depth-first walk."""
    found = []
    done: set[str] = set()

    def walk(module: str, path: list[str]) -> None:
        if module in path:
            found.append([*path[path.index(module) :], module])
            return
        if module in done:
            return
        for imported in sorted(graph.get(module, ())):
            walk(imported, [*path, module])
        done.add(module)

    for module in sorted(graph):
        walk(module, [])
    return found


def test_circles_are_found_through_any_number_of_modules() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert circles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_src_has_no_import_circle() -> None:
    assert circles(GRAPH) == []


def test_resolution_and_its_texts_do_not_import_each_other() -> None:
    assert "pipost.format" not in GRAPH["pipost.resolve"]
    assert "pipost.resolve" not in GRAPH["pipost.format"]


# -- pipost and its conformance kit --------------------------------------------------------


def test_pipost_imports_the_kit_only_for_the_command_that_hands_over_to_it() -> None:
    arrows = {(module, kit) for module in MODULES for kit in GRAPH[module] if kit in KIT_PATHS}
    allowed = set(KIT_ENTRY.items()) | set(KIT_READ_BY_TOOLING.items())
    assert arrows == allowed, f"pipost imports the kit: {sorted(arrows)}"
    at_load = {(module, kit) for module in MODULES for kit in AT_LOAD[module] if kit in KIT_PATHS}
    assert at_load <= set(KIT_READ_BY_TOOLING.items()), f"loaded with pipost: {sorted(at_load)}"
    assert set(KIT_READ_BY_TOOLING) <= TOOLING


def test_the_kit_reaches_pipost_shim_only_to_run_pipost_in_this_process() -> None:
    reaching = {module for module in KIT_PATHS if SHIM in GRAPH[module]}
    assert reaching <= set(SHIM_REACHED_FROM), f"{sorted(reaching - set(SHIM_REACHED_FROM))}"
    at_load = {module for module in KIT_PATHS if SHIM in AT_LOAD[module]}
    assert not at_load, f"{sorted(at_load)} load pipost's shim"


def test_the_kits_client_loads_none_of_pipost_but_the_protocols_terms(tmp_path: Path) -> None:
    loaded = loaded_by(CLIENT, tmp_path)
    assert CLIENT in loaded
    of_pipost = {module for module in loaded if module.split(".")[0] == "pipost"}
    assert of_pipost == CLIENT_NEEDS, f"{CLIENT} loads {sorted(of_pipost - CLIENT_NEEDS)}"
