"""Whether a skill helps more than noise: paired statistics over two arms (stdlib only).

A run evaluates every scenario of a skill in two arms, "with" (the skill) and a baseline
"without" (no skill, an older version of it, or the same arm again for an A/A run). Each
scenario gives one percentage in [0, 100] per arm, the mean over its trials. The scenario is the
unit of everything here: intervals and tests resample or permute whole scenarios, never single
trials, because trials of one scenario are not independent of each other.

Everything here is a pure function, and every random step is driven by ``random.Random(seed)``
so that identical inputs give identical floats, and a report does not change between identical
runs.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "IMPROVES",
    "INCONCLUSIVE",
    "NO_DIFFERENCE",
    "REGRESSES",
    "McNemar",
    "Uplift",
    "bootstrap_interval_95",
    "compare_arms",
    "mcnemar_exact_p_value",
    "normalized_gain",
    "sign_flip_p_value",
    "verdict",
]

# Two sums of per-scenario differences closer than this (in percentage points) are a tie. The
# same sum added up in another order can differ in its last bits; without the tolerance an
# assignment that reproduces the observed sum exactly could be counted as less extreme.
_TIE_TOLERANCE = 1e-9

# The Monte Carlo test looks up the signed sum of this many differences at a time in a table of
# all 2^width sign assignments, so that one resample costs n / width additions.
_CHUNK_WIDTH = 8

_SIGN_FLIP_EXACT = "sign-flip exact"
_SIGN_FLIP_MONTE_CARLO = "sign-flip monte-carlo"

IMPROVES = "improves"
REGRESSES = "regresses"
NO_DIFFERENCE = "no-difference"
INCONCLUSIVE = "inconclusive"


def _plain_mean(values: Sequence[float]) -> float:
    """Mean with a plain left-to-right sum, as the rest of the project averages."""
    total = 0.0
    for value in values:
        total += value
    return total / len(values)


def _check_percentage(value: float, name: str) -> None:
    if not 0.0 <= value <= 100.0:  # also rejects NaN
        raise ValueError(f"{name} must be a percentage in [0, 100], got {value!r}")


def _check_differences(differences: Sequence[float], function: str) -> list[float]:
    values = list(differences)
    if not values:
        raise ValueError(f"{function} needs at least one difference")
    for value in values:
        if not math.isfinite(value):
            raise ValueError(f"{function}: a difference must be finite, got {value!r}")
    return values


def normalized_gain(p_with: float, p_without: float) -> float:
    """Share of the baseline's headroom that the skill wins: (w - b) / (1 - b) on fractions.

    ``p_with`` and ``p_without`` are percentages in [0, 100] (w = p_with / 100, and so on); the
    gain is computed as (p_with - p_without) / (100 - p_without), the same ratio without the two
    roundings of the conversion. 1.0 means the skill closes the whole gap to 100 %, 0.0 no
    change; a negative gain is a loss measured against the same headroom, so it is not bounded
    below (90 -> 50 gives -4.0).

    With no headroom the ratio is undefined; by convention both arms at 100 give exactly 0.0,
    and a baseline at 100 with ``p_with`` below it gives -1.0. Raises ValueError for NaN or a
    value outside [0, 100].
    """
    _check_percentage(p_with, "p_with")
    _check_percentage(p_without, "p_without")
    if p_without == 100.0:
        return 0.0 if p_with == 100.0 else -1.0
    return (p_with - p_without) / (100.0 - p_without)


def _percentile(ordered: Sequence[float], numerator: int, denominator: int) -> float:
    """The q = numerator/denominator quantile by linear interpolation between order statistics.

    The position is h = (m - 1)·q on 0-based indices of the m sorted values, and the result is
    x[floor(h)] + (h - floor(h))·(x[floor(h) + 1] - x[floor(h)]): numpy's default ("linear")
    and ``statistics.quantiles(method="inclusive")``. The position is split with integers so
    that it is exact.
    """
    index, remainder = divmod((len(ordered) - 1) * numerator, denominator)
    low = ordered[index]
    if remainder == 0:
        return low
    return low + (ordered[index + 1] - low) * (remainder / denominator)


def bootstrap_interval_95(
    differences: Sequence[float], *, seed: int = 0, resamples: int = 10_000
) -> tuple[float, float]:
    """Seeded percentile-bootstrap 95 % interval of the mean per-scenario difference.

    Each of ``resamples`` resamples draws len(differences) scenarios with replacement
    (``random.Random(seed).choices``), whole scenarios, and takes the mean of their differences
    (``math.fsum`` / n, so that it does not depend on the Python version's ``sum``). The
    interval is the 2.5th and 97.5th percentiles of those means, each by linear interpolation
    between order statistics (position (m - 1)·q over the m sorted means, as numpy's default
    and ``statistics.quantiles(method="inclusive")``), clamped to [min, max] of the
    differences, which every resample mean lies within but for rounding.

    The same inputs and seed always give the same two floats. With one scenario, or when every
    difference is equal, the interval is (d, d) without resampling. Raises ValueError for no
    differences, a non-finite difference or ``resamples`` < 1.
    """
    values = _check_differences(differences, "bootstrap_interval_95")
    if resamples < 1:
        raise ValueError(f"bootstrap_interval_95 needs resamples >= 1, got {resamples!r}")
    first = values[0]
    if all(value == first for value in values):
        return (first, first)
    n = len(values)
    rng = random.Random(seed)
    means = sorted(math.fsum(rng.choices(values, k=n)) / n for _ in range(resamples))
    smallest, largest = min(values), max(values)
    low = min(max(_percentile(means, 1, 40), smallest), largest)
    high = min(max(_percentile(means, 39, 40), smallest), largest)
    return (low, high)


def _signed_sums(values: Sequence[float]) -> list[float]:
    """The sum of ``values`` under every sign assignment; bit j of the index negates values[j]."""
    sums = [0.0]
    for value in values:
        sums = [total + value for total in sums] + [total - value for total in sums]
    return sums


def _exact_count(values: Sequence[float], threshold: float) -> int:
    """How many of the 2^n sign assignments have |signed sum| >= ``threshold`` (> 0).

    Meet in the middle: the signed sums of each half are listed (2^(n/2) each), one list is
    sorted, and for every sum s of the other half the partners r with s + r >= threshold or
    s + r <= -threshold are counted by bisection. The two sets are disjoint as threshold > 0.
    """
    half = len(values) // 2
    left = _signed_sums(values[:half])
    right = sorted(_signed_sums(values[half:]))
    size = len(right)
    count = 0
    for total in left:
        count += size - bisect.bisect_left(right, threshold - total)
        count += bisect.bisect_right(right, -threshold - total)
    return count


def _monte_carlo_count(
    values: Sequence[float], threshold: float, rng: random.Random, resamples: int
) -> int:
    """How many of ``resamples`` uniformly random sign assignments reach |sum| >= threshold.

    One assignment is one ``rng.getrandbits(n)`` (bit j negates values[j]); its sum is looked
    up chunk by chunk in tables of every signed sum of ``_CHUNK_WIDTH`` consecutive values.
    """
    chunks = [
        (start, _signed_sums(values[start : start + _CHUNK_WIDTH]))
        for start in range(0, len(values), _CHUNK_WIDTH)
    ]
    mask = (1 << _CHUNK_WIDTH) - 1
    n = len(values)
    count = 0
    for _ in range(resamples):
        bits = rng.getrandbits(n)
        total = 0.0
        for start, table in chunks:
            total += table[(bits >> start) & mask]
        if abs(total) >= threshold:
            count += 1
    return count


def sign_flip_p_value(
    differences: Sequence[float],
    *,
    seed: int = 0,
    resamples: int = 100_000,
    exact_up_to: int = 20,
) -> tuple[float, str]:
    """Paired two-sided permutation test of "mean difference = 0" by flipping signs.

    Under the null hypothesis each scenario's difference (with - without) is as likely to have
    either sign, so every assignment of signs to the observed differences is equally likely. The
    statistic is |sum of differences| (the same test as |mean|, n being fixed). An assignment
    counts as at least as extreme when its |sum| >= |observed sum| - 1e-9, the tolerance making
    float ties (the same sum added in another order) count as ties.

    With n = len(differences) <= ``exact_up_to`` (zero differences included: each one doubles
    both counts), all 2^n assignments are enumerated (meet in the middle) and p = count / 2^n,
    named ``"sign-flip exact"``. Above that, ``resamples`` assignments are drawn with
    ``random.Random(seed)`` and p = (count + 1) / (resamples + 1), which counts the observed
    assignment and never gives 0, named ``"sign-flip monte-carlo"``. All-zero differences
    give p = 1.0 either way.

    Returns (p, test name). Raises ValueError for no differences, a non-finite difference,
    ``resamples`` < 1 or ``exact_up_to`` < 0.
    """
    values = _check_differences(differences, "sign_flip_p_value")
    if resamples < 1:
        raise ValueError(f"sign_flip_p_value needs resamples >= 1, got {resamples!r}")
    if exact_up_to < 0:
        raise ValueError(f"sign_flip_p_value needs exact_up_to >= 0, got {exact_up_to!r}")
    n = len(values)
    threshold = abs(math.fsum(values)) - _TIE_TOLERANCE
    if n <= exact_up_to:
        if threshold <= 0.0:  # every assignment is at least as extreme as a zero sum
            return (1.0, _SIGN_FLIP_EXACT)
        return (_exact_count(values, threshold) / (1 << n), _SIGN_FLIP_EXACT)
    if threshold <= 0.0:
        return (1.0, _SIGN_FLIP_MONTE_CARLO)
    count = _monte_carlo_count(values, threshold, random.Random(seed), resamples)
    return ((count + 1) / (resamples + 1), _SIGN_FLIP_MONTE_CARLO)


def mcnemar_exact_p_value(b: int, c: int) -> float:
    """Exact two-sided McNemar test on the discordant pairs b (first only) and c (second only).

    Conditional on b + c, b is Binomial(b + c, 1/2) under the null hypothesis; the p-value is
    min(1, 2·Σ_{i=0}^{min(b, c)} C(b + c, i) / 2^(b + c)), computed with exact integers and one
    final division. 1.0 when b + c == 0. Raises ValueError for a negative count.
    """
    if b < 0 or c < 0:
        raise ValueError(f"McNemar counts must be >= 0, got b={b!r}, c={c!r}")
    n = b + c
    if n == 0:
        return 1.0
    doubled_tail = 2 * sum(math.comb(n, i) for i in range(min(b, c) + 1))
    total = 1 << n
    if doubled_tail >= total:
        return 1.0
    return doubled_tail / total


def verdict(
    ci95: tuple[float, float], p_value: float, *, margin: float = 5.0, alpha: float = 0.05
) -> str:
    """One word for a difference (with - without, in points): which side of 0, or neither.

    Taken in this order, on the 95 % interval (low, high) and the paired test's p-value:

    - ``"improves"``: low > 0 and p < alpha (the whole interval above 0, and significant);
    - ``"regresses"``: high < 0 and p < alpha;
    - ``"no-difference"``: -margin <= low and high <= margin (whatever the difference is, it is
      within ``margin`` points of 0, so the arms are practically equivalent);
    - ``"inconclusive"``: otherwise (the data cannot tell a real difference from none).

    An interval touching 0 (low == 0 or high == 0) does not lie above or below it, and
    p == alpha is not significant. Raises ValueError for an interval with low > high or NaN,
    a p-value outside [0, 1], a negative margin or alpha outside (0, 1).
    """
    low, high = ci95
    if not low <= high:
        raise ValueError(f"verdict needs an interval with low <= high, got {ci95!r}")
    if not 0.0 <= p_value <= 1.0:
        raise ValueError(f"verdict needs a p-value in [0, 1], got {p_value!r}")
    if not margin >= 0.0:
        raise ValueError(f"verdict needs margin >= 0, got {margin!r}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"verdict needs alpha in (0, 1), got {alpha!r}")
    significant = p_value < alpha
    if significant and low > 0.0:
        return IMPROVES
    if significant and high < 0.0:
        return REGRESSES
    if -margin <= low and high <= margin:
        return NO_DIFFERENCE
    return INCONCLUSIVE


@dataclass(frozen=True)
class McNemar:
    """Exact McNemar test over criteria: b passed with the skill only, c without it only."""

    b: int
    c: int
    p_value: float


@dataclass(frozen=True)
class Uplift:
    """The comparison of the "with" arm against one baseline arm (see :func:`compare_arms`).

    Means, difference and interval are in percentage points; ``normalized_gain`` is a ratio.
    """

    arm: str
    with_mean: float
    without_mean: float
    difference: float
    ci95: tuple[float, float]
    normalized_gain: float
    p_value: float
    test: str
    verdict: str
    scenarios: int
    mcnemar: McNemar | None = None


def compare_arms(
    pairs: Sequence[tuple[float, float]],
    *,
    arm: str,
    criterion_pairs: Sequence[tuple[bool, bool]] | None = None,
    seed: int = 0,
) -> Uplift:
    """Compare the "with" arm against the baseline arm ``arm`` over paired scenarios.

    ``pairs`` holds one (with, without) pair of percentages per scenario. The means are plain
    means of each arm, ``difference`` = with_mean - without_mean, ``ci95`` the bootstrap
    interval of the per-scenario differences (:func:`bootstrap_interval_95`), the gain
    :func:`normalized_gain` of the two means, the p-value and test name from
    :func:`sign_flip_p_value`, and the verdict from :func:`verdict` with its defaults; ``seed``
    drives both random steps.

    ``criterion_pairs`` (per criterion: passed with, passed without; meaningful when each arm
    ran a single trial) adds the exact McNemar test on its discordant criteria: b passed with
    the skill only, c without it only. Raises ValueError for no pairs or a percentage outside
    [0, 100].
    """
    if not pairs:
        raise ValueError("compare_arms needs at least one scenario pair")
    with_values: list[float] = []
    without_values: list[float] = []
    for with_percentage, without_percentage in pairs:
        _check_percentage(with_percentage, "a with-arm percentage")
        _check_percentage(without_percentage, "a without-arm percentage")
        with_values.append(with_percentage)
        without_values.append(without_percentage)
    differences = [w - wo for w, wo in zip(with_values, without_values, strict=True)]
    with_mean = _plain_mean(with_values)
    without_mean = _plain_mean(without_values)
    ci95 = bootstrap_interval_95(differences, seed=seed)
    p_value, test = sign_flip_p_value(differences, seed=seed)
    mcnemar: McNemar | None = None
    if criterion_pairs is not None:
        b = sum(
            1
            for passed_with, passed_without in criterion_pairs
            if passed_with and not passed_without
        )
        c = sum(
            1
            for passed_with, passed_without in criterion_pairs
            if passed_without and not passed_with
        )
        mcnemar = McNemar(b=b, c=c, p_value=mcnemar_exact_p_value(b, c))
    return Uplift(
        arm=arm,
        with_mean=with_mean,
        without_mean=without_mean,
        difference=with_mean - without_mean,
        ci95=ci95,
        normalized_gain=normalized_gain(with_mean, without_mean),
        p_value=p_value,
        test=test,
        verdict=verdict(ci95, p_value),
        scenarios=len(pairs),
        mcnemar=mcnemar,
    )
