"""Statistics for repeated trials of an eval scenario (stdlib only).

Each trial yields a percentage in [0, 100]; a trial passes when its percentage is >= 100.
Everything here is a pure function: confidence intervals of means (Student t, Welch for a
mean of scenario means), the unbiased pass@k estimator and pass^k, and Wilson's score
interval of a proportion (trigger evals' precision and recall).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from pytest_openkata.contracts.results import TrialStats

__all__ = [
    "TrialStats",
    "mean_interval_95",
    "overall_interval_95",
    "pass_at_k",
    "pass_hat_k",
    "sample_stdev",
    "straddles",
    "t_critical_95",
    "trial_stats",
    "wilson_interval_95",
]

# Two-sided 95 % Student-t critical values (the 0.975 quantile) for df = 1..30, as printed in
# the usual three-decimal tables.
_T_TABLE_95: tuple[float, ...] = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip

# The 0.975 quantile of the standard normal distribution (the limit as df -> infinity).
_Z_975 = 1.959963984540054

# Above this df the Cornish-Fisher expansion is used instead of inverting the t CDF; its error
# there is far below 1e-12 and the continued fraction would need many terms.
_LARGE_DF = 1000.0

_CF_MAX_TERMS = 10_000
_CF_EPS = 1e-15
_CF_TINY = 1e-300


def _plain_mean(values: Sequence[float]) -> float:
    """Mean with a plain left-to-right sum, as the rest of the project averages."""
    total = 0.0
    for value in values:
        total += value
    return total / len(values)


def sample_stdev(values: Sequence[float]) -> float:
    """Sample standard deviation (n - 1 denominator); 0.0 with fewer than two values."""
    if len(values) < 2:
        return 0.0
    return statistics.stdev(values)


def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function, evaluated by modified Lentz."""
    c = 1.0
    d = 1.0 - (a + b) * x / (a + 1.0)
    if abs(d) < _CF_TINY:
        d = _CF_TINY
    d = 1.0 / d
    result = d
    for m in range(1, _CF_MAX_TERMS + 1):
        two_m = 2.0 * m
        # Even step: coefficient m (b - m) x / ((a + 2m - 1)(a + 2m)).
        coeff = m * (b - m) * x / ((a + two_m - 1.0) * (a + two_m))
        d = 1.0 + coeff * d
        d = _CF_TINY if abs(d) < _CF_TINY else d
        c = 1.0 + coeff / c
        c = _CF_TINY if abs(c) < _CF_TINY else c
        d = 1.0 / d
        result *= d * c
        # Odd step: coefficient -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1)).
        coeff = -(a + m) * (a + b + m) * x / ((a + two_m) * (a + two_m + 1.0))
        d = 1.0 + coeff * d
        d = _CF_TINY if abs(d) < _CF_TINY else d
        c = 1.0 + coeff / c
        c = _CF_TINY if abs(c) < _CF_TINY else c
        d = 1.0 / d
        delta = d * c
        result *= delta
        if abs(delta - 1.0) < _CF_EPS:
            return result
    raise ArithmeticError("incomplete beta continued fraction did not converge")  # pragma: no cover


def _regularized_beta(a: float, b: float, x: float, one_minus_x: float) -> float:
    """I_x(a, b); ``one_minus_x`` is passed separately so that 1 - x keeps its precision."""
    if x <= 0.0:
        return 0.0
    if one_minus_x <= 0.0:
        return 1.0
    log_front = (
        math.lgamma(a + b)
        - math.lgamma(a)
        - math.lgamma(b)
        + a * math.log(x)
        + b * math.log(one_minus_x)
    )
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_continued_fraction(a, b, x) / a
    return 1.0 - front * _beta_continued_fraction(b, a, one_minus_x) / b


def _t_two_sided_tail(t: float, df: float) -> float:
    """P(|T| > t) for Student's t with ``df`` degrees of freedom, t >= 0."""
    denominator = df + t * t
    return _regularized_beta(df / 2.0, 0.5, df / denominator, t * t / denominator)


