"""The ``files`` rule (what a scenario needs, and what leads out of it) and the scenario's
``unreached-files`` rule."""

from __future__ import annotations

import os
import re
from pathlib import Path

from pytest_openkata.contracts.errors import OpenkataError
from pytest_openkata.core.files import LEADS_OUT
from pytest_openkata.core.lint.context import ScenarioFiles, in_skill
from pytest_openkata.core.lint.findings import (
    CRITERIA_FILE,
    OPTIONS_FILE,
    SKILL_FILE,
    TASK_FILE,
    Finding,
)
from pytest_openkata.core.scenario import (
    CHECKS_FILE,
    EMPTY_TASK,
    load_scenario_options,
)
from pytest_openkata.core.tile import is_tile_dir


def files_rule(scenario: ScenarioFiles) -> list[Finding]:
    """The skill's SKILL.md (a tile needs none), task.md and criteria.json are there, and no
    Python file pytest would import."""
    findings = []
    tile = is_tile_dir(scenario.skill_dir)  # a tile's own lint item checks its tile.json
    if not tile and not (scenario.skill_dir / SKILL_FILE).is_file():
        message = "file not found (every skill needs one): the scenario cannot run without it"
        findings.append(Finding("files", "error", SKILL_FILE, None, message))
    elif not tile and not in_skill(scenario.skill_dir / SKILL_FILE, scenario.skill_dir):
        findings.append(Finding("files", "error", SKILL_FILE, None, LEADS_OUT))
    if not (scenario.path / TASK_FILE).is_file():
        message = (
            "file not found (every scenario needs a task.md): write there the prompt the "
            "agent is given"
        )
        findings.append(Finding("files", "error", scenario.file(TASK_FILE), None, message))
    elif not in_skill(scenario.path / TASK_FILE, scenario.skill_dir):
        findings.append(Finding("files", "error", scenario.file(TASK_FILE), None, LEADS_OUT))
    if not (scenario.path / CRITERIA_FILE).exists():
        message = (
            "file not found (every scenario needs a criteria.json): write there the judge's "
            "weighted checklist (it may be empty when checks.json holds checks)"
        )
        findings.append(Finding("files", "error", scenario.file(CRITERIA_FILE), None, message))
    if scenario.task is not None:  # else missing or not read: reported above
        try:
            (scenario.path / TASK_FILE).read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            message = (
                f"not UTF-8 (byte {exc.start}): the agent gets a replacement character there; "
                "save the file as UTF-8"
            )
            findings.append(Finding("files", "error", scenario.file(TASK_FILE), None, message))
        except OSError:
            pass  # gone meanwhile
        if not scenario.task.strip():
            findings.append(Finding("files", "error", scenario.file(TASK_FILE), None, EMPTY_TASK))
    for trap in _traps(scenario.path):
        findings.append(
            Finding(
                "files",
                "error",
                scenario.rel(trap),
                None,
                "Python files directly in a scenario folder can be imported by pytest; "
                "move scenario files under inputs/",
            )
        )
    return findings


def _traps(folder: Path) -> list[Path]:
    """The files the loader refuses: conftest.py and __init__.py in the scenario folder, and
    conftest.py in a ``test*`` folder of it."""
    traps = [folder / name for name in ("conftest.py", "__init__.py") if (folder / name).exists()]
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return traps
    for entry in entries:
        if entry.name.startswith("test") and entry.is_dir() and (entry / "conftest.py").exists():
            traps.append(entry / "conftest.py")
    return traps


SCENARIO_ENTRIES: frozenset[str] = frozenset(
    {
        TASK_FILE,
        CRITERIA_FILE,
        OPTIONS_FILE,
        CHECKS_FILE,
        "capability.txt",
        "capability.text",
        "inputs",
        "solution",
        "results",
    }
)
"""What a scenario folder holds directly: its files, inputs/ (what the agent is given beside
task.md), solution/ (for validation) and results/."""


def unreached_scenario_files(scenario_dir: Path) -> list[Finding]:
    """Files and folders directly in a scenario folder that are none of
    :data:`SCENARIO_ENTRIES`, as warnings (paths relative to the skill folder): the agent is
    given task.md and inputs/ only, so a file left beside them never reaches it. Dotfiles,
    ``__pycache__`` and the Python files the ``files`` rule reports are left out."""
    try:
        names = os.listdir(scenario_dir)
    except OSError:
        return []
    if all(_expected_entry(name) for name in names):
        return []  # the usual folder: nothing more to look at (a run asks for every scenario)
    environment = _environment_entry(scenario_dir)
    scenario = ScenarioFiles(scenario_dir, None)
    traps = set(_traps(scenario_dir))
    try:
        entries = sorted(scenario_dir.iterdir())
    except OSError:
        return []
    findings = []
    for entry in entries:
        if _expected_entry(entry.name) or entry.name == environment:
            continue
        if entry in traps or entry / "conftest.py" in traps:
            continue  # the files rule reports it
        shown = scenario.rel(entry) + ("/" if entry.is_dir() else "")
        message = (
            f"{shown} never reaches the agent (it is given task.md and the files under "
            "inputs/): move it under inputs/ if the agent needs it"
        )
        findings.append(Finding("unreached-files", "warning", scenario.rel(entry), None, message))
    return findings


# An eval's own file left beside task.md (an expected answer, a rubric, a grader's notes): the
# agent is right never to see it, and moving it under inputs/ would hand the agent its test.
_EVAL_MATERIAL = re.compile(
    r"expected|answer|solution|rubric|grad(?:er|ing)|judge|golden|verif|criteri", re.I
)


def _environment_entry(scenario_dir: Path) -> str:
    """The entry of the scenario folder that holds the Dockerfile scenario.json names (its
    image's build context, or the Dockerfile itself), which the agent is right never to see;
    "" when it names none or cannot be read (the run says why)."""
    try:
        dockerfile = load_scenario_options(scenario_dir / OPTIONS_FILE).dockerfile
    except OpenkataError:
        return ""
    return dockerfile.split("/")[0]


def _expected_entry(name: str) -> bool:
    """One of :data:`SCENARIO_ENTRIES`, a dotfile, ``__pycache__`` or an eval's own file."""
    if name in SCENARIO_ENTRIES or name.startswith(".") or name == "__pycache__":
        return True
    return _EVAL_MATERIAL.search(name) is not None


def unreached_scenario_rule(scenario: ScenarioFiles) -> list[Finding]:
    """Files beside task.md that the agent never sees (see :func:`unreached_scenario_files`)."""
    return unreached_scenario_files(scenario.path)
