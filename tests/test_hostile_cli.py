"""What pipost's own front ends say about hostile input (INV-22; SPEC 8, 10): the
command line fails saying "symlink" where a folder or record of the post office is
one, a receiver refuses to start on a symlinked mailbox, and escape sequences in
file names never reach the terminal raw.

the kit's features/hostile_input.feature lays the same trees and judges them through the
driver (nothing followed, nothing behind the link read or written); these are
pipost's choices of how to refuse, and its words.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from pipost import host
from pipost.message import encode
from pipost.post import Post
from pipost.session import Record
from tests.helpers import NOW, make_message, make_record, tree_snapshot, write_record
from tests.test_cli import run

ESCAPES = ("\x1b", "\x07")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "post"


@pytest.fixture
def bob(root: Path) -> Record:
    return write_record(root, make_record("hostile-bob", "/home/dev/bob", name="bob"))


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside the post office holding a valid letter, "lured"."""
    folder = tmp_path / "outside"
    folder.mkdir()
    letter = make_message(NOW, body="lured")
    (folder / letter.file_name).write_bytes(encode(letter))
    return folder


def mailbox_of(root: Path, record: Record) -> Path:
    return root / "inbox" / record.address


def fails_saying(ran_code: int, stderr: str, words: str) -> bool:
    return ran_code == 1 and stderr.startswith("pi-post: ") and words in stderr


def test_a_symlinked_mailbox_is_refused_by_peek_send_and_the_receiver_saying_so(
    root: Path, bob: Record, outside: Path
) -> None:
    mailbox_of(root, bob).parent.mkdir(mode=0o700, exist_ok=True)
    mailbox_of(root, bob).symlink_to(outside)
    before = tree_snapshot(outside)
    for argv in (["peek", bob.address], ["send", "--to", bob.address, "--body", "hello"]):
        ran = run(argv, root)
        assert fails_saying(ran.code, ran.stderr, "symlink"), (argv, ran)
    refuses_to_start(root)
    assert tree_snapshot(outside) == before


def refuses_to_start(root: Path) -> None:
    """Bob's receiver will not start on a mailbox reached through a symlink."""
    receiver = host.Host(
        Post(root), "hostile-bob", "/home/dev/bob", host.StreamContext(io.StringIO())
    )
    with pytest.raises(OSError, match="symlink"):
        receiver.start()
    receiver.stop()


def test_a_symlinked_inbox_is_refused_but_listed_as_empty(
    root: Path, bob: Record, outside: Path, tmp_path: Path
) -> None:
    lured_inbox = tmp_path / "lured-inbox"
    lured_inbox.mkdir()
    outside.rename(lured_inbox / bob.address)
    (root / "inbox").symlink_to(lured_inbox)
    before = tree_snapshot(lured_inbox)
    for argv in (["peek", bob.address], ["send", "--to", bob.address, "--body", "hello"]):
        ran = run(argv, root)
        assert fails_saying(ran.code, ran.stderr, "symlink"), (argv, ran)
    ran = run(["list", "--all"], root)
    assert ran.code == 0 and "bob" in ran.stdout and "lured" not in ran.stdout, ran
    refuses_to_start(root)
    assert tree_snapshot(lured_inbox) == before


def _mallory(tmp_path: Path) -> Record:
    record = make_record("hostile-mallory", str(tmp_path), name="mallory", pid=os.getpid())
    write_record(tmp_path / "lure", record)
    return record


def test_a_symlinked_registry_folder_fails_listings_and_sends_saying_so(
    root: Path, bob: Record, tmp_path: Path
) -> None:
    mallory = _mallory(tmp_path)
    registry = root / "registry"
    for entry in registry.iterdir():
        entry.unlink()
    registry.rmdir()
    registry.symlink_to(tmp_path / "lure" / "registry")
    before = tree_snapshot(tmp_path)
    ran = run(["list", "--all"], root)
    assert fails_saying(ran.code, ran.stderr, "symlink"), ran
    ran = run(["resolve", mallory.address], root)
    assert ran.code == 0 and "no registry record" in ran.stdout, ran
    assert "mallory" not in ran.stdout
    ran = run(["send", "--to", "mallory", "--body", "hello"], root)
    assert fails_saying(ran.code, ran.stderr, "symlink"), ran
    assert tree_snapshot(tmp_path) == before


def test_a_symlinked_record_is_skipped_by_listings_and_resolution(
    root: Path, bob: Record, tmp_path: Path
) -> None:
    mallory = _mallory(tmp_path)
    planted = tmp_path / "lure" / "registry" / f"{mallory.address}.json"
    (root / "registry" / planted.name).symlink_to(planted)
    before = tree_snapshot(tmp_path)
    ran = run(["list", "--all"], root)
    assert ran.code == 0 and "bob" in ran.stdout and "mallory" not in ran.stdout, ran
    ran = run(["resolve", "mallory"], root)
    assert fails_saying(ran.code, ran.stderr, "is not an address"), ran
    ran = run(["resolve", mallory.address], root)
    assert ran.code == 0 and "no registry record" in ran.stdout, ran
    assert "mallory" not in ran.stdout
    assert tree_snapshot(tmp_path) == before


def test_a_reply_address_like_a_path_is_refused_at_the_sender(root: Path, bob: Record) -> None:
    before = tree_snapshot(root)
    ran = run(["send", "--to", bob.address, "--reply-to", "../../x", "--body", "hello"], root)
    assert fails_saying(ran.code, ran.stderr, "--reply-to must be an address"), ran
    assert tree_snapshot(root) == before


ESCAPED_NAME = "\x1b[2J\x1b]0;owned\x07.json"


@pytest.mark.parametrize(
    ("where", "argv"),
    [("mailbox", ["peek", "BOB"]), ("quarantine", ["log"]), ("quarantine", ["quarantine"])],
)
def test_escapes_in_a_letter_s_file_name_are_spelled_out(
    root: Path, bob: Record, where: str, argv: list[str]
) -> None:
    folder = mailbox_of(root, bob)
    folder.mkdir(mode=0o700, parents=True)
    (folder / ESCAPED_NAME).write_bytes(b"{}")
    if where == "quarantine":
        receiver = host.Host(
            Post(root), "hostile-bob", "/home/dev/bob", host.StreamContext(io.StringIO())
        )
        receiver.drain()
        assert receiver.stats.set_aside == 1
    ran = run([bob.address if arg == "BOB" else arg for arg in argv], root)
    shown = ran.stdout + ran.stderr
    assert ran.code == 0, ran
    assert "\\x1b" in shown, shown
    assert not [escape for escape in ESCAPES if escape in shown], shown
