"""The post office: a send resolves every target before writing anything
(INV-12), a full mailbox refuses with nothing written (INV-08), and the receipt
tells the truth (INV-11)."""

from __future__ import annotations

import io
import os
import pwd
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipost import cli, files, mailbox, message
from pipost.message import Message, Sender
from pipost.post import Post, Receipt, Refused, default_root, os_caller
from pipost.refusals import (
    BadEnvelope,
    BodyTooLarge,
    CannotWrite,
    EmptyBody,
    MailboxFull,
    UnknownAddress,
)
from pipost.resolve import Caller
from pipost.session import Record
from tests.helpers import (
    NOW,
    FakeProcessTable,
    FixedClock,
    Opened,
    deposit,
    make_message,
    make_record,
    peek,
    tree_snapshot,
    write_record,
)

LIVE_PID = 5151
SENDER = Sender(kind="process", name="process:tests")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "post"


@pytest.fixture
def live(root: Path) -> Record:
    return write_record(
        root, make_record("sess-live", "/home/dev/live", pid=LIVE_PID, pid_start="t")
    )


@pytest.fixture
def stalled(root: Path) -> Record:
    return write_record(
        root,
        make_record(
            "sess-stalled", "/home/dev/stalled", last_seen=NOW - 60_000, pid=LIVE_PID, pid_start="t"
        ),
    )


@pytest.fixture
def offline(root: Path) -> Record:
    return write_record(root, make_record("sess-offline", "/home/dev/offline"))


def post_at(root: Path, receipt_wait: float = 0.2) -> Post:
    return Post(
        root,
        clock=FixedClock(),
        processes=FakeProcessTable({LIVE_PID: "t"}),
        receipt_wait=receipt_wait,
    )


def caller() -> Caller:
    return os_caller("/home/dev", {"HOME": "/home/dev"})


class Receiver(threading.Thread):
    """A receiving session: claims and disposes every letter of one mailbox until
    stopped, as a live session that reads its mail does."""

    def __init__(self, root: Path, address: str) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.address = address
        self.taken: list[Message] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.005):
            for claim in mailbox.claims(self.root, self.address):
                if isinstance(claim.content, Message):
                    self.taken.append(claim.content)
                claim.dispose()


@pytest.fixture
def receivers() -> Iterator[list[Receiver]]:
    started: list[Receiver] = []
    yield started
    for receiver in started:
        receiver.stop.set()
        receiver.join(timeout=20)


def receive(receivers: list[Receiver], root: Path, address: str) -> Receiver:
    receiver = Receiver(root, address)
    receiver.start()
    receivers.append(receiver)
    return receiver


# -- refusals write nothing -----------------------------------------------------------


def test_one_unknown_target_refuses_the_whole_send(
    root: Path, offline: Record, live: Record
) -> None:
    before = tree_snapshot(root)
    with pytest.raises(Refused) as refused:
        post_at(root).send([offline.name, live.address, "nobody"], "hello", SENDER, caller())
    assert str(refused.value).startswith('"nobody" is not an address')
    assert tree_snapshot(root) == before


@pytest.mark.parametrize(
    "handles",
    [
        pytest.param(["s-0123456789ab"], id="address with no record and no mailbox"),
        pytest.param(["/home/dev/elsewhere"], id="directory with no session"),
        pytest.param(["offline"] * 9, id="more than eight targets"),
    ],
)
def test_unresolvable_sends_write_nothing(root: Path, offline: Record, handles: list[str]) -> None:
    before = tree_snapshot(root)
    with pytest.raises(Refused):
        post_at(root).send(handles, "hello", SENDER, caller())
    assert tree_snapshot(root) == before


@pytest.mark.parametrize("body", ["", "  \n", "x" * 32769])
def test_a_refused_body_writes_nothing(root: Path, offline: Record, body: str) -> None:
    before = tree_snapshot(root)
    with pytest.raises(Refused):
        post_at(root).send([offline.address], body, SENDER, caller())
    assert tree_snapshot(root) == before


