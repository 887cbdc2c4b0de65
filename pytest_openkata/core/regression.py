"""Comparing a run with an earlier one: which scenarios regressed, improved or changed.

The earlier run is a results JSON or a run log of the same skill (see
:mod:`pytest_openkata.core.earlier`). Per scenario the change of its
percentage gets a tier; per criterion the verdict's flips, with Fisher's exact test when both
sides ran several trials. Pure functions over scenario results: no I/O.

The rules, per scenario (:func:`compare_skill_runs`):

- ``new``: it is not in the earlier run;
- ``missing``: it is in the earlier run but neither in this one nor among the skill's
  scenarios on disk (one on disk that this run did not select, with ``-k`` say, is left out of
  the comparison);
- ``not-comparable``: its task, criteria, checks or inputs changed, so that the two
  percentages measure different things (told by the digests of the files when both sides have
  them, else by the criteria's names and points);
- ``regression``: its percentage fell by more than the tolerance, and, when both sides ran at
  least three trials, the fall is significant too (Fisher's exact test on the criterion
  verdicts pooled over the trials, p < 0.05);
- ``improvement``: the mirror of a regression;
- ``unchanged``: anything else.

An errored scenario or trial counts as 0 %, as scoring counts it, so a scenario that errors
now where it scored before is a regression (and one fixed since, an improvement); in the
pooled test an errored trial fails every criterion.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pytest_openkata.contracts.results import CriterionResult, ScenarioResult, TrialResult
from pytest_openkata.core.stats import sample_stdev, t_critical_95

__all__ = [
    "IMPROVEMENT",
    "MISSING",
    "NEW",
    "NOT_COMPARABLE",
    "REGRESSION",
    "SIGNIFICANCE",
    "TIERS",
    "UNCHANGED",
    "CriterionFlip",
    "ScenarioChange",
    "SkillChanges",
    "compare_skill_runs",
    "fisher_exact_p_value",
]

REGRESSION = "regression"
IMPROVEMENT = "improvement"
UNCHANGED = "unchanged"
NEW = "new"
MISSING = "missing"
NOT_COMPARABLE = "not-comparable"
TIERS = (REGRESSION, IMPROVEMENT, UNCHANGED, NEW, MISSING, NOT_COMPARABLE)

SIGNIFICANCE = 0.05
"""A change between sides with at least :data:`_TESTED_TRIALS` trials each counts only when
Fisher's exact test gives a p-value below this."""

_TESTED_TRIALS = 3

# Tables whose probabilities differ by less than this relative amount are equally extreme
# (the tolerance of R's fisher.test and SciPy's fisher_exact, kept so that the p-values agree).
_RELATIVE_TOLERANCE = 10**7  # 1 + 1e-7, as the fraction (10**7 + 1) / 10**7

# Percentages closer than this (in points) are the same: a mean over trials added up in another
# order can differ in its last bits, and a fall of exactly the tolerance is not beyond it.
_POINTS_EPSILON = 1e-9

# What each digest of :func:`pytest_openkata.core.scenario.scenario_digests` is of, as a reason
# names it; the prompt's digest is left out, since the skill's own text is what a comparison
# of two runs of a skill is about.
_DIGESTED = (
    ("task", "task.md"),
    ("criteria", "criteria.json"),
    ("checks", "checks.json"),
    ("inputs", "inputs/"),
)


@dataclass(frozen=True)
class CriterionFlip:
    """One criterion on both sides: its verdict (the majority over trials; None where the
    side lacks it), how many trials passed it of how many, and Fisher's exact p-value when
    both sides ran several trials."""

    name: str
    before: bool | None
    after: bool | None
    before_passes: tuple[int, int] | None = None
    after_passes: tuple[int, int] | None = None
    p_value: float | None = None

    @property
    def flip(self) -> str | None:
        """``"pass→fail"``, ``"fail→pass"`` or None (no flip, or a side lacks it)."""
        if self.before is None or self.after is None or self.before == self.after:
            return None
        return "pass→fail" if self.before else "fail→pass"


@dataclass(frozen=True)
class ScenarioChange:
    """One scenario on both sides: its percentages (None where a side lacks it), the change,
    its 95 % interval when both sides ran several trials, the p-value behind the tier, the
    tier, its criteria, and why when it is not comparable or missing."""

    name: str
    tier: str
    before: float | None
    after: float | None
    change: float | None = None
    interval: tuple[float, float] | None = None
    p_value: float | None = None
    criteria: tuple[CriterionFlip, ...] = ()
    reason: str = ""

    @property
    def flipped(self) -> list[CriterionFlip]:
        """The criteria whose verdict flipped, in the scenario's order."""
        return [criterion for criterion in self.criteria if criterion.flip is not None]


