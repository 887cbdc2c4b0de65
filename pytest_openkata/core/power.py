"""How much an uplift run could see: the power of its paired comparison.

A skill's uplift pairs each scenario's percentage with the skill and in the baseline arm
(:mod:`pytest_openkata.core.compare`). From the spread of those per-scenario differences, the
paired t-test's power analysis (statsmodels' ``TTestPower``, two-sided, alpha 0.05, power 0.8)
gives the smallest difference the run could have detected with its number of scenarios, and
the number of scenarios a run needs to detect a given difference (``uplift_target``). Both
assume the next run's differences spread as this run's did: they are a plan, not a verdict.
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ALPHA",
    "DEFAULT_TARGET",
    "POWER",
    "PairedPower",
    "paired_power",
    "power_text",
    "uplift_target",
]

ALPHA = 0.05
POWER = 0.8
DEFAULT_TARGET = 10.0


@dataclass(frozen=True)
class PairedPower:
    """The power analysis of ``scenarios`` paired differences whose sample standard
    deviation is ``stdev`` points: ``detectable`` is the smallest difference (in points) the
    run could have detected, ``needed`` the scenarios needed to detect ``target`` points;
    None where the spread is zero (any difference shows, the figures say nothing)."""

    scenarios: int
    stdev: float
    target: float
    detectable: float | None
    needed: int | None
    alpha: float = ALPHA
    power: float = POWER


def paired_power(
    differences: Sequence[float],
    target: float = DEFAULT_TARGET,
    *,
    alpha: float = ALPHA,
    power: float = POWER,
) -> PairedPower | None:
    """The power analysis of paired ``differences`` (with - without, one per scenario) for a
    difference of ``target`` points; None with fewer than two differences (no spread to
    plan from). Raises ValueError for a target that is not a positive number."""
    if not (target > 0 and math.isfinite(target)):
        raise ValueError(f"the uplift target must be a positive number of points, got {target!r}")
    n = len(differences)
    if n < 2:
        return None
    stdev = statistics.stdev(differences)
    if stdev == 0:
        return PairedPower(n, 0.0, target, None, None, alpha, power)
    from statsmodels.stats.power import TTestPower  # type: ignore[import-untyped]

    analysis = TTestPower()
    with warnings.catch_warnings():
        # A root finder that does not converge returns NaN, taken as "no figure" below.
        warnings.simplefilter("ignore")
        effect = float(
            analysis.solve_power(
                effect_size=None, nobs=n, alpha=alpha, power=power, alternative="two-sided"
            )
        )
    detectable = effect * stdev if math.isfinite(effect) else None
    needed = _scenarios_needed(analysis, target / stdev, alpha, power)
    return PairedPower(n, stdev, target, detectable, needed, alpha, power)


_MOST_SCENARIOS = 1 << 24


def _scenarios_needed(analysis: Any, effect: float, alpha: float, power: float) -> int | None:
    """The fewest scenarios (at least 2) whose paired t-test reaches ``power`` for a
    standardised ``effect``: doubled until reached, then bisected (the power rises with the
    number); None beyond :data:`_MOST_SCENARIOS`."""

    def enough(nobs: int) -> bool:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reached = float(
                analysis.power(effect_size=effect, nobs=nobs, alpha=alpha, alternative="two-sided")
            )
            if not math.isfinite(reached):
                # For a large effect the far tail's probability (below 1e-15) comes out NaN;
                # the near tail alone is then the power, to every digit shown.
                reached = float(
                    analysis.power(
                        effect_size=effect, nobs=nobs, alpha=alpha / 2, alternative="larger"
                    )
                )
        return reached >= power

    low, high = 1, 2
    while not enough(high):
        if high >= _MOST_SCENARIOS:
            return None
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        if enough(middle):
            high = middle
        else:
            low = middle
    return high


def power_text(analysis: PairedPower | None) -> str | None:
    """The power analysis as every report states it: ``smallest detectable difference
    12.3 points at 8 scenarios (paired t-test, alpha 0.05, power 0.8, sd 9.1); 10 points
    need 12 scenarios``; None without one."""
    if analysis is None:
        return None
    how = f"paired t-test, alpha {analysis.alpha:g}, power {analysis.power:g}"
    if analysis.detectable is None or analysis.needed is None:
        return (
            f"the {analysis.scenarios} scenarios' differences do not vary, so no "
            f"detectable difference or needed number of scenarios can be given ({how})"
        )
    return (
        f"smallest detectable difference {analysis.detectable:.1f} points at "
        f"{analysis.scenarios} scenarios ({how}, sd of the differences "
        f"{analysis.stdev:.1f}); {analysis.target:g} points need {analysis.needed} scenarios"
    )


def uplift_target(settings: Mapping[str, Any]) -> float:
    """The ``uplift_target`` a run log's settings record; the default for a log that records
    none (a run without a baseline arm, an older log) or a value that is no positive number."""
    value = settings.get("uplift_target")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return DEFAULT_TARGET
    return float(value) if value > 0 and math.isfinite(value) else DEFAULT_TARGET