def _t_critical_cornish_fisher(df: float) -> float:
    """The 0.975 t quantile from the Cornish-Fisher expansion in 1/df (large df only)."""
    z = _Z_975
    z2 = z * z
    g1 = z * (z2 + 1.0) / 4.0
    g2 = z * ((5.0 * z2 + 16.0) * z2 + 3.0) / 96.0
    g3 = z * (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) / 384.0
    g4 = z * ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) / 92160.0
    inv = 1.0 / df
    return z + inv * (g1 + inv * (g2 + inv * (g3 + inv * g4)))


def _t_critical_numeric(df: float) -> float:
    """The 0.975 t quantile by bisection on the two-sided tail probability (= 0.05)."""
    low, high = _Z_975, 16.0  # t(0.975, df) lies in (z, t(0.975, 1) = 12.706...) for df >= 1
    for _ in range(200):
        mid = (low + high) / 2.0
        if mid in (low, high):
            break
        if _t_two_sided_tail(mid, df) > 0.05:
            low = mid
        else:
            high = mid
    return (low + high) / 2.0


def t_critical_95(df: float) -> float:
    """Two-sided 95 % Student-t critical value (the 0.975 quantile) for ``df`` >= 1.

    Integer df 1..30 (within 1e-9 relative) return the three-decimal table values (12.706,
    4.303, ..., 2.042).
    Fractional or larger df (e.g. from Welch-Satterthwaite) are computed by inverting the t
    CDF (regularized incomplete beta), or by the Cornish-Fisher expansion for df > 1000;
    both are accurate to well under 1e-6. Infinite df gives the normal value 1.959964.
    Raises ValueError for df < 1 or NaN.
    """
    if math.isnan(df) or df < 1:
        raise ValueError(f"t_critical_95 needs df >= 1, got {df!r}")
    if math.isinf(df):
        return _Z_975
    nearest = round(df)
    # A df within rounding noise of a table row (e.g. 3.0000000000000004 from a Welch
    # computation over one scenario) uses that row.
    if nearest <= len(_T_TABLE_95) and abs(df - nearest) <= 1e-9 * nearest:
        return _T_TABLE_95[nearest - 1]
    if df > _LARGE_DF:
        return _t_critical_cornish_fisher(df)
    return _t_critical_numeric(df)


def mean_interval_95(values: Sequence[float]) -> tuple[float, float] | None:
    """t-based 95 % confidence interval of the mean: mean ± t(n-1)·s/√n (not clamped).

    None with fewer than two values; (mean, mean) when the sample standard deviation is 0.
    """
    n = len(values)
    if n < 2:
        return None
    mean = _plain_mean(values)
    stdev = sample_stdev(values)
    if stdev == 0:
        return (mean, mean)
    half_width = t_critical_95(n - 1) * stdev / math.sqrt(n)
    return (mean - half_width, mean + half_width)


