"""Verdicts of the state machines: every assertion names the invariant it checks.

A conformance run (pi-post conformance) reads which invariants a failing machine
broke from the failure's message, which starts with the ids in brackets
(``[INV-15] presence of s-… is live, expected offline``); a failure without them
counts as an error of the run, not against any invariant. So a machine asserts an
invariant only through :func:`check` or :func:`violated`, and everything else —
a world operation the implementation refused, a fixture that could not be built —
is a precondition: ``hypothesis.assume``/``reject``, or :class:`SetupFailed`.
"""

from __future__ import annotations

import re
from typing import NoReturn

_ID = re.compile(r"INV-\d\d")


class SetupFailed(Exception):
    """The world a machine needs could not be made (for example the implementation
    refused to set its clock): an error of the run, not a verdict on an invariant.
    Deliberately not an AssertionError."""


def violated(invariant: str, message: str) -> NoReturn:
    """Fail the machine on ``invariant`` (an id such as ``INV-08``)."""
    raise AssertionError(f"[{_valid(invariant)}] {message}")


def check(condition: object, invariant: str, message: str) -> None:
    """Fail the machine on ``invariant`` unless ``condition`` holds. The id is
    checked even when the condition holds, so a misspelt one shows at once."""
    if not condition:
        violated(invariant, message)
    _valid(invariant)


def _valid(invariant: str) -> str:
    if not _ID.fullmatch(invariant):
        raise ValueError(f"not an invariant id: {invariant!r}")
    return invariant