@dataclass(frozen=True)
class SkillChanges:
    """A skill's scenarios compared with an earlier run; ``baseline`` names that run (a
    report's or a log's file name, never a machine path). ``note`` says why no comparison was
    made (``no earlier run of …``); the skill then has no scenarios here and nothing failed.
    ``skipped`` names the run logs passed over on the way because they cannot be read."""

    skill: str
    baseline: str
    tolerance: float
    scenarios: tuple[ScenarioChange, ...]
    note: str = ""
    skipped: tuple[str, ...] = ()

    @property
    def regressions(self) -> list[ScenarioChange]:
        return [s for s in self.scenarios if s.tier == REGRESSION]

    @property
    def missing(self) -> list[ScenarioChange]:
        return [s for s in self.scenarios if s.tier == MISSING]

    @property
    def failed(self) -> bool:
        """What ``--eval-fail-on-regression`` fails on: a regression or a missing scenario."""
        return bool(self.regressions or self.missing)

    def count(self, tier: str) -> int:
        """How many scenarios are of ``tier``."""
        return sum(1 for s in self.scenarios if s.tier == tier)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SkillChanges:
        def pair(value: Any) -> Any:
            return None if value is None else tuple(value)

        return cls(
            skill=data["skill"],
            baseline=data["baseline"],
            tolerance=float(data["tolerance"]),
            note=str(data.get("note", "")),
            skipped=tuple(str(text) for text in data.get("skipped", ())),
            scenarios=tuple(
                ScenarioChange(
                    **{
                        **s,
                        "interval": pair(s.get("interval")),
                        "criteria": tuple(
                            CriterionFlip(
                                **{
                                    **c,
                                    "before_passes": pair(c.get("before_passes")),
                                    "after_passes": pair(c.get("after_passes")),
                                }
                            )
                            for c in s.get("criteria", ())
                        ),
                    }
                )
                for s in data["scenarios"]
            ),
        )


# --- Fisher's exact test ---------------------------------------------------------------------


def fisher_exact_p_value(a: int, b: int, c: int, d: int) -> float:
    """Two-sided Fisher's exact test of the 2x2 table ``[[a, b], [c, d]]``.

    With the margins fixed, the top-left cell follows a hypergeometric distribution; the
    p-value is the sum of the probabilities of every table whose probability is at most the
    observed one's, times 1 + 1e-7 (the relative tolerance of R's ``fisher.test`` and SciPy's
    ``fisher_exact``). The probabilities share the denominator C(n, a + c), so the numerators
    C(a + b, x)·C(c + d, a + c - x) are compared and summed as exact integers and divided once:
    equally likely tables tie exactly, and the tolerance only keeps the results of those tools
    where two tables differ by less than it. Raises ValueError for a negative cell; a table of
    zeros gives 1.0.
    """
    cells = (a, b, c, d)
    if any(cell < 0 for cell in cells):
        raise ValueError(
            f"Fisher's exact test needs counts >= 0, got {[list(cells[:2]), list(cells[2:])]}"
        )
    first_row, second_row, first_column = a + b, c + d, a + c
    low = max(0, first_column - second_row)
    high = min(first_row, first_column)
    weights = [
        math.comb(first_row, x) * math.comb(second_row, first_column - x)
        for x in range(low, high + 1)
    ]
    observed = weights[a - low]
    extreme = sum(
        weight
        for weight in weights
        if weight * _RELATIVE_TOLERANCE <= observed * (_RELATIVE_TOLERANCE + 1)
    )
    return min(1.0, extreme / sum(weights))


# --- one side of a scenario --------------------------------------------------------------------


def _trials(result: ScenarioResult) -> list[TrialResult]:
    """The scenario's trials; a result without any (built by hand) is its own one trial."""
    if result.trials:
        return list(result.trials)
    return [
        TrialResult(
            index=1,
            criteria=result.criteria,
            score=result.score,
            max_score=result.max_score,
            percentage=result.percentage,
            passed=result.passed,
            error=result.error,
        )
    ]


def _percentage(result: ScenarioResult) -> float:
    """The scenario's percentage; 0 when it errored, as scoring counts it."""
    return 0.0 if result.criteria is None else result.percentage


def _verdicts(result: ScenarioResult) -> dict[str, bool]:
    return {criterion.name: criterion.passed for criterion in result.criteria or ()}


