"""How a scenario is found again in pytest's ``--junitxml`` file: the properties the pytest
adapter records on each scenario's item, which the JUnit reporter reads back to add the
scenario's criteria beside its testcase."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["PERCENTAGE_PROPERTY", "SCENARIO_PROPERTY", "scenario_key"]

SCENARIO_PROPERTY = "openkata_scenario"
PERCENTAGE_PROPERTY = "openkata_percentage"


def scenario_key(skill_dir: str | Path, name: str, rootdir: Path) -> str:
    """A scenario folder relative to the rootdir, ``/``-separated: how the JUnit file names it."""
    return Path(os.path.relpath(Path(skill_dir, "evals", name), rootdir)).as_posix()
