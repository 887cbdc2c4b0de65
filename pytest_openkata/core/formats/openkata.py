"""openkata / Tessl: today's scenario folders (``task.md``, ``criteria.json``, optional
``scenario.json``, ``checks.json`` and ``inputs/``) read into the one model, so that every
format goes through it.

The files are read by the scenario loader's own functions, with its errors. Beyond what the
loader reads, Tessl's ``scenario.json`` keys are read here too: ``fixtures`` (each
``{"type": "directory", "path": ..., "installPath": ...}``, its path relative to the scenario
folder) and ``setup`` (commands run in the sandbox before the agent, in order).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_openkata.core.files import files_under
from pytest_openkata.core.formats.model import (
    DirectoryFixture,
    EvalScenario,
    FormatError,
    InputFile,
    JudgedCriterion,
    SandboxNeeds,
    ScenarioSource,
)
from pytest_openkata.core.formats.reading import mapping_at, unit_of
from pytest_openkata.core.jsonfiles import ScenarioLoadError, read_json
from pytest_openkata.core.scenario import (
    CHECKS_FILE,
    holds_scenario_files,
    load_checks,
    load_criteria,
    load_scenario_options,
    read_capability,
    scenario_candidates,
)
from pytest_openkata.core.scenario_setup import read_fixtures, read_setup

__all__ = ["OpenkataFormat"]

NAME = "openkata"


class OpenkataFormat:
    """The reader of openkata/Tessl scenario folders: a scenario folder itself, an ``evals``
    folder, or a skill or tile folder holding one."""

    name = NAME
    files = ()  # collection takes openkata folders itself (plugin/items.py), unread

    def detect(self, folder: Path) -> bool:
        return bool(self._folders(folder))

    def scenarios(self, folder: Path) -> list[ScenarioSource]:
        return [ScenarioSource(NAME, f.name, f / "task.md") for f in self._folders(folder)]

    def load(self, source: ScenarioSource) -> EvalScenario:
        folder = source.path.parent
        options_path = folder / "scenario.json"
        options = load_scenario_options(options_path, kind=True)
        raw: Mapping[str, Any] = {}
        if options_path.is_file():
            raw = mapping_at(NAME, options_path, read_json(options_path), "")
        checks: tuple[Mapping[str, Any], ...] = ()
        if (folder / CHECKS_FILE).is_file():
            load_checks(folder / CHECKS_FILE, sandboxed=options.sandbox)  # the loader's errors
            checks = tuple(json.loads((folder / CHECKS_FILE).read_bytes()))
        context, criteria = load_criteria(folder / "criteria.json", allow_empty=bool(checks))
        task_path = folder / "task.md"
        if not task_path.is_file():
            raise FormatError(NAME, task_path, "file not found (every scenario needs a task.md)")
        inputs = _files(folder / "inputs")
        return EvalScenario(
            source=source,
            task=task_path.read_text(encoding="utf-8", errors="replace"),
            description=options.description or read_capability(folder),
            context=context,
            criteria=tuple(JudgedCriterion(c.name, c.description, c.max_score) for c in criteria),
            checks=checks,
            check_files=_files(folder / "checks"),
            inputs=inputs,
            fixtures=_fixtures(options_path, folder, raw.get("fixtures")),
            setup=_setup(options_path, raw.get("setup")),
            sandbox=SandboxNeeds(
                sandbox=options.sandbox,
                network=options.network,
                cpus=options.cpus,
                memory_mb=options.memory_mb,
            ),
            trials=options.trials,
            follow_ups=options.conversation[0],
            simulated_user=options.conversation[1],
        )

    def _folders(self, folder: Path) -> list[Path]:
        if holds_scenario_files(folder):
            return [folder]
        evals = folder if folder.name == "evals" else folder / "evals"
        return [f for f in scenario_candidates(evals) if holds_scenario_files(f)]


def _files(folder: Path) -> tuple[InputFile, ...]:
    return tuple(
        InputFile(rel, path.read_bytes(), bool(path.stat().st_mode & 0o111))
        for rel, path in files_under(folder)
    )


def _fixtures(path: Path, folder: Path, value: Any) -> tuple[DirectoryFixture, ...]:
    try:
        return read_fixtures(path, folder, value, root=unit_of(path))
    except ScenarioLoadError as exc:
        raise FormatError(NAME, path, exc.message, exc.field) from None


def _setup(path: Path, value: Any) -> tuple[str, ...]:
    try:
        return read_setup(path, value)
    except ScenarioLoadError as exc:
        raise FormatError(NAME, path, exc.message, exc.field) from None
