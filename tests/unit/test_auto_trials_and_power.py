"""The rule that stops ``trials = auto`` and the uplift's power analysis, against figures
worked out by hand or independently of the code under test."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

import pytest
from scipy import optimize, stats

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.errors import ConfigError
from pytest_openkata.contracts.results import (
    SETTLED_ABOVE,
    SETTLED_BELOW,
    UNSETTLED,
    AutoTrials,
    ScenarioResult,
)
from pytest_openkata.core.auto_trials import (
    AutoTrialRule,
    mean_interval,
    savings_text,
    settled_side,
)
from pytest_openkata.core.compare import compare_skill
from pytest_openkata.core.power import paired_power, power_text
from pytest_openkata.core.runlog import RunLogError, log_lines, parse_run_log
from pytest_openkata.core.trials import scored_trial
from pytest_openkata.infra.config import resolve_settings
from pytest_openkata.providers.reporters.markdown import render_markdown
from tests.support.results import ROOT, judged, logged, scenario


def _wilson(share: float, n: int, confidence: float) -> tuple[float, float]:
    """Wilson's score interval of a share from n trials, in percent, by its formula."""
    z = stats.norm.ppf(1 - (1 - confidence) / 2)
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n))
    return (100 * (centre - half), 100 * (centre + half))


def test_the_interval_is_wilsons_of_the_mean_as_a_share() -> None:
    # mean 50 of three trials: the interval of 1.5 passes in 3 pass/fail trials.
    for confidence in (0.95, 0.8):
        assert mean_interval([60.0, 40.0, 50.0], confidence) == pytest.approx(
            _wilson(0.5, 3, confidence)
        )
    # Two perfect trials: z = 1.95996, low end n / (n + z^2) = 2 / 5.84146 = 34.238 %.
    assert mean_interval([100.0, 100.0], 0.95) == pytest.approx((34.238, 100.0), abs=1e-3)


def test_equal_scores_still_leave_an_interval() -> None:
    # A t interval of [40, 40] would have zero width; the mean's worst-case spread does not.
    low, high = mean_interval([40.0, 40.0], 0.95)
    assert (low, high) == pytest.approx(_wilson(0.4, 2, 0.95))
    assert high - low > 50


@pytest.mark.parametrize(
    ("percentages", "threshold", "side"),
    [
        ([100.0], 30, UNSETTLED),  # one trial: no stop yet
        ([100.0, 100.0], 95, UNSETTLED),  # low end 34.2: two passes prove no 95 %
        ([100.0, 100.0], 30, SETTLED_ABOVE),
        ([100.0, 100.0], 100, UNSETTLED),  # a pass rate of 100 % can never be proven
        ([0.0, 0.0], 95, SETTLED_BELOW),  # high end 3.84146 / 5.84146 = 65.8
        ([0.0, 0.0], 60, UNSETTLED),
        # mean 65 of three: z^2/n = 1.28049, centre 1.29025 / 2.28049 = .5658,
        # half 0.85945 * sqrt(.075833 + .106708) = .3672: high end 93.3
        ([60.0, 70.0, 65.0], 95, SETTLED_BELOW),
        ([60.0, 70.0, 65.0], 93, UNSETTLED),
    ],
)
def test_the_side_is_settled_only_when_the_interval_lies_wholly_on_it(
    percentages: list[float], threshold: float, side: str
) -> None:
    assert settled_side(percentages, threshold, 0.95) == side


def test_each_look_is_made_at_a_confidence_that_holds_over_all_looks() -> None:
    # trials_max 6: up to 5 looks (after trials 2..6), each at 1 - 0.05 / 5 = 0.99.
    assert AutoTrialRule(maximum=6, confidence=0.95).look_confidence == pytest.approx(0.99)
    assert AutoTrialRule(maximum=2, confidence=0.9).look_confidence == pytest.approx(0.9)


def _trials(*percentages_of_ten: int) -> list:
    """Trials of ten one-point criteria, ``n`` of them passing (n * 10 %)."""
    return [
        scored_trial(index, [judged(f"c{i}", 1, i < passes) for i in range(10)])
        for index, passes in enumerate(percentages_of_ten, start=1)
    ]


