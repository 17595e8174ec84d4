"""What the steps of one scenario share: the driver, the sessions started, what
was sent and received, and the tree under the root, fingerprinted so that a step
can prove what did or did not change on disk.

Steps talk to pipost only through the driver (``World.call``); they touch the
tree directly only to lay out hostile or foreign input and to fingerprint it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from behave.matchers import use_step_matcher
from behave.runner import Context

from pipost_conformance.client import Driver, Json, Result

QUOTED = r'"([^"]*)"'
"""A quoted step argument; the quotes keep two arguments from running together."""
QUOTED_LIST = r'((?:"[^"]*")(?:(?:, | and )"[^"]*")*)'
"""``"a"``, ``"a" and "b"``, ``"a", "b" and "c"``."""

StepFunction = TypeVar("StepFunction", bound=Callable[..., None])


def checks(*invariants: str) -> Callable[[StepFunction], StepFunction]:
    """Name the invariants an assertion step checks (SPEC 11): a failed assertion
    of the step counts against these rows of the matrix, and no other.

    Put it under the step decorator, so that the step registered is the marked one::

        @then("the send is refused")
        @checks("INV-08")
        def refused(context): ...
    """

    def mark(step: StepFunction) -> StepFunction:
        step.invariants = invariants  # type: ignore[attr-defined]
        return step

    return mark


_DURATION_UNITS = {
    "ms": 1,
    "millisecond": 1,
    "second": 1000,
    "minute": 60_000,
    "hour": 3_600_000,
    "day": 86_400_000,
}
_PLACEHOLDER = re.compile(r"\{(scratch|home)\}|\{([\w-]+)\.(address|id)\}")


def use_regular_expressions() -> None:
    """Step patterns are regular expressions, anchored at both ends. behave goes back
    to its default matcher after each step module, so each module calls this."""
    use_step_matcher("re")  # type: ignore[no-untyped-call]  # behave.matchers has no types


def quoted_items(text: str) -> list[str]:
    return re.findall(r'"([^"]*)"', text)


def duration_ms(text: str) -> int:
    """``"8 days"``, ``"45 seconds and 1 ms"`` → milliseconds."""
    total = 0
    for part in text.split(" and "):
        amount, unit = part.split()
        singular = unit if unit == "ms" else unit.removesuffix("s")
        total += int(amount) * _DURATION_UNITS[singular]
    return total


# -- reading JSON results with their types checked ------------------------------------


def text_of(value: Json) -> str:
    assert isinstance(value, str), f"expected a string, got {value!r}"
    return value


def int_of(value: Json) -> int:
    assert isinstance(value, int) and not isinstance(value, bool), f"expected an int: {value!r}"
    return value


def dict_of(value: Json) -> dict[str, Json]:
    assert isinstance(value, dict), f"expected an object, got {value!r}"
    return value


def list_of(value: Json) -> list[Json]:
    assert isinstance(value, list), f"expected a list, got {value!r}"
    return value


# -- the tree on disk -----------------------------------------------------------------


def fingerprint(root: Path) -> dict[str, str]:
    """Every path under ``root`` with its mode and its bytes (or link target),
    symlinks not followed."""
    found: dict[str, str] = {}
    if not os.path.lexists(root):
        return found
    found["."] = _describe(root)
    for folder, folders, files in os.walk(root):
        for name in folders + files:
            path = Path(folder) / name
            found[str(path.relative_to(root))] = _describe(path)
    return found


def tree_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """What differs between two fingerprints, one line per path."""
    return [
        f"{path}: {before.get(path, '(absent)')} -> {after.get(path, '(absent)')}"
        for path in sorted(set(before) | set(after))
        if before.get(path) != after.get(path)
    ]


def _describe(path: Path) -> str:
    info = os.lstat(path)
    mode = oct(stat.S_IMODE(info.st_mode))
    if stat.S_ISLNK(info.st_mode):
        return f"link {mode} -> {os.readlink(path)}"
    if stat.S_ISDIR(info.st_mode):
        return f"folder {mode}"
    return f"file {mode} sha256:{hashlib.sha256(path.read_bytes()).hexdigest()}"


def write_private(path: Path, data: bytes) -> None:
    """Lay a file into the tree as a writer would: folders 0700, the file 0600."""
    for parent in reversed(path.parents):
        if not parent.exists():
            parent.mkdir(mode=0o700)
    path.write_bytes(data)
    path.chmod(0o600)


# -- sessions -------------------------------------------------------------------------


@dataclass
class Session:
    label: str
    session_id: str
    address: str
    pid: int


def session_id_for(label: str) -> str:
    """A stable session id for a label the scenario did not give one."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"pipost-feature:{label}"))