def _passes(trials: Sequence[TrialResult], name: str) -> tuple[int, int] | None:
    """How many trials passed criterion ``name``, of how many: a trial that errored fails it;
    None when no trial judged it."""
    judged = [trial for trial in trials if trial.criteria is not None]
    if not any(criterion.name == name for trial in judged for criterion in trial.criteria or ()):
        return None
    passed = sum(
        1
        for trial in judged
        for criterion in trial.criteria or ()
        if criterion.name == name and criterion.passed
    )
    counted = sum(
        1
        for trial in trials
        if trial.criteria is None or any(criterion.name == name for criterion in trial.criteria)
    )
    return passed, counted


def _pooled(trials: Sequence[TrialResult], names: Sequence[str]) -> tuple[int, int]:
    """Criterion verdicts over the trials, passed and failed; an errored trial fails each of
    ``names`` (the scenario's criteria)."""
    passed = failed = 0
    for trial in trials:
        if trial.criteria is None:
            failed += len(names)
            continue
        for criterion in trial.criteria:
            if criterion.passed:
                passed += 1
            else:
                failed += 1
    return passed, failed


def _names(*results: ScenarioResult) -> list[str]:
    """The criteria's names of the results, in order, each once (the first result's first)."""
    names: dict[str, None] = {}
    for result in results:
        for criterion in result.criteria or ():
            names.setdefault(criterion.name, None)
    return list(names)


# --- comparing one scenario --------------------------------------------------------------------


def _criteria_flips(before: ScenarioResult, after: ScenarioResult) -> tuple[CriterionFlip, ...]:
    before_trials, after_trials = _trials(before), _trials(after)
    before_verdicts, after_verdicts = _verdicts(before), _verdicts(after)
    flips = []
    for name in _names(after, before):
        before_passes = _passes(before_trials, name)
        after_passes = _passes(after_trials, name)
        p_value = None
        if (
            before_passes is not None
            and after_passes is not None
            and before_passes[1] > 1
            and after_passes[1] > 1
        ):
            p_value = fisher_exact_p_value(
                before_passes[0],
                before_passes[1] - before_passes[0],
                after_passes[0],
                after_passes[1] - after_passes[0],
            )
        flips.append(
            CriterionFlip(
                name=name,
                before=before_verdicts.get(name),
                after=after_verdicts.get(name),
                before_passes=before_passes,
                after_passes=after_passes,
                p_value=p_value,
            )
        )
    return tuple(flips)


def _weights(criteria: Iterable[CriterionResult]) -> dict[str, int]:
    return {criterion.name: criterion.max_score for criterion in criteria}


def _not_comparable_reason(before: ScenarioResult, after: ScenarioResult) -> str:
    """Why the two sides measured different things, or ``""`` when they did not.

    With digests on both sides, the task, criteria, checks and inputs are compared (a file
    present on one side only changed too). Otherwise (a results JSON holds no digests) the
    criteria's names and points are, when both sides have criteria; a side that errored
    everywhere has none and is taken to be comparable.
    """
    if before.digests and after.digests:
        changed = [
            label for key, label in _DIGESTED if before.digests.get(key) != after.digests.get(key)
        ]
        return f"{', '.join(changed)} changed" if changed else ""
    if before.criteria is None or after.criteria is None:
        return ""
    old, new = _weights(before.criteria), _weights(after.criteria)
    parts = []
    added = [name for name in new if name not in old]
    removed = [name for name in old if name not in new]
    if added:
        parts.append(f"criteria added: {', '.join(added)}")
    if removed:
        parts.append(f"criteria removed: {', '.join(removed)}")
    reweighted = [
        f"{name} {old[name]} -> {new[name]}"
        for name in new
        if name in old and old[name] != new[name]
    ]
    if reweighted:
        parts.append(f"points changed: {', '.join(reweighted)}")
    return "; ".join(parts)


def _change_interval(before: Sequence[float], after: Sequence[float]) -> tuple[float, float] | None:
    """Welch's 95 % interval of ``mean(after) - mean(before)`` from the trials' percentages,
    clamped to [-100, 100]; None unless both sides ran at least two trials.

    The standard error is sqrt(s_a²/n_a + s_b²/n_b) and the degrees of freedom come from
    Welch-Satterthwaite; with no spread on either side the interval is the change itself.
    """
    if len(before) < 2 or len(after) < 2:
        return None
    change = math.fsum(after) / len(after) - math.fsum(before) / len(before)
    v_before = sample_stdev(before) ** 2 / len(before)
    v_after = sample_stdev(after) ** 2 / len(after)
    total = v_before + v_after
    if total == 0:
        return (change, change)
    df = total * total / (v_before**2 / (len(before) - 1) + v_after**2 / (len(after) - 1))
    half = t_critical_95(max(df, 1.0)) * math.sqrt(total)
    return (max(change - half, -100.0), min(change + half, 100.0))


