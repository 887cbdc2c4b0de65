"""Which eval formats each built-in rule applies to, at which level, and what changes it.

A rule that reads a file only one format has (``criteria.json``'s keys, ``scenario.json``'s
description) or holds a format to a convention it does not have (weights summing to 100,
which the reference's script asks of openkata scenarios; Tessl's tiles and the other
published formats take any weights) is not run on the others: a format is never told to
change what it is allowed to be. The lint run asks :meth:`BuiltInRule.applies_to` for each
rule and leaves out those that do not apply.

``changed_by`` names what a user changes to act on the rule's findings: a setting, a file or
a key of one. Each message of the rule names one of them (or the finding's file is one of
them), so that a finding says where to act.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pytest_openkata.core.scenario import skill_of
from pytest_openkata.core.tile import is_tile_dir

OPENKATA = "openkata"
"""A scenario folder (``task.md``, ``criteria.json``...) of a skill."""

TESSL_TILE = "tessl-tile"
"""A scenario folder of a Tessl tile (a folder with ``tile.json``) or of a skill inside one."""

SKILL_CREATOR = "skill-creator"

WAZA = "waza"

SKILLGRADE = "skillgrade"

HARBOR = "harbor"

SCENARIO_FOLDERS = frozenset({OPENKATA, TESSL_TILE})
"""The formats whose scenarios are openkata folders, read by the rules as they are."""

EVERY_FORMAT = frozenset({OPENKATA, TESSL_TILE, SKILL_CREATOR, WAZA, SKILLGRADE, HARBOR})

WITH_A_SKILL = EVERY_FORMAT - {HARBOR}
"""The formats whose scenarios evaluate a skill (a Harbor task is a task of its own)."""

WITH_INPUTS = EVERY_FORMAT - {HARBOR}
"""The formats whose files list what the workspace starts with (a Harbor task's workspace is
what its environment's Dockerfile builds, which lint does not run)."""

Level = Literal["scenario", "skill"]


@dataclass(frozen=True)
class BuiltInRule:
    """A built-in rule: its name, whether it reads a scenario or a skill folder, the formats
    it applies to, and the settings, files or keys that change what it finds."""

    name: str
    level: Level
    formats: frozenset[str]
    changed_by: tuple[str, ...]

    def applies_to(self, fmt: str) -> bool:
        return fmt in self.formats


_FOLDERS = SCENARIO_FOLDERS

BUILT_IN_RULES: tuple[BuiltInRule, ...] = (
    BuiltInRule("files", "scenario", _FOLDERS, ("task.md", "criteria.json", "SKILL.md", "inputs/")),
    BuiltInRule("criteria-json", "scenario", _FOLDERS, ("criteria.json",)),
    BuiltInRule("scenario-json", "scenario", _FOLDERS, ("scenario.json",)),
    BuiltInRule("checks-json", "scenario", _FOLDERS, ("checks.json",)),
    BuiltInRule(
        "unknown-keys",
        "scenario",
        _FOLDERS | {SKILL_CREATOR, SKILLGRADE},
        ("scenario.json", "criteria.json", "evals.json", "eval.yaml"),
    ),
    BuiltInRule("empty-descriptions", "scenario", _FOLDERS, ("description",)),
    BuiltInRule(
        "placeholders",
        "scenario",
        _FOLDERS,
        ("task.md", "criteria.json", "scenario.json", "checks.json", "inputs/README.md"),
    ),
    BuiltInRule("weights", "scenario", frozenset({OPENKATA}), ("max_score",)),
    BuiltInRule("task-names-skill", "scenario", WITH_A_SKILL, ("task.md", "prompt", "instruction")),
    BuiltInRule(
        "referenced-inputs",
        "scenario",
        WITH_INPUTS,
        ("inputs/", "`files`", "`inputs.files`", "`workspace`"),
    ),
    BuiltInRule(
        "vague-criteria",
        "scenario",
        EVERY_FORMAT,
        ("description", "`expectations`", "`config.prompt`", "`rubric`"),
    ),
    BuiltInRule("scenario-description", "scenario", _FOLDERS, ('"description"',)),
    BuiltInRule("unreached-files", "scenario", _FOLDERS, ("inputs/",)),
    BuiltInRule("mechanical-criteria", "scenario", _FOLDERS, ("checks.json",)),
    BuiltInRule(
        "task-states-answer", "scenario", EVERY_FORMAT, ("task.md", "prompt", "instruction")
    ),
    BuiltInRule("prompt-size", "scenario", EVERY_FORMAT, ("context_budget",)),
    BuiltInRule("skill-md", "skill", EVERY_FORMAT, ("SKILL.md", "tile.json")),
    BuiltInRule("placeholders", "skill", EVERY_FORMAT, ("SKILL.md",)),
    BuiltInRule("changelog", "skill", EVERY_FORMAT, ("CHANGELOG.md", "tile.json")),
    BuiltInRule("scenarios", "skill", EVERY_FORMAT, ("scenario_names", "evals/scenario-")),
    BuiltInRule("unreached-files", "skill", EVERY_FORMAT, ("SKILL.md", "references/", "tile.json")),
    BuiltInRule(
        "trigger-queries", "skill", EVERY_FORMAT, ("trigger_queries.json", "trigger_tests")
    ),
)
"""Every built-in rule, scenario rules first, each level in the order its rules run."""


def built_in_rule(name: str, level: Level) -> BuiltInRule:
    """The built-in rule ``name`` of ``level`` (``unreached-files`` and ``placeholders`` are
    one rule of each level)."""
    return next(rule for rule in BUILT_IN_RULES if rule.name == name and rule.level == level)


_TILE_DEPTH = 4  # a tile's skill's scenario: <tile>/skills/<group>/<skill>/evals/<scenario>


def folder_format(scenario_dir: Path) -> str:
    """The format of a scenario folder: :data:`TESSL_TILE` when it is a tile's (of its evals,
    or of a skill inside the tile's folder), else :data:`OPENKATA`."""
    unit = skill_of(scenario_dir)
    in_tile = any(is_tile_dir(folder) for folder in [unit, *unit.parents][: _TILE_DEPTH + 1])
    return TESSL_TILE if in_tile else OPENKATA
