"""One scenario from folder to result: load -> prompt -> (agent -> graders) x trials -> score.

Every failure becomes data (an errored trial or scenario), never an exception, so that the
caller decides how to show it and the controller can still count it as 0 %. Agent results go
through the content cache (:mod:`pytest_openkata.infra.cache`) when one is given, and so do
the judge's verdicts (inside its grader); errors are never cached. Each live call's tokens,
seconds and cost are recorded.

The agent is a model backend, an agent CLI on the host, or (for a sandboxed scenario) an agent
CLI in a sandbox (:mod:`pytest_openkata.core.sandboxed`). Every registered grader then grades
the trial (:mod:`pytest_openkata.providers.graders`); their criterion results make the score.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_openkata.core.calls import NO_SLOTS, live_call
from pytest_openkata.core.errors import ScenarioFailure
from pytest_openkata.core.prompt import SkillTexts, build_prompt
from pytest_openkata.core.results import (
    AgentResult,
    CallStats,
    CriterionResult,
    ScenarioResult,
    TrialResult,
    Usage,
)
from pytest_openkata.core.sandboxed import SandboxSetup, run_in_sandbox
from pytest_openkata.core.scenario import (
    Scenario,
    ScenarioLoadError,
    load_scenario,
    read_description,
)
from pytest_openkata.core.slots import CallSlot
from pytest_openkata.core.trials import combine_trials, errored_trial, scored_trial
from pytest_openkata.core.workspace import diff_from_json, diff_to_json, workspace_digest
from pytest_openkata.infra.cache import ResultCache, cache_key
from pytest_openkata.infra.retry import RetryPolicy, call_with_retry
from pytest_openkata.infra.usage import Prices
from pytest_openkata.providers import registry
from pytest_openkata.providers.backends import BackendError, Completer, SkillAware
from pytest_openkata.providers.graders import GradeError, Grader, GradingContext, GradingTask

__all__ = [
    "NO_SLOTS",
    "Backends",
    "RunOptions",
    "ScenarioFailure",
    "SkillAware",
    "registered_graders",
    "run_scenario",
]

DEFAULT_RETRY = RetryPolicy()
NO_SANDBOX = "sandboxed scenarios need a sandbox provider, and none is configured"
AGENT_CACHE = "agent"


@dataclass(frozen=True)
class Backends:
    agent: Completer
    judge: Completer
    retry: RetryPolicy = DEFAULT_RETRY
    sandbox: Callable[[], SandboxSetup] | None = None
    # Backend kind, model and endpoint of each side, and the sandbox's image, agent command
    # and default network, for the cache keys (no secrets), known without connecting.
    agent_identity: Mapping[str, Any] = field(default_factory=dict)
    judge_identity: Mapping[str, Any] = field(default_factory=dict)
    sandbox_identity: Mapping[str, Any] = field(default_factory=dict)
    # Called once the run is over, e.g. to stop agent CLIs still running after Ctrl-C.
    closers: tuple[Callable[[], None], ...] = ()

    def agent_of(self, skill_dir: Path) -> Completer:
        agent = self.agent
        return agent.for_skill(skill_dir) if isinstance(agent, SkillAware) else agent


def registered_graders() -> tuple[Grader, ...]:
    """One instance of every registered grader, in name order."""
    return tuple(registry.GRADERS.load(name)() for name in registry.GRADERS.names())


@dataclass(frozen=True)
class RunOptions:
    """How to run each scenario: trials, judge votes, fencing, cache, prices and graders."""

    trials: int = 1
    judge_votes: int = 1
    fence: bool = False
    cache: ResultCache | None = None
    agent_prices: Prices = field(default_factory=Prices)
    judge_prices: Prices = field(default_factory=Prices)
    # The skills' part of the prompts, read once per run (None: read for every scenario).
    skill_texts: SkillTexts | None = None
    # The graders of every trial (None: every registered grader).
    graders: tuple[Grader, ...] | None = None

    def __post_init__(self) -> None:
        if self.trials < 1 or self.judge_votes < 1:
            raise ValueError("trials and judge_votes must be at least 1")


def _agent_from_cache(entry: dict[str, Any] | None) -> AgentResult | None:
    """The agent result of a cache entry; None (a miss) when it holds anything else."""
    if entry is None or not isinstance(entry.get("response"), str):
        return None
    output = entry.get("output", entry["response"])
    changes = entry.get("changes")
    try:
        diff = None if changes is None else diff_from_json(changes)
    except (KeyError, TypeError, ValueError):
        return None
    if not isinstance(output, str):
        return None
    return AgentResult(entry["response"], output, diff, cached=True)


def _agent_to_cache(result: AgentResult) -> dict[str, Any]:
    entry: dict[str, Any] = {"response": result.text}
    if result.output != result.text:
        entry["output"] = result.output
    if result.changes is not None:
        entry["changes"] = diff_to_json(result.changes)
    return entry


class _ScenarioRun:
    """The trials of one loaded scenario."""

    def __init__(
        self,
        scenario: Scenario,
        prompt: str,
        backends: Backends,
        options: RunOptions,
        *,
        redact: Callable[[str], str],
        slot: CallSlot,
    ) -> None:
        self.scenario = scenario
        self.prompt = prompt
        self.backends = backends
        self.options = options
        self.redact = redact
        self.slot = slot
        self._agent_material: dict[str, Any] | None = None
        self.graders = registered_graders() if options.graders is None else options.graders
        self.grading = GradingContext(
            judge=backends.judge,
            judge_identity=backends.judge_identity,
            retry=backends.retry,
            votes=options.judge_votes,
            fence=options.fence,
            cache=options.cache,
            prices=options.judge_prices,
            redact=redact,
            slot=slot,
        )

    # -- the agent -------------------------------------------------------------------------

    def _material(self) -> dict[str, Any]:
        """The agent side of every trial's cache key: backend, model, prompt and, for a
        sandboxed scenario, the image, agent command, network and workspace content."""
        if self._agent_material is None:
            scenario = self.scenario
            material: dict[str, Any] = {"prompt": self.prompt}
            if scenario.sandbox:
                identity = self.backends.sandbox_identity
                material["sandbox"] = {
                    **identity,
                    "network": scenario.network or identity.get("network", ""),
                    "workspace": workspace_digest(scenario.skill_dir, scenario.path),
                }
            else:
                material["agent"] = dict(self.backends.agent_identity)
            self._agent_material = material
        return self._agent_material

    def _sandbox(self) -> SandboxSetup:
        if self.backends.sandbox is None:
            raise ScenarioFailure(NO_SANDBOX)
        try:
            return self.backends.sandbox()
        except BackendError as exc:
            raise ScenarioFailure(f"sandbox: {exc}") from exc

    def _call_agent(self) -> AgentResult:
        scenario, retry = self.scenario, self.backends.retry
        if scenario.sandbox:
            try:
                return run_in_sandbox(scenario, self.prompt, self._sandbox(), retry)
            except BackendError as exc:
                raise ScenarioFailure(f"sandbox: {exc}") from exc
        try:
            agent = self.backends.agent_of(scenario.skill_dir)
            answer = call_with_retry(
                lambda: agent.complete("", self.prompt), retry, describe="agent call"
            )
        except BackendError as exc:
            raise ScenarioFailure(f"agent: {exc}") from exc
        return AgentResult(answer, answer)

    def agent_result(self, trial: int) -> tuple[AgentResult, CallStats]:
        cache = self.options.cache
        key = ""
        if cache is not None:
            key = cache_key(AGENT_CACHE, {**self._material(), "trial": trial})
            hit = _agent_from_cache(cache.get(AGENT_CACHE, key))
            if hit is not None:
                return hit, CallStats(cached=1)
        result, stats = live_call(self._call_agent, self.options.agent_prices, self.slot)
        # Secrets the agent printed or wrote never reach the graders, the cache or a report.
        result = AgentResult(self.redact(result.text), self.redact(result.output), result.changes)
        if cache is not None:
            cache.put(AGENT_CACHE, key, _agent_to_cache(result))
        return result, stats

    # -- one trial -------------------------------------------------------------------------

    def _error(self, exc: BaseException) -> str:
        return error_text(exc, self.redact, self.scenario.skill_dir)

    def trial(self, index: int) -> TrialResult:
        try:
            agent, agent_stats = self.agent_result(index)
        except ScenarioFailure as exc:
            output = None if exc.agent_output is None else self.redact(exc.agent_output)
            return errored_trial(index, self._error(exc), agent_output=output)
        task = GradingTask(self.scenario, agent, index, self.grading)
        judge_stats = CallStats()
        criteria: list[CriterionResult] = []
        for grader in self.graders:
            try:
                grading = grader.grade(task)
            except GradeError as exc:
                return errored_trial(
                    index,
                    self._error(exc),
                    agent_cached=agent.cached,
                    judge_errors=1 if exc.judge_error else 0,
                    usage=Usage(agent_stats, judge_stats + exc.usage),
                )
            criteria.extend(grading.criteria)
            judge_stats += grading.usage
        usage = Usage(agent_stats, judge_stats)
        return scored_trial(
            index,
            criteria,
            agent_cached=agent.cached,
            judge_cached=judge_stats.cached,
            usage=usage,
        )


def error_text(exc: BaseException, redact: Callable[[str], str], skill_dir: Path) -> str:
    """An error as reports show it: secrets masked, and files of the skill named relative to
    the skill folder (reports are committed: they hold no machine paths)."""
    return redact(str(exc)).replace(f"{skill_dir}{os.sep}", "")


def run_scenario(
    scenario_dir: Path,
    backends: Backends | Callable[[], Backends],
    *,
    skill_dir: Path | None = None,
    skill: str | None = None,
    redact: Callable[[str], str] = lambda text: text,
    options: RunOptions = RunOptions(),
    slot: CallSlot = NO_SLOTS,
    skill_scenarios: Sequence[str] = (),
) -> ScenarioResult:
    """Run one scenario and return its result; errors are returned as errored results.

    ``backends`` may be a factory, so that a backend that cannot be built (no base URL, no
    agent CLI) errors the scenarios that need it, like any other agent failure. The number of
    trials is the scenario's own (``scenario.json``) or else ``options.trials``. ``slot`` is
    held around every live agent run and judge call (cache hits need none).
    ``skill_scenarios`` names every scenario of the skill, for the gate's completeness.
    """
    skill_dir = skill_dir or scenario_dir.parent.parent
    identity = {
        "skill": skill or skill_dir.name,
        "skill_dir": str(skill_dir),
        "name": scenario_dir.name,
    }
    try:
        resolved = backends() if callable(backends) else backends
        scenario = load_scenario(scenario_dir)
        try:
            prompt = build_prompt(scenario.skill_dir, scenario.path, options.skill_texts)
        except FileNotFoundError as exc:
            raise ScenarioFailure(str(exc)) from exc
    except (ScenarioLoadError, ScenarioFailure, BackendError) as exc:
        trial = errored_trial(1, error_text(exc, redact, skill_dir))
        return combine_trials(
            [trial],
            description=read_description(scenario_dir),
            skill_scenarios=skill_scenarios,
            **identity,
        )
    run = _ScenarioRun(scenario, prompt, resolved, options, redact=redact, slot=slot)
    count = scenario.trials or options.trials
    trials = [run.trial(index) for index in range(1, count + 1)]
    return combine_trials(
        trials, description=scenario.description, skill_scenarios=skill_scenarios, **identity
    )
