"""``trials = auto``: run a scenario's trials until the gate's side of it is known.

The gate compares a mean percentage with the threshold (``mean >= threshold`` passes). After
each trial an interval of the scenario's true mean is compared with the threshold: when it lies
wholly at or above it the scenario is settled above, when wholly below it settled below, and
further trials could not plausibly move it across. Otherwise another trial runs, up to
``trials_max``.

The interval is Wilson's score interval of the mean as a share of 100: among scores in
[0, 100] with a given mean, pass/fail trials (0 or 100) spread the most, so the interval of n
pass/fail trials with that mean holds for any scores. It never collapses: two trials that both
score 100 % do not prove a 95 % threshold is met (a Student-t interval of equal scores would
have zero width and stop at once). The rule looks after every trial, up to
``trials_max - 1`` times, so each look is made at a confidence of ``1 - (1 - c) / looks``
(Bonferroni) for the whole sequence to hold at the run's ``trials_confidence`` c.

:data:`MINIMUM_TRIALS` run before any stop. A trial that errors stops the scenario too: an
errored scenario errors the run whatever else its trials score, so more trials cannot settle
anything.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_openkata.contracts.results import (
    SETTLED_ABOVE,
    SETTLED_BELOW,
    UNSETTLED,
    AutoTrials,
    ScenarioResult,
    TrialResult,
)

__all__ = [
    "DEFAULT_CONFIDENCE",
    "DEFAULT_MAXIMUM",
    "MINIMUM_TRIALS",
    "AutoTrialRule",
    "mean_interval",
    "savings_text",
    "settled_side",
]

MINIMUM_TRIALS = 2
DEFAULT_MAXIMUM = 10
DEFAULT_CONFIDENCE = 0.95


def mean_interval(percentages: Sequence[float], confidence: float) -> tuple[float, float]:
    """Wilson's two-sided ``confidence`` score interval of the mean of ``percentages`` (at
    least one), in percent: that of as many pass/fail trials with the same mean, the widest
    spread scores in [0, 100] can have (see the module docstring)."""
    if not percentages:
        raise ValueError("an interval of a mean needs at least one value")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    from statsmodels.stats.proportion import (  # type: ignore[import-untyped]
        proportion_confint,
    )

    n = len(percentages)
    share = min(max(sum(float(value) for value in percentages) / n / 100.0, 0.0), 1.0)
    low, high = proportion_confint(share * n, n, alpha=1.0 - confidence, method="wilson")
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ArithmeticError(f"no interval for the mean of {list(percentages)!r}")
    return (min(max(float(low) * 100.0, 0.0), 100.0), min(max(float(high) * 100.0, 0.0), 100.0))


def settled_side(percentages: Sequence[float], threshold: float, confidence: float) -> str:
    """Which side of ``threshold`` the mean of ``percentages`` lies on at ``confidence``:
    :data:`SETTLED_ABOVE` (the interval's low end is at or above it: the gate passes),
    :data:`SETTLED_BELOW` (its high end is below it) or :data:`UNSETTLED` (it straddles the
    threshold, or fewer than :data:`MINIMUM_TRIALS` trials ran)."""
    if len(percentages) < MINIMUM_TRIALS:
        return UNSETTLED
    low, high = mean_interval(percentages, confidence)
    if low >= threshold:
        return SETTLED_ABOVE
    if high < threshold:
        return SETTLED_BELOW
    return UNSETTLED


@dataclass(frozen=True)
class AutoTrialRule:
    """When ``trials = auto`` stops a scenario: at most ``maximum`` trials, settled at
    ``confidence`` against ``threshold`` (the run's gate)."""

    maximum: int = DEFAULT_MAXIMUM
    confidence: float = DEFAULT_CONFIDENCE
    threshold: float = 0.0

    def __post_init__(self) -> None:
        if self.maximum < MINIMUM_TRIALS:
            raise ValueError(f"trials_max must be at least {MINIMUM_TRIALS}, got {self.maximum}")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"trials_confidence must lie between 0 and 1, got {self.confidence}")

    @property
    def look_confidence(self) -> float:
        """The confidence of each look, so that all of a scenario's looks (one after each
        trial from :data:`MINIMUM_TRIALS` on) hold together at :attr:`confidence`."""
        looks = self.maximum - MINIMUM_TRIALS + 1
        return 1.0 - (1.0 - self.confidence) / looks

    def verdict(self, trials: Sequence[TrialResult]) -> tuple[bool, AutoTrials]:
        """Whether to stop after ``trials`` (the scenario's own arm so far), and how it stands."""
        errored = any(trial.error is not None for trial in trials)
        side = (
            UNSETTLED
            if errored
            else settled_side([t.percentage for t in trials], self.threshold, self.look_confidence)
        )
        stands = AutoTrials(self.maximum, self.confidence, self.threshold, side)
        return (side != UNSETTLED or errored or len(trials) >= self.maximum), stands


_SIDES = {SETTLED_ABOVE: "above the threshold", SETTLED_BELOW: "below the threshold"}


def savings_text(results: Sequence[ScenarioResult]) -> str | None:
    """What ``trials = auto`` saved over ``results`` (one skill's), as every report states
    it: ``4 of at most 20 run (95% confidence), 16 saved; scenario-0: 2, above the threshold;
    ...``; None when no result ran with it. Names are the caller's to make safe."""
    auto = [result for result in results if result.auto_trials is not None]
    if not auto:
        return None
    confidences = sorted({r.auto_trials.confidence for r in auto if r.auto_trials is not None})
    level = "/".join(f"{confidence * 100:g}%" for confidence in confidences)
    ran = sum(len(result.trials) for result in auto)
    saved = sum(result.trials_saved for result in auto)
    each = "; ".join(f"{result.name}: {len(result.trials)}, {_how(result)}" for result in auto)
    return f"{ran} of at most {ran + saved} run ({level} confidence), {saved} saved; {each}"


def _how(result: ScenarioResult) -> str:
    auto = result.auto_trials
    assert auto is not None
    if auto.settled in _SIDES:
        return _SIDES[auto.settled]
    if result.error is not None:
        return "stopped by an error"
    if result.budget_cut:
        return "stopped by the budget before it settled"
    return "not settled at the maximum"
