"""Mailboxes on disk: deposit, reading, exclusive claims, and the cap of 50 under
many racing sender processes (INV-03, 05, 06, 07, 08, 22). Where a claimed letter
that is not a message goes is tests/test_quarantine.py."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pipost import files, mailbox, refusals
from pipost.message import Message, Rejected, encode, parse
from tests.helpers import (
    NOW,
    VanishingFolders,
    claim_named,
    deposit,
    frozen_holder,
    make_message,
    make_record,
    not_blocked,
    open_descriptors,
    peek,
    tree_snapshot,
    unix_socket,
    write_record,
)
from tests.invariants.fsmodel import Recorder, every_cut

ADDRESS = "s-0123456789ab"


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "post"


def inbox(root: Path) -> Path:
    return root / "inbox" / ADDRESS


def fill(root: Path, count: int, address: str = ADDRESS) -> list[Message]:
    """``count`` letters, one millisecond apart, oldest first."""
    messages = [make_message(NOW + i, body=f"letter {i}") for i in range(count)]
    for message in messages:
        deposit(root, address, message, durable=False)
    return messages


# -- deposit ----------------------------------------------------------------------------


def test_deposit_writes_one_0600_letter_in_a_0700_folder(root: Path) -> None:
    message = make_message()
    path = Path(deposit(root, ADDRESS, message))
    assert path == inbox(root) / f"{message.id}.json"
    assert os.listdir(inbox(root)) == [f"{message.id}.json"]
    assert mode_of(path) == 0o600
    for folder in (root, root / "inbox", inbox(root)):
        assert mode_of(folder) == 0o700
    assert parse(path.read_bytes(), path.name) == message


def test_a_deposit_not_told_otherwise_survives_power_loss_at_any_point(tmp_path: Path) -> None:
    """A send deposits with the default: the letter and its name are flushed (INV-04)."""
    recorder = Recorder(tmp_path)
    message = make_message()
    with recorder.install(), files.make_root(tmp_path / "post") as top:
        letter = mailbox.deposit(top, ADDRESS, message)
    recorder.returned(message.id, letter, encode(message))
    assert [verdict for _, verdict in every_cut(tmp_path, recorder.ops) if not verdict.ok] == []


def test_deposit_refuses_the_51st_letter_and_writes_nothing(root: Path) -> None:
    fill(root, mailbox.CAP)
    before = tree_snapshot(root)
    with pytest.raises(mailbox.MailboxAtCap) as full:
        deposit(root, ADDRESS, make_message(NOW + 1000))
    assert (full.value.address, full.value.queued) == (ADDRESS, mailbox.CAP)
    assert full.value.refusal == refusals.MailboxFull(ADDRESS, mailbox.CAP, mailbox.CAP)
    assert str(full.value) == (
        f"mailbox {ADDRESS} is full ({mailbox.CAP} queued; the cap is {mailbox.CAP}) — "
        "the session is not reading its mail"
    )
    assert tree_snapshot(root) == before


def test_deposit_never_replaces_a_letter_with_the_same_id(root: Path) -> None:
    message = make_message(body="first")
    deposit(root, ADDRESS, message)
    twin = Message(message.id, message.sender, message.sent_at, "second")
    with pytest.raises(FileExistsError) as clash:
        deposit(root, ADDRESS, twin)
    assert (clash.value.errno, clash.value.strerror) == (
        errno.EEXIST,
        "a letter with this id exists",
    )
    assert clash.value.filename == str(inbox(root) / message.file_name)
    assert [letter.content for letter in peek(root, ADDRESS)] == [message]
    assert mailbox.letter_names(root, ADDRESS) == [message.file_name]


def test_deposit_never_replaces_a_link_that_holds_the_letter_s_name(root: Path) -> None:
    """Whatever stands at the letter's name, a link to nowhere too, is not replaced:
    the deposit is refused as a clash and the link stays as it was."""
    message = make_message()
    deposit(root, ADDRESS, make_message(body="another"))  # makes the mailbox
    link = inbox(root) / message.file_name
    link.symlink_to("nowhere.json")
    with pytest.raises(FileExistsError):
        deposit(root, ADDRESS, message)
    assert os.readlink(link) == "nowhere.json"


def test_a_deposit_that_fails_to_rename_leaves_nothing_visible(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def rename_fails(
        folder: files.Folder, name: str, target: str, into: files.Folder | None = None
    ) -> None:
        raise OSError(28, "No space left on device")

    deposit(root, ADDRESS, make_message(NOW))
    monkeypatch.setattr(files.Folder, "rename", rename_fails)
    with pytest.raises(OSError):
        deposit(root, ADDRESS, make_message(NOW + 1))
    assert len(os.listdir(inbox(root))) == 1


def test_a_deposit_the_file_system_refuses_names_the_mailbox_not_the_temporary(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def write_refused(folder: files.Folder, name: str, data: bytes, **kw: bool) -> None:
        raise PermissionError(13, "Permission denied", folder.name(name))

    monkeypatch.setattr(files.Folder, "write_new", write_refused)
    with pytest.raises(mailbox.DepositFailed) as failed:
        deposit(root, ADDRESS, make_message(NOW))
    assert failed.value.filename == str(inbox(root))
    assert (failed.value.errno, failed.value.strerror) == (13, "Permission denied")
    assert failed.value.address == ADDRESS
    assert str(failed.value) == (
        f"cannot write to mailbox {ADDRESS} ({inbox(root)}): Permission denied"
    )
    assert os.listdir(inbox(root)) == []


def test_a_refused_deposit_without_a_system_reason_says_the_error_itself(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An OSError raised with a message only (no errno, no strerror) still says why."""

    def write_refused(folder: files.Folder, name: str, data: bytes, **kw: bool) -> None:
        raise OSError("the disk went away")

    monkeypatch.setattr(files.Folder, "write_new", write_refused)
    with pytest.raises(mailbox.DepositFailed) as failed:
        deposit(root, ADDRESS, make_message(NOW))
    assert failed.value.strerror == "the disk went away"
    assert failed.value.refusal.reason == "the disk went away"
    assert str(failed.value) == (
        f"cannot write to mailbox {ADDRESS} ({inbox(root)}): the disk went away"
    )


