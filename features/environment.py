"""Every scenario gets a scratch folder of its own, removed when it ends.

The post office root, the caller's home and any directories a scenario makes
live inside it; nothing a scenario does reaches ~/.pi or another scenario.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from behave.model import Scenario
from behave.runner import Context


def before_scenario(context: Context, scenario: Scenario) -> None:
    # Canonical, so that paths a scenario expects compare equal to the realpaths
    # pipost records even where the temporary folder sits behind a symlink.
    scratch = Path(os.path.realpath(tempfile.mkdtemp(prefix="pipost-feature-")))
    context.scratch = scratch
    context.add_cleanup(shutil.rmtree, scratch)