class World:
    def __init__(self, scratch: Path, open_driver: Callable[[Path, str], Driver]) -> None:
        self.scratch = scratch
        self.root = scratch / "post"
        self.home = str(scratch / "home")
        self.driver: Driver = open_driver(self.root, self.home)
        self.sessions: dict[str, Session] = {}
        self.first_address: dict[str, str] = {}
        self.cwd = self.directory("{scratch}/home/dev/tester")
        self.result: Result = {}
        self.before: dict[str, str] = {}
        self.remembered: dict[str, str] | None = None
        self.sent_body: str | None = None
        self.taken: list[dict[str, Json]] = []
        self.taken_from: str | None = None
        self.set_aside: list[dict[str, Json]] = []
        self.bad_letter: tuple[str, bytes] | None = None

    def call(self, op: str, **args: Json) -> Result:
        """Drive pipost; a filesystem failure is never what a scenario expects."""
        result = self.driver.call(op, **args)
        assert "failed" not in result, f"{op} failed: {result['failed']}"
        return result

    def now(self) -> int:
        """The driver's clock (ms), which decides every age."""
        return int_of(self.call("advance_clock", ms=0)["now"])

    def last_modified(self, path: Path, ago_ms: int) -> None:
        """Set a file's mtime to ``ago_ms`` before the driver's clock: the age the
        implementation reads from the disk is the scenario's, not the machine's."""
        moment_ns = (self.now() - ago_ms) * 1_000_000
        os.utime(path, ns=(moment_ns, moment_ns), follow_symlinks=False)

    def act(self, op: str, **args: Json) -> Result:
        """The action a scenario is about: fingerprint the tree first, keep the result."""
        self.before = fingerprint(self.root)
        self.result = self.call(op, **args)
        return self.result

    def expand(self, text: str) -> str:
        """``{scratch}``, ``{home}``, ``{alice.address}`` and ``{alice.id}`` in step text."""

        def substitute(match: re.Match[str]) -> str:
            if match.group(1) == "scratch":
                return str(self.scratch)
            if match.group(1) == "home":
                return self.home
            session = self.session(match.group(2))
            return session.address if match.group(3) == "address" else session.session_id

        return _PLACEHOLDER.sub(substitute, text)

    def directory(self, path: str) -> str:
        """``path`` expanded, made (with its parents) when it lies in the scratch
        folder: a directory a scenario registers or resolves exists, for an
        implementation that canonicalises it through the file system."""
        expanded = self.expand(path)
        if Path(expanded).is_relative_to(self.scratch):
            Path(expanded).mkdir(parents=True, exist_ok=True)
        return expanded

    def session(self, label: str) -> Session:
        assert label in self.sessions, f"no session {label!r} in this scenario"
        return self.sessions[label]

    def address(self, label_or_address: str) -> str:
        """The address of a session of the scenario, or the text itself if it is one."""
        if label_or_address in self.sessions:
            return self.sessions[label_or_address].address
        return self.expand(label_or_address)

    def register(
        self,
        label: str,
        cwd: str,
        *,
        session_id: str | None = None,
        named: bool = True,
        presence: str = "live",
        unseen_ms: int = 0,
    ) -> Session:
        """Start a session that registered ``unseen_ms`` ago and is now ``presence``."""
        assert presence != "live" or unseen_ms <= 45_000, "a live session was seen lately"
        sid = session_id or session_id_for(label)
        cwd = self.directory(cwd)
        self.call("advance_clock", ms=-unseen_ms)
        name: dict[str, Json] = {"name": label} if named else {}  # else the default name
        record = dict_of(self.call("register", session_id=sid, cwd=cwd, **name)["record"])
        pid = int_of(record["pid"])
        if presence == "offline":
            self.call("shutdown", session_id=sid)
            self.call("process_stop", pid=pid)
        self.call("advance_clock", ms=unseen_ms)
        session = Session(label, sid, text_of(record["address"]), pid)
        self.sessions[label] = session
        self.first_address.setdefault(label, session.address)
        return session

    def send(self, targets: list[str], body: str, **sender: Json) -> Result:
        self.sent_body = body
        return self.act(
            "send",
            targets=[self.expand(t) for t in targets],
            body=body,
            cwd=self.cwd,
            home=self.home,
            **sender,
        )

    def presence(self, label: str) -> str:
        return text_of(self.call("record", address=self.address(label))["presence"])

    def record(self, label: str) -> dict[str, Json] | None:
        found = self.call("record", address=self.address(label))["record"]
        return None if found is None else dict_of(found)

    def count(self, label: str) -> int:
        return int_of(self.call("count", address=self.address(label))["count"])

    def take(self, label: str) -> dict[str, Json] | None:
        """Receive the next message of a mailbox; keep it and what was set aside."""
        result = self.act("take", address=self.address(label))
        self.taken_from = self.address(label)
        self.set_aside += [dict_of(entry) for entry in list_of(result["set_aside"])]
        if result["message"] is None:
            return None
        message = dict_of(result["message"])
        self.taken.append(message)
        return message

    def inbox(self, label: str) -> Path:
        return self.root / "inbox" / self.address(label)

    def refusal(self) -> dict[str, Json]:
        """The reason of the refusal the action got: ``{"code", "text", …facts}``.
        Steps judge its code and facts; the text is the implementation's own."""
        assert "refused" in self.result, f"expected a refusal, got {self.result}"
        reason = dict_of(self.result["refused"])
        text_of(reason.get("code"))
        text_of(reason.get("text"))
        return reason

    def receipts(self) -> list[dict[str, Json]]:
        assert "receipts" in self.result, f"expected receipts, got {self.result}"
        return [dict_of(receipt) for receipt in list_of(self.result["receipts"])]


def world(context: Context) -> World:
    """The scenario's world, made on first use inside the scratch folder that
    environment.py gave the scenario, over the implementation it chose."""
    if "world" not in context:
        context.world = World(context.scratch, context.implementation.open_driver)
    found = context.world
    assert isinstance(found, World)
    return found


def letter_bytes(message: dict[str, Json]) -> bytes:
    """A letter as pi-post writes it: compact JSON, non-ASCII unescaped."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def valid_letter(letter_id: str, body: str) -> dict[str, Json]:
    """A well-formed v1 letter from a process, written by hand."""
    return {
        "v": 1,
        "id": letter_id,
        "from": {"kind": "process", "name": "hand-written", "cwd": "/home/dev/hand"},
        "sentAt": int(letter_id[:13]),
        "body": body,
    }
