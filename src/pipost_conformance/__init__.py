"""pi-post's conformance kit (SPEC 11; docs/conformance.md): the specification as
it runs against an implementation, shipped with pipost so that a porter needs no
checkout of it.

- ``features/``: the Gherkin features, their steps and behave's environment;
- ``machines/``: the state machines that judge an implementation through the
  driver, and what they share with pipost's own tests;
- ``client``: the kit's end of the driver protocol, which both drive an
  implementation through (pipost's end is ``pipost.driver``);
- ``runner``: ``pi-post conformance``, which runs both and writes the reports;
- ``tracing`` and ``syscalls``: one driver call of an implementation run under
  strace, and its trace read and judged (how a port writes: INV-03, INV-04).

Unlike ``pipost``, it needs more than the standard library: behave, pytest,
hypothesis and jsonschema, the ``conformance`` extra
(``pip install "pipost[conformance]"``). ``pi-post`` imports it only for
``pi-post conformance``.
"""

import json
from pathlib import Path
from typing import Any

INTEROP = Path(__file__).resolve().parent / "fixtures" / "interop"
"""What the reference pi-post 0.7 wrote and printed, recorded (its README.md says
how): golden data for the features, the machines and pipost's own tests."""

SCHEMAS = Path(__file__).resolve().parent.parent / "pipost" / "schemas"
"""pipost's JSON Schemas, read as files by steps that must not import pipost
(they drive it through the kit's client). pipost ships beside the kit, in the
same wheel (or src/)."""

VECTORS = Path(__file__).resolve().parent / "vectors"
"""The contract's cases as input/expected pairs, listed by one manifest per version
(``v1.manifest.json``; docs/conformance.md, "Vectors"): read by the features, the
contract gate and pipost's tests here, and by a port's own tests in any language."""


def vectors(kind: str, version: int = 1) -> dict[str, tuple[Any, Any]]:
    """Name → (input, expected) of every case of ``kind`` that the manifest of
    ``version`` lists."""
    manifest = json.loads((VECTORS / f"v{version}.manifest.json").read_text(encoding="utf-8"))
    return {
        case["name"]: (_vector_file(case, "input"), _vector_file(case, "expected"))
        for case in manifest["cases"]
        if case["kind"] == kind
    }


def _vector_file(case: dict[str, str], role: str) -> Any:
    path = VECTORS / case["kind"] / f"{case['name']}.{role}.json"
    return json.loads(path.read_text(encoding="utf-8"))


def vector_bytes(given: Any) -> tuple[bytes, str | None]:
    """The bytes of a letter or record vector's file and its name, as the manifest's
    header says: ``{"hex": …}``; ``{"text": …}`` repeated ``times``; or ``{"json": …}``
    written compactly, with ``fill`` [field, text, times] setting that field to text
    repeated."""
    file_name = given.get("file_name")
    if "hex" in given:
        return bytes.fromhex(given["hex"]), file_name
    if "text" in given:
        return (given["text"] * given.get("times", 1)).encode("utf-8"), file_name
    value = given["json"]
    if "fill" in given:
        field, text, times = given["fill"]
        value = {**value, field: text * times}
    encoded = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return encoded.encode("utf-8"), file_name
