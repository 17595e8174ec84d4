"""Deliberate faults, each switched on alone, each run against the tests that should
catch it (``nox -s mutants``).

A fault is a textual edit of src/pipost: the exact ``old`` text (which must occur
exactly once) and what replaces it. What should catch it is chosen by name, never by
line number, so that editing a file elsewhere cannot change what a fault runs: pytest
tests by file and function name (every parameter of the function included), behave
scenarios by feature file, by name (behave's ``--name``) or by tag. Before anything
runs the table is checked against the repository: every ``old`` text occurs exactly
once, every selected test collects, every scenario name and tag matches a scenario;
a problem is said with its fault, its file and what to do, and nothing runs.

For each fault the sources, tests and features are copied to a scratch folder, the
edit is applied there, and the fault's selection runs with the copy's src first on
PYTHONPATH, so that the editable install of the real sources cannot shadow it (this
is checked before every run). Killed means a selected test failed (or the run hung
past the timeout); survived means every selected test passed, which is a test
missing; any other exit (tests that could not be collected) judges nothing and
counts as a failure. The selections are first run on an unedited copy: a fault
"killed" by a test that fails anyway would prove nothing.

Usage: python tools/mutants.py [FAULT ...] [--timeout SECONDS]
Exits 0 when every fault was killed, 1 when one survived or could not be judged,
2 when the table itself no longer matches the sources or the suite.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from behave.parser import parse_file

REPO = Path(__file__).resolve().parent.parent
PACKAGE = Path("src") / "pipost"
COPIED = ("src", "tests", "pyproject.toml")
"""What a fault's copy needs (the kit's features are under src/pipost_conformance)."""
FEATURES = "src/pipost_conformance/features"
DEFAULT_TIMEOUT_S = 240.0
OUTPUT_TAIL_LINES = 25


@dataclass(frozen=True)
class Edit:
    file: str
    """A module file under src/pipost."""
    old: str
    """Exact text that must occur exactly once in the file."""
    new: str


@dataclass(frozen=True)
class Tests:
    """Pytest tests of one file by function name (each with every parameter it
    takes), or the whole file when no name is given."""

    file: str
    names: tuple[str, ...] = ()

    def node_ids(self) -> list[str]:
        return [f"{self.file}::{name}" for name in self.names] or [self.file]

    def __str__(self) -> str:
        return ", ".join(node.removeprefix("tests/") for node in self.node_ids())


@dataclass(frozen=True)
class Scenarios:
    """Behave scenarios under ``path`` (a feature file, or the features folder) whose
    name ``name`` matches and that carry ``tag``; either filter may be left out."""

    path: str
    name: str | None = None
    """A regular expression searched in each scenario's name, as behave's ``--name``
    does: an outline's scenarios are named after the outline with its values in."""
    tag: str | None = None
    """A tag without its ``@``, the scenario's own or its feature's."""

    def filters(self) -> list[str]:
        """Behave's options for the filters (the path is given apart)."""
        by_name = ["--name", self.name] if self.name is not None else []
        by_tag = [f"--tags=@{self.tag}"] if self.tag is not None else []
        return by_name + by_tag

    def __str__(self) -> str:
        where = self.path.removeprefix(FEATURES).removeprefix("/")
        by_name = f" named /{self.name}/" if self.name is not None else ""
        by_tag = f" @{self.tag}" if self.tag is not None else ""
        return f"{where}{by_name}{by_tag}".strip()


Selection = Tests | Scenarios


@dataclass(frozen=True)
class Fault:
    name: str
    edits: tuple[Edit, ...]
    selection: tuple[Selection, ...]
    """What should catch the fault. Pytest runs first and stops at the first failure,
    then behave, once for each kind of filter."""

    @property
    def files(self) -> str:
        return ", ".join(dict.fromkeys(edit.file for edit in self.edits))


def _one(file: str, old: str, new: str) -> tuple[Edit, ...]:
    return (Edit(file, old, new),)


def tests(file: str, *names: str) -> Tests:
    return Tests(f"tests/{file}", names)


def feature(file: str) -> Scenarios:
    return Scenarios(f"{FEATURES}/{file}")


def scenarios(file: str, name: str) -> Scenarios:
    return Scenarios(f"{FEATURES}/{file}", name=name)


def tagged(tag: str) -> Scenarios:
    """Every scenario with the tag, in whichever feature it is."""
    return Scenarios(FEATURES, tag=tag)


