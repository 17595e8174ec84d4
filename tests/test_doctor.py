"""``pi-post doctor``: the decisions from a snapshot of facts, without a filesystem
(golden texts pinned), then the survey that gathers the facts from a real tree and
changes nothing in it (INV-16)."""

from __future__ import annotations

import errno
import io
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pipost import cli, doctor, files, listeners, mailbox, message, quarantine
from pipost.address import address_of
from pipost.contract import gathering
from pipost.contract.compatibility import latest
from pipost.doctor import (
    ATTENTION,
    OK,
    ContractFacts,
    FolderFacts,
    PostOfficeFacts,
    SessionFacts,
    Temporary,
)
from pipost.session import TEMPORARY_STALE_MS, Presence
from tests.helpers import (
    DAY_MS,
    NOW,
    FakeProcessTable,
    deposit,
    made,
    make_message,
    make_record,
    put,
    set_aside,
    tree_snapshot,
    write_record,
)

ROOT = "/home/dev/.pi/agent/post"
UID = 1000
FINGERPRINT = "sha256:" + "5e" * 32
ALICE = make_record(
    "sess-alice", "/home/dev/alice", name="alice", pid=4242, pid_start="t", last_seen=NOW - 5000
)
BOB = make_record("sess-bob", "/home/dev/bob", name="bob", last_seen=NOW - DAY_MS)


def folder(role: str, where: str = "", **changes: object) -> FolderFacts:
    path = f"{ROOT}/{where or role}" if role != "root" else ROOT
    address = where.rpartition("/")[2] if role == "mailbox" else None
    return FolderFacts(role, path, "folder", UID, 0o700, None, address).replace(**changes)


def healthy(**changes: object) -> PostOfficeFacts:
    """A post office in good health: alice live with 3 letters queued, bob offline,
    a deposit in flight, a small drop log."""
    facts = PostOfficeFacts(
        root=ROOT,
        uid=UID,
        now=NOW,
        linux=True,
        folders=(
            folder("root"),
            folder("registry"),
            folder("inbox"),
            folder("mailbox", f"inbox/{ALICE.address}"),
            folder("quarantine", kind="missing"),
            folder("log"),
        ),
        kernel_watch=True,
        start_times=True,
        contract=ContractFacts(1, FINGERPRINT, True),
        sessions=(
            SessionFacts(ALICE, Presence.LIVE, "t"),
            SessionFacts(BOB, Presence.OFFLINE, None),
        ),
        queued={ALICE.address: 3},
        temporaries=(Temporary(f"{ROOT}/inbox/{ALICE.address}/x.json.tmp", "x.json.tmp", 10),),
        drop_log=(2300, 0),
        listening={ALICE.address: (4242,)},
    )
    return facts.replace(**changes)


def lines(facts: PostOfficeFacts) -> list[str]:
    return doctor.report(doctor.diagnose(facts))


def codes(facts: PostOfficeFacts) -> list[str]:
    return [finding.code for finding in doctor.diagnose(facts)]


def needing_attention(facts: PostOfficeFacts) -> list[str]:
    return [line for line in lines(facts) if line.startswith(ATTENTION)]


# -- the pure part: healthy ---------------------------------------------------------------


def test_a_healthy_post_office_reads_so_line_by_line() -> None:
    assert lines(healthy()) == [
        "ok        root-ok: /home/dev/.pi/agent/post is a private folder of yours (mode 0700)",
        "ok        registry-ok: the registry holds 2 readable records",
        "ok        inbox-ok: inbox/ holds 1 mailbox folder",
        "ok        kernel-watch-ok: the kernel watch (inotify) works: mail enters a listening "
        "session as it arrives",
        "ok        start-times-ok: process start times can be read: a recycled pid is told from "
        "the session that registered it",
        "ok        temporaries-ok: no temporary file in the mailboxes or the registry is older "
        "than 36 hours",
        "ok        quarantine-ok: the quarantine is empty",
        "ok        drop-log-ok: the drop log holds 2.25 KiB (it rotates at 1 MiB, keeping one old "
        "file); pi-post log shows it",
        "ok        records-ok: 2 sessions registered, 1 running; no record names a process that "
        "ended or hangs",
        "ok        mailboxes-ok: 3 letters queued; no mailbox holds 40 or more (the cap is 50)",
        "ok        listeners-ok: 1 listener running; no session has more than one",
        f"ok        contract-ok: the wire contract is message schema v1, fingerprint "
        f"{FINGERPRINT}, as pinned",
        "healthy: nothing needs attention",
    ]
    assert doctor.healthy(doctor.diagnose(healthy()))


def test_a_post_office_not_made_yet_is_healthy_and_only_the_machine_is_checked() -> None:
    facts = healthy(folders=(folder("root", kind="missing"),), sessions=(), queued={})
    assert codes(facts) == ["root-missing", "kernel-watch-ok", "start-times-ok", "contract-ok"]
    assert lines(facts)[0] == (
        "ok        root-missing: there is no post office at /home/dev/.pi/agent/post yet: the "
        "first send or listen makes it (PI_POST_DIR chooses another)"
    )
    assert doctor.healthy(doctor.diagnose(facts))


def test_a_snapshot_given_no_counts_has_none_of_them() -> None:
    facts = PostOfficeFacts(
        ROOT, UID, NOW, True, healthy().folders, True, True, ContractFacts(1, FINGERPRINT, True)
    )
    assert (facts.queued, facts.quarantined, facts.listening) == ({}, {}, {})
    assert doctor.healthy(doctor.diagnose(facts))


