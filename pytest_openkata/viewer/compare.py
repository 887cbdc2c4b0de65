"""Two runs side by side: each scenario's score in both, the change, the criteria whose
verdict flipped, and the agent's answers next to each other.

The pairs are made from the runs read without their answers (scores and verdicts are all
they need); the answers of the pairs a page shows are then added from those scenarios' lines
alone (:func:`with_answers`), so that comparing two large runs never reads every answer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from pytest_openkata.contracts.results import ScenarioResult
from pytest_openkata.core.runlog import LoggedRun

__all__ = [
    "CriterionFlip",
    "ScenarioPair",
    "compare_arms",
    "compare_results",
    "compare_runs",
    "first_answer",
    "with_answers",
]


@dataclass(frozen=True)
class CriterionFlip:
    """A criterion's verdict (by majority over the trials) in each run; None where the
    scenario did not grade it (it errored, or the criterion is the other run's only)."""

    name: str
    before: bool | None
    after: bool | None

    @property
    def flipped(self) -> bool:
        return None not in (self.before, self.after) and self.before != self.after


@dataclass(frozen=True)
class ScenarioPair:
    """One scenario of either run: its result in each (None: not in that run), the change
    of its percentage in points, its criteria and the first trial's answer of each."""

    skill_dir: str
    scenario: str
    before: ScenarioResult | None
    after: ScenarioResult | None
    criteria: list[CriterionFlip]
    before_answer: str
    after_answer: str

    @property
    def delta(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        if self.before.criteria is None or self.after.criteria is None:
            return None
        return self.after.percentage - self.before.percentage

    @property
    def flips(self) -> int:
        return sum(flip.flipped for flip in self.criteria)


def first_answer(result: ScenarioResult | None) -> str:
    """What the agent answered in the first trial of ``result`` ("" when nothing)."""
    if result is None:
        return ""
    for trial in result.trials:
        if trial.trace is not None and trial.trace.output:
            return trial.trace.output
        if trial.agent_output:
            return trial.agent_output
    return result.agent_output or ""


def _verdicts(result: ScenarioResult | None) -> dict[str, bool]:
    if result is None or result.criteria is None:
        return {}
    return {criterion.name: criterion.passed for criterion in result.criteria}


def compare_runs(before: LoggedRun, after: LoggedRun) -> list[ScenarioPair]:
    """Every scenario (own arm) of either run, by skill folder and name."""
    return compare_results(before.results, after.results)


def compare_arms(run: LoggedRun) -> list[ScenarioPair]:
    """The baseline arm of each scenario of ``run`` (before) against its own arm (after)."""
    own = [result for result in run.results if result.baseline is not None]
    return compare_results([r.baseline for r in own if r.baseline is not None], own)


def compare_results(
    before: Sequence[ScenarioResult], after: Sequence[ScenarioResult]
) -> list[ScenarioPair]:
    """Every scenario of either list, by skill folder and name."""
    older = {(r.skill_dir, r.name): r for r in before}
    newer = {(r.skill_dir, r.name): r for r in after}
    pairs = []
    for key in sorted(older.keys() | newer.keys()):
        was, now = older.get(key), newer.get(key)
        verdicts_before, verdicts_after = _verdicts(was), _verdicts(now)
        names = list(dict.fromkeys([*verdicts_before, *verdicts_after]))
        pairs.append(
            ScenarioPair(
                skill_dir=key[0],
                scenario=key[1],
                before=was,
                after=now,
                criteria=[
                    CriterionFlip(name, verdicts_before.get(name), verdicts_after.get(name))
                    for name in names
                ],
                before_answer=first_answer(was),
                after_answer=first_answer(now),
            )
        )
    return pairs


def with_answers(
    pairs: Sequence[ScenarioPair],
    before: Sequence[ScenarioResult],
    after: Sequence[ScenarioResult],
) -> list[ScenarioPair]:
    """``pairs`` with the first answers of the results ``before`` and ``after`` (read whole,
    those of the pairs at least), by skill folder and scenario."""
    older = {(r.skill_dir, r.name): r for r in before}
    newer = {(r.skill_dir, r.name): r for r in after}
    return [
        replace(
            pair,
            before_answer=first_answer(older.get((pair.skill_dir, pair.scenario))),
            after_answer=first_answer(newer.get((pair.skill_dir, pair.scenario))),
        )
        for pair in pairs
    ]