def test_a_mailbox_that_keeps_vanishing_refuses_the_deposit_and_writes_nothing(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Removed by a sweep every time the deposit waited for its lock: the send is
    refused as one that cannot write the mailbox, rather than retried for ever."""
    vanishing = VanishingFolders(monkeypatch)
    monkeypatch.setattr(mailbox, "_DEPOSIT_ATTEMPTS", 3)
    with pytest.raises(mailbox.DepositFailed) as failed:
        deposit(root, ADDRESS, make_message(NOW))
    assert str(failed.value) == (
        f"cannot write to mailbox {ADDRESS} ({inbox(root)}): mailbox folder kept vanishing"
    )
    assert failed.value.errno == errno.EAGAIN
    assert vanishing.asked == 3
    assert os.listdir(inbox(root)) == []


def test_deposit_refuses_an_address_that_is_not_one(root: Path) -> None:
    with files.make_root(root) as top, pytest.raises(ValueError):
        mailbox.deposit(top, "../../x", make_message())
    assert os.listdir(root) == []
    assert not (root.parent / "x").exists()


def test_deposit_refuses_a_symlinked_mailbox(root: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "inbox").mkdir(parents=True)
    inbox(root).symlink_to(elsewhere)
    with pytest.raises(files.UnsafePath):
        deposit(root, ADDRESS, make_message())
    assert list(elsewhere.iterdir()) == []


# -- reading ----------------------------------------------------------------------------


def test_letters_are_read_oldest_first(root: Path) -> None:
    sent = [make_message(NOW + offset, body=str(offset)) for offset in (5, 1, 900, 3, 70)]
    for message in sent:
        deposit(root, ADDRESS, message, durable=False)
    oldest_first = sorted(sent, key=lambda m: m.sent_at)
    assert mailbox.letter_names(root, ADDRESS) == [m.file_name for m in oldest_first]
    assert [letter.content for letter in peek(root, ADDRESS)] == oldest_first
    claimed = []
    for claim in mailbox.claims(root, ADDRESS):
        claimed.append(claim.content)
        claim.dispose()
    assert claimed == oldest_first


def test_temporary_and_dot_files_are_invisible_to_readers(root: Path) -> None:
    real = fill(root, 1)[0]
    in_flight = make_message(NOW - 10, body="in flight")
    hidden = make_message(NOW - 20, body="hidden")
    (inbox(root) / f"{in_flight.id}.json.tmp").write_bytes(encode(in_flight))
    (inbox(root) / f".{hidden.id}.json").write_bytes(encode(hidden))
    assert mailbox.letter_names(root, ADDRESS) == [real.file_name]
    assert mailbox.count(root, ADDRESS) == 1
    assert [letter.content for letter in peek(root, ADDRESS)] == [real]
    claimed = []
    for claim in mailbox.claims(root, ADDRESS):
        claimed.append(claim.content)
        claim.release()
    assert claimed == [real]


def test_reading_an_absent_mailbox_creates_nothing(root: Path) -> None:
    assert mailbox.letter_names(root, ADDRESS) == []
    assert mailbox.count(root, ADDRESS) == 0
    assert peek(root, ADDRESS) == []
    assert list(mailbox.claims(root, ADDRESS)) == []
    assert not root.exists()


def test_peek_reports_a_malformed_letter_without_moving_it(root: Path) -> None:
    fill(root, 1)
    (inbox(root) / "0000000000001-deadbeef.json").write_bytes(b'{"v":1,"id":')
    before = tree_snapshot(root)
    letters = peek(root, ADDRESS)
    assert letters[0].name == "0000000000001-deadbeef.json"
    assert isinstance(letters[0].content, Rejected)
    assert isinstance(letters[1].content, Message)
    assert tree_snapshot(root) == before


def test_a_letter_whose_id_is_not_its_file_name_is_no_message_to_peek_nor_to_a_receiver(
    root: Path,
) -> None:
    """peek shows what the receiver will do with it: set it aside (INV-10, INV-16)."""
    message = make_message()
    (root / "inbox").mkdir(parents=True)
    inbox(root).mkdir()
    misfiled = "0000000000001-00000000.json"
    (inbox(root) / misfiled).write_bytes(encode(message))
    mismatch = Rejected("id_mismatch", "id does not match the file name")
    assert [(letter.name, letter.content) for letter in peek(root, ADDRESS)] == [
        (misfiled, mismatch)
    ]
    claims = list(mailbox.claims(root, ADDRESS))
    assert [(claim.name, claim.content) for claim in claims] == [(misfiled, mismatch)]
    for claim in claims:
        claim.release()


# -- claims -----------------------------------------------------------------------------


def test_a_claim_is_exclusive_until_disposed(root: Path) -> None:
    message = fill(root, 1)[0]
    first = claim_named(root, ADDRESS, message.file_name)
    assert first is not None
    assert first.content == message
    assert claim_named(root, ADDRESS, message.file_name) is None
    assert list(mailbox.claims(root, ADDRESS)) == []
    first.dispose()
    assert not Path(first.path).exists()
    assert mailbox.letter_names(root, ADDRESS) == []
    assert claim_named(root, ADDRESS, message.file_name) is None


def test_a_claimed_letter_stays_at_its_name_until_disposed(root: Path) -> None:
    """A pi-post 0.7 sender watches that exact path for its receipt."""
    message = fill(root, 1)[0]
    claim = claim_named(root, ADDRESS, message.file_name)
    assert claim is not None
    assert mailbox.letter_names(root, ADDRESS) == [message.file_name]
    claim.dispose()
    assert mailbox.letter_names(root, ADDRESS) == []


def test_release_leaves_the_letter_queued_for_the_next_claim(root: Path) -> None:
    message = fill(root, 1)[0]
    first = claim_named(root, ADDRESS, message.file_name)
    assert first is not None
    first.release()
    assert mailbox.letter_names(root, ADDRESS) == [message.file_name]
    second = claim_named(root, ADDRESS, message.file_name)
    assert second is not None
    assert second.content == message
    second.release()


@pytest.mark.parametrize("fails", ["unlink", "flush"])
def test_a_receipt_the_disk_refuses_keeps_the_claim_until_a_retry_disposes_it(
    root: Path, monkeypatch: pytest.MonkeyPatch, fails: str
) -> None:
    """dispose_or_hold: False keeps the letter locked (no other receiver takes it);
    the retry, once the disk lets it, disposes it and says True (INV-05, INV-06). A
    refused flush comes after the unlink went through: the retry only flushes."""
    (message,) = fill(root, 1)
    claim = claim_named(root, ADDRESS, message.file_name)
    assert claim is not None
    real = getattr(files.Folder, fails)

    def refused_once(folder: files.Folder, *args: str) -> None:
        monkeypatch.setattr(files.Folder, fails, real)  # refused this once only
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(files.Folder, fails, refused_once)
    assert claim.dispose_or_hold() is False
    assert claim_named(root, ADDRESS, message.file_name) is None
    assert claim.dispose_or_hold() is True
    assert mailbox.letter_names(root, ADDRESS) == []
    assert not Path(claim.path).exists()


def test_a_claim_is_still_held_until_another_receiver_takes_or_replaces_its_letter(
    root: Path, tmp_path: Path
) -> None:
    """A pi-post 0.7 receiver takes no lock: it may unlink a claimed letter, or a
    letter of the same name may be put back. A claim on a name only (a symlink) has
    nothing else to lose."""
    taken, replaced, moved = fill(root, 3)
    names = (taken.file_name, replaced.file_name, moved.file_name)
    claims = {name: claim_named(root, ADDRESS, name) for name in names}
    assert all(claim is not None and claim.still_held() for claim in claims.values())
    os.unlink(inbox(root) / taken.file_name)
    os.unlink(inbox(root) / replaced.file_name)
    (inbox(root) / replaced.file_name).write_bytes(encode(replaced))
    os.rename(inbox(root) / moved.file_name, tmp_path / "moved away.json")  # still linked
    (inbox(root) / moved.file_name).write_bytes(encode(moved))
    assert [claim.still_held() for claim in claims.values() if claim is not None] == [False] * 3
    for claim in claims.values():
        assert claim is not None
        claim.release()
    link = "0000000000001-0000000a.json"
    (inbox(root) / link).symlink_to(tmp_path / "elsewhere.json")
    by_name = claim_named(root, ADDRESS, link)
    assert by_name is not None and isinstance(by_name.content, Rejected)
    assert by_name.still_held()
    by_name.release()


def test_a_letter_taken_while_peek_reads_the_mailbox_is_not_shown(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken, kept = fill(root, 2)
    read = files.Folder.read_bounded

    def taken_first(folder: files.Folder, name: str, limit: int) -> bytes | None:
        if name == taken.file_name:  # a receiver's receipt, between listing and reading
            folder.unlink(name)
        return read(folder, name, limit)

    monkeypatch.setattr(files.Folder, "read_bounded", taken_first)
    assert [letter.content for letter in peek(root, ADDRESS)] == [kept]


@pytest.mark.parametrize("fails", ["the read", "a descriptor of the root"])
def test_a_claim_that_fails_once_locked_leaves_the_letter_free_and_nothing_open(
    root: Path, monkeypatch: pytest.MonkeyPatch, fails: str
) -> None:
    (message,) = fill(root, 1)
    before = open_descriptors()
    with monkeypatch.context() as broken:
        if fails == "the read":

            def unreadable(handle: files.OpenFile, limit: int) -> bytes:
                raise OSError(5, "Input/output error")

            broken.setattr(files.OpenFile, "read", unreadable)
        else:
            duplicate = os.dup
            made: list[int] = []

            def no_second_descriptor(fd: int) -> int:
                made.append(fd)
                if len(made) == 2:  # the mailbox's own, then the root's
                    raise OSError(24, "Too many open files")
                return duplicate(fd)

            broken.setattr(os, "dup", no_second_descriptor)
        with pytest.raises(OSError):
            list(mailbox.claims(root, ADDRESS))
    assert open_descriptors() == before
    claim = claim_named(root, ADDRESS, message.file_name)
    assert claim is not None and claim.content == message
    claim.release()


def test_a_symlinked_letter_is_refused_not_followed(root: Path, tmp_path: Path) -> None:
    message = make_message()
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_bytes(encode(message))
    (root / "inbox").mkdir(parents=True)
    inbox(root).mkdir()
    (inbox(root) / message.file_name).symlink_to(elsewhere)

    peeked = peek(root, ADDRESS)
    assert len(peeked) == 1
    assert peeked[0].content == Rejected("symlink", "a symlink is never followed")
    claims = list(mailbox.claims(root, ADDRESS))
    assert len(claims) == 1
    assert isinstance(claims[0].content, Rejected)
    assert claims[0].content == peeked[0].content
    claims[0].set_aside(claims[0].content.reason)
    claims[0].release()
    moved = root / "quarantine" / ADDRESS / message.file_name
    assert moved.is_symlink()
    assert elsewhere.read_bytes() == encode(message)
    assert mailbox.letter_names(root, ADDRESS) == []


def test_a_receiver_refuses_a_symlinked_mailbox_and_leaves_its_target_alone(
    root: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    message = make_message()
    (elsewhere / message.file_name).write_bytes(encode(message))
    (root / "inbox").mkdir(parents=True)
    inbox(root).symlink_to(elsewhere)

    with pytest.raises(files.UnsafePath):
        list(mailbox.claims(root, ADDRESS))
    with pytest.raises(files.UnsafePath):
        peek(root, ADDRESS)
    assert (elsewhere / message.file_name).read_bytes() == encode(message)


def test_a_socket_named_like_a_letter_is_not_a_file_and_the_letter_behind_it_flows(
    root: Path,
) -> None:
    """A socket cannot be opened at all (ENXIO): a peek shows it as no message and
    goes on, a receiver sets it aside, still a socket, and takes the letter behind it
    (INV-10). It used to end the peek and the receiver with the system's error."""
    good = make_message(body="behind the socket")
    deposit(root, ADDRESS, good)
    socket_name = f"{NOW - 5:013d}-00000000.json"  # sorts first
    with unix_socket(inbox(root) / socket_name):
        not_a_file = Rejected("not_a_file", "not a regular file")
        assert [letter.content for letter in peek(root, ADDRESS)] == [not_a_file, good]
        claims = mailbox.claims(root, ADDRESS)
        first = next(claims)
        assert (first.name, first.content) == (socket_name, not_a_file)
        first.set_aside(not_a_file.reason)
        first.release()
        second = next(claims)
        assert second.content == good
        second.release()
        claims.close()
    kept = root / "quarantine" / ADDRESS / socket_name
    assert stat.S_ISSOCK(os.lstat(kept).st_mode)
    assert mailbox.letter_names(root, ADDRESS) == [good.file_name]


def test_a_deposit_into_a_mailbox_a_stopped_sender_holds_fails_with_nothing_written(
    root: Path, short_bound: float
) -> None:
    """A sender frozen (SIGSTOP) while it holds the mailbox's lock: the next deposit
    gives up after the bound, as a mailbox that cannot be written (cannot_write),
    naming the holder, and nothing is written (SPEC 3.1, 10; INV-23)."""
    deposit(root, ADDRESS, make_message(body="the first"))
    before = tree_snapshot(root)
    with frozen_holder(inbox(root)) as pid:
        raised = not_blocked(lambda: deposit(root, ADDRESS, make_message(body="the second")))
    assert isinstance(raised, mailbox.DepositFailed), raised
    assert isinstance(raised.refusal, refusals.CannotWrite)
    assert raised.refusal.address == ADDRESS
    assert raised.refusal.reason.startswith(f"locked by pid {pid} for more than 0.2 s")
    assert tree_snapshot(root) == before


def test_a_fifo_named_like_a_letter_does_not_block(root: Path) -> None:
    (root / "inbox").mkdir(parents=True)
    inbox(root).mkdir()
    fifo = inbox(root) / "x.json"
    os.mkfifo(fifo)
    outcome: list[object] = []

    def read_and_claim() -> None:
        outcome.append(peek(root, ADDRESS))
        outcome.append([claim.content for claim in mailbox.claims(root, ADDRESS)])

    reader = threading.Thread(target=read_and_claim)
    reader.start()
    reader.join(timeout=20)
    if reader.is_alive():  # free the blocked reader so that the test ends
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join()
        pytest.fail("reading a FIFO named x.json blocked")
    peeked, claimed = outcome
    not_a_file = Rejected("not_a_file", "not a regular file")
    assert isinstance(peeked, list)
    assert peeked[0].content == not_a_file
    assert claimed == [not_a_file]


def test_a_folder_named_like_a_letter_is_not_a_file(root: Path) -> None:
    (inbox(root) / "0000000000001-0badbad0.json").mkdir(parents=True)
    not_a_file = Rejected("not_a_file", "not a regular file")
    assert [letter.content for letter in peek(root, ADDRESS)] == [not_a_file]
    claims = list(mailbox.claims(root, ADDRESS))
    assert [claim.content for claim in claims] == [not_a_file]
    for claim in claims:
        claim.release()


def test_a_letter_that_cannot_be_opened_is_unreadable_and_can_be_set_aside(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Injected, as root reads whatever the mode says: the open is refused."""
    bad, good = fill(root, 2)
    opened = files.Folder.open_file

    def refuse_the_first(folder: files.Folder, name: str) -> files.OpenFile | None:
        if name == bad.file_name:
            raise PermissionError(13, "Permission denied", folder.name(name))
        return opened(folder, name)

    monkeypatch.setattr(files.Folder, "open_file", refuse_the_first)
    unreadable = Rejected("unreadable", "Permission denied")
    assert [letter.content for letter in peek(root, ADDRESS)] == [unreadable, good]
    claims = mailbox.claims(root, ADDRESS)
    first = next(claims)
    assert first.content == unreadable
    first.set_aside(unreadable.reason)
    first.release()
    claims.close()
    assert mailbox.letter_names(root, ADDRESS) == [good.file_name]
    assert (root / "quarantine" / ADDRESS / bad.file_name).read_bytes() == encode(bad)


def test_wait_consumed_sees_the_letter_vanish(root: Path) -> None:
    path = deposit(root, ADDRESS, make_message())
    assert mailbox.wait_consumed(path, timeout=0.05) is False
    taker = claim_named(root, ADDRESS, os.path.basename(path))
    assert taker is not None
    taker.dispose()
    assert mailbox.wait_consumed(path, timeout=0.05) is True


# -- the cap under racing sender processes (INV-08) -------------------------------------

SENDERS = 24
PREFILLED = 45


def holding_open(folder: Path, pids: set[int]) -> set[int]:
    """Which of ``pids`` have ``folder`` open right now: a sender has its mailbox
    open only to lock it and deposit, so while the test holds that lock, they wait
    for it (by trying it again and again: files.hold_lock)."""
    holding = set()
    for pid in pids:
        with contextlib.suppress(OSError):  # it ended, or closed a descriptor meanwhile
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == str(folder):
                    holding.add(pid)
                    break
    return holding


PATIENT_SEND = "from pipost import cli, files; files.LOCK_WAIT_S = 600.0; cli.exit_now(cli.main())"
"""``pi-post`` that waits for a lock far longer than pipost does: 24 of them start
while the test holds the lock, and the machine may take seconds to start them all."""


class FolderWatcher(threading.Thread):
    """Lists the mailbox over and over while senders race: the most letters it ever
    held, and any letter a reader could see but not parse whole (INV-03)."""

    def __init__(self, folder: Path) -> None:
        super().__init__(daemon=True)
        self.folder = folder
        self.most = 0
        self.samples = 0
        self.unreadable: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        checked: set[str] = set()
        while not self.stop.is_set():
            opened = files.open_root(self.folder)
            assert opened is not None
            with opened as folder:
                letters = [n for n in folder.names() if mailbox.is_letter_name(n)]
                self.samples += 1
                self.most = max(self.most, len(letters))
                for name in set(letters) - checked:
                    checked.add(name)
                    raw = folder.read_bounded(name, 1 << 20)
                    if raw is None or not isinstance(parse(raw, name), Message):
                        self.unreadable.append(name)


def test_racing_sender_processes_never_overfill_a_mailbox(
    tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    root = tmp_path / "post"
    record = write_record(root, make_record("race-target-session", str(tmp_path), last_seen=NOW))
    fill(root, PREFILLED, record.address)
    folder = root / "inbox" / record.address
    env = {k: v for k, v in os.environ.items() if not k.startswith("PI_")}
    env.update(PI_POST_DIR=str(root), HOME=str(tmp_path))
    watcher = FolderWatcher(folder)
    watcher.start()

    # Hold the mailbox lock until every sender waits on it, so that all of them
    # race for the last five places at once.
    senders: list[subprocess.Popen[str]] = []
    held = files.open_root(folder)
    assert held is not None
    with held, held.lock():
        try:
            for number in range(SENDERS):
                command = [sys.executable, "-c", PATIENT_SEND, "send", "--to", record.address]
                senders.append(
                    subprocess.Popen(
                        [*command, "--body", f"sender {number}"],
                        env=env,
                        cwd=tmp_path,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        text=True,
                    )
                )
            pids = {sender.pid for sender in senders}
            waiting: set[int] = set()
            deadline = time.monotonic() + 60
            while waiting != pids and time.monotonic() < deadline:
                if any(sender.poll() is not None for sender in senders):
                    break  # one ended without waiting: the assertions below say why
                waiting = holding_open(folder, pids)
                time.sleep(0.01)
        except BaseException:
            for sender in senders:
                sender.kill()
            raise
    results = []
    try:
        for sender in senders:
            out, err = sender.communicate(timeout=60)
            results.append((sender.returncode, out, err))
    finally:
        for sender in senders:
            sender.kill()
        watcher.stop.set()
        watcher.join()

    accepted = [(out, err) for code, out, err in results if code == 0]
    refused = [(code, out, err) for code, out, err in results if code != 0]
    # The figures, for the junit report (--junitxml).
    record_property("senders", SENDERS)
    record_property("senders_waiting_on_the_lock_at_once", len(waiting))
    record_property("accepted", len(accepted))
    record_property("refused", len(refused))
    record_property("folder_samples", watcher.samples)
    record_property("most_letters_seen", watcher.most)
    assert waiting == pids, "every sender waited on the mailbox lock at once"
    assert len(accepted) == mailbox.CAP - PREFILLED
    assert all(out.startswith(f"queued {record.address} ") for out, _ in accepted)
    for code, out, err in refused:
        assert code == 1
        assert out == ""
        assert err.startswith("pi-post: ")
        assert record.address in err
        assert f"the cap is {mailbox.CAP}" in err
        assert "Traceback" not in err
    names = os.listdir(folder)
    assert sorted(names) == mailbox.letter_names(root, record.address)
    assert len(names) == mailbox.CAP
    assert all(isinstance(letter.content, Message) for letter in peek(root, record.address))
    assert watcher.samples > 0
    assert watcher.most <= mailbox.CAP
    assert watcher.unreadable == []
    bodies = {json.loads((folder / name).read_bytes())["body"] for name in names}
    assert len(bodies & {f"sender {n}" for n in range(SENDERS)}) == mailbox.CAP - PREFILLED
