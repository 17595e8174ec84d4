"""The wire contract as JSON Schema (draft 2020-12), shipped with the package.

``message.v1`` is SPEC 1.2 (one message per inbox file), ``record.v1`` is
SPEC 1.3 (one registry record per session). Porters validate against them;
the parsers in :mod:`pipost.message` and :mod:`pipost.session` are stricter
where JSON Schema cannot say a rule (each schema's description lists those).
``cli.v1`` is not wire: it describes the documents ``--json`` prints
(docs/json.md), and refers to the two others.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any


def load(name: str) -> dict[str, Any]:
    """The schema ``<name>.schema.json`` of this package, e.g. ``load("message.v1")``."""
    text = resources.files(__name__).joinpath(f"{name}.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema
