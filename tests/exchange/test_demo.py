"""``pi-post demo`` runs its whole narrated exchange between real processes."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest

from pipost import registry

from .conftest import WAIT_S, Exchange

pytestmark = pytest.mark.exchange


def test_the_demo_shows_delivery_queueing_the_guard_and_a_sweep_that_keeps_mail(
    exchange: Exchange,
) -> None:
    demo = exchange.spawn("demo")  # its own listeners are killed with its group
    output, errors = demo.communicate(timeout=60)

    assert demo.returncode == 0, output + errors
    for shown in ("delivered", "queued", "duplicate"):
        assert shown in output, f"the demo never showed {shown!r}"
    final_listing = output.rsplit("$ pi-post list --all\n", 1)[1].splitlines()
    assert len(final_listing) == 1, final_listing  # the sweep left only bob's record
    assert final_listing[0].lstrip().startswith("bob — ")
    assert "1 queued" in final_listing[0]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_the_demo_ended_by_a_signal_stops_its_listeners_and_removes_its_folder(
    exchange: Exchange, signum: signal.Signals
) -> None:
    scratch = exchange.folder("tmp")  # where the demo makes its folder, so none outlives the test
    # A process group of its own, which its listeners join.
    demo = exchange.spawn("demo", env={"TMPDIR": str(scratch)})
    assert demo.stdout is not None
    shown = re.fullmatch(r"# A throwaway post office at (/.+)\n", demo.stdout.readline())
    assert shown is not None, "the demo did not say where its post office is"
    root = Path(shown.group(1))
    assert root.parent.parent == scratch

    def listening() -> list[int]:
        return [record.pid for record in registry.records(root) if record.pid is not None]

    exchange.until(lambda: len(listening()) == 2, "alice and bob listen")
    assert {os.getpgid(pid) for pid in listening()} == {demo.pid}

    demo.send_signal(signum)  # to the demo alone, as `kill` or a closing terminal does
    demo.wait(timeout=WAIT_S)

    assert not root.parent.exists(), f"the demo left {root.parent} behind"
    with pytest.raises(ProcessLookupError):
        os.killpg(demo.pid, 0)  # no listener (nor anything else of the demo) runs on
    assert demo.returncode == 128 + signum  # as a shell reports an end by that signal
