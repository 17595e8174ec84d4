"""The project's own tooling: the CI workflows are valid GitHub workflows, the
development tools are pinned, and pre-commit runs the versions nox -s check does."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((CHECKOUT / ".github" / "workflows").glob("*.yml"))


def pinned() -> dict[str, str]:
    """Package (normalised) → version, from constraints.txt."""
    pins = {}
    for line in (CHECKOUT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[_normalised(name)] = version
    return pins


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def validate(*paths: Path) -> subprocess.CompletedProcess[str]:
    """check-jsonschema against the GitHub workflow schema it ships (no network)."""
    tool = Path(sys.executable).with_name("check-jsonschema")
    return subprocess.run(
        [str(tool), "--builtin-schema", "vendor.github-workflows", *map(str, paths)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_every_workflow_is_a_valid_github_workflow() -> None:
    assert WORKFLOWS, "no workflows"
    checked = validate(*WORKFLOWS)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_workflow_that_is_not_valid_is_refused(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    text = WORKFLOWS[0].read_text(encoding="utf-8")
    broken.write_text(text.replace("runs-on:", "runs_on:", 1), encoding="utf-8")
    assert validate(broken).returncode != 0


def _requirements(extras: dict[str, list[str]], extra: str) -> list[str]:
    """The requirements of an extra, with those of pipost's own extras it names
    (``pipost[conformance]``) in their place."""
    found = []
    for item in extras[extra]:
        own = re.fullmatch(r"pipost\[([\w,-]+)\]", item)
        found += (
            [r for name in own[1].split(",") for r in _requirements(extras, name)]
            if own
            else [item]
        )
    return found


def test_every_development_tool_is_pinned() -> None:
    project = tomllib.loads((CHECKOUT / "pyproject.toml").read_text(encoding="utf-8"))
    extras = project["project"]["optional-dependencies"]
    required = _requirements(extras, "dev")
    wanted = {_normalised(re.split(r"[<>=\[; ]", item)[0]) for item in required}
    assert {"behave", "pytest", "ruff"} <= wanted
    assert sorted(wanted - set(pinned())) == []


def test_pre_commit_runs_the_pinned_versions() -> None:
    config = (CHECKOUT / ".pre-commit-config.yaml").read_text(encoding="utf-8")
    named = dict(re.findall(r'"([A-Za-z0-9_.-]+)==([^"]+)"', config))
    assert {"ruff", "mypy"} <= set(named)
    pins = pinned()
    assert {n: v for n, v in named.items() if pins.get(_normalised(n)) != v} == {}


def test_the_constraints_are_what_nox_installs() -> None:
    noxfile = (CHECKOUT / "noxfile.py").read_text(encoding="utf-8")
    installs = re.findall(r"session\.install\(([^)]*)\)", noxfile)
    unconstrained = [i for i in installs if "CONSTRAINTS" not in i and "--upgrade" not in i]
    assert unconstrained == []


def test_the_tools_nox_installs_by_name_are_pinned() -> None:
    noxfile = (CHECKOUT / "noxfile.py").read_text(encoding="utf-8")
    named = re.findall(r"^[A-Z_]+_TOOLS = \(([^)]*)\)", noxfile, re.MULTILINE)
    tools = {_normalised(name) for group in named for name in re.findall(r'"([^"]+)"', group)}
    assert {"mutmut", "twine"} <= tools
    assert sorted(tools - set(pinned())) == []


def test_the_workflow_a_port_copies_from_the_docs_is_valid(tmp_path: Path) -> None:
    docs = (CHECKOUT / "docs" / "conformance.md").read_text(encoding="utf-8")
    (example,) = re.findall(r"```yaml\n(.*?)```", docs, re.DOTALL)
    copied = tmp_path / "pi-post.yml"
    copied.write_text(example, encoding="utf-8")
    checked = validate(copied)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "/.github/workflows/conformance.yml@" in example


def test_features_at_the_root_are_the_kits_one_copy() -> None:
    root, kit = CHECKOUT / "features", CHECKOUT / "src" / "pipost_conformance" / "features"
    assert root.is_symlink() and root.resolve() == kit.resolve()
    assert sorted(p.name for p in root.glob("*.feature")) == sorted(
        p.name for p in kit.glob("*.feature")
    )


def test_the_gate_draws_the_same_examples_every_run_and_the_thorough_profile_explores() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    def examples(profile: str) -> list[int]:
        drawn: list[int] = []

        @settings(settings.get_profile(profile), max_examples=30)
        @given(st.integers())
        def draw(number: int) -> None:
            drawn.append(number)

        draw()
        return drawn

    assert examples("gate") == examples("gate")
    assert examples("thorough") != examples("thorough")
    assert settings.get_profile("gate").database is None


def test_a_second_collection_in_one_process_names_the_same_tests(tmp_path: Path) -> None:
    """mutmut (nox -s mutation) collects the suite again in the process that recorded
    it, and runs tests by the names it recorded: a parametrization whose ids change
    on a second collection (pytest escapes a list of ids in place) would be not found."""
    script = tmp_path / "collect_twice.py"
    script.write_text(
        "import contextlib, io, json, sys\n"
        "import pytest\n"
        "class Names:\n"
        "    def pytest_collection_modifyitems(self, items):\n"
        "        self.ids = [item.nodeid for item in items]\n"
        "runs = []\n"
        "for _ in range(2):\n"
        "    names = Names()\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        pytest.main(['-q', '--collect-only', '-p', 'no:cacheprovider'], plugins=[names])\n"
        "    runs.append(names.ids)\n"
        "print(json.dumps(runs))\n",
        encoding="utf-8",
    )
    ran = subprocess.run(
        [sys.executable, str(script)], cwd=CHECKOUT, capture_output=True, text=True, check=True
    )
    first, second = json.loads(ran.stdout)
    assert len(first) > 1000
    assert [name for name in second if name not in set(first)] == []


class _Session:
    """What a nox session function is handed, recording what it runs."""

    def __init__(self, *posargs: str) -> None:
        self.posargs = list(posargs)
        self.ran: list[tuple[str, ...]] = []

    def install(self, *args: str) -> None:
        pass

    def run(self, *args: str, **options: object) -> None:
        self.ran.append(args)


def test_nox_features_hands_its_extra_args_to_behave_in_place_of_the_folder() -> None:
    sys.path.insert(0, str(CHECKOUT))
    import noxfile

    one = "src/pipost_conformance/features/sweeps.feature"
    session = _Session(one)
    noxfile.features(session)
    assert session.ran == [("behave", "--format", "progress", one)]
    every = _Session()
    noxfile.features(every)
    assert every.ran == [("behave", "--format", "progress", noxfile.FEATURES)]


def test_nox_runs_the_tests_in_parallel_and_lets_extra_args_say_otherwise() -> None:
    sys.path.insert(0, str(CHECKOUT))
    import noxfile

    session = _Session("-n", "0", "tests/test_message.py")
    noxfile.tests(session)
    ((*command,),) = session.ran
    assert command[0] == "pytest"
    assert command.index("-n") < command.index("tests/test_message.py")
    assert command[-3:] == ["-n", "0", "tests/test_message.py"]
    assert command[command.index("-n") + 1] != "0"


def test_a_failure_is_named_when_it_happens_not_only_at_the_end(tmp_path: Path) -> None:
    (tmp_path / "test_two.py").write_text(
        "def test_first():\n"
        "    assert 1 + 1 == 3, 'one and one'\n"
        "def test_second():\n"
        "    print('the second test runs')\n",
        encoding="utf-8",
    )
    options = ["-s", "-p", "no:cacheprovider", "-c", "/dev/null", "-p", "tests.conftest"]
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", *options, "test_two.py"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(CHECKOUT)},
        capture_output=True,
        text=True,
        check=False,
    )
    named = "FAILED test_two.py::test_first - AssertionError: one and one"  # and at the end
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert ran.stdout.index(named) < ran.stdout.index("the second test runs"), ran.stdout
