"""Comparing a run with an earlier one: which scenarios regressed, improved or changed.

The earlier run is a results JSON or a run log of the same skill (see
:mod:`pytest_openkata.providers.reporters.baselines`). Per scenario the change of its
percentage gets a tier; per criterion the verdict's flips, with Fisher's exact test when both
sides ran several trials. Pure functions over scenario results: no I/O.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "IMPROVEMENT",
    "MISSING",
    "NEW",
    "NOT_COMPARABLE",
    "REGRESSION",
    "UNCHANGED",
    "CriterionFlip",
    "ScenarioChange",
    "SkillChanges",
]

REGRESSION = "regression"
IMPROVEMENT = "improvement"
UNCHANGED = "unchanged"
NEW = "new"
MISSING = "missing"
NOT_COMPARABLE = "not-comparable"


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


@dataclass(frozen=True)
class SkillChanges:
    """A skill's scenarios compared with an earlier run; ``baseline`` names that run (a
    report's or a log's file name, never a machine path)."""

    skill: str
    baseline: str
    tolerance: float
    scenarios: tuple[ScenarioChange, ...]

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
