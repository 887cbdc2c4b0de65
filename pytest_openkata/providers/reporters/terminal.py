"""The reference's terminal lines (spec section 9), as segments that carry their colour.

Colour is applied by the output (pytest's terminal writer), so it appears only when pytest
uses colour. Every text of a line is :func:`~pytest_openkata.infra.text.visible`: a judge's
reason, an agent's error or a scenario's name cannot move the cursor or erase a line already
printed. A reason or an error of several lines is continued on lines of its own, inside its
scenario's block; any other text (a name, a description) stays on its line
(:func:`~pytest_openkata.infra.text.one_line`), so that no text prints lines that look like
the run's own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_openkata.contracts.results import CallStats, CriterionResult, ScenarioResult, Usage
from pytest_openkata.core.activation import scenario_activation
from pytest_openkata.core.auto_trials import savings_text
from pytest_openkata.core.error_rates import error_rates, error_rates_text
from pytest_openkata.core.pairwise import (
    PairwiseFigures,
    calls_summary,
    noise_summary,
    pairwise_summary,
    scenario_pairwise,
    skill_pairwise,
)
from pytest_openkata.core.power import DEFAULT_TARGET, power_text
from pytest_openkata.core.reporting import TERMINAL_REPORTER, ReportOutcome, Run, Segment
from pytest_openkata.core.summary import SkillSummary
from pytest_openkata.infra.tempfiles import REMOVED
from pytest_openkata.infra.text import one_line, plural, signed_points, visible_lines

if TYPE_CHECKING:
    from pytest_openkata.core.compare import SkillComparison


def _label(passed: bool) -> Segment:
    return ("PASS", "green") if passed else ("FAIL", "red")


def _votes(criterion: CriterionResult) -> str:
    if criterion.votes is None:
        return ""
    passed, total = criterion.votes
    return f" [{passed}/{total} passed]"


def _trials_line(result: ScenarioResult) -> str | None:
    summary = result.stats
    if summary is None:
        return None
    n = summary.trials
    interval = f", 95% CI {summary.ci95[0]:.1f}-{summary.ci95[1]:.1f}%" if summary.ci95 else ""
    return (
        f"    Trials: {summary.passes} of {n} passed; mean {summary.mean:.1f}%, "
        f"sd {summary.stdev:.1f}{interval}; pass@{n} {summary.pass_at_k[n]:.2f}, "
        f"pass^{n} {summary.pass_hat_k[n]:.2f}"
    )


def _cache_line(result: ScenarioResult) -> str | None:
    agent, judge = result.usage.agent.cached, result.usage.judge.cached
    if not agent and not judge:
        return None
    parts = []
    if agent:
        parts.append(f"{agent} agent answer{'s' if agent != 1 else ''}")
    if judge:
        parts.append(f"{judge} judge verdict{'s' if judge != 1 else ''}")
    return f"    From the cache: {', '.join(parts)}"


def _engine_line(result: ScenarioResult) -> str | None:
    """Which engine of a pool ran the scenario, and the engines lost under it on the way."""
    if not result.engine and not result.lost_engines:
        return None
    line = f"    Engine: {result.engine or 'none'}"
    if result.lost_engines:
        line += f" (ran again after {'; '.join(result.lost_engines)})"
    return line


def _header(result: ScenarioResult) -> str:
    """The scenario's name and description (its name alone when it has none). An errored
    scenario's description carries the reference's ``(error: ...)`` suffix (as in the report);
    it is left out here, where the ``ERROR:`` line says it, so that the error text appears
    once in the block."""
    description = result.plain_description
    if not description.strip():
        return f"  {result.name}"
    return f"  {result.name}: {description}"


def _score_line(result: ScenarioResult) -> list[Segment]:
    """The reference's ``Score: 80/100 (80%) FAIL``; with several trials, which figure is the
    majority over the trials and which the mean (the one the gate uses)."""
    if result.stats is None:
        text = f"    Score: {result.score}/{result.max_score} ({result.percentage:.0f}%) "
    else:
        text = (
            f"    Score: {result.score}/{result.max_score} by majority; "
            f"mean over {result.stats.trials} trials {result.percentage:.0f}% "
        )
    return [(text, None), _label(result.passed)]


def _baseline_lines(result: ScenarioResult) -> Iterator[list[Segment]]:
    """The baseline arm's score against the skill's, or its error (an agent's error holds
    several lines: its standard error, kept inside the scenario's block)."""
    baseline = result.baseline
    if baseline is None:
        return
    if baseline.criteria is None:
        head: list[Segment] = [(f"    Baseline ({baseline.arm}): errored: ", None)]
        yield from _continued(head, baseline.error or "", "    ")
        return
    change = result.percentage - baseline.percentage
    yield [
        (
            f"    Baseline ({baseline.arm}): {baseline.score}/{baseline.max_score} "
            f"({baseline.percentage:.0f}%); with the skill {change:+.0f} points",
            None,
        )
    ]


def pairwise_lines(figures: PairwiseFigures | None, indent: str) -> Iterator[list[Segment]]:
    """The judge's side-by-side comparison with the baseline arm, its order noise and its
    errors (nothing when no trial was compared)."""
    if figures is None:
        return
    yield [(f"{indent}Pairwise against {figures.arm}: {pairwise_summary(figures)}", None)]
    swayed = noise_summary(figures)
    if swayed is not None:
        yield [(f"{indent}  swayed by the order: {swayed}", "yellow")]
    for error in figures.errors:
        head: list[Segment] = [(f"{indent}  ", None), ("ERROR", "red"), (": ", None)]
        yield from _continued(head, error, f"{indent}  ")


def uplift_lines(comparison: SkillComparison) -> Iterator[list[Segment]]:
    """The uplift block of a skill compared with its baseline arm."""
    uplift = comparison.uplift
    if uplift is None:
        yield [(f"  Uplift against {comparison.arm}: no scenario scored in both arms", "yellow")]
    else:
        low, high = uplift.ci95
        colour = {"improves": "green", "regresses": "red"}.get(uplift.verdict, "yellow")
        yield [
            (
                f"  Uplift against {comparison.arm}: with the skill {uplift.with_mean:.1f}%, "
                f"{comparison.arm} {uplift.without_mean:.1f}% over "
                f"{plural(uplift.scenarios, 'scenario')}; "
                f"difference {signed_points(uplift.difference)} points "
                f"(95% CI {signed_points(low)} to {signed_points(high)})",
                None,
            )
        ]
        tests = f"p = {uplift.p_value:.3g} ({uplift.test})"
        if uplift.mcnemar is not None:
            m = uplift.mcnemar
            tests += (
                f"; criteria: McNemar p = {m.p_value:.3g} ({m.b} passed with the skill only, "
                f"{m.c} without it only)"
            )
        yield [
            (f"    normalized gain {uplift.normalized_gain:.2f}; {tests}; verdict: ", None),
            (uplift.verdict, colour),
        ]
    moved = comparison.moved_most()
    if moved:
        shown = "; ".join(
            f"{m.scenario} {m.name} {m.without_rate:.0%} -> {m.with_rate:.0%}" for m in moved
        )
        yield [(f"    moved most: {shown}", None)]
    for name, why in comparison.left_out:
        yield [(f"    left out: {name} ({why})", "yellow")]


def _continued(first: list[Segment], text: str, indent: str) -> Iterator[list[Segment]]:
    """``first`` followed by ``text``'s first line, then each further line of ``text`` on a
    line of its own with the same ``indent`` as ``first``, so that a reason of several lines
    stays inside its scenario's block (a line of its own left empty would end the block)."""
    head, *rest = visible_lines(text)
    yield [*first[:-1], (first[-1][0] + head, first[-1][1])]
    for line in rest:
        yield [(f"{indent}{line}", None)]


def _error_lines(error: str) -> Iterator[list[Segment]]:
    """``ERROR: <text>``, a text of several lines kept inside the scenario's block."""
    return _continued([("    ", None), ("ERROR", "red"), (": ", None)], error, "    ")


def _activation_line(result: ScenarioResult) -> str | None:
    """Whether the agent loaded the skill, over the trials, where its events could tell."""
    own = scenario_activation(result)
    baseline = None if result.baseline is None else scenario_activation(result.baseline)
    if own is None and baseline is None:
        return None
    text = f"  Skill {own.text if own is not None else 'unknown'}"
    if baseline is not None and result.baseline is not None:
        text += f"; baseline arm {result.baseline.arm}: {baseline.text}"
    return text


def _scenario_lines(result: ScenarioResult) -> Iterator[list[Segment]]:
    yield [(_header(result), None)]
    if result.criteria is None:  # errored: no criterion, no score, no statistics
        yield from _error_lines(result.error or "no result")
        for extra in (_engine_line(result), _cache_line(result)):
            if extra is not None:
                yield [(extra, None)]
        yield []
        return
    for c in result.criteria:
        if c.passed:
            yield [
                ("    ", None),
                ("✓", "green"),
                (f" {c.name} ({c.score}/{c.max_score}){_votes(c)}", None),
            ]
        else:
            reason = f" — {c.reason}" if c.reason else ""
            line: list[Segment] = [
                ("    ", None),
                ("✗", "red"),
                (f" {c.name} ({c.score}/{c.max_score}){_votes(c)}", None),
            ]
            yield from _continued(line, reason, "    ")
    yield _score_line(result)
    yield from _baseline_lines(result)
    extras = (
        _activation_line(result),
        _trials_line(result),
        _engine_line(result),
        _cache_line(result),
    )
    for extra in extras:
        if extra is not None:
            yield [(extra, None)]
    yield from pairwise_lines(scenario_pairwise(result), "    ")
    if result.error is not None:  # some trials errored: scored, and an error all the same
        yield from _error_lines(result.error)
    yield []


def _calls_text(role: str, calls: CallStats) -> str:
    text = f"{role} {calls.calls} call{'s' if calls.calls != 1 else ''}"
    if calls.input_tokens is not None or calls.output_tokens is not None:
        text += f", {calls.input_tokens or 0:,} in / {calls.output_tokens or 0:,} out tokens"
    text += f", {calls.seconds:.1f} s"
    if calls.cached:
        text += f" (+{calls.cached} from the cache)"
    return text


def usage_line(usage: Usage) -> str | None:
    """The skill's model usage: calls, tokens, seconds, cost, cache hits."""
    if usage.agent.empty and usage.judge.empty:
        return None
    line = f"  Usage: {_calls_text('agent', usage.agent)}; {_calls_text('judge', usage.judge)}"
    cost = [c for c in (usage.agent.cost_usd, usage.judge.cost_usd) if c is not None]
    if cost:
        line += f"; cost ${sum(cost):.4f}"
    return line


def _shown(path: Path, rootdir: Path | None) -> str:
    """A path under the rootdir relative to it, as pytest shows paths."""
    if rootdir is not None and path.is_absolute():
        with contextlib.suppress(ValueError):
            return path.relative_to(rootdir).as_posix()
    return str(path)


def _safe(line: Sequence[Segment]) -> list[Segment]:
    """``line`` safe to print as one line: a segment's own line breaks (a scenario's name or
    description, a criterion's name) are shown, never obeyed; texts of several lines (reasons,
    errors) were split into lines of their own before (:func:`_continued`)."""
    return [(one_line(text), colour) for text, colour in line]


def skill_lines(
    summary: SkillSummary,
    threshold: int,
    rootdir: Path | None = None,
    *,
    uplift_target: float = DEFAULT_TARGET,
) -> Iterator[list[Segment]]:
    """One skill's block: header, scenarios, and the overall line; safe to print.
    ``uplift_target``: the difference whose needed scenarios the uplift block states."""
    for line in _skill_lines(summary, threshold, rootdir, uplift_target):
        yield _safe(line)


def _skill_lines(
    summary: SkillSummary, threshold: int, rootdir: Path | None, uplift_target: float
) -> Iterator[list[Segment]]:
    yield [(summary.display, None)]
    for result in summary.results:
        yield from _scenario_lines(result)
    if summary.complete:
        yield [
            (f"  Overall: {summary.overall:.0f}% ", None),
            _label(summary.passed),
            (f" (threshold: {threshold}%)", None),
        ]
        if summary.with_trials and summary.interval is not None:
            low, high = summary.interval
            note = (
                f": the threshold {threshold}% lies inside it, more trials would settle the gate"
                if summary.straddles
                else ""
            )
            yield [
                (
                    f"  95% CI of the overall: {low:.1f}-{high:.1f}%{note}",
                    "yellow" if summary.straddles else None,
                )
            ]
    else:
        yield [
            (
                f"  Overall: {summary.overall:.0f}% (partial run: {len(summary.results)} of "
                f"{summary.total_scenarios} scenarios; threshold {threshold}% not enforced)",
                None,
            )
        ]
    saved = savings_text(summary.results)
    if saved is not None:
        yield [(f"  Trials auto: {saved}", None)]
    if summary.comparison is not None:
        yield from uplift_lines(summary.comparison)
        power = power_text(summary.comparison.power(uplift_target))
        if power is not None:
            yield [(f"    Power: {power}", None)]
    skill_figures = skill_pairwise(summary.results)
    yield from pairwise_lines(skill_figures, "  ")
    calls = None if skill_figures is None else calls_summary(skill_figures)
    if calls is not None:
        yield [(f"    {calls}", None)]
    if summary.changes is not None:
        from pytest_openkata.providers.reporters.changes import changes_lines

        yield from changes_lines(summary.changes)
    if summary.compare_error is not None:
        yield [(f"  Not compared: --eval-compare: {summary.compare_error}", "red")]
    for drift in summary.drift:
        refused = drift.refusal()
        for line in drift.lines():
            yield [(f"  {line}", "red" if refused is not None else "yellow")]
        if refused is not None:
            yield [(f"  Not compared: {refused}", "red")]
    usage = usage_line(summary.usage)
    if usage is not None:
        yield [(usage, None)]
    judge_errors = sum(result.judge_errors for result in summary.results)
    if judge_errors:
        yield [
            (
                f"  Judge errors: {judge_errors} (counted as scenario errors, not failed "
                "criteria; pytest --lf asks the judge again, agent answers come from the cache)",
                "red",
            )
        ]
    rates = error_rates(summary.results)
    if rates:
        yield [(f"  Errors by kind: {error_rates_text(rates)}", "red")]
    if summary.report_path is not None:
        yield [(f"  Report: {_shown(summary.report_path, rootdir)}", None)]
    if summary.report_held is not None:
        yield [(f"  Report not published: {summary.report_held}", "yellow")]
    if summary.report_error is not None:
        yield [(f"  Report not written: {summary.report_error}", "red")]


class TerminalReporter:
    """Each skill's block of lines, written to the run's terminal output, one write per skill
    (a large suite has thousands of segments)."""

    name = TERMINAL_REPORTER

    def report(self, run: Run) -> ReportOutcome | None:
        if run.terminal is None:
            return None
        if run.rejudged_from is not None:
            from pytest_openkata.core.recorded import rejudged_text

            run.terminal.write_lines([_safe([(rejudged_text(run.rejudged_from), "yellow")])])
        for summary in run.summaries:
            lines = skill_lines(
                summary,
                run.settings.threshold,
                run.rootdir,
                uplift_target=run.settings.uplift_target,
            )
            run.terminal.write_lines(list(lines))
        if run.errors:
            run.terminal.write_lines(
                [_safe([(f"Not written: {error}", "red")]) for error in run.errors]
            )
        if run.written:
            run.terminal.write_lines(
                [
                    _safe([(f"{what}: {_shown(path, run.rootdir)}", None)])
                    for what, path in run.written.items()
                ]
            )
        if run.removed:
            run.terminal.write_lines(
                [_safe([(f"{REMOVED}: {_shown(path, run.rootdir)}", None)]) for path in run.removed]
            )
        return None


if TYPE_CHECKING:  # the protocol this provider implements, checked by mypy
    from pytest_openkata.core.reporting import Reporter

    _implements: type[Reporter] = TerminalReporter
