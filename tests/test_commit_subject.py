"""The commit-msg hook (tools/commit_subject.py, .pre-commit-config.yaml): a subject over
72 characters is refused, one of 72 with a body of any length goes, and the subject is
the line git keeps, not a comment or a blank line before it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# tools/ holds scripts, not a package (as tests/test_mutants_table.py imports mutants).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import commit_subject

CHECKOUT = Path(__file__).resolve().parents[1]

SUBJECT_72 = "host: keep the letter when the transcript write is short, and say so now"
assert len(SUBJECT_72) == 72
BODY = "A body line may be longer than the subject: " + "figures " * 10


@pytest.mark.parametrize(
    "message",
    [
        SUBJECT_72,
        f"{SUBJECT_72}\n\n{BODY}\n",
        f"# Please enter the commit message\n\n{SUBJECT_72}   \n\n{BODY}\n# {'x' * 80}\n",
        "é" * 72,  # characters, not bytes
    ],
)
def test_a_subject_of_72_characters_goes(message: str) -> None:
    assert commit_subject.refusal(message) is None


@pytest.mark.parametrize(
    "message",
    [
        SUBJECT_72 + "s",
        f"{SUBJECT_72}s\n\n{BODY}\n",
        f"# a comment git strips\n\n{SUBJECT_72}s\n",
        "é" * 73,
    ],
)
def test_a_subject_of_73_characters_is_refused_with_its_length(message: str) -> None:
    why = commit_subject.refusal(message)
    assert why is not None and "73 characters; at most 72" in why


def _hook_entry() -> list[str]:
    """The commit-msg hook's command, as .pre-commit-config.yaml gives it."""
    config = (CHECKOUT / ".pre-commit-config.yaml").read_text(encoding="utf-8")
    hook = re.search(r"- id: commit-subject\n((?: {8}\w+: .*\n)+)", config)
    assert hook, "no commit-subject hook in .pre-commit-config.yaml"
    fields = dict(re.findall(r"(\w+): (.*)", hook[1]))
    assert fields["stages"] == "[commit-msg]"
    assert fields["language"] == "python"
    program, *args = fields["entry"].split()
    assert program == "python"
    return [sys.executable, *(str(CHECKOUT / arg) if "/" in arg else arg for arg in args)]


def test_git_runs_the_configured_hook_and_refuses_a_long_subject(tmp_path: Path) -> None:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    command = " ".join(f"'{part}'" for part in _hook_entry())
    (hooks / "commit-msg").write_text(f'#!/bin/sh\nexec {command} "$1"\n', encoding="utf-8")
    (hooks / "commit-msg").chmod(0o755)
    repository = tmp_path / "repository"
    identity = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org"}
    env = {**os.environ, **identity, "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"}

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", "-C", str(repository), "-c", f"core.hooksPath={hooks}", *args],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )

    subprocess.run(["git", "init", "-q", str(repository)], check=True)
    refused = git("commit", "--allow-empty", "-m", SUBJECT_72 + "s", "-m", BODY)
    assert refused.returncode != 0
    assert "73 characters; at most 72" in refused.stderr
    assert git("rev-parse", "--verify", "-q", "HEAD").returncode != 0  # nothing committed
    assert git("commit", "--allow-empty", "-m", SUBJECT_72, "-m", BODY).returncode == 0
    assert git("log", "-1", "--format=%s").stdout == SUBJECT_72 + "\n"
