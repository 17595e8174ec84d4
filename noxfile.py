"""Nox sessions for pipost.

``nox`` (or ``nox -s check``) installs the project once and runs lint, type
checks, unit/property tests and behave features in sequence in one venv.
"""

import shutil
from pathlib import Path

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["check"]


CONSTRAINTS = "constraints.txt"
"""The development tools, pinned: nox -s lock writes it."""
PACKAGING_TOOLS = ("build", "twine")
"""What nox -s package builds and checks with, beside the dev extra."""
MUTATION_TOOLS = ("mutmut",)
"""What nox -s mutation mutates with, beside the dev extra."""


def _install(session: nox.Session, *tools: str) -> None:
    session.install("-c", CONSTRAINTS, "-e", ".[dev]", *tools)


def _contract(session: nox.Session, options: list[str]) -> None:
    """The contract gate first, so its verdict stands alone (docs/contract.md): against
    the merge base with main (on main, the commit before), saying so when there is no
    history to compare with."""
    session.run("pi-post", "contract", "--against", "auto", *options)


def _lint(session: nox.Session) -> None:
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


def _types(session: nox.Session) -> None:
    session.run("mypy")


PYTEST_WORKERS = ("-n", "auto", "--dist", "worksteal")
"""pytest-xdist, a worker per core; an idle one takes queued tests from a busy one.
On 2 shared cores four workers were no faster than two (CONTRIBUTING.md has the
figures). Extra args come after: -- -n 0 runs the tests in one process."""


def _tests(
    session: nox.Session,
    *,
    env: dict[str, str] | None = None,
    coverage: dict[str, str] | None = None,
) -> None:
    runner = ["coverage", "run", "-m"] if coverage is not None else []
    session.run(
        *runner,
        "pytest",
        *PYTEST_WORKERS,
        *session.posargs,
        env={**(env or {}), **(coverage or {})},
    )


FEATURES = "src/pipost_conformance/features"
"""The kit's features, which ship in pipost (pi-post conformance runs them)."""


def _features(
    session: nox.Session, options: list[str], *, coverage: dict[str, str] | None = None
) -> None:
    """behave over every feature, or as ``options`` say (a feature file, --tags: with no
    path behave reads ./features, the link to the kit's)."""
    runner = ["coverage", "run", "-m"] if coverage is not None else []
    session.run(*runner, "behave", "--format", "progress", *(options or [FEATURES]), env=coverage)


def _coverage_data(session: nox.Session) -> dict[str, str]:
    """The environment of a measured run: its data files, one per process (each child
    the tests start writes its own: [tool.coverage.run] in pyproject.toml), go to a
    fresh folder in the session's venv that anyone may write in and only a file's
    owner may remove, as /tmp, since tests run some commands as an unprivileged user.
    (Not the session's tmp folder: making it would point the tests' TMPDIR there.)"""
    folder = Path(session.virtualenv.location) / "coverage"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    folder.chmod(0o1777)
    return {"COVERAGE_FILE": str(folder / ".coverage")}


def _coverage_floor(session: nox.Session, coverage: dict[str, str]) -> None:
    """Branch coverage of src/pipost by the tests and features just run and every
    process they started, combined into one data file; fails under the floor in
    pyproject.toml ([tool.coverage.report])."""
    session.run("coverage", "combine", "--quiet", env=coverage)
    session.run("coverage", "report", "--skip-covered", "--skip-empty", env=coverage)


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff lint and format check."""
    _install(session)
    _lint(session)


@nox.session
def types(session: nox.Session) -> None:
    """Mypy (strict; configured in pyproject.toml)."""
    _install(session, *MUTATION_TOOLS)  # tools/mutation.py is checked against mutmut's types
    _types(session)


@nox.session
def tests(session: nox.Session) -> None:
    """Pytest (Hypothesis profile 'gate') in a worker per core; extra args are passed
    to pytest (-- -n 0 tests/test_message.py: one module, in one process)."""
    _install(session)
    _tests(session)


@nox.session
def thorough(session: nox.Session) -> None:
    """Pytest with the Hypothesis profile 'thorough'."""
    _install(session)
    _tests(session, env={"HYPOTHESIS_PROFILE": "thorough"})


@nox.session
def features(session: nox.Session) -> None:
    """Behave acceptance features; extra args go to behave instead of the features
    folder (nox -s features -- src/pipost_conformance/features/sweeps.feature)."""
    _install(session)
    _features(session, session.posargs)


@nox.session
def check(session: nox.Session) -> None:
    """Everything CI runs: the contract gate, lint, types, tests and features (with
    branch coverage and its floor), and the conformance kit against the independent
    Node port (ports/node) — one install, one venv."""
    _install(session, *MUTATION_TOOLS)  # for mypy, as in nox -s types
    _contract(session, [])
    _lint(session)
    _types(session)
    coverage = _coverage_data(session)
    _tests(session, coverage=coverage)
    _features(session, [], coverage=coverage)  # the extra args went to pytest
    _coverage_floor(session, coverage)
    _example_port(session, [])


@nox.session
def contract(session: nox.Session) -> None:
    """The contract gate alone; extra args go to it (nox -s contract -- --format github,
    -- --pin, -- bump message; pi-post contract --help)."""
    _install(session)
    _contract(session, session.posargs)


@nox.session
def lock(session: nox.Session) -> None:
    """Rewrite constraints.txt: the newest releases of the development tools (the dev
    extra and what it pulls in), installed in a fresh venv and frozen. Run it, run
    nox -s check, and commit both together."""
    session.install("--upgrade", "-e", ".[dev]", *PACKAGING_TOOLS, *MUTATION_TOOLS)
    frozen = session.run("pip", "freeze", "--exclude-editable", silent=True)
    assert isinstance(frozen, str)
    pins = sorted((line for line in frozen.splitlines() if "==" in line), key=str.lower)
    header = "# The development tools nox installs, pinned. Rewritten by: nox -s lock\n"
    Path(CONSTRAINTS).write_text(header + "\n".join(pins) + "\n", encoding="utf-8")
    session.log(f"{CONSTRAINTS}: {len(pins)} packages pinned")


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks, each reported as a ratio to a floor measured in the same run; writes
    benchmarks/results.json, docs/performance.md and docs/performance.png.
    Extra args go to benchmarks/run_all.py (--full, --with-check)."""
    session.install("-c", CONSTRAINTS, "-e", ".[dev,bench]")
    session.run("python", "benchmarks/run_all.py", *session.posargs)


