"""The grader contract: what a grader gets for one trial and what it gives back.

A grader gets one trial's :class:`GradingTask` (the scenario, the agent's result and what the
run provides: the judge model, the retry policy, the cache, the call slot) and returns a
:class:`Grading`: its criterion results, in its own order, and the usage of the model calls it
made. Every registered grader grades every trial, each the criteria it owns (the LLM judge owns
``criteria.json``'s checklist); a grader with nothing to grade returns an empty grading and
makes no call. A grader that cannot grade raises :class:`GradeError`: the trial errors, it is
never a failed criterion.

It lives in ``core``, below the graders (``providers.graders``), because a task holds the
scenario model; the run reaches the graders only through the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pytest_openkata.contracts.backends import Completer
from pytest_openkata.contracts.errors import OpenkataError
from pytest_openkata.contracts.results import (
    INFRASTRUCTURE_ERROR,
    AgentResult,
    CallStats,
    CriterionResult,
)
from pytest_openkata.core.calls import NO_SLOTS
from pytest_openkata.core.checks import CommandOutcome
from pytest_openkata.core.scenario import Scenario
from pytest_openkata.core.slots import CallSlot
from pytest_openkata.infra.cache import ResultCache
from pytest_openkata.infra.retry import RetryPolicy
from pytest_openkata.infra.usage import Prices

__all__ = ["DEFAULT_ORDER", "GradeError", "Grader", "Grading", "GradingContext", "GradingTask"]

DEFAULT_ORDER = 50


class GradeError(OpenkataError):
    """The grader could not grade this trial; ``judge_error`` counts it among the report's
    ``judge_errors`` (a judge call or answer that failed); ``kind`` says whose fault it is
    (``contracts.results.SCENARIO_ERROR`` for the scenario's own files, else the run's)."""

    def __init__(
        self,
        message: str,
        *,
        judge_error: bool = False,
        usage: CallStats | None = None,
        kind: str = INFRASTRUCTURE_ERROR,
    ) -> None:
        super().__init__(message)
        self.judge_error = judge_error
        self.usage = usage or CallStats()  # of the calls made before it failed
        self.kind = kind


@dataclass(frozen=True)
class GradingContext:
    """What a run gives its graders: the judge model and its identity (for cache keys), the
    retry policy, judge votes and fencing, the cache, the judge's prices, the secret masker
    and the call slot to hold around each live call."""

    judge: Completer
    judge_identity: Mapping[str, Any] = field(default_factory=dict)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    votes: int = 1
    fence: bool = False
    cache: ResultCache | None = None
    prices: Prices = field(default_factory=Prices)
    redact: Callable[[str], str] = lambda text: text
    slot: CallSlot = NO_SLOTS
    # A cap on the length of a judge's reason in its schema (0: none; see judge.verdict_schema).
    reason_max_chars: int = 0
    # The run's values of the settings that installed providers declare (a grader of another
    # distribution reads its own with ``ProviderSetting.value_in``).
    provider_settings: Mapping[str, Any] = field(default_factory=dict)
    # The agent's name (its backend, or the sandbox's agent CLI), for what graders say of it.
    agent_name: str = ""


@dataclass(frozen=True)
class GradingTask:
    """One trial to grade: ``trial`` is 1-based; ``arm`` names a baseline arm (``""`` for the
    run's own arm, the one with the skill as it is), for cache keys that keep arms apart."""

    scenario: Scenario
    agent: AgentResult
    trial: int
    context: GradingContext
    arm: str = ""
    # The outcome of each command check (checks.json), run in the sandbox after the agent.
    commands: Mapping[str, CommandOutcome] = field(default_factory=dict)
    # A re-judged trial's recorded verdicts of the checks that read the workspace, by name
    # (None: a live trial). A run log keeps the workspace only as diffs, so these checks take
    # their verdicts from the record (:mod:`pytest_openkata.core.recorded`).
    recorded_checks: Mapping[str, CriterionResult] | None = None


@dataclass(frozen=True)
class Grading:
    """A grader's criterion results, the usage of its model calls and its raw answers
    (JSON-able, for the run log: what a judge answered, what a command printed)."""

    criteria: list[CriterionResult] = field(default_factory=list)
    usage: CallStats = field(default_factory=CallStats)
    answers: list[Any] = field(default_factory=list)


class Grader(Protocol):
    """Grades the criteria it owns; see the module docstring. Graders run, and their results
    are listed, in the order of an ``order`` attribute when they have one (default
    :data:`DEFAULT_ORDER`; the judge 0, the checks 10), then of their names."""

    name: str

    def grade(self, task: GradingTask) -> Grading: ...
