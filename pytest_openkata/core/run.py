"""One scenario from folder to result: load -> prompt -> (agent -> graders) x trials -> score.

Every failure becomes data (an errored trial or scenario), never an exception, so that the
caller decides how to show it and the controller can still count it as 0 %. Agent results go
through the content cache (:mod:`pytest_openkata.infra.cache`) when one is given, and so do
the judge's verdicts (inside its grader); errors are never cached. Each live call's tokens,
seconds and cost are recorded.

The agent is a model backend, an agent CLI on the host, or (for a sandboxed scenario) an agent
CLI in a sandbox (:mod:`pytest_openkata.core.sandboxed`). Every registered grader then grades
the trial (:mod:`pytest_openkata.providers.graders`); their criterion results make the score.

A run that re-judges a recorded one (``RunOptions.recorded``) takes every trial's agent result
from the record instead (:mod:`pytest_openkata.core.recorded`): no agent runs, and only the
graders work.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_openkata.contracts.backends import (
    Completer,
    Conversing,
    HoldsSessions,
    Message,
    SkillAware,
    Transcribing,
)
from pytest_openkata.contracts.errors import (
    CHECK_FAILED,
    INVALID_INPUT,
    MODEL_ENDPOINT,
    RETRIED_CAUSES,
    SANDBOX_SETUP,
    AgentConfigError,
    BackendError,
    error_cause,
)
from pytest_openkata.contracts.results import (
    INFRASTRUCTURE_ERROR,
    SCENARIO_ERROR,
    SKILL_ERROR,
    AgentResult,
    Attempt,
    AutoTrials,
    CallStats,
    CriterionResult,
    FileChange,
    PairwiseTrial,
    ScenarioResult,
    TrialResult,
    TrialTrace,
    Turn,
    Usage,
)
from pytest_openkata.contracts.sandboxes import NamesOwnImages
from pytest_openkata.contracts.transcripts import Transcript, one_turn
from pytest_openkata.core.arms import OWN_ARM, Arm, ArmError, baseline_arm
from pytest_openkata.core.auto_trials import AutoTrialRule
from pytest_openkata.core.budget import BUDGET_REACHED, BudgetGuard, BudgetReached
from pytest_openkata.core.calls import NO_SLOTS, live_call
from pytest_openkata.core.checks import CANNOT_START, Check, CommandOutcome, command_checks
from pytest_openkata.core.conversation import (
    Conversation,
    NextPrompt,
    SendPrompt,
    converse,
    scripted,
    then,
)
from pytest_openkata.core.errors import ScenarioFailure
from pytest_openkata.core.grading import (
    DEFAULT_ORDER,
    GradeError,
    Grader,
    GradingContext,
    GradingTask,
)
from pytest_openkata.core.jsonfiles import ScenarioLoadError
from pytest_openkata.core.pairwise_judge import compare_trials
from pytest_openkata.core.prompt import PART_SEPARATOR, SkillFileError, SkillTexts, build_prompt
from pytest_openkata.core.recorded import (
    RecordedArm,
    RecordedRun,
    answered,
    recorded_agent,
    recorded_agent_calls,
    workspace_verdicts,
)
from pytest_openkata.core.sandboxed import (
    SandboxSetup,
    again_elsewhere,
    check_scripts,
    replay_commands,
    run_agent_in_sandbox,
    sandbox_spec,
)
from pytest_openkata.core.scenario import (
    Scenario,
    load_scenario,
    only_categories,
    read_description,
    scenario_digests,
    skill_of,
)
from pytest_openkata.core.scenario_image import own_image_identity
from pytest_openkata.core.simulated_user import simulated_user
from pytest_openkata.core.skill_delivery import PROMPT
from pytest_openkata.core.slots import CallSlot
from pytest_openkata.core.tile import TILE_FILE, unit_name
from pytest_openkata.core.trials import combine_trials, errored_trial, scored_trial
from pytest_openkata.core.variants import ACTIVATION_LINE, VariantPlan, VariantsError
from pytest_openkata.core.workspace import (
    diff_from_json,
    diff_to_json,
    file_changes,
    fixture_files,
    fixtures_digest,
    workspace_digest,
    workspace_files,
)
from pytest_openkata.infra import registry
from pytest_openkata.infra.cache import ResultCache, cache_key
from pytest_openkata.infra.retry import RetryPolicy, call_with_retry
from pytest_openkata.infra.tempfiles import new_run_folder
from pytest_openkata.infra.usage import Prices

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
CHECKS_CACHE = "checks"


@dataclass(frozen=True)
class Backends:
    agent: Completer
    judge: Completer
    retry: RetryPolicy = DEFAULT_RETRY
    sandbox: Callable[[], SandboxSetup] | None = None
    # Held around a sandboxed agent's run: a request in flight of the agent backend's cap
    # when the agent in the sandbox talks to that endpoint (see core/build.py).
    sandbox_in_flight: Callable[[], AbstractContextManager[None]] = nullcontext
    # Backend kind, model and endpoint of each side, and the sandbox's image, agent command
    # and default network, for the cache keys (no secrets), known without connecting.
    agent_identity: Mapping[str, Any] = field(default_factory=dict)
    judge_identity: Mapping[str, Any] = field(default_factory=dict)
    # The simulated user's own backend and identity (``simulated_user_model``); None: the
    # judge plays the user.
    simulated_user: Completer | None = None
    simulated_user_identity: Mapping[str, Any] = field(default_factory=dict)
    sandbox_identity: Mapping[str, Any] = field(default_factory=dict)
    # Called once the run is over, e.g. to stop agent CLIs still running after Ctrl-C.
    closers: tuple[Callable[[], None], ...] = ()

    def agent_of(self, skill_dir: Path, source: Path | bool = True) -> Completer:
        """The agent backend for the skill of ``skill_dir`` (``source``: where its installed
        skill comes from, as :meth:`SkillAware.for_skill` takes it)."""
        agent = self.agent
        return agent.for_skill(skill_dir, source=source) if isinstance(agent, SkillAware) else agent


def registered_graders() -> tuple[Grader, ...]:
    """One instance of every registered grader, by ``order`` and then name (the judge's
    criteria come first in every result, as the reference lists them)."""
    made = [registry.GRADERS.load(name)() for name in registry.GRADERS.names()]
    return tuple(sorted(made, key=lambda g: (getattr(g, "order", DEFAULT_ORDER), g.name)))


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
    # The baseline arm every scenario also runs in (``--eval-baseline``; "" for none), and
    # where the skills' files at a git ref are extracted.
    baseline: str = ""
    refs_folder: Path | None = None
    # The judge also compares the two arms' answers of every trial side by side
    # (:mod:`pytest_openkata.core.pairwise_judge`).
    judge_pairwise: bool = False
    # The judge schema's cap on a reason's length (0: none, the portable schema).
    judge_reason_max_chars: int = 0
    # ``trials`` wins over scenario.json's own count (a validation grades each run once).
    trials_fixed: bool = False
    # Only the criteria of these categories run and score (``--eval-category``; () for all).
    categories: tuple[str, ...] = ()
    # The values of the settings that installed providers declare, for the graders.
    provider_settings: Mapping[str, Any] = field(default_factory=dict)
    # How many times a trial that errored for the infrastructure (RETRIED_CAUSES) runs again.
    retry_infrastructure: int = 0
    # How the skill reaches the agent (:mod:`pytest_openkata.core.skill_delivery`): pasted
    # into the prompt, or installed where the agent discovers it (the prompt: the task alone).
    skill_delivery: str = PROMPT
    # ``trials = auto``: trials run one after another until this rule stops them (``trials``
    # is then its maximum); None runs ``trials`` trials. A scenario.json count still wins.
    auto_trials: AutoTrialRule | None = None
    # A recorded run to re-judge (the ``rejudge`` setting): every trial's agent answer comes
    # from it, the agent is never called, and each scenario runs as many trials as it holds.
    recorded: RecordedRun | None = None
    # The run's hard budget, shared by its processes (None: no budget): checked before each
    # trial starts, and each trial's spend added to it (:mod:`pytest_openkata.core.budget`).
    budget: BudgetGuard | None = None
    # The arms a variants file gives (:mod:`pytest_openkata.core.variants`), or why it gives
    # none: every scenario then errors with it (None: no variants file).
    variants: VariantPlan | VariantsError | None = None

    def __post_init__(self) -> None:
        if self.trials < 1 or self.judge_votes < 1:
            raise ValueError("trials and judge_votes must be at least 1")
        if self.retry_infrastructure < 0:
            raise ValueError("retry_infrastructure must not be negative")


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
    try:
        told = entry.get("transcript")
        transcript = None if told is None else Transcript.from_dict(told)
        turns = tuple(Turn(str(t["user"]), str(t["agent"])) for t in entry.get("turns", ()))
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    return AgentResult(
        entry["response"], output, diff, cached=True, transcript=transcript, turns=turns
    )


def _agent_name(scenario: Scenario, backends: Backends) -> str:
    """The agent as messages name it: the sandbox's agent CLI, or the agent backend."""
    if scenario.sandbox:
        argv = backends.sandbox_identity.get("argv") or [""]
        return Path(str(argv[0])).name
    return str(backends.agent_identity.get("backend", ""))


