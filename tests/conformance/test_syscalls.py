"""The trace reader of the conformance kit (pipost_conformance.syscalls), on lines
recorded from ``strace -f -qq -yy`` over the Node port and over pipost's driver,
and on the same lines with one fault planted each: what SPEC 1 and 3.1 ask of a
write (INV-03, INV-04) and SPEC 3.3 of a claim."""

from __future__ import annotations

from pathlib import Path

from pipost_conformance import syscalls

TRACES = Path(__file__).parent / "traces"
"""Lines strace wrote (paths shortened to /t): the Node port depositing a letter,
pipost writing a record and claiming a letter."""

ROOT = "/t/post"
BOX = f"{ROOT}/inbox/s-cb61287a5998"
LETTER = f"{BOX}/1796078534257-11b44dd4.json"
RECORD = f"{ROOT}/registry/s-cb61287a5998.json"

NODE_DEPOSIT = (TRACES / "node-deposit.strace").read_text(encoding="utf-8")

PYTHON_RECORD = (TRACES / "pipost-record.strace").read_text(encoding="utf-8")

PYTHON_CLAIM = (TRACES / "pipost-claim.strace").read_text(encoding="utf-8")


def _planted(trace: str, old: str, new: str) -> str:
    assert trace.count(old) == 1, old
    return trace.replace(old, new)


def test_paths_are_read_whole_whichever_way_the_call_names_them() -> None:
    """Through /proc/self/fd/N (the Node port), relative to a descriptor (pipost),
    and the escapes of a printed string undone; a signal line is no call."""
    node = syscalls.events(NODE_DEPOSIT)
    (rename,) = [e for e in node if e.kind == "rename"]
    assert (rename.path, rename.target) == (f"{LETTER}.tmp", LETTER)
    assert [e.call for e in node] == [
        "openat",
        "flock",
        "openat",
        "write",
        "fsync",
        "rename",
        "fsync",
        "write",
    ]
    python = syscalls.events(PYTHON_RECORD)
    (renameat,) = [e for e in python if e.kind == "rename"]
    assert renameat.target == RECORD
    assert renameat.path == f"{ROOT}/registry/.s-cb61287a5998.af22f34f.tmp"
    assert syscalls.unquote(r'"a\"b\\c\nd\x41\101"...') == 'a"b\\c\ndAA'


def test_a_call_another_thread_interrupted_is_read_where_it_resumed() -> None:
    trace = (
        '7  openat(3</t/post/registry>, "s-cb61287a5998.json", O_WRONLY|O_TRUNC <unfinished ...>\n'
        "8  fsync(5</t/post>) = 0\n"
        "7  <... openat resumed>) = 6</t/post/registry/s-cb61287a5998.json>\n"
    )
    found = syscalls.events(trace)
    assert [(e.pid, e.call) for e in found] == [(8, "fsync"), (7, "openat")]
    assert found[1].path == RECORD
    assert found[1].flags == {"O_WRONLY", "O_TRUNC"}


def test_a_call_that_failed_did_nothing() -> None:
    trace = '9  rename("/t/post/inbox/s-cb61287a5998/a.json", "/t/x") = -1 ENOENT (No such file)\n'
    assert syscalls.events(trace) == []


def test_the_ports_and_pipost_write_as_spec_1_says() -> None:
    for trace, path in ((NODE_DEPOSIT, LETTER), (PYTHON_RECORD, RECORD)):
        found = syscalls.events(trace)
        assert syscalls.written_in_place(found, ROOT) == []
        assert syscalls.not_renamed_into_place(found, path) == []
        assert syscalls.not_flushed(found, path) == []
    claim = syscalls.events(PYTHON_CLAIM)
    assert syscalls.written_in_place(claim, ROOT) == []
    assert syscalls.moved_before_unlink(claim, LETTER) == []


def test_a_letter_written_in_place_is_seen_and_its_flushes_still_count() -> None:
    """INV-03 fails; INV-04 does not: the letter and its folder were flushed."""
    in_place = "".join(line for line in NODE_DEPOSIT.splitlines(True) if "rename(" not in line)
    in_place = _planted(in_place, "O_CREAT|O_EXCL", "O_CREAT|O_TRUNC")
    in_place = in_place.replace(".json.tmp", ".json")
    found = syscalls.events(in_place)
    assert len(syscalls.written_in_place(found, ROOT)) == 2  # the open and the write
    assert syscalls.not_renamed_into_place(found, LETTER) == [
        f"openat({LETTER}, O_CLOEXEC|O_CREAT|O_NOFOLLOW|O_TRUNC|O_WRONLY): "
        "created under its own name, not renamed into place"
    ]
    assert syscalls.not_flushed(found, LETTER) == []


def test_a_record_truncated_in_place_is_seen() -> None:
    trace = '6174  truncate("/t/post/registry/s-cb61287a5998.json", 0) = 0\n'
    assert len(syscalls.written_in_place(syscalls.events(trace), ROOT)) == 1


def test_temporaries_and_other_folders_may_be_written() -> None:
    """Only a name readers look at, in a mailbox or the registry, is mail or a record."""
    for path in (
        f"{BOX}/a.json.tmp",
        f"{BOX}/.a.json",
        f"{ROOT}/registry/.s-cb61287a5998.af22f34f.tmp",
        f"{ROOT}/quarantine/s-cb61287a5998/a.json",
        f"{ROOT}/inbox/a.json",
    ):
        assert not syscalls.is_mail_or_record(path, ROOT), path
    assert syscalls.is_mail_or_record(LETTER, ROOT)
    assert syscalls.is_mail_or_record(RECORD, ROOT)


