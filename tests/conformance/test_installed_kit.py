"""The kit without a checkout (docs/conformance.md): pipost's wheel holds every
feature, step, state machine and recording of src/pipost_conformance, and an
installed pipost runs ``pi-post conformance`` from a folder outside the
repository, taking everything from where it is installed; without the
``conformance`` extra it says what to install. What the kit cannot ship (pipost's
own tests) is named in the runner, in step with those tests' docstrings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from pipost import cli
from pipost_conformance import runner

REPO = Path(__file__).resolve().parents[2]
KIT = REPO / "src" / "pipost_conformance"
TIMEOUT_S = 300


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pipost's wheel, built from this tree as pip would build it."""
    out = tmp_path_factory.mktemp("wheel")
    build = [sys.executable, "-m", "hatchling", "build", "--target", "wheel"]
    subprocess.run(
        [*build, "--directory", str(out)],
        cwd=REPO,
        capture_output=True,
        timeout=TIMEOUT_S,
        check=True,
    )
    (built,) = out.glob("pipost-*.whl")
    return built


def kit_files() -> set[str]:
    """Every file of the kit in this repository, as the wheel names it."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", "."], cwd=KIT, capture_output=True, text=True, check=True
    )
    return {f"pipost_conformance/{name}" for name in listed.stdout.split("\0") if name}


def test_the_wheel_holds_every_feature_step_machine_and_recording(wheel: Path) -> None:
    shipped = set(zipfile.ZipFile(wheel).namelist())
    files = kit_files()
    assert files - shipped == set()
    parts = (
        "features",
        "features/steps",
        "machines",
        "fixtures/interop/messages",
        "vectors/letter",
    )
    for part in parts:
        assert any(name.startswith(f"pipost_conformance/{part}/") for name in files), part
    assert "pipost_conformance/vectors/v1.manifest.json" in shipped
    assert "pipost_conformance/features/environment.py" in shipped
    assert "pipost/schemas/conformance-report.v1.schema.json" in shipped  # the steps read it


def _environment(venv: Path) -> dict[str, str]:
    """What the installed pi-post runs with: its own folder first on PATH and no
    path into this repository."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
    return env


def test_an_installed_kit_runs_from_a_folder_outside_the_repository(
    wheel: Path, tmp_path: Path
) -> None:
    """A fresh virtual environment gets the wheel alone (no network: the extra's
    distributions are lent from this environment afterwards); the kit it installed
    says what is missing, then runs from a folder of its own, reading its features
    and machines where it is installed."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps"]
    subprocess.run([*install, "--no-index", "-q", str(wheel)], check=True, timeout=TIMEOUT_S)
    porter = tmp_path / "port"
    porter.mkdir()
    env = _environment(venv)

    def conformance(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [str(venv / "bin" / "pi-post"), "conformance", *args]
        return subprocess.run(
            argv, cwd=porter, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
        )

    without_extra = conformance("--list")
    assert without_extra.returncode == 2, without_extra.stdout + without_extra.stderr
    assert without_extra.stderr == (
        "pi-post: the conformance kit runs with behave, hypothesis, jsonschema, pytest, "
        'which are not installed: pip install "pipost[conformance]"\n'
    )
    site = sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)})
    lent = Path(site) / "lent-conformance-extra.pth"
    lent.write_text(sysconfig.get_path("purelib") + "\n", encoding="utf-8")
    where = subprocess.run(
        [str(python), "-c", "import pipost_conformance as kit; print(kit.__file__)"],
        cwd=porter,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(where.stdout.strip()).is_relative_to(venv)  # not this repository's src/

    listed = conformance("--list", "--features", "features/addresses.feature")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    ids = [line.split("\t")[0] for line in listed.stdout.splitlines()]
    assert "addresses/every-vector-of-the-addresses-control-characters-included" in ids
    assert "machines/test_registry_machine.py::TestRegistryMachine::runTest" in ids

    ran = conformance(
        *("--impl", "pi-post driver", "--features", "features/addresses.feature"),
        *("--name", "every vector", "--no-machines"),
        *("--report", "m.html", "--json", "r.json", "--junit", "j.xml"),
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    report = json.loads((porter / "r.json").read_text(encoding="utf-8"))
    assert report["implementation"]["name"] == "pipost"
    assert [(s["result"], s["location"].split(":")[0]) for s in report["scenarios"]] == [
        ("pass", "features/addresses.feature")
    ]
    assert (porter / "m.html").read_text(encoding="utf-8").startswith("<!doctype html>")
    assert "<testcase " in (porter / "j.xml").read_text(encoding="utf-8")


def test_a_missing_dependency_is_named_from_the_extra_alone() -> None:
    requirements = [
        "matplotlib>=3.10; extra == 'bench'",
        'behave>=1.3; extra == "conformance"',
        "pytest>=8; extra=='conformance'",
        "nox; extra == 'dev'",
    ]
    installed = {"behave", "nox"}
    missing = runner.missing_dependencies(requirements, installed.__contains__)
    assert missing == ["pytest"]


def test_this_environment_has_the_whole_extra() -> None:
    requirements, installed = runner._installed_metadata()
    assert runner.missing_dependencies(requirements, lambda name: False) == [
        "behave",
        "hypothesis",
        "jsonschema",
        "pytest",
    ]
    assert runner.missing_dependencies(requirements, installed) == []


def test_the_help_names_every_option_the_command_takes() -> None:
    """pi-post conformance --help is pipost.cli's text (the kit is not imported for
    it); its usage and its option lines name exactly the options the runner takes."""
    text = cli.HELP["conformance"]
    usage = text.split("\n\n")[0]
    in_usage = {word.strip("[]") for word in usage.split() if word.startswith("[--")}
    explained = {line.split()[0] for line in text.splitlines() if line.startswith("  --")}
    taken = {"--" + name.replace("_", "-") for name in vars(runner.parse_args([]))}
    assert in_usage == explained == taken


def test_the_modules_pipost_alone_checks_are_those_the_runner_names() -> None:
    """What the kit cannot ship is named in the runner (CHECKED_ON_PIPOST_ALONE):
    the modules of tests/invariants and tests/exchange by the invariants their
    docstrings name."""
    found: dict[str, list[str]] = {}
    for folder in (REPO / "tests" / "invariants", REPO / "tests" / "exchange"):
        for path in sorted(folder.glob("test_*.py")):
            for invariant in runner.module_invariants(path):
                found.setdefault(invariant, []).append(path.relative_to(REPO).as_posix())
    assert found == runner.CHECKED_ON_PIPOST_ALONE