def test_no_registry_and_no_inbox_yet_is_healthy() -> None:
    facts = healthy(
        folders=(
            folder("root"),
            folder("registry", kind="missing"),
            folder("inbox", kind="missing"),
        ),
        sessions=(),
        queued={},
        temporaries=(),
    )
    assert lines(facts)[1:3] == [
        "ok        registry-missing: no session has registered yet (there is no registry/ folder)",
        "ok        inbox-missing: no mail has been sent yet (there is no inbox/ folder)",
    ]
    assert "records-ok" not in codes(facts)
    assert "mailboxes-ok" not in codes(facts)
    assert doctor.healthy(doctor.diagnose(facts))


def subjects(facts: PostOfficeFacts) -> dict[str, str | None]:
    return {finding.code: finding.subject for finding in doctor.diagnose(facts)}


def test_the_findings_about_a_folder_or_the_drop_log_name_it_as_their_subject() -> None:
    drops = f"{ROOT}/log/drops.jsonl"
    assert subjects(healthy()) == {
        "root-ok": ROOT,
        "registry-ok": f"{ROOT}/registry",
        "inbox-ok": f"{ROOT}/inbox",
        "kernel-watch-ok": None,
        "start-times-ok": None,
        "temporaries-ok": None,
        "quarantine-ok": None,
        "drop-log-ok": drops,
        "records-ok": None,
        "mailboxes-ok": None,
        "listeners-ok": None,
        "contract-ok": None,
    }
    assert subjects(healthy(drop_log=(0, 0)))["drop-log-ok"] == drops
    missing = healthy(
        folders=(
            folder("root"),
            folder("registry", kind="missing"),
            folder("inbox", kind="missing"),
        )
    )
    assert subjects(missing)["registry-missing"] == f"{ROOT}/registry"
    assert subjects(missing)["inbox-missing"] == f"{ROOT}/inbox"
    assert subjects(healthy(folders=(folder("root", kind="missing"),)))["root-missing"] == ROOT


def test_the_drop_log_size_counts_the_rotated_file_too() -> None:
    (said,) = [
        f.text for f in doctor.diagnose(healthy(drop_log=(2300, 1000))) if f.code == "drop-log-ok"
    ]
    assert said.startswith("the drop log holds 3.22 KiB (it rotates at 1 MiB")


def test_a_root_with_no_permission_bits_at_all_shows_its_mode_as_it_is() -> None:
    assert lines(healthy(folders=(folder("root", mode=0o000),)))[0] == (
        "ok        root-ok: /home/dev/.pi/agent/post is a private folder of yours (mode 0000)"
    )


def test_a_folder_whose_owner_is_not_known_is_not_called_someone_elses() -> None:
    assert codes(healthy(folders=(folder("root", owner=None),)))[0] == "root-ok"


# -- the pure part: what needs attention --------------------------------------------------


def test_a_root_writable_by_others_is_reported_with_the_chmod_and_nothing_below_it() -> None:
    facts = healthy(folders=(folder("root", mode=0o777),))
    assert needing_attention(facts) == [
        "attention root-mode: /home/dev/.pi/agent/post is writable by others (mode 0777): "
        "whoever can write there can forge mail — fix: chmod 700 /home/dev/.pi/agent/post"
    ]
    assert codes(facts) == ["root-mode", "kernel-watch-ok", "start-times-ok", "contract-ok"]
    assert lines(facts)[-1] == "1 finding needs attention"


def test_several_findings_need_attention_in_the_plural() -> None:
    assert lines(healthy(kernel_watch=False, start_times=False))[-1] == (
        "2 findings need attention"
    )


def test_a_symlinked_root_is_reported_with_the_fix() -> None:
    facts = healthy(folders=(folder("root", kind="symlink", owner=None, mode=None),))
    assert needing_attention(facts) == [
        "attention root-symlink: /home/dev/.pi/agent/post is a symlink, which pi-post never "
        "follows — fix: point PI_POST_DIR at the real folder"
    ]


def test_a_root_of_another_user_is_reported_with_the_fix() -> None:
    facts = healthy(folders=(folder("root", owner=0),))
    assert needing_attention(facts) == [
        "attention root-owner: /home/dev/.pi/agent/post is owned by uid 0, not by you (uid "
        "1000); pi-post only uses folders of your own — fix: chown 1000 "
        "/home/dev/.pi/agent/post (as root), or set PI_POST_DIR to a post office of your own"
    ]


def test_a_folder_that_cannot_be_read_is_reported() -> None:
    broken = folder("registry", kind="unreadable", error="Permission denied")
    facts = healthy(folders=(folder("root"), broken, folder("inbox")))
    assert needing_attention(facts) == [
        "attention registry-unreadable: /home/dev/.pi/agent/post/registry cannot be read: "
        "Permission denied — fix: chmod 700 /home/dev/.pi/agent/post/registry"
    ]
    assert "records-ok" not in codes(facts)  # what could not be read is not vouched for


def test_a_symlinked_mailbox_and_a_file_for_a_folder_are_reported() -> None:
    link = folder("mailbox", f"inbox/{BOB.address}", kind="symlink")
    facts = healthy(folders=(*healthy().folders, link, folder("log", kind="not-folder")))
    assert needing_attention(facts) == [
        f"attention log-not-folder: {ROOT}/log is not a folder — fix: move it out of the way: "
        f"mv {ROOT}/log {ROOT}/log.not-a-folder",
        f"attention mailbox-symlink: {ROOT}/inbox/{BOB.address} is a symlink, which pi-post "
        f"never follows — fix: put the folder it points to in its place (mv it to "
        f"{ROOT}/inbox/{BOB.address})",
    ]


def test_paths_in_fixes_are_quoted_for_the_shell() -> None:
    facts = healthy(root="/tmp/my post", folders=(folder("root", path="/tmp/my post", mode=0o775),))
    assert needing_attention(facts)[0].endswith("fix: chmod 700 '/tmp/my post'")


