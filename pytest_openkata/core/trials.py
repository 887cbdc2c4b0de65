"""Combining repeated judgements: judge votes into a trial, trials into a scenario result.

A criterion passes by strict majority (more than half of the votes or trials; a tie fails,
so an even split never passes a criterion). With one trial the scenario result is exactly the
reference's; with several, ``percentage`` is the mean over trials (errored trials count 0 %, as
errored scenarios do), ``pass`` means every trial passed, the criteria are the majority over the
trials that ran, and the statistics of :mod:`pytest_openkata.core.stats` come along.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pytest_openkata.core.results import (
    INFRASTRUCTURE_ERROR,
    CriterionResult,
    ScenarioResult,
    TrialResult,
    Usage,
)
from pytest_openkata.core.scoring import overall_percentage, scenario_totals
from pytest_openkata.core.stats import trial_stats


def majority(ballots: Sequence[Sequence[CriterionResult]]) -> list[CriterionResult]:
    """Per criterion (in checklist order), the strict majority of several results for it.

    The reason is the first one on the winning side. With one ballot the results are
    returned unchanged; with several, each carries ``votes = (passed, total)``.
    """
    if not ballots:
        raise ValueError("majority needs at least one ballot")
    if len(ballots) == 1:
        return list(ballots[0])
    total = len(ballots)
    combined = []
    for position, first in enumerate(ballots[0]):
        column = [ballot[position] for ballot in ballots]
        passes = sum(result.passed for result in column)
        passed = passes * 2 > total
        reason = next(result.reason for result in column if result.passed == passed)
        combined.append(
            replace(
                first,
                passed=passed,
                score=first.max_score if passed else 0,
                reason=reason,
                votes=(passes, total),
            )
        )
    return combined


def scored_trial(index: int, criteria: list[CriterionResult], **extra: object) -> TrialResult:
    score, max_score, pct, passed = scenario_totals(criteria)
    return TrialResult(
        index=index,
        criteria=criteria,
        score=score,
        max_score=max_score,
        percentage=pct,
        passed=passed,
        **extra,  # type: ignore[arg-type]
    )


def errored_trial(
    index: int, error: str, *, kind: str = INFRASTRUCTURE_ERROR, **extra: object
) -> TrialResult:
    """A trial that gave no verdict; ``kind`` says why (:data:`SCENARIO_ERROR`: its files or
    the run's configuration are broken; else something the run depends on failed)."""
    return TrialResult(
        index=index,
        criteria=None,
        score=0,
        max_score=0,
        percentage=0.0,
        passed=False,
        error=error,
        error_kind=kind,
        **extra,  # type: ignore[arg-type]
    )


def _error_text(trials: Sequence[TrialResult]) -> str | None:
    errored = [trial for trial in trials if trial.error is not None]
    if not errored:
        return None
    if len(trials) == 1:
        return errored[0].error
    first = errored[0]
    return f"{len(errored)} of {len(trials)} trials errored; trial {first.index}: {first.error}"


def combine_trials(
    trials: Sequence[TrialResult],
    *,
    skill: str,
    skill_dir: str,
    name: str,
    description: str,
    skill_scenarios: Sequence[str] = (),
) -> ScenarioResult:
    """The result of a scenario (``skill``, ``skill_dir``, ``name``, with the names of every
    scenario of its skill) from its ``trials``.

    When every trial errored the result has the reference's errored shape (``criteria:
    null``, 0 %, ``(error: ...)`` appended to the description).
    """
    if not trials:
        raise ValueError("combine_trials needs at least one trial")
    error = _error_text(trials)
    common = {
        "skill": skill,
        "skill_dir": skill_dir,
        "name": name,
        "skill_scenarios": list(skill_scenarios),
        "error": error,
        "agent_output": next((t.agent_output for t in trials if t.agent_output is not None), None),
        "trials": list(trials),
        "stats": trial_stats([t.percentage for t in trials]) if len(trials) > 1 else None,
        "usage": sum((trial.usage for trial in trials), Usage()),
    }
    ran = [trial.criteria for trial in trials if trial.criteria is not None]
    if not ran:
        return ScenarioResult(
            description=f"{description} (error: {error})",
            criteria=None,
            score=0,
            max_score=0,
            percentage=0.0,
            passed=False,
            **common,  # type: ignore[arg-type]
        )
    criteria = majority(ran)
    score, max_score, pct, _ = scenario_totals(criteria)
    if len(trials) > 1:
        pct = overall_percentage([trial.percentage for trial in trials])
    return ScenarioResult(
        description=description,
        criteria=criteria,
        score=score,
        max_score=max_score,
        percentage=pct,
        passed=all(trial.passed for trial in trials),
        **common,  # type: ignore[arg-type]
    )