HOST_TESTS = "test_host.py"
MAILBOX_TESTS = "test_mailbox.py"
QUARANTINE_TESTS = "test_quarantine.py"
REGISTRY_TESTS = "test_registry.py"
SET_ASIDE_OUTLINE = scenarios(
    "bad_input.feature", "^a letter with .+ set to .+ is set aside, and the mail behind it flows"
)
"""The outline "a letter with <field> set to <value> is set aside, and the mail behind
it flows": a bad letter of each kind never delivered, the mail behind it taken."""
KEPT_OUTLINE = scenarios(
    "bad_input.feature", "^a bad letter that is .+ is kept outside the mailboxes"
)
"""The outline "a bad letter that is <damage> is kept outside the mailboxes, not
destroyed": whole, or its head when oversize."""

FAULTS: tuple[Fault, ...] = (
    Fault(
        "unlink before context entry",
        _one(
            "host.py",
            "        delivery = Delivery(message, format.frame(message), wake)\n",
            "        delivery = Delivery(message, format.frame(message), wake)\n"
            "        claim.dispose()\n",
        ),
        (
            tests(
                HOST_TESTS,
                "test_a_failing_context_keeps_the_letter_and_is_retried_with_backoff",
                "test_a_raising_context_never_loses_mail",
            ),
            feature("receiving.feature"),
        ),
    ),
    Fault(
        "a shared claim lock",
        _one("files.py", "fcntl.LOCK_EX | fcntl.LOCK_NB", "fcntl.LOCK_SH | fcntl.LOCK_NB"),
        (
            tests("test_files.py", "test_try_lock_is_exclusive_while_held"),
            tests(MAILBOX_TESTS, "test_a_claim_is_exclusive_until_disposed"),
            tests(HOST_TESTS, "test_two_receivers_on_one_address_enter_every_letter_exactly_once"),
        ),
    ),
    Fault(
        "a claim without a lock",
        _one(
            "files.py",
            "        try:\n"
            "            fcntl.flock(handle.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
            "        except BlockingIOError:\n"
            "            handle.close()\n"
            "            return None\n"
            "        except BaseException:\n"
            "            handle.close()\n"
            "            raise\n",
            "",
        ),
        (
            tests(MAILBOX_TESTS, "test_a_claim_is_exclusive_until_disposed"),
            tests(HOST_TESTS, "test_two_receivers_on_one_address_enter_every_letter_exactly_once"),
            scenarios("receiving.feature", "^two receivers racing on one address"),
        ),
    ),
    Fault(
        "count-then-write backlog",
        _one(
            "mailbox.py",
            '        with top.make("inbox", address) as folder:\n'
            "            try:\n"
            "                with folder.lock():\n"
            "                    queued = len(letters_in(folder))\n",
            '        with top.make("inbox", address) as folder:\n'
            "            queued = len(letters_in(folder))  # taken before the lock\n"
            "            try:\n"
            "                with folder.lock():\n",
        ),
        (tests(MAILBOX_TESTS, "test_racing_sender_processes_never_overfill_a_mailbox"),),
    ),
    Fault(
        "a sweep that deletes a non-empty mailbox",
        (
            Edit("sweep.py", "import stat\n", "import shutil\nimport stat\n"),
            Edit(
                "sweep.py",
                "            if mailbox_is_sweepable(recorded, entries, receiving) "
                "and inbox.remove_empty(address):\n",
                "            if mailbox_is_sweepable(recorded, 0, receiving):\n"
                "                shutil.rmtree(inbox.name(address))\n",
            ),
        ),
        (
            tests(REGISTRY_TESTS, "test_a_mailbox_with_mail_is_never_removed"),
            tagged("INV-17"),
        ),
    ),
    Fault(
        "a sweep that removes the record of a session with mail",
        _one(
            "session.py",
            " and now - last_seen > SWEEP_AFTER_MS and queued == 0\n",
            " and now - last_seen > SWEEP_AFTER_MS\n",
        ),
        (
            tests(
                REGISTRY_TESTS, "test_mail_of_a_session_offline_for_a_year_is_kept_with_its_record"
            ),
            tagged("INV-17"),
        ),
    ),
    Fault(
        "a deposit without flush",
        _one(
            "mailbox.py",
            "    data = encode(message)\n    for _ in range(_DEPOSIT_ATTEMPTS):\n",
            "    durable = False  # forced: no fsync of the letter, no flush of the folder\n"
            "    data = encode(message)\n    for _ in range(_DEPOSIT_ATTEMPTS):\n",
        ),
        (tests("invariants/test_power_loss.py"),),
    ),
    Fault(
        "a deposit that never flushes its folder",
        _one(
            "mailbox.py",
            "                    if durable:\n                        folder.flush()\n",
            "",
        ),
        (tests("invariants/test_power_loss.py"),),
    ),
    Fault(
        "a guard that never drops",
        _one(
            "policy.py",
            "    def judge(self, sender: str, body: str, now: int) -> Admission:\n",
            "    def judge(self, sender: str, body: str, now: int) -> Admission:\n"
            "        return DELIVER\n",
        ),
        (
            tests(
                "test_policy.py",
                "test_an_identical_body_within_10_s_is_dropped_and_accepted_after",
                "test_the_9th_message_within_30_s_is_dropped",
            ),
            tests(HOST_TESTS, "test_an_identical_body_from_one_sender_within_10_s_is_dropped"),
            tagged("INV-18"),
        ),
    ),
    Fault(
        "presence ignores the heartbeat",
        _one(
            "session.py",
            "    return Presence.LIVE if now - record.last_seen <= LIVE_WINDOW_MS "
            "else Presence.STALLED\n",
            "    return Presence.LIVE\n",
        ),
        (tests(REGISTRY_TESTS, "test_presence"), feature("registry_presence.feature")),
    ),
    Fault(
        "presence takes a lastSeen ahead of the clock for a stale one (issue 38)",
        _one(
            "session.py",
            "    return Presence.LIVE if now - record.last_seen <= LIVE_WINDOW_MS "
            "else Presence.STALLED\n",
            "    return Presence.LIVE if abs(now - record.last_seen) <= LIVE_WINDOW_MS "
            "else Presence.STALLED\n",
        ),
        (scenarios("registry_presence.feature", "^a session seen ahead of the clock"),),
    ),
    Fault(
        "a sweep that takes a lastSeen ahead of the clock for an old one (issue 38)",
        _one(
            "session.py",
            " and now - last_seen > SWEEP_AFTER_MS and queued == 0\n",
            " and abs(now - last_seen) > SWEEP_AFTER_MS and queued == 0\n",
        ),
        (scenarios("sweeps.feature", "^a record seen ahead of the clock"),),
    ),
    Fault(
        "a guard on the wall clock (issue 38)",
        _one(
            "host.py",
            "        now = round(self.monotonic() * 1000)\n",
            "        now = self.post.clock()\n",
        ),
        (
            tests(
                HOST_TESTS,
                "test_the_guard_s_windows_run_on_the_monotonic_clock_whatever_the_wall_clock_does",
            ),
            scenarios("receiving.feature", "^the wall clock steps back"),
        ),
    ),
    Fault(
        "a sweep that judges the record it read before the lock (issue 38)",
        _one(
            "sweep.py",
            "            current = read_named(registry, record_name(record.address))\n",
            "            current = record\n",
        ),
        (
            tests(
                REGISTRY_TESTS,
                "test_a_record_written_while_the_sweep_waits_for_the_mailbox_is_judged_as_written",
            ),
            scenarios("sweeps.feature", "^a session that registers while the sweep waits"),
        ),
    ),
    Fault(
        "a sweep blind to running listeners (issue 38)",
        _one(
            "sweep.py",
            "        return bool(listeners.running_below(top, address))\n",
            "        return False\n",
        ),
        (
            tests(
                REGISTRY_TESTS,
                "test_a_running_listener_whose_record_cannot_be_written_keeps_its_mailbox",
                "test_a_running_listener_keeps_its_record_however_old_it_reads",
            ),
        ),
    ),
    Fault(
        "presence ignores a recycled pid",
        _one(
            "session.py",
            "    if record.pid_start and token and token != record.pid_start:\n",
            "    if False:\n",
        ),
        (tests(REGISTRY_TESTS, "test_presence"), feature("registry_presence.feature")),
    ),
    Fault(
        "resolution picks the first of several matches",
        _one(
            "resolve.py",
            "    if len(remaining) == 1:\n"
            "        return Target(remaining[0].address, remaining[0])\n"
            "    return Ambiguous(handle, tuple(remaining))\n",
            "    return Target(remaining[0].address, remaining[0])\n",
        ),
        (
            tests(
                "test_resolve.py",
                "test_ambiguity_is_refused_listing_every_candidate",
                "test_resolve_is_total_and_never_picks_among_equals",
            ),
            feature("resolution.feature"),
        ),
    ),
    Fault(
        "a parser that accepts a bad replyTo",
        _one(
            "message.py",
            "    if message.reply_to is not None and not is_address(message.reply_to):\n"
            '        return bad_field("replyTo", "replyTo is not an address")\n',
            "",
        ),
        (
            tests("test_message.py", "test_parse_rejects"),
            SET_ASIDE_OUTLINE,
        ),
    ),
    Fault(
        "the cap lets a 51st letter in",
        _one(
            "mailbox.py",
            "                    if queued >= CAP:\n",
            "                    if queued > CAP:\n",
        ),
        (tests(MAILBOX_TESTS, "test_deposit_refuses_the_51st_letter_and_writes_nothing"),),
    ),
    Fault(
        "readers see temporary files",
        _one(
            "mailbox.py",
            '    return name.endswith(SUFFIX) and not name.startswith(".")\n',
            '    return not name.startswith(".")\n',
        ),
        (tests(MAILBOX_TESTS, "test_temporary_and_dot_files_are_invisible_to_readers"),),
    ),
    Fault(
        "a deposit replaces a letter with the same id",
        _one(
            "mailbox.py",
            "                    if folder.exists(final):\n"
            "                        raise FileExistsError(\n"
            '                            errno.EEXIST, "a letter with this id exists", '
            "folder.name(final)\n"
            "                        )\n",
            "",
        ),
        (tests(MAILBOX_TESTS, "test_deposit_never_replaces_a_letter_with_the_same_id"),),
    ),
    Fault(
        "a letter is opened through a symlink",
        _one(
            "files.py",
            "_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY\n",
            "_FILE = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY\n",
        ),
        (
            tests(MAILBOX_TESTS, "test_a_symlinked_letter_is_refused_not_followed"),
            scenarios("hostile_input.feature", "^a symlink named like a letter is set aside"),
        ),
    ),
    Fault(
        "a bad letter is destroyed, not set aside",
        _one(
            "quarantine.py",
            "        inbox.rename(name, kept, into=folder)\n",
            "        inbox.unlink(name)\n",
        ),
        (
            tests(
                HOST_TESTS, "test_a_malformed_letter_is_set_aside_and_later_letters_are_delivered"
            ),
            tests(
                QUARANTINE_TESTS,
                "test_a_malformed_letter_is_set_aside_and_later_letters_are_claimed",
            ),
            KEPT_OUTLINE,
        ),
    ),
    Fault(
        "the ledger is ignored after a crash",
        _one(
            "host.py",
            "            held = self.context.holds(content.id)\n",
            "            held = None\n",
        ),
        (
            tests(
                HOST_TESTS,
                "test_a_context_with_a_ledger_is_not_entered_again_after_a_crash",
                "test_a_transcript_is_the_ledger_that_makes_delivery_exactly_once",
            ),
            scenarios("receiving.feature", "^a receiver that dies between entry and unlink"),
        ),
    ),
    Fault(
        "a drop that is not logged",
        _one(
            "host.py",
            "                self._log(claim, message.sender.key, reason)\n",
            "",
        ),
        (
            tests(
                HOST_TESTS,
                "test_a_refused_letter_is_logged_without_its_body_before_the_unlink",
                "test_a_duplicate_is_logged_without_its_body_before_the_unlink",
            ),
        ),
    ),
    Fault(
        "the start time read from the wrong field of /proc/<pid>/stat (issue 16)",
        _one(
            "registry.py",
            'return fields[19].decode() if len(fields) > 19 else ""',
            'return fields[18].decode() if len(fields) > 19 else ""',
        ),
        (tests(REGISTRY_TESTS, "test_the_start_time_the_table_reads_is_the_one_ps_shows"),),
    ),
    Fault(
        "the kqueue watch asks for the folder's removal, not for changes of its entries",
        _one(
            "watch.py",
            '_NEW_LETTERS = (_IN_MOVED_TO | _IN_CLOSE_WRITE, ("KQ_NOTE_WRITE",))',
            '_NEW_LETTERS = (_IN_MOVED_TO | _IN_CLOSE_WRITE, ("KQ_NOTE_DELETE",))',
        ),
        (tests("test_watch.py", "test_a_letter_renamed_into_the_folder_ends_the_wait[kqueue]"),),
    ),
    Fault(
        "shutdown deletes the record",
        _one(
            "registry.py",
            "    write(root, offline)\n    return offline\n",
            "    os.unlink(record_path(root, record.address))\n    return offline\n",
        ),
        (
            tests(REGISTRY_TESTS, "test_shutdown_keeps_the_record_without_its_pid"),
            tests(HOST_TESTS, "test_start_registers_a_live_record_and_stop_keeps_it_offline"),
        ),
    ),
    Fault(
        "a mailbox path built from an unchecked address",
        _one(
            "mailbox.py",
            "        return _deposit(top, checked(address), message, durable)\n",
            "        return _deposit(top, address, message, durable)\n",
        ),
        (tests(MAILBOX_TESTS, "test_deposit_refuses_an_address_that_is_not_one"),),
    ),
    Fault(
        "entry before making sure the letter can be removed",
        _one(
            "host.py", "        obstacle = claim.why_undisposable()\n", "        obstacle = None\n"
        ),
        (
            tests(
                HOST_TESTS,
                "test_a_mailbox_that_cannot_be_written_keeps_its_letters_untouched_and_says_so_once",
            ),
        ),
    ),
    Fault(
        "a claim whose unlink failed is let go",
        _one(
            "host.py",
            "            self._unreceipted[claim.name] = claim\n",
            "            claim.release()\n",
        ),
        (
            tests(
                HOST_TESTS,
                "test_a_message_whose_unlink_fails_is_never_entered_again_nor_taken_by_another",
            ),
            scenarios("receiving.feature", "^a letter whose unlink the disk refuses"),
        ),
    ),
    Fault(
        "a second listener starts silently",
        _one(
            "listeners.py",
            "                if others and not beside_others:\n",
            "                if False:\n",
        ),
        (
            tests("test_listeners.py"),
            tests(
                HOST_TESTS,
                "test_a_second_listener_is_refused_while_the_first_runs_and_changes_nothing",
            ),
        ),
    ),
    Fault(
        "shutdown marks the record offline while another listener runs",
        _one("host.py", "            for pid in self._peers():\n", "            for pid in []:\n"),
        (
            tests(
                HOST_TESTS,
                "test_stopping_says_how_the_address_was_left_and_hands_the_record_to_a_listener"
                "_that_runs",
            ),
        ),
    ),
    Fault(
        "a reader of only the version it writes (a bump would strand the mail queued)",
        _one("message.py", 'data["v"] in READABLE_VERSIONS', 'data["v"] == VERSION'),
        (
            tests(
                "test_message.py",
                "test_after_a_bump_the_reference_letters_still_parse_and_keep_v1",
            ),
            tests("test_contract_bump.py"),
        ),
    ),
    Fault(
        "a serving host that never refreshes its record (issue 16)",
        _one("host.py", "            self.beat()\n", ""),
        (
            tests(
                HOST_TESTS,
                "test_a_serving_host_refreshes_its_record_every_30_s_and_serves_on",
                "test_a_command_running_for_long_keeps_the_heartbeat_going",
            ),
        ),
    ),
    Fault(
        "the quarantine listing keeps only the last address (issue 16)",
        _one(
            "quarantine.py",
            "                found += _entries_in(below, address)\n",
            "                found = _entries_in(below, address)\n",
        ),
        (
            tests(
                QUARANTINE_TESTS,
                "test_the_listing_holds_every_address_and_passes_over_what_is_no_address",
            ),
            tests("test_cli.py", "test_the_quarantine_command_lists_what_was_set_aside"),
        ),
    ),
    Fault(
        "a timed-out command that exits 0 once ended counts as taken (issue 16)",
        _one(
            "host.py",
            "still says taken\n        return reason\n",
            "still says taken\n        return reason if process.returncode else None\n",
        ),
        (tests(HOST_TESTS, "test_a_command_past_its_timeout_counts_as_a_failure_and_is_retried"),),
    ),
    Fault(
        "a disk failure while dropping or setting aside ends the session (issue 16)",
        _one(
            "host.py",
            "        except OSError as error:\n            if error.errno in OUT_OF_DESCRIPTORS:\n",
            "        except ZeroDivisionError as error:\n"
            "            if error.errno in OUT_OF_DESCRIPTORS:\n",
        ),
        (
            tests(
                HOST_TESTS,
                "test_a_drop_whose_log_cannot_be_written_waits_and_is_logged_on_its_next_try",
                "test_a_letter_that_cannot_be_set_aside_waits_and_the_mail_behind_it_flows",
            ),
        ),
    ),
    Fault(
        "a letter evicted from the full quarantine goes unlogged (issue 16)",
        _one(
            "host.py",
            "        for name in moved.evicted:\n"
            '            log(post, claim, name, "?", "removed from the full quarantine '
            '(oldest first)")\n',
            "",
        ),
        (tests(HOST_TESTS, "test_a_letter_evicted_from_the_full_quarantine_is_logged"),),
    ),
    Fault(
        "the frame's time in the machine's time zone (issue 16)",
        _one("format.py", "time.gmtime(ms // 1000)", "time.localtime(ms // 1000)"),
        (
            tests(
                "test_format.py",
                "test_iso_time",
                "test_frame_of_an_empty_body_quotes_one_empty_line",
            ),
        ),
    ),
    Fault(
        "a sweep that stops at the first record not offline (issue 16)",
        _one(
            "sweep.py",
            "        if state is not Presence.OFFLINE:\n            continue\n",
            "        if state is not Presence.OFFLINE:\n            break\n",
        ),
        (scenarios("sweeps.feature", "^the sweep judges every record"),),
    ),
    Fault(
        "peek reads a letter without its file name (issue 16)",
        _one(
            "mailbox.py",
            "    return Letter(name, parse(raw, name))\n",
            "    return Letter(name, parse(raw))\n",
        ),
        (scenarios("json.feature", "^peek --json gives each letter"),),
    ),
    Fault(
        "the contract gate takes a new message field for compatible",
        _one(
            "contract/compatibility.py",
            'Rule("message.field-added", _CLOSED, "field", ADDED, True,',
            'Rule("message.field-added", _CLOSED, "field", ADDED, False,',
        ),
        (tests("test_compatibility.py", "test_each_change_has_its_rule"),),
    ),
    Fault(
        "a transcript line the disk took in part is trusted (issue 38)",
        _one(
            "host.py",
            "            files.write_all(self._fd, line)\n",
            "            os.write(self._fd, line)\n",
        ),
        (
            tests(
                HOST_TESTS,
                "test_a_line_the_disk_takes_in_part_is_cut_back_and_its_id_not_counted",
            ),
        ),
    ),
    Fault(
        "a drop-log line the file took in part stays in the log (issue 38)",
        _one(
            "droplog.py",
            "            os.ftruncate(fd, size)\n",
            "            pass\n",
        ),
        (tests("test_droplog.py", "test_a_line_the_log_cannot_take_whole_is_not_written_at_all"),),
    ),
    Fault(
        "a name too long for its reason is set aside as it is (issue 38)",
        _one(
            "quarantine.py",
            "    candidate, number = _head(name, room), 0\n",
            "    candidate, number = name, 0\n",
        ),
        (
            tests(
                QUARANTINE_TESTS,
                "test_a_name_too_long_for_its_reason_beside_it_is_cut_to_fit_and_still_moved",
            ),
            tests(HOST_TESTS, "test_a_letter_named_with_255_bytes_is_set_aside_and_logged_once"),
        ),
    ),
    Fault(
        "a lock held by a stopped process is waited for without limit (issue 38)",
        _one(
            "files.py",
            "        left = deadline - time.monotonic()\n",
            "        left = LOCK_WAIT_S\n",
        ),
        (
            tests(
                "test_files.py",
                "test_a_folder_lock_held_by_a_stopped_process_is_given_up_naming_it",
            ),
            tests(
                MAILBOX_TESTS,
                "test_a_deposit_into_a_mailbox_a_stopped_sender_holds_fails_with_nothing_written",
            ),
        ),
    ),
    Fault(
        "a socket named like a letter stops its reader (issue 38)",
        _one(
            "files.py",
            "            return not stat.S_ISREG(self.lstat(name).st_mode)\n",
            "            return False\n",
        ),
        (
            tests(
                MAILBOX_TESTS,
                "test_a_socket_named_like_a_letter_is_not_a_file_and_the_letter_behind_it_flows",
            ),
            scenarios("hostile_input.feature", "^a UNIX socket named like a letter"),
        ),
    ),
    Fault(
        "the drop log is opened as whatever stands at its name (issue 38)",
        _one(
            "files.py",
            "            if not stat.S_ISREG(os.fstat(fd).st_mode):\n",
            "            if False:\n",
        ),
        (
            tests(
                "test_files.py",
                "test_open_append_refuses_a_fifo_that_has_a_reader",
                "test_read_bounded_refuses_a_fifo_without_blocking",
            ),
        ),
    ),
)


