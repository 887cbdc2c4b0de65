"""Plain result records handed from a scenario run to scoring, the controller and the reports.

They travel from xdist workers to the controller through ``item.user_properties``, so they
convert to and from JSON-able dicts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Verdict:
    """One judge verdict as parsed from the judge's answer."""

    name: str
    passed: bool
    reason: str = ""


@dataclass(frozen=True)
class CriterionResult:
    name: str
    passed: bool
    score: int
    max_score: int
    reason: str


@dataclass(frozen=True)
class ScenarioResult:
    """The outcome of one scenario, in the shape of the reference's results JSON entry.

    ``criteria`` is ``None`` for an errored scenario (``null`` in the report), and ``error``
    carries the error text on its own so that an error can be told apart from a real 0 %.
    """

    skill: str
    skill_dir: str
    name: str
    description: str
    criteria: list[CriterionResult] | None
    score: int
    max_score: int
    percentage: float
    passed: bool
    error: str | None = None
    # What a timed-out sandboxed agent printed and changed, kept for the report.
    agent_output: str | None = None
    skill_scenarios: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScenarioResult:
        criteria = data.get("criteria")
        return cls(
            **{
                **data,
                "criteria": None if criteria is None else [CriterionResult(**c) for c in criteria],
            }
        )
