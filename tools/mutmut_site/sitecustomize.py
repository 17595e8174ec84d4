"""Loaded by every Python process nox -s mutation starts (tools/mutation.py puts this
folder on PYTHONPATH, after the mutated code).

While mutmut records which tests reach which function (MUTANT_UNDER_TEST "stats"), the
children the tests start inherit that mode, and each mutated function they run reads
mutmut's configuration from the folder the child started in; a test's scratch folder
has none, and the child failed ("Could not figure out where the code to mutate is").
So it is read here, once, from the repository. What a child reaches is not recorded:
mutmut reads only its own process's books."""

import os

if os.environ.get("MUTANT_UNDER_TEST") == "stats":
    from pathlib import Path

    import mutmut.configuration

    _started_in = os.getcwd()
    os.chdir(Path(__file__).resolve().parents[2])
    try:
        mutmut.configuration.config()
    finally:
        os.chdir(_started_in)
