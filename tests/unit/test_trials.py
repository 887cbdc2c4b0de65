"""Combining judge votes and trials (pytest_openkata.core.trials)."""

from __future__ import annotations

import json

import pytest

from pytest_openkata.contracts.results import CallStats, CriterionResult, ScenarioResult, Usage
from pytest_openkata.core.trials import combine_trials, errored_trial, majority, scored_trial


def _ballot(*passed: bool) -> list[CriterionResult]:
    names = "abc"
    return [
        CriterionResult(names[i], p, 10 if p else 0, 10, f"{names[i]} {p}")
        for i, p in enumerate(passed)
    ]


SCENARIO = {"skill": "s", "skill_dir": "/s", "name": "scenario-0"}


def test_one_ballot_is_returned_unchanged() -> None:
    ballot = _ballot(True, False)

    assert majority([ballot]) == ballot


def test_strict_majority_with_the_winning_sides_first_reason() -> None:
    combined = majority([_ballot(True, False), _ballot(False, True), _ballot(True, False)])

    assert [(c.passed, c.score, c.reason, c.votes) for c in combined] == [
        (True, 10, "a True", (2, 3)),
        (False, 0, "b False", (1, 3)),
    ]


def test_a_tie_fails_the_criterion() -> None:
    [combined] = majority([_ballot(True), _ballot(False)])

    assert (combined.passed, combined.votes, combined.reason) == (False, (1, 2), "a False")


def test_majority_needs_a_ballot() -> None:
    with pytest.raises(ValueError, match="at least one ballot"):
        majority([])


def test_a_single_trial_is_the_reference_result() -> None:
    trial = scored_trial(1, _ballot(True, False))

    result = combine_trials([trial], description="about it", **SCENARIO)

    assert (result.score, result.max_score, result.percentage, result.passed) == (10, 20, 50, False)
    assert result.criteria == trial.criteria
    assert result.stats is None
    assert result.error is None
    assert result.description == "about it"


def test_errored_trials_count_zero_and_make_the_scenario_an_error() -> None:
    trials = [
        scored_trial(1, _ballot(True, True)),
        errored_trial(2, "judge: parse failed", judge_errors=1),
        scored_trial(3, _ballot(True, True)),
    ]

    result = combine_trials(trials, description="about it", **SCENARIO)

    assert result.percentage == pytest.approx(200 / 3)
    assert result.error == "1 of 3 trials errored; trial 2: judge: parse failed"
    assert result.description == "about it"  # not every trial errored: no reference suffix
    assert [c.votes for c in result.criteria or ()] == [(2, 2), (2, 2)]
    assert result.judge_errors == 1
    assert result.stats is not None
    assert result.stats.passes == 2


def test_when_every_trial_errored_the_result_has_the_reference_shape() -> None:
    trials = [errored_trial(1, "agent: HTTP 500", agent_output="partial"), errored_trial(2, "x")]

    result = combine_trials(trials, description="about it", **SCENARIO)

    assert result.criteria is None
    assert (result.score, result.max_score, result.percentage, result.passed) == (0, 0, 0, False)
    assert result.description == f"about it (error: {result.error})"
    assert result.error == "2 of 2 trials errored; trial 1: agent: HTTP 500"
    assert result.agent_output == "partial"


def test_usage_adds_up_over_trials() -> None:
    agent = CallStats(calls=1, input_tokens=100, output_tokens=None, seconds=1.5)
    judge = CallStats(cached=1)
    trials = [
        scored_trial(1, _ballot(True), usage=Usage(agent, judge)),
        scored_trial(2, _ballot(True), usage=Usage(agent, CallStats(calls=1, seconds=0.5))),
    ]

    usage = combine_trials(trials, description="", **SCENARIO).usage

    assert usage.agent == CallStats(calls=2, input_tokens=200, seconds=3.0)
    assert usage.judge == CallStats(calls=1, cached=1, seconds=0.5)


def test_results_survive_the_trip_to_the_controller() -> None:
    trials = [
        scored_trial(1, _ballot(True, False), usage=Usage(CallStats(calls=1, seconds=0.25))),
        scored_trial(2, _ballot(True, True), agent_cached=True),
    ]
    result = combine_trials(trials, description="about it", **SCENARIO)

    # As through item.user_properties: JSON, so tuples become lists and int keys strings.
    assert ScenarioResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result
