"""What a run would spend, worked out before any model is called (``--eval-estimate``).

Every selected scenario's prompt is built as the run builds it (the baseline arm's too), and
so is every judge prompt, around a stand-in answer of the assumed length. Tokens are
estimated at four characters each, as :mod:`~pytest_openkata.core.prompt_size` does; output
tokens cannot be known before a model answers, so each agent answer and each judge verdict is
assumed to be ``estimate_output_tokens`` long (default 1000). The calls are counted as the run
makes them: trials (the scenario's own or the setting) times arms, one agent call per turn (a
scripted follow-up sends the conversation so far again), and ``judge_votes`` judge calls per
trial and arm for a scenario with criteria; with ``judge_pairwise``, two more judge calls per
trial (both arms' answers, in both orders). A re-judge (``rejudge``) runs no agent: it counts
the judge's calls only, over the trials the recorded run holds. A cached answer would cost
nothing: the estimate assumes none is cached.

An agent CLI (a sandboxed scenario, or the ``command`` and ``acp`` agents) calls its model
several times per run, with its own tools and system prompt: its figures are one call's, a
lower bound, and are marked so. A simulated user's turns are not counted. Costs come from the
run's prices (:mod:`~pytest_openkata.core.pricing`); a model without a price has an unknown
cost, never 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.errors import OpenkataError
from pytest_openkata.core.arms import WITHOUT_SKILL
from pytest_openkata.core.pricing import RunPrices, run_prices
from pytest_openkata.core.prompt import SkillTexts, build_prompt
from pytest_openkata.core.prompt_size import CHARS_PER_TOKEN
from pytest_openkata.core.scenario import Scenario, load_scenario, only_categories
from pytest_openkata.core.skill_delivery import PROMPT
from pytest_openkata.infra.usage import Prices, TokenUsage, cost_usd

if TYPE_CHECKING:
    from pytest_openkata.core.recorded import RecordedRun

__all__ = [
    "CallEstimate",
    "RunEstimate",
    "ScenarioEstimate",
    "ShowsModelPrompt",
    "estimate_lines",
    "estimate_run",
    "estimate_scenario",
    "estimated_tokens",
]


@runtime_checkable
class ShowsModelPrompt(Protocol):
    """A grader that calls a model says what one of its calls would send, for a scenario and
    an agent's answer, without sending it (None: it makes no call for this scenario)."""

    def model_prompt(self, scenario: Scenario, answer: str, *, fence: bool) -> str | None: ...


def estimated_tokens(text: str) -> int:
    """Tokens of ``text`` at four characters each, rounded up."""
    return -(-len(text) // CHARS_PER_TOKEN)


@dataclass(frozen=True)
class CallEstimate:
    """Calls of one role and their estimated tokens."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: CallEstimate) -> CallEstimate:
        return CallEstimate(
            self.calls + other.calls,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
        )

    def cost(self, prices: Prices) -> float | None:
        """US dollars at ``prices``; None when they are not configured (unknown, not 0)."""
        if self.calls == 0:
            return 0.0
        return cost_usd(TokenUsage(self.input_tokens, self.output_tokens), prices)


@dataclass(frozen=True)
class ScenarioEstimate:
    """One scenario's agent and judge calls (``error``: why it could not be estimated; the
    run would error it the same way). ``lower_bound``: its agent is an agent CLI."""

    skill_dir: Path
    name: str
    agent: CallEstimate = CallEstimate()
    judge: CallEstimate = CallEstimate()
    lower_bound: bool = False
    error: str | None = None


@dataclass(frozen=True)
class RunEstimate:
    """Every selected scenario's estimate, and the prices of the run's models."""

    scenarios: tuple[ScenarioEstimate, ...]
    prices: RunPrices
    output_tokens: int  # assumed per agent answer and per judge verdict
    per_skill: dict[Path, tuple[ScenarioEstimate, ...]] = field(default_factory=dict)


def _agent_is_a_cli(settings: EvalSettings) -> bool:
    """Whether the agent backend is an agent CLI (run on the host), not a model backend."""
    from pytest_openkata.infra import registry

    return settings.backend not in registry.BACKENDS.names()


def _agent_calls(prompt: str, scenario: Scenario, answer_tokens: int) -> CallEstimate:
    """One agent run: the first prompt, then each scripted follow-up with the conversation
    so far (a model backend sends every earlier message again)."""
    estimate = CallEstimate(1, estimated_tokens(prompt), answer_tokens)
    so_far = estimate.input_tokens + answer_tokens
    for follow_up in scenario.follow_ups:
        sent = so_far + estimated_tokens(follow_up)
        estimate += CallEstimate(1, sent, answer_tokens)
        so_far = sent + answer_tokens
    return estimate


def _judge_call(
    scenario: Scenario, graders: Sequence[object], answer: str, fence: bool
) -> CallEstimate:
    """One trial's judging with one vote: every grader that shows its model prompt."""
    total = CallEstimate()
    for grader in graders:
        if not isinstance(grader, ShowsModelPrompt):
            continue
        prompt = grader.model_prompt(scenario, answer, fence=fence)
        if prompt is not None:
            total += CallEstimate(1, estimated_tokens(prompt), 0)
    return total