def test_the_rule_stops_when_settled_at_the_maximum_or_on_an_error() -> None:
    # Looks at 1 - 0.05 / 3: z = 2.394, z^2 = 5.731; two passes: low end 2 / 7.731 = 25.9 %.
    rule = AutoTrialRule(maximum=4, confidence=0.95, threshold=25)
    assert rule.verdict(_trials(10)) == (False, AutoTrials(4, 0.95, 25, UNSETTLED))
    assert rule.verdict(_trials(10, 10)) == (True, AutoTrials(4, 0.95, 25, SETTLED_ABOVE))
    assert AutoTrialRule(maximum=4, confidence=0.95, threshold=26).verdict(_trials(10, 10)) == (
        False,
        AutoTrials(4, 0.95, 26, UNSETTLED),
    )
    assert rule.verdict(_trials(10, 0, 10)) == (False, AutoTrials(4, 0.95, 25, UNSETTLED))
    assert rule.verdict(_trials(10, 0, 10, 0)) == (True, AutoTrials(4, 0.95, 25, UNSETTLED))
    with_error = [*_trials(10), replace(_trials(0)[0], index=2, error="judge down")]
    assert rule.verdict(with_error)[0] is True


@pytest.mark.parametrize(
    ("maximum", "confidence", "named"),
    [(1, 0.95, "trials_max"), (10, 1.0, "trials_confidence"), (10, 0.0, "trials_confidence")],
)
def test_a_rule_that_could_never_settle_is_refused(
    maximum: int, confidence: float, named: str
) -> None:
    with pytest.raises(ValueError, match=named):
        AutoTrialRule(maximum=maximum, confidence=confidence)


def test_the_saving_counts_the_trials_not_run_against_the_maximum() -> None:
    settled = replace(scenario("scenario-0", *[[judged("c", 1, True)]] * 2),
                      auto_trials=AutoTrials(10, 0.95, 95, SETTLED_ABOVE))  # fmt: skip
    unsettled = replace(scenario("scenario-1", *[[judged("c", 1, True)]] * 10),
                        auto_trials=AutoTrials(10, 0.95, 95, UNSETTLED))  # fmt: skip
    fixed = scenario("scenario-2")
    assert (settled.trials_saved, unsettled.trials_saved, fixed.trials_saved) == (8, 0, 0)
    # Three trials of at most ten, unsettled and without an error: the budget stopped them.
    cut = replace(scenario("scenario-3", *[[judged("c", 1, True)]] * 3),
                  auto_trials=AutoTrials(10, 0.95, 95, UNSETTLED))  # fmt: skip
    assert (cut.budget_cut, cut.trials_saved) == (True, 0)
    assert savings_text([cut]) == (
        "3 of at most 3 run (95% confidence), 0 saved; "
        "scenario-3: 3, stopped by the budget before it settled"
    )
    assert savings_text([settled, unsettled, fixed]) == (
        "12 of at most 20 run (95% confidence), 8 saved; scenario-0: 2, above the threshold; "
        "scenario-1: 10, not settled at the maximum"
    )
    assert savings_text([fixed]) is None


def test_the_run_log_keeps_how_auto_trials_ran_and_refuses_a_malformed_record() -> None:
    result = replace(scenario("scenario-0", *[[judged("c", 1, True)]] * 2),
                     auto_trials=AutoTrials(6, 0.9, 95, SETTLED_ABOVE))  # fmt: skip
    [back] = logged([result]).results
    assert back.auto_trials == AutoTrials(6, 0.9, 95, SETTLED_ABOVE)
    assert back.trials_saved == 4
    text = log_lines(logged([result]).info, [result], ROOT)
    broken = text.replace('"settled": "above"', '"settled": "sideways"')
    with pytest.raises(RunLogError, match=r"line 2: .*settled"):
        parse_run_log(broken)


# --- power ---------------------------------------------------------------------------------


def _independent_power(effect: float, n: int, alpha: float = 0.05) -> float:
    """The two-sided paired t-test's power from the noncentral t distribution directly."""
    critical = stats.t.isf(alpha / 2, n - 1)
    noncentrality = effect * math.sqrt(n)
    upper = stats.nct.sf(critical, n - 1, noncentrality)
    lower = stats.nct.cdf(-critical, n - 1, noncentrality)
    return float(upper + (lower if math.isfinite(lower) else 0.0))


def _paired(name: str, with_passes: int, without_passes: int) -> ScenarioResult:
    own = scenario(name, [judged(f"c{i}", 1, i < with_passes) for i in range(10)])
    other = scenario(name, [judged(f"c{i}", 1, i < without_passes) for i in range(10)])
    return replace(own, baseline=replace(other, arm="without-skill"))


PAIRS = [(9, 8), (8, 6), (7, 7), (10, 8), (6, 5), (9, 7)]  # passes of ten, with and without


