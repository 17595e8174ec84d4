"""Every scenario gets a scratch folder of its own, removed when it ends, and the
implementation under test (SPEC 11; docs/conformance.md).

The post office root, the caller's home and any directories a scenario makes
live inside the scratch folder; nothing a scenario does reaches ~/.pi or another
scenario.

What runs the scenarios is chosen with behave's userdata:

    (nothing)             pipost in this process, its command line (@cli) included
    -D impl="<command>"   the driver scenarios talk to <command> over JSON lines
    -D cli="<command>"    the @cli scenarios run <command> (a CLI as in SPEC 8)
    -D skip_log=<file>    one JSON line per skipped scenario, with the reason
    -D validate=1         check every request and answer against the protocol's
                          schema (or PIPOST_VALIDATE=1, as tools/conformance.py sets)
    -D timeout=<seconds>  how long a call to impl may take (or PIPOST_TIMEOUT; 60)

With impl and not cli, the @cli scenarios are skipped; with cli and not impl,
everything else is (a CLI-only implementation). With cli, the @cli scenarios
also tagged @pipost-only are skipped: they hold pipost's additions to SPEC 8.
Against another implementation a scenario is skipped, with the reason, when a
step drives pipost itself in this process (a step module that imports pipost
beyond its driver) or calls an operation the implementation's ``capabilities``
leave out; which operations a step calls is read from the step modules' source,
through the helpers they call.
"""

from __future__ import annotations

import ast
import json
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from behave.model import Scenario
from behave.runner import Context
from behave.step_registry import StepRegistry

from pipost.driver import Driver, SubprocessDriver, open_driver

STEPS = Path(__file__).parent / "steps"
# Steps share the test suite's helpers (tests/helpers.py) rather than copies of them.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
CLI_TAG = "cli"
PIPOST_ONLY_TAG = "pipost-only"
"""A command-line scenario of what pipost adds beyond SPEC 8 (doctor, --json)."""


@dataclass
class StepSource:
    """What the step modules' source says about each function: the driver
    operations it calls directly (``x.call("op", …)``, ``x.act("op", …)``) and the
    names it calls, so that helpers count for the steps that use them."""

    ops: dict[str, set[str]] = field(default_factory=dict)
    calls: dict[str, set[str]] = field(default_factory=dict)
    in_process: set[str] = field(default_factory=set)
    """Step modules that import pipost beyond its driver: they run pipost itself."""

    @classmethod
    def read(cls, folder: Path) -> StepSource:
        found = cls()
        for path in sorted(folder.glob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            if any(_imports_pipost_itself(node) for node in tree.body):
                found.in_process.add(path.name)
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef):
                    found._add_function(node)
        return found

    def _add_function(self, function: ast.FunctionDef) -> None:
        # Functions of one name merge: a step may seem to need more, never less.
        ops = self.ops.setdefault(function.name, set())
        calls = self.calls.setdefault(function.name, set())
        for node in ast.walk(function):
            if not isinstance(node, ast.Call):
                continue
            callee = node.func
            name = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", "")
            calls.add(name)
            first = node.args[0] if node.args else None
            if name in ("call", "act") and isinstance(first, ast.Constant):
                ops.add(str(first.value))

    def ops_needed(self, function: str) -> set[str]:
        needed: set[str] = set()
        seen: set[str] = set()
        pending = [function]
        while pending:
            name = pending.pop()
            if name in seen or name not in self.ops:
                continue
            seen.add(name)
            needed |= self.ops[name]
            pending += self.calls[name]
        return needed


def _imports_pipost_itself(node: ast.stmt) -> bool:
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        return module.startswith("pipost") and module != "pipost.driver"
    if isinstance(node, ast.Import):
        return any(alias.name.startswith("pipost") for alias in node.names)
    return False


