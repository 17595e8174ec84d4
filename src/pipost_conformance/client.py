"""The conformance kit's end of the driver protocol (SPEC 11.3; docs/conformance.md):
what the features, the state machines and the runner drive an implementation
through.

:class:`SubprocessDriver` speaks the JSON-lines protocol to a command (``pi-post
driver``, or a port's shim) and reports what breaks the transport
(:class:`TransportError`, :class:`CallTimedOut`); :class:`ProtocolSchema` and
:class:`ValidatingDriver` check every request and answer against the protocol's
schema; :func:`open_driver` gives a driver over a fresh world: pipost in this
process, or the implementation a command runs.

The kit depends on pipost only where it must: the protocol's shared terms
(:mod:`pipost.driver_protocol`: the version, the JSON values, a misuse, the
``Driver`` interface), the schemas it validates against (:mod:`pipost.schemas`,
with the message and record versions pipost reads), and pipost's shim
(:mod:`pipost.driver`) only when :func:`open_driver` runs pipost itself in this
process. Importing this module loads none of pipost's runtime
(tests/test_modules.py).
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import selectors
import shlex
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipost.driver_protocol import DEFAULT_NOW, PROTOCOL, Driver, DriverError, Json, Result

__all__ = [
    "CallTimedOut",
    "Driver",
    "DriverError",
    "Json",
    "ProtocolSchema",
    "Result",
    "SubprocessDriver",
    "TransportError",
    "ValidatingDriver",
    "open_driver",
]


class TransportError(DriverError):
    """The implementation behind a subprocess transport did not answer as the
    protocol says: it exited, hung, or wrote something that is not a response."""


class CallTimedOut(TransportError):
    """The implementation did not answer a call within the transport's timeout."""


class SubprocessDriver:
    """A driver whose operations run in another process: ``command`` (a shell-style
    string or an argv) speaks the JSON-lines protocol on its standard input and
    output, as ``pi-post driver`` does. Its standard error passes through.

    ``open`` starts the process when it is not running (again, after a crash), so a
    scenario that kills an implementation does not take the next one down."""

    def __init__(
        self, command: str | Sequence[str], *, timeout_s: float, validate: bool = False
    ) -> None:
        self.argv = shlex.split(command) if isinstance(command, str) else list(command)
        self.timeout_s = timeout_s
        self.schema = ProtocolSchema() if validate else None
        """With ``validate``, every request and every answer is checked against it."""
        self._process: subprocess.Popen[bytes] | None = None
        self._buffer = b""
        self._requests = itertools.count(1)
        self.implementation: Json = None
        """What the implementation said it is when the last world was opened."""

    def open(self, root: Path, *, home: str, now: int = DEFAULT_NOW) -> None:
        """A fresh world over ``root``: no sessions, the clock at ``now``. An
        implementation that answers with another protocol than the suite's is
        broken for this run (TransportError)."""
        if self._process is None or self._process.poll() is not None:
            self._start()
        opened = self.call("open", root=str(root), home=home, now=now, protocol=PROTOCOL)
        if opened.get("protocol") != PROTOCOL:
            raise TransportError(
                f"open: the implementation answered protocol {opened.get('protocol')!r}; "
                f"the suite speaks {PROTOCOL}"
            )
        self.implementation = opened.get("implementation")

    def call(self, op: str, **args: Json) -> Result:
        process = self._process
        if process is None or process.stdin is None:
            raise TransportError(f"{op} before open: the implementation is not running")
        if self.schema is not None:
            self.schema.check_request(op, args)
        request_id = next(self._requests)
        line = json.dumps({"id": request_id, "op": op, "args": args}) + "\n"
        try:
            process.stdin.write(line.encode("ascii"))
            process.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise TransportError(self._gone(f"{op}: the implementation stopped reading")) from None
        answer = self._answer(op)
        if self.schema is not None:
            self.schema.check_answer(op, answer)
        if answer.get("id") != request_id:
            raise TransportError(f"{op}: the answer is for request {answer.get('id')!r}")
        if "error" in answer:
            raise DriverError(str(answer["error"]))
        result = answer.get("result")
        if not isinstance(result, dict):
            raise TransportError(f"{op}: the answer has no result object: {answer!r}")
        return result

    def close(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        assert process.stdin is not None and process.stdout is not None  # _start pipes both
        process.stdin.close()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()

    def _start(self) -> None:
        self.close()
        self._buffer = b""
        try:
            self._process = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
            )
        except OSError as error:
            raise TransportError(f"cannot run {shlex.join(self.argv)}: {error}") from None

    def _answer(self, op: str) -> dict[str, Json]:
        line = self._read_line(op)
        try:
            answer = json.loads(line)
        except ValueError:
            raise TransportError(f"{op}: not a JSON line: {line[:200]!r}") from None
        if not isinstance(answer, dict):
            raise TransportError(f"{op}: the answer is not an object: {line[:200]!r}")
        return answer

    def _read_line(self, op: str) -> bytes:
        process = self._process
        assert process is not None and process.stdout is not None
        deadline = time.monotonic() + self.timeout_s
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    raise CallTimedOut(f"{op}: no answer within {self.timeout_s:g} s")
                chunk = os.read(process.stdout.fileno(), 65536)
                if not chunk:
                    raise TransportError(self._gone(f"{op}: the implementation closed its output"))
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _gone(self, what: str) -> str:
        assert self._process is not None
        try:
            status = self._process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            return what
        return f"{what} (it exited with status {status})"

    @property
    def pid(self) -> int | None:
        """The implementation's process while it runs, for what a scenario measures
        of it from outside (how much it read); None when it is not running."""
        return None if self._process is None else self._process.pid


