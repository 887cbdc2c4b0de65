"""Trial statistics: t critical values, confidence intervals, pass@k and pass^k, Welch."""

from __future__ import annotations

import dataclasses
import math

import pytest

from pytest_openkata.core.stats import (
    TrialStats,
    mean_interval_95,
    overall_interval_95,
    pass_at_k,
    pass_hat_k,
    sample_stdev,
    straddles,
    t_critical_95,
    trial_stats,
)

# Reference 0.975 quantiles of Student's t to 7 significant digits (standard tables).
T_REFERENCE = {
    2.5: 3.574655,
    7.5: 2.333040,
    45.0: 2.014103,
    60.0: 2.000298,
    120.0: 1.979930,
    1e6: 1.959966,
}


# --- sample_stdev -------------------------------------------------------------------------


def test_sample_stdev_uses_n_minus_one() -> None:
    # Mean 5; squared deviations 9+1+1+1+0+0+4+16 = 32; 32/7.
    values = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]
    assert sample_stdev(values) == pytest.approx(math.sqrt(32 / 7), rel=1e-12)


def test_sample_stdev_two_values() -> None:
    assert sample_stdev([0.0, 100.0]) == pytest.approx(math.sqrt(5000), rel=1e-12)


@pytest.mark.parametrize("values", [[], [42.0]])
def test_sample_stdev_fewer_than_two_values_is_zero(values: list[float]) -> None:
    assert sample_stdev(values) == 0.0


# --- t_critical_95 ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("df", "expected"),
    [(1, 12.706), (2, 4.303), (3, 3.182), (5, 2.571), (10, 2.228), (20, 2.086), (30, 2.042)],
)
def test_t_critical_table_values_are_exact(df: int, expected: float) -> None:
    assert t_critical_95(df) == expected
    assert t_critical_95(float(df)) == expected


@pytest.mark.parametrize(("df", "expected"), sorted(T_REFERENCE.items()))
def test_t_critical_off_table(df: float, expected: float) -> None:
    assert t_critical_95(df) == pytest.approx(expected, abs=2e-6)


def test_t_critical_large_df_rounded_values() -> None:
    assert t_critical_95(60) == pytest.approx(2.000, abs=1e-3)
    assert t_critical_95(120) == pytest.approx(1.980, abs=1e-3)
    assert t_critical_95(1e6) == pytest.approx(1.960, abs=1e-3)
    assert t_critical_95(math.inf) == pytest.approx(1.959964, abs=1e-6)


def test_t_critical_fractional_df_lies_between_neighbours() -> None:
    value = t_critical_95(7.5)
    assert t_critical_95(8) < value < t_critical_95(7)
    assert t_critical_95(1.5) == pytest.approx(6.016663, abs=2e-6)
    assert t_critical_95(4.303) < t_critical_95(1.5) < t_critical_95(1)


def test_t_critical_decreases_with_df_beyond_table() -> None:
    dfs = [30.5, 31.0, 40.0, 100.0, 999.0, 1000.5, 1e4, 1e9]
    values = [t_critical_95(df) for df in dfs]
    assert values == sorted(values, reverse=True)
    assert values[-1] == pytest.approx(1.959964, abs=1e-6)


def test_t_critical_snaps_rounding_noise_to_table() -> None:
    assert t_critical_95(3.0000000000000004) == 3.182
    assert t_critical_95(29.999999999999996) == 2.042
    assert t_critical_95(3.001) == pytest.approx(3.181846, abs=2e-6)


@pytest.mark.parametrize("df", [0.0, 0.999, -3.0, math.nan])
def test_t_critical_rejects_small_or_nan_df(df: float) -> None:
    with pytest.raises(ValueError, match="df >= 1"):
        t_critical_95(df)


# --- mean_interval_95 ---------------------------------------------------------------------


def test_mean_interval_by_hand() -> None:
    # Mean 90, s = 10 (deviations -10, 0, 10 -> 200/2 = 100), t(2) = 4.303.
    half = 4.303 * 10 / math.sqrt(3)  # 24.84338...
    low, high = mean_interval_95([80.0, 90.0, 100.0])
    assert low == pytest.approx(90 - half, abs=1e-12)
    assert high == pytest.approx(90 + half, abs=1e-12)
    assert low == pytest.approx(65.156618, abs=1e-6)
    assert high == pytest.approx(114.843382, abs=1e-6)  # not clamped here


def test_mean_interval_two_values() -> None:
    # Mean 75, deviations ±5 -> s^2 = 50, t(1) = 12.706, sqrt(n) = sqrt(2).
    half = 12.706 * math.sqrt(50) / math.sqrt(2)  # = 12.706 * 5
    assert mean_interval_95([70.0, 80.0]) == pytest.approx((75 - half, 75 + half), abs=1e-12)
    assert half == pytest.approx(63.53, abs=1e-12)


def test_mean_interval_zero_spread_collapses() -> None:
    assert mean_interval_95([60.0, 60.0, 60.0]) == (60.0, 60.0)