# -- checking the table ----------------------------------------------------------------


class TableError(Exception):
    """The table no longer matches the repository: an ``old`` text missing or repeated,
    or a selection that names nothing."""


def edit_problem(fault: Fault, edit: Edit, source_root: Path) -> str | None:
    """Why the edit cannot be applied to the sources under source_root, said with the
    fault, the file and what to do; None when its old text occurs exactly once."""
    path = source_root / PACKAGE / edit.file
    where = f"fault {fault.name!r}: {PACKAGE / edit.file}"
    if not path.is_file():
        return (
            f"{where} does not exist; point the edit at the module that now holds "
            f"the code it breaks, starting {first_line(edit.old)!r}"
        )
    found = path.read_text(encoding="utf-8").count(edit.old)
    if found == 0:
        return (
            f"{where} no longer contains the old text starting {first_line(edit.old)!r}; "
            "rewrite the edit's old and new texts from the current source so that the "
            "fault breaks the same rule"
        )
    if found > 1:
        return (
            f"{where} contains the old text starting {first_line(edit.old)!r} {found} "
            "times; widen it with neighbouring lines until it occurs once"
        )
    return None


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), text)


def edit_problems(fault: Fault, source_root: Path) -> list[str]:
    return [
        problem
        for edit in fault.edits
        if (problem := edit_problem(fault, edit, source_root)) is not None
    ]