def with_broken(role: str, fault: str) -> tuple[FolderFacts, PostOfficeFacts]:
    """A healthy snapshot but for one folder of ``role`` with ``fault``."""
    where = f"inbox/{BOB.address}" if role == "mailbox" else ""
    broken = folder(role, where, **FAULTY[fault])
    others = [f for f in healthy().folders if f.role != role]
    return broken, healthy(folders=(broken, *others) if role == "root" else (*others, broken))


@pytest.mark.parametrize("fault", doctor.FOLDER_FAULTS)
@pytest.mark.parametrize("role", doctor.FOLDER_ROLES)
def test_every_fault_of_every_folder_has_its_code(role: str, fault: str) -> None:
    broken, facts = with_broken(role, fault)
    found = [f for f in doctor.diagnose(facts) if f.severity == ATTENTION]
    assert [f.code for f in found] == [f"{role}-{fault}"]
    assert found[0].subject == broken.path
    assert found[0].fix


FAULTY: dict[str, dict[str, object]] = {
    "symlink": {"kind": "symlink", "owner": None, "mode": None},
    "not-folder": {"kind": "not-folder"},
    "owner": {"owner": UID + 1},
    "mode": {"mode": 0o722},
    "unreadable": {"kind": "unreadable", "error": "Permission denied"},
}


def test_a_folder_readable_by_others_but_not_writable_is_private_enough() -> None:
    """The rule is files.privacy_fault's, the one every open applies: write access."""
    assert doctor.healthy(doctor.diagnose(healthy(folders=(folder("root", mode=0o755),))))


def test_a_mailbox_of_another_user_is_reported_with_your_uid() -> None:
    box = f"{ROOT}/inbox/{BOB.address}"
    assert needing_attention(with_broken("mailbox", "owner")[1]) == [
        f"attention mailbox-owner: {box} is owned by uid 1001, not by you (uid 1000); pi-post "
        f"only uses folders of your own — fix: chown 1000 {box} (as root), or set PI_POST_DIR "
        "to a post office of your own"
    ]


def test_stale_temporaries_are_each_reported_with_the_sweep_as_fix() -> None:
    box = f"{ROOT}/inbox/{ALICE.address}"
    stale = Temporary(
        f"{box}/1796000000000-0badf00d.json.tmp",
        "1796000000000-0badf00d.json.tmp",
        TEMPORARY_STALE_MS + 1,
    )
    registry_tmp = Temporary(
        f"{ROOT}/registry/.{BOB.address}.c0ffee00.tmp", f".{BOB.address}.c0ffee00.tmp", 3 * DAY_MS
    )
    facts = healthy(temporaries=(stale, registry_tmp, *healthy().temporaries))
    assert needing_attention(facts) == [
        f"attention stale-temporary: {stale.path} was left by a writer that died: untouched "
        "for 1d — fix: pi-post sweep",
        f"attention stale-temporary: {registry_tmp.path} was left by a writer that died: "
        "untouched for 3d — fix: pi-post sweep",
    ]
    assert [f.subject for f in doctor.diagnose(facts) if f.code == "stale-temporary"] == [
        stale.path,
        registry_tmp.path,
    ]


@pytest.mark.parametrize(
    ("name", "age_ms", "stale"),
    [
        ("x.json.tmp", TEMPORARY_STALE_MS, False),
        ("x.json.tmp", TEMPORARY_STALE_MS + 1, True),
        (".s-000000000000.00000000.tmp", TEMPORARY_STALE_MS + 1, True),
        ("x.json", 365 * DAY_MS, False),  # a letter is mail, at any age
        ("notes.txt", 365 * DAY_MS, False),
    ],
)
def test_the_stale_rule_is_the_sweep_rule(name: str, age_ms: int, stale: bool) -> None:
    facts = healthy(temporaries=(Temporary(f"{ROOT}/registry/{name}", name, age_ms),))
    assert ("stale-temporary" in codes(facts)) is stale
    assert ("temporaries-ok" in codes(facts)) is not stale


def test_a_dead_pid_a_recycled_pid_and_a_stalled_session_are_reported() -> None:
    crashed = make_record("sess-crashed", "/home/dev/crashed", name="crashed", pid=31337)
    recycled = make_record(
        "sess-recycled", "/home/dev/my project", name="recycled", pid=4243, pid_start="old"
    )
    stalled = make_record(
        "sess-stalled", "/home/dev/stalled", name="stalled", pid=4244, last_seen=NOW - 300_000
    )
    facts = healthy(
        sessions=(
            *healthy().sessions,
            SessionFacts(crashed, Presence.OFFLINE, None),
            SessionFacts(recycled, Presence.OFFLINE, "new"),
            SessionFacts(stalled, Presence.STALLED, ""),
        )
    )
    assert needing_attention(facts) == [
        f"attention dead-pid: crashed ({crashed.address}) records pid 31337 as running, but no "
        "process has that pid: it ended without marking itself offline (a crash?) — fix: resume "
        "it (cd /home/dev/crashed && pi --session sess-crashed) or start its pi-post listen "
        "again; its mail waits queued meanwhile",
        f"attention recycled-pid: recycled ({recycled.address}) records pid 4243 as running, but "
        "that pid now belongs to another process: it ended without marking itself offline (a "
        "crash?) — fix: resume it (cd '/home/dev/my project' && pi --session sess-recycled) or "
        "start its pi-post listen again; its mail waits queued meanwhile",
        f"attention stalled: stalled ({stalled.address}): pid 4244 runs but has not renewed its "
        "record for 5m (it does every 30 s): it may hang — fix: look at pid 4244; if it hangs, "
        "end it (kill 4244) and resume it (cd /home/dev/stalled && pi --session sess-stalled) or "
        "start its pi-post listen again; its mail waits queued meanwhile",
    ]
    assert [(f.code, f.subject) for f in doctor.diagnose(facts) if f.severity == ATTENTION] == [
        ("dead-pid", crashed.address),
        ("recycled-pid", recycled.address),
        ("stalled", stalled.address),
    ]


