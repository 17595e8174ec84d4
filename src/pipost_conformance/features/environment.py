"""Every scenario gets a scratch folder of its own, removed when it ends, and the
implementation under test (SPEC 11; docs/conformance.md).

The post office root, the caller's home and any directories a scenario makes
live inside the scratch folder; nothing a scenario does reaches ~/.pi or another
scenario.

What runs the scenarios is chosen with behave's userdata:

    (nothing)             pipost in this process, its command line (@cli) included
    -D impl="<command>"   the driver scenarios talk to <command> over JSON lines
    -D cli="<command>"    the @cli scenarios run <command> (a CLI as in SPEC 8)
    -D verdicts=<file>    verdicts per assertion: one JSON line per scenario
    -D validate=1         check every request and answer against the protocol's
                          schema (or PIPOST_VALIDATE=1, as pi-post conformance sets)
    -D timeout=<seconds>  how long a call to impl may take (or PIPOST_TIMEOUT; 60)

With impl and not cli, the @cli scenarios are skipped; with cli and not impl,
everything else is (a CLI-only implementation). With cli, the @cli scenarios
also tagged @pipost-only are skipped: they hold pipost's additions to SPEC 8.
Against another implementation a scenario is skipped, with the reason, when a
step drives pipost itself in this process (a step module that imports pipost,
not only the kit's client) or calls an operation the implementation's ``capabilities``
leave out; which operations a step calls is read from the step modules' source,
through the helpers they call.

With verdicts (pi-post conformance asks for them), a failed assertion of a
``@then`` step marked with ``@checks`` is recorded against the invariants it
names that the scenario pins (its tags), and the scenario goes on; an assertion
naming none of them checks what the scenario relies on, a precondition, and its
failure, like any other, ends the scenario as an error (an unanswered call: a
timeout; an operation not offered: unsupported). Each
line holds the scenario's id, tier and invariants, every assertion with its
outcome, how the scenario stopped, and its driver exchange. Without verdicts a
scenario fails at its first failed assertion, as behave does.
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from behave.model import Feature, Scenario, Step
from behave.runner import Context
from behave.step_registry import StepRegistry

from pipost_conformance.client import (
    CallTimedOut,
    Driver,
    DriverError,
    Json,
    Result,
    SubprocessDriver,
    TransportError,
    open_driver,
)

# The scenarios' ids and tiers come from the runner, as --list gives them.
from pipost_conformance.runner import Listed, list_feature

STEPS = Path(__file__).parent / "steps"

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
    """Step modules that import pipost: they run pipost itself."""

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
    """Whether the statement imports pipost (the kit, which holds the driver's client
    and the golden data, is not pipost)."""
    if isinstance(node, ast.ImportFrom):
        return _is_pipost(node.module or "")
    if isinstance(node, ast.Import):
        return any(_is_pipost(alias.name) for alias in node.names)
    return False


def _is_pipost(module: str) -> bool:
    return module == "pipost" or module.startswith("pipost.")


Exchange = list[dict[str, Json]]
EXCHANGE_TEXT = 300
"""Longer strings of a recorded call are cut to this many characters."""


def _shortened(value: Json) -> Json:
    if isinstance(value, str) and len(value) > EXCHANGE_TEXT:
        return value[:EXCHANGE_TEXT] + f"… ({len(value)} characters)"
    if isinstance(value, list):
        return [_shortened(v) for v in value]
    if isinstance(value, dict):
        return {k: _shortened(v) for k, v in value.items()}
    return value


@dataclass
class Recorder:
    """The driver exchange of the scenario being run."""

    exchange: Exchange = field(default_factory=list)

    def record(self, op: str, args: dict[str, Json], call: Callable[[], Result]) -> Result:
        entry: dict[str, Json] = {"op": op, "args": _shortened(args)}
        self.exchange.append(entry)
        try:
            result = call()
        except DriverError as error:
            entry["error"] = f"{type(error).__name__}: {error}"
            raise
        entry["result"] = _shortened(result)
        return result

    def last_op(self) -> str | None:
        return str(self.exchange[-1]["op"]) if self.exchange else None


class RecordedDriver:
    """pipost in this process, its calls recorded."""

    def __init__(self, driver: Driver, recorder: Recorder) -> None:
        self.driver = driver
        self.recorder = recorder

    def call(self, op: str, **args: Json) -> Result:
        return self.recorder.record(op, args, lambda: self.driver.call(op, **args))


class RecordedSubprocessDriver(SubprocessDriver):
    """The transport to an implementation, its calls recorded, ``open`` included."""

    def __init__(
        self, command: str, recorder: Recorder, *, timeout_s: float, validate: bool
    ) -> None:
        super().__init__(command, timeout_s=timeout_s, validate=validate)
        self.recorder = recorder

    def call(self, op: str, **args: Json) -> Result:
        return self.recorder.record(op, args, lambda: SubprocessDriver.call(self, op, **args))


@dataclass
class Implementation:
    """The implementation under test, as the scenarios meet it."""

    open_driver: Callable[[Path, str], Driver]
    """(root, home) → a driver over a fresh world at root, its calls recorded."""
    cli: list[str] | None
    """The command line of the @cli scenarios; None: pipost's, in this process."""
    run_cli: bool
    """Whether the @cli scenarios run at all."""
    external: RecordedSubprocessDriver | None
    """The transport to an implementation given with impl; None: pipost in this process."""
    capabilities: set[str] | None
    """The operations an external implementation offers; None: pipost, all of them."""
    cli_only: bool
    """Only a command line is under test: nothing else can run."""
    about: Json
    """The implementation's name, version and language, as far as it says."""
    recorder: Recorder

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
            function = inspect.unwrap(match.func)  # a judged step: the step as written
            module = Path(function.__code__.co_filename).name
            if module in source.in_process:
                return f"drives pipost itself in this process ({module}), not through the driver"
            functions.append(function.__name__)
        missing = set().union(*(source.ops_needed(f) for f in functions)) - self.capabilities
        if missing:
            return "the implementation does not offer: " + ", ".join(sorted(missing))
        return None