def collected_tests(faults: Iterable[Fault], repo: Path) -> set[str]:
    """The node ids pytest collects from every test file the faults select, in one
    collection run."""
    files = sorted(
        {
            item.file
            for fault in faults
            for item in fault.selection
            if isinstance(item, Tests) and (repo / item.file).is_file()
        }
    )
    if not files:
        return set()
    # One -q lists node ids; the -q of the project's addopts on top would list files.
    collect = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-o", "addopts="]
    done = subprocess.run(
        [*collect, "-p", "no:cacheprovider", *files],
        cwd=repo,
        capture_output=True,
        text=True,
    )
    if done.returncode not in (0, 5):  # 5: a file without tests, reported per selection
        raise TableError(f"pytest cannot collect the selected test files:\n{tail(done.stdout)}")
    return {line for line in done.stdout.splitlines() if "::" in line}


def matching_scenarios(selection: Scenarios, repo: Path) -> list[str]:
    """The names of the scenarios the selection runs, matched as behave matches them
    (the outlines' scenarios one by one)."""
    path = repo / selection.path
    files = sorted(path.glob("*.feature")) if path.is_dir() else [path]
    name = re.compile(selection.name) if selection.name is not None else None
    return [
        scenario.name
        for file in files
        if (parsed := parse_file(str(file))) is not None  # type: ignore[no-untyped-call]
        for scenario in parsed.walk_scenarios()
        if (name is None or name.search(scenario.name))
        and (selection.tag is None or selection.tag in scenario.effective_tags)
    ]


