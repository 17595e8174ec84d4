"""Failures are contained (SPEC 3, 9; INV-23), on pipost alone: not a check of a
port, as it fills pipost's disk and fails pipost's own calls, which no driver
operation can ask for.

A full disk fails a send cleanly: a clear error, no letter and no temporary file
left in the mailbox, the letters queued before it intact, and the next send after
space comes back works. An unwritable registry does not stop a receiving session:
it starts, takes its mail, and counts the heartbeats it could not write. A
mailbox folder the sender may not write refuses the deposit clearly and holds
nothing half-written.

Most cases run in pyfakefs, which can fill a disk and, pretending to be a user
other than root, enforce folder permissions (the suite may run as root). Two
moments pyfakefs cannot make fail — the flush of the letter and the rename into
place — run in a real tmp folder with that one call made to fail.
"""

from __future__ import annotations

import errno
import io
import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyfakefs import helpers as fake_helpers
from pyfakefs.fake_filesystem import FakeFilesystem
from pyfakefs.fake_filesystem_unittest import Patcher

from pipost import cli, files, mailbox, registry, session
from pipost.address import address_of
from pipost.host import Delivery, Host
from pipost.message import Message, Sender, new_message
from pipost.post import Post, Refused, os_caller
from tests import helpers
from tests.helpers import NOW, FakeProcessTable, FixedClock, entered_count

ROOT = Path("/home/dev/.pi/agent/post")
HOME = "/home/dev"
WORK = "/home/dev/work"
SESSION = "contained-session"
ADDRESS = address_of(SESSION)
INBOX = ROOT / "inbox" / ADDRESS
REGISTRY = ROOT / "registry"
READ_ONLY = 0o500
DISK = 10 * 1024 * 1024
TICKS = itertools.count(NOW)


class Recording:
    """A context that takes everything and remembers the bodies."""

    def __init__(self) -> None:
        self.bodies: list[str] = []

    def holds(self, message_id: str) -> bool | None:
        return None

    def enter(self, delivery: Delivery) -> bool:
        self.bodies.append(delivery.message.body)
        return True


@pytest.fixture
def fake_fs(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeFilesystem]:
    """A fake filesystem in which we are an ordinary user (uid 1), with a home.

    pyfakefs fakes the uid of getuid and of new files but not geteuid, which
    pipost compares owners with (files.check_private): it is made to agree here.
    pyfakefs also stands in for fcntl, with a flock that does nothing — locking is
    not what these tests are about, and each of them runs one party at a time.
    The folder watch keeps the real os module (skipped), as it only needs a pipe."""
    with Patcher(allow_root_user=False, additional_skip_names=["pipost.watch"]) as patcher:
        monkeypatch.setattr(os, "geteuid", fake_helpers.get_uid)
        assert patcher.fs is not None
        patcher.fs.create_dir(WORK)
        patcher.fs.set_disk_usage(DISK)  # from here on pyfakefs counts what is used
        yield patcher.fs


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    context = cli.Invocation(
        environ={"PI_POST_DIR": str(ROOT), "HOME": HOME},
        cwd=WORK,
        stdin=io.StringIO(""),
        stdout=stdout,
        stderr=stderr,
        clock=TICKS.__next__,  # later sends get later ids: oldest first is send order
        processes=FakeProcessTable(),
        receipt_wait=0.0,
    )
    return cli.run(argv, context), stdout.getvalue(), stderr.getvalue()


def send(body: str) -> tuple[int, str, str]:
    return run_cli(["send", "--to", ADDRESS, "--body", body])


def letters(folder: Path) -> dict[str, bytes]:
    """Every entry of the mailbox folder (dot-files and temporaries included)."""
    return {name: (folder / name).read_bytes() for name in sorted(os.listdir(folder))}


def queued_bodies(root: Path) -> list[str]:
    return [
        letter.content.body if isinstance(letter.content, Message) else letter.content.reason
        for letter in helpers.peek(root, ADDRESS)
    ]


def register_offline(root: Path) -> None:
    registry.mark_offline(root, registry.register(root, SESSION, WORK, NOW, pid=4242), NOW)


# -- a full disk ------------------------------------------------------------------------


@pytest.mark.parametrize("room", [0, 40, 200], ids=["no room", "room for a little", "almost"])
def test_a_full_disk_fails_a_send_cleanly(fake_fs: FakeFilesystem, room: int) -> None:
    register_offline(ROOT)
    for body in ("first", "second"):
        assert send(body)[0] == 0
    before = letters(INBOX)
    _, used, _ = fake_fs.get_disk_usage()
    fake_fs.set_disk_usage(used + room)

    status, out, err = send("x" * 400)  # larger than the room left, whatever it is

    assert (status, out) == (1, "")
    assert err.startswith("pi-post: ") and "No space left on device" in err, err
    assert "Traceback" not in err
    assert letters(INBOX) == before, "nothing visible, nothing half-written, nothing lost"

    fake_fs.set_disk_usage(DISK)  # space comes back: the mailbox still works
    status, out, _ = send("after the disk was cleared")
    assert status == 0 and out.startswith("queued ")
    assert queued_bodies(ROOT) == ["first", "second", "after the disk was cleared"]


def _fails_once(real: Callable[..., object], armed: list[bool]) -> Callable[..., object]:
    def failing(*args: object, **kwargs: object) -> object:
        if armed and armed.pop():
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(*args, **kwargs)

    return failing