def test_a_full_mailbox_refuses_naming_the_address_and_writes_nothing(
    root: Path, offline: Record, live: Record
) -> None:
    for offset in range(mailbox.CAP):
        deposit(root, offline.address, make_message(NOW + offset), durable=False)
    before = tree_snapshot(root)
    with pytest.raises(Refused) as refused:
        post_at(root).send([live.address, offline.address], "hello", SENDER, caller())
    assert refused.value.reason == MailboxFull(offline.address, mailbox.CAP, mailbox.CAP)
    assert offline.address in str(refused.value)
    assert f"the cap is {mailbox.CAP}" in str(refused.value)
    assert tree_snapshot(root) == before
    assert mailbox.count(root, live.address) == 0


@pytest.mark.parametrize("order", ["given", "reversed"])
def test_of_several_full_mailboxes_the_refusal_names_the_first_given(
    root: Path, offline: Record, live: Record, stalled: Record, order: str
) -> None:
    full = [offline.address, live.address]
    for address in full:
        for offset in range(mailbox.CAP):
            deposit(root, address, make_message(NOW + offset), durable=False)
    targets = [stalled.address, *(full if order == "given" else full[::-1])]
    before = tree_snapshot(root)
    with pytest.raises(Refused) as refused:
        post_at(root).send(targets, "hello", SENDER, caller())
    assert refused.value.reason == MailboxFull(targets[1], mailbox.CAP, mailbox.CAP)
    assert tree_snapshot(root) == before


