"""Every directory a scenario of these features registers or resolves exists,
under the scenario's scratch folder (SPEC 11): an implementation that
canonicalises paths through the file system, refusing a directory that does not
exist, passes them as pipost does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pipost_conformance.runner import FEATURES as KIT_FEATURES

REPO = Path(__file__).resolve().parent.parent
FEATURES = ["addresses", "bad_input", "interop", "resolution"]
FEATURES += ["registry_presence", "messages", "reading", "sweeps"]

STRICT = """
import os, sys
from pipost.driver import InProcessDriver, serve
from pipost.driver_protocol import Json, Result
from pipost.resolve import Caller


def strict(path: str) -> str:
    return os.path.realpath(path, strict=True)  # FileNotFoundError: the driver's io_error


class Strict(InProcessDriver):
    def _caller(self, cwd: str, home: str | None) -> Caller:
        strict(cwd)
        return Caller(cwd=cwd, home=home or self.home, canonical=strict)

    def op_register(
        self, session_id: str, cwd: str, name: str | None = None, pid: int | None = None
    ) -> Result:
        given = {key: value for key, value in (("name", name), ("pid", pid)) if value is not None}
        return super().op_register(session_id, strict(cwd), **given)


serve(sys.stdin, sys.stdout, lambda root, home, now: Strict(root, home=home, now=now))
"""


def test_an_implementation_that_canonicalises_through_the_file_system_passes(
    tmp_path: Path,
) -> None:
    shim = tmp_path / "strict.py"
    shim.write_text(STRICT, encoding="utf-8")
    features = [str(KIT_FEATURES / f"{name}.feature") for name in FEATURES]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "behave",
            "--format",
            "progress",
            "-D",
            f"impl={sys.executable} {shim}",
            *features,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " 0 failed, 0 skipped" in done.stdout, done.stdout[-500:]