def _implementation(userdata: dict[str, str]) -> Implementation:
    impl, cli = userdata.get("impl"), userdata.get("cli")
    recorder = Recorder()
    validate = (userdata.get("validate") or os.environ.get("PIPOST_VALIDATE")) == "1"
    timeout_s = float(userdata.get("timeout") or os.environ.get("PIPOST_TIMEOUT") or 60)
    if not impl:
        from pipost.driver import pipost_implementation  # pipost itself, in this process

        return Implementation(
            open_driver=lambda root, home: RecordedDriver(
                open_driver(root, home=home, validate=validate), recorder
            ),
            cli=shlex.split(cli) if cli else None,
            run_cli=True,
            external=None,
            capabilities=None,
            cli_only=bool(cli),
            about=None if cli else pipost_implementation(),  # a CLI says nothing of itself
            recorder=recorder,
        )
    external = RecordedSubprocessDriver(impl, recorder, timeout_s=timeout_s, validate=validate)
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
        about=external.implementation,
        recorder=recorder,
    )


# -- verdicts per assertion (with -D verdicts) ----------------------------------------------


@dataclass
class Verdict:
    """What the scenario being run has shown so far."""

    step: str = ""
    """The step running, as the feature says it."""
    assertions: list[dict[str, Json]] = field(default_factory=list)
    pinned: tuple[str, ...] = ()
    """The invariants the scenario is tagged with: the only ones its assertions judge."""
    unmarked: str = ""
    """An assertion step that failed without naming its invariants."""
    precondition: str = ""
    """An assertion step that failed naming none of the scenario's invariants."""


_NAMED = re.compile(r"\[(INV-\d\d(?: INV-\d\d)*)\] ")


def failed_invariants(
    error: AssertionError, marked: tuple[str, ...], pinned: tuple[str, ...]
) -> tuple[str, ...]:
    """The invariants a failed assertion of a step marked ``marked`` counts against,
    in a scenario that pins ``pinned``: those its message names first in brackets
    (``[INV-06] entered twice``), as the state machines name theirs, when the step
    checks them all, else every one the step is marked with — of them, only those
    the scenario pins. So one step can check two invariants apart, and a step that
    checks another invariant than the scenario's (the order a scenario about the
    cap takes its letters in) only states what the scenario relies on: none."""
    named = _NAMED.match(str(error))
    found = tuple(named.group(1).split()) if named is not None else marked
    return tuple(inv for inv in (found if set(found) <= set(marked) else marked) if inv in pinned)


def judged(function: Callable[..., None]) -> Callable[..., None]:
    """An assertion step that records its outcome against the invariants it names
    (``@checks``) and the scenario pins; a failed assertion of such a step lets the
    scenario go on. One that names none of the scenario's is a precondition of it:
    when it fails the scenario stops, an error; when it holds nothing is recorded."""
    invariants: tuple[str, ...] = getattr(function, "invariants", ())

    @functools.wraps(function)
    def step(context: Context, *args: object, **kwargs: object) -> None:
        verdict: Verdict = context.verdict
        try:
            function(context, *args, **kwargs)
        except AssertionError as error:
            if not invariants:
                verdict.unmarked = verdict.step
                raise
            charged = failed_invariants(error, invariants, verdict.pinned)
            if not charged:
                verdict.precondition = verdict.step
                raise
            said = f"{verdict.step}: {error}"
            verdict.assertions.append(
                {"step": verdict.step, "invariants": list(charged), "passed": False, "error": said}
            )
            return
        pinned: list[Json] = [inv for inv in invariants if inv in verdict.pinned]
        if pinned:
            verdict.assertions.append(
                {"step": verdict.step, "invariants": pinned, "passed": True, "error": ""}
            )

    return step


