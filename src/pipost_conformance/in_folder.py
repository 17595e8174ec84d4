"""Run a command from a given folder: ``python in_folder.py FOLDER COMMAND...``.

The conformance kit starts an implementation's COMMAND through this, so that it
runs from the folder the kit was started in (where its relative paths were
written) while behave and pytest run from the kit's own folder."""

from __future__ import annotations

import os
import shlex
import sys


def main(argv: list[str]) -> int:
    folder, command = argv[0], argv[1:]
    try:
        os.chdir(folder)
        os.execvp(command[0], command)
    except OSError as error:
        print(f"cannot run {shlex.join(command)} from {folder}: {error}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
