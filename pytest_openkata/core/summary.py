"""Skill summaries: scenario results grouped by skill, scored, and gated on the threshold.

A skill is *complete* when every scenario it has on disk ran; only then is its threshold
enforced (a partial run shows percentages and gates nothing).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_openkata.contracts.results import ScenarioResult, Usage
from pytest_openkata.core.arms import SAME
from pytest_openkata.core.scoring import meets_threshold, overall_percentage
from pytest_openkata.core.stats import overall_interval_95, straddles

if TYPE_CHECKING:
    # Imported where used: the plugin loads this module in every pytest run.
    from pytest_openkata.core.compare import SkillComparison
    from pytest_openkata.core.manifest import Drift
    from pytest_openkata.core.regression import SkillChanges


@dataclass(frozen=True)
class SkillSummary:
    """One skill's results in the reference's scenario order, its overall percentage and
    whether it passed. Before the reporters run, the run adds its comparison with an earlier
    run and why its report is held back, if it is; the finished run, where its report went or
    why it could not be written (see :mod:`pytest_openkata.core.reporting`)."""

    skill_dir: Path
    display: str
    results: list[ScenarioResult]
    total_scenarios: int
    overall: float
    passed: bool
    report_path: Path | None = None
    report_error: str | None = None
    # Why the report is not where the catalogue reads it, or not written at all for a broken
    # skill (None: it is there, or none was written for another reason).
    report_held: str | None = None
    # With several trials: the 95 % interval of ``overall`` and whether it holds the threshold.
    interval: tuple[float, float] | None = None
    straddles: bool = False
    # With a baseline arm: both arms compared (None without one).
    comparison: SkillComparison | None = None
    # With --eval-compare: the skill compared with an earlier run (None without one), or why
    # the earlier run could not be read.
    changes: SkillChanges | None = None
    compare_error: str | None = None
    # Counted as partial whatever ran (``--eval-partial``, the reference's scenario mode).
    partial: bool = False
    # What drifted between the runs or arms the skill was compared across (its manifests:
    # :mod:`pytest_openkata.core.manifest`), one per comparison that found a difference.
    drift: tuple[Drift, ...] = ()

    @property
    def refused_drift(self) -> str | None:
        """Why a comparison of the skill was refused (a difference that makes it meaningless,
        and ``allow_drift`` off), or None."""
        return next((d.refusal() for d in self.drift if d.refusal() is not None), None)

    @property
    def with_trials(self) -> bool:
        return any(len(result.trials) > 1 for result in self.results)

    @property
    def usage(self) -> Usage:
        return usage_of(self.results)

    @property
    def regresses(self) -> bool:
        """The uplift's verdict is that the skill does worse than its baseline (never for an
        A/A run, whose arms are the same)."""
        comparison = self.comparison
        if comparison is None or comparison.uplift is None or comparison.arm == SAME:
            return False
        from pytest_openkata.core.uplift import REGRESSES

        return comparison.uplift.verdict == REGRESSES

    @property
    def regressed(self) -> bool:
        """The comparison with an earlier run found a regression or a missing scenario."""
        return self.changes is not None and self.changes.failed

    @property
    def name(self) -> str:
        """The skill's name: its folder's (also where a run log names the folder ``.``)."""
        if self.results:
            return self.results[0].skill
        return self.skill_dir.name

    @property
    def complete(self) -> bool:
        """Every scenario of the skill on disk ran, and the run was not told to count as
        partial; only then is the threshold enforced."""
        return not self.partial and len(self.results) >= self.total_scenarios

    @property
    def gate_failed(self) -> bool:
        return self.complete and not self.passed


def usage_of(results: Iterable[ScenarioResult]) -> Usage:
    """Every model call of the results, those of their baseline arms included."""
    total = Usage()
    for result in results:
        total += result.usage
        if result.baseline is not None:
            total += result.baseline.usage
    return total


def _display(path: Path, rootdir: Path) -> str:
    try:
        return path.relative_to(rootdir).as_posix()
    except ValueError:
        return str(path)


def summarise(
    results: Iterable[ScenarioResult], threshold: int, rootdir: Path, *, partial: bool = False
) -> list[SkillSummary]:
    """Group results by skill, in the reference's scenario order, and score each skill;
    ``partial`` counts every skill as partly run."""
    by_skill: dict[str, list[ScenarioResult]] = defaultdict(list)
    for result in results:
        by_skill[result.skill_dir].append(result)
    from pytest_openkata.core.compare import compare_skill

    summaries = []
    for skill_dir, skill_results in sorted(by_skill.items()):
        skill_results.sort(key=lambda r: r.name)
        overall = overall_percentage([r.percentage for r in skill_results])
        total = max(len(r.skill_scenarios) for r in skill_results)
        interval = overall_interval_95([_spread(r) for r in skill_results])
        summaries.append(
            SkillSummary(
                skill_dir=Path(skill_dir),
                display=_display(Path(skill_dir), rootdir),
                results=skill_results,
                total_scenarios=total,
                overall=overall,
                passed=meets_threshold(overall, threshold, len(skill_results)),
                interval=interval,
                straddles=straddles(interval, threshold),
                comparison=compare_skill(skill_results),
                partial=partial,
            )
        )
    return summaries


def _spread(result: ScenarioResult) -> tuple[float, float, int]:
    """A scenario's mean, standard deviation and number of trials."""
    if result.stats is None:
        return result.percentage, 0.0, 1
    return result.percentage, result.stats.stdev, result.stats.trials


def gate_failed(
    summaries: Iterable[SkillSummary],
    *,
    require_uplift: bool = False,
    fail_on_regression: bool = False,
) -> bool:
    """Whether the run fails its gate: a complete skill below its threshold, a report that
    could not be written, an earlier run to compare with that could not be read, with
    ``require_uplift`` a skill that regresses against its
    baseline arm, or with ``fail_on_regression`` one whose comparison with an earlier run
    found a regression or a missing scenario."""
    return any(
        summary.gate_failed
        or summary.report_error
        or summary.compare_error
        or summary.refused_drift
        or (require_uplift and summary.regresses)
        or (fail_on_regression and summary.regressed)
        for summary in summaries
    )


def skill_labels(summaries: Sequence[SkillSummary]) -> list[str]:
    """How the run's lines name each skill: by its name, or, where two skills of the run have
    the same name (``skills/a/commit-message`` and ``skills/b/commit-message``), by its folder
    relative to the rootdir, as its block's header shows it."""
    names = Counter(summary.name for summary in summaries)
    return [
        summary.display if names[summary.name] > 1 and summary.display else summary.name
        for summary in summaries
    ]