def test_the_sessions_running_are_the_live_ones() -> None:
    carol = make_record("sess-carol", "/home/dev/carol", name="carol", pid=4300, pid_start="c")
    facts = healthy(sessions=(*healthy().sessions, SessionFacts(carol, Presence.LIVE, "c")))
    (said,) = [f.text for f in doctor.diagnose(facts) if f.code == "records-ok"]
    assert said.startswith("3 sessions registered, 2 running;")


def test_an_offline_record_without_a_pid_is_a_clean_shutdown() -> None:
    assert "records-ok" in codes(healthy(sessions=(SessionFacts(BOB, Presence.OFFLINE, None),)))


@pytest.mark.parametrize(
    ("queued", "code"),
    [
        (doctor.NEAR_CAP - 1, "mailboxes-ok"),
        (doctor.NEAR_CAP, "mailbox-near-cap"),
        (mailbox.CAP - 1, "mailbox-near-cap"),
        (mailbox.CAP, "mailbox-full"),
    ],
)
def test_near_means_forty_or_more_of_the_fifty(queued: int, code: str) -> None:
    assert doctor.NEAR_CAP == 40
    assert code in codes(healthy(queued={ALICE.address: queued}))


def test_full_and_nearly_full_mailboxes_are_reported_by_name_or_address() -> None:
    orphan = address_of("sess-orphan")
    expected = {
        ALICE.address: f"attention mailbox-near-cap: alice ({ALICE.address}) has 45 letters "
        "queued; sends to it are refused at 50 — fix: the session is not reading its mail: "
        f"resume it, or see what waits with pi-post peek {ALICE.address}",
        orphan: f"attention mailbox-full: {orphan} has 50 letters queued, the cap: every send "
        "to it is refused — fix: the session is not reading its mail: resume it, or see what "
        f"waits with pi-post peek {orphan}",
    }
    facts = healthy(queued={ALICE.address: 45, orphan: 50})
    assert needing_attention(facts) == [expected[address] for address in sorted(expected)]
    assert subjects(facts)["mailbox-near-cap"] == ALICE.address
    assert subjects(facts)["mailbox-full"] == orphan


def test_set_aside_letters_are_reported_per_address_the_cap_apart() -> None:
    facts = healthy(
        quarantined={ALICE.address: 2, BOB.address: quarantine.CAP},
        folders=(*healthy().folders[:4], folder("quarantine"), folder("log")),
    )
    found = {f.subject: f for f in doctor.diagnose(facts) if f.severity == ATTENTION}
    assert found[ALICE.address].code == "quarantine-held"
    assert found[BOB.address].code == "quarantine-full"
    assert doctor.report([found[BOB.address]])[0] == (
        f"attention quarantine-full: bob ({BOB.address}) has 20 letters in quarantine, the cap: "
        "each new one removes the oldest — fix: read them with pi-post quarantine, then remove "
        f"them: rm -r {ROOT}/quarantine/{BOB.address}"
    )
    assert doctor.report([found[ALICE.address]])[0] == (
        f"attention quarantine-held: alice ({ALICE.address}) has 2 letters in quarantine (not "
        "messages: malformed, oversize, a symlink...) — fix: read them with pi-post quarantine, "
        f"then remove them: rm -r {ROOT}/quarantine/{ALICE.address}"
    )


def test_a_drop_log_past_its_rotation_size_is_reported() -> None:
    from pipost.droplog import LIMIT

    assert "drop-log-ok" in codes(healthy(drop_log=(LIMIT, LIMIT)))
    assert needing_attention(healthy(drop_log=(LIMIT + 1, 0))) == [
        f"attention drop-log-oversize: {ROOT}/log/drops.jsonl is 1 MiB, over the 1 MiB at which "
        "receivers rotate the drop log: something other than pi-post wrote it — fix: move it "
        f"away: mv {ROOT}/log/drops.jsonl {ROOT}/log/drops.jsonl.old"
    ]
    oversize = healthy(drop_log=(LIMIT + 1, LIMIT + 1))
    assert [f.subject for f in doctor.diagnose(oversize) if f.code == "drop-log-oversize"] == [
        f"{ROOT}/log/drops.jsonl",
        f"{ROOT}/log/drops.jsonl.1",
    ]
    assert lines(healthy(drop_log=(0, 0)))[7] == (
        "ok        drop-log-ok: no receiver has dropped a message"
    )


def test_no_kernel_watch_or_start_times_on_linux_needs_attention() -> None:
    facts = healthy(kernel_watch=False, start_times=False)
    assert needing_attention(facts) == [
        "attention kernel-watch-unavailable: the kernel watch (inotify) could not be set up: "
        "listening sessions look for mail every 3 s instead — fix: raise the limits (sysctl "
        "fs.inotify.max_user_instances and fs.inotify.max_user_watches), or end what holds the "
        "instances",
        "attention start-times-unavailable: process start times cannot be read from /proc: "
        "presence falls back to the pid and the heartbeat, so a recycled pid looks alive — fix: "
        "mount /proc (mount -t proc proc /proc)",
    ]


def test_elsewhere_their_absence_is_a_known_limit_not_a_fault() -> None:
    facts = healthy(linux=False, kernel_watch=False, start_times=False)
    assert doctor.healthy(doctor.diagnose(facts))
    assert lines(facts)[3:5] == [
        "ok        kernel-watch-unavailable: this system has no kernel watch pipost can use: "
        "listening sessions look for mail every 3 s instead",
        "ok        start-times-unavailable: this system gives no process start times: presence "
        "falls back to the pid and the heartbeat, so a recycled pid looks alive",
    ]


