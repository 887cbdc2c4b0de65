"""A run's reproducibility manifest (:class:`~pytest_openkata.core.manifest.Manifest`),
built from its settings and what its trials recorded.

The settings give what was asked for (the agent's and the judge's backend and model, the
judge's votes and fence, the image, the settings that change results); the trials give what
really ran: the model ids the endpoints reported in their answers (and an agent CLI's events,
where they name the model), the agent CLI's version and the image's digest each sandboxed
trial recorded. The skill's content is hashed from its
folder, without ``evals/``; each scenario's from the digests its result carries (task,
criteria, checks, inputs: not its prompt, which holds the skill).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.results import ScenarioResult, TrialResult
from pytest_openkata.core.manifest import (
    DIGESTED_SETTINGS,
    REFUSING_SETTINGS,
    REPORTED_SETTINGS,
    Manifest,
    command_digest,
    id_list,
)
from pytest_openkata.core.recorded import recorded_agent_calls
from pytest_openkata.core.runlog import relative_skill_dir
from pytest_openkata.infra.reported_models import REPORTED_MODEL_MAX_CHARS
from pytest_openkata.infra.text import visible

__all__ = ["arm_manifests", "build_manifest", "skill_digest"]

_DIGESTED_PARTS = ("task", "criteria", "checks", "inputs")  # a scenario's digests, not its prompt
_SKIPPED_IN_SKILL = "evals"  # reports and scenarios: not the skill's content
_BYTECODE = "__pycache__"  # what running a skill's Python scripts leaves: not its content


def skill_digest(skill_dir: Path) -> str:
    """A hex sha256 over the skill's files (path and content), without ``evals/`` (its
    reports and scenarios are not the skill) and Python's ``__pycache__`` folders (what
    running its scripts leaves). A file that cannot be read counts by path only."""
    digest = hashlib.sha256()
    for rel, path in _content_files(skill_dir):
        try:
            content = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            content = "unreadable"
        digest.update(f"{rel}\0{content}\0".encode())
    return digest.hexdigest()


def _content_files(skill_dir: Path) -> list[tuple[str, Path]]:
    """The skill's files by ``/``-separated relative path, sorted as
    :func:`~pytest_openkata.core.files.files_under`
    sorts them, without ``evals/`` and ``__pycache__``: those folders are not entered (a
    skill's evals hold every scenario and report, often most of its files)."""
    found: list[tuple[str, Path]] = []
    for current, folders, names in os.walk(skill_dir, followlinks=False):
        inside = os.path.relpath(current, skill_dir)
        prefix = "" if inside == os.curdir else Path(inside).as_posix() + "/"
        folders[:] = [name for name in folders if not _skipped(prefix + name)]
        found += [(prefix + name, Path(current, name)) for name in names]
    found = [(rel, path) for rel, path in found if not _skipped(rel)]
    found.sort(key=lambda item: item[0])
    return found


def _skipped(rel: str) -> bool:
    parts = rel.split("/")
    return parts[0] == _SKIPPED_IN_SKILL or _BYTECODE in parts


def _setting(settings: EvalSettings, dotted: str) -> Any:
    value: Any = settings
    for part in dotted.split("."):
        value = getattr(value, part)
    if dotted in DIGESTED_SETTINGS:
        return command_digest(str(value))
    return value


def build_manifest(
    settings: EvalSettings,
    results: Sequence[ScenarioResult],
    rootdir: Path,
    plugin_version: str,
) -> Manifest:
    """The manifest of a run with ``settings`` whose scenario results are ``results`` (the
    own arms; each carries its baseline arm's), its skill folders read under ``rootdir``."""
    arms = [arm for result in results for arm in _arms(result)]
    trials = [trial for arm in arms for trial in arm.trials]
    environments = [trial.environment for trial in trials if trial.environment is not None]
    skills: dict[str, str] = {}
    scenarios: dict[str, dict[str, str]] = {}
    for result in results:
        relative = relative_skill_dir(result.skill_dir, rootdir)
        if relative not in skills:
            skills[relative] = skill_digest(Path(result.skill_dir))
        if result.digests:
            scenarios[f"{relative}::{result.name}"] = {
                part: result.digests[part] for part in _DIGESTED_PARTS if part in result.digests
            }
    return Manifest(
        plugin_version=plugin_version,
        agent={
            "backend": settings.backend,
            "model": settings.model,
            "reported_models": id_list(_agent_models(trials)),
            "cli_versions": id_list(environment.agent_version for environment in environments),
        },
        judge={
            "backend": settings.judge_backend or settings.backend,
            "model": settings.judge_model or settings.model,
            "reported_models": id_list(m for t in trials for m in t.usage.judge.models),
            "votes": settings.judge_votes,
            "fence": settings.judge_fence,
            "reason_max_chars": settings.judge_reason_max_chars,
        },
        sandbox={
            "image": settings.sandbox.image,
            "image_ids": id_list(environment.image_id for environment in environments),
        },
        skills=dict(sorted(skills.items())),
        scenarios=dict(sorted(scenarios.items())),
        settings={
            name: _setting(settings, name) for name in (*REFUSING_SETTINGS, *REPORTED_SETTINGS)
        },
    )


def _agent_models(trials: Sequence[TrialResult]) -> list[str]:
    """The models the agent's endpoint reported (a direct agent's backend; for a re-judged
    trial, the recorded run's), and those an agent CLI's events named (Claude Code's
    ``model``), made safe to show and bounded."""
    models = [model for trial in trials for model in recorded_agent_calls(trial).models]
    for trial in trials:
        transcript = None if trial.trace is None else trial.trace.transcript
        named = None if transcript is None else transcript.extras.get("model")
        if isinstance(named, str) and named.strip():
            models.append(visible(named.strip())[:REPORTED_MODEL_MAX_CHARS])
    return models


def _arms(result: ScenarioResult) -> list[ScenarioResult]:
    return [result] if result.baseline is None else [result, result.baseline]


def arm_manifests(results: Sequence[ScenarioResult]) -> tuple[Manifest, Manifest] | None:
    """What a skill's own arm and its baseline arm ran with, as two manifests holding only
    what the trials recorded (reported models, CLI versions, image digests): the arms of one
    run share everything else. None when no result has a baseline arm."""
    baselines = [result.baseline for result in results if result.baseline is not None]
    if not baselines:
        return None
    own = [result for result in results if result.baseline is not None]
    return _observed(own), _observed(baselines)


def _observed(arms: Sequence[ScenarioResult]) -> Manifest:
    trials = [trial for arm in arms for trial in arm.trials]
    environments = [trial.environment for trial in trials if trial.environment is not None]
    return Manifest(
        plugin_version="",
        agent={
            "reported_models": id_list(_agent_models(trials)),
            "cli_versions": id_list(environment.agent_version for environment in environments),
        },
        judge={"reported_models": id_list(m for t in trials for m in t.usage.judge.models)},
        sandbox={"image_ids": id_list(environment.image_id for environment in environments)},
    )
