"""Refusals and failures on the driver protocol (SPEC 11): each is a reason object,
``{"code", "text", …facts}``, with exactly the code and the facts the protocol
names and pipost's own words as its text (the features judge codes only). The
words of a kind the command line shows too are pinned once, in
tests/test_format.py: here the text is that kind's ``format.refusal``. The words
only the driver says (its world's refusals, the file system's failures) are
pinned here, whole."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from pipost import format, mailbox, registry
from pipost.driver import InProcessDriver
from pipost.driver_protocol import Json, Result
from pipost.refusals import (
    Ambiguous,
    BodyNotText,
    BodyTooLarge,
    CannotWrite,
    EmptyBody,
    MailboxFull,
    NoSessionIn,
    NoTargets,
    Refusal,
    TooManyTargets,
    UnknownAddress,
    UnknownTarget,
)

UNKNOWN = "s-0123456789ab"


@pytest.fixture
def driver(tmp_path: Path) -> InProcessDriver:
    return InProcessDriver(tmp_path / "post", home=str(tmp_path))


def session_in(driver: InProcessDriver, tmp_path: Path, name: str, folder: str) -> str:
    cwd = tmp_path / folder
    cwd.mkdir(parents=True, exist_ok=True)
    result = driver.call("register", session_id=f"id-{name}", cwd=str(cwd), name=name)
    return str(result["address"])


def send(driver: InProcessDriver, targets: list[str], body: str = "hi", **args: Json) -> Result:
    return driver.call("send", targets=list[Json](targets), body=body, cwd="/", **args)


def test_an_unknown_handle_names_the_handle_and_the_reachable_sessions(
    driver: InProcessDriver, tmp_path: Path
) -> None:
    bob = session_in(driver, tmp_path, "bob", "bob")
    reachable = tuple(driver.post.sessions())
    assert send(driver, ["nobody"]) == {
        "refused": {
            "code": "unknown_target",
            "text": format.refusal(UnknownTarget("nobody", reachable)),
            "handle": "nobody",
            "reachable": [bob],
        }
    }


def test_a_directory_without_a_session_names_its_canonical_path_too(
    driver: InProcessDriver, tmp_path: Path
) -> None:
    (tmp_path / "empty").mkdir()
    handle = f"{tmp_path}//empty/"
    assert send(driver, [handle]) == {
        "refused": {
            "code": "unknown_target",
            "text": format.refusal(NoSessionIn(handle, str(tmp_path / "empty"), ())),
            "handle": handle,
            "path": str(tmp_path / "empty"),
            "reachable": [],
        }
    }


def test_an_ambiguous_handle_names_every_candidate(driver: InProcessDriver, tmp_path: Path) -> None:
    a = session_in(driver, tmp_path, "twin-a", "shared")
    driver.call("advance_clock", ms=1)
    b = session_in(driver, tmp_path, "twin-b", "shared")
    candidates = tuple(driver.post.sessions())
    refused = driver.call("resolve", handle="shared", cwd="/")["refused"]
    assert refused == {
        "code": "ambiguous_target",
        "text": format.refusal(Ambiguous("shared", candidates)),
        "handle": "shared",
        "candidates": [b, a],
    }


@pytest.mark.parametrize(
    ("targets", "body", "kind", "facts"),  # facts: the code and the facts beside it
    [
        ([UNKNOWN], "hi", UnknownAddress(UNKNOWN), {"code": "unknown_address", "address": UNKNOWN}),
        ([], "hi", NoTargets(), {"code": "no_targets"}),
        (
            [UNKNOWN] * 9,
            "hi",
            TooManyTargets(9, 8),
            {"code": "too_many_targets", "count": 9, "cap": 8},
        ),
        ([UNKNOWN], " \n", EmptyBody(), {"code": "empty_body"}),
        ([UNKNOWN], "h\udcff", BodyNotText(), {"code": "body_not_text"}),
        (
            [UNKNOWN],
            "é" * 16385,
            BodyTooLarge(32770, 32768),
            {"code": "body_too_large", "size": 32770, "cap": 32768},
        ),
    ],
)
def test_a_send_is_refused_with_the_code_and_facts_of_its_kind(
    driver: InProcessDriver,
    targets: list[str],
    body: str,
    kind: Refusal,
    facts: dict[str, Json],
) -> None:
    reason = {**facts, "text": format.refusal(kind)}
    assert send(driver, targets, body) == {"refused": reason}


def test_a_bad_reply_address_is_a_bad_envelope_naming_the_field(driver: InProcessDriver) -> None:
    assert send(driver, [UNKNOWN], reply_to="../x") == {
        "refused": {
            "code": "bad_envelope",
            "text": "reply_to must be an address or none, not '../x'",
            "field": "replyTo",
        }
    }


def test_a_sender_the_message_rules_refuse_is_a_bad_envelope(driver: InProcessDriver) -> None:
    assert send(driver, [UNKNOWN], label="x\udcff") == {
        "refused": {
            "code": "bad_envelope",
            "text": "text holds unpaired surrogates",
            "field": "from.name",
        }
    }


def test_a_full_mailbox_names_its_address_the_count_and_the_cap(
    driver: InProcessDriver, tmp_path: Path
) -> None:
    bob = session_in(driver, tmp_path, "bob", "bob")
    for number in range(mailbox.CAP):
        assert "receipts" in send(driver, [bob], f"letter {number}")
    assert send(driver, [bob]) == {
        "refused": {
            "code": "mailbox_full",
            "text": format.refusal(MailboxFull(bob, 50, 50)),
            "address": bob,
            "queued": 50,
            "cap": 50,
        }
    }


def test_a_mailbox_that_cannot_be_written_is_a_failure_naming_its_address(
    driver: InProcessDriver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Injected: CI runs as root, which writes a read-only folder anyway."""
    bob = session_in(driver, tmp_path, "bob", "bob")
    folder = str(tmp_path / "post" / "inbox" / bob)

    def refuse(top: object, address: str, letter: object) -> str:
        raise mailbox.DepositFailed(
            folder, address, PermissionError(errno.EACCES, "Permission denied")
        )

    monkeypatch.setattr(mailbox, "deposit", refuse)
    assert send(driver, [bob]) == {
        "failed": {
            "code": "cannot_write",
            "text": format.refusal(CannotWrite(bob, folder, "Permission denied")),
            "address": bob,
        }
    }


