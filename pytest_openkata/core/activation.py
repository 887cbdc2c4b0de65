"""Whether the agent loaded the skill, in three states, from its transcript, and which of the
skill's files it read.

``loaded``: the agent (or a subagent it started) loaded the skill; ``not loaded``: its events
show everything it did, and loading the skill was not among it; ``unknown``: there is nothing
to tell from (an agent that gave no events, or a model backend, which is only ever given the
skill in its prompt). A skill is named by its folder's name, by a tile's skills' names, or by
the folder it has in a sandbox's workspace (``skill/``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from pytest_openkata.contracts.results import ScenarioResult, TrialResult
from pytest_openkata.contracts.transcripts import DIRECT_SOURCE, Transcript
from pytest_openkata.core.tile import skill_names
from pytest_openkata.core.workspace import TOOL_FOLDERS

__all__ = [
    "LOADED",
    "NOT_LOADED",
    "UNKNOWN",
    "Activation",
    "ActivationRate",
    "activation",
    "activation_rate",
    "names_of",
    "scenario_activation",
    "skill_files_read",
]

_FILES_SHOWN = 5

Activation = Literal["loaded", "not loaded", "unknown"]
LOADED: Activation = "loaded"
NOT_LOADED: Activation = "not loaded"
UNKNOWN: Activation = "unknown"


def activation(transcript: Transcript | None, skills: Collection[str]) -> Activation:
    """Whether the agent of ``transcript`` loaded one of ``skills`` (the names it goes by)."""
    if transcript is None or transcript.source == DIRECT_SOURCE:
        return UNKNOWN
    wanted = {name.lower() for name in skills}
    if any(load.name.lower() in wanted for load in transcript.skills_loaded):
        return LOADED
    return NOT_LOADED


@dataclass(frozen=True)
class ActivationRate:
    """A scenario's trials by activation: ``loaded`` of the ``known`` ones (those whose
    activation could be told), of ``trials`` in all; ``files_read`` are the skill's files any
    of them read, relative to the skill's folder."""

    loaded: int
    known: int
    trials: int
    files_read: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """``loaded in 2 of 3 trials``, with the trials that could not be told, if any, and
        the skill's files read (the first few)."""
        unknown = self.trials - self.known
        if not self.known:
            return "unknown (the agent gave no events)"
        said = f"loaded in {self.loaded} of {self.known} trial{'s' if self.known != 1 else ''}"
        said += f" ({unknown} unknown)" if unknown else ""
        if self.files_read:
            shown = ", ".join(self.files_read[:_FILES_SHOWN])
            more = len(self.files_read) - _FILES_SHOWN
            said += f"; read {shown}" + (f" and {more} more" if more > 0 else "")
        return said


def skill_files_read(
    transcripts: Iterable[Transcript | None], skills: Collection[str]
) -> tuple[str, ...]:
    """The skill's files that the transcripts read, each relative to the skill's folder
    (``SKILL.md``, ``references/api.md``), sorted, once each. A skill's folder is one named
    as one of ``skills`` inside a ``skills`` folder (a project's, a tile's, an agent's own
    ``.claude/skills``) or a sandbox workspace's skill folder. Only the part below it is kept:
    where the folder was is the machine's."""
    wanted = {name.lower() for name in skills}
    found: set[str] = set()
    for transcript in transcripts:
        for path in () if transcript is None else transcript.files_read:
            parts = PurePosixPath(path.replace("\\", "/")).parts
            starts = [i for i in range(len(parts) - 1) if _is_skill_folder(parts, i, wanted)]
            if starts:
                found.add("/".join(parts[starts[-1] + 1 :]))
    return tuple(sorted(found))


def _is_skill_folder(parts: Sequence[str], index: int, wanted: Collection[str]) -> bool:
    part = parts[index]
    if part in TOOL_FOLDERS:
        return True
    return part.lower() in wanted and index > 0 and parts[index - 1].lower() == "skills"


def activation_rate(trials: Sequence[TrialResult], skills: Collection[str]) -> ActivationRate:
    """How many of ``trials`` loaded the skill, of those whose activation is known."""
    states = [
        activation(trial.trace.transcript if trial.trace is not None else None, skills)
        for trial in trials
    ]
    known = [state for state in states if state != UNKNOWN]
    read = skill_files_read(
        (trial.trace.transcript for trial in trials if trial.trace is not None), skills
    )
    return ActivationRate(sum(1 for s in known if s == LOADED), len(known), len(trials), read)


def names_of(skill_dir: Path) -> tuple[str, ...]:
    """The names the skill of ``skill_dir`` goes by for an agent: its own (and a tile's), and
    its folder's in a sandbox's workspace."""
    return (*skill_names(skill_dir), *TOOL_FOLDERS)


def scenario_activation(result: ScenarioResult) -> ActivationRate | None:
    """A scenario arm's activation over its trials; None when no trial's could be told (the
    reports then say nothing of it rather than "unknown" for every model backend's run)."""
    told = [trial.trace.transcript for trial in result.trials if trial.trace is not None]
    if all(t is None or t.source == DIRECT_SOURCE for t in told):
        return None  # nothing to tell it from: the skill's names are not even read
    rate = activation_rate(result.trials, names_of(Path(result.skill_dir)))
    return rate if rate.known else None