def test_the_kernel_watch_of_macos_and_the_bsds_is_named_kqueue() -> None:
    assert lines(healthy(linux=False))[3] == (
        "ok        kernel-watch-ok: the kernel watch (kqueue) works: mail enters a listening "
        "session as it arrives"
    )


def test_a_session_with_two_listeners_is_reported_with_their_pids() -> None:
    facts = healthy(listening={ALICE.address: (4242, 4250), BOB.address: (4300,)})
    assert needing_attention(facts) == [
        f"attention listeners-several: alice ({ALICE.address}) has 2 listeners (pids 4242, "
        "4250): its mail is split between them, each message entering one of them — fix: if "
        "that is not on purpose (pi-post listen --also), stop all but one: kill 4250"
    ]
    (several,) = [f for f in doctor.diagnose(facts) if f.code == "listeners-several"]
    assert several.subject == ALICE.address


def test_the_fix_for_three_listeners_ends_the_two_after_the_first() -> None:
    facts = healthy(listening={ALICE.address: (4242, 4250, 4251)})
    (several,) = [f for f in doctor.diagnose(facts) if f.code == "listeners-several"]
    assert several.fix == (
        "if that is not on purpose (pi-post listen --also), stop all but one: kill 4250 4251"
    )


def test_a_contract_that_is_not_pinned_is_reported() -> None:
    facts = healthy(contract=ContractFacts(1, FINGERPRINT, False))
    assert needing_attention(facts) == [
        "attention contract-mismatch: the wire contract this pipost speaks is not pinned; the "
        f"newest pin it ships is message schema v1, fingerprint {FINGERPRINT}: this "
        "installation may not speak pi-post v1 "
        "— fix: pi-post contract shows what changed; reinstall pipost"
    ]


def test_escape_sequences_in_names_are_spelled_out_in_the_text_not_in_the_finding() -> None:
    hostile = make_record("sess-h", "/home/dev/h", name="\x1b[31mred", pid=9)
    facts = healthy(sessions=(SessionFacts(hostile, Presence.OFFLINE, None),))
    (finding,) = [f for f in doctor.diagnose(facts) if f.code == "dead-pid"]
    assert finding.text.startswith("\x1b[31mred (")
    (line,) = needing_attention(facts)
    assert line.startswith("attention dead-pid: \\x1b[31mred (")


def test_every_code_is_reachable_and_every_finding_has_a_known_code() -> None:
    """Across the snapshots above, each code of CODES comes up, and nothing else."""
    seen: set[str] = set()
    snapshots = [
        healthy(),
        healthy(folders=(folder("root", kind="missing"),)),
        healthy(
            folders=(
                folder("root"),
                folder("registry", kind="missing"),
                folder("inbox", kind="missing"),
            )
        ),
        healthy(kernel_watch=False, start_times=False),
        healthy(temporaries=(Temporary("/x.tmp", "x.tmp", TEMPORARY_STALE_MS + 1),)),
        healthy(quarantined={ALICE.address: 1, BOB.address: 20}),
        healthy(drop_log=(10**8, 0)),
        healthy(queued={ALICE.address: 40, BOB.address: 50}),
        healthy(contract=ContractFacts(1, FINGERPRINT, False)),
        healthy(listening={ALICE.address: (4242, 4250)}),
        healthy(
            sessions=(
                SessionFacts(ALICE.replace(pid=1), Presence.OFFLINE, None),
                SessionFacts(BOB.replace(pid=2), Presence.OFFLINE, "x"),
                SessionFacts(ALICE.replace(pid=3), Presence.STALLED, "t"),
            )
        ),
    ]
    snapshots += [
        with_broken(role, fault)[1]
        for role in doctor.FOLDER_ROLES
        for fault in doctor.FOLDER_FAULTS
    ]
    for facts in snapshots:
        seen |= set(codes(facts))
    assert seen == doctor.CODES


def test_severities_are_ok_or_attention_and_only_attention_has_no_empty_fix() -> None:
    findings = doctor.diagnose(healthy(queued={ALICE.address: 50}, kernel_watch=False))
    assert {f.severity for f in findings} == {OK, ATTENTION}
    assert all(f.fix for f in findings if f.severity == ATTENTION)
    assert all(f.fix is None for f in findings if f.severity == OK)


# -- the survey: facts from a real tree, which it leaves byte-identical (INV-16) ----------


def survey(root: Path, processes: FakeProcessTable | None = None) -> PostOfficeFacts:
    table = processes or FakeProcessTable({os.getpid(): "self"})
    return doctor.survey(root, NOW, table)


def aged(path: Path, age_ms: int) -> None:
    moment = (NOW - age_ms) / 1000
    os.utime(path, (moment, moment), follow_symlinks=False)


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """A post office with one of each problem the survey can see in a tree."""
    root = tmp_path / "post"
    near = write_record(root, make_record("sess-near", "/home/dev/near", name="near"))
    for offset in range(doctor.NEAR_CAP):
        deposit(root, near.address, make_message(NOW + offset), durable=False)
    write_record(root, make_record("sess-dead", "/home/dev/dead", name="dead", pid=31337))
    write_record(root, make_record("sess-recycled", "/home/dev/r", pid=4242, pid_start="old"))
    write_record(root, make_record("sess-stalled", "/home/dev/s", pid=4243, last_seen=NOW - DAY_MS))
    stale = root / "inbox" / near.address / "1796000000000-0badf00d.json.tmp"
    put(stale, b'{"v":1,"id":"17')
    aged(stale, TEMPORARY_STALE_MS + 60_000)
    fresh = root / "registry" / f".{near.address}.0badc0de.tmp"
    put(fresh, b'{"v":1')
    aged(fresh, 1000)
    orphan = address_of("sess-orphan")
    made(root, "inbox", orphan)
    put(root / "inbox" / orphan / "0000000000001-00000000.json", b"not json")
    set_aside(root, orphan, "0000000000001-00000000.json", "not JSON")
    (root / "inbox" / address_of("sess-linked")).symlink_to(root / "inbox" / orphan)
    return root