def selection_problem(item: Selection, repo: Path, collected: set[str]) -> str | None:
    """What is wrong with one selection, with what to do; None when it names tests or
    scenarios that exist."""
    if isinstance(item, Tests):
        if not (repo / item.file).is_file():
            return f"{item.file} does not exist; select the tests where they live now"
        missing = [node for node in item.node_ids() if not collects(node, collected)]
        if missing:
            return (
                f"pytest collects no test {', '.join(missing)}; if it was renamed or moved, "
                "select it by its current name, else select the test that now catches the fault"
            )
        return None
    if not (repo / item.path).exists():
        return f"{item.path} does not exist; select the scenarios where they live now"
    if not matching_scenarios(item, repo):
        return (
            f"no scenario matches {item}; if it was renamed or retagged, select it by its "
            "current name or tag, else select the scenario that now catches the fault"
        )
    return None


def collects(node: str, collected: set[str]) -> bool:
    """The node (a file, or a function in it) is collected, with one test or more:
    its parameters, or its functions."""
    return any(found == node or found.startswith((f"{node}::", f"{node}[")) for found in collected)


def selection_problems(fault: Fault, repo: Path, collected: set[str]) -> list[str]:
    return [
        f"fault {fault.name!r}: {problem}"
        for item in fault.selection
        if (problem := selection_problem(item, repo, collected)) is not None
    ]


