"""One driver call of an implementation, its system calls traced: a second process
of the implementation started under ``strace -f -yy`` (Linux), opened on the
scenario's root, asked one operation, and stopped; ``syscalls`` reads the trace.

Where nothing can trace (no ``strace`` on PATH, ptrace refused, not Linux),
``why_untraceable`` says why, and the scenarios that need a trace are *not
checked* rather than passed (docs/conformance.md).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import TracebackType

from pipost_conformance import syscalls
from pipost_conformance.client import Json, Result, SubprocessDriver

STRACE = "strace"
PROBE_TIMEOUT_S = 30
PIPOST_DRIVER = [sys.executable, "-m", "pipost", "driver"]
"""What is traced when the kit runs pipost in its own process: pipost's driver."""


@functools.cache
def why_untraceable() -> str | None:
    """Why no trace can be taken here, or None when strace works."""
    if not sys.platform.startswith("linux"):
        return f"system calls are traced with strace, on Linux only (this is {sys.platform})"
    strace = shutil.which(STRACE)
    if strace is None:
        return "system calls are traced with strace, which is not on PATH"
    probe = [strace, "-f", "-qq", "-o", os.devnull, "-e", "trace=fsync", sys.executable, "-c", ""]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"strace did not run: {error}"
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return f"strace cannot trace here: {said}"
    return None


def traced_argv(command: list[str], trace: Path) -> list[str]:
    """``command`` under strace, its calls of interest written to ``trace``."""
    calls = ",".join(syscalls.TRACED)
    # -f: children too; -yy: the path of every descriptor; -s: data strings kept short.
    options = ["-f", "-qq", "-yy", "-s", "32", "-o", str(trace), "-e", f"trace={calls}"]
    return [STRACE, *options, *command]


class Traced:
    """An implementation process under strace, opened on ``root``: its ``call``s are
    traced until it is closed, and then ``events`` holds what it did.

        with Traced(command, root, home=home, timeout_s=60) as traced:
            traced.call("send", …)
        traced.events
    """

    def __init__(self, command: list[str], root: Path, *, home: str, timeout_s: float) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="pipost-trace-")
        self._trace = Path(self._folder.name) / "trace"
        self._driver = SubprocessDriver(traced_argv(command, self._trace), timeout_s=timeout_s)
        self.root = root
        self.home = home
        self.events: list[syscalls.Event] = []
        self.text = ""

    def __enter__(self) -> Traced:
        try:
            self._driver.open(self.root, home=self.home)
        except BaseException:
            self._stop()
            raise
        return self

    def call(self, op: str, **args: Json) -> Result:
        return self._driver.call(op, **args)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop()

    def _stop(self) -> None:
        """Stop the process (strace ends with it) and read what it did."""
        self._driver.close()
        if self._trace.exists():
            self.text = self._trace.read_text(encoding="utf-8", errors="surrogateescape")
            self.events = syscalls.events(self.text)
        self._folder.cleanup()
