"""`pi-post contract` as a contributor and CI run it: on the tree it is run from,
against git history, in each output format, with its exit statuses (0 unchanged
or compatible, 1 breaking, 2 cannot run), and --pin, bump and diff."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipost import cli, contract, gate, mailbox

CHECKOUT = Path(__file__).resolve().parents[1]
# The versions the tree is at: a bump of any part leaves these tests standing.
MESSAGE, RECORD, INTEROP = (contract.versions()[part] for part in ("message", "record", "interop"))


def copy_of_checkout(into: Path, *, git: bool = True) -> Path:
    """The source tree (src/ and pyproject.toml), as a git repository on main with one
    commit when ``git``."""
    tree = into / "tree"
    shutil.copytree(
        CHECKOUT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    shutil.copy(CHECKOUT / "pyproject.toml", tree)
    if git:
        run_git(tree, "init", "-q", "-b", "main")
        commit(tree, "the tree as it is")
    return tree


def run_git(tree: Path, *args: str) -> str:
    identity = ["-c", "user.name=pipost", "-c", "user.email=pipost@localhost"]
    done = subprocess.run(
        ["git", *identity, "-C", str(tree), *args], capture_output=True, text=True, check=True
    )
    return done.stdout


def commit(tree: Path, said: str) -> None:
    run_git(tree, "add", "-A")
    run_git(tree, "commit", "-q", "-m", said)


def contract_in(
    tree: Path, *args: str, source: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m pipost contract`` run in ``tree`` on the pipost of ``source``
    (default: the tree's own)."""
    env = {**os.environ, "PYTHONPATH": str((source or tree) / "src")}
    env.pop(gate._TREE_VARIABLE, None)
    return subprocess.run(
        [sys.executable, "-m", "pipost", "contract", *args],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} is not in {path}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def add_host_to_the_record(tree: Path) -> None:
    edit(
        tree / f"src/pipost/schemas/record.v{RECORD}.schema.json",
        '    "pidStart": {',
        '    "host": {\n      "type": "string"\n    },\n    "pidStart": {',
    )