def test_the_detectable_difference_and_the_scenarios_needed_match_an_independent_power() -> None:
    comparison = compare_skill([_paired(f"scenario-{i}", *pair) for i, pair in enumerate(PAIRS)])
    assert comparison is not None
    differences = [10.0, 20.0, 0.0, 20.0, 10.0, 20.0]
    assert comparison.differences == pytest.approx(differences)
    sd = statistics.stdev(differences)  # 8.16 points

    analysis = comparison.power(10)

    assert analysis is not None
    assert (analysis.scenarios, analysis.stdev) == (6, pytest.approx(sd))
    effect = optimize.brentq(lambda d: _independent_power(d, 6) - 0.8, 0.01, 20)
    assert analysis.detectable == pytest.approx(effect * sd, rel=1e-4)
    needed = next(n for n in range(2, 1000) if _independent_power(10 / sd, n) >= 0.8)
    assert analysis.needed == needed
    assert _independent_power(10 / sd, needed - 1) < 0.8
    assert paired_power(differences, 2.5).needed == next(  # type: ignore[union-attr]
        n for n in range(2, 1000) if _independent_power(2.5 / sd, n) >= 0.8
    )
    assert power_text(analysis) == (
        f"smallest detectable difference {effect * sd:.1f} points at 6 scenarios (paired "
        f"t-test, alpha 0.05, power 0.8, sd of the differences {sd:.1f}); 10 points need "
        f"{needed} scenarios"
    )


def test_a_large_effect_needs_the_fewest_scenarios_a_paired_test_can_have() -> None:
    analysis = paired_power([1.0, 2.0], 10)  # sd 0.71: an effect of 14 sd
    assert analysis is not None
    assert analysis.needed == 2
    assert _independent_power(10 / statistics.stdev([1.0, 2.0]), 2) >= 0.8


def test_no_power_figures_without_spread_or_with_one_scenario() -> None:
    assert paired_power([5.0], 10) is None
    flat = paired_power([5.0, 5.0, 5.0], 10)
    assert flat is not None
    assert (flat.detectable, flat.needed) == (None, None)
    with pytest.raises(ValueError, match="positive"):
        paired_power([1.0, 2.0], 0)


def test_the_markdown_report_states_the_power_for_the_runs_uplift_target() -> None:
    results = [_paired(f"scenario-{i}", *pair) for i, pair in enumerate(PAIRS)]
    run = logged(results)
    sd = statistics.stdev([10.0, 20.0, 0.0, 20.0, 10.0, 20.0])
    target = 5.0
    needed = next(n for n in range(2, 1000) if _independent_power(target / sd, n) >= 0.8)
    retargeted = replace(run, info=replace(run.info, settings={"uplift_target": target}))

    text = render_markdown(retargeted)

    assert f"; 5 points need {needed} scenarios." in text
    assert "Power: smallest detectable difference" in render_markdown(run)


# --- settings ------------------------------------------------------------------------------


def _resolved(**environ: str) -> EvalSettings:
    return resolve_settings(ini={}, yaml_path=None, environ=environ, cli={})


def test_trials_take_auto_with_a_maximum_and_a_confidence() -> None:
    settings = _resolved(
        OPENKATA_EVAL_TRIALS="auto",
        OPENKATA_EVAL_TRIALS_MAX="7",
        OPENKATA_EVAL_TRIALS_CONFIDENCE="0.9",
        OPENKATA_EVAL_UPLIFT_TARGET="5",
    )
    assert (settings.trials, settings.trials_max, settings.trials_confidence) == ("auto", 7, 0.9)
    assert settings.uplift_target == 5
    assert _resolved(OPENKATA_EVAL_TRIALS="3").trials == 3
    defaults = _resolved()
    assert (defaults.trials, defaults.trials_max, defaults.trials_confidence) == (1, 10, 0.95)
    assert defaults.uplift_target == 10


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("OPENKATA_EVAL_TRIALS", "sometimes", "neither a whole number of trials nor auto"),
        ("OPENKATA_EVAL_TRIALS_MAX", "1", "at least 2"),
        ("OPENKATA_EVAL_TRIALS_CONFIDENCE", "95", "strictly between 0 and 1"),
        ("OPENKATA_EVAL_UPLIFT_TARGET", "0", "must be a positive number"),
    ],
)
def test_bad_auto_trial_settings_name_their_source(key: str, value: str, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        _resolved(**{key: value})
    assert str(info.value).startswith(f"environment {key}:")
    assert says in str(info.value)