def check_table(faults: Sequence[Fault], repo: Path) -> None:
    """Every edit applies and every selection names something, or a TableError
    saying each problem."""
    collected = collected_tests(faults, repo)
    problems = [
        problem
        for fault in faults
        for problem in (*edit_problems(fault, repo), *selection_problems(fault, repo, collected))
    ]
    if problems:
        raise TableError("\n".join(problems))


# -- applying a fault -------------------------------------------------------------------


def copy_repo(repo: Path, target: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", ".pytest_cache")
    target.mkdir(parents=True)
    for name in COPIED:
        source = repo / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=ignore)
        else:
            shutil.copy2(source, target / name)


def apply(fault: Fault, copy: Path) -> None:
    for edit in fault.edits:
        problem = edit_problem(fault, edit, copy)
        if problem is not None:
            raise TableError(problem)
        path = copy / PACKAGE / edit.file
        text = path.read_text(encoding="utf-8")
        path.write_text(text.replace(edit.old, edit.new), encoding="utf-8")
    for edit in fault.edits:  # a fault that does not even compile would be "killed" for nothing
        path = copy / PACKAGE / edit.file
        compile(path.read_text(encoding="utf-8"), str(path), "exec")


def environment(copy: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(copy / "src")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def check_imported_from(copy: Path, modules: Sequence[str]) -> None:
    """The editable install must not shadow the copy: ask a fresh interpreter, with
    the environment the tests get, where each module comes from."""
    script = (
        "import importlib, sys\n"
        "for name in sys.argv[1:]:\n"
        "    print(importlib.import_module(name).__file__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *modules],
        cwd=copy,
        env=environment(copy),
        capture_output=True,
        text=True,
        check=True,
    )
    expected = (copy / "src").resolve()
    for module, location in zip(modules, done.stdout.split(), strict=True):
        if not Path(location).resolve().is_relative_to(expected):
            raise RuntimeError(f"{module} was imported from {location}, not from {expected}")


# -- running a selection ----------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    returncode: int | None
    """None when the run was stopped at the timeout."""
    output: str
    seconds: float


def commands(selection: Sequence[Selection]) -> list[list[str]]:
    """Pytest first (stopping at the first failure), then behave once for each set of
    filters, over the paths selected with them."""
    node_ids = [node for item in selection if isinstance(item, Tests) for node in item.node_ids()]
    by_filters: dict[tuple[str, ...], list[str]] = {}
    for item in selection:
        if isinstance(item, Scenarios):
            by_filters.setdefault(tuple(item.filters()), []).append(item.path)
    runs = []
    if node_ids:
        pytest = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider"]
        runs.append([*pytest, *node_ids])
    behave = [sys.executable, "-m", "behave", "--format", "progress", "--stop"]
    runs.extend([*behave, *filters, *paths] for filters, paths in by_filters.items())
    return runs


def run_selection(copy: Path, selection: Sequence[Selection], timeout_s: float) -> Run:
    """Run until one command fails; the process group is killed at the timeout, so
    no listener a test started outlives it."""
    started = time.monotonic()
    output = []
    for command in commands(selection):
        remaining = timeout_s - (time.monotonic() - started)
        process = subprocess.Popen(
            command,
            cwd=copy,
            env=environment(copy),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            out, _ = process.communicate(timeout=max(remaining, 0.0))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, _ = process.communicate()
            output.append(out)
            return Run(None, "".join(output), time.monotonic() - started)
        output.append(out)
        if process.returncode != 0:
            return Run(process.returncode, "".join(output), time.monotonic() - started)
    return Run(0, "".join(output), time.monotonic() - started)


def verdict(run: Run) -> str:
    """Killed only by failing tests (exit 1 of pytest or behave); a run that could
    not collect or start its tests judged nothing."""
    if run.returncode is None:
        return "killed (timeout)"
    if run.returncode == 0:
        return "survived"
    return "killed" if run.returncode == 1 else f"error (exit {run.returncode})"


def modules_of(fault: Fault) -> list[str]:
    return [f"pipost.{Path(edit.file).stem}" for edit in fault.edits]


def judge(fault: Fault, copy: Path, timeout_s: float) -> Run:
    copy_repo(REPO, copy)
    try:
        apply(fault, copy)
        check_imported_from(copy, modules_of(fault))
        return run_selection(copy, fault.selection, timeout_s)
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def baseline(faults: Sequence[Fault], copy: Path, timeout_s: float) -> Run:
    """Every selection, once, on the unedited sources: it must pass."""
    copy_repo(REPO, copy)
    try:
        check_imported_from(copy, sorted({m for fault in faults for m in modules_of(fault)}))
        union = list(dict.fromkeys(item for fault in faults for item in fault.selection))
        return run_selection(copy, union, timeout_s * 2)
    finally:
        shutil.rmtree(copy, ignore_errors=True)


# -- the report -------------------------------------------------------------------------


def print_table(rows: Sequence[tuple[str, str, str, str, str]]) -> None:
    header = ("fault", "file", "selection", "result", "seconds")
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    for row in (header, tuple("-" * width for width in widths), *rows):
        print(" | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


def tail(output: str) -> str:
    return "\n".join(output.rstrip().splitlines()[-OUTPUT_TAIL_LINES:])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the deliberate faults against the tests.")
    parser.add_argument("faults", nargs="*", help="names of faults to run (default: all)")
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per fault"
    )
    args = parser.parse_args(argv)
    unknown = set(args.faults) - {fault.name for fault in FAULTS}
    if unknown:
        parser.error(f"no such fault: {', '.join(sorted(unknown))}")
    chosen = [fault for fault in FAULTS if not args.faults or fault.name in args.faults]
    try:
        check_table(chosen, REPO)
    except TableError as error:
        print(
            f"the fault table no longer matches the repository, so nothing ran:\n{error}",
            file=sys.stderr,
        )
        return 2

    started = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory(prefix="pipost-mutants-") as scratch_name:
        scratch = Path(scratch_name)
        unedited = baseline(chosen, scratch / "baseline", args.timeout)
        if unedited.returncode != 0:
            print(tail(unedited.output), file=sys.stderr)
            print("the selections fail without any fault: fix the suite first", file=sys.stderr)
            return 1
        print(f"baseline: every selection passes unedited ({unedited.seconds:.1f} s)", flush=True)
        for number, fault in enumerate(chosen):
            run = judge(fault, scratch / f"fault-{number:02d}", args.timeout)
            result, seconds = verdict(run), run.seconds
            if not result.startswith("killed"):
                print(f"--- {result}: {fault.name}\n{tail(run.output)}", flush=True)
            print(f"{result}: {fault.name} ({seconds:.1f} s)", flush=True)
            selection = ", ".join(str(item) for item in fault.selection)
            rows.append((fault.name, fault.files, selection, result, f"{seconds:.1f}"))
    print()
    print_table(rows)
    not_killed = [row[0] for row in rows if not row[3].startswith("killed")]
    elapsed = time.monotonic() - started
    print(f"\n{len(rows) - len(not_killed)} of {len(rows)} faults killed in {elapsed:.0f} s")
    if not_killed:
        print(f"not killed (a test is missing or could not run): {', '.join(not_killed)}")
    return 1 if not_killed else 0


if __name__ == "__main__":
    sys.exit(main())