def test_the_survey_sees_what_is_planted_and_changes_nothing(planted: Path) -> None:
    before = tree_snapshot(planted)
    facts = survey(planted, FakeProcessTable({os.getpid(): "self", 4242: "new", 4243: "t"}))
    assert tree_snapshot(planted) == before
    found = doctor.diagnose(facts)
    assert sorted(f.code for f in found if f.severity == ATTENTION) == [
        "dead-pid",
        "mailbox-near-cap",
        "mailbox-symlink",
        "quarantine-held",
        "recycled-pid",
        "stale-temporary",
        "stalled",
    ]
    (stale,) = [f for f in found if f.code == "stale-temporary"]
    assert stale.subject is not None and stale.subject.endswith("0badf00d.json.tmp")
    assert facts.queued[address_of("sess-near")] == doctor.NEAR_CAP
    assert facts.quarantined == {address_of("sess-orphan"): 1}


def test_a_tree_pi_post_made_is_healthy(tmp_path: Path) -> None:
    root = tmp_path / "post"
    live = write_record(
        root, make_record("sess-a", "/home/dev/a", pid=os.getpid(), pid_start="self")
    )
    deposit(root, live.address, make_message(NOW))
    facts = survey(root)
    assert doctor.healthy(doctor.diagnose(facts)), doctor.report(doctor.diagnose(facts))
    assert facts.kernel_watch  # CI runs on Linux, where inotify is there
    assert [f.role for f in facts.folders] == [
        "root",
        "registry",
        "inbox",
        "mailbox",
        "quarantine",
        "log",
        "listeners",
    ]


@pytest.mark.parametrize(
    ("setup", "code"),
    [
        (lambda root: root.chmod(0o777), "root-mode"),
        (lambda root: (root / "registry").chmod(0o722), "registry-mode"),
        (lambda root: os.chown(root / "inbox", UID + 4242, -1), "inbox-owner"),
    ],
    ids=["root-mode", "registry-mode", "inbox-owner"],
)
def test_an_unsafe_folder_is_noted_and_not_entered(
    tmp_path: Path, setup: Callable[[Path], object], code: str
) -> None:
    root = tmp_path / "post"
    record = write_record(root, make_record("sess-a", "/home/dev/a"))
    deposit(root, record.address, make_message(NOW))
    if code == "inbox-owner" and os.geteuid() != 0:
        pytest.fail("giving a folder to another user needs root (CI runs as root)")
    setup(root)
    before = tree_snapshot(root)
    facts = survey(root)
    assert tree_snapshot(root) == before
    assert [f.code for f in doctor.diagnose(facts) if f.severity == ATTENTION] == [code]


def test_a_symlinked_root_is_noted_and_the_kernel_probed_beside_it(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "post").symlink_to(real)
    facts = survey(tmp_path / "post")
    assert [f.kind for f in facts.folders] == ["symlink"]
    assert facts.kernel_watch
    assert "root-symlink" in [f.code for f in doctor.diagnose(facts)]


