"""Pure scoring rules of openkata-eval (spec section 8)."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_openkata.contracts.results import CriterionResult, Verdict
from pytest_openkata.core.scenario import Criterion

NO_VERDICT_REASON = "no verdict returned"


def match_verdicts(
    criteria: Sequence[Criterion], verdicts: Sequence[Verdict]
) -> list[CriterionResult]:
    """Each criterion takes the first verdict with exactly its name; unknown names are ignored.

    A criterion without a verdict fails. Unlike the reference (which leaves the reason empty),
    its reason says that no verdict came back.
    """
    first: dict[str, Verdict] = {}
    for verdict in verdicts:
        first.setdefault(verdict.name, verdict)
    results = []
    for criterion in criteria:
        found = first.get(criterion.name)
        results.append(
            CriterionResult.judged(
                criterion.name,
                criterion.max_score,
                passed=found is not None and found.passed,
                reason=found.reason if found is not None else NO_VERDICT_REASON,
                category=criterion.category,
            )
        )
    return results


def percentage(score: int, max_score: int) -> float:
    # Divide, then multiply, as the reference does: 10/15*100 == 66.66666666666666.
    return score / max_score * 100 if max_score > 0 else 0.0


def scenario_totals(criteria: Sequence[CriterionResult]) -> tuple[int, int, float, bool]:
    """Score, maximum, percentage and pass (a scenario passes only at 100 %)."""
    score = sum(c.score for c in criteria)
    max_score = sum(c.max_score for c in criteria)
    pct = percentage(score, max_score)
    return score, max_score, pct, pct >= 100


def overall_percentage(percentages: Sequence[float]) -> float:
    """Mean of scenario percentages with a plain left-to-right sum; 0 with no scenarios."""
    if not percentages:
        return 0.0
    total = 0.0
    for value in percentages:
        total += value
    return total / len(percentages)


def meets_threshold(overall: float, threshold: int, scenario_count: int) -> bool:
    """Inclusive and unrounded: 95.0 passes at 95; an empty run never passes."""
    return scenario_count > 0 and overall >= float(threshold)


def percent_against(
    value: float,
    threshold: float,
    *,
    passed: bool | None = None,
    min_digits: int = 0,
    max_digits: int = 4,
) -> str:
    """``value`` as a percentage with ``min_digits`` decimals, or more where that many would
    put it on the wrong side of ``threshold``: 94.96 against 95 reads ``94.96%``, never
    ``95.0%`` or ``95%``. ``passed`` is the side it is on (by default ``value >= threshold``;
    a gate passes it, since an empty run fails whatever its figure). Past ``max_digits``
    decimals the figure is shown in full. Every report that shows a figure beside the
    threshold writes it with this."""
    on_the_passing_side = value >= threshold if passed is None else passed
    for digits in range(min_digits, max_digits + 1):
        text = f"{value:.{digits}f}"
        if (float(text) >= threshold) == on_the_passing_side:
            return f"{text}%"
    return f"{value!r}%"


# The catalogue's colours of a scenario's bar: green from 95 %, yellow from 70 %, red below.
GREEN_FROM = 95.0
YELLOW_FROM = 70.0


def catalogue_colour(value: float) -> str:
    """``green``, ``yellow`` or ``red``, as the skill catalogue colours a percentage."""
    if value >= GREEN_FROM:
        return "green"
    if value >= YELLOW_FROM:
        return "yellow"
    return "red"
