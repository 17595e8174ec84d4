"""The worked bump (issue 14, item 6): in a copy of the source tree, the message is
bumped to its next version (v2, from v1 today) with one changed rule — the new
version halves the body cap — with the contract tool, and pinned, with the parts
that lean on it (interop holds the cap; the driver carries the letters, so --pin
refuses until the driver is bumped as well). Processes run on
the copy then show that the gate passes, that the letters queued before the bump
(one pipost wrote, one pi-post 0.7 wrote) are still peeked and delivered after it,
each judged by the rules of its own version, and that new letters are written as
the new version."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from pipost import message
from pipost.driver_protocol import PROTOCOL
from pipost_conformance import INTEROP
from tests.helpers import make_record, python_path_first, write_record

REPO = Path(__file__).resolve().parents[1]
INTEROP_LETTER = INTEROP / "messages" / "s-6bb4b1bc7f53--1796078534364-bb43be6c.json"
"""A letter pi-post 0.7 wrote: the v1 wire."""
INTEROP_BODY = "main moved; rebase before you push"

CURRENT = message.VERSION
NEXT = CURRENT + 1
READ = message.READABLE_VERSIONS
NEXT_CAP = message.BODY_CAP // 2
BETWEEN_THE_CAPS = "x" * (NEXT_CAP + 1)
"""A body the current version allows and the next refuses."""


class Copy:
    """A copy of the source tree and a pi-post root, and processes run on them."""

    def __init__(self, tmp_path: Path) -> None:
        self.tree = tmp_path / "tree"
        shutil.copytree(
            REPO / "src", self.tree / "src", ignore=shutil.ignore_patterns("__pycache__")
        )
        shutil.copy2(REPO / "pyproject.toml", self.tree / "pyproject.toml")
        self.root = tmp_path / "post"

    def run(
        self, *args: str, check: bool = True, stdin: str = ""
    ) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "PYTHONPATH": python_path_first(self.tree / "src"),
            "PI_POST_DIR": str(self.root),
        }
        env.pop("PI_SESSION_ID", None)
        ran = subprocess.run(
            [sys.executable, *args],
            cwd=self.tree,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if check:
            assert ran.returncode == 0, f"{args}: exit {ran.returncode}\n{ran.stdout}{ran.stderr}"
        return ran

    def edit(self, path: str, old: str, new: str) -> None:
        """One change by hand, of text that occurs exactly once."""
        file = self.tree / "src" / "pipost" / path
        text = file.read_text(encoding="utf-8")
        assert text.count(old) == 1, f"{path}: {old!r} occurs {text.count(old)} times"
        file.write_text(text.replace(old, new), encoding="utf-8")

    def send(self, to: str, body: str) -> subprocess.CompletedProcess[str]:
        return self.run("-m", "pipost", "send", "--to", to, "--body", body, check=False)

    def take_all(self, address: str) -> list[dict[str, object]]:
        """Every letter ``address`` receives, through the driver of the copy."""
        requests = [
            {
                "id": 0,
                "op": "open",
                "args": {"root": str(self.root), "home": "/", "protocol": PROTOCOL + 1},
            },
            *({"id": n, "op": "take", "args": {"address": address}} for n in range(1, 5)),
        ]
        lines = "".join(json.dumps(request) + "\n" for request in requests)
        answers = [
            json.loads(line)
            for line in self.run("-m", "pipost", "driver", stdin=lines).stdout.splitlines()
        ]
        return [a["result"]["message"] for a in answers[1:] if a["result"]["message"]]


def bump_with_a_narrower_cap(copy: Copy) -> None:
    """The bump with the tool, then the change it is for, then the pin."""
    copy.run("-m", "pipost", "contract", "bump", "message")
    rules = message.rules_of(CURRENT)
    row = (
        f"    {NEXT}: Rules(frozenset({sorted(rules.fields)!r}), "
        f"frozenset({sorted(rules.sender_fields)!r}), {NEXT_CAP}),\n"
    )
    copy.edit("message.py", "RULES = {\n", "RULES = {\n" + row)
    copy.edit(
        f"schemas/message.v{NEXT}.schema.json",
        f'"maxLength": {message.BODY_CAP}',
        f'"maxLength": {NEXT_CAP}',
    )
    # The cap is also a fact two implementations sharing a folder agree on, and the
    # driver protocol carries letters of the version written.
    copy.run("-m", "pipost", "contract", "bump", "interop")
    refused = copy.run("-m", "pipost", "contract", "--pin", check=False)
    assert refused.returncode == 1
    read_now = ", ".join(f"v{v}" for v in (*READ, NEXT))
    assert f", but pipost reads message {read_now}: bump the driver" in refused.stdout
    copy.run("-m", "pipost", "contract", "bump", "driver")
    schema = copy.tree / f"src/pipost/schemas/driver.v{PROTOCOL + 1}.schema.json"
    document = json.loads(schema.read_text(encoding="utf-8"))
    document["$defs"]["message"] = {
        "anyOf": [{"$ref": f"urn:pi-post:schema:message:v{v}"} for v in (*READ, NEXT)]
    }
    schema.write_text(json.dumps(document, indent=2), encoding="utf-8")
    copy.run("-m", "pipost", "contract", "--pin")


def test_a_bump_passes_the_gate_keeps_the_old_mail_flowing_and_writes_the_new_version(
    tmp_path: Path,
) -> None:
    copy = Copy(tmp_path)
    target = write_record(copy.root, make_record("the-target", str(tmp_path)))
    inbox = copy.root / "inbox" / target.address
    sent_before = copy.send(target.address, BETWEEN_THE_CAPS)
    assert sent_before.returncode == 0, sent_before.stderr
    shutil.copy2(INTEROP_LETTER, inbox / INTEROP_LETTER.name.partition("--")[2])
    queued_before = {path.name for path in inbox.iterdir()}
    versions = sorted(json.loads((inbox / name).read_bytes())["v"] for name in queued_before)
    assert versions == sorted([1, CURRENT])

    bump_with_a_narrower_cap(copy)

    gate = copy.run("-m", "pipost", "contract", check=False)
    assert gate.returncode == 0, gate.stdout + gate.stderr
    peeked = copy.run("-m", "pipost", "peek", target.address).stdout
    assert INTEROP_BODY in peeked
    assert BETWEEN_THE_CAPS in peeked  # over the new cap, but judged by its own version's
    refused = copy.send(target.address, BETWEEN_THE_CAPS)
    assert refused.returncode == 1, refused.stdout
    assert f"the cap is {NEXT_CAP}" in refused.stderr
    sent_after = copy.send(target.address, "after the bump")
    assert sent_after.returncode == 0, sent_after.stderr
    (new_name,) = {path.name for path in inbox.iterdir()} - queued_before
    assert json.loads((inbox / new_name).read_bytes())["v"] == NEXT

    taken = copy.take_all(target.address)
    assert sorted((letter["v"], letter["body"]) for letter in taken) == sorted(
        [(1, INTEROP_BODY), (CURRENT, BETWEEN_THE_CAPS), (NEXT, "after the bump")]
    )
    assert not any(inbox.iterdir())
    assert not (copy.root / "quarantine").exists()
