"""The one scenario model every eval format is read into, and the error a format raises.

Each published format (skill-creator's ``evals.json``, waza's and Skillgrade's ``eval.yaml``,
Harbor's task folders, openkata/Tessl scenario folders) says the same few things in its own
words: a prompt, files to start from, commands to prepare the workspace, what a judge grades,
what is checked exactly, what the sandbox needs, how many trials and which threshold. A reader
turns its format into :class:`EvalScenario`; the writers (``formats.writers``) and, later,
collection read only this model, so that no runner-specific key reaches the run.

Checks are kept as the very objects ``checks.json`` holds and are validated by the scenario
loader's own :func:`pytest_openkata.core.scenario.check_of` when they are read, so a check
that a format maps onto the project's kinds is exactly one the run accepts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_openkata.core.jsonfiles import ScenarioLoadError, skill_relative
from pytest_openkata.core.scenario import SimulatedUser, check_of
from pytest_openkata.core.scenario_setup import DirectoryFixture

__all__ = [
    "DirectoryFixture",
    "EvalScenario",
    "FormatError",
    "InputFile",
    "JudgedCriterion",
    "SandboxNeeds",
    "ScenarioSource",
    "integer_weights",
    "shown_path",
    "validated_checks",
]


class FormatError(ScenarioLoadError):
    """A file of a published eval format that cannot be run as it is: an unknown key, a grader
    type or key this plugin cannot honour, a missing file. The message names the file, the
    key (as the field) and the format."""

    def __init__(self, fmt: str, path: Path, message: str, key: str | None = None) -> None:
        self.format = fmt
        super().__init__(path, f"{message} ({fmt} format)", key, shown=shown_path(path))


def shown_path(path: Path) -> str:
    """``path`` as an error names it without the machine's folders: relative to its skill
    folder or to the current folder when it is under one, else its folder and name."""
    shown = skill_relative(path)
    if shown != str(path):
        return shown
    try:
        return path.absolute().relative_to(Path.cwd()).as_posix()
    except ValueError:
        return "/".join(path.parts[-2:])


@dataclass(frozen=True)
class ScenarioSource:
    """One scenario a format finds in a folder: ``name`` is stable (a pytest item id can be
    made of it), ``path`` the file it comes from, ``key`` where in that file (``evals[2]``;
    ``""`` when the file is the scenario's own), ``listed_in`` the file that lists ``path``
    when another does (waza's ``eval.yaml`` for a task file)."""

    format: str
    name: str
    path: Path
    key: str = ""
    listed_in: Path | None = None


@dataclass(frozen=True)
class InputFile:
    """A file the workspace starts with, at ``path`` relative to the workspace."""

    path: str
    content: bytes
    executable: bool = False


@dataclass(frozen=True)
class JudgedCriterion:
    """One entry of the judge's weighted checklist."""

    name: str
    description: str
    weight: int


@dataclass(frozen=True)
class SandboxNeeds:
    """Where the agent runs: a sandbox or directly; its network (``""`` for the run's,
    ``"none"`` for no network); resources and an image or Dockerfile when the format gives
    them."""

    sandbox: bool = True
    network: str = ""
    cpus: float | None = None
    memory_mb: int | None = None
    image: str = ""
    dockerfile: Path | None = None
    # How long the Dockerfile's build may take, in seconds (None: the provider's bound).
    build_timeout_sec: float | None = None


@dataclass(frozen=True)
class EvalScenario:
    """One scenario in the neutral model, whatever format it was written in.

    ``checks`` are ``checks.json`` objects (validated when read); ``check_files`` the files
    their commands use (a scenario's ``checks/`` folder: copied in after the agent finished,
    under ``$OPENKATA_CHECKS``, never in the workspace the agent sees); ``setup`` runs in the
    sandbox before the agent, in order; ``follow_ups`` are prompts sent after the first one
    in the same session, ``simulated_user`` a model replying as the user after them;
    ``solution`` is a reference solution folder (``solve.sh`` in it); ``ignored_keys`` the
    fields of keys the format's own tools pass over and so does the run (lint warns of
    them)."""

    source: ScenarioSource
    task: str
    description: str = ""
    context: str = ""
    criteria: tuple[JudgedCriterion, ...] = ()
    checks: tuple[Mapping[str, Any], ...] = ()
    check_files: tuple[InputFile, ...] = ()
    inputs: tuple[InputFile, ...] = ()
    fixtures: tuple[DirectoryFixture, ...] = ()
    setup: tuple[str, ...] = ()
    sandbox: SandboxNeeds = SandboxNeeds()
    trials: int | None = None
    threshold: float | None = None
    follow_ups: tuple[str, ...] = ()
    simulated_user: SimulatedUser | None = None
    solution: Path | None = None
    ignored_keys: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.source.name


def integer_weights(weights: Sequence[float]) -> list[int]:
    """Weights as the checklist's whole points, in the same proportions: whole numbers stay
    as they are; fractions (waza's and Skillgrade's ``0.7``/``0.3``) are scaled by the
    smallest of 10, 100, 1000 that makes them whole (else by 1000, rounded); none is below 1."""
    for factor in (1, 10, 100, 1000):
        scaled = [w * factor for w in weights]
        if all(abs(s - round(s)) < 1e-9 for s in scaled):
            return [max(1, round(s)) for s in scaled]
    return [max(1, round(w * 1000)) for w in weights]


def validated_checks(
    path: Path, checks: Sequence[Mapping[str, Any]]
) -> tuple[Mapping[str, Any], ...]:
    """``checks`` as the scenario loader validates ``checks.json``; a bad pattern or schema,
    or a name given twice, is an error naming ``path`` (the format's file)."""
    seen: set[str] = set()
    for index, item in enumerate(checks):
        check_of(path, index, item)
        if item["name"] in seen:
            raise ScenarioLoadError(
                path, f"two checks would be named {item['name']!r}", f"[{index}]"
            )
        seen.add(item["name"])
    return tuple(checks)
