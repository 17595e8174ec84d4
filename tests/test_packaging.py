"""The distribution says what pipost is and what runs it (issue 15): the README is
its long description and the classifiers name every Python that requires-python
admits, up to the newest one supported. ``nox -s package`` builds the sdist and the
wheel and checks both with ``twine check --strict``; test_cli pins that
``pi-post --version`` prints the one version pyproject.toml writes."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((REPOSITORY / "pyproject.toml").read_text(encoding="utf-8"))["project"]
PYTHON = "Programming Language :: Python :: "


def named_pythons() -> list[tuple[int, int]]:
    found = (re.fullmatch(r"(\d+)\.(\d+)", c.removeprefix(PYTHON)) for c in PROJECT["classifiers"])
    return sorted((int(match[1]), int(match[2])) for match in found if match)


def test_the_readme_is_the_long_description() -> None:
    # Hatchling gives a .md readme the content type text/markdown.
    assert PROJECT["readme"] == "README.md"
    assert (REPOSITORY / "README.md").read_text(encoding="utf-8").startswith("# ")


def test_the_classifiers_name_each_python_from_the_floor_up() -> None:
    floor = re.fullmatch(r">=(\d+)\.(\d+)", PROJECT["requires-python"])
    assert floor, "requires-python is a floor, without a ceiling"
    pythons = named_pythons()
    assert pythons[0] == (int(floor[1]), int(floor[2]))
    assert pythons == [(3, minor) for minor in range(pythons[0][1], pythons[-1][1] + 1)]
    assert PYTHON + "3 :: Only" in PROJECT["classifiers"]


def test_the_python_running_this_test_is_one_the_classifiers_name() -> None:
    """CI runs the gate on every supported Python: each one must be named."""
    assert sys.version_info[:2] in named_pythons()


def test_the_metadata_names_the_license_the_file_grants() -> None:
    assert (PROJECT["license"], PROJECT["license-files"]) == ("MIT", ["LICENSE"])
    granted = (REPOSITORY / "LICENSE").read_text(encoding="utf-8")
    assert granted.startswith("MIT License\n\nCopyright (c) 2026 the pipost authors\n")
