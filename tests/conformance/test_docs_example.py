"""The Node shim loop of docs/conformance.md works as written: run with node over
a world stub, it answers every line in order, an error for a line that is not a
JSON object, and carries on."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"
WORLD_STUB = """
function openWorld(args) {
  return {
    call(op, args) {
      if (op === "capabilities") return { ops: ["address_of"] };
      if (op === "address_of") return { address: "s-" + args.session_id };
      throw new Error(`unknown operation ${op}`);
    },
  };
}
"""
NODE_TIMEOUT_S = 30


def node_example() -> str:
    blocks: list[str] = re.findall(r"```js\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.DOTALL)
    (code,) = blocks
    return code


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_node_example_answers_each_line_and_survives_one_that_is_not_json(
    tmp_path: Path,
) -> None:
    shim = tmp_path / "shim.mjs"
    shim.write_text(node_example() + WORLD_STUB, encoding="utf-8")
    lines = [
        json.dumps({"id": 1, "op": "capabilities"}),
        json.dumps({"id": 2, "op": "open", "args": {"root": "/r", "home": "/h", "protocol": 1}}),
        "{not json",
        "[1, 2]",
        json.dumps({"id": 3, "op": "address_of", "args": {"session_id": "abc"}}),
        json.dumps({"id": 4, "op": "fly"}),
        json.dumps({"id": 5, "op": "open", "args": {"root": "/r", "home": "/h", "protocol": 2}}),
    ]
    done = subprocess.run(
        ["node", str(shim)],
        input="".join(line + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=NODE_TIMEOUT_S,
        check=True,
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert answers == [
        {"id": 1, "error": "capabilities before open"},
        {
            "id": 2,
            "result": {
                "root": "/r",
                "protocol": 1,
                "implementation": {"name": "my-port", "version": "0.1.0", "language": "JavaScript"},
            },
        },
        {"id": None, "error": "not a JSON line"},
        {"id": None, "error": "a request is a JSON object"},
        {"id": 3, "result": {"address": "s-abc"}},
        {"id": 4, "error": "unknown operation fly"},
        {"id": 5, "error": "open: this shim speaks protocol 1, not 2"},
    ]
