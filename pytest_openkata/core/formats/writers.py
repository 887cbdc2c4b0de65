"""The neutral model written out: as openkata scenario folders, or as skill-creator's
``evals/evals.json`` where that format can hold a scenario.

Nothing is overwritten: a target that exists is an error before anything is written, and a
scenario folder is written beside its place and renamed into it, so that a failure leaves
no half-written scenario. What a target cannot hold is returned as notes naming the scenario
and what was left behind; nothing is dropped without one.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_openkata.contracts.errors import OpenkataError
from pytest_openkata.core.formats.model import EvalScenario
from pytest_openkata.core.formats.reading import unescaped
from pytest_openkata.core.formats.skill_creator import EVALS_FILE, FILES_FOLDER
from pytest_openkata.core.scenario import SCENARIO_PREFIX
from pytest_openkata.infra.tempfiles import new_temp_folder, remove_stale

__all__ = [
    "ConvertError",
    "Note",
    "evals_json",
    "folder_name",
    "openkata_files",
    "run_notes",
    "write_evals_json",
    "write_openkata",
]

FIXTURES_FOLDER = "fixtures"
# Where a scenario's Dockerfile and its build context go (a Harbor task's ``environment/``).
ENVIRONMENT_FOLDER = "environment"


class ConvertError(OpenkataError):
    """The conversion cannot be written (a target exists, or two inputs clash)."""


@dataclass(frozen=True)
class Note:
    """Something of ``scenario`` that the target format cannot hold."""

    scenario: str
    what: str

    def __str__(self) -> str:
        return f"{self.scenario}: {self.what}"


def _json(data: Any) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode()


def openkata_files(scenario: EvalScenario) -> tuple[dict[str, bytes], list[Note]]:
    """The files of ``scenario``'s openkata folder by relative path (inputs under
    ``inputs/``, check files under ``checks/``; directory fixtures' files are not among
    them), and what it cannot hold."""
    files: dict[str, bytes] = {}
    task = scenario.task if scenario.task.endswith("\n") else scenario.task + "\n"
    files["task.md"] = task.encode()
    criteria: dict[str, Any] = {}
    if scenario.context:
        criteria["context"] = scenario.context
    criteria["type"] = "weighted_checklist"
    criteria["checklist"] = [
        {"name": c.name, "description": c.description, "max_score": c.weight}
        for c in scenario.criteria
    ]
    files["criteria.json"] = _json(criteria)
    if scenario.checks:
        files["checks.json"] = _json([dict(check) for check in scenario.checks])
    options: dict[str, Any] = {}
    if scenario.description:
        options["description"] = scenario.description
    options["sandbox"] = scenario.sandbox.sandbox
    if scenario.sandbox.network:
        options["network"] = scenario.sandbox.network
    if scenario.sandbox.sandbox and scenario.sandbox.cpus is not None:
        options["cpus"] = scenario.sandbox.cpus
    if scenario.sandbox.sandbox and scenario.sandbox.memory_mb is not None:
        options["memory_mb"] = scenario.sandbox.memory_mb
    if scenario.trials is not None:
        options["trials"] = scenario.trials
    if scenario.follow_ups:
        options["follow_ups"] = list(scenario.follow_ups)
    if scenario.simulated_user is not None:
        user = scenario.simulated_user
        options["simulated_user"] = {"instructions": user.instructions, "max_turns": user.max_turns}
    if scenario.fixtures:
        options["fixtures"] = {
            f.name: {
                "type": "directory",
                "path": f"{FIXTURES_FOLDER}/{f.name}",
                "installPath": f.install_path,
            }
            for f in scenario.fixtures
        }
    if scenario.setup:
        options["setup"] = list(scenario.setup)
    if scenario.sandbox.sandbox and scenario.sandbox.image:
        options["image"] = scenario.sandbox.image
    elif scenario.sandbox.sandbox and scenario.sandbox.dockerfile is not None:
        options["dockerfile"] = f"{ENVIRONMENT_FOLDER}/{scenario.sandbox.dockerfile.name}"
        if scenario.sandbox.build_timeout_sec is not None:
            options["build_timeout_sec"] = scenario.sandbox.build_timeout_sec
    files["scenario.json"] = _json(options)
    for item in scenario.inputs:
        files[f"inputs/{item.path}"] = item.content
    for item in scenario.check_files:
        files[f"checks/{item.path}"] = item.content
    return files, run_notes(scenario)


def run_notes(scenario: EvalScenario) -> list[Note]:
    """What an openkata folder (and so a run of the scenario) cannot hold of it."""
    name = scenario.name
    notes = []
    box = scenario.sandbox
    if scenario.threshold is not None:
        notes.append(Note(name, f"threshold {scenario.threshold} (a run's threshold setting)"))
    if not box.sandbox and (box.cpus is not None or box.memory_mb is not None):
        notes.append(Note(name, "cpus and memory_mb (a direct scenario runs no sandbox)"))
    if not box.sandbox and (box.image or box.dockerfile is not None):
        notes.append(Note(name, "the image or Dockerfile (a direct scenario runs no sandbox)"))
    if any(item.executable for item in scenario.inputs):
        notes.append(Note(name, "the executable bit of inputs (the sandbox copies files as files)"))
    return notes


def _free(targets: Iterable[Path]) -> None:
    taken = [t for t in targets if t.exists() or t.is_symlink()]
    if taken:
        raise ConvertError(f"{taken[0]}: already exists; nothing was written (never overwritten)")


def _safe_name(name: str) -> str:
    """``name`` as one folder's name; a name that would lead elsewhere (``..``, a separator)
    or hide the folder is an error."""
    if name in ("", ".", "..") or name.startswith(".") or any(c in name for c in "/\\\0"):
        raise ConvertError(f"{name!r}: cannot be a folder's name; rename it in its source")
    return name


def folder_name(name: str) -> str:
    """The openkata folder of a scenario named ``name``: ``scenario-<name>`` (the name itself
    when it starts so), which the default ``scenario_names`` collects."""
    name = _safe_name(name)
    return name if name.startswith(SCENARIO_PREFIX) else SCENARIO_PREFIX + name


def _inside(folder: Path, rel: str) -> Path:
    """``folder / rel``, which must stay inside ``folder``."""
    parts = rel.split("/")
    if rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ConvertError(f"{rel!r}: not a path inside the scenario folder")
    return folder.joinpath(*parts)


def write_openkata(scenarios: Iterable[EvalScenario], evals_dir: Path) -> list[Note]:
    """Write each scenario as ``evals_dir/scenario-<name>/`` (:func:`folder_name`; its
    reference solution as ``solution/``, its fixtures as ``fixtures/<name>/``, its
    Dockerfile's build context as ``environment/``); the notes of
    what was left behind."""
    scenarios = list(scenarios)
    for scenario in scenarios:
        folder_name(scenario.name)
        for fixture in scenario.fixtures:
            _safe_name(fixture.name)
    _free(evals_dir / folder_name(s.name) for s in scenarios)
    evals_dir.mkdir(parents=True, exist_ok=True)
    remove_stale(evals_dir)  # what a writer killed outright left here
    notes: list[Note] = []
    staged: list[tuple[Path, Path]] = []  # each scenario's temporary folder, and its own
    try:
        for scenario in scenarios:
            files, left = openkata_files(scenario)
            notes += left
            temp = new_temp_folder(evals_dir)
            staged.append((temp, evals_dir / folder_name(scenario.name)))
            for rel, content in files.items():
                _write(_inside(temp, rel), content, _executable(scenario, rel))
            for fixture in scenario.fixtures:
                _copy_folder(fixture.source, temp / FIXTURES_FOLDER / fixture.name)
            if scenario.solution is not None:
                _copy_folder(scenario.solution, temp / "solution")
            if _builds_own_image(scenario):
                assert scenario.sandbox.dockerfile is not None
                context = scenario.sandbox.dockerfile.parent
                _copy_folder(context, temp / ENVIRONMENT_FOLDER)
        _free(folder for _temp, folder in staged)
        _move_all(staged)
    except BaseException:
        for temp, _folder in staged:
            shutil.rmtree(temp, ignore_errors=True)
        raise
    return notes


def _copy_folder(source: Path, target: Path) -> None:
    """``source`` copied to ``target`` with its links kept as links, never followed: a
    folder that is itself a link is refused, as its files would be another folder's."""
    if source.is_symlink():
        raise ConvertError(
            f"{source.name}: is a symbolic link: a scenario's folders are copied from the "
            "source itself, never through a link"
        )
    shutil.copytree(source, target, symlinks=True)


def _builds_own_image(scenario: EvalScenario) -> bool:
    """Whether the scenario's sandbox is built from its Dockerfile (an image it names
    instead is used as it is)."""
    box = scenario.sandbox
    return box.sandbox and not box.image and box.dockerfile is not None


def _move_all(staged: list[tuple[Path, Path]]) -> None:
    """Every written scenario to its own folder, or none: one that cannot be moved takes the
    ones moved before it back out (nothing is half written)."""
    moved: list[Path] = []
    try:
        for temp, folder in staged:
            os.rename(temp, folder)
            moved.append(folder)
    except BaseException:
        for folder in moved:
            shutil.rmtree(folder, ignore_errors=True)
        raise


def _executable(scenario: EvalScenario, rel: str) -> bool:
    inputs = ((f"inputs/{i.path}", i) for i in scenario.inputs)
    checks = ((f"checks/{i.path}", i) for i in scenario.check_files)
    return any(place == rel and item.executable for place, item in (*inputs, *checks))


def _write(path: Path, content: bytes, executable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    if executable:
        path.chmod(0o755)


def evals_json(
    scenarios: Iterable[EvalScenario], skill_name: str
) -> tuple[dict[str, Any], dict[str, bytes], list[Note]]:
    """skill-creator's ``evals.json`` object, its files (by path relative to the skill) and
    what it cannot hold. Criteria become expectations (their descriptions), output checks of
    plain text become ``contains`` / ``not_contains`` assertions."""
    evals = []
    files: dict[str, bytes] = {}
    notes: list[Note] = []
    for number, scenario in enumerate(scenarios, start=1):
        name = scenario.name
        if name not in (f"eval-{number}", f"{SCENARIO_PREFIX}eval-{number}"):
            notes.append(Note(name, f"its name (it becomes eval-{number})"))
        item: dict[str, Any] = {"id": number, "prompt": scenario.task}
        if scenario.context:
            item["expected_output"] = scenario.context
        paths = []
        for input_file in scenario.inputs:
            rel = f"{FILES_FOLDER}/{input_file.path}"
            if files.get(rel, input_file.content) != input_file.content:
                raise ConvertError(
                    f"{name}: inputs/{input_file.path} differs from another scenario's file of "
                    f"that path, and evals.json keeps one {FILES_FOLDER}/ folder"
                )
            files[rel] = input_file.content
            paths.append(rel)
        if paths:
            item["files"] = paths
        expectations = []
        for criterion in scenario.criteria:
            expectations.append(criterion.description)
            if criterion.name != criterion.description or criterion.weight != 1:
                notes.append(Note(name, f"criterion {criterion.name!r}'s name and weight"))
        if expectations:
            item["expectations"] = expectations
        assertions = []
        for check in scenario.checks:
            assertion = _assertion(check)
            if assertion is None:
                notes.append(Note(name, f"check {check['name']!r} ({check['type']})"))
            else:
                assertions.append(assertion)
        if assertions:
            item["assertions"] = assertions
        notes += _evals_notes(scenario)
        evals.append(item)
    return {"skill_name": skill_name, "evals": evals}, files, notes


def _evals_notes(scenario: EvalScenario) -> list[Note]:
    name = scenario.name
    notes = [n for n in run_notes(scenario) if "Tessl" not in n.what]
    if scenario.fixtures:
        notes.append(Note(name, "directory fixtures"))
    if scenario.setup:
        notes.append(Note(name, "setup commands"))
    if scenario.trials is not None:
        notes.append(Note(name, f"trials {scenario.trials}"))
    if scenario.follow_ups or scenario.simulated_user is not None:
        notes.append(Note(name, "follow-up prompts and the simulated user"))
    if not scenario.sandbox.sandbox or scenario.sandbox.network:
        notes.append(Note(name, "sandbox and network"))
    if scenario.sandbox.sandbox and (scenario.sandbox.image or scenario.sandbox.dockerfile):
        notes.append(Note(name, "the image or Dockerfile of its sandbox"))
    if scenario.solution is not None:
        notes.append(Note(name, "the reference solution"))
    if scenario.check_files:
        notes.append(Note(name, "the files of its command checks"))
    if scenario.description:
        notes.append(Note(name, "its description"))
    return notes


def _assertion(check: Mapping[str, Any]) -> dict[str, Any] | None:
    """The assertion object of an output check of plain text, weight 1; None otherwise."""
    if check.get("type") != "output_regex" or check.get("max_score") != 1:
        return None
    if set(check) - {"name", "type", "pattern", "absent", "max_score", "description"}:
        return None
    text = unescaped(str(check.get("pattern", "")))
    if text is None:
        return None
    kind = "not_contains" if check.get("absent") else "contains"
    assertion = {"name": check["name"], "type": kind, "value": text}
    if check.get("description"):
        assertion["description"] = check["description"]
    return assertion


def write_evals_json(scenarios: Iterable[EvalScenario], skill_dir: Path) -> list[Note]:
    """Write ``skill_dir/evals/evals.json`` and its files under ``evals/files/``; the notes."""
    data, files, notes = evals_json(scenarios, skill_dir.name)
    target = skill_dir / "evals" / EVALS_FILE
    _free([target, *(_inside(skill_dir, rel) for rel in files)])
    for rel, content in files.items():
        _write(_inside(skill_dir, rel), content)
    _write(target, _json(data))
    return notes