def judge_assertions(steps: StepRegistry) -> None:
    """Every ``@then`` step (and any generic step marked ``@checks``) is judged."""
    for kind, matchers in steps.steps.items():
        for matcher in matchers:
            if kind == "then" or hasattr(matcher.func, "invariants"):
                matcher.func = judged(matcher.func)


def stopped(
    context: Context, scenario: Scenario, implementation: Implementation
) -> dict[str, Json] | None:
    """How the scenario ended early, if it did: not checked, unsupported, error or
    timeout. A step that cannot observe what the scenario checks (no strace)
    says why in ``context.not_checked``."""
    if "not_checked" in context:
        return {"outcome": "not-checked", "error": str(context.not_checked)}
    if "skip_reason" in context:
        return {"outcome": "unsupported", "error": str(context.skip_reason)}
    if scenario.hook_failed:
        return {"outcome": "error", "error": "a hook of features/environment.py failed"}
    for step in scenario.all_steps:
        if not step.status.has_failed():
            continue
        said = f"{step.keyword} {step.name}"
        error = step.exception
        if error is None:
            return {"outcome": "error", "error": f"{said}: {step.status.name} step"}
        text = f"{said}: {type(error).__name__}: {error}"
        if isinstance(error, CallTimedOut):
            return {"outcome": "timeout", "error": text}
        op = implementation.recorder.last_op()
        offered = implementation.capabilities
        if isinstance(error, DriverError) and offered is not None and op not in offered:
            return {"outcome": "unsupported", "error": f"the implementation does not offer: {op}"}
        if isinstance(error, AssertionError):
            why = (
                "the step names no invariant (@checks)"
                if context.verdict.unmarked == said
                else "a precondition failed: the step checks none of the scenario's invariants"
                if context.verdict.precondition == said
                else "a step that is not an assertion failed"
            )
            return {"outcome": "error", "error": f"{said}: {why}: {error}"}
        return {"outcome": "error", "error": text}
    return None


def before_all(context: Context) -> None:
    context.implementation = _implementation(context.config.userdata)
    context.step_source = StepSource.read(STEPS)
    verdicts = context.config.userdata.get("verdicts")
    context.verdicts = Path(verdicts) if verdicts else None
    if context.verdicts is not None:
        judge_assertions(context._runner.step_registry)
        run = {"kind": "run", "implementation": context.implementation.about}
        context.verdicts.write_text(json.dumps(run) + "\n", encoding="utf-8")


def after_all(context: Context) -> None:
    if "implementation" not in context:
        return  # before_all failed: there is nothing to close
    implementation: Implementation = context.implementation
    if implementation.external is not None:
        implementation.external.close()


def before_feature(context: Context, feature: Feature) -> None:
    context.listed = {id(scenario): listed for scenario, listed in list_feature(feature)}


def before_scenario(context: Context, scenario: Scenario) -> None:
    implementation: Implementation = context.implementation
    implementation.recorder.exchange = []
    context.verdict = Verdict(pinned=context.listed[id(scenario)].invariants)
    # The registry the runner matches steps with (behave replaces the module's own).
    steps: StepRegistry = context._runner.step_registry
    reason = implementation.reason_to_skip(scenario, context.step_source, steps)
    if reason is not None:
        context.skip_reason = reason
        scenario.skip(reason)  # type: ignore[no-untyped-call]  # behave.model has no types here
        return
    # Canonical, so that paths a scenario expects compare equal to the realpaths
    # pipost records even where the temporary folder sits behind a symlink.
    scratch = Path(os.path.realpath(tempfile.mkdtemp(prefix="pipost-feature-")))
    context.scratch = scratch
    context.add_cleanup(shutil.rmtree, scratch)


def before_step(context: Context, step: Step) -> None:
    context.verdict.step = f"{step.keyword} {step.name}"


def after_scenario(context: Context, scenario: Scenario) -> None:
    implementation: Implementation = context.implementation
    ending = stopped(context, scenario, implementation)
    if implementation.external is not None and any(
        isinstance(step.exception, TransportError) for step in scenario.all_steps
    ):
        # An answer may still come, or the stream is out of step with the requests:
        # the next scenario starts the implementation afresh.
        implementation.external.close()
    if context.verdicts is None:
        return
    listed: Listed = context.listed[id(scenario)]
    line = {
        "kind": "scenario",
        **asdict(listed),
        "assertions": context.verdict.assertions,
        "stopped": ending,
        "exchange": implementation.recorder.exchange,
    }
    with context.verdicts.open("a", encoding="utf-8") as verdicts:
        verdicts.write(json.dumps(line) + "\n")