@pytest.mark.parametrize("moment", ["flush of the letter", "rename into place"])
def test_a_disk_that_fills_late_in_a_deposit_leaves_nothing_visible(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moment: str
) -> None:
    """On a real disk ENOSPC can come from the flush (delayed allocation) or from
    the rename (the folder needs a new block); pyfakefs reports it only on write."""
    root = tmp_path / "post"
    post = Post(root, clock=FixedClock(NOW), processes=FakeProcessTable(), receipt_wait=0.0)
    register_offline(root)
    caller = os_caller(str(tmp_path), {"HOME": str(tmp_path)})
    post.send([ADDRESS], "earlier", Sender("process", "script"), caller)
    before = letters(Path(mailbox.inbox_of(root, ADDRESS)))
    armed = [True]
    if moment == "flush of the letter":  # the first fsync of a deposit is the letter's
        monkeypatch.setattr(os, "fsync", _fails_once(os.fsync, armed))
    else:
        monkeypatch.setattr(files.Folder, "rename", _fails_once(files.Folder.rename, armed))

    with pytest.raises(Refused) as failure:
        post.send([ADDRESS], "lost to a full disk", Sender("process", "script"), caller)

    assert str(failure.value) == (
        f"cannot write to mailbox {ADDRESS} ({mailbox.inbox_of(root, ADDRESS)}): "
        "No space left on device"
    )
    assert not armed, "the failure was injected where the test meant it"
    assert letters(Path(mailbox.inbox_of(root, ADDRESS))) == before
    assert queued_bodies(root) == ["earlier"]


# -- an unwritable registry -----------------------------------------------------------------


def host_over(root: Path, context: Recording) -> Host:
    post = Post(
        root,
        clock=FixedClock(NOW),
        processes=FakeProcessTable({os.getpid(): "this-process"}),
        receipt_wait=0.0,
    )
    return Host(post, SESSION, WORK, context, kernel_events=False)


def deposit(root: Path, body: str, sent_at: int) -> None:
    helpers.deposit(root, ADDRESS, new_message(Sender("process", "script"), body, sent_at))


def test_a_session_starts_and_takes_its_mail_with_a_read_only_registry(
    fake_fs: FakeFilesystem,
) -> None:
    os.makedirs(REGISTRY, 0o700)
    os.chmod(REGISTRY, READ_ONLY)
    deposit(ROOT, "waiting before the start", NOW - 1000)
    context = Recording()
    receiver = host_over(ROOT, context)

    receiver.start()  # must not raise
    try:
        assert receiver.stats.failed_heartbeats == 1, "the failed registration is counted"
        assert context.bodies == ["waiting before the start"]
        deposit(ROOT, "arrived later", NOW)
        assert entered_count(receiver.drain()) == 1
        assert context.bodies == ["waiting before the start", "arrived later"]
        assert mailbox.count(ROOT, ADDRESS) == 0
        assert os.listdir(REGISTRY) == [], "nothing half-written in the registry"
    finally:
        receiver.stop()


def test_heartbeats_that_cannot_be_written_are_counted_and_mail_still_flows(
    fake_fs: FakeFilesystem,
) -> None:
    context = Recording()
    receiver = host_over(ROOT, context)
    receiver.start()
    try:
        registered = registry.read(ROOT, ADDRESS)
        assert registered is not None and receiver.stats.failed_heartbeats == 0
        os.chmod(REGISTRY, READ_ONLY)
        receiver.post.clock = FixedClock(NOW + session.HEARTBEAT_MS)

        receiver.beat()
        receiver.beat()
        deposit(ROOT, "while the registry is read-only", NOW)
        assert entered_count(receiver.drain()) == 1

        assert receiver.stats.failed_heartbeats == 2
        assert context.bodies == ["while the registry is read-only"]
        assert registry.read(ROOT, ADDRESS) == registered, "the old record stays whole"
        assert os.listdir(REGISTRY) == [f"{ADDRESS}.json"], "no temporary left behind"

        os.chmod(REGISTRY, 0o700)  # writable again: the next beat lands
        receiver.beat()
        beaten = registry.read(ROOT, ADDRESS)
        assert beaten is not None and beaten.last_seen == NOW + session.HEARTBEAT_MS
    finally:
        receiver.stop()


# -- a mailbox the sender may not write ----------------------------------------------------


def test_a_read_only_mailbox_refuses_a_deposit_clearly(fake_fs: FakeFilesystem) -> None:
    register_offline(ROOT)
    assert send("earlier")[0] == 0
    before = letters(INBOX)
    os.chmod(INBOX, READ_ONLY)

    status, out, err = send("refused")

    assert (status, out) == (1, "")
    assert err == f"pi-post: cannot write to mailbox {ADDRESS} ({INBOX}): Permission denied\n"
    assert "Traceback" not in err
    assert letters(INBOX) == before


def test_an_inbox_where_no_mailbox_can_be_made_refuses_clearly(fake_fs: FakeFilesystem) -> None:
    register_offline(ROOT)
    os.mkdir(ROOT / "inbox", READ_ONLY)

    status, out, err = send("refused")

    assert (status, out) == (1, "")
    assert err.startswith("pi-post: ") and "Permission denied" in err, err
    assert "Traceback" not in err
    assert os.listdir(ROOT / "inbox") == []