@dataclass
class Implementation:
    """The implementation under test, as the scenarios meet it."""

    open_driver: Callable[[Path, str], Driver]
    """(root, home) → a driver over a fresh world at root."""
    cli: list[str] | None
    """The command line of the @cli scenarios; None: pipost's, in this process."""
    run_cli: bool
    """Whether the @cli scenarios run at all."""
    external: SubprocessDriver | None
    """The transport to an implementation given with impl; None: pipost in this process."""
    capabilities: set[str] | None
    """The operations an external implementation offers; None: pipost, all of them."""
    cli_only: bool
    """Only a command line is under test: nothing else can run."""
    skip_log: Path | None

    def reason_to_skip(
        self, scenario: Scenario, source: StepSource, steps: StepRegistry
    ) -> str | None:
        if CLI_TAG in scenario.effective_tags:
            if not self.run_cli:
                return "a command-line scenario: run it with --cli"
            if self.cli is not None and PIPOST_ONLY_TAG in scenario.effective_tags:
                return "pipost's own addition to the command line (doctor, --json), not SPEC 8"
            return None
        if self.cli_only:
            return "CLI-only implementation: the scenario needs the driver"
        if self.capabilities is None:
            return None
        functions = []
        for step in scenario.all_steps:
            match = steps.find_match(step)
            if match is None:
                return None  # undefined: let behave report it
            module = Path(match.func.__code__.co_filename).name
            if module in source.in_process:
                return f"drives pipost itself in this process ({module}), not through the driver"
            functions.append(match.func.__name__)
        missing = set().union(*(source.ops_needed(f) for f in functions)) - self.capabilities
        if missing:
            return "the implementation does not offer: " + ", ".join(sorted(missing))
        return None


def _implementation(userdata: dict[str, str]) -> Implementation:
    impl, cli = userdata.get("impl"), userdata.get("cli")
    skip_log = Path(userdata["skip_log"]) if userdata.get("skip_log") else None
    validate = (userdata.get("validate") or os.environ.get("PIPOST_VALIDATE")) == "1"
    timeout_s = float(userdata.get("timeout") or os.environ.get("PIPOST_TIMEOUT") or 60)
    if not impl:
        return Implementation(
            open_driver=lambda root, home: open_driver(root, home=home, validate=validate),
            cli=shlex.split(cli) if cli else None,
            run_cli=True,
            external=None,
            capabilities=None,
            cli_only=bool(cli),
            skip_log=skip_log,
        )
    external = SubprocessDriver(impl, timeout_s=timeout_s, validate=validate)
    probe = Path(tempfile.mkdtemp(prefix="pipost-capabilities-"))
    try:
        external.open(probe / "post", home=str(probe))
        ops = external.call("capabilities")["ops"]
    finally:
        shutil.rmtree(probe)
    assert isinstance(ops, list), f"capabilities answered {ops!r}, not a list of operations"

    def open_external(root: Path, home: str) -> Driver:
        external.open(root, home=home)
        return external

    return Implementation(
        open_driver=open_external,
        cli=shlex.split(cli) if cli else None,
        run_cli=bool(cli),
        external=external,
        capabilities={str(op) for op in ops},
        cli_only=False,
        skip_log=skip_log,
    )


def before_all(context: Context) -> None:
    context.implementation = _implementation(context.config.userdata)
    context.step_source = StepSource.read(STEPS)


def after_all(context: Context) -> None:
    if "implementation" not in context:
        return  # before_all failed: there is nothing to close
    implementation: Implementation = context.implementation
    if implementation.external is not None:
        implementation.external.close()


def before_scenario(context: Context, scenario: Scenario) -> None:
    implementation: Implementation = context.implementation
    # The registry the runner matches steps with (behave replaces the module's own).
    steps: StepRegistry = context._runner.step_registry
    reason = implementation.reason_to_skip(scenario, context.step_source, steps)
    if reason is not None:
        if implementation.skip_log is not None:
            with implementation.skip_log.open("a", encoding="utf-8") as log:
                entry = {"location": str(scenario.location), "reason": reason}
                log.write(json.dumps(entry) + "\n")
        scenario.skip(reason)  # type: ignore[no-untyped-call]  # behave.model has no types here
        return
    # Canonical, so that paths a scenario expects compare equal to the realpaths
    # pipost records even where the temporary folder sits behind a symlink.
    scratch = Path(os.path.realpath(tempfile.mkdtemp(prefix="pipost-feature-")))
    context.scratch = scratch
    context.add_cleanup(shutil.rmtree, scratch)
