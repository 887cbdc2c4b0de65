"""Where reviewers and the judge disagree: the criteria whose human verdicts most often differ
from the judge's, over every labelled trial."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pytest_openkata.core.verdict_labels import VerdictLabel

__all__ = ["Disagreement", "disagreements"]


@dataclass(frozen=True)
class Disagreement:
    """One criterion of one scenario: its labels, how many of them say the judge was wrong,
    and the notes of those."""

    skill: str
    scenario: str
    criterion: str
    labelled: int
    disagreed: int
    notes: tuple[str, ...]


def disagreements(judged: Iterable[tuple[VerdictLabel, bool]]) -> list[Disagreement]:
    """Labels with the judge's verdict of their criterion, grouped by skill, scenario and
    criterion, the most disagreements first (then the most labels, then by name)."""
    groups: dict[tuple[str, str, str], list[tuple[VerdictLabel, bool]]] = {}
    for label, judge_passed in judged:
        key = (label.skill_dir, label.scenario, label.criterion)
        groups.setdefault(key, []).append((label, judge_passed))
    found = []
    for (skill, scenario, criterion), members in groups.items():
        wrong = [label for label, judge_passed in members if label.passed != judge_passed]
        found.append(
            Disagreement(
                skill,
                scenario,
                criterion,
                labelled=len(members),
                disagreed=len(wrong),
                notes=tuple(label.note for label in wrong if label.note),
            )
        )
    return sorted(found, key=lambda d: (-d.disagreed, -d.labelled, d.skill, d.scenario))
