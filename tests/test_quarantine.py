"""The quarantine on disk: a claimed letter that is not a message is set aside with
its reason, never delivered and never destroyed, and the quarantine is bounded
(INV-10); it is reached from the folders the claim holds, never through a symlink
(INV-22), and listing it changes nothing (INV-16)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from pipost import files, mailbox, quarantine
from pipost.message import LETTER_READ_LIMIT, Message, Rejected
from tests.helpers import NOW, Opened, deposit, make_message, set_aside, tree_snapshot

ADDRESS = "s-0123456789ab"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "post"


def inbox(root: Path) -> Path:
    return root / "inbox" / ADDRESS


def bad_letter(root: Path, name: str, data: bytes = b"{not json") -> None:
    inbox(root).mkdir(parents=True, exist_ok=True)
    (inbox(root) / name).write_bytes(data)


def test_a_malformed_letter_is_set_aside_and_later_letters_are_claimed(root: Path) -> None:
    later = [make_message(NOW + i, body=f"letter {i}") for i in range(2)]
    for message in later:
        deposit(root, ADDRESS, message, durable=False)
    bad_name = "0000000000001-deadbeef.json"
    (inbox(root) / bad_name).write_bytes(b'{"v":1}')
    delivered: list[Message] = []
    moved: list[Path] = []
    for claim in mailbox.claims(root, ADDRESS):
        if isinstance(claim.content, Rejected):
            moved.append(Path(claim.set_aside(claim.content.reason).path))
            claim.release()
        else:
            delivered.append(claim.content)
            claim.dispose()
    assert delivered == later
    kept = root / "quarantine" / ADDRESS
    assert moved == [kept / bad_name]
    assert (kept / bad_name).read_bytes() == b'{"v":1}'
    assert (kept / (bad_name + ".reason")).read_text() == "from is not an object\n"
    assert mailbox.letter_names(root, ADDRESS) == []
    assert stat.S_IMODE(os.lstat(root / "quarantine").st_mode) == 0o700


def test_setting_aside_opens_the_root_once_and_never_walks_the_mailbox_again(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN §1: the claim holds the root it was taken under and its mailbox folder;
    the quarantine is made below that root, the letter moved out of that folder."""
    for name in ("0000000000001-00000000.json", "0000000000002-00000000.json"):
        bad_letter(root, name)
    opened = Opened(monkeypatch)
    for claim in mailbox.claims(root, ADDRESS):
        assert isinstance(claim.content, Rejected)
        claim.set_aside(claim.content.reason)
        claim.release()
    assert opened.roots == 1
    assert opened.entered[str(root / "inbox")] == 1
    assert opened.entered[str(inbox(root))] == 1
    assert [entry.name for entry in quarantine.quarantined(root)] == [
        "0000000000001-00000000.json",
        "0000000000002-00000000.json",
    ]


def test_a_claim_sets_aside_after_the_claiming_loop_is_gone(root: Path) -> None:
    """A claim owns what it needs: the state machines take one claim and drop the rest
    of the loop before deciding."""
    bad_letter(root, "0000000000001-00000000.json")
    claim = next(mailbox.claims(root, ADDRESS))  # the generator is collected here
    moved = claim.set_aside("not JSON")
    claim.release()
    assert Path(moved.path).read_bytes() == b"{not json"
    assert not (inbox(root) / "0000000000001-00000000.json").exists()


def test_a_symlinked_quarantine_is_refused_and_the_letter_stays_queued(
    root: Path, tmp_path: Path
) -> None:
    name = "0000000000001-00000000.json"
    bad_letter(root, name)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "quarantine").symlink_to(elsewhere)
    with pytest.raises(files.UnsafePath):
        set_aside(root, ADDRESS, name, "not JSON")
    assert list(elsewhere.iterdir()) == []
    assert (inbox(root) / name).read_bytes() == b"{not json"


# -- the quarantine is bounded, and says what it kept ----------------------------------


def test_an_oversize_letter_keeps_only_its_head_in_quarantine(root: Path) -> None:
    name = "0000000000001-00000000.json"
    size = LETTER_READ_LIMIT * 3
    bad_letter(root, name, b"x" * size)
    moved = Path(set_aside(root, ADDRESS, name, "file is too large").path)
    assert moved.stat().st_size == LETTER_READ_LIMIT
    reason = (moved.parent / (name + ".reason")).read_text()
    assert reason == f"file is too large (kept the first {LETTER_READ_LIMIT} of {size} bytes)\n"
    assert not (inbox(root) / name).exists()


def test_a_letter_of_exactly_the_read_limit_is_moved_whole(root: Path) -> None:
    """Only a letter past the limit is cut: one of exactly the limit is moved (the
    same file, not a copy) and its reason says nothing was cut."""
    name = "0000000000001-00000000.json"
    bad_letter(root, name, b"x" * LETTER_READ_LIMIT)
    inode = (inbox(root) / name).stat().st_ino
    moved = Path(set_aside(root, ADDRESS, name, "not JSON").path)
    assert moved.stat().st_ino == inode
    assert [q.reason for q in quarantine.quarantined(root)] == ["not JSON"]


