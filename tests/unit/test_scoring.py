"""Scoring: verdict matching, scenario totals, the overall mean and the threshold.

Spec references: section 7 (matching verdicts), section 8, section 12 checks 39 and 40.
"""

from __future__ import annotations

import pytest

from pytest_openkata.contracts.results import CriterionResult, Verdict
from pytest_openkata.core.scenario import Criterion
from pytest_openkata.core.scoring import (
    NO_VERDICT_REASON,
    match_verdicts,
    meets_threshold,
    overall_percentage,
    percent_against,
    percentage,
    scenario_totals,
)

A10 = Criterion("a", "Does A", 10)
B5 = Criterion("b", "Does B", 5)
B10 = Criterion("b", "Does B", 10)


def totals(criteria: list[Criterion], verdicts: list[Verdict]) -> tuple[int, int, float, bool]:
    return scenario_totals(match_verdicts(criteria, verdicts))


# --- check 39: scenario scoring -------------------------------------------------------------


def test_check39_all_pass() -> None:
    score, max_score, pct, passed = totals([A10, B5], [Verdict("a", True), Verdict("b", True)])
    assert (score, max_score, passed) == (15, 15, True)
    assert pct == pytest.approx(100, abs=0.01)


def test_check39_one_fails() -> None:
    score, max_score, pct, passed = totals([A10, B10], [Verdict("a", True), Verdict("b", False)])
    assert (score, max_score, passed) == (10, 20, False)
    assert pct == pytest.approx(50, abs=0.01)


def test_check39_all_fail() -> None:
    score, max_score, pct, passed = totals([A10], [Verdict("a", False)])
    assert (score, max_score, passed) == (0, 10, False)
    assert pct == pytest.approx(0, abs=0.01)


def test_check39_no_verdicts() -> None:
    score, max_score, pct, passed = totals([A10], [])
    assert (score, max_score, passed) == (0, 10, False)
    assert pct == pytest.approx(0, abs=0.01)


def test_check39_empty_checklist() -> None:
    score, max_score, pct, passed = totals([], [Verdict("a", True)])
    assert (score, max_score, passed) == (0, 0, False)
    assert pct == 0.0


def test_percentage_divides_then_multiplies() -> None:
    assert percentage(10, 15) == 66.66666666666666
    assert 10 * 100 / 15 == 66.66666666666667  # the other order gives a different float
    assert percentage(1, 3) == 1 / 3 * 100


def test_percentage_is_not_rounded() -> None:
    _score, _max, pct, passed = totals([A10, B5], [Verdict("a", True)])
    assert pct == 66.66666666666666
    assert passed is False


def test_percentage_with_zero_maximum_is_zero() -> None:
    assert percentage(0, 0) == 0.0
    assert isinstance(percentage(0, 0), float)


def test_scenario_passes_only_at_full_score() -> None:
    criteria = [Criterion(f"c{i}", "", 1) for i in range(1000)]
    verdicts = [Verdict(c.name, c.name != "c999") for c in criteria]
    score, max_score, pct, passed = totals(criteria, verdicts)
    assert (score, max_score) == (999, 1000)
    assert pct == pytest.approx(99.9)
    assert passed is False


# --- verdict matching -----------------------------------------------------------------------


def test_match_copies_pass_reason_and_scores() -> None:
    results = match_verdicts(
        [A10, B5], [Verdict("b", False, "not addressed"), Verdict("a", True, "clear")]
    )
    assert results == [
        CriterionResult(name="a", passed=True, score=10, max_score=10, reason="clear"),
        CriterionResult(name="b", passed=False, score=0, max_score=5, reason="not addressed"),
    ]


def test_first_verdict_wins_on_duplicates() -> None:
    results = match_verdicts([A10], [Verdict("a", False, "first"), Verdict("a", True, "second")])
    assert results == [CriterionResult("a", False, 0, 10, "first")]


def test_first_verdict_wins_when_the_first_passes() -> None:
    results = match_verdicts([A10], [Verdict("a", True, "first"), Verdict("a", False, "second")])
    assert results == [CriterionResult("a", True, 10, 10, "first")]


def test_unknown_names_are_ignored() -> None:
    results = match_verdicts(
        [A10], [Verdict("zzz", True, "unknown"), Verdict("a", True, "ok"), Verdict("b", True)]
    )
    assert results == [CriterionResult("a", True, 10, 10, "ok")]


def test_missing_verdict_fails_with_reason() -> None:
    results = match_verdicts([A10, B5], [Verdict("a", True, "ok")])
    assert results[1] == CriterionResult("b", False, 0, 5, "no verdict returned")
    assert NO_VERDICT_REASON == "no verdict returned"


