"""One scenario from folder to result: load -> prompt -> (agent -> judge votes) x trials -> score.

Every failure becomes data (an errored trial or scenario), never an exception, so that the
caller decides how to show it and the controller can still count it as 0 %. Agent answers and
judge verdicts go through the content cache (:mod:`pytest_openkata.infra.cache`) when one is given;
errors are never cached. Each live call's tokens, seconds and cost are recorded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from pytest_openkata.core.prompt import SkillTexts, build_prompt
from pytest_openkata.core.results import (
    CallStats,
    CriterionResult,
    ScenarioResult,
    TrialResult,
    Usage,
    Verdict,
)
from pytest_openkata.core.scenario import (
    Scenario,
    ScenarioLoadError,
    load_scenario,
    read_description,
)
from pytest_openkata.core.scoring import match_verdicts
from pytest_openkata.core.slots import CallSlot
from pytest_openkata.core.trials import combine_trials, errored_trial, majority, scored_trial
from pytest_openkata.core.workspace import workspace_digest
from pytest_openkata.infra.cache import ResultCache, cache_key
from pytest_openkata.infra.retry import RetryPolicy, call_with_retry
from pytest_openkata.infra.usage import Prices, TokenUsage, add_usage, cost_usd, recording
from pytest_openkata.providers.backends import BackendError, Completer
from pytest_openkata.providers.graders.judge import (
    JudgeError,
    JudgeRequest,
    ask_judge,
    judge_request,
)
from pytest_openkata.providers.sandboxes import AgentCommand, Sandbox

DEFAULT_RETRY = RetryPolicy()
NO_SANDBOX = "sandboxed scenarios need a sandbox provider, and none is configured"
AGENT_CACHE = "agent"
JUDGE_CACHE = "judge"

T = TypeVar("T")


class ScenarioFailure(Exception):
    """Ends a trial (or, before the first trial, the scenario); its text is reported, with
    what a timed-out agent printed and changed when there is any."""

    def __init__(self, message: str, agent_output: str | None = None) -> None:
        super().__init__(message)
        self.agent_output = agent_output


@dataclass(frozen=True)
class SandboxSetup:
    """A sandbox provider and the agent command it runs for every sandboxed scenario."""

    sandbox: Sandbox
    agent: AgentCommand
    network: str  # used when the scenario names none
    timeout: float


@dataclass(frozen=True)
class Backends:
    agent: Completer
    judge: Completer
    retry: RetryPolicy = DEFAULT_RETRY
    sandbox: Callable[[], SandboxSetup] | None = None
    # For agents that work inside a folder prepared from the skill (kiro's agent mode).
    agent_for_skill: Callable[[Path], Completer] | None = None
    # Backend kind, model and endpoint of each side, and the sandbox's image, agent command
    # and default network, for the cache keys (no secrets), known without connecting.
    agent_identity: Mapping[str, Any] = field(default_factory=dict)
    judge_identity: Mapping[str, Any] = field(default_factory=dict)
    sandbox_identity: Mapping[str, Any] = field(default_factory=dict)
    # Called once the run is over, e.g. to stop agent CLIs still running after Ctrl-C.
    closers: tuple[Callable[[], None], ...] = ()

    def agent_of(self, skill_dir: Path) -> Completer:
        return self.agent if self.agent_for_skill is None else self.agent_for_skill(skill_dir)


@dataclass(frozen=True)
class RunOptions:
    """How to run each scenario: trials, judge votes, fencing, cache and prices."""

    trials: int = 1
    judge_votes: int = 1
    fence: bool = False
    cache: ResultCache | None = None
    agent_prices: Prices = field(default_factory=Prices)
    judge_prices: Prices = field(default_factory=Prices)
    # The skills' part of the prompts, read once per run (None: read for every scenario).
    skill_texts: SkillTexts | None = None

    def __post_init__(self) -> None:
        if self.trials < 1 or self.judge_votes < 1:
            raise ValueError("trials and judge_votes must be at least 1")


@dataclass(frozen=True)
class _Answer:
    text: str
    cached: bool
    stats: CallStats


NO_SLOTS: CallSlot = nullcontext()


def _live_call(call: Callable[[], T], prices: Prices, slot: CallSlot) -> tuple[T, CallStats]:
    """Run ``call`` in a call slot, timing it (not the wait for the slot) and collecting the
    tokens the backend reported."""
    with slot, recording() as entries:
        started = time.perf_counter()
        value = call()
        seconds = time.perf_counter() - started
    tokens = add_usage(entries) if entries else TokenUsage()
    stats = CallStats(
        calls=1,
        input_tokens=tokens.input_tokens,
        output_tokens=tokens.output_tokens,
        seconds=seconds,
        cost_usd=cost_usd(tokens, prices),
    )
    return value, stats


def _cached(cache: ResultCache | None, kind: str, key: str) -> dict[str, Any] | None:
    return None if cache is None else cache.get(kind, key)


def _store(cache: ResultCache | None, kind: str, key: str, value: dict[str, Any]) -> None:
    if cache is not None:
        cache.put(kind, key, value)


def _run_in_sandbox(
    scenario: Scenario, prompt: str, setup: SandboxSetup, retry: RetryPolicy
) -> str:
    """The judge's text for a sandboxed scenario: the agent's output and workspace changes."""
    run = call_with_retry(
        lambda: setup.sandbox.run(
            skill_dir=scenario.skill_dir,
            scenario_dir=scenario.path,
            network=scenario.network or setup.network,
            prompt=prompt,
            agent=setup.agent,
        ),
        retry,
        describe="sandbox run",
    )
    name = setup.agent.name
    if run.timed_out:
        raise ScenarioFailure(
            f"sandbox: {name} timed out after {setup.timeout:g} s (its partial output and "
            "workspace changes are in the report's agent_output)",
            agent_output=run.judge_text,
        )
    if run.exit_code != 0:
        tail = run.output.strip().splitlines()[-5:]
        detail = ("\n" + "\n".join(tail)) if tail else ""
        raise ScenarioFailure(f"sandbox: {name}: exit status {run.exit_code}{detail}")
    return run.judge_text


def _cached_verdicts(entry: dict[str, Any] | None) -> list[Verdict] | None:
    """The verdicts of a judge cache entry; None (a miss) when it holds anything else."""
    if entry is None or not isinstance(entry.get("verdicts"), list):
        return None
    verdicts = []
    for item in entry["verdicts"]:
        if not isinstance(item, dict):
            return None
        name, passed, reason = item.get("name"), item.get("passed"), item.get("reason")
        if not (isinstance(name, str) and isinstance(passed, bool) and isinstance(reason, str)):
            return None
        verdicts.append(Verdict(name, passed, reason))
    return verdicts


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

    def _call_agent(self) -> str:
        scenario, retry = self.scenario, self.backends.retry
        if scenario.sandbox:
            try:
                return _run_in_sandbox(scenario, self.prompt, self._sandbox(), retry)
            except BackendError as exc:
                raise ScenarioFailure(f"sandbox: {exc}") from exc
        try:
            agent = self.backends.agent_of(scenario.skill_dir)
            return call_with_retry(
                lambda: agent.complete("", self.prompt), retry, describe="agent call"
            )
        except BackendError as exc:
            raise ScenarioFailure(f"agent: {exc}") from exc

    def agent_answer(self, trial: int) -> _Answer:
        cache = self.options.cache
        key = ""
        if cache is not None:
            key = cache_key(AGENT_CACHE, {**self._material(), "trial": trial})
        hit = _cached(cache, AGENT_CACHE, key)
        if hit is not None and isinstance(hit.get("response"), str):
            return _Answer(hit["response"], True, CallStats(cached=1))
        text, stats = _live_call(self._call_agent, self.options.agent_prices, self.slot)
        # Secrets the agent printed or wrote never reach the judge, the cache or a report.
        text = self.redact(text)
        _store(cache, AGENT_CACHE, key, {"response": text})
        return _Answer(text, False, stats)

    # -- the judge -------------------------------------------------------------------------

    def judge_vote(
        self, request: JudgeRequest, trial: int, vote: int
    ) -> tuple[list[Verdict], CallStats]:
        cache = self.options.cache
        key = ""
        if cache is not None:
            material = {
                "judge": dict(self.backends.judge_identity),
                "system": request.system,
                "user": request.user,
                "schema": request.schema.schema,
                "trial": trial,
                "vote": vote,
            }
            key = cache_key(JUDGE_CACHE, material)
        cached = _cached_verdicts(_cached(cache, JUDGE_CACHE, key))
        if cached is not None:
            return cached, CallStats(cached=1)
        verdicts, stats = _live_call(
            lambda: ask_judge(self.backends.judge, request, retry=self.backends.retry),
            self.options.judge_prices,
            self.slot,
        )
        verdicts = [replace(v, reason=self.redact(v.reason)) for v in verdicts]
        _store(cache, JUDGE_CACHE, key, {"verdicts": [asdict(v) for v in verdicts]})
        return verdicts, stats

    # -- one trial -------------------------------------------------------------------------

    def trial(self, index: int) -> TrialResult:
        try:
            answer = self.agent_answer(index)
        except ScenarioFailure as exc:
            output = None if exc.agent_output is None else self.redact(exc.agent_output)
            return errored_trial(index, self.redact(str(exc)), agent_output=output)
        usage = Usage(agent=answer.stats)
        scenario, votes = self.scenario, self.options.judge_votes
        request = judge_request(
            answer.text, scenario.context, scenario.criteria, fence=self.options.fence
        )
        ballots: list[list[CriterionResult]] = []
        for vote in range(1, votes + 1):
            try:
                verdicts, stats = self.judge_vote(request, index, vote)
            except JudgeError as exc:
                where = f"vote {vote} of {votes}: " if votes > 1 else ""
                return errored_trial(
                    index,
                    self.redact(f"judge: {where}{exc}"),
                    agent_cached=answer.cached,
                    judge_errors=1,
                    usage=usage,
                )
            usage = Usage(usage.agent, usage.judge + stats)
            ballots.append(match_verdicts(scenario.criteria, verdicts))
        criteria = [replace(c, reason=self.redact(c.reason)) for c in majority(ballots)]
        return scored_trial(
            index,
            criteria,
            agent_cached=answer.cached,
            judge_cached=usage.judge.cached,
            usage=usage,
        )


def run_scenario(
    scenario_dir: Path,
    backends: Backends | Callable[[], Backends],
    *,
    skill_dir: Path | None = None,
    skill: str | None = None,
    redact: Callable[[str], str] = lambda text: text,
    options: RunOptions = RunOptions(),
    slot: CallSlot = NO_SLOTS,
) -> ScenarioResult:
    """Run one scenario and return its result; errors are returned as errored results.

    ``backends`` may be a factory, so that a backend that cannot be built (no base URL, no
    agent CLI) errors the scenarios that need it, like any other agent failure. The number of
    trials is the scenario's own (``scenario.json``) or else ``options.trials``. ``slot`` is
    held around every live agent run and judge call (cache hits need none).
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
        trial = errored_trial(1, redact(str(exc)))
        return combine_trials([trial], description=read_description(scenario_dir), **identity)
    run = _ScenarioRun(scenario, prompt, resolved, options, redact=redact, slot=slot)
    count = scenario.trials or options.trials
    trials = [run.trial(index) for index in range(1, count + 1)]
    return combine_trials(trials, description=scenario.description, **identity)