def test_re_pinning_a_published_version_inside_one_change_fails_against_history(
    tmp_path: Path,
) -> None:
    """The issue's first case: change the message schema, empty the pins, pin again.
    Alone, the tree agrees with its new pins; against the commit before, the pin of
    message's version was rewritten."""
    tree = copy_of_checkout(tmp_path)
    edit(
        tree / f"src/pipost/schemas/message.v{MESSAGE}.schema.json",
        '    "sentAt": {',
        '    "priority": {\n      "type": "integer"\n    },\n    "sentAt": {',
    )
    (tree / "src/pipost/contract_pins.json").write_text("{}\n", encoding="utf-8")
    repinned = contract_in(tree, "--pin", "--against", "HEAD")
    assert repinned.returncode == 1, repinned.stdout
    assert "pins published at the base were lost:\n" in repinned.stdout
    assert f"\n  message v{MESSAGE} revision 1 was removed\n" in repinned.stdout
    # With no history at all, --pin cannot tell, and pins anew: --against still catches it.
    shutil.rmtree(tree / ".git")
    assert contract_in(tree, "--pin").returncode == 0
    run_git(tree, "init", "-q", "-b", "main")
    assert contract_in(tree).returncode == 0, "alone, the tree matches its own pins"
    (tree / "stash").mkdir()
    shutil.move(tree / "src", tree / "stash" / "src")
    shutil.copytree(CHECKOUT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__"))
    commit(tree, "the published tree")
    shutil.rmtree(tree / "src")
    shutil.move(tree / "stash" / "src", tree / "src")
    judged = contract_in(tree, "--against", "HEAD", "--format", "json")
    report = json.loads(judged.stdout)
    assert (judged.returncode, report["verdict"]) == (1, "breaking")
    rewritten = [p["text"] for p in report["problems"] if p["rule"] == "pins.rewritten"]
    assert any(
        text.startswith(f"message v{MESSAGE} revision 1 was re-pinned since ") for text in rewritten
    ), rewritten


def test_a_compatible_change_pins_as_a_revision_and_diff_names_it(tmp_path: Path) -> None:
    tree = copy_of_checkout(tmp_path)
    add_host_to_the_record(tree)
    judged = contract_in(tree, "--against", "auto")
    assert judged.returncode == 0, judged.stdout
    assert "record.field-added (compatible): record field:host added" in judged.stdout
    revisions = len(contract.load_pins()["record"][RECORD])
    assert f"pi-post contract --pin   # pins record v{RECORD} revision {revisions + 1}" in (
        judged.stdout
    )
    pinned = contract_in(tree, "--pin")
    assert pinned.returncode == 0, pinned.stdout + pinned.stderr
    assert f"record v{RECORD}: pinned revision {revisions + 1} sha256:" in pinned.stdout
    assert contract_in(tree, "--against", "HEAD").returncode == 0
    before, after = f"record@{RECORD}.{revisions}", f"record@{RECORD}.{revisions + 1}"
    changelog = contract_in(tree, "diff", before, after)
    assert changelog.stdout == (
        f"{before} -> {after}: 1 changes\n- record.field-added (compatible) field:host added\n"
    )


def test_a_breaking_change_is_refused_by_pin_until_bumped(tmp_path: Path) -> None:
    tree = copy_of_checkout(tmp_path)
    edit(tree / "src/pipost/mailbox.py", "CAP = 50", "CAP = 49")
    judged = contract_in(tree, "--format", "github")
    line = gate._line(tree, "src/pipost/mailbox.py", "CAP = ")[1]
    assert judged.returncode == 1
    assert judged.stdout.splitlines()[0] == (
        f"::error file=src/pipost/mailbox.py,line={line},title=limit.changed::interop "
        "limit:mailbox_cap changed (limit.changed). pi-post contract bump interop   "
        f"# v{INTEROP} -> v{INTEROP + 1}; pi-post contract --pin"
    )
    refused = contract_in(tree, "--pin", "--against", "HEAD")
    assert refused.returncode == 1
    assert f"interop v{INTEROP} was published; this change breaks it (limit.changed)" in (
        refused.stdout
    )
    bumped = contract_in(tree, "bump", "interop")
    assert bumped.returncode == 0, bumped.stderr
    declared = (tree / "src/pipost/contract.py").read_text(encoding="utf-8")
    assert f'"interop": {INTEROP + 1}' in declared
    unpinned = contract_in(tree)
    assert unpinned.returncode == 1
    assert unpinned.stdout.endswith("\nverdict: a version is not pinned yet (exit 1)\n")
    assert contract_in(tree, "--pin", "--against", "HEAD").returncode == 0
    assert contract_in(tree, "--against", "HEAD").returncode == 0


def test_bump_message_starts_the_next_version_from_the_current_one(tmp_path: Path) -> None:
    tree = copy_of_checkout(tmp_path, git=False)
    bumped = contract_in(tree, "bump", "message")
    assert bumped.returncode == 0, bumped.stderr
    now, then = MESSAGE, MESSAGE + 1
    assert bumped.stdout.splitlines()[0] == f"message: v{now} -> v{then} in src/pipost/message.py"
    assert f"\nVERSION = {then}\n" in (tree / "src/pipost/message.py").read_text(encoding="utf-8")
    schemas = tree / "src/pipost/schemas"
    old = json.loads((schemas / f"message.v{now}.schema.json").read_text(encoding="utf-8"))
    new = json.loads((schemas / f"message.v{then}.schema.json").read_text(encoding="utf-8"))
    assert new["$id"] == f"urn:pi-post:schema:message:v{then}"
    assert new["properties"]["v"]["const"] == then
    assert {k: v for k, v in new.items() if k not in ("$id", "properties")} == {
        k: v for k, v in old.items() if k not in ("$id", "properties")
    }
    again = contract_in(tree, "bump", "message")
    assert again.returncode == 2
    assert f"message.v{then + 1}.schema.json" not in os.listdir(schemas)


def test_the_gate_judges_the_tree_it_is_run_from_not_the_pipost_that_runs_it(
    tmp_path: Path,
) -> None:
    """After a non-editable install the package is another copy: the gate reruns on
    the tree's own code and says which tree it judged."""
    tree = copy_of_checkout(tmp_path, git=False)
    edit(tree / "src/pipost/mailbox.py", "CAP = 50", "CAP = 51")
    judged = contract_in(tree, source=CHECKOUT)
    assert judged.returncode == 1
    assert judged.stdout.splitlines()[0] == f"contract gate: {tree} (source checkout)"
    assert "limit.changed (breaking): interop limit:mailbox_cap changed" in judged.stdout


def test_outside_a_checkout_the_gate_judges_the_package_and_will_not_write(
    tmp_path: Path,
) -> None:
    out, err = io.StringIO(), io.StringIO()
    status = gate.main([], out, err, cwd=str(tmp_path))
    package = Path(gate.__file__).parent
    assert (status, out.getvalue().splitlines()[0]) == (
        0,
        f"contract gate: {package} (installed package, read-only)",
    )
    out, err = io.StringIO(), io.StringIO()
    assert gate.main(["--pin"], out, err, cwd=str(tmp_path)) == 2
    assert err.getvalue() == (
        "pi-post: --pin writes into a source checkout: run it in one (or give --tree)\n"
    )


def test_history_that_is_not_there_is_said_and_asked_for_history_it_cannot_run(
    tmp_path: Path,
) -> None:
    tree = copy_of_checkout(tmp_path, git=False)
    loose = contract_in(tree, "--against", "auto")
    assert loose.returncode == 0
    assert loose.stdout.splitlines()[1].startswith("history: not compared: ")
    strict = contract_in(tree, "--against", "main")
    assert strict.returncode == 2
    assert strict.stdout.splitlines()[-1].startswith("verdict: cannot run: cannot compare with")


def test_a_shallow_clone_says_it_is_shallow(tmp_path: Path) -> None:
    tree = copy_of_checkout(tmp_path)
    (tree / "README").write_text("two\n", encoding="utf-8")
    commit(tree, "a second commit")
    shallow = tmp_path / "shallow"
    subprocess.run(
        ["git", "clone", "-q", "--depth", "1", f"file://{tree}", str(shallow)], check=True
    )
    judged = contract_in(shallow, "--against", "HEAD~1")
    assert judged.returncode == 2
    assert "this clone is shallow" in judged.stdout


def test_on_main_auto_compares_with_the_commit_before(tmp_path: Path) -> None:
    tree = copy_of_checkout(tmp_path)
    (tree / "README").write_text("two\n", encoding="utf-8")
    commit(tree, "a second commit")
    before = run_git(tree, "rev-parse", "HEAD~1").strip()
    judged = contract_in(tree, "--against", "auto")
    assert judged.returncode == 0
    assert judged.stdout.splitlines()[1] == (
        f"history: compared with {before[:12]} (the commit before main's head)"
    )
    run_git(tree, "checkout", "-q", "-b", "topic")
    (tree / "README").write_text("three\n", encoding="utf-8")
    commit(tree, "on a branch")
    head_of_main = run_git(tree, "rev-parse", "main").strip()
    judged = contract_in(tree, "--against", "auto")
    assert judged.stdout.splitlines()[1] == (
        f"history: compared with {head_of_main[:12]} (the merge base with main)"
    )


def test_the_json_report_carries_each_finding_with_its_rule_place_and_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(mailbox, "CAP", 51)
    out, err = io.StringIO(), io.StringIO()
    assert gate.main(["--format", "json"], out, err, cwd=str(CHECKOUT)) == 1
    report = json.loads(out.getvalue())
    assert (report["report"], report["v"], report["verdict"], report["exit"]) == (
        "pipost-contract",
        1,
        "breaking",
        1,
    )
    (finding,) = report["findings"]
    assert finding == {
        "part": "interop",
        "rule": "limit.changed",
        "facet": "limit:mailbox_cap",
        "change": "changed",
        "breaking": True,
        "before": 50,
        "after": 51,
        "file": "src/pipost/mailbox.py",
        "line": gate._line(CHECKOUT, "src/pipost/mailbox.py", "CAP = ")[1],
        "fix": [
            f"pi-post contract bump interop   # v{INTEROP} -> v{INTEROP + 1}",
            f"# carry the change into interop v{INTEROP + 1}, keep reading v{INTEROP}; then:",
            "pi-post contract --pin",
            "# or undo the change",
        ],
    }


def test_pi_post_contract_in_process_and_as_a_process_print_the_same() -> None:
    out, err = io.StringIO(), io.StringIO()
    status = cli.run(["contract"], cli.Context(stdout=out, stderr=err, cwd=str(CHECKOUT)))
    module = contract_in(CHECKOUT)
    assert (status, out.getvalue(), err.getvalue()) == (
        module.returncode,
        module.stdout,
        module.stderr,
    )
    assert status == 0 and out.getvalue().endswith("\nverdict: unchanged (exit 0)\n")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--format", "yaml"], "pi-post: --format is one of text, json, github, not 'yaml'\n"),
        (["--against"], "pi-post: --against needs a value\n"),
        (["nonsense"], "pi-post: unexpected 'nonsense' (see pi-post contract --help)\n"),
        (
            ["--frobnicate=1"],
            "pi-post: unknown option --frobnicate for contract (see pi-post contract --help)\n",
        ),
        (
            ["bump", "nothing"],
            "pi-post: no part 'nothing'; the parts are message, record, "
            "address, tree, interop, cli, documents, driver\n",
        ),
        (["diff", "message@9", "message@1"], "pi-post: message v9 is not pinned\n"),
    ],
)
def test_usage_that_cannot_run_exits_2_saying_why(args: list[str], said: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert gate.main(args, out, err, cwd=str(CHECKOUT)) == 2
    assert err.getvalue() == said


def test_bump_driver_renumbers_the_protocol_its_open_speaks(tmp_path: Path) -> None:
    tree = copy_of_checkout(tmp_path, git=False)
    now = contract.versions()["driver"]
    assert contract_in(tree, "bump", "driver").returncode == 0
    schema = json.loads(
        (tree / f"src/pipost/schemas/driver.v{now + 1}.schema.json").read_text(encoding="utf-8")
    )
    opened = schema["$defs"]["ops"]["$defs"]["open"]
    spoken = re.findall(r'"protocol": \{"const": ([0-9]+)\}', json.dumps(opened))
    assert spoken and set(spoken) == {str(now + 1)}
    assert contract_in(tree, "--pin").returncode == 0, "the bumped driver contradicts itself"