@pytest.mark.parametrize("values", [[], [50.0]])
def test_mean_interval_needs_two_values(values: list[float]) -> None:
    assert mean_interval_95(values) is None


# --- pass@k and pass^k --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 1, 0.4),  # c/n
        (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (5, 2, 3, 0.9),  # 1 - C(3,3)/C(5,3) = 1 - 1/10
        (5, 2, 4, 1.0),  # n - c < k
        (3, 0, 1, 0.0),
        (3, 0, 3, 0.0),
        (3, 3, 1, 1.0),
        (3, 3, 3, 1.0),
        (10, 3, 5, 1 - 21 / 252),  # C(7,5) = 21, C(10,5) = 252
    ],
)
def test_pass_at_k(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 3, 2, 0.3),  # C(3,2)/C(5,2) = 3/10
        (5, 3, 1, 0.6),
        (5, 3, 3, 0.1),  # 1/10
        (5, 3, 4, 0.0),  # c < k
        (3, 0, 1, 0.0),
        (3, 3, 3, 1.0),
        (10, 7, 5, 21 / 252),
    ],
)
def test_pass_hat_k(n: int, c: int, k: int, expected: float) -> None:
    assert pass_hat_k(n, c, k) == pytest.approx(expected, abs=1e-15)


def test_pass_at_k_large_counts_stay_exact() -> None:
    # C(200, 100) overflows a float mantissa by far; integer math then one division.
    assert pass_at_k(200, 1, 100) == pytest.approx(0.5, abs=1e-15)
    assert pass_hat_k(200, 199, 100) == pytest.approx(0.5, abs=1e-15)


@pytest.mark.parametrize(
    ("n", "c", "k"),
    [(5, 6, 1), (5, -1, 1), (5, 2, 0), (5, 2, 6), (0, 0, 1), (3, 1, -1)],
)
def test_pass_k_validation(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError, match="need"):
        pass_at_k(n, c, k)
    with pytest.raises(ValueError, match="need"):
        pass_hat_k(n, c, k)


# --- trial_stats --------------------------------------------------------------------------


def test_trial_stats_clamps_interval_and_counts_passes() -> None:
    stats = trial_stats([80.0, 90.0, 100.0])
    assert stats.trials == 3
    assert stats.mean == pytest.approx(90.0, abs=1e-12)
    assert stats.stdev == pytest.approx(10.0, abs=1e-12)
    assert stats.ci95 is not None
    assert stats.ci95[0] == pytest.approx(90 - 4.303 * 10 / math.sqrt(3), abs=1e-12)
    assert stats.ci95[1] == 100.0
    assert stats.passes == 1
    assert stats.pass_at_k == pytest.approx({1: 1 / 3, 2: 2 / 3, 3: 1.0}, abs=1e-15)
    assert stats.pass_hat_k == pytest.approx({1: 1 / 3, 2: 0.0, 3: 0.0}, abs=1e-15)


def test_trial_stats_clamps_low_end() -> None:
    stats = trial_stats([0.0, 10.0])
    assert stats.ci95 is not None
    assert stats.ci95[0] == 0.0
    assert stats.ci95[1] == pytest.approx(5 + 12.706 * 5, abs=1e-12)  # 68.53
    assert stats.passes == 0
    assert stats.pass_at_k == {1: 0.0, 2: 0.0}


def test_trial_stats_single_trial() -> None:
    stats = trial_stats([100.0])
    assert stats == TrialStats(
        trials=1,
        mean=100.0,
        stdev=0.0,
        ci95=None,
        passes=1,
        pass_at_k={1: 1.0},
        pass_hat_k={1: 1.0},
    )


def test_trial_stats_all_pass_zero_spread() -> None:
    stats = trial_stats([100.0] * 4)
    assert stats.ci95 == (100.0, 100.0)
    assert stats.passes == 4
    assert stats.pass_at_k == {1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0}
    assert stats.pass_hat_k == {1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0}


def test_trial_stats_mean_is_plain_left_to_right_sum() -> None:
    values = [0.1] * 10
    naive = 0.0
    for value in values:
        naive += value
    assert naive != math.fsum(values)  # 0.9999999999999999 vs 1.0
    assert trial_stats(values).mean == naive / 10