def _compare_scenario(
    before: ScenarioResult, after: ScenarioResult, tolerance: float
) -> ScenarioChange:
    before_trials, after_trials = _trials(before), _trials(after)
    before_pct, after_pct = _percentage(before), _percentage(after)
    change = after_pct - before_pct
    criteria = _criteria_flips(before, after)
    reason = _not_comparable_reason(before, after)
    if reason:
        return ScenarioChange(
            after.name, NOT_COMPARABLE, before_pct, after_pct, change, None, None, criteria, reason
        )
    interval = _change_interval(
        [trial.percentage if trial.criteria is not None else 0.0 for trial in before_trials],
        [trial.percentage if trial.criteria is not None else 0.0 for trial in after_trials],
    )
    p_value = None
    if len(before_trials) >= _TESTED_TRIALS and len(after_trials) >= _TESTED_TRIALS:
        before_passed, before_failed = _pooled(before_trials, _names(before, after))
        after_passed, after_failed = _pooled(after_trials, _names(after, before))
        p_value = fisher_exact_p_value(before_passed, before_failed, after_passed, after_failed)
    significant = p_value is None or p_value < SIGNIFICANCE
    if change < -tolerance - _POINTS_EPSILON and significant:
        tier = REGRESSION
    elif change > tolerance + _POINTS_EPSILON and significant:
        tier = IMPROVEMENT
    else:
        tier = UNCHANGED
    return ScenarioChange(
        after.name, tier, before_pct, after_pct, change, interval, p_value, criteria
    )


def compare_skill_runs(
    current: Sequence[ScenarioResult],
    earlier: Sequence[ScenarioResult],
    *,
    skill: str,
    baseline: str,
    tolerance: float,
) -> SkillChanges:
    """A skill's scenarios of this run (``current``) compared with those of an earlier run
    (``earlier``, read from a results JSON or a run log), by scenario name, sorted by name.

    The tiers are those of the module docstring; ``tolerance`` is in percentage points (a fall
    of exactly ``tolerance`` is not a regression). The scenarios on disk are the
    ``skill_scenarios`` any current result lists. Each compared scenario carries its change
    (after - before, in points), Welch's 95 % interval of the change from the trials'
    percentages when both sides ran several trials, the pooled Fisher p-value when both ran at
    least three, and every criterion's verdicts, pass counts over trials and, with several
    trials on both sides, Fisher's p-value.
    """
    now = {result.name: result for result in current}
    before = {result.name: result for result in earlier}
    on_disk = {name for result in current for name in result.skill_scenarios}
    changes = []
    for name in sorted(now.keys() | before.keys()):
        after_result, before_result = now.get(name), before.get(name)
        if before_result is None and after_result is not None:
            changes.append(
                ScenarioChange(
                    name,
                    NEW,
                    None,
                    _percentage(after_result),
                    criteria=_criteria_flips(_absent(after_result), after_result),
                    reason="not in the earlier run",
                )
            )
        elif after_result is None and before_result is not None:
            if name in on_disk:
                continue  # on disk but not selected this time: left out, not missing
            changes.append(
                ScenarioChange(
                    name,
                    MISSING,
                    _percentage(before_result),
                    None,
                    criteria=_criteria_flips(before_result, _absent(before_result)),
                    reason="in the earlier run, no longer on disk",
                )
            )
        elif after_result is not None and before_result is not None:
            changes.append(_compare_scenario(before_result, after_result, tolerance))
    return SkillChanges(
        skill=skill, baseline=baseline, tolerance=float(tolerance), scenarios=tuple(changes)
    )


def _absent(result: ScenarioResult) -> ScenarioResult:
    """A stand-in for the side a scenario is not on: no criteria, no trials judged."""
    return ScenarioResult(
        skill=result.skill,
        skill_dir=result.skill_dir,
        name=result.name,
        description=result.description,
        criteria=[],
        score=0,
        max_score=0,
        percentage=0.0,
        passed=False,
        trials=[
            TrialResult(index=1, criteria=[], score=0, max_score=0, percentage=0.0, passed=False)
        ],
    )
