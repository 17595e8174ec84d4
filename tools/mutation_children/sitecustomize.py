"""Loaded by every process nox -s mutation starts (tools/mutation.py puts this folder on
PYTHONPATH, after mutants/src): pi-post commands that the tests start run the mutant
under test, named by MUTANT_UNDER_TEST, which they inherit. While mutmut records which
tests reach which function ("stats") a child runs the original code instead: its
trampolines would record into a process that saves nothing, and they read mutmut's
configuration from the folder the child runs in, which a test's scratch folder lacks."""

import os

if os.environ.get("MUTANT_UNDER_TEST") == "stats":
    os.environ["MUTANT_UNDER_TEST"] = ""
