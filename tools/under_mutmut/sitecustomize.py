"""Loaded by every Python process nox -s mutation starts (tools/mutation.py puts this
folder on PYTHONPATH, after mutants/src, so the pi-post commands and listeners the
tests start import the mutated code and inherit MUTANT_UNDER_TEST).

While mutmut records which tests reach which function ("stats"), a child's
trampolines record into the child, which mutmut never reads; so each function the
child reaches is written, the moment it is first reached (a child may be killed), to
a file in PIPOST_MUTATION_RECORDS that names the test that started it
(PIPOST_MUTATION_TEST, which mutmut_children.py sets for each test and the child
inherits; not pytest's own variable, which a pytest run inside the child, the
conformance runner's, overrides).
mutmut_children.py, a pytest plugin in mutmut's own process, adds those to its books.
Nothing is done outside a stats run: under a mutant the trampolines need nothing."""

import os

# Where to write is named by tools/mutation.py (PIPOST_MUTATION_RECORDS), not found
# from this file: mutmut copies tools/ into mutants/, and pytest puts the copy of this
# folder first on sys.path as it collects test_features.py; a test that hands its
# child its own sys.path as PYTHONPATH then starts it with the copy, which, until
# 2026-12-06, wrote under mutants/mutants/, a folder there is not (nothing recorded).
RECORDS = os.environ.get("PIPOST_MUTATION_RECORDS")
if (
    os.environ.get("MUTANT_UNDER_TEST") == "stats"
    and os.environ.get("PIPOST_MUTATION_TEST")
    and RECORDS
):
    import time
    from pathlib import Path

    import mutmut.configuration
    from mutmut.state import state

    REPOSITORY = Path(RECORDS).parents[1]
    test_id = os.environ["PIPOST_MUTATION_TEST"]

    # mutmut reads its configuration from the folder a process starts in, and a
    # test's scratch folder has none: read it once, from the repository.
    started_in = os.getcwd()
    os.chdir(REPOSITORY)
    try:
        mutmut.configuration.config()
    finally:
        os.chdir(started_in)

    # tools/mutation.py makes the folder writable by all: some tests run their child
    # as another user, and one changes its effective uid halfway, so the record is
    # writable by all too. A child that cannot write loses its record, never its run.
    # Named by the time too: the records are read when every test has run, and a
    # recording starts more processes than there are pids (32,768 here), so a pid
    # alone was reused and an early child's record overwritten by a later one's.
    record = Path(RECORDS) / f"{time.time_ns()}.{os.getpid()}"
    try:
        record.write_text(test_id + "\n", encoding="utf-8")  # the first line names the test
        record.chmod(0o666)
    except OSError:
        pass
    else:

        class _Written(set[str]):
            """A set that writes each new member to the child's file as it is added."""

            def add(self, name: str) -> None:
                if name not in self:
                    super().add(name)
                    try:
                        with open(record, "a", encoding="utf-8") as file:
                            file.write(name + "\n")
                    except OSError:
                        pass

        state()._stats = _Written()

# Against a mutant, a process that starts itself again without end (the contract
# gate re-running itself once its guard is mutated away) fills memory with hundreds
# of processes, and the kernel kills what it picks, mutmut among them. Each process
# here is one deeper than the one that started it; past NESTED_AT_MOST, none starts.
DEPTH, NESTED_AT_MOST = "PIPOST_MUTATION_DEPTH", 16
_depth = int(os.environ.get(DEPTH, "0") or "0") + 1
if _depth > NESTED_AT_MOST and os.environ.get("MUTANT_UNDER_TEST", "") not in ("", "stats", "fail"):
    os.write(2, f"mutation: processes nested {_depth} deep, past {NESTED_AT_MOST}\n".encode())
    os._exit(70)  # the test that started the chain fails: the mutant is killed
os.environ[DEPTH] = str(_depth)