def test_trial_stats_is_frozen() -> None:
    stats = trial_stats([50.0, 100.0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.mean = 1.0  # type: ignore[misc]


def test_trial_stats_rejects_empty_and_out_of_range() -> None:
    with pytest.raises(ValueError, match="at least one"):
        trial_stats([])
    for bad in (-0.1, 100.5, math.nan):
        with pytest.raises(ValueError, match="out of"):
            trial_stats([50.0, bad])


# --- overall_interval_95 ------------------------------------------------------------------


def test_overall_interval_welch_by_hand() -> None:
    # A: mean 80, s 10, n 4 -> v = 100/4 = 25.   B: mean 60, s 20, n 5 -> v = 400/5 = 80.
    # overall = 70, SE = sqrt(105)/2, df = 105^2 / (25^2/3 + 80^2/4) = 11025 / (5425/3) = 189/31.
    df = 189 / 31
    assert df == pytest.approx(6.096774, abs=1e-6)
    t = t_critical_95(df)
    assert t_critical_95(7) < t < t_critical_95(6)
    assert t == pytest.approx(2.437528, abs=2e-6)  # reference t(0.975, 6.0968)
    half = t * math.sqrt(105) / 2
    low, high = overall_interval_95([(80.0, 10.0, 4), (60.0, 20.0, 5)])
    assert low == pytest.approx(70 - half, abs=1e-12)
    assert high == pytest.approx(70 + half, abs=1e-12)
    assert (low, high) == pytest.approx((57.511387, 82.488613), abs=1e-5)


def test_overall_interval_single_trial_scenario_adds_mean_only() -> None:
    # The n = 1 scenario shifts the centre to (80 + 60 + 100)/3 = 80 but adds no variance.
    # Variance from A and B only: SE = sqrt(105)/3, same df = 189/31.
    half = t_critical_95(189 / 31) * math.sqrt(105) / 3
    interval = overall_interval_95([(80.0, 10.0, 4), (60.0, 20.0, 5), (100.0, 0.0, 1)])
    assert interval == pytest.approx((80 - half, 80 + half), abs=1e-12)


def test_overall_interval_one_scenario_matches_mean_interval() -> None:
    values = [60.0, 70.0, 80.0, 90.0]
    mean = 75.0
    combined = overall_interval_95([(mean, sample_stdev(values), 4)])
    assert combined == pytest.approx(mean_interval_95(values), abs=1e-9)
    # Mean 75; squared deviations 225 + 25 + 25 + 225 = 500, s^2 = 500/3; df = 3, t = 3.182.
    half = 3.182 * math.sqrt(500 / 3) / 2
    assert combined == pytest.approx((75 - half, 75 + half), abs=1e-12)


def test_overall_interval_clamps() -> None:
    low, high = overall_interval_95([(95.0, 10.0, 2), (99.0, 1.0, 2)])
    # v = 50 and 0.5; df = 50.5^2 / (2500 + 0.25) ~ 1.02; the interval overshoots 100.
    assert high == 100.0
    half = t_critical_95(50.5**2 / 2500.25) * math.sqrt(50.5) / 2
    assert low == pytest.approx(97.0 - half, abs=1e-12)
    low, high = overall_interval_95([(1.0, 3.0, 3), (2.0, 3.0, 3)])
    assert low == 0.0
    assert high == pytest.approx(1.5 + 2.776 * math.sqrt(6) / 2, abs=1e-12)  # df = 4 exactly


def test_overall_interval_zero_variance_collapses() -> None:
    assert overall_interval_95([(80.0, 0.0, 3), (60.0, 0.0, 2), (40.0, 0.0, 1)]) == (60.0, 60.0)


@pytest.mark.parametrize("scenarios", [[], [(80.0, 0.0, 1)], [(80.0, 5.0, 1), (70.0, 0.0, 1)]])
def test_overall_interval_needs_a_repeated_scenario(
    scenarios: list[tuple[float, float, int]],
) -> None:
    assert overall_interval_95(scenarios) is None


def test_overall_interval_tiny_variances_do_not_underflow() -> None:
    # v = 1e-300/3 per scenario, so v^2 underflows to 0 unless the variances are rescaled.
    # Equal variances with n = 3: df = 2 + 2 = 4 (t = 2.776), SE = sqrt(2e-300/3)/2.
    half = 2.776 * math.sqrt(2e-300 / 3) / 2
    interval = overall_interval_95([(5e-150, 1e-150, 3), (5e-150, 1e-150, 3)])
    assert interval == pytest.approx((5e-150 - half, 5e-150 + half), rel=1e-12, abs=0)


def test_overall_interval_validation() -> None:
    with pytest.raises(ValueError, match="n_trials"):
        overall_interval_95([(50.0, 1.0, 0)])
    with pytest.raises(ValueError, match="stdev"):
        overall_interval_95([(50.0, -1.0, 3)])
    with pytest.raises(ValueError, match="stdev"):
        overall_interval_95([(50.0, math.nan, 3)])


# --- straddles ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("interval", "threshold", "expected"),
    [
        ((90.0, 99.0), 95.0, True),
        ((90.0, 95.0), 95.0, True),  # high == threshold: the gate passes at the top
        ((95.0, 99.0), 95.0, False),  # low == threshold: every value passes the gate
        ((96.0, 99.0), 95.0, False),
        ((80.0, 94.9), 95.0, False),
        ((95.0, 95.0), 95.0, False),
        (None, 95.0, False),
    ],
)
def test_straddles(interval: tuple[float, float] | None, threshold: float, expected: bool) -> None:
    assert straddles(interval, threshold) is expected
