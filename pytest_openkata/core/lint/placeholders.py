"""The scaffold's placeholders left in a scenario or a skill (``placeholders``)."""

from __future__ import annotations

from pathlib import Path

from pytest_openkata.core.jsonfiles import (
    ScenarioLoadError,
)
from pytest_openkata.core.lint.context import ScenarioFiles, in_skill
from pytest_openkata.core.lint.findings import (
    CRITERIA_FILE,
    OPTIONS_FILE,
    SKILL_FILE,
    TASK_FILE,
    Finding,
)
from pytest_openkata.core.lint.jsonlines import read_text_or_none
from pytest_openkata.core.placeholders import placeholders_in
from pytest_openkata.core.scenario import (
    CHECKS_FILE,
)
from pytest_openkata.core.tile import is_tile_dir, load_tile
from pytest_openkata.infra.text import plural

_INPUTS_README = "inputs/README.md"  # a sandboxed scenario's, as new-scenario writes it


def _placeholder_finding(file: str, text: str | None, whose: str) -> list[Finding]:
    """One warning for a file that still holds placeholders of the scaffold (see
    :mod:`pytest_openkata.core.placeholders`), at the first one's line."""
    found = placeholders_in(text or "")
    if not found:
        return []
    (line, first), lines = found[0], ", ".join(str(number) for number, _ in found)
    left = f"{plural(len(found), 'placeholder')} left, on line{'s' if len(found) > 1 else ''}"
    message = (
        f'the scaffold\'s placeholder "{first} ..." is still there ({left} {lines}): '
        f"replace each with the {whose}'s own text"
    )
    return [Finding("placeholders", "warning", file, line, message)]


_SCENARIO_TEXTS = (TASK_FILE, CRITERIA_FILE, OPTIONS_FILE, CHECKS_FILE, _INPUTS_README)


def scenario_placeholders(scenario_dir: Path) -> list[Finding]:
    """The scaffold's placeholders left in a scenario's files: task.md, criteria.json,
    scenario.json, checks.json and a sandboxed scenario's inputs/README.md."""
    return placeholders_rule(ScenarioFiles(scenario_dir, None))


def placeholders_rule(scenario: ScenarioFiles) -> list[Finding]:
    """Placeholders of ``new-scenario`` left in the scenario (see :func:`scenario_placeholders`)."""
    findings = []
    for name in _SCENARIO_TEXTS:
        # Said at the collection of every scenario: a file is read as the rules read it (task.md
        # only where the run reads it) only when it holds a placeholder at all.
        content = scenario.content(name)
        if content is None or not placeholders_in(content.decode("utf-8", errors="replace")):
            continue
        text = scenario.task if name == TASK_FILE else scenario.text(name)
        findings += _placeholder_finding(scenario.file(name), text, "scenario")
    return findings


def skill_placeholders(skill_dir: Path) -> list[Finding]:
    """The placeholders of ``init`` left in the skill's SKILL.md (in a tile, in each listed
    skill's)."""
    skill_files = [skill_dir / SKILL_FILE]
    if is_tile_dir(skill_dir):
        try:
            skill_files = [path for _name, path in load_tile(skill_dir).skills]
        except ScenarioLoadError:
            return []  # the skill-md rule reports it
    findings = []
    for path in skill_files:
        if not in_skill(path, skill_dir):
            continue  # the skill-md rule reports it
        shown = path.relative_to(skill_dir).as_posix()
        findings += _placeholder_finding(shown, read_text_or_none(path), "skill")
    return findings
