"""The registry: records laid by hand, listing, resolving, sweeping."""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from pathlib import Path

from behave import given, then, when
from behave.runner import Context

from pipost_conformance.client import Json
from pipost_conformance.features.steps.feature_world import (
    QUOTED,
    QUOTED_LIST,
    World,
    checks,
    dict_of,
    duration_ms,
    int_of,
    list_of,
    quoted_items,
    session_id_for,
    text_of,
    use_regular_expressions,
    world,
    write_private,
)
from pipost_conformance.machines.common import descriptors_on

use_regular_expressions()

RECORD_IN_FLIGHT = b'{"v":1,"address":"s-01'
"""The first bytes of a record still being written under its temporary name."""


def _record_for(the: World, label: str, cwd: str) -> dict[str, Json]:
    """The record pi-post 0.7 writes for a session: no process start time."""
    session_id = session_id_for(label)
    address = text_of(the.call("address_of", session_id=session_id)["address"])
    now = the.now()
    return {
        "v": 1,
        "address": address,
        "sessionId": session_id,
        "name": label,
        "cwd": cwd,
        "startedAt": now,
        "lastSeen": now,
    }


def _garbage(the: World, label: str, description: str) -> tuple[str, bytes]:
    """A file name in the registry and bytes that are not a valid record there."""
    record = _record_for(the, label, f"/home/dev/{label}")
    name = f"{record['address']}.json"
    whole = json.dumps(record).encode()
    damage: dict[str, tuple[str, bytes]] = {
        "an empty file": (name, b""),
        "half of a record, cut off mid-write": (name, whole[: len(whole) // 2]),
        "a JSON array": (name, b"[]"),
        "a record of version 0": (name, json.dumps({**record, "v": 0}).encode()),
        "a record whose pid is text": (name, json.dumps({**record, "pid": "123"}).encode()),
        "a record without a cwd": (name, json.dumps({**record, "cwd": None}).encode()),
        "a record whose address is not its session id's": (
            name,
            json.dumps({**record, "sessionId": "someone-else"}).encode(),
        ),
        "a record filed under another address": ("s-000000000000.json", whole),
    }
    assert description in damage, f"no such damage: {description!r}"
    return damage[description]


@given(f"the registry holds, for a session {QUOTED}, (.+)")
def registry_garbage(context: Context, label: str, description: str) -> None:
    the = world(context)
    name, data = _garbage(the, label, description)
    write_private(the.root / "registry" / name, data)


@given(f"the registry holds a record pi-post 0.7 wrote for {QUOTED} in {QUOTED}, its pid running")
def foreign_record(context: Context, label: str, cwd: str) -> None:
    the = world(context)
    record = _record_for(the, label, the.directory(cwd))
    record["pid"] = int_of(the.call("process_start")["pid"])
    record["host"] = "a field pipost does not know"
    path = the.root / "registry" / f"{record['address']}.json"
    write_private(path, json.dumps(record).encode())


# -- listing --------------------------------------------------------------------------------


@when("I list the sessions")
def list_sessions(context: Context) -> None:
    world(context).act("list")


@when("I list all sessions")
def list_all_sessions(context: Context) -> None:
    world(context).act("list", all=True)


def _listed(the: World) -> list[dict[str, Json]]:
    return [dict_of(entry) for entry in list_of(the.result["sessions"])]


@then("the sessions listed are, in order:")
@checks("INV-15", "INV-14")
def listed_in_order(context: Context) -> None:
    assert context.table is not None, "the step needs a table of name and presence"
    the = world(context)
    found = [
        [text_of(dict_of(s["record"])["name"]), text_of(s["presence"]), str(s["queued"])]
        for s in _listed(the)
    ]
    expected = [
        [row["name"], row["presence"], row["queued"] if "queued" in row.headings else "0"]
        for row in context.table
    ]
    # A session missing from the listing lost its record (INV-14), else its rank is wrong.
    missing = {row[0] for row in expected} - {row[0] for row in found}
    blamed = "INV-14" if missing else "INV-15"
    assert found == expected, f"[{blamed}] {found} != {expected}"


@then(f"the sessions listed are {QUOTED_LIST}")
@checks("INV-15")
def listed_names(context: Context, names: str) -> None:
    found = [text_of(dict_of(s["record"])["name"]) for s in _listed(world(context))]
    assert found == quoted_items(names), found


@then(r"(\d+) sessions? (?:is|are) hidden")
@checks("INV-15")
def hidden(context: Context, count: str) -> None:
    assert world(context).result["hidden"] == int(count), world(context).result


# -- resolving ------------------------------------------------------------------------------


@when(f"I resolve {QUOTED}")
def resolve(context: Context, handle: str) -> None:
    the = world(context)
    the.act("resolve", handle=the.expand(handle), cwd=the.cwd, home=the.home)


@then(f"it resolves to {QUOTED}")
@checks("INV-13")
def resolves_to(context: Context, label: str) -> None:
    the = world(context)
    assert the.result.get("address") == the.address(label), the.result


@then(f"it resolves to the session named {QUOTED}")
@checks("INV-13")
def resolves_to_named(context: Context, name: str) -> None:
    the = world(context)
    assert "record" in the.result, the.result
    assert dict_of(the.result["record"])["name"] == name, the.result


@when(f"I look up the record of {QUOTED}")
def look_up_record(context: Context, label: str) -> None:
    the = world(context)
    the.act("record", address=the.address(label))


# -- sweeping -------------------------------------------------------------------------------


@when("the post office is swept")
def swept(context: Context) -> None:
    world(context).act("sweep")


@when(f"the post office is swept while {QUOTED} registers again, the sweep waiting for its mailbox")
def swept_while_registering(context: Context, label: str) -> None:
    """The sweep's first look at the registry finds the old record; then it waits for
    the mailbox's lock, held here as a sender holds it while it deposits; meanwhile
    the session registers again, its record replaced by hand as pi-post 0.7 writes
    it (a running pid, seen now). Who waits for a lock is read from /proc/locks."""
    if not Path(LOCKS).exists():
        context.scenario.skip(f"sees who waits for a lock in {LOCKS}, which Linux has")
        return
    the = world(context)
    folder = the.inbox(label)
    record = _record_for(the, label, text_of(dict_of(the.record(label))["cwd"]))
    record["pid"] = int_of(the.call("process_start")["pid"])
    raised: list[BaseException] = []

    def sweep() -> None:
        try:
            the.act("sweep")
        except BaseException as error:  # raised again in the scenario's thread
            raised.append(error)

    sweeper = threading.Thread(target=sweep, daemon=True)
    held = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        sweeper.start()
        deadline = time.monotonic() + LOCK_WAIT_S
        while sweeper.is_alive() and not _awaited(folder):
            assert time.monotonic() < deadline, f"the sweep neither ended nor waited for {folder}"
            time.sleep(0.001)
        registry = the.root / "registry"
        temporary = registry / f".{record['address']}.feature.tmp"
        write_private(temporary, json.dumps(record).encode())
        temporary.rename(registry / f"{record['address']}.json")
    finally:
        os.close(held)  # the lock goes with it
    sweeper.join(timeout=LOCK_WAIT_S)
    assert not sweeper.is_alive(), "the sweep did not end once the mailbox was free"
    if raised:
        raise raised[0]


LOCKS = "/proc/locks"
LOCK_WAIT_S = 60.0
"""How long a sweep may take to reach the mailbox's lock, or to end once it is free:
a bound against hanging, never a verdict."""


def _awaited(folder: Path) -> bool:
    """Whether someone waits for the lock of ``folder``, which the step holds through
    one descriptor: blocked in flock (a line of /proc/locks marked ``->`` that names
    its inode), or holding the folder open beside the step's own, as a waiter that
    tries the lock again and again (pipost bounds its waits so) does."""
    inode = os.stat(folder).st_ino
    with open(LOCKS) as locks:
        if any("->" in line and f":{inode} " in line for line in locks):
            return True
    return descriptors_on(folder) > 1


@then("the sweep removed nothing")
@checks("INV-17")
def removed_nothing(context: Context) -> None:
    result = dict(world(context).result)
    # An implementation that predates the report of temporaries leaves it out.
    assert result.pop("temporaries_removed", []) == [], result
    assert result == {"records_removed": [], "mailboxes_removed": []}, result


@given(f"the registry holds a record write in flight {QUOTED}, last modified (.+) ago")
def record_write_in_flight(context: Context, name: str, age: str) -> None:
    the = world(context)
    path = the.root / "registry" / name
    write_private(path, RECORD_IN_FLIGHT)
    the.last_modified(path, duration_ms(age))


@then(f"the record write in flight {QUOTED} is still in the registry, untouched")
@checks("INV-17")
def record_write_untouched(context: Context, name: str) -> None:
    path = world(context).root / "registry" / name
    assert path.is_file(), f"{name} is gone"
    assert path.read_bytes() == RECORD_IN_FLIGHT, "the record write in flight was changed"


@given(f"the files in the mailbox of {QUOTED} were last modified (.+) ago")
def mailbox_files_aged(context: Context, label: str, age: str) -> None:
    the = world(context)
    for path in the.inbox(label).iterdir():
        the.last_modified(path, duration_ms(age))


@then(f"the sweep removed only the stale temporar(?:y|ies) {QUOTED_LIST}")
@checks("INV-17")
def temporaries_removed(context: Context, paths: str) -> None:
    the = world(context)
    expected = quoted_items(paths)
    reported = list_of(the.result.get("temporaries_removed"))
    assert sorted(reported, key=str) == sorted(expected), the.result
    for path in expected:
        assert not (the.root / path).exists(), f"{path} is still there"


@then(f"the record of {QUOTED} was (kept|removed)")
@checks("INV-17")
def record_fate(context: Context, label: str, fate: str) -> None:
    the = world(context)
    reported = the.address(label) in list_of(the.result["records_removed"])
    on_disk = the.record(label) is not None
    assert (reported, on_disk) == (fate == "removed", fate == "kept"), (the.result, on_disk)


@then(f"the sweep removed the mailbox folder of {QUOTED}")
@checks("INV-17")
def mailbox_removed(context: Context, label: str) -> None:
    the = world(context)
    assert the.address(label) in list_of(the.result["mailboxes_removed"]), the.result
    assert not the.inbox(label).exists(), f"{the.inbox(label)} is still there"
