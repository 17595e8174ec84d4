"""The worked bump (issue 14, item 6): in a copy of the source tree, the message is
bumped to v2 with one changed rule — v2 narrows the body cap to 16384 bytes — with
the contract tool, and pinned. Processes run on the copy then show that the gate
passes, that the letters queued before the bump (one pipost wrote, one pi-post 0.7
wrote) are still peeked and delivered after it, each judged by the rules of its
own version, and that new letters are written as v2."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers import make_record, write_record

REPO = Path(__file__).resolve().parents[1]
INTEROP_LETTER = (
    REPO / "tests" / "fixtures" / "interop" / "messages"
) / "s-6bb4b1bc7f53--1796078534364-bb43be6c.json"
"""A letter pi-post 0.7 wrote: the v1 wire."""

V2_CAP = 16384
BETWEEN_THE_CAPS = "x" * (V2_CAP + 1)
"""A body v1 allows and v2 refuses."""


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
        env = {**os.environ, "PYTHONPATH": str(self.tree / "src"), "PI_POST_DIR": str(self.root)}
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
            {"id": 0, "op": "open", "args": {"root": str(self.root), "home": "/", "protocol": 1}},
            *({"id": n, "op": "take", "args": {"address": address}} for n in range(1, 5)),
        ]
        ran = self.run(
            "-m", "pipost", "driver", stdin="".join(f"{json.dumps(r)}\n" for r in requests)
        )
        answers = [json.loads(line) for line in ran.stdout.splitlines()]
        return [a["result"]["message"] for a in answers[1:] if a["result"]["message"]]


def bump_to_v2(copy: Copy) -> None:
    """The bump with the tool, then the change it is for, then the pin."""
    copy.run("-m", "pipost", "contract", "bump", "message")
    copy.edit(
        "message.py",
        "        body_cap=32768,\n    ),\n}\n",
        "        body_cap=32768,\n    ),\n"
        "    2: Rules(\n"
        '        fields=frozenset(("v", "id", "from", "replyTo", "sentAt", "body")),\n'
        '        sender_fields=frozenset(("kind", "name", "address", "cwd")),\n'
        f"        body_cap={V2_CAP},\n"
        "    ),\n}\n",
    )
    copy.edit("schemas/message.v2.schema.json", '"maxLength": 32768', f'"maxLength": {V2_CAP}')
    # The cap is also a fact two implementations sharing a folder agree on.
    copy.run("-m", "pipost", "contract", "bump", "interop")
    copy.run("-m", "pipost", "contract", "--pin")


def test_a_bump_to_v2_passes_the_gate_keeps_v1_mail_flowing_and_writes_v2(tmp_path: Path) -> None:
    copy = Copy(tmp_path)
    target = write_record(copy.root, make_record("the-target", str(tmp_path)))
    inbox = copy.root / "inbox" / target.address
    sent_before = copy.send(target.address, BETWEEN_THE_CAPS)
    assert sent_before.returncode == 0, sent_before.stderr
    shutil.copy2(INTEROP_LETTER, inbox / INTEROP_LETTER.name.partition("--")[2])
    queued_before = {path.name: path.read_bytes() for path in inbox.iterdir()}
    assert sorted(json.loads(raw)["v"] for raw in queued_before.values()) == [1, 1]

    bump_to_v2(copy)

    gate = copy.run("-m", "pipost", "contract", check=False)
    assert gate.returncode == 0, gate.stdout + gate.stderr
    peeked = copy.run("-m", "pipost", "peek", target.address)
    assert "main moved; rebase before you push" in peeked.stdout
    assert BETWEEN_THE_CAPS in peeked.stdout  # over v2's cap, and a v1 letter: v1's cap
    refused = copy.send(target.address, BETWEEN_THE_CAPS)
    assert refused.returncode == 1, refused.stdout
    assert f"the cap is {V2_CAP}" in refused.stderr
    sent_after = copy.send(target.address, "after the bump")
    assert sent_after.returncode == 0, sent_after.stderr
    (new_name,) = {path.name for path in inbox.iterdir()} - set(queued_before)
    assert json.loads((inbox / new_name).read_bytes())["v"] == 2

    taken = copy.take_all(target.address)
    assert sorted((letter["v"], letter["body"]) for letter in taken) == [
        (1, "main moved; rebase before you push"),
        (1, BETWEEN_THE_CAPS),
        (2, "after the bump"),
    ]
    assert not inbox.exists() or not any(inbox.iterdir())
    assert not (copy.root / "quarantine").exists()