def test_a_rename_from_a_name_readers_see_or_from_another_folder_is_seen() -> None:
    seen = syscalls.events(
        _planted(PYTHON_RECORD, '".s-cb61287a5998.af22f34f.tmp", 3', '"a.json", 3')
    )
    (problem,) = syscalls.not_renamed_into_place(seen, RECORD)
    assert problem.endswith("renamed from a name readers look at")
    moved = syscalls.events(
        _planted(PYTHON_RECORD, 'renameat(3</t/post/registry>, ".s', 'renameat(4</t/post>, ".s')
    )
    (problem,) = syscalls.not_renamed_into_place(moved, RECORD)
    assert problem.endswith("renamed from another folder")


def test_no_flush_of_the_temporary_before_the_rename_is_seen() -> None:
    """A flush of the letter after the rename is too late: a crash between the two
    can leave its name over bytes not on disk."""
    late = [line for line in NODE_DEPOSIT.splitlines(True) if "fsync(21<" not in line]
    late.insert(-1, f"5784  fsync(21<{LETTER}>) = 0\n")  # after the rename
    (problem,) = syscalls.not_flushed(syscalls.events("".join(late)), LETTER)
    assert "not flushed (fsync) before rename" in problem


def test_a_folder_flushed_only_after_the_answer_is_seen() -> None:
    folder = f"5784  fsync(20<{BOX}>) = 0\n"
    late = _planted(NODE_DEPOSIT, folder, "") + folder
    (problem,) = syscalls.not_flushed(syscalls.events(late), LETTER)
    assert f"the folder {BOX} was not flushed (fsync) after rename" in problem


def test_a_sync_of_everything_flushes_the_folder_too() -> None:
    synced = _planted(NODE_DEPOSIT, f"5784  fsync(20<{BOX}>) = 0\n", "5784  sync() = 0\n")
    assert syscalls.not_flushed(syscalls.events(synced), LETTER) == []


def test_a_claim_that_moves_the_letter_before_its_unlink_is_seen() -> None:
    unlink = f'6174  unlinkat(6<{BOX}>, "1796078534257-11b44dd4.json", 0) = 0\n'
    moved = _planted(
        PYTHON_CLAIM,
        unlink,
        f'6174  renameat(6<{BOX}>, "1796078534257-11b44dd4.json", 6<{BOX}>, "taken") = 0\n'
        + unlink.replace("1796078534257-11b44dd4.json", "taken"),
    )
    (problem,) = syscalls.moved_before_unlink(syscalls.events(moved), LETTER)
    assert problem.endswith("the claimed letter moved from its name before its unlink")


def test_the_answer_is_the_first_write_to_standard_output_after_the_naming() -> None:
    found = syscalls.events(NODE_DEPOSIT)
    (rename,) = [e for e in found if e.kind == "rename"]
    answer = syscalls.answer_after(found, rename.index)
    assert answer is not None and answer.index == len(found) - 1
    assert syscalls.answer_after(found, answer.index) is None


def test_a_mailbox_made_for_the_letter_is_flushed_into_its_parent() -> None:
    """A letter in a folder whose own name never reached the disk is lost with it."""
    made = f'5784  mkdir("{BOX}", 0700) = 0\n'
    flushed = f"5784  fsync(19<{ROOT}/inbox>) = 0\n"
    assert syscalls.not_flushed(syscalls.events(made + flushed + NODE_DEPOSIT), LETTER) == []
    (problem,) = syscalls.not_flushed(syscalls.events(made + NODE_DEPOSIT), LETTER)
    assert problem == (
        f"mkdir({BOX}): the folder made for it was not flushed into {ROOT}/inbox before the answer"
    )
    earlier = '5784  write(1<pipe:[9]>, "{}", 2) = 2\n'  # the folder was made before the operation
    assert syscalls.not_flushed(syscalls.events(made + earlier + NODE_DEPOSIT), LETTER) == []


COUNTED = (
    "5784  getdents64(20</t/post/inbox/s-cb61287a5998>, 0x5f1d2a0 /* 3 entries */, 32768) = 80\n"
)


def test_a_deposit_counts_its_mailbox_under_an_exclusive_flock() -> None:
    """INV-08: the flock may come from a helper process (flock(1), pid 5826), the
    count (the listing) from the port itself, after it."""
    lock = "5826  flock(3</t/post/inbox/s-cb61287a5998>, LOCK_EX) = 0\n"
    counted = _planted(NODE_DEPOSIT, lock, lock + COUNTED)
    assert syscalls.counted_unlocked(syscalls.events(counted), LETTER) == []
    assert syscalls.counted_unlocked(syscalls.events(NODE_DEPOSIT), LETTER) == [
        f"the mailbox folder {ROOT}/inbox/s-cb61287a5998 was not listed (counted) between "
        f"its lock and rename({LETTER}.tmp -> {LETTER})"
    ]
    unlocked = _planted(counted, lock, "")
    assert syscalls.counted_unlocked(syscalls.events(unlocked), LETTER) == [
        f"no exclusive flock on the mailbox folder {ROOT}/inbox/s-cb61287a5998 before "
        f"rename({LETTER}.tmp -> {LETTER})"
    ]
    counted_first = _planted(unlocked, "5784  rename(", COUNTED + lock + "5784  rename(")
    assert "was not listed" in syscalls.counted_unlocked(syscalls.events(counted_first), LETTER)[0]
    shared = _planted(counted, "LOCK_EX", "LOCK_SH")
    assert "no exclusive flock" in syscalls.counted_unlocked(syscalls.events(shared), LETTER)[0]