def _check_counts(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got n={n}, k={k}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): 1 - C(n-c, k)/C(n, k), from n trials with c passes.

    The chance that at least one of k trials drawn without replacement passes; 1.0 when
    n - c < k. Computed with exact integers and one final division.
    """
    _check_counts(n, c, k)
    if n - c < k:
        return 1.0
    total = math.comb(n, k)
    return (total - math.comb(n - c, k)) / total


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k (tau-bench): C(c, k)/C(n, k), the chance that all of k drawn trials pass."""
    _check_counts(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def _clamp_interval(interval: tuple[float, float] | None) -> tuple[float, float] | None:
    if interval is None:
        return None
    low, high = interval
    return (min(max(low, 0.0), 100.0), min(max(high, 0.0), 100.0))


def trial_stats(percentages: Sequence[float]) -> TrialStats:
    """Summarise trial percentages: mean, sample stdev, 95 % CI clamped to [0, 100], passes.

    A trial passes when its percentage is >= 100; pass@k and pass^k are given for every k in
    1..n. Raises ValueError for empty input or a percentage outside [0, 100] (or NaN).
    """
    n = len(percentages)
    if n == 0:
        raise ValueError("trial_stats needs at least one percentage")
    for value in percentages:
        if not 0.0 <= value <= 100.0:
            raise ValueError(f"percentage out of [0, 100]: {value!r}")
    passes = sum(1 for value in percentages if value >= 100)
    return TrialStats(
        trials=n,
        mean=_plain_mean(percentages),
        stdev=sample_stdev(percentages),
        ci95=_clamp_interval(mean_interval_95(percentages)),
        passes=passes,
        pass_at_k={k: pass_at_k(n, passes, k) for k in range(1, n + 1)},
        pass_hat_k={k: pass_hat_k(n, passes, k) for k in range(1, n + 1)},
    )


def overall_interval_95(
    scenarios: Sequence[tuple[float, float, int]],
) -> tuple[float, float] | None:
    """95 % interval of the mean of S independent scenario means, clamped to [0, 100].

    Each scenario is ``(mean, stdev, n_trials)``. The centre is (1/S)·Σ mean_s, the standard
    error sqrt(Σ v_s)/S with v_s = stdev_s²/n_s, and the degrees of freedom come from
    Welch-Satterthwaite, (Σ v_s)² / Σ(v_s²/(n_s - 1)), over scenarios with n_s >= 2 and
    v_s > 0. A scenario with a single trial contributes its mean but no variance (its spread
    is unknown), so the interval understates the uncertainty when such scenarios are present.

    Returns None when no scenario has n_s >= 2 (including no scenarios at all), and
    (overall, overall) when every such v_s is 0. Raises ValueError for n_s < 1 or a negative
    or NaN stdev.
    """
    means: list[float] = []
    variances: list[tuple[float, int]] = []
    any_repeated = False
    for mean, stdev, n_trials in scenarios:
        if n_trials < 1:
            raise ValueError(f"a scenario needs n_trials >= 1, got {n_trials!r}")
        if not stdev >= 0:
            raise ValueError(f"a scenario stdev must be >= 0, got {stdev!r}")
        means.append(mean)
        if n_trials >= 2:
            any_repeated = True
            variance = stdev * stdev / n_trials
            if variance > 0:
                variances.append((variance, n_trials))
    if not any_repeated:
        return None
    overall = _plain_mean(means)
    if not variances:
        return _clamp_interval((overall, overall))
    total_variance = math.fsum(v for v, _ in variances)
    # Welch-Satterthwaite on variances scaled by their maximum, so that squaring tiny
    # variances cannot underflow. The df is at least min(n_s - 1) >= 1; guard rounding below.
    largest = max(v for v, _ in variances)
    scaled_total = math.fsum(v / largest for v, _ in variances)
    scaled_denominator = math.fsum((v / largest) ** 2 / (n - 1) for v, n in variances)
    df = max(scaled_total * scaled_total / scaled_denominator, 1.0)
    half_width = t_critical_95(df) * math.sqrt(total_variance) / len(means)
    return _clamp_interval((overall - half_width, overall + half_width))


def straddles(interval: tuple[float, float] | None, threshold: float) -> bool:
    """Whether a ``mean >= threshold`` gate could flip within the interval.

    True when low < threshold <= high: the interval holds values on both sides of the gate.
    None (no interval) gives False.
    """
    if interval is None:
        return False
    low, high = interval
    return low < threshold <= high


def wilson_interval_95(successes: int, n: int) -> tuple[float, float] | None:
    """Wilson's 95 % score interval of a proportion of ``successes`` in ``n`` trials, within
    [0, 1]; None when ``n`` is 0. Unlike the normal approximation it stays inside [0, 1] and
    is not empty at 0 or ``n`` successes, which small trigger query sets often give."""
    if not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return None
    z2 = _Z_975 * _Z_975
    p = successes / n
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = _Z_975 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return (low, high)
