"""A skill's two arms side by side: the uplift and the criteria the skill moves.

The scenario is the unit of the comparison (:mod:`pytest_openkata.core.uplift`): each
scenario scored in both arms gives one pair of percentages. A scenario with an error in either
arm (in any trial) is left out, and named, rather than compared with an errored trial counted
as 0 %: an error says nothing about the skill. Per criterion, the pass rate of each arm over the
trials that ran says where the skill works.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pytest_openkata.contracts.results import ScenarioResult, TrialResult
from pytest_openkata.core.power import PairedPower, paired_power
from pytest_openkata.core.uplift import Uplift, compare_arms

__all__ = ["CriterionMove", "SkillComparison", "compare_skill"]


@dataclass(frozen=True)
class CriterionMove:
    """One criterion's pass rate (0 to 1, over the trials that ran) in each arm."""

    scenario: str
    name: str
    with_rate: float
    without_rate: float

    @property
    def change(self) -> float:
        return self.with_rate - self.without_rate


@dataclass(frozen=True)
class SkillComparison:
    """The uplift over the scenarios scored in both arms (None when there is none), every
    criterion's move, and the scenarios left out with why."""

    arm: str
    uplift: Uplift | None
    criteria: list[CriterionMove]
    left_out: list[tuple[str, str]]
    # Each compared scenario's difference (with - without, in points), for the power analysis;
    # not in the results JSON (a comparison read back from one has none), nor compared.
    differences: tuple[float, ...] = field(default=(), compare=False)

    def power(self, target: float) -> PairedPower | None:
        """The power analysis of the comparison for a difference of ``target`` points
        (:func:`~pytest_openkata.core.power.paired_power`); None with fewer than two
        scenarios compared."""
        return paired_power(self.differences, target)

    def moved_most(self, count: int = 3) -> list[CriterionMove]:
        """The criteria that moved, the largest moves first (ties in report order)."""
        moved = [move for move in self.criteria if move.change != 0]
        return sorted(moved, key=lambda move: -abs(move.change))[:count]


def _pass_rates(trials: Sequence[TrialResult]) -> dict[str, float]:
    passes: dict[str, int] = {}
    runs: dict[str, int] = {}
    for trial in trials:
        for criterion in trial.criteria or ():
            runs[criterion.name] = runs.get(criterion.name, 0) + 1
            passes[criterion.name] = passes.get(criterion.name, 0) + int(criterion.passed)
    return {name: passes[name] / runs[name] for name in runs}


def _one_trial_each(result: ScenarioResult, baseline: ScenarioResult) -> bool:
    return len(result.trials) == 1 and len(baseline.trials) == 1


def compare_skill(results: Sequence[ScenarioResult], *, seed: int = 0) -> SkillComparison | None:
    """The comparison of a skill's results with their baselines; None when no result has one."""
    with_baseline = [r for r in results if r.baseline is not None]
    if not with_baseline:
        return None
    arm = next(r.baseline.arm for r in with_baseline if r.baseline is not None)
    pairs: list[tuple[float, float]] = []
    moves: list[CriterionMove] = []
    left_out: list[tuple[str, str]] = []
    criterion_pairs: list[tuple[bool, bool]] | None = []
    for result in results:
        baseline = result.baseline
        if baseline is None:
            left_out.append((result.name, "no baseline run"))
            continue
        if result.error is not None or baseline.error is not None:
            which = "with the skill" if result.error is not None else f"in the {arm} arm"
            left_out.append((result.name, f"errored {which}"))
            continue
        pairs.append((result.percentage, baseline.percentage))
        own, other = _pass_rates(result.trials), _pass_rates(baseline.trials)
        for name, rate in own.items():
            if name in other:
                moves.append(CriterionMove(result.name, name, rate, other[name]))
        if criterion_pairs is not None and _one_trial_each(result, baseline):
            criterion_pairs += [(own[n] == 1.0, other[n] == 1.0) for n in own if n in other]
        else:
            criterion_pairs = None
    uplift = None
    if pairs:
        uplift = compare_arms(pairs, arm=arm, criterion_pairs=criterion_pairs, seed=seed)
    differences = tuple(with_value - without for with_value, without in pairs)
    return SkillComparison(arm, uplift, moves, left_out, differences)