def test_a_folder_that_cannot_be_opened_is_noted_as_unreadable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Root ignores mode bits, so the refusal is injected where the survey opens."""
    root = tmp_path / "post"
    write_record(root, make_record("sess-a", "/home/dev/a"))
    opened = files.Folder.child

    def child(self: files.Folder, name: str) -> files.Folder | None:
        # Only in this post office: the survey also runs the contract's exchange in one
        # of its own (contract/gathering.py).
        if name == "registry" and str(self.path) == str(root):
            raise PermissionError(errno.EACCES, "Permission denied", self.name(name))
        return opened(self, name)

    monkeypatch.setattr(files.Folder, "child", child)
    facts = survey(root)
    (found,) = [f for f in doctor.diagnose(facts) if f.severity == ATTENTION]
    assert found.code == "registry-unreadable"
    assert found.text == f"{root}/registry cannot be read: Permission denied ({root}/registry)"


def test_no_post_office_at_all_is_surveyed_without_making_one(tmp_path: Path) -> None:
    facts = survey(tmp_path / "nothing" / "post")
    assert not (tmp_path / "nothing").exists()
    assert doctor.diagnose(facts)[0].code == "root-missing"
    assert facts.kernel_watch  # probed at tmp_path, the nearest folder there is


def test_the_start_times_fact_comes_from_the_process_table(tmp_path: Path) -> None:
    assert survey(tmp_path, FakeProcessTable({os.getpid(): ""})).start_times is False
    assert survey(tmp_path, FakeProcessTable({os.getpid(): "x"})).start_times is True


def test_the_linux_fact_says_whether_this_system_is_linux(tmp_path: Path) -> None:
    assert survey(tmp_path).linux is (sys.platform == "linux")


def test_the_contract_fact_is_the_pinned_contract(tmp_path: Path) -> None:
    facts = survey(tmp_path)
    newest = latest(gathering.load_pins(), "message")
    assert newest is not None
    version, _, pinned = newest
    assert (facts.contract.version, facts.contract.fingerprint) == (version, pinned.fingerprint)
    assert facts.contract.matches_pin


def pins_file(tmp_path: Path, message_pins: object) -> str:
    path = tmp_path / "pins.json"
    path.write_text(json.dumps({"record": {}, "message": message_pins}), encoding="utf-8")
    return str(path)


def test_the_contract_fact_is_the_newest_revision_of_the_version_spoken(tmp_path: Path) -> None:
    spoken, newer = str(message.VERSION), str(message.VERSION + 1)
    revisions = [{"fingerprint": "sha256:1", "content": {}}, {"fingerprint": "sha256:2"}]
    read = doctor.wire_contract(pins_file(tmp_path, {spoken: revisions, newer: revisions[:1]}))
    assert read == ContractFacts(message.VERSION, "sha256:2", True)


def test_a_version_spoken_but_not_pinned_gives_the_newest_pin_below_it(tmp_path: Path) -> None:
    """A tree whose message version was bumped and not yet pinned (docs/contract.md)."""
    older = {str(message.VERSION - 1): [{"fingerprint": "sha256:1"}]}
    read = doctor.wire_contract(pins_file(tmp_path, older))
    assert read == ContractFacts(message.VERSION - 1, "sha256:1", False)
    assert doctor.diagnose(healthy(contract=read))[-1].code == "contract-mismatch"


@pytest.mark.parametrize(
    "message_pins", [{}, {"x": []}, {"1": []}, {"1": [{"fingerprint": 7}]}, [], "not pins"]
)
def test_pins_that_hold_no_pin_of_the_message_are_a_clear_error(
    tmp_path: Path, message_pins: object
) -> None:
    path = pins_file(tmp_path, message_pins)
    with pytest.raises(OSError, match="no pin of the wire contract here") as raised:
        doctor.wire_contract(path)
    assert raised.value.filename == path
    (tmp_path / "pins.json").write_text("{", encoding="utf-8")
    with pytest.raises(OSError, match="no pin of the wire contract here"):
        doctor.wire_contract(path)


def test_the_doctor_reports_a_missing_pins_file_as_an_error_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(doctor, "PINS_FILE", str(tmp_path / "gone.json"))
    out, err = io.StringIO(), io.StringIO()
    ctx = cli.Invocation(stdout=out, stderr=err, environ={"PI_POST_DIR": str(tmp_path / "post")})
    assert cli.run(["doctor"], ctx) == 1
    assert (out.getvalue(), err.getvalue()) == (
        "",
        f"pi-post: {tmp_path / 'gone.json'}: No such file or directory\n",
    )


def test_the_survey_counts_the_listeners_that_run_and_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "post"
    record = write_record(root, make_record("sess-a", "/home/dev/a", pid=os.getpid()))
    first = listeners.join(root, record.address)
    second = listeners.join(root, record.address, beside_others=True)
    gone = listeners.join(root, address_of("sess-b"))
    gone.close()  # its file stays, unlocked: a listener that died
    try:
        before = tree_snapshot(root)
        facts = survey(root)
        assert tree_snapshot(root) == before
    finally:
        first.leave()
        second.leave()
    assert facts.listening == {record.address: (os.getpid(), os.getpid())}
    assert [f.code for f in doctor.diagnose(facts) if f.severity == ATTENTION] == [
        "listeners-several"
    ]


def survey_findings(root: Path) -> list[tuple[str, str]]:
    """The (code, text) of what needs attention in a survey of ``root``, which must
    change nothing."""
    before = tree_snapshot(root)
    facts = survey(root)
    assert tree_snapshot(root) == before
    return [(f.code, f.text) for f in doctor.diagnose(facts) if f.severity == ATTENTION]


def refusing(
    monkeypatch: pytest.MonkeyPatch, method: str, root: Path, name: str, error: OSError
) -> None:
    """``files.Folder.<method>`` fails with ``error`` for ``name`` in ``root`` alone (the
    survey also runs the contract's exchange in a scratch post office of its own)."""
    real = getattr(files.Folder, method)

    def failing(self: files.Folder, *args: str) -> object:
        if str(self.path) == str(root) and (not args or args[0] == name):
            raise error
        return real(self, *args)

    monkeypatch.setattr(files.Folder, method, failing)


def test_a_folder_whose_entry_cannot_be_read_is_noted_as_unreadable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "post"
    write_record(root, make_record("sess-a", "/home/dev/a"))
    denied = PermissionError(errno.EACCES, "Permission denied", f"{root}/inbox")
    refusing(monkeypatch, "lstat", root, "inbox", denied)
    assert survey_findings(root) == [
        ("inbox-unreadable", f"{root}/inbox cannot be read: Permission denied ({root}/inbox)")
    ]


def test_a_folder_that_fails_while_it_is_read_is_noted_as_unreadable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "post"
    record = write_record(root, make_record("sess-a", "/home/dev/a"))
    deposit(root, record.address, make_message(NOW))
    registry = root / "registry"
    refusing(monkeypatch, "names", registry, "", OSError(errno.EIO, "Input/output error"))
    assert survey_findings(root) == [
        ("registry-unreadable", f"{registry} cannot be read: Input/output error")
    ]


def test_a_file_where_the_log_folder_belongs_is_reported(tmp_path: Path) -> None:
    root = tmp_path / "post"
    write_record(root, make_record("sess-a", "/home/dev/a"))
    put(root / "log", b"not a folder")
    assert survey_findings(root) == [("log-not-folder", f"{root}/log is not a folder")]


def test_a_folder_removed_between_two_looks_is_missing_not_a_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "post"
    write_record(root, make_record("sess-a", "/home/dev/a"))
    opened = files.Folder.child

    def child(self: files.Folder, name: str) -> files.Folder | None:
        if name == "registry" and str(self.path) == str(root):
            return None  # as when the folder is removed after lstat saw it
        return opened(self, name)

    monkeypatch.setattr(files.Folder, "child", child)
    facts = survey(root)
    assert [f.kind for f in facts.folders if f.role == "registry"] == ["missing"]
    assert facts.sessions == ()
    assert doctor.healthy(doctor.diagnose(facts))


def test_the_drop_log_is_measured_and_a_missing_rotated_one_counts_nothing(tmp_path: Path) -> None:
    from pipost.droplog import LOG_NAME

    root = tmp_path / "post"
    write_record(root, make_record("sess-a", "/home/dev/a"))
    made(root, "log")
    put(root / "log" / LOG_NAME, b"x" * 100)
    facts = survey(root)
    assert facts.drop_log == (100, 0)
    (said,) = [f for f in doctor.diagnose(facts) if f.code == "drop-log-ok"]
    assert said.text == (
        "the drop log holds 100 bytes (it rotates at 1 MiB, keeping one old file); "
        "pi-post log shows it"
    )
    assert said.subject == str(root / "log" / LOG_NAME)  # the file that was measured


def test_a_listeners_entry_that_is_a_symlink_is_not_entered(tmp_path: Path) -> None:
    root = tmp_path / "post"
    record = write_record(root, make_record("sess-a", "/home/dev/a", pid=os.getpid()))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    made(root, "listeners")
    (root / "listeners" / record.address).symlink_to(elsewhere)
    facts = survey(root)
    assert facts.listening == {}
    assert survey_findings(root) == []


def test_a_folder_inside_a_mailbox_and_a_file_gone_meanwhile_are_no_temporaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "post"
    record = write_record(root, make_record("sess-a", "/home/dev/a"))
    box = root / "inbox" / record.address
    made(root, "inbox", record.address, "stray-folder")
    put(box / "renamed-meanwhile.json.tmp", b"{")
    aged(box / "renamed-meanwhile.json.tmp", TEMPORARY_STALE_MS + 60_000)
    gone = FileNotFoundError(errno.ENOENT, "No such file or directory")
    refusing(monkeypatch, "lstat", box, "renamed-meanwhile.json.tmp", gone)
    facts = survey(root)
    assert facts.temporaries == ()
    assert doctor.healthy(doctor.diagnose(facts))


def test_a_file_gone_meanwhile_does_not_hide_the_temporaries_listed_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "post"
    record = write_record(root, make_record("sess-a", "/home/dev/a"))
    box = root / "inbox" / record.address
    made(root, "inbox", record.address)
    put(box / "a-renamed-meanwhile.json.tmp", b"{")
    put(box / "x.json.tmp", b"{")
    listed = files.Folder.names
    # os.listdir's order is the file system's; sorted, the one gone comes first.
    monkeypatch.setattr(files.Folder, "names", lambda self: sorted(listed(self)))
    gone = FileNotFoundError(errno.ENOENT, "No such file or directory")
    refusing(monkeypatch, "lstat", box, "a-renamed-meanwhile.json.tmp", gone)
    assert [t.name for t in survey(root).temporaries] == ["x.json.tmp"]


def test_a_temporarys_age_is_in_whole_milliseconds_since_it_was_written(tmp_path: Path) -> None:
    root = tmp_path / "post"
    record = write_record(root, make_record("sess-a", "/home/dev/a"))
    made(root, "inbox", record.address)
    temporary = root / "inbox" / record.address / "x.json.tmp"
    put(temporary, b"{")
    written = (NOW - 1000) * 1_000_000 + 500_000  # half a millisecond past NOW - 1 s
    os.utime(temporary, ns=(written, written), follow_symlinks=False)
    assert survey(root).temporaries == (Temporary(str(temporary), "x.json.tmp", 1000),)


@pytest.mark.parametrize(
    ("error", "kind", "why"),
    [
        (None, "folder", None),
        (FileNotFoundError(errno.ENOENT, "No such file or directory"), "missing", None),
        (PermissionError(errno.EACCES, "Permission denied"), "unreadable", "Permission denied"),
    ],
    ids=["folder", "gone-meanwhile", "unreadable"],
)
def test_the_facts_of_a_mailbox_folder_carry_its_address(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    error: OSError | None,
    kind: str,
    why: str | None,
) -> None:
    root = tmp_path / "post"
    record = write_record(root, make_record("sess-a", "/home/dev/a"))
    deposit(root, record.address, make_message(NOW))
    if error is not None:  # between the listing of inbox/ and the lstat of its entry
        refusing(monkeypatch, "lstat", root / "inbox", record.address, error)
    owner, mode = (os.geteuid(), 0o700) if error is None else (None, None)
    (box,) = [f for f in survey(root).folders if f.role == "mailbox"]
    assert box == FolderFacts(
        "mailbox", str(root / "inbox" / record.address), kind, owner, mode, why, record.address
    )
    assert box.address == record.address  # read back, not only compared with a FolderFacts


def test_without_a_log_folder_the_drop_log_measures_nothing(tmp_path: Path) -> None:
    root = tmp_path / "post"
    write_record(root, make_record("sess-a", "/home/dev/a"))
    facts = survey(root)
    assert [f.kind for f in facts.folders if f.role == "log"] == ["missing"]
    assert facts.drop_log == (0, 0)


def test_letters_set_aside_are_counted_per_address(tmp_path: Path) -> None:
    root = tmp_path / "post"
    record = write_record(root, make_record("sess-a", "/home/dev/a"))
    for sent_at in (NOW, NOW + 1):
        letter = deposit(root, record.address, make_message(sent_at))
        set_aside(root, record.address, os.path.basename(letter), "not JSON")
    assert survey(root).quarantined == {record.address: 2}


def test_a_listeners_entry_not_entered_does_not_hide_the_ones_after_it(tmp_path: Path) -> None:
    root = tmp_path / "post"
    # The survey goes through the entries sorted: the one it does not enter comes first.
    linked, listened = sorted((address_of("sess-a"), address_of("sess-b")))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    listening = listeners.join(root, listened)
    try:
        (root / "listeners" / linked).symlink_to(elsewhere)
        facts = survey(root)
    finally:
        listening.leave()
    assert facts.listening == {listened: (os.getpid(),)}
