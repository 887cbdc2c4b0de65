"""Uplift: normalized gain, bootstrap interval, sign-flip test, exact McNemar, verdict, arms.

Expected values are worked out by hand (in the comments), from published examples, from the
binomial distribution, or by a brute-force enumeration written here; never by the module.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
import statistics

import pytest

from pytest_openkata.core.uplift import (
    McNemar,
    Uplift,
    bootstrap_interval_95,
    compare_arms,
    mcnemar_exact_p_value,
    normalized_gain,
    sign_flip_p_value,
    verdict,
)

THIRD = 100 / 3  # a scenario mean over three trials moves in steps of a third
SIXTH = 100 / 6


def brute_force_sign_flip(differences: list[float]) -> float:
    """Exact sign-flip p-value by listing every sign assignment (the documented rule)."""
    observed = abs(sum(differences))
    hits = 0
    for signs in itertools.product((1.0, -1.0), repeat=len(differences)):
        flipped = sum(sign * value for sign, value in zip(signs, differences, strict=True))
        if abs(flipped) >= observed - 1e-9:
            hits += 1
    return hits / (1 << len(differences))


def binomial_sign_flip(n: int, positives: int) -> float:
    """Exact p for n differences of one magnitude, ``positives`` of them positive.

    A sign assignment with j positive signs sums to magnitude·(2j - n), so the p-value is
    P(|2J - n| >= |2·positives - n|) for J ~ Binomial(n, 1/2).
    """
    observed = abs(2 * positives - n)
    hits = sum(math.comb(n, j) for j in range(n + 1) if abs(2 * j - n) >= observed)
    return hits / (1 << n)


# --- normalized_gain ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("p_with", "p_without", "expected"),
    [
        (75.0, 50.0, 0.5),  # (0.75 - 0.5) / (1 - 0.5)
        (100.0, 0.0, 1.0),  # the whole headroom
        (30.0, 0.0, 0.3),
        (100.0, 60.0, 1.0),
        (60.0, 60.0, 0.0),
        (60.0, 80.0, -1.0),  # (0.6 - 0.8) / 0.2
        (50.0, 90.0, -4.0),  # (0.5 - 0.9) / 0.1: not bounded below
        (0.0, 50.0, -1.0),
        (62.5, 25.0, 0.5),  # 0.375 / 0.75
    ],
)
def test_normalized_gain_values(p_with: float, p_without: float, expected: float) -> None:
    assert normalized_gain(p_with, p_without) == pytest.approx(expected, abs=1e-12)


def test_normalized_gain_is_exactly_zero_when_both_arms_are_perfect() -> None:
    gain = normalized_gain(100.0, 100.0)
    assert gain == 0.0
    assert math.copysign(1.0, gain) == 1.0


@pytest.mark.parametrize("p_with", [0.0, 50.0, 99.0, 99.999])
def test_normalized_gain_is_minus_one_when_only_the_baseline_is_perfect(p_with: float) -> None:
    assert normalized_gain(p_with, 100.0) == -1.0


@pytest.mark.parametrize(
    ("p_with", "p_without"),
    [(math.nan, 50.0), (50.0, math.nan), (-0.1, 50.0), (50.0, 100.1), (math.inf, 0.0)],
)
def test_normalized_gain_rejects_values_outside_percentages(
    p_with: float, p_without: float
) -> None:
    with pytest.raises(ValueError, match=r"\[0, 100\]"):
        normalized_gain(p_with, p_without)


# --- bootstrap_interval_95 ----------------------------------------------------------------

SPREAD = [12.5, -THIRD, 40.0, 0.0, 2 * THIRD, 5.0, -10.0, 25.0, THIRD, 7.5]


def test_bootstrap_is_deterministic_for_a_seed() -> None:
    first = bootstrap_interval_95(SPREAD, seed=7)
    second = bootstrap_interval_95(list(SPREAD), seed=7)
    assert first == second
    assert bootstrap_interval_95(SPREAD) == bootstrap_interval_95(SPREAD, seed=0)


def test_bootstrap_depends_on_the_seed() -> None:
    intervals = {bootstrap_interval_95(SPREAD, seed=seed) for seed in range(6)}
    assert len(intervals) > 1


@pytest.mark.parametrize(
    "differences", [[7.5], [-THIRD], [3.3, 3.3, 3.3, 3.3, 3.3], [0.1, 0.1, 0.1], [0.0] * 4]
)
def test_bootstrap_degenerate_interval_is_the_value_itself(differences: list[float]) -> None:
    # Averaging three copies of 0.1 gives 0.10000000000000002: the interval must still be
    # exactly (d, d).
    value = differences[0]
    assert bootstrap_interval_95(differences) == (value, value)


def test_bootstrap_two_points_spans_both() -> None:
    # Resample means of [0, 10] are 0, 5 or 10 with chances 1/4, 1/2, 1/4; about 2 500 of the
    # 10 000 means sit at each end, so both the 2.5th and the 97.5th percentile are ends.
    assert bootstrap_interval_95([0.0, 10.0]) == (0.0, 10.0)


def test_bootstrap_three_points_with_a_rare_top() -> None:
    # Means of [0, 0, 30] are 0, 10, 20, 30 with chances 8/27, 12/27, 6/27, 1/27: about 370 of
    # the 10 000 means are 30, more than the top 2.5 % (250), and about 2 960 are 0.
    assert bootstrap_interval_95([0.0, 0.0, 30.0]) == (0.0, 30.0)


def test_bootstrap_matches_the_binomial_percentiles() -> None:
    # 50 zeros and 50 tens: a resample mean is 10·K/100 with K ~ Binomial(100, 1/2), whose
    # 2.5th and 97.5th percentiles are 40 and 60 (P(K <= 39) = 0.018, P(K <= 40) = 0.028), so
    # the interval is near (4.0, 6.0).
    low, high = bootstrap_interval_95([0.0] * 50 + [10.0] * 50)
    assert low == pytest.approx(4.0, abs=0.15)
    assert high == pytest.approx(6.0, abs=0.15)


def test_bootstrap_follows_the_documented_procedure() -> None:
    # The documented procedure spelled out with the standard library: whole scenarios drawn by
    # random.Random(seed).choices, means by math.fsum / n, and the inclusive (linear
    # interpolation) 2.5th and 97.5th percentiles, which statistics.quantiles gives as cut
    # points 1 and 39 of 40.
    # Irregular differences, so that neighbouring order statistics differ and the
    # interpolation shows.
    differences = [3.7, -1.9, 8.25, 0.6, -4.4, 2.2, 9.1, -0.35, 5.5, 1.05, 7.3, -2.8]
    seed, resamples = 11, 2_000
    rng = random.Random(seed)
    n = len(differences)
    means = [math.fsum(rng.choices(differences, k=n)) / n for _ in range(resamples)]
    cuts = statistics.quantiles(means, n=40, method="inclusive")
    low, high = bootstrap_interval_95(differences, seed=seed, resamples=resamples)
    assert low == pytest.approx(cuts[0], rel=1e-12, abs=1e-12)
    assert high == pytest.approx(cuts[38], rel=1e-12, abs=1e-12)


def test_bootstrap_interval_contains_the_mean_and_stays_within_the_range() -> None:
    rng = random.Random(2024)
    for _ in range(25):
        n = rng.randint(2, 15)
        differences = [rng.choice([-1, 1]) * rng.randint(0, 6) * SIXTH for _ in range(n)]
        low, high = bootstrap_interval_95(differences, seed=rng.randint(0, 1000))
        mean = math.fsum(differences) / n
        assert min(differences) <= low <= mean <= high <= max(differences)


def test_bootstrap_interval_narrows_with_more_scenarios() -> None:
    few = bootstrap_interval_95([0.0, 10.0] * 3)
    many = bootstrap_interval_95([0.0, 10.0] * 60)
    assert many[1] - many[0] < few[1] - few[0]


@pytest.mark.parametrize(
    ("differences", "kwargs"),
    [([], {}), ([1.0, math.nan], {}), ([1.0, math.inf], {}), ([1.0, 2.0], {"resamples": 0})],
)
def test_bootstrap_rejects_bad_input(differences: list[float], kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="bootstrap_interval_95"):
        bootstrap_interval_95(differences, **kwargs)


# --- sign_flip_p_value: exact -------------------------------------------------------------


def test_sign_flip_exact_three_by_hand() -> None:
    # ±10 ±20 ±30: 60, 40, 20, 0, 0, -20, -40, -60. Observed 60; |sum| >= 60 for 2 of 8.
    assert sign_flip_p_value([10.0, 20.0, 30.0]) == (0.25, "sign-flip exact")


def test_sign_flip_exact_four_by_hand() -> None:
    # Observed 5 - 10 + 15 + 20 = 30. The 16 sums of ±5 ±10 ±15 ±20 are
    # 50, 40, 30, 20, 20, 10, 0, -10 and their negatives -50, -40, -30, -20, -20, -10, 0, 10;
    # |sum| >= 30 for 50, 40, 30, -50, -40, -30: 6 of 16.
    assert sign_flip_p_value([5.0, -10.0, 15.0, 20.0]) == (0.375, "sign-flip exact")


def test_sign_flip_exact_counts_float_ties() -> None:
    # In sixths u = 100/6 the differences are 1, 1, 1, 2 (observed |sum| 5u); ±1 ±1 ±1 ±2
    # reaches |5| only with all signs alike: 2 of 16. The same sums added in another order
    # differ in their last bits, which the tolerance absorbs.
    assert sign_flip_p_value([-SIXTH, -SIXTH, -SIXTH, -2 * SIXTH]) == (0.125, "sign-flip exact")
    # In tenths: 1, 2, 3 as in the three-value case above (0.1 + 0.2 != 0.3 in floats).
    assert sign_flip_p_value([0.1, 0.2, 0.3]) == (0.25, "sign-flip exact")
    assert sign_flip_p_value([0.3, -0.1, -0.2]) == (1.0, "sign-flip exact")


def test_sign_flip_exact_one_difference() -> None:
    # ±d: both assignments are as extreme as the observed one.
    assert sign_flip_p_value([42.0]) == (1.0, "sign-flip exact")


def test_sign_flip_zeros_double_both_counts() -> None:
    # A zero difference adds an assignment of each sign with the same sum: p is unchanged.
    assert sign_flip_p_value([10.0, 20.0, 30.0, 0.0, 0.0]) == (0.25, "sign-flip exact")


def test_sign_flip_opposite_differences_cancel() -> None:
    # Observed sum 0: every assignment is at least as extreme.
    assert sign_flip_p_value([25.0, -25.0, THIRD, -THIRD]) == (1.0, "sign-flip exact")


@pytest.mark.parametrize(
    "differences",
    [
        [12.5, -THIRD, 40.0, 0.0, 2 * THIRD, 5.0, -10.0, 25.0, THIRD, 7.5],
        [THIRD, THIRD, -THIRD, 2 * THIRD, 0.0, THIRD, -2 * THIRD, THIRD, THIRD, 100.0, THIRD],
        [SIXTH, 2 * SIXTH, -SIXTH, 3 * SIXTH, SIXTH, -4 * SIXTH, 0.0, 5 * SIXTH, SIXTH, 2 * SIXTH,
         -SIXTH, 6 * SIXTH],
        [3.7, -1.9, 8.25, 0.6, -4.4, 2.2, 9.1, -0.35, 5.5, 1.05, 7.3, -2.8],
    ],
)  # fmt: skip
def test_sign_flip_exact_matches_brute_force(differences: list[float]) -> None:
    p_value, test = sign_flip_p_value(differences)
    assert test == "sign-flip exact"
    assert p_value == brute_force_sign_flip(differences)


def test_sign_flip_exact_matches_brute_force_on_random_sets() -> None:
    rng = random.Random(99)
    for _ in range(30):
        n = rng.randint(1, 10)
        differences = [rng.randint(-6, 6) * SIXTH for _ in range(n)]
        assert sign_flip_p_value(differences) == (
            brute_force_sign_flip(differences),
            "sign-flip exact",
        )


def test_sign_flip_exact_at_twenty_scenarios() -> None:
    # Twenty equal differences: only "all +" and "all -" reach |sum| = 200.
    assert sign_flip_p_value([10.0] * 20) == (2 / 2**20, "sign-flip exact")
    # Nineteen +10 and one -10 (observed 180): the sum is 10·(20 - 2j) with j minus signs,
    # |sum| >= 180 for j in {0, 1, 19, 20}: (1 + 20 + 20 + 1) / 2^20.
    assert sign_flip_p_value([10.0] * 19 + [-10.0]) == (42 / 2**20, "sign-flip exact")


def test_sign_flip_exact_matches_the_binomial_case() -> None:
    differences = [10.0] * 18 + [-10.0] * 6
    expected = binomial_sign_flip(24, 18)
    # 2·(1 + 24 + 276 + 2024 + 10626 + 42504 + 134596) / 2^24 = 380102 / 16777216.
    assert expected == 380102 / 2**24
    assert sign_flip_p_value(differences, exact_up_to=24) == (expected, "sign-flip exact")


def test_sign_flip_all_zero_is_one() -> None:
    assert sign_flip_p_value([0.0] * 5) == (1.0, "sign-flip exact")
    assert sign_flip_p_value([0.0] * 25) == (1.0, "sign-flip monte-carlo")


# --- sign_flip_p_value: Monte Carlo -------------------------------------------------------


def test_sign_flip_switches_to_monte_carlo_above_the_limit() -> None:
    differences = [10.0, 20.0, 30.0, 40.0]
    assert sign_flip_p_value(differences, exact_up_to=4)[1] == "sign-flip exact"
    assert sign_flip_p_value(differences, exact_up_to=3)[1] == "sign-flip monte-carlo"
    assert sign_flip_p_value([5.0] * 21)[1] == "sign-flip monte-carlo"


def test_sign_flip_monte_carlo_approximates_the_binomial_case() -> None:
    # Exact p = 380102 / 2^24 = 0.02266; the Monte Carlo standard error with 100 000 resamples
    # is about 0.0005, so 0.003 is six of them.
    differences = [10.0] * 18 + [-10.0] * 6
    p_value, test = sign_flip_p_value(differences)
    assert test == "sign-flip monte-carlo"
    assert p_value == pytest.approx(binomial_sign_flip(24, 18), abs=0.003)


def test_sign_flip_monte_carlo_has_the_plus_one_correction() -> None:
    # Thirty equal differences: a random assignment reaches |sum| = 300 with chance 2^-29, so
    # none of 1 000 does, and p = (0 + 1) / (1000 + 1), never 0.
    assert sign_flip_p_value([10.0] * 30, resamples=1_000) == (1 / 1001, "sign-flip monte-carlo")


def test_sign_flip_monte_carlo_p_is_a_corrected_count() -> None:
    differences = [step * SIXTH for step in (1, -2, 3, 0, 1, 1, -1, 2, 4, -3, 1, 2)]
    resamples = 777
    p_value, _ = sign_flip_p_value(differences, resamples=resamples, exact_up_to=5)
    count = p_value * (resamples + 1) - 1
    assert count == pytest.approx(round(count), abs=1e-6)
    assert 0 <= round(count) <= resamples


def test_sign_flip_monte_carlo_is_deterministic_and_seeded() -> None:
    differences = [3.0, -1.0, 4.0, 1.0, -5.0, 9.0, 2.0, -6.0, 5.0, 3.0, 5.0, -8.0] * 2
    first = sign_flip_p_value(differences, seed=5)
    assert first == sign_flip_p_value(list(differences), seed=5)
    assert sign_flip_p_value(differences) == sign_flip_p_value(differences, seed=0)
    assert len({sign_flip_p_value(differences, seed=seed) for seed in range(5)}) > 1


@pytest.mark.parametrize(
    ("differences", "kwargs"),
    [
        ([], {}),
        ([1.0, math.nan], {}),
        ([-math.inf], {}),
        ([1.0], {"resamples": 0}),
        ([1.0], {"exact_up_to": -1}),
    ],
)
def test_sign_flip_rejects_bad_input(differences: list[float], kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="sign_flip_p_value"):
        sign_flip_p_value(differences, **kwargs)


# --- mcnemar_exact_p_value ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("b", "c", "expected"),
    [
        # min(b, c) = 1: 2·(C(10, 0) + C(10, 1)) / 2^10 = 2·(1 + 10) / 1024.
        (1, 9, 0.021484375),
        (9, 1, 0.021484375),
        # Fagerland, Lydersen & Laake, "The McNemar test for binary matched-pairs data: mid-p
        # and asymptotic are better than exact conditional", BMC Medical Research Methodology
        # 13:91 (2013), Table 1 (Bentur et al., airway hyper-responsiveness before and after
        # stem cell transplantation): discordant pairs 1 and 7, exact conditional p = 0.070;
        # 2·(1 + 8) / 256 = 0.0703125.
        (1, 7, 0.0703125),
        # 2·(1 + 17 + 136 + 680 + 2380 + 6188) / 2^17 = 18804 / 131072.
        (12, 5, 18804 / 131072),
        (0, 5, 2 / 32),
        (0, 6, 2 / 64),
        (0, 1, 1.0),  # 2·1/2
        (5, 5, 1.0),  # 2·638/1024 > 1, capped
        (3, 4, 1.0),  # 2·(1 + 7 + 21 + 35)/128 = 1 exactly
        (0, 0, 1.0),
        (7, 0, 2 / 128),
    ],
)
def test_mcnemar_exact_values(b: int, c: int, expected: float) -> None:
    assert mcnemar_exact_p_value(b, c) == expected


def test_mcnemar_exact_published_rounding() -> None:
    # The published three-decimal figure of the Fagerland et al. example.
    assert round(mcnemar_exact_p_value(1, 7), 3) == 0.070


def test_mcnemar_exact_stays_exact_for_many_pairs() -> None:
    # 2 / 2^1000 = 2^-999, representable; a float computation of C(1000, 0) / 2^1000 would not
    # keep it exact through powers of 1/2 summed in floats.
    assert mcnemar_exact_p_value(0, 1000) == 2.0**-999
    assert mcnemar_exact_p_value(500, 500) == 1.0


@pytest.mark.parametrize(("b", "c"), [(-1, 3), (3, -1)])
def test_mcnemar_rejects_negative_counts(b: int, c: int) -> None:
    with pytest.raises(ValueError, match="McNemar"):
        mcnemar_exact_p_value(b, c)


# --- verdict ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ci95", "p_value", "expected"),
    [
        ((2.0, 10.0), 0.01, "improves"),
        ((0.5, 2.0), 0.01, "improves"),  # significant wins before the margin
        ((-10.0, -2.0), 0.01, "regresses"),
        ((-2.0, -0.5), 0.001, "regresses"),
        ((-3.0, 4.0), 0.5, "no-difference"),
        ((1.0, 4.0), 0.2, "no-difference"),  # above 0 but not significant, and small
        ((0.0, 0.0), 1.0, "no-difference"),  # an A/A run
        ((-2.0, 12.0), 0.3, "inconclusive"),
        ((2.0, 12.0), 0.06, "inconclusive"),  # above 0 but not significant, and wide
        ((-12.0, -1.0), 0.2, "inconclusive"),
        ((-3.0, 4.0), 0.01, "no-difference"),  # significant but the interval holds 0
    ],
)
def test_verdict_outcomes(ci95: tuple[float, float], p_value: float, expected: str) -> None:
    assert verdict(ci95, p_value) == expected


@pytest.mark.parametrize(
    ("ci95", "p_value", "expected"),
    [
        ((0.0, 4.0), 0.01, "no-difference"),  # touching 0 is not above it
        ((0.0, 8.0), 0.01, "inconclusive"),
        ((-8.0, 0.0), 0.01, "inconclusive"),  # touching 0 is not below it
        ((1e-12, 8.0), 0.01, "improves"),
        ((-8.0, -1e-12), 0.01, "regresses"),
        ((2.0, 8.0), 0.05, "inconclusive"),  # p == alpha is not significant
        ((2.0, 8.0), 0.0499, "improves"),
        ((-8.0, -2.0), 0.05, "inconclusive"),
        ((-5.0, 5.0), 0.5, "no-difference"),  # the margin is inclusive
        ((-5.0, 5.000001), 0.5, "inconclusive"),
        ((-5.000001, 5.0), 0.5, "inconclusive"),
    ],
)
def test_verdict_boundaries(ci95: tuple[float, float], p_value: float, expected: str) -> None:
    assert verdict(ci95, p_value) == expected


def test_verdict_margin_and_alpha_are_parameters() -> None:
    assert verdict((-3.0, 4.0), 0.5, margin=2.0) == "inconclusive"
    assert verdict((-8.0, 9.0), 0.5, margin=10.0) == "no-difference"
    assert verdict((2.0, 8.0), 0.03, alpha=0.01) == "inconclusive"
    assert verdict((2.0, 8.0), 0.08, alpha=0.1) == "improves"


@pytest.mark.parametrize(
    ("ci95", "p_value", "kwargs"),
    [
        ((5.0, 1.0), 0.5, {}),
        ((math.nan, 1.0), 0.5, {}),
        ((0.0, 1.0), 1.5, {}),
        ((0.0, 1.0), math.nan, {}),
        ((0.0, 1.0), 0.5, {"margin": -1.0}),
        ((0.0, 1.0), 0.5, {"alpha": 0.0}),
        ((0.0, 1.0), 0.5, {"alpha": 1.0}),
    ],
)
def test_verdict_rejects_bad_input(
    ci95: tuple[float, float], p_value: float, kwargs: dict[str, float]
) -> None:
    with pytest.raises(ValueError, match="verdict"):
        verdict(ci95, p_value, **kwargs)


# --- compare_arms -------------------------------------------------------------------------


def test_compare_arms_small_set() -> None:
    pairs = [(100.0, 50.0), (80.0, 80.0), (60.0, 30.0), (90.0, 40.0)]
    uplift = compare_arms(pairs, arm="without")
    assert uplift.arm == "without"
    assert uplift.scenarios == 4
    assert uplift.with_mean == 82.5  # (100 + 80 + 60 + 90) / 4
    assert uplift.without_mean == 50.0  # (50 + 80 + 30 + 40) / 4
    assert uplift.difference == 32.5
    assert uplift.normalized_gain == 0.65  # 32.5 / (100 - 50)
    # Differences 50, 0, 30, 50 (observed 130). The zero doubles both counts; the 8 sums of
    # ±50 ±30 ±50 are 130, 30, 70, -30, 30, -70, -30, -130: 2 reach 130, so p = 4/16.
    assert uplift.p_value == 0.25
    assert uplift.test == "sign-flip exact"
    low, high = uplift.ci95
    assert 0.0 <= low <= 32.5 <= high <= 50.0
    assert uplift.ci95 == bootstrap_interval_95([50.0, 0.0, 30.0, 50.0], seed=0)
    # Not significant, and the interval reaches beyond ±5.
    assert uplift.verdict == "inconclusive"
    assert uplift.mcnemar is None


def test_compare_arms_passes_the_seed_to_the_interval() -> None:
    pairs = [(100.0, 50.0), (80.0, 80.0), (60.0, 30.0), (90.0, 40.0), (20.0, 45.0)]
    differences = [50.0, 0.0, 30.0, 50.0, -25.0]
    for seed in (0, 3):
        uplift = compare_arms(pairs, arm="v1", seed=seed)
        assert uplift.ci95 == bootstrap_interval_95(differences, seed=seed)


def test_compare_arms_gain_comes_from_the_means() -> None:
    # Means 75 and 50 give 0.5; the mean of per-scenario gains would be (0 + 0.5) / 2.
    uplift = compare_arms([(100.0, 100.0), (50.0, 0.0)], arm="without")
    assert uplift.normalized_gain == 0.5
    assert uplift.difference == 25.0


def test_compare_arms_clear_improvement() -> None:
    # Six positive differences 10..60: only "all +" and "all -" reach |210|, p = 2/64; every
    # resample mean is at least 10, so the interval lies above 0.
    pairs = [(20.0 + 10 * i, 10.0) for i in range(6)]
    uplift = compare_arms(pairs, arm="without")
    assert uplift.p_value == 0.03125
    assert uplift.test == "sign-flip exact"
    assert uplift.ci95[0] >= 10.0
    assert uplift.ci95[1] <= 60.0
    assert uplift.with_mean == 45.0
    assert uplift.without_mean == 10.0
    assert uplift.difference == 35.0
    assert uplift.verdict == "improves"


def test_compare_arms_clear_regression() -> None:
    pairs = [(10.0, 20.0 + 10 * i) for i in range(6)]
    uplift = compare_arms(pairs, arm="v0")
    assert uplift.p_value == 0.03125
    assert uplift.ci95[1] <= -10.0
    assert uplift.difference == -35.0
    assert uplift.normalized_gain == pytest.approx(-35.0 / 55.0, rel=1e-12)
    assert uplift.verdict == "regresses"


def test_compare_arms_a_a_run() -> None:
    pairs = [(50.0, 50.0), (100.0, 100.0), (0.0, 0.0), (THIRD, THIRD)]
    uplift = compare_arms(pairs, arm="same")
    mean = (50.0 + 100.0 + 0.0 + THIRD) / 4
    assert uplift == Uplift(
        arm="same",
        with_mean=mean,
        without_mean=mean,
        difference=0.0,
        ci95=(0.0, 0.0),
        normalized_gain=0.0,
        p_value=1.0,
        test="sign-flip exact",
        verdict="no-difference",
        scenarios=4,
        mcnemar=None,
    )


def test_compare_arms_many_scenarios_use_monte_carlo() -> None:
    pairs = [(60.0, 50.0)] * 21
    uplift = compare_arms(pairs, arm="without")
    assert uplift.test == "sign-flip monte-carlo"
    # A random assignment reaches |210| with chance 2^-20: with 100 000 resamples the count is
    # 0 (p = 1/100001) or, rarely, a few.
    assert uplift.p_value < 0.001
    assert uplift.ci95 == (10.0, 10.0)
    assert uplift.verdict == "improves"


def test_compare_arms_mcnemar_from_criteria() -> None:
    criteria = [(True, False)] + [(False, True)] * 9 + [(True, True)] * 4 + [(False, False)] * 2
    uplift = compare_arms([(25.0, 75.0)], arm="without", criterion_pairs=criteria)
    assert uplift.mcnemar == McNemar(b=1, c=9, p_value=0.021484375)


def test_compare_arms_mcnemar_with_no_discordant_criteria() -> None:
    criteria = [(True, True), (False, False)]
    uplift = compare_arms([(50.0, 50.0)], arm="without", criterion_pairs=criteria)
    assert uplift.mcnemar == McNemar(b=0, c=0, p_value=1.0)
    assert compare_arms([(50.0, 50.0)], arm="x", criterion_pairs=[]).mcnemar == McNemar(
        b=0, c=0, p_value=1.0
    )


def test_compare_arms_one_scenario() -> None:
    uplift = compare_arms([(70.0, 40.0)], arm="without")
    assert uplift.ci95 == (30.0, 30.0)
    assert (uplift.p_value, uplift.test) == (1.0, "sign-flip exact")
    assert uplift.normalized_gain == 0.5  # 30 / 60
    assert uplift.verdict == "inconclusive"


def test_uplift_is_frozen() -> None:
    uplift = compare_arms([(70.0, 40.0)], arm="without")
    with pytest.raises(dataclasses.FrozenInstanceError):
        uplift.verdict = "improves"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        McNemar(b=1, c=2, p_value=1.0).b = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    "pairs",
    [[], [(101.0, 50.0)], [(50.0, -1.0)], [(math.nan, 50.0)], [(50.0, 50.0), (50.0, math.inf)]],
)
def test_compare_arms_rejects_bad_pairs(pairs: list[tuple[float, float]]) -> None:
    with pytest.raises(ValueError, match=r"compare_arms|percentage"):
        compare_arms(pairs, arm="without")
