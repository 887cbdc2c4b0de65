"""Comparing a run with an earlier one: Fisher's exact test, the tiers and the terminal lines."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from fractions import Fraction

import pytest

from pytest_openkata.contracts.results import CriterionResult, ScenarioResult, TrialResult
from pytest_openkata.core.regression import (
    IMPROVEMENT,
    MISSING,
    NEW,
    NOT_COMPARABLE,
    REGRESSION,
    UNCHANGED,
    ScenarioChange,
    SkillChanges,
    compare_skill_runs,
    fisher_exact_p_value,
)
from pytest_openkata.core.stats import t_critical_95
from pytest_openkata.core.trials import combine_trials, errored_trial, scored_trial
from pytest_openkata.providers.reporters.changes import changes_lines

# --- Fisher's exact test ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        # Fisher's tea-tasting experiment (R: fisher.test(matrix(c(3, 1, 1, 3), 2))).
        ((3, 1, 1, 3), 0.4857142857),
        # SciPy's documented example, fisher_exact([[8, 2], [1, 5]]).
        ((8, 2, 1, 5), 0.0349650350),
        ((0, 3, 3, 0), 0.1),
        # Wikipedia's dieting example, [[1, 9], [11, 3]].
        ((1, 9, 11, 3), 0.0027594562),
        ((3, 0, 2, 1), 1.0),
        ((5, 0, 0, 5), 2 / 252),
        ((0, 0, 0, 0), 1.0),
    ],
)
def test_fisher_matches_published_values(table: tuple[int, int, int, int], expected: float) -> None:
    assert fisher_exact_p_value(*table) == pytest.approx(expected, rel=1e-8)


def _brute_force(a: int, b: int, c: int, d: int) -> Fraction:
    """Every table with the same margins, its exact probability as a fraction, and the sum of
    those no more likely than the observed one (exact: no tolerance needed)."""
    rows, column, n = (a + b, c + d), a + c, a + b + c + d

    def probability(x: int) -> Fraction:
        return Fraction(
            math.comb(rows[0], x) * math.comb(rows[1], column - x), math.comb(n, column)
        )

    tables = [x for x in range(rows[0] + 1) if 0 <= column - x <= rows[1]]
    observed = probability(a)
    return sum((probability(x) for x in tables if probability(x) <= observed), Fraction(0))


def test_fisher_matches_brute_force_over_every_small_table() -> None:
    for table in itertools.product(range(5), repeat=4):
        assert fisher_exact_p_value(*table) == pytest.approx(float(_brute_force(*table)), rel=1e-12)


def test_fisher_counts_tables_as_likely_as_the_observed_one_on_both_sides() -> None:
    # [[2, 2], [2, 2]] and its mirror images: a symmetric distribution, whose tables with x
    # and 4 - x are equally likely; the two-sided p-value of the centre is 1.
    assert fisher_exact_p_value(2, 2, 2, 2) == 1.0
    assert fisher_exact_p_value(1, 3, 3, 1) == pytest.approx(fisher_exact_p_value(3, 1, 1, 3))


def test_fisher_refuses_a_negative_count() -> None:
    with pytest.raises(ValueError, match=r"counts >= 0, got \[\[1, -1\], \[2, 3\]\]"):
        fisher_exact_p_value(1, -1, 2, 3)


# --- building results ----------------------------------------------------------------------


def _criteria(passes: dict[str, bool], points: dict[str, int] | None = None) -> list:
    return [
        CriterionResult.judged(name, (points or {}).get(name, 5), passed, "")
        for name, passed in passes.items()
    ]


def _trial(index: int, trial: dict[str, bool] | str, points: dict[str, int] | None) -> TrialResult:
    if isinstance(trial, str):
        return errored_trial(index, trial)
    return scored_trial(index, _criteria(trial, points))


def _scenario(
    name: str,
    *trials: dict[str, bool] | str,
    points: dict[str, int] | None = None,
    on_disk: tuple[str, ...] = (),
    digests: dict[str, str] | None = None,
) -> ScenarioResult:
    """A scenario of skill ``s`` whose trials pass its criteria as given (a string is an
    errored trial)."""
    result = combine_trials(
        [_trial(i, t, points) for i, t in enumerate(trials, start=1)],
        skill="s",
        skill_dir="/skills/s",
        name=name,
        description=name,
        skill_scenarios=list(on_disk),
    )
    return dataclasses.replace(result, digests=dict(digests or {}))


DIGESTS = {"prompt": "p1", "task": "t1", "criteria": "c1", "inputs": "i1"}
ALL = {"a": True, "b": True}
HALF = {"a": True, "b": False}
NONE = {"a": False, "b": False}


def _one(before: ScenarioResult, after: ScenarioResult, tolerance: float = 0.0) -> ScenarioChange:
    changes = compare_skill_runs(
        [after], [before], skill="s", baseline="earlier.json", tolerance=tolerance
    )
    assert len(changes.scenarios) == 1
    return changes.scenarios[0]


# --- tiers -----------------------------------------------------------------------------------


def test_a_single_trial_that_falls_is_a_regression_with_the_criterion_that_flipped() -> None:
    change = _one(_scenario("x", ALL), _scenario("x", HALF))

    assert change.tier == REGRESSION
    assert (change.before, change.after, change.change) == (100.0, 50.0, -50.0)
    assert change.interval is None  # one trial a side: no spread to go by
    assert change.p_value is None
    assert [(c.name, c.flip) for c in change.criteria] == [("a", None), ("b", "pass→fail")]
    assert change.criteria[1].before_passes == (1, 1)
    assert change.criteria[1].after_passes == (0, 1)
    assert change.criteria[1].p_value is None


def test_the_mirror_is_an_improvement() -> None:
    change = _one(_scenario("x", HALF), _scenario("x", ALL))

    assert change.tier == IMPROVEMENT
    assert change.change == 50.0
    assert [c.flip for c in change.flipped] == ["fail→pass"]


@pytest.mark.parametrize(
    ("tolerance", "tier"),
    [(10.0, UNCHANGED), (9.99, REGRESSION), (0.0, REGRESSION), (25.0, UNCHANGED)],
)
def test_a_fall_of_exactly_the_tolerance_is_not_a_regression(tolerance: float, tier: str) -> None:
    points = {"a": 90, "b": 10}
    change = _one(
        _scenario("x", ALL, points=points), _scenario("x", HALF, points=points), tolerance
    )

    assert change.change == pytest.approx(-10.0)
    assert change.tier == tier


@pytest.mark.parametrize(("tolerance", "tier"), [(10.0, UNCHANGED), (9.99, IMPROVEMENT)])
def test_a_rise_of_exactly_the_tolerance_is_not_an_improvement(tolerance: float, tier: str) -> None:
    points = {"a": 90, "b": 10}
    change = _one(
        _scenario("x", HALF, points=points), _scenario("x", ALL, points=points), tolerance
    )

    assert change.tier == tier


def test_three_of_three_against_two_of_three_trials_is_not_a_regression() -> None:
    before = _scenario("x", {"a": True}, {"a": True}, {"a": True})
    after = _scenario("x", {"a": True}, {"a": False}, {"a": True})

    change = _one(before, after)

    assert change.change == pytest.approx(-100 / 3)
    assert change.p_value == 1.0  # [[3, 0], [2, 1]]
    assert change.tier == UNCHANGED
    assert change.criteria[0].before_passes == (3, 3)
    assert change.criteria[0].after_passes == (2, 3)
    assert change.criteria[0].p_value == 1.0
    assert change.criteria[0].flip is None  # the majority passes on both sides


def test_a_significant_fall_over_several_trials_is_a_regression() -> None:
    before = _scenario("x", *[ALL] * 5)
    after = _scenario("x", *[NONE] * 5)

    change = _one(before, after)

    assert change.tier == REGRESSION
    # Pooled verdicts: 10 passed, 0 failed before; 0 passed, 10 failed after.
    assert change.p_value == pytest.approx(2 / math.comb(20, 10))
    assert change.interval == (-100.0, -100.0)  # no spread on either side
    assert [c.p_value for c in change.criteria] == [pytest.approx(2 / 252)] * 2
    assert [c.flip for c in change.criteria] == ["pass→fail", "pass→fail"]


def test_with_two_trials_a_side_the_percentage_alone_decides() -> None:
    change = _one(_scenario("x", ALL, ALL), _scenario("x", ALL, HALF))

    assert change.tier == REGRESSION
    assert change.p_value is None
    assert change.interval is not None
    assert change.criteria[1].p_value == pytest.approx(1.0)  # [[2, 0], [1, 1]]


def test_the_interval_is_welch_s_over_the_trials_percentages() -> None:
    points = {"a": 90, "b": 10}
    before = _scenario("x", ALL, HALF, points=points)  # 100 %, 90 %: mean 95, s² 50
    after = _scenario("x", HALF, HALF, points=points)  # 90 %, 90 %: no spread

    change = _one(before, after)

    # se = sqrt(50 / 2 + 0) = 5; Welch's df = 25² / (25² / 1) = 1.
    half = t_critical_95(1) * 5
    assert change.change == pytest.approx(-5.0)
    assert change.interval is not None
    low, high = change.interval
    assert low == pytest.approx(-5.0 - half)
    assert high == pytest.approx(-5.0 + half)


def test_the_interval_is_clamped_to_a_possible_change() -> None:
    change = _one(_scenario("x", ALL, NONE), _scenario("x", HALF, NONE))

    assert change.interval == (-100.0, 100.0)


def test_a_scenario_that_errors_now_counts_as_zero_and_regresses() -> None:
    change = _one(_scenario("x", ALL), _scenario("x", "agent timed out"))

    assert change.tier == REGRESSION
    assert (change.before, change.after) == (100.0, 0.0)
    assert [(c.name, c.before, c.after, c.after_passes) for c in change.criteria] == [
        ("a", True, None, None),
        ("b", True, None, None),
    ]


def test_a_scenario_that_errored_before_and_scores_now_improves() -> None:
    change = _one(_scenario("x", "judge failed"), _scenario("x", HALF))

    assert change.tier == IMPROVEMENT
    assert (change.before, change.after) == (0.0, 50.0)


def test_errored_trials_fail_every_criterion_in_the_pooled_test() -> None:
    before = _scenario("x", *[ALL] * 4)
    after = _scenario("x", "boom", "boom", "boom", ALL)

    change = _one(before, after)

    # 8 passed, 0 failed before; 2 passed, 6 failed after (three errored trials, two criteria).
    assert change.p_value is not None
    assert change.p_value == pytest.approx(fisher_exact_p_value(8, 0, 2, 6))
    assert change.p_value < 0.05
    assert change.tier == REGRESSION
    assert change.criteria[0].after_passes == (1, 4)


def test_changed_task_criteria_or_inputs_make_a_scenario_not_comparable() -> None:
    changed = {**DIGESTS, "criteria": "c2", "inputs": "i2"}
    change = _one(_scenario("x", ALL, digests=DIGESTS), _scenario("x", NONE, digests=changed))

    assert change.tier == NOT_COMPARABLE
    assert change.reason == "criteria.json, inputs/ changed"
    assert (change.before, change.after, change.change) == (100.0, 0.0, -100.0)


def test_a_checks_file_added_since_makes_a_scenario_not_comparable() -> None:
    added = {**DIGESTS, "checks": "k1"}
    change = _one(_scenario("x", ALL, digests=DIGESTS), _scenario("x", ALL, digests=added))

    assert change.tier == NOT_COMPARABLE
    assert change.reason == "checks.json changed"


def test_a_changed_prompt_alone_is_what_is_compared() -> None:
    # The skill's text changed (so the prompt did); the scenario itself did not.
    other_prompt = {**DIGESTS, "prompt": "p2"}
    change = _one(_scenario("x", ALL, digests=DIGESTS), _scenario("x", HALF, digests=other_prompt))

    assert change.tier == REGRESSION


def test_without_digests_the_criteria_names_and_points_are_compared() -> None:
    earlier = _scenario("x", ALL)  # a results JSON holds no digests
    renamed = _scenario("x", {"a": True, "c": True}, digests=DIGESTS)
    reweighted = _scenario("x", ALL, points={"a": 6}, digests=DIGESTS)
    same = _scenario("x", HALF, digests=DIGESTS)

    assert _one(earlier, renamed).reason == "criteria added: c; criteria removed: b"
    assert _one(earlier, renamed).tier == NOT_COMPARABLE
    assert _one(earlier, reweighted).reason == "points changed: a 5 -> 6"
    assert _one(earlier, same).tier == REGRESSION


def test_missing_new_and_deselected_scenarios() -> None:
    on_disk = ("kept", "deselected", "added")
    current = [
        _scenario("kept", ALL, on_disk=on_disk),
        _scenario("added", HALF, on_disk=on_disk),
    ]
    earlier = [_scenario("kept", ALL), _scenario("deselected", ALL), _scenario("gone", HALF)]

    changes = compare_skill_runs(current, earlier, skill="s", baseline="b.json", tolerance=0)

    assert [(s.name, s.tier) for s in changes.scenarios] == [
        ("added", NEW),
        ("gone", MISSING),
        ("kept", UNCHANGED),
    ]
    added, gone, _kept = changes.scenarios
    assert (added.before, added.after, added.change) == (None, 50.0, None)
    assert [(c.name, c.before, c.after) for c in added.criteria] == [
        ("a", None, True),
        ("b", None, False),
    ]
    assert (gone.before, gone.after) == (50.0, None)
    assert gone.reason == "in the earlier run, no longer on disk"
    assert changes.missing == [gone]
    assert changes.failed


def test_improvements_alone_do_not_fail() -> None:
    changes = compare_skill_runs(
        [_scenario("x", ALL, on_disk=("x",))],
        [_scenario("x", NONE)],
        skill="s",
        baseline="b.json",
        tolerance=0,
    )

    assert not changes.failed
    assert changes.regressions == []


def test_the_changes_go_to_json_and_back_unchanged() -> None:
    on_disk = ("x", "y", "z")
    current = [
        _scenario("x", ALL, HALF, ALL, on_disk=on_disk),
        _scenario("z", ALL, on_disk=on_disk, digests=DIGESTS),
    ]
    earlier = [_scenario("x", ALL, ALL, ALL), _scenario("y", ALL)]
    changes = compare_skill_runs(current, earlier, skill="s", baseline="b.json", tolerance=1.5)
    noted = SkillChanges("s", "", 0.0, (), note="no earlier report of m")

    for original in (changes, noted):
        again = SkillChanges.from_dict(json.loads(json.dumps(original.to_dict())))
        assert again == original


# --- the terminal lines ---------------------------------------------------------------------


def _text(line: list[tuple[str, str | None]]) -> str:
    return "".join(text for text, _colour in line)


def test_the_terminal_block_counts_the_tiers_and_shows_what_moved() -> None:
    on_disk = ("down", "new", "same", "up", "moved")
    current = [
        _scenario("down", HALF, on_disk=on_disk),
        _scenario("new", ALL, on_disk=on_disk),
        _scenario("same", ALL, on_disk=on_disk),
        _scenario("up", ALL, on_disk=on_disk),
        _scenario("moved", ALL, on_disk=on_disk, digests={**DIGESTS, "task": "t2"}),
    ]
    earlier = [
        _scenario("down", ALL),
        _scenario("same", ALL),
        _scenario("up", NONE),
        _scenario("gone", ALL),
        _scenario("moved", ALL, digests=DIGESTS),
    ]
    changes = compare_skill_runs(current, earlier, skill="s", baseline="b.json", tolerance=0)

    lines = list(changes_lines(changes))

    assert [_text(line) for line in lines] == [
        "  Compared with b.json: 1 regression, 1 improvement, 1 unchanged, 1 new, 1 missing, "
        "1 not comparable",
        "    regression: down 100% -> 50% (-50.0 points); pass→fail: b",
        "    missing: gone (was 100%; in the earlier run, no longer on disk)",
        "    not comparable: moved 100% -> 100% (+0.0 points): task.md changed",
        "    improvement: up 0% -> 100% (+100.0 points); fail→pass: a, b",
    ]
    header = dict((text, colour) for text, colour in lines[0])
    assert header["1 regression"] == "red"
    assert header["1 improvement"] == "green"
    assert header["1 missing"] == "red"
    assert header["1 unchanged"] is None
    assert [colour for _text_, colour in lines[1]][1] == "red"
    assert [colour for _text_, colour in lines[2]][1] == "red"
    assert [colour for _text_, colour in lines[4]][1] == "green"


def test_the_terminal_lines_show_the_interval_p_value_and_pass_counts_with_trials() -> None:
    before = _scenario("x", *[ALL] * 5)
    after = _scenario("x", *[HALF] * 5, on_disk=("x",))
    changes = compare_skill_runs([after], [before], skill="s", baseline="b.json", tolerance=0)

    lines = [_text(line) for line in changes_lines(changes)]

    p_pooled = fisher_exact_p_value(10, 0, 5, 5)
    assert lines == [
        "  Compared with b.json: 1 regression, 0 improvements, 0 unchanged, 0 new, 0 missing",
        f"    regression: x 100% -> 50% (-50.0 points, 95% CI -50.0 to -50.0; "
        f"p = {p_pooled:.3g}); pass→fail: b (5/5 -> 0/5, p = {2 / 252:.3g})",
    ]
    header = dict(next(iter(changes_lines(changes))))
    assert header["1 regression"] == "red"
    assert header["0 improvements"] is None  # a tier with none is not coloured
    assert header["0 missing"] is None


def test_a_skill_without_an_earlier_report_says_so() -> None:
    noted = SkillChanges("s", "", 0.0, (), note="no earlier report of gpt-4o")

    assert [_text(line) for line in changes_lines(noted)] == [
        "  Compared with an earlier run: no earlier report of gpt-4o"
    ]
    assert not noted.failed