@pytest.mark.parametrize(
    ("where", "text"),
    [
        ("/post/registry", "No space left on device: /post/registry"),
        (None, "No space left on device"),  # a failure that names no file says none
    ],
)
def test_any_other_failure_of_the_file_system_is_an_io_error(
    driver: InProcessDriver,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    where: str | None,
    text: str,
) -> None:
    def full_disk(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), where)

    monkeypatch.setattr(registry, "register", full_disk)
    assert driver.call("register", session_id="a", cwd=str(tmp_path)) == {
        "failed": {"code": "io_error", "text": text}
    }


def test_the_world_of_the_driver_refuses_with_codes_too(driver: InProcessDriver) -> None:
    pid = driver.call("process_start")["pid"]
    assert driver.call("process_start", pid=pid) == {
        "refused": {"code": "pid_running", "text": f"pid {pid} is running", "pid": pid}
    }
    assert driver.call("process_stop", pid=7) == {
        "refused": {"code": "no_process", "text": "no process has pid 7", "pid": 7}
    }
    for op in ("heartbeat", "shutdown"):
        assert driver.call(op, session_id="gone\x1b") == {
            "refused": {
                "code": "no_record",
                "text": "session 'gone\\\\x1b' has no record",
                "session_id": "gone\x1b",
            }
        }


def test_a_process_starts_with_the_pid_it_is_given_while_no_process_has_it(
    driver: InProcessDriver,
) -> None:
    assert driver.call("process_start", pid=4242) == {"pid": 4242}
    assert driver.call("process_stop", pid=4242) == {"pid": 4242}
    assert driver.call("process_start", pid=4242) == {"pid": 4242}, "a pid free again"


def test_a_recycled_pid_is_taken_at_once_by_another_process(driver: InProcessDriver) -> None:
    """process_recycle gives the pid itself to the new process (docs/conformance.md),
    so the pid runs on and a session that registered with it is met by a stranger."""
    assert driver.call("process_start", pid=4242) == {"pid": 4242}
    assert driver.call("process_recycle", pid=4242) == {"pid": 4242}
    assert driver.call("process_start", pid=4242)["refused"] == {
        "code": "pid_running",
        "text": "pid 4242 is running",
        "pid": 4242,
    }


@pytest.mark.parametrize("op", ["record", "peek", "count", "take"])
def test_a_malformed_address_is_refused_before_any_path_is_built(
    driver: InProcessDriver, op: str
) -> None:
    assert driver.call(op, address="../etc") == {
        "refused": {
            "code": "malformed_address",
            "text": "not an address: '../etc'",
            "address": "../etc",
        }
    }
