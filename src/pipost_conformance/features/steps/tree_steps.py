"""The tree under the root, fingerprinted: path, mode and bytes of every entry."""

from __future__ import annotations

import os
import re

from behave import given, then
from behave.runner import Context

from pipost_conformance.features.steps.feature_world import (
    QUOTED,
    checks,
    fingerprint,
    tree_changes,
    use_regular_expressions,
    world,
)

use_regular_expressions()

ADDRESS = re.compile(r"s-[0-9a-f]{12}")


@given("I remember the tree")
def remember_tree(context: Context) -> None:
    the = world(context)
    the.remembered = fingerprint(the.root)
    assert the.remembered, "there is no tree to remember"


@then("the tree is byte-identical to what I remembered")
@checks("INV-16")
def tree_identical(context: Context) -> None:
    the = world(context)
    assert the.remembered is not None, "the scenario remembered no tree"
    changes = tree_changes(the.remembered, fingerprint(the.root))
    assert not changes, "the tree changed:\n" + "\n".join(changes)


@then("every mailbox folder is named by a session address")
@checks("INV-02")
def mailboxes_are_addresses(context: Context) -> None:
    names = os.listdir(world(context).root / "inbox")
    assert names, "there is no mailbox at all"
    assert all(ADDRESS.fullmatch(name) for name in names), names


@then("no mailbox was made but for the sessions of the scenario")
@checks("INV-02")
def mailboxes_only_of_sessions(context: Context) -> None:
    the = world(context)
    inbox = the.root / "inbox"
    names = os.listdir(inbox) if inbox.is_dir() else []
    addresses = {session.address for session in the.sessions.values()}
    assert set(names) <= addresses, f"mailboxes of no session: {sorted(set(names) - addresses)}"


@given(f"a directory {QUOTED}")
def directory(context: Context, path: str) -> None:
    world(context).directory(path)


@given(f"a directory {QUOTED} and a symlink {QUOTED} to {QUOTED}")
def symlinked_directory(context: Context, directory: str, link: str, target: str) -> None:
    the = world(context)
    the.directory(directory)
    os.symlink(the.expand(target), the.expand(link))