def test_names_are_case_sensitive() -> None:
    results = match_verdicts([A10], [Verdict("A", True, "upper")])
    assert results == [CriterionResult("a", False, 0, 10, NO_VERDICT_REASON)]


def test_names_must_match_exactly_not_after_trimming() -> None:
    results = match_verdicts([A10], [Verdict("a ", True, "space")])
    assert results[0].passed is False
    assert results[0].reason == NO_VERDICT_REASON


def test_results_follow_checklist_order_not_verdict_order() -> None:
    criteria = [Criterion("z", "", 1), Criterion("a", "", 2), Criterion("m", "", 3)]
    verdicts = [Verdict("m", True), Verdict("a", True), Verdict("z", True)]
    assert [r.name for r in match_verdicts(criteria, verdicts)] == ["z", "a", "m"]


def test_duplicate_criterion_names_share_the_first_verdict() -> None:
    criteria = [Criterion("a", "", 3), Criterion("a", "", 4)]
    results = match_verdicts(criteria, [Verdict("a", True, "r"), Verdict("a", False)])
    assert [(r.passed, r.score, r.max_score, r.reason) for r in results] == [
        (True, 3, 3, "r"),
        (True, 4, 4, "r"),
    ]


def test_empty_reason_from_judge_is_kept_empty() -> None:
    assert match_verdicts([A10], [Verdict("a", False, "")])[0].reason == ""


# --- check 40: overall -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("percentages", "expected", "passes"),
    [
        ([100.0, 96.0], 98.0, True),
        ([100.0, 80.0], 90.0, False),
        ([95.0], 95.0, True),
        ([], 0.0, False),
        ([100.0], 100.0, True),
    ],
)
def test_check40_overall(percentages: list[float], expected: float, passes: bool) -> None:
    overall = overall_percentage(percentages)
    assert overall == pytest.approx(expected, abs=0.01)
    assert meets_threshold(overall, 95, len(percentages)) is passes


def test_overall_is_a_plain_left_to_right_sum() -> None:
    values = [0.1] * 10
    # math.fsum (and sum() since Python 3.12) give exactly 1.0; Go's plain loop does not.
    assert overall_percentage(values) == 0.9999999999999999 / 10
    assert overall_percentage(values) != 0.1


def test_overall_keeps_unrounded_percentages() -> None:
    assert overall_percentage([percentage(10, 15), 100.0]) == (66.66666666666666 + 100.0) / 2


def test_threshold_boundary_is_inclusive_and_unrounded() -> None:
    assert meets_threshold(95.0, 95, 1) is True
    assert meets_threshold(94.99999999999999, 95, 1) is False
    assert meets_threshold(95.00000000000001, 95, 1) is True


def test_threshold_zero_and_hundred() -> None:
    assert meets_threshold(0.0, 0, 1) is True
    assert meets_threshold(100.0, 100, 1) is True
    assert meets_threshold(99.99, 100, 1) is False


@pytest.mark.parametrize("threshold", [0, 50, 95])
def test_empty_run_never_passes(threshold: int) -> None:
    assert meets_threshold(overall_percentage([]), threshold, 0) is False
    assert meets_threshold(100.0, threshold, 0) is False


@pytest.mark.parametrize(
    ("value", "threshold", "min_digits", "shown"),
    [
        (88.0, 95, 0, "88%"),
        (94.6, 95, 0, "94.6%"),  # "95%" would read as passing
        (94.96, 95, 1, "94.96%"),  # "95.0%" would too
        (94.99996, 95, 0, "94.99996%"),
        (95.0, 95, 0, "95%"),
        (95.04, 95, 0, "95%"),  # rounds down and still passes: no decimal needed
        (99.96, 100, 1, "99.96%"),  # not "100.0%"
        (87.5, 95, 1, "87.5%"),
    ],
)
def test_a_figure_beside_the_threshold_never_reads_on_the_wrong_side(
    value: float, threshold: int, min_digits: int, shown: str
) -> None:
    assert percent_against(value, threshold, min_digits=min_digits) == shown


def test_a_gate_says_which_side_its_figure_is_on() -> None:
    # An empty run fails at a threshold of 0 although its 0 % is not below it: the figure is
    # then shown in full, never as a rounded number that would read as passing.
    assert percent_against(0.0, 0, passed=False) == "0.0%"
    assert percent_against(0.0, 0) == "0%"


def test_past_the_most_decimals_the_figure_is_shown_in_full() -> None:
    value = 98.99960331234611
    assert percent_against(value, 99) == "98.9996%"
    assert percent_against(value, 99, max_digits=3) == f"{value!r}%"  # the terminal's