def _transcribed(agent: Completer, prompt: str) -> tuple[str, Transcript | None]:
    """The agent's answer, and how it was made where the backend says so (an agent CLI that
    prints its events, a model backend's one turn)."""
    if isinstance(agent, Transcribing):
        return agent.complete_transcribed("", prompt)
    return agent.complete("", prompt), None


def _agent_to_cache(result: AgentResult) -> dict[str, Any]:
    entry: dict[str, Any] = {"response": result.text}
    if result.output != result.text:
        entry["output"] = result.output
    if result.changes is not None:
        entry["changes"] = diff_to_json(result.changes)
    if result.transcript is not None:
        entry["transcript"] = result.transcript.to_dict()
    if result.turns:
        entry["turns"] = [{"user": turn.user, "agent": turn.agent} for turn in result.turns]
    return entry


def _messages_session(agent: Conversing) -> SendPrompt:
    """A model backend's conversation: every prompt and answer so far sent as messages."""
    messages: list[Message] = []

    def send(prompt: str) -> tuple[str, Transcript | None]:
        messages.append(("user", prompt))
        answer = agent.converse("", messages)
        messages.append(("assistant", answer))
        return answer, one_turn(answer)

    return send


def _cannot_continue(scenario: Scenario, why: str) -> ScenarioFailure:
    """The configuration error of a scenario with follow-ups whose agent cannot take them."""
    return ScenarioFailure(
        f"{why}: scenario {scenario.name} sends follow-up turns (follow_ups or simulated_user "
        "in scenario.json); use an agent that can continue its session, or remove them",
        kind=SCENARIO_ERROR,
    )