def estimate_scenario(
    scenario_dir: Path,
    settings: EvalSettings,
    graders: Sequence[object],
    skill_texts: SkillTexts | None = None,
    recorded_trials: int | None = None,
) -> ScenarioEstimate:
    """The calls and tokens of one scenario as a run with ``settings`` would make them (see
    the module docstring); ``graders`` are the run's (those that call a model show their
    prompt); ``recorded_trials``, for a re-judge, the trials the recorded run holds of it."""
    try:
        scenario = only_categories(load_scenario(scenario_dir), settings.categories)
        delivered = settings.skill_delivery == PROMPT
        prompt = build_prompt(scenario.skill_dir, scenario.path, skill_texts, skill=delivered)
        arms = [prompt]
        if settings.baseline:
            without = settings.baseline == WITHOUT_SKILL or not delivered
            arms.append(
                build_prompt(scenario.skill_dir, scenario.path, skill_texts, skill=False)
                if without
                else prompt
            )
    except (OpenkataError, OSError) as exc:
        return ScenarioEstimate(scenario_dir.parent.parent, scenario_dir.name, error=str(exc))
    # trials = auto is estimated at its maximum: the most the run can spend.
    trials = scenario.trials or (
        settings.trials_max if settings.trials == "auto" else settings.trials
    )
    if recorded_trials is not None:  # a re-judge: the trials its record holds
        trials = recorded_trials
    answer_tokens = settings.estimate_output_tokens
    answer = "x" * (answer_tokens * CHARS_PER_TOKEN)
    vote = _judge_call(scenario, graders, answer, settings.judge_fence)
    verdicts = CallEstimate(vote.calls, vote.input_tokens, vote.calls * answer_tokens)
    agent, judge = CallEstimate(), CallEstimate()
    for arm_prompt in arms:
        for _trial in range(trials):
            if recorded_trials is None:
                agent += _agent_calls(arm_prompt, scenario, answer_tokens)
            for _vote in range(settings.judge_votes):
                judge += verdicts
    if settings.judge_pairwise and len(arms) == 2 and scenario.criteria:
        from pytest_openkata.core.pairwise_judge import pairwise_request

        request = pairwise_request(answer, answer, scenario.context, scenario.criteria)
        sent = estimated_tokens(request.system) + estimated_tokens(request.user)
        judge += CallEstimate(2 * trials, 2 * trials * sent, 2 * trials * answer_tokens)
    return ScenarioEstimate(
        scenario.skill_dir,
        scenario.name,
        agent,
        judge,
        lower_bound=scenario.sandbox or _agent_is_a_cli(settings),
    )


def estimate_run(
    scenario_dirs: Sequence[tuple[Path, Path]],
    settings: EvalSettings,
    graders: Sequence[object],
    recorded: RecordedRun | None = None,
) -> RunEstimate:
    """The estimate of every ``(skill folder, scenario folder)`` of a run, by skill
    (``recorded``: the run a re-judge grades again)."""
    texts = SkillTexts()
    estimates = []
    per_skill: dict[Path, list[ScenarioEstimate]] = {}
    for skill_dir, scenario_dir in scenario_dirs:
        held = None
        if recorded is not None:  # a scenario the log lacks errors at once: no call
            arm = recorded.arm_of(skill_dir, scenario_dir.name)
            held = 0 if arm is None else len(arm.trials)
        estimate = estimate_scenario(scenario_dir, settings, graders, texts, held)
        estimates.append(estimate)
        per_skill.setdefault(skill_dir, []).append(estimate)
    return RunEstimate(
        tuple(estimates),
        run_prices(settings),
        settings.estimate_output_tokens,
        {skill: tuple(found) for skill, found in per_skill.items()},
    )


def _role(name: str, calls: CallEstimate, model: str, prices: Prices, lower: bool) -> str:
    if calls.calls == 0:
        return f"{name} 0 calls"
    cost = calls.cost(prices)
    shown = f"${cost:,.4f}" if cost is not None else f"cost unknown (no price for {model})"
    at_least = "at least " if lower else ""
    return (
        f"{name} {calls.calls:,} calls, {at_least}~{calls.input_tokens:,} in / "
        f"~{calls.output_tokens:,} out tokens, {at_least}{shown}"
    )


def _line(label: str, found: Sequence[ScenarioEstimate], prices: RunPrices) -> str:
    estimated = [e for e in found if e.error is None]
    agent = sum((e.agent for e in estimated), CallEstimate())
    judge = sum((e.judge for e in estimated), CallEstimate())
    lower = any(e.lower_bound for e in estimated)
    costs = [agent.cost(prices.agent), judge.cost(prices.judge)]
    total = (
        "cost unknown (" + ", ".join(f"no price for {m}" for m in prices.unpriced()) + ")"
        if None in costs
        else f"{'at least ' if lower else ''}${sum(c or 0.0 for c in costs):,.4f}"
    )
    count = f"{len(estimated)} scenario{'' if len(estimated) == 1 else 's'}"
    return (
        f"{label}: {count}; {_role('agent', agent, prices.agent_model, prices.agent, lower)}; "
        f"{_role('judge', judge, prices.judge_model, prices.judge, False)}; total {total}"
    )


def estimate_lines(estimate: RunEstimate, shown: Callable[[Path], str]) -> list[str]:
    """The estimate as the terminal shows it: what it assumes, a line per skill (``shown``
    names a skill folder), the scenarios it could not estimate, and the total."""
    lines = [
        "No model was called. Tokens are estimated at four characters each; every agent answer "
        f"and judge verdict is assumed {estimate.output_tokens:,} output tokens long "
        "(estimate_output_tokens); nothing is assumed cached."
    ]
    for skill_dir, found in estimate.per_skill.items():
        lines.append(_line(shown(skill_dir), found, estimate.prices))
        lines.extend(
            f"  {e.name}: cannot be estimated: {e.error}" for e in found if e.error is not None
        )
    lines.append(_line("Total", estimate.scenarios, estimate.prices))
    if any(e.lower_bound for e in estimate.scenarios):
        lines.append(
            "An agent CLI calls its model several times per run: its figures (marked at least) "
            "count one call per turn."
        )
    return lines
