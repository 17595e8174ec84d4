"""How a state machine reaches the implementation it judges: through the driver
(SPEC 11) only — pipost in this process by default, or the command a conformance
run names in PIPOST_IMPL (docs/conformance.md) — and the files on disk.

A machine module's docstring says which invariants it states, its tier
(``Tier: must`` or ``Tier: should``) and, in a line ``Operations: a, b, c.``, the
operations it calls; the conftest reads the implementation's ``capabilities`` once
per test and skips the test, naming what is missing, when one is not offered.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from pipost_conformance.client import Driver, Json, Result, open_driver
from pipost_conformance.machines.verdict import SetupFailed

SCRATCH = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
"""Where each example's world goes: a memory filesystem where there is one, as
every file a deposit or a record writes is flushed (fsync), which on a disk costs
milliseconds. What reaches the disk is test_power_loss.py's subject, not theirs."""


IMPLEMENTATION = "PIPOST_IMPL"
"""The variable a conformance run sets to the command of the implementation. The
runner runs a module of machines/ as a port check when it names it."""


def new_driver(base: Path) -> Driver:
    """A driver over a fresh world at ``base/post``, ``~`` meaning ``base``."""
    return open_driver(base / "post", home=str(base), command=os.environ.get(IMPLEMENTATION))


def operations_of(docstring: str | None) -> list[str] | None:
    """The operations a module's docstring says it calls (``Operations: a, b.``,
    up to the end of its paragraph); None when it names none."""
    _, found, rest = (docstring or "").partition("\nOperations:")
    if not found:
        return None
    paragraph = rest.split("\n\n", 1)[0]
    return [op.strip() for op in paragraph.replace("\n", " ").rstrip(". ").split(",")]


def missing_operations(needed: Iterable[str]) -> list[str]:
    """The operations of ``needed`` the implementation's capabilities leave out."""
    base = Path(tempfile.mkdtemp(prefix="pipost-capabilities-", dir=SCRATCH)).resolve()
    try:
        offered = new_driver(base).call("capabilities").get("ops")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if not isinstance(offered, list):
        raise SetupFailed(f"capabilities answered no list of ops: {offered!r}")
    return [op for op in needed if op not in offered]


def setup(result: Result, what: str) -> Result:
    """The result of an operation the machine needs to build its world (set the
    clock, start a process, register): a refusal or a failure there is an error of
    the run, not a verdict."""
    if "refused" in result or "failed" in result:
        raise SetupFailed(f"{what}: {result}")
    return result


def integer(value: Json, what: str) -> int:
    """A field of a result that must be an integer for the machine to go on."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise SetupFailed(f"{what} is not an integer: {value!r}")
    return value


def refusal_code(result: Result) -> str | None:
    """The code of a refusal (``{"refused": {"code", "text", …facts}}``), None when
    the result is no refusal. A refusal that is not such an object breaks the
    protocol: an error of the run, not a verdict."""
    if "refused" not in result:
        return None
    reason = result["refused"]
    if not isinstance(reason, dict) or not isinstance(reason.get("code"), str):
        raise SetupFailed(f"a refusal without its code: {result}")
    return str(reason["code"])
