"""The seam between decisions and I/O (DESIGN §10): a module the table calls pure
loads no I/O module, and the modules of src/pipost import one another without a
circle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers import python_in

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "src" / "pipost"
MODULES = sorted(
    ["pipost.schemas"]
    + [
        f"pipost.{path.stem}"
        for path in PACKAGE.glob("*.py")
        if path.stem not in ("__init__", "__main__")  # __main__ runs the command line
    ]
    + [f"pipost.contract.{path.stem}" for path in PACKAGE.glob("contract/[!_]*.py")]
)
IO_MODULES = {"pipost.files", "fcntl"}


def pure_in_design() -> list[str]:
    """The modules whose row in DESIGN §10's table says "yes" under pure?."""
    design = (REPO / "DESIGN.md").read_text(encoding="utf-8")
    table = design.split("## 10. Modules", 1)[1].split("\n## ", 1)[0]
    pure = []
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 3 and cells[2] == "yes":
            names = cells[0].split(",")
            pure += [
                f"pipost.{name.strip('` ').removesuffix('.py').replace('/', '.')}" for name in names
            ]
    return pure


PURE = pure_in_design()


def test_the_design_names_the_pure_modules_and_they_exist() -> None:
    assert {"pipost.format", "pipost.session", "pipost.resolve", "pipost.refusals"} <= set(PURE)
    assert set(PURE) <= set(MODULES)


def loaded_by(module: str, tmp_path: Path) -> set[str]:
    """The modules a fresh interpreter holds once it imported ``module`` alone."""
    printed = python_in(tmp_path, f"import sys, {module}\nprint(' '.join(sys.modules))\n")
    return set(printed.split())


@pytest.mark.parametrize("module", PURE)
def test_a_pure_module_loads_no_io_module(module: str, tmp_path: Path) -> None:
    loaded = loaded_by(module, tmp_path)
    assert module in loaded
    assert not loaded & IO_MODULES, f"{module} loads {sorted(loaded & IO_MODULES)}"


@pytest.mark.parametrize("module", MODULES)
def test_every_module_imports_alone(module: str, tmp_path: Path) -> None:
    """Entered from any side, a circle of ``from x import y`` would fail here."""
    assert module in loaded_by(module, tmp_path)


def imports_at_load(module: str) -> set[str]:
    """The pipost modules ``module`` imports when it is loaded: its module-level
    imports, without those only the type checker reads (``if TYPE_CHECKING:``)
    and those inside functions (taken when called, not at load)."""
    path = PACKAGE / "schemas" / "__init__.py" if module == "pipost.schemas" else None
    path = path or PACKAGE / f"{module.removeprefix('pipost.').replace('.', '/')}.py"
    found: set[str] = set()

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, ast.ImportFrom) and node.module == "pipost":
                found.update(f"pipost.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pipost."):
                found.add(str(node.module))
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names if alias.name.startswith("pipost"))
            elif isinstance(node, ast.If):
                if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return found


def test_src_has_no_import_circle() -> None:
    graph = {module: imports_at_load(module) for module in MODULES}
    assert "pipost.session" in graph["pipost.format"]  # the walk does see imports
    circles = []
    done: set[str] = set()

    def walk(module: str, path: list[str]) -> None:
        if module in path:
            circles.append([*path[path.index(module) :], module])
            return
        if module in done:
            return
        for imported in sorted(graph.get(module, ())):
            walk(imported, [*path, module])
        done.add(module)

    for module in MODULES:
        walk(module, [])
    assert circles == []


def test_resolution_and_its_texts_do_not_import_each_other() -> None:
    assert "pipost.format" not in imports_at_load("pipost.resolve")
    assert "pipost.resolve" not in imports_at_load("pipost.format")