def test_a_name_set_aside_twice_keeps_both(root: Path) -> None:
    name = "0000000000001-00000000.json"
    bad_letter(root, name, b"first")
    first = Path(set_aside(root, ADDRESS, name, "one").path)
    bad_letter(root, name, b"second")
    second = Path(set_aside(root, ADDRESS, name, "two").path)
    assert first != second
    assert first.read_bytes() == b"first"
    assert second.read_bytes() == b"second"
    assert [q.reason for q in quarantine.quarantined(root)] == ["one", "two"]


def test_a_name_set_aside_again_and_again_is_numbered_from_one(root: Path) -> None:
    name = "0000000000001-00000000.json"
    kept = []
    for number in range(3):
        bad_letter(root, name, f"letter {number}".encode())
        kept.append(Path(set_aside(root, ADDRESS, name, f"bad {number}").path).name)
    assert kept == [name, f"{name}.1", f"{name}.2"]


@pytest.mark.parametrize(
    "name",
    ["0000000000001-" + "a" * 236 + ".json", "x" + "é" * 124 + "y.json"],
    ids=["ASCII", "two bytes a character"],
)
def test_a_name_too_long_for_its_reason_beside_it_is_cut_to_fit_and_still_moved(
    root: Path, name: str
) -> None:
    """A 255-byte name leaves no room for ``.reason``: the letter is kept under the
    longest head of its name (cut between characters) that leaves room, numbered
    when taken, and the reason says the name it had."""
    assert len(os.fsencode(name)) == 255  # the most a file name holds (NAME_MAX)
    kept = []
    for number in range(2):
        bad_letter(root, name, f"letter {number}".encode())
        kept.append(Path(set_aside(root, ADDRESS, name, f"bad {number}").path))
        assert mailbox.letter_names(root, ADDRESS) == []
    room = 255 - len(quarantine.REASON_SUFFIX)
    # The longest heads that fit: one more character would not (é is two bytes).
    heads = [name[: len(kept[0].name)], name[: len(kept[1].name) - 2]]
    assert [path.name for path in kept] == [heads[0], heads[1] + ".1"]
    assert all(len(path.name.encode("utf-8")) <= room for path in kept)
    assert len(name[: len(heads[0]) + 1].encode()) > room
    assert len(name[: len(heads[1]) + 1].encode()) > room - 2
    assert [path.read_bytes() for path in kept] == [b"letter 0", b"letter 1"]
    assert [(q.name, q.reason) for q in quarantine.quarantined(root)] == [
        (path.name, f"bad {n} (named {name} in the mailbox: cut to fit beside its reason)")
        for n, path in enumerate(kept)
    ]


def test_a_reason_left_without_its_letter_keeps_its_name_taken(root: Path) -> None:
    """A receiver that died between writing the reason and moving the letter left the
    reason alone: the next letter of that name is kept beside it, not over it."""
    name = "0000000000001-00000000.json"
    bad_letter(root, "0000000000000-00000000.json")
    set_aside(root, ADDRESS, "0000000000000-00000000.json", "not JSON")
    (root / "quarantine" / ADDRESS / f"{name}.reason").write_text("died before the move\n")
    bad_letter(root, name, b"second")
    kept = Path(set_aside(root, ADDRESS, name, "not JSON either").path)
    assert kept.name == f"{name}.1"
    assert kept.read_bytes() == b"second"


def test_the_oldest_evicted_may_be_a_reason_left_without_its_letter(root: Path) -> None:
    names = [f"{i:013d}-00000000.json" for i in range(1, quarantine.CAP + 1)]
    kept = root / "quarantine" / ADDRESS
    kept.mkdir(parents=True)
    orphan = kept / "0000000000000-00000000.json.reason"
    orphan.write_text("died before the move\n")
    os.utime(orphan, ns=(0, 0))  # the oldest
    evicted: list[str] = []
    for name in names:
        bad_letter(root, name)
        evicted += set_aside(root, ADDRESS, name, f"bad {name}").evicted
    assert evicted == ["0000000000000-00000000.json"]
    assert not orphan.exists()
    assert [q.name for q in quarantine.quarantined(root)] == names


def test_past_the_cap_the_oldest_are_evicted_and_named(root: Path) -> None:
    names = [f"{i:013d}-00000000.json" for i in range(quarantine.CAP + 3)]
    evicted: list[str] = []
    for name in names:
        bad_letter(root, name)
        evicted += set_aside(root, ADDRESS, name, f"bad {name}").evicted
    assert evicted == names[:3]
    kept = quarantine.quarantined(root)
    assert [q.name for q in kept] == names[3:]
    assert len(os.listdir(root / "quarantine" / ADDRESS)) == 2 * quarantine.CAP


