"""Running one trigger query: the agent CLI, on the host, with the skill installed among others.

Each run starts the agent in a fresh temporary folder holding the skill and the other skills
the team names (``trigger_skills``) where the agent discovers skills
(:mod:`pytest_openkata.core.skill_delivery`); the prompt is the query alone. Whether *this*
skill loaded is read from the run's transcript (:mod:`pytest_openkata.core.activation`): a run
whose agent gave no events cannot tell, and errors the query rather than passing or failing
it, as does an agent or endpoint that fails. Finished runs are kept in the result cache by
the query, the run's number, the agent and the installed skills' content.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_openkata.contracts.backends import Completer, Transcribing
from pytest_openkata.contracts.errors import BackendError, ConfigError
from pytest_openkata.contracts.transcripts import Transcript
from pytest_openkata.core.activation import LOADED, UNKNOWN, Activation, activation
from pytest_openkata.core.agent_backend import CLIBackend
from pytest_openkata.core.errors import ScenarioFailure
from pytest_openkata.core.run import Backends
from pytest_openkata.core.skill_delivery import InstalledFile, installed_skill_files
from pytest_openkata.core.tile import skill_names
from pytest_openkata.core.triggers import PassRule, QueryOutcome, TriggerQuery
from pytest_openkata.infra.cache import ResultCache, cache_key
from pytest_openkata.infra.inflight import LimitedCompleter
from pytest_openkata.infra.retry import call_with_retry

__all__ = ["TRIGGER_CACHE", "TriggerRun", "installed_skills", "run_trigger_query"]

TRIGGER_CACHE = "trigger"
NOT_DISCOVERING = (
    "trigger queries need an agent CLI backend that discovers installed skills (claude or "
    "codex as --eval-backend); {backend} does not"
)


def installed_skills(
    skills_folder: str, skill_dir: Path, others: Sequence[Path]
) -> list[InstalledFile]:
    """The files that install the skill and the ``others`` beside it (the skill itself,
    when listed among them, once). Two skills that would share a folder are a
    configuration error."""
    files = installed_skill_files(skills_folder, skill_dir)
    taken = {skill_dir.name: skill_dir}
    for other in others:
        if other.resolve() == skill_dir.resolve():
            continue
        if other.name in taken:
            raise ConfigError(
                f"trigger_skills: two skills would be installed as {other.name}/; rename one "
                "of the folders"
            )
        if not (other / "SKILL.md").is_file():
            raise ConfigError(f"trigger_skills: {other.name} has no SKILL.md")
        taken[other.name] = other
        files += installed_skill_files(skills_folder, other)
    return files


def _installing(agent: Completer, files: Sequence[InstalledFile]) -> Completer:
    """The agent backend (a :class:`CLIBackend` with a skills folder, checked by
    :meth:`TriggerRun.skills_folder`) running each call among ``files``, under its in-flight
    cap if it has one."""
    if isinstance(agent, LimitedCompleter):
        return LimitedCompleter(_installing(agent.inner, files), agent.limit)
    assert isinstance(agent, CLIBackend)
    return agent.installing(files)


def _transcript(agent: Completer, query: str) -> Transcript | None:
    if not isinstance(agent, Transcribing):
        return None
    return agent.complete_transcribed("", query)[1]


@dataclass(frozen=True)
class TriggerRun:
    """What a query's runs share: the agent (built with installed delivery), the other skills,
    the pass rule, the cache and the redaction of error texts."""

    backends: Backends
    others: tuple[Path, ...]
    rule: PassRule
    cache: ResultCache | None = None
    redact: Callable[[str], str] = str

    def skills_folder(self) -> str:
        agent = self.backends.agent
        inner = agent.inner if isinstance(agent, LimitedCompleter) else agent
        if not isinstance(inner, CLIBackend) or not inner.skills_folder:
            backend = str(self.backends.agent_identity.get("backend", ""))
            raise ScenarioFailure(NOT_DISCOVERING.format(backend=backend or "the agent backend"))
        return inner.skills_folder


def _key(run: TriggerRun, query: TriggerQuery, index: int, files: Sequence[InstalledFile]) -> str:
    digest = hashlib.sha256()
    for name, data in sorted(files):
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    material: dict[str, Any] = {
        "query": query.query,
        "run": index,
        "agent": dict(run.backends.agent_identity),
        "skills": digest.hexdigest(),
    }
    return cache_key(TRIGGER_CACHE, material)


def _cached(entry: dict[str, Any] | None) -> Transcript | None:
    if entry is None:
        return None
    try:
        return Transcript.from_dict(entry["transcript"])
    except (AttributeError, KeyError, TypeError, ValueError):
        return None


def run_trigger_query(
    query: TriggerQuery, skill_dir: Path, skill: str, run: TriggerRun
) -> QueryOutcome:
    """The query's ``run.rule.runs`` runs and the rule's verdict. Raises
    :class:`ScenarioFailure` for a run that could not tell (no events) or failed."""
    files = installed_skills(run.skills_folder(), skill_dir, run.others)
    agent = _installing(run.backends.agent, files)
    names = skill_names(skill_dir)
    states: list[Activation] = []
    for index in range(1, run.rule.runs + 1):
        key = _key(run, query, index, files)
        transcript = _cached(run.cache.get(TRIGGER_CACHE, key)) if run.cache else None
        if transcript is None:
            try:
                transcript = call_with_retry(
                    lambda: _transcript(agent, query.query),
                    run.backends.retry,
                    describe="agent call",
                )
            except BackendError as exc:
                raise ScenarioFailure(run.redact(f"run {index}: agent: {exc}")) from exc
            if transcript is not None:  # what the agent said may hold a secret it read
                transcript = transcript.masked(run.redact)
            if transcript is not None and run.cache is not None:
                run.cache.put(TRIGGER_CACHE, key, {"transcript": transcript.to_dict()})
        state = activation(transcript, names)
        if state == UNKNOWN:
            raise ScenarioFailure(
                f"run {index}: the agent gave no events, so whether {skill_dir.name} loaded "
                "is unknown"
            )
        states.append(state)
    loads = sum(1 for state in states if state == LOADED)
    return QueryOutcome(
        skill,
        query.name,
        query.query,
        query.should_trigger,
        tuple(states),
        run.rule.passes(query.should_trigger, loads),
    )
