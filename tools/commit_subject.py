"""commit-msg hook: refuse a commit whose subject is over 72 characters (CONTRIBUTING.md).

Git hands the hook the message file before it strips comments and blank lines, so the
subject is the first line that is neither. pre-commit runs it
(.pre-commit-config.yaml; ``pre-commit install --hook-type commit-msg``).

Usage: python tools/commit_subject.py MESSAGE_FILE
"""

from __future__ import annotations

import sys
from pathlib import Path

LONGEST = 72


def subject_of(message: str) -> str:
    """The first line git keeps: neither blank nor a comment."""
    for line in message.splitlines():
        if line.strip() and not line.startswith("#"):
            return line.rstrip()
    return ""


def refusal(message: str) -> str | None:
    """Why the message is refused, or None."""
    subject = subject_of(message)
    if len(subject) <= LONGEST:
        return None
    return (
        f"the commit subject is {len(subject)} characters; at most {LONGEST}, so that "
        "git log --oneline stays readable: say what the commit does in the subject, "
        f"and the why and the figures in the body\n  {subject}"
    )


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tools/commit_subject.py MESSAGE_FILE", file=sys.stderr)
        return 2
    try:
        message = Path(argv[0]).read_text(encoding="utf-8", errors="replace")
    except OSError as error:
        print(f"commit_subject: cannot read {argv[0]}: {error.strerror}", file=sys.stderr)
        return 2
    why = refusal(message)
    if why is not None:
        print(f"commit_subject: {why}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