def test_the_listing_holds_every_address_and_passes_over_what_is_no_address(
    root: Path,
) -> None:
    """A folder in quarantine/ that is no address (a stray one, sorted before the
    addresses or among them) is passed over; the letters of every address are listed."""
    addresses = ["s-00000000000a", ADDRESS, "s-fffffffffff0"]
    for number, address in enumerate(addresses):
        name = f"000000000000{number}-00000000.json"
        folder = root / "inbox" / address
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"{not json")
        set_aside(root, address, name, f"bad {number}")
    (root / "quarantine" / "lost+found").mkdir()
    (root / "quarantine" / "s-0123456789ab.bak").mkdir()
    listed = quarantine.quarantined(root)
    assert [(q.address, q.reason) for q in listed] == [
        (address, f"bad {number}") for number, address in enumerate(addresses)
    ]


def test_the_listing_passes_over_a_reason_it_cannot_read_and_follows_no_link(
    root: Path, tmp_path: Path
) -> None:
    bad_letter(root, "0000000000001-00000000.json")
    set_aside(root, ADDRESS, "0000000000001-00000000.json", "not JSON")
    kept = root / "quarantine" / ADDRESS
    planted = tmp_path / "planted"
    planted.write_text("a reason pipost never wrote")
    (kept / "0000000000002-00000000.json.reason").symlink_to(planted)
    (kept / "0000000000003-00000000.json.reason").mkdir()
    listed = quarantine.quarantined(root)
    assert [(q.name, q.reason) for q in listed] == [("0000000000001-00000000.json", "not JSON")]


def test_the_listing_shows_a_reason_as_text_whatever_its_bytes_and_only_its_head(
    root: Path,
) -> None:
    """The folder is the user's: a reason of bytes that are not UTF-8 is listed with
    replacement characters, and a long one by its first REASON_READ_LIMIT bytes."""
    for number in (1, 2):
        bad_letter(root, f"000000000000{number}-00000000.json")
        set_aside(root, ADDRESS, f"000000000000{number}-00000000.json", "not JSON")
    kept = root / "quarantine" / ADDRESS
    (kept / "0000000000001-00000000.json.reason").write_bytes(b"bad \xff bytes\n")
    long_reason = "r" * (quarantine.REASON_READ_LIMIT + 100)
    (kept / "0000000000002-00000000.json.reason").write_text(long_reason)
    listed = [q.reason for q in quarantine.quarantined(root)]
    assert listed == ["bad \ufffd bytes", long_reason[: quarantine.REASON_READ_LIMIT]]


def test_the_listing_passes_over_a_reason_removed_while_it_lists(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for number in (1, 2, 3):
        bad_letter(root, f"000000000000{number}-00000000.json")
        set_aside(root, ADDRESS, f"000000000000{number}-00000000.json", f"bad {number}")
    kept = root / "quarantine" / ADDRESS
    read_bounded = files.Folder.read_bounded
    evicted: list[str] = []

    def evicted_meanwhile(folder: files.Folder, name: str, limit: int) -> bytes | None:
        if not evicted:  # the first read, whatever order the folder lists them in
            evicted.append(name)
            (kept / name).unlink()  # another receiver evicts it, between its lstat and its read
        return read_bounded(folder, name, limit)

    monkeypatch.setattr(files.Folder, "read_bounded", evicted_meanwhile)
    listed = [q.name + ".reason" for q in quarantine.quarantined(root)]
    assert len(evicted) == 1
    assert listed == sorted(
        {f"000000000000{n}-00000000.json.reason" for n in (1, 2, 3)} - set(evicted)
    )


def test_the_listing_passes_over_an_address_whose_folder_goes_while_it_lists(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad_letter(root, "0000000000001-00000000.json")
    set_aside(root, ADDRESS, "0000000000001-00000000.json", "not JSON")
    emptied = root / "quarantine" / "s-00000000000a"
    emptied.mkdir()
    names = files.Folder.names

    def emptied_meanwhile(folder: files.Folder) -> list[str]:
        listed = names(folder)
        if emptied.name in listed:
            emptied.rmdir()  # its owner cleans up, between the listing and the opening
        return listed

    monkeypatch.setattr(files.Folder, "names", emptied_meanwhile)
    assert [(q.address, q.reason) for q in quarantine.quarantined(root)] == [(ADDRESS, "not JSON")]


def test_listing_the_quarantine_changes_nothing(root: Path) -> None:
    bad_letter(root, "0000000000001-00000000.json")
    set_aside(root, ADDRESS, "0000000000001-00000000.json", "not JSON")
    before = tree_snapshot(root)
    listed = quarantine.quarantined(root)
    assert [(q.address, q.reason) for q in listed] == [(ADDRESS, "not JSON")]
    folder = files.walk(root, "quarantine")
    assert folder is not None
    with folder:
        assert quarantine.quarantined_in(folder) == listed  # as the doctor reads it
    assert tree_snapshot(root) == before
