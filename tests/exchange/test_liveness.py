"""A receiving session that can no longer deliver stops being live (issue 38:
items 3, 13 and 15), run as a user would: real ``pi-post listen`` processes.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from pipost import registry
from pipost.address import address_of
from pipost.message import Sender, new_message
from pipost.post import wall_clock_ms
from tests import helpers

from .conftest import CLI, WAIT_S, Exchange

pytestmark = pytest.mark.exchange


def test_a_listener_whose_output_reader_goes_away_stops_and_leaves_the_mail_queued(
    exchange: Exchange,
) -> None:
    """``pi-post listen | head -1``: once the reader has gone, the next message
    cannot enter. The listener ends, as any command whose reader went away (by
    SIGPIPE), says so, and its record goes offline: the letter waits for the next
    start and later senders are told the truth."""
    session_id = "stream-reader-gone"
    listener = exchange.spawn(
        "listen",
        "--session-id",
        session_id,
        cwd=exchange.folder(session_id),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert listener.stdout is not None and listener.stderr is not None
    address = address_of(session_id)
    exchange.until(lambda: registry.read(exchange.root, address) is not None, "it registers")
    exchange.send(address, "the one head reads")
    first = listener.stdout.readline()
    listener.stdout.close()  # the reader goes away, as head does after its line

    later = exchange.send(address, "after the reader left").receipt()
    code = listener.wait(timeout=WAIT_S)
    stderr = listener.stderr.read()

    assert "the one head reads" in first
    assert code == -signal.SIGPIPE, stderr
    assert (exchange.root / "inbox" / address / f"{later.message_id}.json").exists()
    assert f"message {later.message_id} stays queued" in stderr
    record = registry.read(exchange.root, address)
    assert record is not None and record.pid is None, "the record still says it receives"


@pytest.mark.parametrize("limit", range(6, 21))
def test_a_listener_short_of_descriptors_delivers_or_ends_saying_why(
    exchange: Exchange, limit: int
) -> None:
    """Issue 38, item 3: under ``ulimit -n 14`` a listener stayed live and delivered
    nothing, silently (the frame imported datetime from disk, and the failure was
    deferred and retried for good); at 12 or 13 it ended saying only "Too many
    open files". At every limit, a listener now either delivers the letter that
    waited for it, or ends with the limit and its fix named, the letter queued."""
    session_id = f"descriptors-{limit}"
    address = address_of(session_id)
    message = new_message(Sender("process", "script"), "hello", wall_clock_ms())
    helpers.deposit(exchange.root, address, message)  # waits from before the start
    stderr_path = exchange.base / "listener.stderr"
    env = {k: v for k, v in exchange.env.items() if not k.startswith("COVERAGE_")}
    limited = ["/bin/sh", "-c", 'ulimit -n "$0" && exec "$@"', str(limit)]
    with open(stderr_path, "wb") as stderr:
        listener = subprocess.Popen(
            [*limited, *CLI, "listen", "--session-id", session_id],
            cwd=exchange.folder(session_id),
            env=env,  # coverage, which opens files of its own, would not fit the limit
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            start_new_session=True,
        )
    try:
        exchange.until(
            lambda: listener.poll() is not None or "listening as" in stderr_path.read_text(),
            "the listener has taken the mail that waited, or ended",
        )
        if listener.poll() is None:
            listener.send_signal(signal.SIGTERM)
        printed, _ = listener.communicate(timeout=WAIT_S)
    finally:
        if listener.poll() is None:
            listener.kill()
            listener.communicate()
    said = stderr_path.read_text()
    letter = exchange.root / "inbox" / address / message.file_name

    if "listening as" in said:  # its start took the mail that waited
        assert listener.returncode == 0, said
        assert json.loads(printed)["id"] == message.id, said
        assert not letter.exists(), f"live and silent at ulimit -n {limit}: {said}"
    else:
        assert listener.returncode == 1, said
        assert (
            "cannot go on receiving: Too many open files "
            f"(this process may have at most {limit} files open: raise ulimit -n" in said
        )
        assert letter.exists(), "the letter was lost"
        assert printed == b""


def _without_inotify(limit: str) -> list[str]:
    """The start of a command line that runs the rest in a user namespace of its own
    whose inotify ``limit`` is 0: the kernel refuses the watch as it does at a
    reached limit, and nothing outside the namespace is touched."""
    setting = Path("/proc/sys/user") / limit
    if shutil.which("unshare") is None or not setting.exists():
        pytest.skip("needs unshare(1) and per-namespace inotify limits (Linux 5.x)")
    probe = subprocess.run(["unshare", "-U", "-r", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a user namespace here: {probe.stderr.decode().strip()}")
    return ["unshare", "-U", "-r", "/bin/sh", "-c", f'echo 0 > {setting} && exec "$@"', "sh"]


@pytest.mark.parametrize(
    ("limit", "named"),
    [
        ("max_inotify_instances", "fs.inotify.max_user_instances"),
        ("max_inotify_watches", "fs.inotify.max_user_watches"),
    ],
)
def test_a_listener_the_kernel_will_not_watch_for_says_so_once_and_polls(
    exchange: Exchange, limit: str, named: str
) -> None:
    """Issue 38, item 3: with inotify's limits at 0 the listener polled and said
    nothing. Now it says once that it cannot watch, why, and that it polls every
    3 s; and the mail still arrives."""
    session_id = f"unwatched-{limit}"
    address = address_of(session_id)
    stderr_path = exchange.base / "listener.stderr"
    with open(stderr_path, "wb") as stderr:
        listener = subprocess.Popen(
            [*_without_inotify(limit), *CLI, "listen", "--session-id", session_id],
            cwd=exchange.folder(session_id),
            env=exchange.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            start_new_session=True,
        )
    try:
        exchange.until(
            lambda: listener.poll() is not None or "listening as" in stderr_path.read_text(),
            "the listener has started",
        )
        sent = exchange.send(address, "found by polling").receipt()
        letter = exchange.root / "inbox" / address / f"{sent.message_id}.json"
        exchange.until(lambda: not letter.exists(), "the letter is taken")
        listener.send_signal(signal.SIGTERM)
        printed, _ = listener.communicate(timeout=WAIT_S)
    finally:
        if listener.poll() is None:
            listener.kill()
            listener.communicate()
    said = stderr_path.read_text()

    assert json.loads(printed)["id"] == sent.message_id, said
    unwatched = [line for line in said.splitlines() if "cannot watch" in line]
    assert len(unwatched) == 1, said
    assert named in unwatched[0] and unwatched[0].endswith("; polling every 3 s"), said
