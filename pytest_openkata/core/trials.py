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

from pytest_openkata.contracts.errors import ERROR_CAUSES, MODEL_ENDPOINT
from pytest_openkata.contracts.results import (
    ERROR_KINDS,
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
    index: int,
    error: str,
    *,
    kind: str = INFRASTRUCTURE_ERROR,
    cause: str = MODEL_ENDPOINT,
    **extra: object,
) -> TrialResult:
    """A trial that gave no verdict; ``kind`` says whose fault it is (:data:`SCENARIO_ERROR`:
    its files or the run's configuration are broken; :data:`SKILL_ERROR`: the skill's own
    SKILL.md or tile.json is; else something the run depends on failed), and ``cause`` what
    kind of failure it was (one of :data:`~pytest_openkata.contracts.errors.ERROR_CAUSES`)."""
    return TrialResult(
        index=index,
        criteria=None,
        score=0,
        max_score=0,
        percentage=0.0,
        passed=False,
        error=error,
        error_kind=kind,
        error_cause=cause,
        **extra,  # type: ignore[arg-type]
    )


def trial_contradiction(trial: TrialResult) -> str | None:
    """Why a trial's figures do not hold together, or None when they do: the rules
    :func:`scored_trial` and :func:`errored_trial` make every trial by. A criterion scores all
    its points when it passes (by more than half of its votes) and none when it fails; a
    graded trial's score, maximum, percentage and pass follow from its criteria; an errored
    one has no criteria, no points, does not pass and says why it errored. For a trial read
    back from a file someone may have edited (the merge of shards)."""
    if trial.criteria is None:
        if trial.error is None:
            return "it has no criteria and no error"
        if trial.passed is not False:
            return "it errored, yet passed"
        if (trial.score, trial.max_score, trial.percentage) != (0, 0, 0):
            return (
                f"it errored, yet claims {trial.score!r} of {trial.max_score!r} points "
                f"({trial.percentage!r}%)"
            )
        if trial.error_kind not in ERROR_KINDS:
            return (
                f"it errored, but its error_kind {trial.error_kind!r} is none of "
                f"{', '.join(repr(kind) for kind in ERROR_KINDS)}"
            )
        if trial.error_cause and trial.error_cause not in ERROR_CAUSES:
            return (
                f"it errored, but its error_cause {trial.error_cause!r} is none of "
                f"{', '.join(repr(cause) for cause in ERROR_CAUSES)}"
            )
        return None
    if trial.error is not None:
        return "it has both criteria and an error"
    if trial.error_kind:
        return f"it did not error, yet has error_kind {trial.error_kind!r}"
    if trial.error_cause:
        return f"it did not error, yet has error_cause {trial.error_cause!r}"
    for criterion in trial.criteria:
        wrong = _criterion_contradiction(criterion)
        if wrong is not None:
            return f"criterion {criterion.name!r} {wrong}"
    for key in ("score", "max_score"):
        if not _whole(getattr(trial, key)):
            return f"its {key} {getattr(trial, key)!r} is not a whole number"
    if not isinstance(trial.passed, bool):
        return f"its passed {trial.passed!r} is not true or false"
    score, max_score, pct, passed = scenario_totals(trial.criteria)
    if (trial.score, trial.max_score) != (score, max_score):
        return (
            f"it scores {trial.score} of {trial.max_score} points, "
            f"its criteria {score} of {max_score}"
        )
    if trial.percentage != pct or isinstance(trial.percentage, bool):
        return f"its percentage {trial.percentage!r} is not that of {score} of {max_score} points"
    if trial.passed != passed:
        verb = "passed" if trial.passed else "failed"
        return (
            f"it {verb} with {score} of {max_score} points ({pct:g}%): a trial passes at 100% only"
        )
    return None


def _criterion_contradiction(criterion: CriterionResult) -> str | None:
    if not isinstance(criterion.passed, bool):
        return f"has passed {criterion.passed!r}, not true or false"
    if not (_whole(criterion.score) and _whole(criterion.max_score)):
        return f"scores {criterion.score!r} of {criterion.max_score!r}: not whole numbers"
    verb = "passed" if criterion.passed else "failed"
    if criterion.score != (criterion.max_score if criterion.passed else 0):
        return (
            f"{verb} with {criterion.score} of {criterion.max_score} points: a criterion "
            "scores all its points when it passes and none when it fails"
        )
    votes = criterion.votes
    if votes is not None:
        if not (len(votes) == 2 and all(_whole(n) for n in votes) and 0 <= votes[0] <= votes[1]):
            return f"has votes {list(votes)!r}, not [passes, votes]"
        passes, total = votes
        if (passes * 2 > total) != criterion.passed:
            return (
                f"{verb} with {passes} of {total} votes: a criterion passes by more than "
                "half of its votes"
            )
    return None


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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
