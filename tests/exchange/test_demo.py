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

NARRATION = Path(__file__).with_name("demo-narration.txt")
"""What the demo prints, word for word, with what varies from run to run as <tmp>,
<id> and <time>."""


LIVE_TARGETS = ("s-635bca2d01e3", "s-2ef9bcff383a")
"""alice and pong, live when the demo sends to them."""


def without_what_varies(output: str, tmp: Path) -> str:
    """The demo's folder (made in ``tmp``, named as the demo names it), message ids
    and times put as ``<tmp>``, ``<id>`` and ``<time>``. Addresses stay: each is a
    pure function of a session id the demo chooses (INV-01)."""
    output = re.sub(re.escape(str(tmp)) + r"/pipost-demo-[a-z0-9_]{8}\b", "<tmp>", output)
    output = re.sub(r"\b[0-9]{13}-[0-9a-f]{8}\b", "<id>", output)
    # A send to a live session may say either (SPEC 3.2): its receiver may take
    # longer than the sender's 1.5 s on a loaded machine. To an offline one: queued.
    output = re.sub(
        rf"^  (delivered|queued) ({'|'.join(LIVE_TARGETS)}) ",
        r"  <delivered or queued> \2 ",
        output,
        flags=re.MULTILINE,
    )
    return re.sub(r"\b[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\.[0-9]{3}Z", "<time>", output)


def test_the_demo_shows_delivery_queueing_the_guard_and_a_sweep_that_keeps_mail(
    exchange: Exchange,
) -> None:
    """Its narration, the commands it shows, what they print and what entered each
    context, in order. It is started in a folder not named scripts, so that the
    sender its commands show is the folder they run in, not the one it runs in."""
    tmp = exchange.folder("tmp")  # where the demo makes its folder
    terminal = exchange.folder("terminal")
    # Its own listeners are killed with its group.
    # The user's own settings stay out of the demo's sessions: these would refuse
    # its mail and stage what bob finds.
    mine = {"PI_POST_INBOUND": "refuse", "PI_POST_RESUME": "stage", "PI_SESSION_ID": "mine"}
    demo = exchange.spawn("demo", cwd=terminal, env={"TMPDIR": str(tmp), **mine})
    output, errors = demo.communicate(timeout=60)

    assert demo.returncode == 0, output + errors
    assert errors == ""  # nothing of its listeners' either
    shown = without_what_varies(output, tmp).splitlines()
    assert shown == NARRATION.read_text(encoding="utf-8").splitlines()


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
