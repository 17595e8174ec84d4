"""The API for Python: ``pipost.__all__``, each name its module's own, imported
only when first used."""

from __future__ import annotations

from pathlib import Path

import pytest

import pipost
from pipost import address, message, post, refusals, resolve, session
from tests.helpers import python_in

HOMES = {
    "Caller": resolve,
    "Candidate": session,
    "Message": message,
    "Post": post,
    "Presence": session,
    "Receipt": post,
    "Record": session,
    "Refusal": refusals,
    "Refused": post,
    "Rejected": message,
    "Sender": message,
    "address_of": address,
    "default_root": post,
    "os_caller": post,
}


def test_every_public_name_is_the_one_its_module_defines() -> None:
    assert sorted(pipost.__all__) == sorted(HOMES)
    for name, module in HOMES.items():
        assert getattr(pipost, name) is getattr(module, name), name


def test_a_star_import_gives_the_public_names_and_dir_lists_them() -> None:
    namespace: dict[str, object] = {}
    exec("from pipost import *", namespace)  # as a user may write it
    assert set(namespace) - {"__builtins__"} == set(pipost.__all__)
    assert set(pipost.__all__) <= set(dir(pipost))


def test_a_name_outside_the_api_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'pipost' has no attribute 'Host'"):
        pipost.Host  # noqa: B018 - the lookup is the test


def test_importing_pipost_alone_loads_none_of_its_modules(tmp_path: Path) -> None:
    printed = python_in(tmp_path, "import sys, pipost\nprint(' '.join(sys.modules))\n")
    loaded = {name for name in printed.split() if name.startswith("pipost")}
    assert loaded == {"pipost"}
    used = python_in(tmp_path, "import sys, pipost\npipost.Post\nprint(' '.join(sys.modules))\n")
    assert "pipost.post" in used.split()
