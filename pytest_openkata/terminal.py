"""The reference's terminal lines (spec section 9), as segments that carry their colour.

Colour is applied by pytest's terminal writer, so it appears only when pytest uses colour.
"""

from __future__ import annotations

from collections.abc import Iterator

from pytest_openkata.aggregate import SkillSummary
from pytest_openkata.results import ScenarioResult

Segment = tuple[str, str | None]  # text, colour name understood by pytest's terminal writer


def _label(passed: bool) -> Segment:
    return ("PASS", "green") if passed else ("FAIL", "red")


def _scenario_lines(result: ScenarioResult) -> Iterator[list[Segment]]:
    yield [(f"  {result.name}: {result.description}", None)]
    for c in result.criteria or ():
        if c.passed:
            yield [("    ", None), ("✓", "green"), (f" {c.name} ({c.score}/{c.max_score})", None)]
        else:
            reason = f" — {c.reason}" if c.reason else ""
            yield [
                ("    ", None),
                ("✗", "red"),
                (f" {c.name} ({c.score}/{c.max_score}){reason}", None),
            ]
    yield [
        (f"    Score: {result.score}/{result.max_score} ({result.percentage:.0f}%) ", None),
        _label(result.passed),
    ]
    yield []


def skill_lines(summary: SkillSummary, threshold: int) -> Iterator[list[Segment]]:
    """One skill's block: header, scenarios, and the overall line."""
    yield [(summary.display, None)]
    for result in summary.results:
        yield from _scenario_lines(result)
    if summary.complete:
        yield [
            (f"  Overall: {summary.overall:.0f}% ", None),
            _label(summary.passed),
            (f" (threshold: {threshold}%)", None),
        ]
    else:
        yield [
            (
                f"  Overall: {summary.overall:.0f}% (partial run: {len(summary.results)} of "
                f"{summary.total_scenarios} scenarios; threshold {threshold}% not enforced)",
                None,
            )
        ]
    if summary.report_path is not None:
        yield [(f"  Report: {summary.report_path}", None)]
    if summary.report_error is not None:
        yield [(f"  Report not written: {summary.report_error}", "red")]
