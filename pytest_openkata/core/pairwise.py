"""The figures of a pairwise comparison (``--eval-judge-pairwise``): how often the judge,
shown both arms' answers side by side, found the skill's better, the baseline's better, or
neither, and how often the order of the two answers changed its mind.

Every criterion of every compared trial is one comparison. It counts as a win of the skill
when the judge preferred the skill's answer in both orders, as a loss when it preferred the
baseline's in both, and as a tie otherwise: when it said "tie", or when its preference
followed the order (:attr:`~pytest_openkata.contracts.results.PairwiseVerdict.outcome`). The
comparisons whose two orders disagree are the judge's noise, per criterion and overall.

The preference rate is the share of wins among the decided comparisons (wins and losses; ties
are counted apart), with Wilson's 95 % score interval. Its comparisons are taken as
independent, which the criteria of one answer are not quite: the interval is a guide to how
many comparisons decided, not a test across scenarios (the uplift's sign-flip test is that).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pytest_openkata.contracts.results import (
    PAIRWISE_BASELINE,
    PAIRWISE_SKILL,
    CallStats,
    ScenarioResult,
)
from pytest_openkata.core.stats import wilson_interval_95
from pytest_openkata.infra.text import plural

__all__ = [
    "CriterionNoise",
    "PairwiseFigures",
    "calls_summary",
    "noise_summary",
    "pairwise_summary",
    "scenario_pairwise",
    "skill_pairwise",
]


@dataclass(frozen=True)
class CriterionNoise:
    """How often the order of the answers changed the judge's verdict on one criterion."""

    name: str
    comparisons: int
    disagreements: int

    @property
    def rate(self) -> float:
        return self.disagreements / self.comparisons if self.comparisons else 0.0


@dataclass(frozen=True)
class PairwiseFigures:
    """A scenario's (or a skill's) pairwise comparison against the baseline arm ``arm``:
    ``trials`` compared trial pairs, wins, losses and ties of the skill's answers over their
    criteria, the comparisons whose two orders disagreed, each criterion's noise (a
    scenario's only), the comparisons' errors and the usage of their judge calls."""

    arm: str
    trials: int
    wins: int
    losses: int
    ties: int
    disagreements: int
    criteria: tuple[CriterionNoise, ...] = ()
    errors: tuple[str, ...] = ()
    usage: CallStats = field(default_factory=CallStats)

    @property
    def comparisons(self) -> int:
        return self.wins + self.losses + self.ties

    @property
    def decided(self) -> int:
        return self.wins + self.losses

    @property
    def preference(self) -> float | None:
        """The share of wins among the decided comparisons; None when none was decided."""
        return self.wins / self.decided if self.decided else None

    @property
    def interval(self) -> tuple[float, float] | None:
        """Wilson's 95 % interval of :attr:`preference`; None when none was decided."""
        return wilson_interval_95(self.wins, self.decided)

    @property
    def noise(self) -> float | None:
        """The share of comparisons whose two orders disagreed; None without comparisons."""
        return self.disagreements / self.comparisons if self.comparisons else None

    @property
    def noisy_criteria(self) -> list[CriterionNoise]:
        """The criteria the order swayed, the noisiest first (ties in checklist order)."""
        swayed = [c for c in self.criteria if c.disagreements]
        return sorted(swayed, key=lambda c: -c.rate)


def scenario_pairwise(result: ScenarioResult) -> PairwiseFigures | None:
    """The pairwise figures of one scenario; None when none of its trials was compared."""
    compared = [t.pairwise for t in result.trials if t.pairwise is not None]
    if not compared or result.baseline is None:
        return None
    wins = losses = ties = disagreements = 0
    runs: dict[str, int] = {}
    flips: dict[str, int] = {}
    usage = CallStats()
    for pairwise in compared:
        usage += pairwise.usage
        for verdict in pairwise.verdicts:
            outcome = verdict.outcome
            wins += outcome == PAIRWISE_SKILL
            losses += outcome == PAIRWISE_BASELINE
            ties += outcome not in (PAIRWISE_SKILL, PAIRWISE_BASELINE)
            disagreements += not verdict.agrees
            runs[verdict.name] = runs.get(verdict.name, 0) + 1
            flips[verdict.name] = flips.get(verdict.name, 0) + (not verdict.agrees)
    return PairwiseFigures(
        arm=result.baseline.arm,
        trials=sum(1 for p in compared if p.error is None),
        wins=wins,
        losses=losses,
        ties=ties,
        disagreements=disagreements,
        criteria=tuple(CriterionNoise(name, runs[name], flips[name]) for name in runs),
        errors=tuple(p.error for p in compared if p.error is not None),
        usage=usage,
    )


def skill_pairwise(results: Iterable[ScenarioResult]) -> PairwiseFigures | None:
    """The pairwise figures of a skill's scenarios added up (no per-criterion noise: the
    criteria of different scenarios are different criteria); None when none was compared."""
    figures: Sequence[PairwiseFigures] = [
        f for f in (scenario_pairwise(r) for r in results) if f is not None
    ]
    if not figures:
        return None
    usage = CallStats()
    for f in figures:
        usage += f.usage
    return PairwiseFigures(
        arm=figures[0].arm,
        trials=sum(f.trials for f in figures),
        wins=sum(f.wins for f in figures),
        losses=sum(f.losses for f in figures),
        ties=sum(f.ties for f in figures),
        disagreements=sum(f.disagreements for f in figures),
        errors=tuple(error for f in figures for error in f.errors),
        usage=usage,
    )


def _percent(rate: float) -> str:
    return f"{rate * 100:.0f}%"


def pairwise_summary(figures: PairwiseFigures) -> str:
    """The figures in one sentence, as every report words them (plain text: a reporter
    escapes it for its format)."""
    if not figures.comparisons:
        return f"nothing compared ({plural(len(figures.errors), 'comparison')} errored)"
    text = (
        f"skill better {figures.wins}, baseline better {figures.losses}, tie {figures.ties} "
        f"of {figures.comparisons} criterion comparisons over {figures.trials} "
        f"trial{'' if figures.trials == 1 else 's'}"
    )
    preference, interval = figures.preference, figures.interval
    if preference is not None and interval is not None:
        text += (
            f"; skill preferred in {_percent(preference)} of the decided "
            f"(95% CI {interval[0] * 100:.0f}-{_percent(interval[1])})"
        )
    if figures.noise is not None:
        text += (
            f"; judge noise {_percent(figures.noise)} ({figures.disagreements} of "
            f"{figures.comparisons} changed with the order)"
        )
    return text


def calls_summary(figures: PairwiseFigures) -> str | None:
    """The pairwise judge calls, counted apart from the per-arm grading's; None for none."""
    usage = figures.usage
    if usage.empty:
        return None
    text = f"{usage.calls} pairwise judge call{'' if usage.calls == 1 else 's'}"
    if usage.cached:
        text += f" (+{usage.cached} from the cache)"
    if usage.cost_usd is not None:
        text += f", cost ${usage.cost_usd:.4f}"
    return text


def noise_summary(figures: PairwiseFigures) -> str | None:
    """The criteria the order swayed, with how often; None when it swayed none."""
    swayed = figures.noisy_criteria
    if not swayed:
        return None
    return ", ".join(f"{c.name} {c.disagreements} of {c.comparisons}" for c in swayed)
