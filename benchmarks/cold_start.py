"""Cold start of ``pi-post send`` to an existing mailbox against the bare
interpreter of the same venv (``python -I -S -c pass``), sampled in alternation.

    python benchmarks/cold_start.py [--rounds N]

Two more processes are sampled in the same rotation, as context for where the
time goes: the interpreter with its site set-up (what any console script
pays), and ``import pipost.cli`` alone. ``python -X importtime`` of the send
names the imports that dominate. The package is compiled to bytecode first, as
an installed one is.
"""

from __future__ import annotations

import argparse
import compileall
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from measure import Figure, Report, median, ms, run_timed

import pipost
from pipost.address import address_of

TARGET = address_of("bench-cold-start-target")


def venv_bin(name: str) -> str:
    """A program of the venv this interpreter belongs to."""
    return str(Path(sys.executable).parent / name)


def process_env(root: Path) -> dict[str, str]:
    return {"PI_POST_DIR": str(root), "HOME": str(root.parent), "PATH": os.environ["PATH"]}


def empty_mailbox(folder: Path) -> None:
    """Keep the mailbox below its cap of 50 between samples (untimed)."""
    for letter in folder.iterdir():
        letter.unlink()


def import_costs(argv: list[str], env: dict[str, str], runs: int) -> list[dict[str, object]]:
    """The imports with the largest self time (median of ``runs`` importtime runs)."""
    self_us: dict[str, list[int]] = {}
    cumulative_us: dict[str, list[int]] = {}
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", *argv],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        for line in done.stderr.splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            own, total, name = line.removeprefix("import time:").split("|")
            self_us.setdefault(name.strip(), []).append(int(own))
            cumulative_us.setdefault(name.strip(), []).append(int(total))
    ranked = sorted(self_us, key=lambda name: -median([float(v) for v in self_us[name]]))
    return [
        {
            "module": name,
            "self_ms": round(median([float(v) for v in self_us[name]]) / 1000, 2),
            "cumulative_ms": round(median([float(v) for v in cumulative_us[name]]) / 1000, 2),
        }
        for name in ranked[:15]
    ]


def measure(rounds: int) -> Report:
    # As an installed package would be: compiled, even where PYTHONDONTWRITEBYTECODE
    # kept imports from writing bytecode (each run would compile the sources again).
    compileall.compile_dir(Path(pipost.__file__).parent, quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "post"
        folder = root / "inbox" / TARGET
        folder.mkdir(parents=True, mode=0o700)
        root.chmod(0o700)
        (root / "inbox").chmod(0o700)
        env = process_env(root)
        send = [venv_bin("pi-post"), "send", "--to", TARGET, "--body", "cold start"]
        variants = {
            "bare": [sys.executable, "-I", "-S", "-c", "pass"],
            "site": [sys.executable, "-c", "pass"],
            "import": [sys.executable, "-c", "import pipost.cli"],
            "send": send,
        }
        samples: dict[str, list[float]] = {name: [] for name in variants}
        for round_index in range(rounds):
            order = list(variants)
            if round_index % 2:
                order.reverse()
            for name in order:
                samples[name].append(run_timed(variants[name], env, timeout=120))
                empty_mailbox(folder)
        imports = import_costs(send, env, runs=3)
        empty_mailbox(folder)
    bare = median(samples["bare"])
    send_s = median(samples["send"])
    figures = [
        Figure(
            key="cold_start_send",
            title="`pi-post send` cold start (to an existing mailbox)",
            seconds=send_s,
            floor_seconds=bare,
            floor="`python -I -S -c pass`, same venv",
            goal="≤ 2× floor",
            met=send_s <= 2 * bare,
            samples=rounds,
        ),
        Figure(
            key="cold_start_site",
            title="`python -c pass` (with site, as any console script)",
            seconds=median(samples["site"]),
            floor_seconds=bare,
            floor="`python -I -S -c pass`",
            goal="context",
            met=None,
            samples=rounds,
        ),
        Figure(
            key="cold_start_import",
            title="`python -c 'import pipost.cli'`",
            seconds=median(samples["import"]),
            floor_seconds=bare,
            floor="`python -I -S -c pass`",
            goal="context",
            met=None,
            samples=rounds,
        ),
    ]
    return Report(
        figures=figures,
        distributions_ms={
            "cold start: bare python": ms(samples["bare"]),
            "cold start: pi-post send": ms(samples["send"]),
        },
        extra={"cold_start_imports": imports},
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=20)
    print(measure(parser.parse_args().rounds).dumps())


if __name__ == "__main__":
    main()