def _commands_from_cache(entry: dict[str, Any] | None) -> dict[str, CommandOutcome] | None:
    """The command outcomes of a checks cache entry; None (a miss) for anything else."""
    if entry is None or not isinstance(entry.get("commands"), dict):
        return None
    outcomes = {}
    for name, item in entry["commands"].items():
        if not isinstance(item, dict):
            return None
        code, output, timed_out = item.get("exit_code"), item.get("output"), item.get("timed_out")
        if not (
            (code is None or isinstance(code, int))
            and isinstance(output, str)
            and isinstance(timed_out, bool)
        ):
            return None
        outcomes[name] = CommandOutcome(code, output, timed_out)
    return outcomes


def _cacheable(outcomes: Mapping[str, CommandOutcome]) -> bool:
    """Whether every command gave a verdict: one that timed out or could not start is an
    error of the trial, and errors are never cached."""
    return not any(o.timed_out or o.exit_code in CANNOT_START for o in outcomes.values())


def _commands_to_cache(outcomes: Mapping[str, CommandOutcome]) -> dict[str, Any]:
    return {"commands": {name: asdict(outcome) for name, outcome in outcomes.items()}}


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
        arm: Arm = OWN_ARM,
        recorded: RecordedArm | None = None,
    ) -> None:
        self.scenario = scenario
        self.recorded = recorded
        self.arm = arm
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
            reason_max_chars=options.judge_reason_max_chars,
            provider_settings=options.provider_settings,
            agent_name=_agent_name(scenario, backends),
        )

    @functools.cached_property
    def _workspace_before(self) -> dict[str, bytes]:
        """The task, inputs and fixtures as the workspace holds them before the agent (what
        setup commands made is not known here), read once for every trial's diff."""
        scenario = self.scenario
        before = dict(workspace_files(scenario.skill_dir, scenario.path, skill=False))
        before.update(
            (name, data) for name, data, _ in fixture_files(scenario.skill_dir, scenario.fixtures)
        )
        return before

    def digests(self) -> dict[str, str]:
        current = self._current_digests
        if self.recorded is not None:  # what the agent ran is the recorded run's
            return self.recorded.graded_digests(current)
        return dict(current)

    @functools.cached_property
    def _current_digests(self) -> dict[str, str]:
        return scenario_digests(self.scenario.path, self.prompt, self.scenario.contents)

    def _recorded_trial(self, index: int) -> TrialResult | None:
        """Trial ``index`` of the recorded run being re-judged (None: a live run)."""
        if self.recorded is None:
            return None
        found = next((trial for trial in self.recorded.trials if trial.index == index), None)
        if found is None:  # an arm recorded with fewer trials than the other
            return errored_trial(
                index,
                f"trial {index} of this arm is not in the run log being re-judged",
                kind=SCENARIO_ERROR,
                cause=INVALID_INPUT,
            )
        return found

    # -- the agent -------------------------------------------------------------------------

    def _material(self) -> dict[str, Any]:
        """The agent side of every trial's cache key: backend, model, prompt and, for a
        sandboxed scenario, the image, agent command, network and workspace content."""
        if self._agent_material is None:
            scenario, arm = self.scenario, self.arm
            material: dict[str, Any] = {"prompt": self.prompt}
            if scenario.sandbox:
                identity = self.backends.sandbox_identity
                material["sandbox"] = {
                    **identity,
                    "network": scenario.network or identity.get("network", ""),
                    "workspace": workspace_digest(
                        scenario.skill_dir, scenario.path, skill=arm.skill
                    ),
                }
                # Only when given: the keys of a scenario without them stay as they were.
                if scenario.fixtures:
                    material["sandbox"]["fixtures"] = fixtures_digest(
                        scenario.skill_dir, scenario.fixtures
                    )
                if scenario.setup:
                    material["sandbox"]["setup"] = list(scenario.setup)
                own_image = own_image_identity(scenario)
                if own_image:
                    material["sandbox"]["own_image"] = {**own_image, **self._own_image_id()}
            else:
                material["agent"] = dict(self.backends.agent_identity)
            if arm.is_baseline:  # the own arm's keys stay those of a run without a baseline
                material["arm"] = arm.name
            # A variant's copy of the skill: its files (an installed skill is not in the
            # prompt); the keys of every other arm stay as they were.
            if arm.label and isinstance(arm.skill, Path):
                material["skill_files"] = workspace_digest(
                    scenario.skill_dir, scenario.path, skill=arm.skill
                )
            if scenario.follow_ups:  # a one-turn scenario's keys stay as they were
                material["follow_ups"] = list(scenario.follow_ups)
            user = scenario.simulated_user
            if user is not None:
                material["simulated_user"] = {
                    "instructions": user.instructions,
                    "max_turns": user.max_turns,
                    "model": dict(
                        self.backends.simulated_user_identity or self.backends.judge_identity
                    ),
                }
            if self.options.skill_delivery != PROMPT:  # the prompt delivery's keys stay
                material["skill_delivery"] = self.options.skill_delivery
                # Installed, the skill is in neither the prompt nor (for a direct scenario) a
                # workspace digest: an arm without it must not share the answers of an arm
                # with it. The keys of an arm with the skill stay as they were.
                if arm.skill is False and not scenario.sandbox:
                    material["skill_installed"] = False
            self._agent_material = material
        return self._agent_material

    def _own_image_id(self) -> dict[str, str]:
        """What the scenario's own image is on the engine (its build's context digest and
        base images' ids, or the named image's id), where the provider can say: a changed
        image or base image is never answered from the cache. It asks the engine, so a run
        of such a scenario needs one even when its answers are cached."""
        setup = self._sandbox()
        provider = setup.sandbox
        if not isinstance(provider, NamesOwnImages):
            return {}
        try:
            return {"id": provider.own_image_id(sandbox_spec(self.scenario, setup))}
        except BackendError as exc:
            raise ScenarioFailure(f"sandbox: {exc}") from exc

    def _sandbox(self) -> SandboxSetup:
        if self.backends.sandbox is None:
            raise ScenarioFailure(NO_SANDBOX, cause=INVALID_INPUT)
        try:
            return self.backends.sandbox()
        except BackendError as exc:
            raise ScenarioFailure(f"sandbox: {exc}") from exc

    def _commands(self) -> list[Check]:
        return command_checks(self.scenario.checks)

    def _follow(self) -> NextPrompt | None:
        """Where the prompts after the first answer come from: the scenario's follow-ups, then
        its simulated user (its own model, else the judge); None for a one-turn scenario."""
        scenario = self.scenario
        user = scenario.simulated_user
        if not scenario.follow_ups and user is None:
            return None
        follow = scripted(scenario.follow_ups)
        if user is None:
            return follow
        model = self.backends.simulated_user or self.backends.judge
        return then(follow, simulated_user(user, model, after=len(scenario.follow_ups)))

    @functools.cached_property
    def _task(self) -> str:
        """The first turn as a conversation shows it: task.md, without the skill."""
        return _task_text(self.scenario, self.redact).strip()

    def _call_agent(self) -> tuple[AgentResult, dict[str, CommandOutcome]]:
        scenario, retry, follow = self.scenario, self.backends.retry, self._follow()
        if scenario.sandbox:
            try:
                setup = self._sandbox()
                if follow is not None and setup.agent.continue_argv is None:
                    why = f"the agent {setup.agent.name} cannot continue a session"
                    raise _cannot_continue(scenario, why)
                with self.backends.sandbox_in_flight():
                    return run_agent_in_sandbox(
                        scenario,
                        self.prompt,
                        setup,
                        retry,
                        commands=self._commands(),
                        skill=self.arm.skill,
                        follow=follow,
                        task=self._task,
                    )
            except BackendError as exc:
                raise ScenarioFailure(f"sandbox: {exc}") from exc
        try:
            agent = self.backends.agent_of(scenario.skill_dir, self.arm.skill)
            if follow is not None:
                conversation = call_with_retry(
                    lambda: self._conversation(agent, follow), retry, describe="agent call"
                )
                answer = conversation.answer
                return AgentResult(
                    answer, answer, transcript=conversation.transcript, turns=conversation.turns
                ), {}
            answer, transcript = call_with_retry(
                lambda: _transcribed(agent, self.prompt), retry, describe="agent call"
            )
        except AgentConfigError as exc:
            if follow is None:
                raise ScenarioFailure(f"agent: {exc}") from exc
            raise _cannot_continue(scenario, str(exc)) from exc
        except BackendError as exc:
            raise ScenarioFailure(f"agent: {exc}") from exc
        return AgentResult(answer, answer, transcript=transcript), {}

    def _conversation(self, agent: Completer, follow: NextPrompt) -> Conversation:
        """The agent's conversation on the host: an agent CLI's session, or a model backend's
        messages."""
        if isinstance(agent, HoldsSessions):
            with agent.session() as send:
                return converse(send, self._task, self.prompt, follow)
        if isinstance(agent, Conversing):
            return converse(_messages_session(agent), self._task, self.prompt, follow)
        raise AgentConfigError(f"the agent {type(agent).__name__} cannot continue a conversation")

    def _commands_key(self, agent_key: str) -> str:
        """The cache key of the command checks' outcomes on one agent result: the checks'
        commands and scripts besides the agent's key, so that changing only ``checks.json``
        (or a script) runs only the checks again."""
        scripts = sorted(check_scripts(self.scenario))
        return cache_key(
            CHECKS_CACHE,
            {
                "agent": agent_key,
                "commands": [[c.name, c.run, c.timeout] for c in self._commands()],
                "scripts": [[name, hashlib.sha256(data).hexdigest()] for name, data in scripts],
            },
        )

    def _replayed_commands(self, agent: AgentResult) -> dict[str, CommandOutcome]:
        if agent.changes is None:
            raise ScenarioFailure(
                "checks: the cached agent result holds no workspace changes", cause=CHECK_FAILED
            )
        setup, changes, commands = self._sandbox(), agent.changes, self._commands()
        try:
            # A sandbox like the agent's own: it holds a call slot, and is retried alike.
            with self.slot:
                return again_elsewhere(
                    lambda: call_with_retry(
                        lambda: replay_commands(
                            self.scenario, setup, changes, commands, skill=self.arm.skill
                        ),
                        self.backends.retry,
                        describe="sandbox run of the checks",
                    ),
                    lost=[],
                )
        except BackendError as exc:
            raise ScenarioFailure(f"sandbox: checks: {exc}") from exc

    def agent_result(self, trial: int) -> tuple[AgentResult, CallStats, dict[str, CommandOutcome]]:
        """The agent's result of one trial, its calls, and how each command check ended on it
        (run with the agent, or again on a cached result's workspace when they are not cached)."""
        recorded = self._recorded_trial(trial)
        if recorded is not None:  # re-judged: the agent's answer as recorded, no call now
            return recorded_agent(recorded), CallStats(), {}
        cache = self.options.cache
        key = ""
        commands_wanted = bool(self._commands())
        if cache is not None:
            key = cache_key(AGENT_CACHE, {**self._material(), "trial": trial})
            hit = _agent_from_cache(cache.get(AGENT_CACHE, key))
            if hit is not None:
                if not commands_wanted:
                    return hit, CallStats(cached=1), {}
                commands_key = self._commands_key(key)
                outcomes = _commands_from_cache(cache.get(CHECKS_CACHE, commands_key))
                if outcomes is None:
                    outcomes = self._redacted(self._replayed_commands(hit))
                    if _cacheable(outcomes):
                        cache.put(CHECKS_CACHE, commands_key, _commands_to_cache(outcomes))
                return hit, CallStats(cached=1), outcomes
        (result, outcomes), stats = live_call(
            self._call_agent, self.options.agent_prices, self.slot, "agent"
        )
        # Secrets the agent printed or wrote never reach the graders, the cache or a report.
        result = replace(
            result,
            text=self.redact(result.text),
            output=self.redact(result.output),
            transcript=None if result.transcript is None else result.transcript.masked(self.redact),
            turns=tuple(
                Turn(self.redact(turn.user), self.redact(turn.agent)) for turn in result.turns
            ),
        )
        outcomes = self._redacted(outcomes)
        if cache is not None:
            cache.put(AGENT_CACHE, key, _agent_to_cache(result))
            if commands_wanted and _cacheable(outcomes):
                cache.put(CHECKS_CACHE, self._commands_key(key), _commands_to_cache(outcomes))
        return result, stats, outcomes

    def _redacted(self, outcomes: dict[str, CommandOutcome]) -> dict[str, CommandOutcome]:
        return {
            name: replace(outcome, output=self.redact(outcome.output))
            for name, outcome in outcomes.items()
        }

    # -- one trial -------------------------------------------------------------------------

    def _error(self, exc: BaseException) -> str:
        return error_text(exc, self.redact, self.scenario.skill_dir)

    def _cause(self, exc: BaseException) -> str:
        """The kind of failure ``exc`` is; what no raiser classified is the sandbox's for a
        sandboxed scenario, the model endpoint's for a direct one."""
        return error_cause(exc, SANDBOX_SETUP if self.scenario.sandbox else MODEL_ENDPOINT)

    def trial(self, index: int) -> TrialResult:
        """Trial ``index``, run again while it errors for the infrastructure and
        ``retry_infrastructure`` allows; the attempts before the last are kept in it. A
        re-judged trial's usage holds only this run's (judge) calls: the recorded agent's
        calls are kept apart (``recorded_agent``), out of the budget and the run's spend."""
        recorded = self._recorded_trial(index)
        if recorded is not None and not answered(recorded):
            return recorded  # its agent errored: there is no answer to grade again
        earlier: list[Attempt] = []
        while True:
            result = self._one_trial(index)
            if recorded is not None:
                result = replace(result, recorded_agent=recorded_agent_calls(recorded))
            if self.options.budget is not None:  # every attempt's calls were paid for
                self.options.budget.spend(result.usage)
            retried = (
                result.error is not None
                and result.error_cause in RETRIED_CAUSES
                and len(earlier) < self.options.retry_infrastructure
            )
            if not retried:
                return replace(result, attempts=tuple(earlier)) if earlier else result
            seconds = 0.0 if result.trace is None else result.trace.seconds
            earlier.append(
                Attempt(len(earlier) + 1, result.error or "", result.error_cause, seconds)
            )

    def _one_trial(self, index: int) -> TrialResult:
        started = time.monotonic()

        def seconds() -> float:
            return round(time.monotonic() - started, 3)

        try:
            agent, agent_stats, commands = self.agent_result(index)
        except ScenarioFailure as exc:
            output = None if exc.agent_output is None else self.redact(exc.agent_output)
            trace = TrialTrace(seconds=seconds(), skill_delivery=self.options.skill_delivery)
            return errored_trial(
                index,
                self._error(exc),
                kind=exc.kind or INFRASTRUCTURE_ERROR,
                cause=INVALID_INPUT if exc.kind else self._cause(exc),
                agent_output=output,
                trace=trace,
                environment=exc.environment,
            )
        recorded = self._recorded_trial(index)
        checks = None
        if recorded is not None:
            changed = self.recorded is not None and self.recorded.checks_changed(
                self._current_digests
            )
            checks = workspace_verdicts(recorded, checks_changed=changed)
        task = GradingTask(
            self.scenario,
            agent,
            index,
            self.grading,
            arm=self.arm.name,
            commands=commands,
            recorded_checks=checks,
        )
        judge_stats = CallStats()
        criteria: list[CriterionResult] = []
        answers: dict[str, list[Any]] = {}
        for grader in self.graders:
            try:
                grading = grader.grade(task)
            except GradeError as exc:
                return errored_trial(
                    index,
                    self._error(exc),
                    kind=exc.kind,
                    cause=self._grade_cause(exc),
                    agent_cached=agent.cached,
                    judge_errors=1 if exc.judge_error else 0,
                    usage=Usage(agent_stats, judge_stats + exc.usage),
                    trace=self._trace(agent, answers, seconds(), index),
                    environment=agent.environment,
                )
            criteria.extend(grading.criteria)
            judge_stats += grading.usage
            if grading.answers:
                answers[grader.name] = grading.answers
        usage = Usage(agent_stats, judge_stats)
        return scored_trial(
            index,
            criteria,
            agent_cached=agent.cached,
            judge_cached=judge_stats.cached,
            usage=usage,
            trace=self._trace(agent, answers, seconds(), index),
            environment=agent.environment,
        )

    def _grade_cause(self, exc: GradeError) -> str:
        """A grader's failure: the scenario's own files when it is their fault, else what
        failed under it (a check that could not run, the judge's endpoint)."""
        if exc.kind != INFRASTRUCTURE_ERROR:
            return INVALID_INPUT
        return error_cause(exc, MODEL_ENDPOINT)

    def _trace(
        self, agent: AgentResult, answers: dict[str, list[Any]], seconds: float, index: int
    ) -> TrialTrace:
        changes: tuple[FileChange, ...] = ()
        recorded = self._recorded_trial(index)
        if recorded is not None:  # re-judged: the workspace changes as the record shows them
            changes = () if recorded.trace is None else recorded.trace.changes
        elif agent.changes is not None:
            # The diff shows the files' text: a secret the agent wrote is masked here too.
            changes = tuple(
                FileChange(self.redact(c.path), c.status, self.redact(c.diff))
                for c in file_changes(self._workspace_before, agent.changes)
            )
        judged = None if agent.text == agent.output else agent.text
        return TrialTrace(
            agent.output,
            judged,
            changes,
            answers,
            seconds,
            engine=agent.engine,
            lost_engines=tuple(self.redact(lost) for lost in agent.lost_engines),
            transcript=agent.transcript,
            skill_delivery=self.options.skill_delivery,
            turns=agent.turns,
        )