class ProtocolSchema:
    """The protocol's JSON Schema (``schemas/driver.v{PROTOCOL}``), checking one request or
    one answer at a time: a violation is a DriverError naming the operation and the
    JSON path of what breaks it (``send: the answer breaks the protocol at
    $.result.receipts[0].address: …``).

    It needs jsonschema, a dependency of the conformance kit (``.[dev]``), not of
    pipost: only a run with ``--validate`` makes one."""

    def __init__(self) -> None:
        import jsonschema
        from referencing import Registry, Resource

        from pipost import message, schemas, session

        # The letters and records it hands over are of every version pipost reads.
        names = [
            f"driver.v{PROTOCOL}",
            *(f"message.v{v}" for v in message.READABLE_VERSIONS),
            *(f"record.v{v}" for v in session.READABLE_VERSIONS),
        ]
        documents = [schemas.load(name) for name in names]
        registry: Registry[Any] = Registry().with_resources(
            (document["$id"], Resource.from_contents(document)) for document in documents
        )
        self._best_match = jsonschema.exceptions.best_match
        base = documents[0]["$id"]

        def validator(pointer: str) -> jsonschema.Draft202012Validator:
            return jsonschema.Draft202012Validator({"$ref": base + pointer}, registry=registry)

        self._request = validator("")
        self._answer = validator("#/$defs/answer")
        self._exchanges = {
            op: validator(f"#/$defs/ops/$defs/{op}") for op in documents[0]["$defs"]["ops"]["$defs"]
        }

    def check_request(self, op: str, args: dict[str, Json]) -> None:
        self._check(op, "request", self._request, {"op": op, "args": args})
        self._check(op, "request", self._exchange(op), {"args": args})

    def check_answer(self, op: str, answer: dict[str, Json]) -> None:
        """An answer line: ``{"id", "result"}`` with the op's result, or ``{"id", "error"}``."""
        self._check(op, "answer", self._answer, answer)
        if "result" in answer:
            self.check_result(op, answer["result"])

    def check_result(self, op: str, result: Json) -> None:
        self._check(op, "answer", self._exchange(op), {"result": result})

    def _exchange(self, op: str) -> Any:
        if op not in self._exchanges:
            raise DriverError(f"{op}: the protocol's schema has no such operation")
        return self._exchanges[op]

    def _check(self, op: str, what: str, validator: Any, instance: Json) -> None:
        error = self._best_match(validator.iter_errors(instance))
        if error is not None:
            raise DriverError(
                f"{op}: the {what} breaks the protocol at {error.json_path}: {error.message}"
            )


class ValidatingDriver:
    """Any driver, its every request and result checked against the protocol's
    schema (``--validate`` for pipost in this process)."""

    def __init__(self, driver: Driver, schema: ProtocolSchema | None = None) -> None:
        self.driver = driver
        self.schema = schema or ProtocolSchema()

    def call(self, op: str, **args: Json) -> Result:
        self.schema.check_request(op, args)
        result = self.driver.call(op, **args)
        self.schema.check_result(op, result)
        return result


_SHARED: dict[str, SubprocessDriver] = {}


def open_driver(
    root: Path,
    *,
    home: str,
    command: str | None = None,
    timeout_s: float | None = None,
    validate: bool | None = None,
) -> Driver:
    """A driver over a fresh world at ``root``: pipost in this process, or, with
    ``command``, the implementation that command runs (one process per command,
    reused by later calls and closed when Python exits).

    ``timeout_s`` (per call) and ``validate`` default to what a conformance run
    passes the state machines it starts: ``PIPOST_TIMEOUT`` (else 60 s) and
    ``PIPOST_VALIDATE=1``."""
    if timeout_s is None:
        timeout_s = float(os.environ.get("PIPOST_TIMEOUT") or 60)
    if validate is None:
        validate = os.environ.get("PIPOST_VALIDATE") == "1"
    if not command:
        from pipost.driver import InProcessDriver  # only to judge pipost itself

        in_process = InProcessDriver(root, home=home)
        return ValidatingDriver(in_process) if validate else in_process
    if command not in _SHARED:
        _SHARED[command] = SubprocessDriver(command, timeout_s=timeout_s, validate=validate)
        atexit.register(_SHARED[command].close)
    driver = _SHARED[command]
    driver.open(root, home=home)
    return driver
