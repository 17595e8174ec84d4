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

from pipost import cli, mailbox, message
from pipost.contract import compatibility, gate, gathering
from tests.helpers import python_path_first

CHECKOUT = Path(__file__).resolve().parents[1]
# The versions the tree is at: a bump of any part leaves these tests standing.
MESSAGE, RECORD, INTEROP = (gathering.versions()[part] for part in ("message", "record", "interop"))


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
    env = {**os.environ, "PYTHONPATH": python_path_first((source or tree) / "src")}
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
    (tree / "src/pipost/contract/pins.json").write_text("{}\n", encoding="utf-8")
    repinned = contract_in(tree, "--pin", "--against", "HEAD")
    assert repinned.returncode == 1, repinned.stdout
    assert repinned.stdout.startswith(
        "pi-post: nothing was pinned: pins published at the base were lost:\n"
    )
    assert f"\n  message v{MESSAGE} revision 1 was removed\n" in repinned.stdout
    assert repinned.stdout.endswith(
        "\nrestore them: git checkout <base> -- src/pipost/contract/pins.json\n"
    )
    assert repinned.stderr == ""
    # With no history at all, --pin cannot tell, and pins anew: --against still catches it.
    shutil.rmtree(tree / ".git")
    assert contract_in(tree, "--pin").returncode == 0
    run_git(tree, "init", "-q", "-b", "main")
    assert contract_in(tree).returncode == 0, "alone, the tree matches its own pins"
    (tree / "stash").mkdir()
    shutil.move(tree / "src", tree / "stash" / "src")
    shutil.copytree(CHECKOUT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__"))
    commit(tree, "the published tree")
    published = run_git(tree, "rev-parse", "HEAD").strip()
    shutil.rmtree(tree / "src")
    shutil.move(tree / "stash" / "src", tree / "src")
    judged = contract_in(tree, "--against", "HEAD", "--format", "json")
    report = json.loads(judged.stdout)
    assert (judged.returncode, report["verdict"]) == (1, "breaking")
    # The base is named in full, and the problem by its twelve digits, at the pins file.
    assert report["against"] == published
    rewritten = [p for p in report["problems"] if p["rule"] == "pins.rewritten"]
    assert {
        "rule": "pins.rewritten",
        "text": f"message v{MESSAGE} revision 1 was re-pinned since {published[:12]}",
        "file": "src/pipost/contract/pins.json",
        "line": 1,
    } in rewritten, rewritten


def test_a_compatible_change_pins_as_a_revision_and_diff_names_it(tmp_path: Path) -> None:
    tree = copy_of_checkout(tmp_path)
    add_host_to_the_record(tree)
    judged = contract_in(tree, "--against", "auto")
    assert judged.returncode == 0, judged.stdout
    assert "record.field-added (compatible): record field:host added" in judged.stdout
    revisions = len(gathering.load_pins()["record"][RECORD])
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
    declared = (tree / "src/pipost/contract/gathering.py").read_text(encoding="utf-8")
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
    package = Path(gate.__file__).parent.parent  # pipost, of which the gate is a part
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
    assert judged.stdout.splitlines()[-1] == (
        "verdict: cannot run: cannot compare with HEAD~1: this clone is shallow, so HEAD~1 is "
        "not in its history (git fetch --unshallow brings it) (exit 2)"
    )


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
    status = cli.run(["contract"], cli.Invocation(stdout=out, stderr=err, cwd=str(CHECKOUT)))
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
        (["diff", "nothing@1", "message@1"], "pi-post: nothing v1 is not pinned\n"),
        (["diff", "message@1.99", "message@1"], "pi-post: message v1 has no revision 99\n"),
        (
            ["diff", "message", "message@1"],
            "pi-post: 'message' is not PART@VERSION or PART@VERSION.REVISION\n",
        ),
        (
            ["diff", "message@1", "record@1"],
            "pi-post: message@1 and record@1 are pins of different parts\n",
        ),
        (["--format=yaml"], "pi-post: --format is one of text, json, github, not 'yaml'\n"),
        (["--tree", "/"], "pi-post: / is not a pipost source checkout\n"),
        (["diff", "message@1"], "pi-post: unexpected 'diff' (see pi-post contract --help)\n"),
        (
            ["bump", "message", "record"],
            "pi-post: unexpected 'bump' (see pi-post contract --help)\n",
        ),
    ],
)
def test_usage_that_cannot_run_exits_2_saying_why(args: list[str], said: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert gate.main(args, out, err, cwd=str(CHECKOUT)) == 2
    assert err.getvalue() == said


def test_bump_with_pin_is_not_a_bump(tmp_path: Path) -> None:
    """Outside a checkout, so that no mutant of this choice can bump the tree."""
    out, err = io.StringIO(), io.StringIO()
    assert gate.main(["bump", "message", "--pin"], out, err, cwd=str(tmp_path)) == 2
    assert err.getvalue() == "pi-post: unexpected 'bump' (see pi-post contract --help)\n"


def test_a_relative_tree_is_found_from_the_working_directory_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-process (cli.run with a working directory), --tree . is that directory,
    not the folder the process happens to run in."""
    monkeypatch.chdir(CHECKOUT)  # a checkout, which --tree . must not find
    out, err = io.StringIO(), io.StringIO()
    assert gate.main(["--tree", "."], out, err, cwd=str(tmp_path)) == 2
    assert err.getvalue() == "pi-post: . is not a pipost source checkout\n"


def test_bump_driver_renumbers_the_protocol_its_open_speaks(tmp_path: Path) -> None:
    tree = copy_of_checkout(tmp_path, git=False)
    now = gathering.versions()["driver"]
    assert contract_in(tree, "bump", "driver").returncode == 0
    schema = json.loads(
        (tree / f"src/pipost/schemas/driver.v{now + 1}.schema.json").read_text(encoding="utf-8")
    )
    opened = schema["$defs"]["ops"]["$defs"]["open"]
    spoken = re.findall(r'"protocol": \{"const": ([0-9]+)\}', json.dumps(opened))
    assert spoken and set(spoken) == {str(now + 1)}
    assert contract_in(tree, "--pin").returncode == 0, "the bumped driver contradicts itself"


# -- history that is not what auto expects ---------------------------------------------


def test_bump_renumbers_the_protocol_consts_of_old_alone_wherever_they_are() -> None:
    schema: compatibility.Json = {
        "protocol": {"const": 1},
        "v": {"const": 1},
        "ops": [{"protocol": {"const": 1}}, {"protocol": {"type": "integer"}}, [{"n": 1}]],
        "later": {"protocol": {"const": 3}},
    }
    gate._renumber_protocol(schema, 1, 2)
    assert schema == {
        "protocol": {"const": 2},
        "v": {"const": 1},
        "ops": [{"protocol": {"const": 2}}, {"protocol": {"type": "integer"}}, [{"n": 1}]],
        "later": {"protocol": {"const": 3}},
    }


def a_repository(into: Path, branch: str = "main") -> Path:
    """A git repository with one commit on ``branch`` (no pipost tree in it)."""
    repository = into / "repository"
    repository.mkdir(parents=True)
    run_git(repository, "init", "-q", "-b", branch)
    (repository / "README").write_text("one\n", encoding="utf-8")
    commit(repository, "one")
    return repository


def test_without_git_auto_notes_it_and_a_named_base_cannot_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with no git on it
    said = "git is not installed, so there is no history to compare with"
    out, err = io.StringIO(), io.StringIO()
    assert gate.main(["--against", "auto", "--format=github"], out, err, cwd=str(CHECKOUT)) == 0
    notice = f"::notice title=contract::history: not compared: {said}"
    assert out.getvalue().splitlines()[0] == notice
    out, err = io.StringIO(), io.StringIO()
    assert gate.main(["--against", "main"], out, err, cwd=str(CHECKOUT)) == 2
    assert out.getvalue().splitlines()[-1] == (
        f"verdict: cannot run: cannot compare with main: {said} (exit 2)"
    )


def test_auto_without_a_main_branch_says_so_and_falls_back_to_origin_main(
    tmp_path: Path,
) -> None:
    alone = a_repository(tmp_path / "alone", branch="topic")
    with pytest.raises(gate.CannotRun, match=r"^there is no main branch to compare with$"):
        gate.base_revision(alone, "auto")
    published = a_repository(tmp_path / "published")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(published), str(clone)], check=True)
    run_git(clone, "checkout", "-q", "-b", "topic")
    run_git(clone, "branch", "-q", "-D", "main")
    (clone / "README").write_text("two\n", encoding="utf-8")
    commit(clone, "on a branch")
    base = run_git(published, "rev-parse", "HEAD").strip()
    assert gate.base_revision(clone, "auto") == (base, "the merge base with origin/main")


def test_a_base_without_pins_or_with_the_old_format_is_not_compared(tmp_path: Path) -> None:
    repository = a_repository(tmp_path)
    bare = run_git(repository, "rev-parse", "HEAD").strip()
    assert gate.pins_at(repository, bare) == (None, f"{bare[:12]} has no contract pins")
    pins = repository / "src" / "pipost" / "contract" / "pins.json"
    pins.parent.mkdir(parents=True)
    pins.write_text('{"1": {"fingerprint": "sha256:0", "content": {}}}\n', encoding="utf-8")
    commit(repository, "pins before parts")
    old = run_git(repository, "rev-parse", "HEAD").strip()
    assert gate.pins_at(repository, old) == (
        None,
        f"{old[:12]} keeps its pins in the format before parts; nothing to compare",
    )


def test_a_base_from_before_the_gate_was_a_package_is_compared(tmp_path: Path) -> None:
    """Until the gate moved into pipost/contract/, its pins lay beside the modules:
    a merge base of that time still has pins to compare with."""
    repository = a_repository(tmp_path)
    pins = repository / "src" / "pipost" / "contract_pins.json"
    pins.parent.mkdir(parents=True)
    pinned: dict[str, compatibility.Json] = {
        "address": {"1": [{"fingerprint": "sha256:0", "content": {"a": 1}}]}
    }
    pins.write_text(json.dumps(pinned), encoding="utf-8")
    commit(repository, "pins beside the modules")
    base = run_git(repository, "rev-parse", "HEAD").strip()
    assert gate.pins_at(repository, base) == (compatibility.from_data(pinned), None)


def test_a_base_without_pins_is_noted_by_the_gate_and_by_pin(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    run_git(tree, "init", "-q", "-b", "main")
    (tree / "README").write_text("before pipost\n", encoding="utf-8")
    commit(tree, "a history older than the tree")
    before = run_git(tree, "rev-parse", "HEAD").strip()
    copy_of_checkout(tmp_path, git=False)
    commit(tree, "the tree")
    judged = contract_in(tree, "--against", "HEAD~1")
    assert judged.returncode == 0, judged.stdout + judged.stderr
    assert judged.stdout.splitlines()[1] == f"history: {before[:12]} has no contract pins"
    pinned = contract_in(tree, "--pin", "--against", "HEAD~1")
    assert (pinned.returncode, pinned.stdout) == (
        0,
        f"history: {before[:12]} has no contract pins\nevery part already matches its pin\n",
    )
    # No pin was published at that base, so a change replaces the revisions rather
    # than adding one after them.
    add_host_to_the_record(tree)
    pinned = contract_in(tree, "--pin", "--against", "HEAD~1")
    assert pinned.returncode == 0, pinned.stdout + pinned.stderr
    assert pinned.stdout.splitlines()[1].startswith(
        f"record v{RECORD}: replaced unpublished revision 1 sha256:"
    ), pinned.stdout


def test_pin_without_history_counts_every_pin_as_published_and_writes_nothing(
    tmp_path: Path,
) -> None:
    tree = copy_of_checkout(tmp_path, git=False)
    pins = (tree / "src/pipost/contract/pins.json").read_bytes()
    pinned = contract_in(tree, "--pin")
    assert pinned.returncode == 0, pinned.stderr
    first, second = pinned.stdout.splitlines()
    assert first.startswith("history: not compared (") and first.endswith(
        "): every pin counts as published"
    )
    assert second == "every part already matches its pin"
    assert (tree / "src/pipost/contract/pins.json").read_bytes() == pins


def test_a_base_that_cannot_be_found_cannot_run_in_every_format_and_pins_nothing() -> None:
    asked = ["--against", "no-such-revision"]
    out, err = io.StringIO(), io.StringIO()
    assert gate.main([*asked, "--format", "json"], out, err, cwd=str(CHECKOUT)) == 2
    report = json.loads(out.getvalue())
    assert (report["verdict"], report["exit"]) == ("cannot-run", 2)
    assert report["cannot_run"].startswith("cannot compare with no-such-revision: ")
    out, err = io.StringIO(), io.StringIO()
    assert gate.main([*asked, "--format", "github"], out, err, cwd=str(CHECKOUT)) == 2
    assert out.getvalue().splitlines() == [
        f"::error title=contract cannot run::{report['cannot_run']}",
        "contract verdict: cannot-run (exit 2)",
    ]
    out, err = io.StringIO(), io.StringIO()
    assert gate.main(["--pin", *asked], out, err, cwd=str(CHECKOUT)) == 2
    assert err.getvalue().startswith(
        "pi-post: nothing was pinned: cannot compare with no-such-revision: "
    )


def test_from_the_installed_package_history_is_not_compared(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert gate.main(["--against", "auto"], out, err, cwd=str(tmp_path)) == 0
    assert out.getvalue().splitlines()[1] == (
        "history: not compared: the installed package has no git history"
    )


# -- problems beyond a part's findings ------------------------------------------------


def test_without_jsonschema_the_schemas_are_noted_unchecked_and_pin_refuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "jsonschema", None)  # import jsonschema fails
    missing = (
        "the schemas cannot be checked against the corpus without jsonschema: "
        "pip install -e '.[dev]'"
    )
    out, err = io.StringIO(), io.StringIO()
    assert gate.main(["--format", "json"], out, err, cwd=str(CHECKOUT)) == 0
    assert json.loads(out.getvalue())["notes"] == [f"not checked: {missing}"]
    out, err = io.StringIO(), io.StringIO()
    assert gate.main(["--pin"], out, err, cwd=str(CHECKOUT)) == 2
    assert err.getvalue() == f"pi-post: nothing was pinned: {missing}\n"


def test_a_parser_that_contradicts_its_schema_shows_the_case_and_the_contradiction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A corpus case is shown once as its input, then what it read as before and now;
    a problem that has no place is annotated without one."""
    from pipost import message

    for version, rules in list(message.RULES.items()):
        monkeypatch.setitem(
            message.RULES, version, rules.replace(fields=rules.fields | {"subject"})
        )
    contradiction = "message: the schema refuses parse:unknown-field, which the parser accepts"
    out, err = io.StringIO(), io.StringIO()
    assert gate.main([], out, err, cwd=str(CHECKOUT)) == 1
    text = out.getvalue()
    heading = "\nparse.changed (breaking): message parse:unknown-field changed\n"
    assert heading in text
    labels = [line[:8] for line in text.split(heading)[1].splitlines()[:4]]
    assert labels == ["  case: ", "  was : ", "  now : ", "  at:   "]
    case = text.split(heading)[1].splitlines()
    assert '"subject"' in case[0] and "sha256:" in case[1] and "accepted" in case[2]
    parse_line = gate._line(CHECKOUT, "src/pipost/message.py", "def parse")[1]
    assert case[3] == f"  at:   src/pipost/message.py:{parse_line}"
    assert text.endswith(
        f"\ncontract.contradiction: {contradiction}\n"
        "\nverdict: the contract breaks its pins (exit 1)\n"
    )
    out, err = io.StringIO(), io.StringIO()
    assert gate.main(["--format", "github"], out, err, cwd=str(CHECKOUT)) == 1
    assert f"::error title=contract.contradiction::{contradiction}" in out.getvalue().splitlines()
    saved: list[compatibility.Pins] = []
    monkeypatch.setattr(gathering, "save_pins", saved.append)
    out, err = io.StringIO(), io.StringIO()
    assert gate.main(["--pin"], out, err, cwd=str(CHECKOUT)) == 1
    assert out.getvalue() == (
        "pi-post: nothing was pinned: the contract contradicts itself:\n"
        f"  {contradiction}\n"
        "make the schema, the code and the corpus agree, then pin again\n"
    )
    assert (err.getvalue(), saved) == ("", [])


def test_a_pin_edited_by_hand_is_a_problem_at_the_pins_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pins = gathering.load_pins()
    *kept, latest = pins["tree"][1]
    forged = compatibility.Revision(latest.fingerprint, {**latest.content, "forged": 1})
    monkeypatch.setattr(gathering, "load_pins", lambda: {**pins, "tree": {1: [*kept, forged]}})
    out, err = io.StringIO(), io.StringIO()
    assert gate.main(["--format", "json"], out, err, cwd=str(CHECKOUT)) == 1
    edited = [p for p in json.loads(out.getvalue())["problems"] if p["rule"] == "pins.edited"]
    assert edited == [
        {
            "rule": "pins.edited",
            "text": f"tree v1 revision {len(kept) + 1}: its content was edited by hand",
            "file": "src/pipost/contract/pins.json",
            "line": 1,
        }
    ]


def test_mail_of_an_earlier_version_and_its_schema_are_problems_of_the_gate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With one version of each part today, an earlier version's findings are made
    up here: the gate must report each under its rule and fail."""
    monkeypatch.setattr(gathering, "old_mail", lambda pins: ["message v0 parse:x: now read as y"])
    monkeypatch.setattr(gathering, "published_schemas", lambda pins: ["message: v0 changed (z)"])
    out, err = io.StringIO(), io.StringIO()
    assert gate.main([], out, err, cwd=str(CHECKOUT)) == 1
    assert out.getvalue().endswith(
        "\nold-mail.unreadable: message v0 parse:x: now read as y\n"
        "\nschema.published-changed: message: v0 changed (z)\n"
        "\nverdict: the contract breaks its pins (exit 1)\n"
    )


def test_a_rewritten_corpus_entry_stops_the_gate_at_the_corpus_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    corpus = gathering.load_corpus()
    rewritten: compatibility.Json = {"argv": ["list", "--all"]}
    changed = {**corpus, "cli": {"output": {**corpus["cli"]["output"], "list": rewritten}}}
    monkeypatch.setattr(gathering, "load_corpus", lambda: changed)
    out, err = io.StringIO(), io.StringIO()
    assert gate.main(["--format", "json"], out, err, cwd=str(CHECKOUT)) == 1
    report = json.loads(out.getvalue())
    assert (report["parts"], report["findings"]) == ([], [])
    (problem,) = report["problems"]
    assert (problem["rule"], problem["file"], problem["line"]) == (
        "corpus.entry-rewritten",
        "src/pipost/contract/corpus.json",
        1,
    )
    assert problem["text"].startswith("corpus entry cli/output/list differs from the input")


def test_a_vector_rewritten_under_its_pinned_name_breaks_the_pin_and_shows_its_digest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pin keeps a case of the vectors as a digest of its input and result: a case
    whose input changed under the same name is another case, pinned as nothing."""
    corpus = gathering.load_corpus()
    changed = {**corpus, "address": {"derive": {**corpus["address"]["derive"], "abc": "abd"}}}
    monkeypatch.setattr(gathering, "load_corpus", lambda: changed)
    out, err = io.StringIO(), io.StringIO()
    assert gate.main([], out, err, cwd=str(CHECKOUT)) == 1
    (pinned,) = [
        value
        for facet, value in gathering.load_pins()["address"][1][-1].content.items()
        if facet == "derive:abc"
    ]
    assert isinstance(pinned, str) and pinned.startswith("sha256:")
    assert (
        "\naddress.derivation-changed (breaking): address derive:abc changed\n"
        '  case: "abd"\n'
        f'  was : pinned as its digest, "{pinned}"\n'
    ) in out.getvalue()


def test_bump_outside_a_checkout_cannot_run(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert gate.main(["bump", "message"], out, err, cwd=str(tmp_path)) == 2
    assert err.getvalue() == (
        "pi-post: bump edits a source checkout: run it in one (or give --tree)\n"
    )


def a_tree_with(tmp_path: Path, version_line: str, schemas: list[str]) -> Path:
    """A tree holding only message.py (with ``version_line``) and empty schema files."""
    package = tmp_path / "src" / "pipost"
    (package / "schemas").mkdir(parents=True)
    (package / "message.py").write_text(f'"""A letter."""\n{version_line}\n', encoding="utf-8")
    for name in schemas:
        (package / "schemas" / name).write_text("{}\n", encoding="utf-8")
    return tmp_path


def test_bump_refuses_a_version_line_it_cannot_find_and_changes_nothing(tmp_path: Path) -> None:
    tree = a_tree_with(tmp_path, "VERSION: int = 1", [])
    with pytest.raises(
        gate.CannotRun,
        match=re.escape(r"src/pipost/message.py has no version line matching ^VERSION = (\d+)$"),
    ):
        gate.bump("message", tree, io.StringIO())
    assert (
        (tree / "src/pipost/message.py").read_text(encoding="utf-8").endswith("VERSION: int = 1\n")
    )


def test_bump_refuses_to_overwrite_the_next_schema_and_changes_nothing(tmp_path: Path) -> None:
    now, then = MESSAGE, MESSAGE + 1
    tree = a_tree_with(
        tmp_path,
        f"VERSION = {now}",
        [f"message.v{now}.schema.json", f"message.v{then}.schema.json"],
    )
    with pytest.raises(
        gate.CannotRun,
        match=re.escape(
            f"src/pipost/schemas/message.v{then}.schema.json exists already; nothing was changed"
        ),
    ):
        gate.bump("message", tree, io.StringIO())
    assert (
        (tree / "src/pipost/message.py").read_text(encoding="utf-8").endswith(f"VERSION = {now}\n")
    )
    assert (tree / f"src/pipost/schemas/message.v{then}.schema.json").read_text() == "{}\n"


@pytest.mark.parametrize(
    ("readable", "then"),
    [("()", f"({MESSAGE + 1},)"), (f"({MESSAGE},)", f"({MESSAGE}, {MESSAGE + 1})")],
    ids=["none read yet", "one read"],
)
def test_bump_adds_the_next_version_to_those_read_and_writes_its_schema(
    tmp_path: Path, readable: str, then: str
) -> None:
    now, new = MESSAGE, MESSAGE + 1
    tree = a_tree_with(tmp_path, f"VERSION = {now}\nREADABLE_VERSIONS = {readable}", [])
    schema = {
        "$id": f"urn:pi-post:schema:message:v{now}",
        "description": "a letter — déjà vu",
        "properties": {"v": {"const": now}},
    }
    (tree / f"src/pipost/schemas/message.v{now}.schema.json").write_text(
        json.dumps(schema), encoding="utf-8"
    )
    out = io.StringIO()
    assert gate.bump("message", tree, out) == 0
    assert (tree / "src/pipost/message.py").read_text(encoding="utf-8") == (
        f'"""A letter."""\nVERSION = {new}\nREADABLE_VERSIONS = {then}\n'
    )
    # Laid out for a reviewer to read in the bump's diff: two spaces, the text as it is
    # (not \u escapes).
    then_schema = {
        "$id": f"urn:pi-post:schema:message:v{new}",
        "description": "a letter — déjà vu",
        "properties": {"v": {"const": new}},
    }
    written = tree / f"src/pipost/schemas/message.v{new}.schema.json"
    assert written.read_text(encoding="utf-8") == (
        json.dumps(then_schema, indent=2, ensure_ascii=False) + "\n"
    )
    assert out.getvalue().splitlines()[:3] == [
        f"message: v{now} -> v{new} in src/pipost/message.py",
        f"message: reads v{now} and v{new} (READABLE_VERSIONS)",
        f"message: wrote src/pipost/schemas/message.v{new}.schema.json, v{now}'s schema with "
        f"its $id and v for v{new}",
    ]


def test_bump_record_writes_its_next_schema_with_v_for_the_next_version(tmp_path: Path) -> None:
    now, new = RECORD, RECORD + 1
    (tmp_path / "src/pipost/schemas").mkdir(parents=True)
    (tmp_path / "src/pipost/session.py").write_text(f"VERSION = {now}\n", encoding="utf-8")
    schema = {"$id": f"urn:pi-post:schema:record:v{now}", "properties": {"v": {"const": now}}}
    (tmp_path / f"src/pipost/schemas/record.v{now}.schema.json").write_text(
        json.dumps(schema), encoding="utf-8"
    )
    assert gate.bump("record", tmp_path, io.StringIO()) == 0
    written = tmp_path / f"src/pipost/schemas/record.v{new}.schema.json"
    assert json.loads(written.read_text(encoding="utf-8")) == {
        "$id": f"urn:pi-post:schema:record:v{new}",
        "properties": {"v": {"const": new}},
    }


def test_bump_of_a_part_without_a_schema_changes_its_version_line_alone(tmp_path: Path) -> None:
    (tmp_path / "src" / "pipost" / "contract").mkdir(parents=True)
    declared = tmp_path / "src/pipost/contract/gathering.py"
    declared.write_text(f'DECLARED = {{"interop": {INTEROP}}}\n', encoding="utf-8")
    out = io.StringIO()
    assert gate.bump("interop", tmp_path, out) == 0
    assert declared.read_text(encoding="utf-8") == f'DECLARED = {{"interop": {INTEROP + 1}}}\n'
    assert out.getvalue() == (
        f"interop: v{INTEROP} -> v{INTEROP + 1} in src/pipost/contract/gathering.py\n"
        f"left to you: carry the change into v{INTEROP + 1} (its schema and the code; keep "
        f"reading v{INTEROP}), then pi-post contract --pin\n"
    )
    assert sorted(path.name for path in tmp_path.rglob("*") if path.is_file()) == ["gathering.py"]


def test_bump_refuses_to_start_a_version_after_one_not_pinned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    later = MESSAGE + 5
    tree = a_tree_with(tmp_path, f"VERSION = {later}", [])
    refused = (
        f"message v{later} is not pinned yet: carry the change into it and pin it "
        f"(pi-post contract --pin) rather than starting v{later + 1}"
    )
    with pytest.raises(gate.CannotRun, match=re.escape(refused)):
        gate.bump("message", tree, io.StringIO())
    # A part with no pins at all is refused alike.
    pins = {part: versions for part, versions in gathering.load_pins().items() if part != "message"}
    monkeypatch.setattr(gathering, "load_pins", lambda: pins)
    with pytest.raises(gate.CannotRun, match=re.escape(refused)):
        gate.bump("message", tree, io.StringIO())
    assert (
        (tree / "src/pipost/message.py")
        .read_text(encoding="utf-8")
        .endswith(f"VERSION = {later}\n")
    )


def test_diff_as_json_lists_the_changes_between_two_pins(monkeypatch: pytest.MonkeyPatch) -> None:
    pins = gathering.load_pins()
    *_, latest = pins["record"][RECORD]
    grown = compatibility.Revision.of({**latest.content, "field:host": {"type": "string"}})
    revisions = {RECORD: [*pins["record"][RECORD], grown]}
    monkeypatch.setattr(gathering, "load_pins", lambda: {**pins, "record": revisions})
    before, after = f"record@{RECORD}.{len(revisions[RECORD]) - 1}", f"record@{RECORD}"
    out, err = io.StringIO(), io.StringIO()
    assert gate.main(["diff", before, after, "--format", "json"], out, err, cwd=str(CHECKOUT)) == 0
    assert json.loads(out.getvalue()) == {
        "from": before,
        "to": after,
        "changes": [
            {
                "rule": "record.field-added",
                "facet": "field:host",
                "change": "added",
                "breaking": False,
                "before": None,
                "after": {"type": "string"},
            }
        ],
    }


def test_diff_as_text_grades_each_change(monkeypatch: pytest.MonkeyPatch) -> None:
    pins = gathering.load_pins()
    *_, latest = pins["record"][RECORD]
    content: compatibility.Content = {**latest.content, "field:host": {"type": "string"}}
    del content["field:cwd"]
    revisions = {RECORD: [*pins["record"][RECORD], compatibility.Revision.of(content)]}
    monkeypatch.setattr(gathering, "load_pins", lambda: {**pins, "record": revisions})
    before, after = f"record@{RECORD}.{len(revisions[RECORD]) - 1}", f"record@{RECORD}"
    out, err = io.StringIO(), io.StringIO()
    assert gate.main(["diff", before, after], out, err, cwd=str(CHECKOUT)) == 0
    assert sorted(out.getvalue().splitlines()) == [
        "- record.field-added (compatible) field:host added",
        "- record.field-removed (breaking) field:cwd removed",
        f"{before} -> {after}: 2 changes",
    ]


def test_the_rerun_puts_the_tree_first_and_keeps_the_callers_python_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the child the gate reruns in is given: the tree's src/ before the
    PYTHONPATH it was called with (under nox -s mutation, the mutated code's)."""
    ran: list[dict[str, str]] = []

    def run(args: list[str], **given: object) -> subprocess.CompletedProcess[str]:
        env = given["env"]
        assert isinstance(env, dict)
        ran.append(env)
        return subprocess.CompletedProcess(args, 3, "said\n", "warned\n")

    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    monkeypatch.delenv(gate._TREE_VARIABLE, raising=False)
    out, err = io.StringIO(), io.StringIO()
    assert gate._rerun_in(tmp_path, ["--pin"], out, err, tmp_path) == 3
    assert (out.getvalue(), err.getvalue()) == ("said\n", "warned\n")
    (env,) = ran
    assert env["PYTHONPATH"] == os.pathsep.join([str(tmp_path / "src"), "/elsewhere"])
    assert env[gate._TREE_VARIABLE] == str(tmp_path)


def test_a_checkout_whose_pipost_does_not_load_cannot_run(tmp_path: Path) -> None:
    """The rerun on the tree's own code finds no pipost there and says so, rather than
    rerunning itself again."""
    tree = tmp_path / "tree"
    (tree / "src" / "pipost" / "contract").mkdir(parents=True)
    shutil.copy(CHECKOUT / "pyproject.toml", tree)
    shutil.copy(CHECKOUT / "src/pipost/contract/pins.json", tree / "src/pipost/contract")
    ran = contract_in(tree, source=CHECKOUT)
    assert (ran.returncode, ran.stdout) == (2, "")
    assert ran.stderr == f"pi-post: could not load pipost from {tree / 'src'}\n"


CORPUS = "src/pipost/contract/corpus.json"
VECTORS = "src/pipost_conformance/vectors"
MESSAGE_SCHEMA = f"src/pipost/schemas/message.v{message.VERSION}.schema.json"
CLI_SCHEMA = f"src/pipost/schemas/cli.v{gathering.versions()['documents']}.schema.json"
PI_POST_07_CASE = "process-letter-of-pi-post-0.7"
LETTER_VECTOR = f"{VECTORS}/letter/{PI_POST_07_CASE}.input.json"
WRITTEN_VECTOR = f"{VECTORS}/letter-written/process-letter.input.json"


def line_number(path: str, needle: str) -> int:
    lines = (CHECKOUT / path).read_text(encoding="utf-8").splitlines()
    return next(n for n, line in enumerate(lines, 1) if needle in line)


@pytest.mark.parametrize(
    ("part", "facet", "change", "file", "needle"),
    [
        ("address", "derive:abc", "added", f"{VECTORS}/address/abc.input.json", "{"),
        ("message", "parse:unknown-field", "changed", "src/pipost/message.py", "def parse"),
        ("tree", "name:record", "changed", "src/pipost/contract/gathering.py", '"tree": '),
        ("message", f"parse:{PI_POST_07_CASE}", "added", LETTER_VECTOR, "{"),
        ("message", "encode:process-letter", "added", WRITTEN_VECTOR, "{"),
        ("cli", "output:unknown-command", "added", CORPUS, '"unknown-command"'),
        ("message", "field:body", "changed", MESSAGE_SCHEMA, '"body"'),
        ("message", "required", "changed", MESSAGE_SCHEMA, '"required"'),
        ("message", "closed", "changed", MESSAGE_SCHEMA, '"additionalProperties"'),
        ("message", "schema", "changed", MESSAGE_SCHEMA, '"$id"'),
        ("driver", "op:open", "changed", "src/pipost/schemas/driver.v1.schema.json", '"open"'),
        ("documents", "def:peek", "changed", CLI_SCHEMA, '"peek"'),
    ],
    ids=[
        "a new vector of the address rule",
        "a case of the parser",
        "a facet with no place of its own",
        "a new vector of the parser",
        "a new vector of the encoder",
        "a new case of the command line's output",
        "a field of a schema",
        "what a schema requires",
        "a schema closed to other fields",
        "a schema's id",
        "an op of the driver's schema",
        "a document of the command line's schema",
    ],
)
def test_a_finding_points_at_the_line_to_change(
    part: str, facet: str, change: str, file: str, needle: str
) -> None:
    finding = compatibility.FacetChange(part, "some.rule", facet, change, None, None, True)
    assert gate.where(CHECKOUT, finding) == (file, line_number(file, needle))


def test_a_finding_whose_name_holds_a_colon_points_at_the_whole_name(tmp_path: Path) -> None:
    # Only the first colon ends the kind: a corpus case may be named "a:b".
    (tmp_path / CORPUS).parent.mkdir(parents=True)
    (tmp_path / CORPUS).write_text('{\n  "b": 1,\n  "a:b": 2\n}\n', encoding="utf-8")
    finding = compatibility.FacetChange("cli", "some.rule", "output:a:b", "added", None, 2, False)
    assert gate.where(tmp_path, finding) == (CORPUS, 3)


def test_a_finding_in_a_file_the_tree_lacks_points_at_its_first_line(tmp_path: Path) -> None:
    finding = compatibility.FacetChange("tree", "some.rule", "name:record", "changed", 1, 2, True)
    assert gate.where(tmp_path, finding) == ("src/pipost/contract/gathering.py", 1)


def test_a_value_is_shown_as_json_with_sorted_keys_cut_at_240_characters() -> None:
    assert gate._short({"b": "é", "a": 1}) == '{"a": 1, "b": "é"}'
    assert gate._short("x" * 238) == '"' + "x" * 238 + '"'  # 240 characters: whole
    assert gate._short("x" * 239) == '"' + "x" * 238 + "…"  # 241: 239 of them and …


def test_a_change_shows_what_was_and_what_is_now() -> None:
    def finding(before: compatibility.Json, after: compatibility.Json) -> compatibility.FacetChange:
        return compatibility.FacetChange(
            "interop", "limit.changed", "limit:x", "c", before, after, True
        )

    assert gate._shown(finding(50, 51)) == [("was ", "50"), ("now ", "51")]
    assert gate._shown(finding(None, {"type": "string"})) == [("now ", '{"type": "string"}')]
    assert gate._shown(finding(False, None)) == [("was ", "false")]


def test_a_new_corpus_case_shows_its_input_and_what_it_gives_now(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pipost.address import address_of

    corpus = gathering.load_corpus()
    grown = {**corpus, "address": {"derive": {**corpus["address"]["derive"], "new": "n"}}}
    monkeypatch.setattr(gathering, "load_corpus", lambda: grown)
    out, err = io.StringIO(), io.StringIO()
    assert gate.main([], out, err, cwd=str(CHECKOUT)) == 0
    assert (
        "\ncorpus.entry-added (compatible): address derive:new added\n"
        '  case: "n"\n'
        f"  now : {address_of('n')}\n"
        f"  at:   {VECTORS}/address/new.input.json:1\n"
    ) in out.getvalue()
    assert out.getvalue().endswith("\nverdict: compatible changes only (exit 0)\n")


def test_the_json_report_names_the_tree_its_base_each_part_and_a_problem_with_no_place() -> None:
    """The keys docs/contract.md gives the document, on a report built by hand."""
    report = gate.Report("/some/tree", checkout=True)
    report.against = "0123456789abcdef0123456789abcdef01234567"
    report.verdicts = [
        compatibility.PartVerdict("record", RECORD, 2, compatibility.UNCHANGED, "sha256:feed", ())
    ]
    report.problems = [gate.Problem("contract.contradiction", "the schema refuses case x")]
    assert gate.report_data(report, CHECKOUT) == {
        "report": "pipost-contract",
        "v": 1,
        "tree": "/some/tree",
        "checkout": True,
        "against": "0123456789abcdef0123456789abcdef01234567",
        "verdict": "breaking",
        "exit": 1,
        "cannot_run": None,
        "parts": [
            {
                "part": "record",
                "version": RECORD,
                "revision": 2,
                "state": "unchanged",
                "fingerprint": "sha256:feed",
            }
        ],
        "findings": [],
        "problems": [
            {
                "rule": "contract.contradiction",
                "text": "the schema refuses case x",
                "file": None,
                "line": None,
            }
        ],
        "notes": [],
    }
    assert gate.report_data(gate.Report("/some/tree", checkout=False), CHECKOUT)["against"] is None


def test_github_annotations_warn_of_a_compatible_finding_and_place_a_problem_that_has_one() -> None:
    added = compatibility.FacetChange(
        "record", "record.field-added", "field:host", "added", None, {"type": "string"}, False
    )
    report = gate.Report("/some/tree", checkout=True)
    state = compatibility.COMPATIBLE
    report.verdicts = [
        compatibility.PartVerdict("record", RECORD, 2, state, "sha256:feed", (added,))
    ]
    report.problems = [
        gate.Problem("pins.edited", "edited by hand", ("src/pipost/contract/pins.json", 7)),
        gate.Problem("contract.contradiction", "the schema refuses case x"),
    ]
    out = io.StringIO()
    gate.print_github(report, CHECKOUT, out)
    path, line = gate.where(CHECKOUT, added)
    assert out.getvalue() == (
        f"::warning file={path},line={line},title=record.field-added::record field:host added "
        f"(record.field-added). pi-post contract --pin   # pins record v{RECORD} revision 3\n"
        "::error file=src/pipost/contract/pins.json,line=7,title=pins.edited::edited by hand\n"
        "::error title=contract.contradiction::the schema refuses case x\n"
        "contract verdict: breaking (exit 1)\n"
    )


def test_annotation_text_escapes_percent_and_line_breaks_as_github_documents() -> None:
    # % first, so that a %0A already in the text is not read back as a line break.
    assert gate._escape("100%\r\nnow %0A") == "100%25%0D%0Anow %250A"


def test_the_text_report_gives_a_line_per_part_in_each_state_then_what_resolves_it() -> None:
    """pipost's own text, on a report built by hand: every state a part can be in,
    a revision shown only when there is one, the fingerprint cut to 19 characters."""
    added = compatibility.FacetChange(
        "record", "record.field-added", "field:host", "added", None, {"type": "string"}, False
    )
    fingerprint = "sha256:0123456789abcdef0123456789"
    report = gate.Report("/some/tree", checkout=False)
    c = compatibility
    report.verdicts = [
        c.PartVerdict("address", 1, 2, c.UNCHANGED, fingerprint, ()),
        c.PartVerdict("record", RECORD, None, c.COMPATIBLE, fingerprint, (added,)),
        c.PartVerdict("message", MESSAGE, 3, c.BREAKING, fingerprint, ()),
        c.PartVerdict("driver", 2, None, c.UNPINNED, fingerprint, ()),
        c.PartVerdict("interop", 1, None, c.STRAY, fingerprint, ()),
    ]
    out = io.StringIO()
    gate.print_text(report, CHECKOUT, out)
    path, line = gate.where(CHECKOUT, added)
    assert out.getvalue() == (
        "contract gate: /some/tree (installed package, read-only)\n"
        "address    v1 r2  unchanged  sha256:0123456789ab…\n"
        f"record     v{RECORD}     compatible (1 changes, not pinned yet)  sha256:0123456789ab…\n"
        f"message    v{MESSAGE} r3  BREAKING under the same version (0 changes)  "
        "sha256:0123456789ab…\n"
        "driver     v2     not pinned (0 changes from the version before)  sha256:0123456789ab…\n"
        "interop    v1     below the latest pinned version and never pinned  sha256:0123456789ab…\n"
        "\n"
        "record.field-added (compatible): record field:host added\n"
        '  now : {"type": "string"}\n'
        f"  at:   {path}:{line}\n"
        "\n"
        "record: to resolve\n"
        f"  pi-post contract --pin   # pins record v{RECORD} revision 1\n"
        "\n"
        "message: to resolve\n"
        f"  pi-post contract bump message   # v{MESSAGE} -> v{MESSAGE + 1}\n"
        f"  # carry the change into message v{MESSAGE + 1}, keep reading v{MESSAGE}; then:\n"
        "  pi-post contract --pin\n"
        "  # or undo the change\n"
        "\n"
        "driver: to resolve\n"
        "  pi-post contract --pin   # pins driver v2\n"
        "\n"
        "verdict: the contract breaks its pins (exit 1)\n"
    )


def test_a_base_that_git_would_read_as_an_option_is_refused_not_taken_as_a_revision(
    tmp_path: Path,
) -> None:
    run_git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "a").write_text("a\n", encoding="utf-8")
    commit(tmp_path, "one")
    head = run_git(tmp_path, "rev-parse", "HEAD").strip()
    assert gate.base_revision(tmp_path, "HEAD") == (head, "HEAD")
    with pytest.raises(gate.CannotRun):
        gate.base_revision(tmp_path, "--all")


def test_git_failing_is_the_last_line_it_said_or_git_failed_when_it_said_nothing(
    tmp_path: Path,
) -> None:
    """As with no common ancestor: merge-base exits 1 and says nothing. auto then goes
    on to origin/main."""
    repository = a_repository(tmp_path)
    run_git(repository, "checkout", "-q", "--orphan", "unrelated")
    commit(repository, "no common ancestor with main")
    with pytest.raises(gate.CannotRun, match=r"^git failed$"):
        gate._git(repository, "merge-base", "HEAD", "main")
    with pytest.raises(gate.CannotRun, match=r"^there is no main branch to compare with$"):
        gate.base_revision(repository, "auto")
    with pytest.raises(gate.CannotRun, match=r"^fatal: cannot change to .*nowhere"):
        gate._git(tmp_path / "nowhere", "rev-parse", "HEAD")


def test_a_checkout_is_a_folder_with_both_a_pyproject_and_the_contract_pins(
    tmp_path: Path,
) -> None:
    project = tmp_path / "another-project"
    (project / "src").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\n", encoding="utf-8")
    pins_only = tmp_path / "pins-only"
    (pins_only / gate._PINS_IN_TREE).parent.mkdir(parents=True)
    (pins_only / gate._PINS_IN_TREE).write_text("{}\n", encoding="utf-8")
    assert gate.find_checkout(project / "src") is None
    assert gate.find_checkout(pins_only) is None
    (project / gate._PINS_IN_TREE).parent.mkdir(parents=True)
    (project / gate._PINS_IN_TREE).write_text("{}\n", encoding="utf-8")
    assert gate.find_checkout(project / "src") == project