def test_a_mailbox_filled_by_a_racing_sender_is_reported_with_what_was_queued(
    root: Path, offline: Record, live: Record, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the check of every mailbox and the deposits, another sender fills
    the second target: the refusal says which copy went out already."""
    real_deposit = mailbox.deposit

    def racing_deposit(top: files.Folder, address: str, message: Message) -> str:
        if address == offline.address:
            for offset in range(mailbox.CAP):
                real_deposit(top, address, make_message(NOW + offset), durable=False)
        return real_deposit(top, address, message)

    monkeypatch.setattr(mailbox, "deposit", racing_deposit)
    with pytest.raises(Refused) as refused:
        post_at(root).send([live.address, offline.address], "hello", SENDER, caller())
    [queued] = mailbox.letter_names(root, live.address)
    already = ((live.address, queued.removesuffix(".json")),)
    assert refused.value.reason == MailboxFull(offline.address, mailbox.CAP, mailbox.CAP, already)
    assert offline.address in str(refused.value)
    assert f"already queued {live.address} {queued.removesuffix('.json')}" in str(refused.value)
    assert mailbox.count(root, offline.address) == mailbox.CAP


def test_a_mailbox_that_cannot_be_written_is_named_with_what_was_queued(
    root: Path, offline: Record, live: Record, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second target's folder refuses the write (injected: root ignores modes)."""
    real_write = files.Folder.write_new

    def refused_in_offline(folder: files.Folder, name: str, data: bytes, **kw: bool) -> None:
        if offline.address in folder.path:
            raise PermissionError(13, "Permission denied", folder.name(name))
        real_write(folder, name, data, **kw)

    monkeypatch.setattr(files.Folder, "write_new", refused_in_offline)
    with pytest.raises(Refused) as refused:
        post_at(root).send([live.address, offline.address], "hello", SENDER, caller())
    [queued] = mailbox.letter_names(root, live.address)
    already = ((live.address, queued.removesuffix(".json")),)
    folder = f"{root}/inbox/{offline.address}"
    denied = CannotWrite(offline.address, folder, "Permission denied", already)
    assert refused.value.reason == denied
    assert str(refused.value) == (
        f"cannot write to mailbox {offline.address} ({root}/inbox/{offline.address}): "
        f"Permission denied; already queued {live.address} {queued.removesuffix('.json')}"
    )
    assert mailbox.letter_names(root, offline.address) == []


@pytest.mark.parametrize(
    ("body", "refusal"),
    [
        ("", EmptyBody()),
        (" \n", EmptyBody()),
        ("x" * 32769, BodyTooLarge(32769, 32768)),
    ],
)
def test_the_body_is_checked_before_any_target_is_resolved(
    root: Path, body: str, refusal: object
) -> None:
    with pytest.raises(Refused) as refused:
        post_at(root).send(["nobody"], body, SENDER, caller())
    assert refused.value.reason == refusal
    assert "body" in str(refused.value)
    assert "nobody" not in str(refused.value)


def test_an_envelope_the_message_rules_refuse_is_refused_with_their_reason(
    root: Path, offline: Record
) -> None:
    with pytest.raises(Refused) as refused:
        post_at(root).send([offline.address], "hi", Sender(kind="process", name=""), caller())
    assert refused.value.reason == BadEnvelope("from.name", "from.name is empty")
    assert str(refused.value) == "from.name is empty"


def test_an_unknown_address_is_refused_as_data(root: Path) -> None:
    with pytest.raises(Refused) as refused:
        post_at(root).send(["s-0123456789ab"], "hi", SENDER, caller())
    assert refused.value.reason == UnknownAddress("s-0123456789ab")


def test_a_send_checks_the_body_once_however_many_targets(
    root: Path, offline: Record, live: Record, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[str] = []
    real_check = message.check_body

    def counted(body: str) -> None:
        checked.append(body)
        real_check(body)

    monkeypatch.setattr(message, "check_body", counted)
    receipts = post_at(root).send([offline.address, live.address], "hello", SENDER, caller())
    assert len(receipts) == 2
    assert len({receipt.message_id for receipt in receipts}) == 2
    assert checked == ["hello"]


# -- what a send writes ------------------------------------------------------------------


def test_handles_naming_one_session_collapse_to_one_copy(root: Path, offline: Record) -> None:
    receipts = post_at(root).send(
        [offline.address, offline.name, "/home/dev/offline", "offline"], "hi", SENDER, caller()
    )
    assert [r.address for r in receipts] == [offline.address]
    assert mailbox.count(root, offline.address) == 1


def test_a_send_writes_the_message_it_reports(root: Path, offline: Record) -> None:
    [receipt] = post_at(root).send(
        [offline.name], "the body", SENDER, caller(), reply_to="s-aaaaaaaaaaaa"
    )
    [letter] = peek(root, offline.address)
    assert isinstance(letter.content, Message)
    assert letter.content.id == receipt.message_id
    assert letter.content.sent_at == NOW
    assert letter.content.body == "the body"
    assert letter.content.sender == SENDER
    assert letter.content.reply_to == "s-aaaaaaaaaaaa"
    assert os.listdir(root / "inbox" / offline.address) == [letter.name]


# -- receipts ----------------------------------------------------------------------------


def test_delivered_when_a_live_session_took_the_letter(
    root: Path, live: Record, receivers: list[Receiver]
) -> None:
    receiver = receive(receivers, root, live.address)
    [receipt] = post_at(root, receipt_wait=30).send([live.name], "are you there?", SENDER, caller())
    assert receipt.delivered
    assert [m.id for m in receiver.taken] == [receipt.message_id]
    assert mailbox.count(root, live.address) == 0


def test_queued_when_a_live_session_did_not_take_the_letter(root: Path, live: Record) -> None:
    [receipt] = post_at(root).send([live.name], "are you there?", SENDER, caller())
    assert not receipt.delivered
    assert mailbox.letter_names(root, live.address) == [f"{receipt.message_id}.json"]


@pytest.mark.parametrize("target", ["offline", "stalled"])
def test_queued_when_the_target_is_not_live_even_if_the_letter_vanishes(
    root: Path,
    offline: Record,
    stalled: Record,
    receivers: list[Receiver],
    target: str,
) -> None:
    record = offline if target == "offline" else stalled
    receive(receivers, root, record.address)
    [receipt] = post_at(root, receipt_wait=30).send([record.address], "hi", SENDER, caller())
    assert not receipt.delivered


def test_receipts_of_a_fan_out_are_each_true(
    root: Path, live: Record, offline: Record, receivers: list[Receiver]
) -> None:
    receive(receivers, root, live.address)
    seen: list[Receipt] = []
    receipts = post_at(root, receipt_wait=30).send(
        [offline.address, live.address], "fan-out", SENDER, caller(), on_deposit=seen.append
    )
    assert seen == receipts
    assert [(r.address, r.delivered) for r in receipts] == [
        (offline.address, False),
        (live.address, True),
    ]
    assert mailbox.count(root, offline.address) == 1
    assert mailbox.count(root, live.address) == 0


def test_one_symlinked_mailbox_does_not_break_listing_or_sending_to_others(
    tmp_path: Path,
) -> None:
    root = tmp_path / "post"
    clock = FixedClock()
    post = Post(root, clock=clock, processes=FakeProcessTable())
    bob = write_record(root, make_record("bob-session", "/home/dev/bob", name="bob"))
    alice = write_record(root, make_record("alice-session", "/home/dev/alice", name="alice"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "inbox").mkdir(exist_ok=True)
    (root / "inbox" / bob.address).symlink_to(elsewhere)

    listed = {c.address: c.queued for c in post.sessions()}
    assert listed == {bob.address: 0, alice.address: 0}
    caller = Caller(cwd="/home/dev", home="/home/dev", canonical=lambda p: p)
    receipts = post.send(["alice"], "hello", SENDER, caller)
    assert [r.address for r in receipts] == [alice.address]
    with pytest.raises(files.UnsafePath):
        post.send(["bob"], "hello", SENDER, caller)
    assert list(elsewhere.iterdir()) == []


def test_a_session_s_symlinked_mailbox_is_not_followed_to_count_its_letters(
    tmp_path: Path,
) -> None:
    """Found by its address (pi-post resolve, a send), the session's queued count is
    0: the letters behind the link are not counted, nor are they anyone's mail."""
    root = tmp_path / "post"
    bob = write_record(root, make_record("bob-session", "/home/dev/bob", name="bob"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (elsewhere / make_message(NOW).file_name).write_bytes(message.encode(make_message(NOW)))
    (root / "inbox").mkdir()
    (root / "inbox" / bob.address).symlink_to(elsewhere)
    with post_at(root).directory() as directory:
        found = directory.by_address(bob.address)
    assert found is not None and found.queued == 0


@pytest.mark.parametrize("linked", ["inbox", "mailbox"])
def test_an_address_whose_only_mailbox_is_a_symlink_is_unknown(tmp_path: Path, linked: str) -> None:
    """No record names it, and a link is no mailbox: the send is refused as one to an
    address nothing can be addressed at, and nothing is written behind the link."""
    root = tmp_path / "post"
    address = "s-0123456789ab"
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / address).mkdir(parents=True, mode=0o700)
    files.make_root(root).close()
    if linked == "inbox":
        (root / "inbox").symlink_to(elsewhere)
    else:
        (root / "inbox").mkdir()
        (root / "inbox" / address).symlink_to(elsewhere / address)
    with pytest.raises(Refused) as refused:
        post_at(root).send([address], "hi", SENDER, caller())
    assert refused.value.reason == UnknownAddress(address)
    assert list((elsewhere / address).iterdir()) == []


def test_without_pi_post_dir_the_post_office_is_the_one_under_home() -> None:
    expected = "/home/dev/.pi/agent/post"
    assert default_root({"HOME": "/home/dev"}) == expected
    assert default_root({"HOME": "/home/dev", "PI_POST_DIR": ""}) == expected


@pytest.mark.parametrize(
    ("configured", "root"),
    [("~", "/home/dev"), ("~/post", "/home/dev/post"), ("/srv/post", "/srv/post")],
)
def test_pi_post_dir_names_the_post_office_with_its_tilde_expanded(
    configured: str, root: str
) -> None:
    assert default_root({"HOME": "/home/dev", "PI_POST_DIR": configured}) == root


def test_without_home_the_home_is_the_one_the_password_database_gives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """HOME unset (a service, a cron job): ~ is the user's home all the same."""
    monkeypatch.delenv("HOME", raising=False)
    home = pwd.getpwuid(os.getuid()).pw_dir
    assert default_root({}) == os.path.join(home, ".pi", "agent", "post")
    assert os_caller("/", {}).home == home


def test_a_post_office_without_a_registry_lists_no_session(root: Path) -> None:
    """A send to a bare address made inbox/ before any session registered."""
    deposit(root, "s-0123456789ab", make_message(NOW))
    assert post_at(root).sessions() == []


def test_a_mailbox_swept_between_the_listing_and_its_count_counts_as_empty(
    root: Path, offline: Record, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = root / "inbox" / offline.address
    folder.mkdir(parents=True)
    names = files.Folder.names

    def swept_meanwhile(listed: files.Folder) -> list[str]:
        found = names(listed)
        if listed.path == str(root / "inbox") and folder.exists():
            folder.rmdir()  # a sweep, between the listing of inbox/ and the count
        return found

    monkeypatch.setattr(files.Folder, "names", swept_meanwhile)
    assert [(c.address, c.queued) for c in post_at(root).sessions()] == [(offline.address, 0)]


@pytest.mark.parametrize("mailbox_exists", [True, False], ids=["mailbox", "no-mailbox-yet"])
def test_a_send_to_an_address_opens_the_root_once_and_counts_the_mailbox_once(
    root: Path, offline: Record, monkeypatch: pytest.MonkeyPatch, mailbox_exists: bool
) -> None:
    """DESIGN §1/§4: one open of the root per operation; the one count of the mailbox
    is the deposit's, under its lock; the record is read once."""
    if mailbox_exists:
        deposit(root, offline.address, make_message(NOW - 1000))
    opened = Opened(monkeypatch)
    post_at(root).send([offline.address], "hello", SENDER, caller())
    assert opened.roots == 1
    assert opened.listed[offline.address] == 1
    assert opened.read[f"{offline.address}.json"] == 1
    assert mailbox.count(root, offline.address) == 1 + mailbox_exists


def test_a_send_to_several_counts_each_mailbox_once(
    root: Path, offline: Record, live: Record, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first target is counted by its deposit alone; the others once up front,
    before anything is written, then again under their locks (the minimum for all or
    nothing without holding every lock at once: DESIGN §4)."""
    for record in (offline, live):
        deposit(root, record.address, make_message(NOW - 1000))
    opened = Opened(monkeypatch)
    post_at(root, receipt_wait=0).send([offline.address, live.address], "hi", SENDER, caller())
    assert opened.roots == 1
    assert opened.listed[offline.address] == 1
    assert opened.listed[live.address] == 2


def test_resolve_and_peek_of_an_address_open_the_root_and_read_the_record_once(
    root: Path, offline: Record, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One open of the root for the whole command; the mailbox is listed once (the
    count resolve shows, the letters peek shows) and each letter read once."""
    letter = make_message(NOW)
    deposit(root, offline.address, letter)
    said = io.StringIO()
    ctx = cli.Invocation(
        environ={"PI_POST_DIR": str(root), "HOME": "/home/dev"},
        cwd="/home/dev",
        stdout=said,
        clock=FixedClock(),
        processes=FakeProcessTable({}),
    )
    for command in ("resolve", "peek"):
        opened = Opened(monkeypatch)
        assert cli.run([command, offline.address], ctx) == 0
        assert opened.roots == 1, command
        assert opened.read[f"{offline.address}.json"] == 1, command
        assert opened.listed[offline.address] == 1, command
    assert opened.read[letter.file_name] == 1
    assert "1 queued" in said.getvalue()