def error_text(exc: BaseException, redact: Callable[[str], str], skill_dir: Path) -> str:
    """An error as reports show it: secrets masked, and files of the skill named relative to
    the skill folder (reports are committed: they hold no machine paths)."""
    return redact(str(exc)).replace(f"{skill_dir}{os.sep}", "")


def _error_kind(exc: Exception, scenario_dir: Path) -> str:
    """Why a scenario could not start: a backend that cannot be built is the run's dependency
    failing; a missing or broken SKILL.md (or a tile's tile.json) is the skill itself; the rest
    is the scenario's own files (a missing task, a broken criteria.json)."""
    if isinstance(exc, BackendError):
        return INFRASTRUCTURE_ERROR
    own = Path(os.path.normpath(skill_of(scenario_dir)))  # where load_scenario reads
    if isinstance(exc, SkillFileError) or (
        isinstance(exc, ScenarioLoadError)
        and Path(os.path.normpath(exc.path)) in (own / "SKILL.md", own / TILE_FILE)
    ):
        return SKILL_ERROR
    return SCENARIO_ERROR


def _trials(
    run: _ScenarioRun,
    baseline: _ScenarioRun | TrialResult | None,
    indices: Sequence[int],
    rule: AutoTrialRule | None,
    options: RunOptions,
) -> tuple[list[TrialResult], list[TrialResult] | None, AutoTrials | None]:
    """The scenario's trials in both arms (the baseline's None without one), and how
    ``trials = auto`` stopped them (None when it did not run)."""
    trials: list[TrialResult] = []
    other: list[TrialResult] | None = None
    if baseline is not None:
        other = [] if isinstance(baseline, _ScenarioRun) else [baseline]
    auto = None
    for index in indices:
        if options.budget is not None and not options.budget.check():
            if not trials:
                raise BudgetReached(f"{BUDGET_REACHED}: scenario {run.scenario.name} was not run")
            break  # the trials that ran are kept; the rest never start
        own = run.trial(index)
        if isinstance(baseline, _ScenarioRun) and other is not None:
            # Interleaved, so that a drift of the endpoint over the run touches both arms alike.
            theirs = baseline.trial(index)
            if options.judge_pairwise:
                own = replace(own, pairwise=_pairwise(run, own, theirs, options.baseline))
            other.append(theirs)
        trials.append(own)
        if rule is not None:
            stop, auto = rule.verdict(trials)
            if stop:
                break
    return trials, other, auto


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
    trials is the scenario's own (``scenario.json``) or else ``options.trials``; with
    ``options.auto_trials`` (and no count of the scenario's own) ``options.trials`` is the most,
    and the trials stop once the rule settles the scenario
    (:mod:`pytest_openkata.core.auto_trials`). ``slot`` is
    held around every live agent run and judge call (cache hits need none).
    ``skill_scenarios`` names every scenario of the skill, for the gate's completeness.
    Raises :class:`~pytest_openkata.core.budget.BudgetReached` when the run's budget was
    reached before the scenario's first trial.
    """
    skill_dir = skill_dir or skill_of(scenario_dir)
    identity = {
        "skill": skill or unit_name(skill_dir),
        "skill_dir": str(skill_dir),
        "name": scenario_dir.name,
    }
    recorded = None
    try:
        if options.recorded is not None:
            recorded = options.recorded.arm_of(skill_dir, scenario_dir.name)
            if recorded is None:
                raise ScenarioFailure(options.recorded.missing(skill_dir, scenario_dir.name))
        resolved = backends() if callable(backends) else backends
        scenario = only_categories(load_scenario(scenario_dir), options.categories)
        if not scenario.criteria and not scenario.checks:
            wanted = ", ".join(options.categories)
            raise ScenarioFailure(f"criteria.json has no criteria of category {wanted}")
        own, from_variants = _variant_arms(scenario, options)
        try:
            prompt = _arm_prompt(scenario, options, own)
        except SkillFileError:
            raise
        except FileNotFoundError as exc:
            raise ScenarioFailure(str(exc)) from exc
    except (ScenarioLoadError, ScenarioFailure, BackendError, SkillFileError, ArmError) as exc:
        kind = _error_kind(exc, scenario_dir)
        cause = INVALID_INPUT if kind != INFRASTRUCTURE_ERROR else error_cause(exc, INVALID_INPUT)
        trial = errored_trial(1, error_text(exc, redact, skill_dir), kind=kind, cause=cause)
        return combine_trials(
            [trial],
            description=read_description(scenario_dir),
            skill_scenarios=skill_scenarios,
            **identity,
        )
    run = _ScenarioRun(
        scenario, prompt, resolved, options, redact=redact, slot=slot, arm=own, recorded=recorded
    )
    count = options.trials if options.trials_fixed else scenario.trials or options.trials
    rule = None if options.trials_fixed or scenario.trials else options.auto_trials
    indices = list(range(1, count + 1))
    if recorded is not None:  # re-judged: the trials the record holds, however they stopped
        indices = [trial.index for trial in recorded.trials]
        rule = None
    baseline = _baseline_run(
        scenario,
        resolved,
        options,
        redact=redact,
        slot=slot,
        skill_dir=skill_dir,
        from_variants=from_variants,
    )
    trials, other, auto = _trials(run, baseline, indices, rule, options)
    result = combine_trials(
        trials, description=scenario.description, skill_scenarios=skill_scenarios, **identity
    )
    task = _task_text(scenario, redact) if recorded is None else recorded.task
    result = replace(result, digests=run.digests(), task=task, auto_trials=auto)
    if other is None:
        return result
    compared = combine_trials(
        other, description=scenario.description, skill_scenarios=skill_scenarios, **identity
    )
    digests = {} if not isinstance(baseline, _ScenarioRun) else baseline.digests()
    arm = from_variants.name if from_variants is not None else options.baseline
    return replace(result, baseline=replace(compared, arm=arm, digests=digests, task=result.task))


def _pairwise(
    run: _ScenarioRun, own: TrialResult, theirs: TrialResult, arm: str
) -> PairwiseTrial | None:
    """The judge's side-by-side comparison of one trial's two arms, on the criteria the judge
    grades (the checks of checks.json are not a matter of opinion)."""
    scenario = run.scenario
    compared = compare_trials(
        own, theirs, scenario.criteria, scenario.context, run.grading, arm=arm
    )
    if compared is not None and run.options.budget is not None:  # its calls are paid for too
        run.options.budget.spend(Usage(judge=compared.usage))
    return compared


def _task_text(scenario: Scenario, redact: Callable[[str], str]) -> str:
    """task.md as loading read it, read as text (universal newlines), redacted."""
    content = scenario.contents.get("task.md")
    if content is None:
        try:
            content = (scenario.path / "task.md").read_bytes()
        except OSError:
            return ""
    text = content.decode("utf-8", errors="replace")
    return redact(text.replace("\r\n", "\n").replace("\r", "\n"))


@functools.cache
def _private_refs_folder() -> Path:
    """Where a run given no ``refs_folder`` extracts skills at a git ref: a folder of this
    process's own (a shared, predictable one could be planted by another user), removed when
    the process exits."""
    folder = new_run_folder("refs")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _baseline_run(
    scenario: Scenario,
    backends: Backends,
    options: RunOptions,
    *,
    redact: Callable[[str], str],
    slot: CallSlot,
    skill_dir: Path,
    from_variants: Arm | None = None,
) -> _ScenarioRun | TrialResult | None:
    """The run of the scenario's baseline arm (``from_variants``: the arm a variants file
    gives); an errored trial when that arm cannot be made (an unknown git ref), None without
    a baseline."""
    if not options.baseline and from_variants is None:
        return None
    if options.recorded is not None:
        return _recorded_baseline(
            scenario, backends, options, redact=redact, slot=slot, skill_dir=skill_dir
        )
    try:
        refs = options.refs_folder or _private_refs_folder()
        arm = from_variants or baseline_arm(options.baseline, scenario.skill_dir, refs)
        assert arm is not None
        prompt = _arm_prompt(scenario, options, arm)
    except (ArmError, FileNotFoundError, ScenarioLoadError) as exc:  # a tile.json at the ref
        text = error_text(exc, redact, scenario.skill_dir)
        return errored_trial(1, text, kind=SCENARIO_ERROR, cause=INVALID_INPUT)
    return _ScenarioRun(scenario, prompt, backends, options, redact=redact, slot=slot, arm=arm)


def _variant_arms(scenario: Scenario, options: RunOptions) -> tuple[Arm, Arm | None]:
    """The own arm, and the baseline arm a variants file gives (None: the ``baseline``
    setting's, if any). Raises :class:`~pytest_openkata.core.variants.VariantsError`."""
    plan = options.variants
    if plan is None:
        return OWN_ARM, None
    if isinstance(plan, VariantsError):
        raise plan
    return plan.arms(scenario.skill_dir, sandboxed=bool(scenario.sandbox))


def _arm_prompt(scenario: Scenario, options: RunOptions, arm: Arm) -> str:
    """The prompt of ``arm``: with the skill delivered in the prompt, the arm's copy of the
    skill (none without the skill) before the task; installed, the task alone, after the
    line that tells the agent to use its skills when the arm's variant forces that."""
    prompt = build_prompt(
        scenario.skill_dir,
        scenario.path,
        options.skill_texts,
        skill=arm.skill if options.skill_delivery == PROMPT else False,
    )
    return ACTIVATION_LINE + PART_SEPARATOR + prompt if arm.activation else prompt


def _recorded_baseline(
    scenario: Scenario,
    backends: Backends,
    options: RunOptions,
    *,
    redact: Callable[[str], str],
    slot: CallSlot,
    skill_dir: Path,
) -> _ScenarioRun | TrialResult:
    """A re-judged scenario's baseline arm: its recorded trials, graded again; an errored
    trial when the log does not hold that arm. No skill is extracted at a git ref and no
    prompt is built: the agent's answers are the record's."""
    assert options.recorded is not None
    recorded = options.recorded.arm_of(skill_dir, scenario.name, options.baseline)
    if recorded is None:
        text = options.recorded.missing(skill_dir, scenario.name, options.baseline)
        return errored_trial(1, text, kind=SCENARIO_ERROR, cause=INVALID_INPUT)
    arm = Arm(options.baseline, skill=False)  # its skill is never used: no agent runs
    return _ScenarioRun(
        scenario, "", backends, options, redact=redact, slot=slot, arm=arm, recorded=recorded
    )
