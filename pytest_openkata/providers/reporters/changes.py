"""The terminal's block for a skill compared with an earlier run (``--eval-compare``).

A count of the scenarios per tier, then one line for each scenario that regressed, improved,
went missing or cannot be compared: its percentages before and after, the change with its
95 % interval and p-value when there are trials enough, and the criteria whose verdict
flipped. Regressions and missing scenarios (what ``--eval-fail-on-regression`` fails on) are
red, improvements green.
"""

from __future__ import annotations

from collections.abc import Iterator

from pytest_openkata.core.regression import (
    IMPROVEMENT,
    MISSING,
    NEW,
    NOT_COMPARABLE,
    REGRESSION,
    UNCHANGED,
    CriterionFlip,
    ScenarioChange,
    SkillChanges,
)
from pytest_openkata.providers.reporters import Segment

__all__ = ["changes_lines"]

_COLOURS = {REGRESSION: "red", MISSING: "red", IMPROVEMENT: "green", NOT_COMPARABLE: "yellow"}
_NOUNS = {
    REGRESSION: ("regression", "regressions"),
    IMPROVEMENT: ("improvement", "improvements"),
    UNCHANGED: ("unchanged", "unchanged"),
    NEW: ("new", "new"),
    MISSING: ("missing", "missing"),
    NOT_COMPARABLE: ("not comparable", "not comparable"),
}
_SHOWN = (REGRESSION, MISSING, NOT_COMPARABLE, IMPROVEMENT)


def _percent(value: float, digits: int = 1) -> str:
    """A percentage with ``digits`` decimals where it has them: ``100%``, ``66.7%``."""
    text = f"{value:.{digits}f}"
    return f"{text.rstrip('0').removesuffix('.') if '.' in text else text}%"


def _both(before: float, after: float) -> tuple[str, str]:
    """Two percentages with as many decimals as it takes for them to read apart when they are
    apart (a fall from 100 to 99.96 is not ``100% -> 100%``)."""
    for digits in range(1, 5):
        shown = _percent(before, digits), _percent(after, digits)
        if before == after or shown[0] != shown[1]:
            return shown
    return _percent(before, 6), _percent(after, 6)


def _points(value: float) -> str:
    """A change in points, never ``-0.0`` for a change that is not zero."""
    for digits in range(1, 5):
        text = f"{value:+.{digits}f}"
        if value == 0 or float(text) != 0:
            return text
    return f"{value:+.6f}"


def _count(changes: SkillChanges, tier: str) -> Segment:
    count = changes.count(tier)
    one, many = _NOUNS[tier]
    return (f"{count} {one if count == 1 else many}", _COLOURS.get(tier) if count else None)


def _header(changes: SkillChanges) -> list[Segment]:
    tiers = [REGRESSION, IMPROVEMENT, UNCHANGED, NEW, MISSING]
    if changes.count(NOT_COMPARABLE):
        tiers.append(NOT_COMPARABLE)
    line: list[Segment] = [(f"  Compared with {changes.baseline}: ", None)]
    for position, tier in enumerate(tiers):
        if position:
            line.append((", ", None))
        line.append(_count(changes, tier))
    return line


def _passes(passes: tuple[int, int] | None) -> str:
    return "-" if passes is None else f"{passes[0]}/{passes[1]}"


def _flip(criterion: CriterionFlip) -> str:
    """A flipped criterion, with its pass counts over trials when either side ran several."""
    before, after = criterion.before_passes, criterion.after_passes
    if (before is None or before[1] <= 1) and (after is None or after[1] <= 1):
        return criterion.name
    detail = f"{_passes(before)} -> {_passes(after)}"
    if criterion.p_value is not None:
        detail += f", p = {criterion.p_value:.3g}"
    return f"{criterion.name} ({detail})"


def _flips(change: ScenarioChange) -> str:
    parts = []
    for direction in ("pass→fail", "fail→pass"):
        names = [_flip(c) for c in change.flipped if c.flip == direction]
        if names:
            parts.append(f"{direction}: {', '.join(names)}")
    return "".join(f"; {part}" for part in parts)


def _figures(change: ScenarioChange) -> str:
    """``100% -> 66.7% (-33.3 points, 95% CI -80.2 to +13.5; p = 0.0286)``."""
    if change.before is not None and change.after is not None:
        before, after = _both(change.before, change.after)
    else:
        before = "-" if change.before is None else _percent(change.before)
        after = "-" if change.after is None else _percent(change.after)
    text = f"{before} -> {after}"
    if change.change is None:
        return text
    details = [f"{_points(change.change)} points"]
    if change.interval is not None:
        low, high = change.interval
        details[0] += f", 95% CI {low:+.1f} to {high:+.1f}"
    if change.p_value is not None:
        details.append(f"p = {change.p_value:.3g}")
    return f"{text} ({'; '.join(details)})"


def _scenario_line(change: ScenarioChange) -> list[Segment]:
    tier = _NOUNS[change.tier][0]
    if change.tier == MISSING:
        was = "" if change.before is None else f"was {_percent(change.before)}; "
        rest = f" {change.name} ({was}{change.reason})"
    elif change.tier == NOT_COMPARABLE:
        rest = f" {change.name} {_figures(change)}: {change.reason}"
    else:
        rest = f" {change.name} {_figures(change)}{_flips(change)}"
    return [("    ", None), (tier, _COLOURS.get(change.tier)), (f":{rest}", None)]


def changes_lines(changes: SkillChanges) -> Iterator[list[Segment]]:
    """A skill's comparison with an earlier run, for the terminal, after its overall line:
    the counts per tier, then regressions, missing, not comparable and improved scenarios (in
    that order, each by name). A skill with nothing to compare with gets one line saying why.
    Each run log passed over on the way because it cannot be read gets a line naming it.
    """
    if changes.note:
        yield [(f"  Compared with an earlier run: {changes.note}", "yellow")]
    else:
        yield _header(changes)
        for tier in _SHOWN:
            for change in changes.scenarios:
                if change.tier == tier:
                    yield _scenario_line(change)
    for problem in changes.skipped:
        yield [(f"  Skipped a run log that cannot be read: {problem}", "yellow")]