@nox.session
def mutants(session: nox.Session) -> None:
    """Deliberate faults, each switched on alone against the tests that should catch it;
    fails if one survives. Extra args name the faults to run (default: all)."""
    _install(session)
    session.run("python", "tools/mutants.py", *session.posargs)


@nox.session
def port_faults(session: nox.Session) -> None:
    """The kit's own score on a foreign implementation (tools/port_faults.py; issue
    37): each fault of the table switched on alone in a copy of ports/node and judged
    by pi-post conformance; a periodic report, not part of check. Extra args go to
    it: fault names run those alone, --jobs 2, --markdown FILE (docs/conformance.md)."""
    _install(session)
    session.run("python", "tools/port_faults.py", *session.posargs)


@nox.session
def mutation(session: nox.Session) -> None:
    """mutmut over src/pipost (tools/mutation.py, configured in pyproject.toml's
    [tool.mutmut]), two workers; prints the score per module. A report, not a gate: it
    exits 0 whatever the score. Extra args name modules (nox -s mutation -- address
    policy) or stop it (--minutes N; docs/mutation.md)."""
    session.install("-c", CONSTRAINTS, "-e", ".[dev]", *MUTATION_TOOLS)
    session.run("python", "tools/mutation.py", *session.posargs)


@nox.session
def conformance(session: nox.Session) -> None:
    """pi-post conformance in this checkout's environment; extra args go to it
    (SPEC 11; docs/conformance.md; pi-post conformance --help lists the options):
    nox -s conformance -- --impl "pi-post driver" --report matrix.md
    nox -f ../pipost/noxfile.py -s conformance -- --impl "node shim.mjs" --json report.json
    It runs from the folder nox was started in, where COMMAND and the paths start."""
    _install(session)
    with session.chdir(session.invoked_from):
        session.run("pi-post", "conformance", *session.posargs)


@nox.session
def example_port(session: nox.Session) -> None:
    """The kit against the independent Node implementation in ports/node (issue 13,
    SPEC 11.1), its shim and its command line: its own tests first, then the
    conformance run, which fails unless every MUST row passes. Nox runs it from this
    folder, where the paths below start. Writes the matrix to the session's tmp folder
    (or where --report says); extra args go to pi-post conformance."""
    _install(session)
    _example_port(session, session.posargs)


def _example_port(session: nox.Session, options: list[str]) -> None:
    """The port's own tests, then the kit against both its parts, the driver shim and
    the command line (--require must: exit 0 only if every MUST row passes). Nox runs
    from this folder, where the paths start; the matrix goes to the session's tmp
    folder unless --report says otherwise."""
    session.run("node", "--test", "ports/node/test/", external=True)
    matrix = f"{session.create_tmp()}/port.md"
    report = [] if "--report" in options else ["--report", matrix]
    port = ["--impl", "node ports/node/shim.mjs", "--cli", "node ports/node/cli.mjs"]
    session.run("pi-post", "conformance", *port, "--require", "must", *report, *options)


@nox.session
def package(session: nox.Session) -> None:
    """Build the sdist and the wheel (python -m build) into the session's tmp folder,
    then check both with twine check --strict: the README is their long description."""
    session.install("-c", CONSTRAINTS, *PACKAGING_TOOLS)
    dist = Path(session.create_tmp()) / "dist"
    shutil.rmtree(dist, ignore_errors=True)  # only what this run built is checked
    session.run("python", "-m", "build", "--outdir", str(dist), ".")
    session.run("twine", "check", "--strict", *sorted(str(built) for built in dist.iterdir()))
