"""The Markdown report (``--eval-markdown PATH``) and the GitHub Actions step summary.

Both are rendered from the run as its log holds it
(:attr:`~pytest_openkata.core.reporting.Run.logged`), so a report rendered during the run and
one rendered from the log afterwards are the same bytes. Of its own the document holds no
machine path, no secret (they were masked before the log was made), and nothing that changes
between two runs with the same outcome: no clock time, no durations, no call counts; what the
agent wrote (its output, its tool calls) is shown as it wrote it. It is made of sections,
overviews first and details last:

- per skill: a heading with its overall percentage, the threshold and PASS, FAIL or partial; a
  table with one row per scenario (its percentage, a bar of ten cells, the baseline arm's
  percentage when there is one, the failed criteria with their reasons); the errors; the
  uplift against the baseline arm; the judge's pairwise comparison of the two arms
  (``--eval-judge-pairwise``); the comparison with an earlier run;
- the trigger evals, and the judge's agreement the run measured (``agreement_with``): a row
  per criterion with its κ and interval, and the gate;
- then, per skill and scenario, a ``<details>`` block with every criterion's reason, the end of
  each trial's agent output and the files it changed.

Text from scenarios, criteria, the agent and the judge is escaped wherever it goes: ``|`` and
newlines cannot break a table row, ``<`` and ``&`` cannot open HTML, and Markdown's
punctuation cannot start emphasis or links. The agent's output goes into a fenced block whose
fence is longer than any run of backticks in it.

When ``GITHUB_STEP_SUMMARY`` names a file, the same document is appended to it, in one write,
as GitHub asks. GitHub refuses a step summary above 1 MiB, so what is appended is cut to stay
under :data:`STEP_SUMMARY_LIMIT` with what the file already holds: later sections are dropped
whole (a table keeps its header and loses its last rows), and a note says that it was cut and
where the full report is. The ``--eval-markdown`` file is never cut.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_openkata.contracts.results import CriterionResult, ScenarioResult, TrialResult, Turn
from pytest_openkata.contracts.transcripts import Transcript, bounded
from pytest_openkata.core.activation import ActivationRate, scenario_activation
from pytest_openkata.core.auto_trials import savings_text
from pytest_openkata.core.compare import SkillComparison
from pytest_openkata.core.error_rates import error_rates, error_rates_text
from pytest_openkata.core.excerpts import LAST_TOOL_CALLS
from pytest_openkata.core.pairwise import (
    noise_summary,
    pairwise_summary,
    scenario_pairwise,
    skill_pairwise,
)
from pytest_openkata.core.power import power_text, uplift_target
from pytest_openkata.core.recorded import rejudged_text
from pytest_openkata.core.regression import SkillChanges
from pytest_openkata.core.reporting import ReportOutcome, Run
from pytest_openkata.core.runlog import LoggedRun, log_folder, log_name, skill_summaries
from pytest_openkata.core.scoring import catalogue_colour, percent_against
from pytest_openkata.core.spending import budget_note
from pytest_openkata.core.summary import SkillSummary
from pytest_openkata.core.triggers import metrics_by_skill, metrics_line, recorded_outcomes
from pytest_openkata.infra.atomic import write_new_report
from pytest_openkata.infra.text import plural, signed_points

__all__ = [
    "STEP_SUMMARY_ENV",
    "STEP_SUMMARY_LIMIT",
    "MarkdownReporter",
    "Section",
    "append_step_summary",
    "cut_to",
    "escape",
    "render_markdown",
    "score_bar",
    "sections",
]

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
STEP_SUMMARY_LIMIT = 1_000_000
"""The most bytes a step summary file may hold once ours is appended: GitHub's limit is
1 MiB (1,048,576 bytes); this leaves room for what other steps' tools add."""

BAR_CELLS = 10
REASON_CHARS = 300  # a failed criterion's reason in the overview table; details have it all
OUTPUT_TAIL_CHARS = 2000  # the end of a trial's agent output shown in its details

_COLOUR_MARK = {"green": "🟢", "yellow": "🟡", "red": "🔴"}
# What can start emphasis, code, a link, a strikethrough, a table cell, GitHub's math, or end a
# heading; the characters that only matter at a line's start are never there (see escape).
_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_\[\]|~#$])")
_NEWLINES = re.compile(r"\r\n|\r|\n")
# GitHub makes a link of a bare URL or www address it finds in text (GFM's autolink extension):
# a model's text could offer a link its reader did not ask for. An escaped slash or dot shows
# as itself and breaks the match. (An e-mail address is still linked, as a mailto: link.)
_AUTOLINKED = re.compile(r"(?<=:)/(?=/)|(?i:(?<=www))\.")


# --- escaping ------------------------------------------------------------------------------


def escape(text: str) -> str:
    """``text`` as literal inline Markdown, safe in a table cell and a list item: HTML's
    ``&``, ``<`` and ``>`` become entities, Markdown's punctuation is backslash-escaped (GFM
    splits table cells on unescaped ``|`` only), so are the ``/`` of ``://`` and the ``.`` of
    ``www.`` (GitHub would link a bare address), and line breaks become ``<br>``. Escaped
    text is never put at a line's start, where ``-``, ``+``, ``>`` or ``1.`` would begin a
    block, so those are left as they are."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MARKDOWN_PUNCTUATION.sub(r"\\\1", text)
    text = _AUTOLINKED.sub(r"\\\g<0>", text)
    return _NEWLINES.sub("<br>", text)


def _html(text: str) -> str:
    """``text`` inside an HTML element (a ``<summary>``), on one line."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _NEWLINES.sub(" ", text)


def _shortened(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _fenced(text: str, info: str = "text") -> str:
    """A fenced code block holding ``text`` literally: its fence is longer than any run of
    backticks in it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") else text + "\n"
    return f"{fence}{info}\n{body}{fence}\n"


# --- figures -------------------------------------------------------------------------------


def _percent(value: float, meets: float) -> str:
    """A percentage with no decimals when whole, else one, more where rounding would cross
    ``meets`` (99.96 is not 100%)."""
    return percent_against(value, meets, min_digits=0 if value == int(value) else 1)


def score_bar(value: float) -> str:
    """A bar of :data:`BAR_CELLS` cells, one filled per whole tenth of ``value`` (a
    percentage): only 100 % fills it."""
    filled = min(BAR_CELLS, max(0, int(round(value, 6) * BAR_CELLS // 100)))
    return "█" * filled + "░" * (BAR_CELLS - filled)


# --- sections ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Section:
    """A piece of the document, ending with a blank line. ``head`` is how many of its first
    lines a cut must keep for the rest to mean anything (a table's title, header and
    delimiter); a section of ``head`` 0 is dropped whole or kept whole."""

    text: str
    head: int = 0


def _run_section(run: LoggedRun, summaries: Sequence[SkillSummary]) -> Section:
    passed = sum(1 for s in summaries if s.complete and s.passed)
    failed = sum(1 for s in summaries if s.complete and not s.passed)
    partial = sum(1 for s in summaries if not s.complete)
    counts = [f"{passed} passed", f"{failed} failed"] + ([f"{partial} partial"] if partial else [])
    errored = sum(1 for s in summaries for r in s.results if r.error is not None)
    if errored:
        counts.append(f"{plural(errored, 'scenario')} errored")
    lines = [f"# openkata eval: {plural(len(summaries), 'skill')}, {', '.join(counts)}", ""]
    settings = run.info.settings
    described = _settings_line(settings, run.info.threshold)
    if described:
        lines += [described, ""]
    budget = budget_note(run.extras)
    if run.info.manifest is not None:
        shown = "; ".join(f"{label} {escape(value)}" for label, value in run.info.manifest.rows())
        lines += [f"Manifest: {shown}.", ""]
    if not run.info.complete and not (budget and budget[1]):
        lines += ["**This run did not finish:** only the scenarios that ran are shown.", ""]
    if run.info.rejudged_from is not None:
        lines += [f"**{escape(rejudged_text(run.info.rejudged_from))}.**", ""]
    if budget:
        lines += [escape(budget[0]) + ("; no threshold was enforced." if budget[1] else ""), ""]
    return Section("\n".join(lines) + "\n")


def _drift_section(summary: SkillSummary) -> Section:
    """What drifted between the runs or arms the skill was compared across."""
    lines = [f"- {escape(line)}" for drift in summary.drift for line in drift.lines()]
    return Section("**Drift**\n\n" + "\n".join(lines) + "\n\n")


def _settings_line(settings: Mapping[str, Any], threshold: int) -> str:
    parts = []
    if settings.get("model"):
        parts.append(
            f"agent {escape(str(settings.get('agent', '')))} {escape(str(settings['model']))}"
        )
    if settings.get("judge_model"):
        parts.append(
            f"judge {escape(str(settings.get('judge', '')))} {escape(str(settings['judge_model']))}"
        )
    trials, votes = settings.get("trials"), settings.get("judge_votes")
    if isinstance(trials, int) and isinstance(votes, int):
        parts.append(f"{plural(trials, 'trial')}, {plural(votes, 'judge vote')}")
    elif trials == "auto" and isinstance(votes, int):
        most = settings.get("trials_max")
        limit = f" (at most {most})" if isinstance(most, int) else ""
        parts.append(f"trials auto{limit}, {plural(votes, 'judge vote')}")
    parts.append(f"threshold {threshold}%")
    if settings.get("variant"):
        parts.append(f"variant {escape(str(settings['variant']))}")
    if settings.get("baseline"):
        parts.append(f"baseline {escape(str(settings['baseline']))}")
    return "Run with " + "; ".join(parts) + "."


def _skill_heading(summary: SkillSummary, threshold: int) -> str:
    name = escape(summary.display)
    overall = _percent(summary.overall, threshold)
    if not summary.complete:
        return (
            f"## ◐ {name}: {overall} partial run ({len(summary.results)} of "
            f"{summary.total_scenarios} scenarios; threshold {threshold}% not enforced)"
        )
    verdict = "✅ " if summary.passed else "❌ "
    word = "PASS" if summary.passed else "FAIL"
    return f"## {verdict}{name}: {overall} {word} (threshold {threshold}%)"


def _skill_head_section(summary: SkillSummary, threshold: int) -> Section:
    results = summary.results
    errored = sum(1 for r in results if r.error is not None)
    passed = sum(1 for r in results if r.passed and r.error is None)
    failed = len(results) - passed - errored
    counts = [f"{passed} passed", f"{failed} failed"] + ([f"{errored} errored"] if errored else [])
    lines = [_skill_heading(summary, threshold), ""]
    lines += [f"{plural(len(results), 'scenario')}: {', '.join(counts)}.", ""]
    if summary.with_trials and summary.interval is not None:
        low, high = summary.interval
        note = (
            f"; the threshold {threshold}% lies inside it, more trials would settle the gate"
            if summary.straddles
            else ""
        )
        lines += [f"95% CI of the overall: {low:.1f}–{high:.1f}%{note}.", ""]
    saved = savings_text(results)
    if saved is not None:
        lines += [f"Trials auto: {escape(saved)}.", ""]
    rates = error_rates(results)
    if rates:
        lines += [f"Errors by kind: {escape(error_rates_text(rates))}.", ""]
    return Section("\n".join(lines) + "\n")


def _failed_cell(result: ScenarioResult) -> str:
    if result.criteria is None:
        return f"**error**: {escape(_shortened(result.error or 'no result', REASON_CHARS))}"
    failed = [c for c in result.criteria if not c.passed]
    cells = [
        f"**{escape(c.name)}** ({c.score}/{c.max_score})"
        + (f": {escape(_shortened(c.reason, REASON_CHARS))}" if c.reason else "")
        for c in failed
    ]
    if result.error is not None:
        cells.append(f"**error**: {escape(_shortened(result.error, REASON_CHARS))}")
    return "<br>".join(cells)


def _score_cells(result: ScenarioResult) -> tuple[str, str]:
    if result.criteria is None:
        return "⚠️ error", ""
    mark = _COLOUR_MARK[catalogue_colour(result.percentage)]
    warning = " ⚠️" if result.error is not None else ""
    return f"{mark} {_percent(result.percentage, 100)}{warning}", score_bar(result.percentage)


def _baseline_cell(result: ScenarioResult) -> str:
    baseline = result.baseline
    if baseline is None:
        return "—"
    if baseline.criteria is None:
        return "⚠️ error"
    return _percent(baseline.percentage, 100)


def _table_section(summary: SkillSummary) -> Section:
    arm = summary.comparison.arm if summary.comparison is not None else None
    header = [
        "Scenario",
        "Score",
        "",
        *([escape(arm)] if arm is not None else []),
        "Failed criteria",
    ]
    align = ["---", "---:", "---", *(["---:"] if arm is not None else []), "---"]
    lines = [_row(header), _row(align)]
    for result in summary.results:
        score, bar = _score_cells(result)
        baseline = [_baseline_cell(result)] if arm is not None else []
        lines.append(_row([escape(result.name), score, bar, *baseline, _failed_cell(result)]))
    return Section("\n".join(lines) + "\n\n", head=2)


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _errors_section(summary: SkillSummary) -> Section | None:
    lines = []
    for result in summary.results:
        if result.error is not None:
            lines.append(f"- {escape(result.name)}: {escape(result.error)}")
        baseline = result.baseline
        if baseline is not None and baseline.error is not None:
            lines.append(
                f"- {escape(result.name)} (baseline {escape(baseline.arm)}): "
                f"{escape(baseline.error)}"
            )
    if not lines:
        return None
    return Section("\n".join(["**Errors**", "", *lines]) + "\n\n")


def _uplift_section(comparison: SkillComparison, target: float) -> Section:
    arm = escape(comparison.arm)
    uplift = comparison.uplift
    if uplift is None:
        lines = [f"**Uplift against {arm}:** no scenario was scored in both arms."]
    else:
        low, high = uplift.ci95
        tests = f"p = {uplift.p_value:.3g} ({escape(uplift.test)})"
        if uplift.mcnemar is not None:
            m = uplift.mcnemar
            tests += (
                f"; criteria: McNemar p = {m.p_value:.3g} ({m.b} passed with the skill only, "
                f"{m.c} without it only)"
            )
        lines = [
            f"**Uplift against {arm}** over {plural(uplift.scenarios, 'scenario')}: "
            f"with the skill {uplift.with_mean:.1f}%, {arm} {uplift.without_mean:.1f}%; "
            f"difference {signed_points(uplift.difference)} points (95% CI {signed_points(low)} to "
            f"{signed_points(high)}); normalized gain {uplift.normalized_gain:.2f}; {tests}; "
            f"verdict: **{escape(uplift.verdict)}**"
        ]
    power = power_text(comparison.power(target))
    if power is not None:
        lines += ["", f"Power: {escape(power)}."]
    moved = "; ".join(
        f"{escape(m.scenario)} {escape(m.name)} {m.without_rate:.0%} → {m.with_rate:.0%}"
        for m in comparison.moved_most()
    )
    items = [f"- moved most: {moved}"] if moved else []
    items += [f"- left out: {escape(name)} ({escape(why)})" for name, why in comparison.left_out]
    if items:
        lines += ["", *items]
    return Section("\n".join(lines) + "\n\n")


def _pairwise_section(summary: SkillSummary) -> Section | None:
    """The judge's side-by-side comparison with the baseline arm: the skill's figures, then
    each scenario's with the criteria the order swayed and the comparisons that errored."""
    total = skill_pairwise(summary.results)
    if total is None:
        return None
    lines = [f"**Pairwise against {escape(total.arm)}:** {escape(pairwise_summary(total))}", ""]
    for result in summary.results:
        figures = scenario_pairwise(result)
        if figures is None:
            continue
        lines.append(f"- {escape(result.name)}: {escape(pairwise_summary(figures))}")
        swayed = noise_summary(figures)
        if swayed is not None:
            lines.append(f"  - swayed by the order: {escape(swayed)}")
        lines += [f"  - error: {escape(error)}" for error in figures.errors]
    return Section("\n".join(lines) + "\n\n")


def _optional_percent(value: float | None) -> str:
    return "—" if value is None else _percent(value, 100)


def _changes_section(changes: SkillChanges) -> Section:
    tiers: dict[str, int] = {}
    for scenario in changes.scenarios:
        tiers[scenario.tier] = tiers.get(scenario.tier, 0) + 1
    counted = ", ".join(f"{count} {escape(tier)}" for tier, count in sorted(tiers.items()))
    lines = [
        f"**Compared with the earlier run {escape(changes.baseline)}** (tolerance "
        f"{changes.tolerance:g} points): {counted or 'no scenario'}",
        "",
        _row(["Scenario", "Tier", "Before", "After", "Change", "Flipped criteria"]),
        _row(["---", "---", "---:", "---:", "---:", "---"]),
    ]
    for scenario in changes.scenarios:
        tier = escape(scenario.tier)
        if scenario.reason:
            tier += f" ({escape(scenario.reason)})"
        change = "—" if scenario.change is None else signed_points(scenario.change)
        if scenario.interval is not None:
            change += (
                f" ({signed_points(scenario.interval[0])} to {signed_points(scenario.interval[1])})"
            )
        flips = "<br>".join(
            f"{escape(c.name)} {c.flip}" for c in scenario.criteria if c.flip is not None
        )
        lines.append(
            _row(
                [
                    escape(scenario.name),
                    tier,
                    _optional_percent(scenario.before),
                    _optional_percent(scenario.after),
                    change,
                    flips,
                ]
            )
        )
    return Section("\n".join(lines) + "\n\n", head=4)


# --- details -------------------------------------------------------------------------------


def _criterion_item(criterion: CriterionResult) -> str:
    mark = "✓" if criterion.passed else "✗"
    votes = ""
    if criterion.votes is not None:
        votes = f" [{criterion.votes[0]}/{criterion.votes[1]} passed]"
    kind = " (check)" if criterion.kind == "check" else ""
    reason = f": {escape(criterion.reason)}" if criterion.reason else ""
    return (
        f"- {mark} {escape(criterion.name)}{kind} ({criterion.score}/{criterion.max_score})"
        f"{votes}{reason}"
    )


def _output_tail(output: str) -> tuple[str, bool]:
    """The end of an agent's output, from a line's start where it is cut, and whether it
    was cut."""
    if len(output) <= OUTPUT_TAIL_CHARS:
        return output, False
    tail = output[-OUTPUT_TAIL_CHARS:]
    newline = tail.find("\n")
    if 0 <= newline < len(tail) - 1:
        tail = tail[newline + 1 :]
    return tail, True


def _trial_lines(
    trial: TrialResult, arm: str, several: bool, shown_error: str | None
) -> Iterator[str]:
    """A trial's error (unless it is ``shown_error``, already shown), the end of its agent's
    output and the files it changed."""
    where = ", ".join(
        part
        for part in (
            f"trial {trial.index}" if several else "",
            f"baseline arm {arm}" if arm else "",
        )
        if part
    )
    which = f" ({escape(where)})" if where else ""
    if trial.error is not None and trial.error != shown_error:
        yield f"Error{which}: {escape(trial.error)}"
        yield ""
    trace = trial.trace
    if trace is not None and trace.turns:
        yield from _conversation_lines(trace.turns, which)
    output = trace.output if trace is not None and trace.output else trial.agent_output or ""
    if output:
        tail, cut = _output_tail(output)
        said = f"the last {len(tail):,} of {len(output):,} characters" if cut else "all of it"
        yield f"Agent output{which}, {said}:"
        yield ""
        yield _fenced(tail).rstrip("\n")
        yield ""
    if trace is not None and trace.changes:
        changed = ", ".join(f"{escape(c.path)} ({escape(c.status)})" for c in trace.changes)
        yield f"Changed files{which}: {changed}"
        yield ""
    if trace is not None and trace.transcript is not None:
        yield from _transcript_lines(trace.transcript, which)


def _conversation_lines(turns: Sequence[Turn], which: str) -> Iterator[str]:
    """Each turn of a conversation with follow-ups: what the user said and the end of what
    the agent answered (the last answer is the agent output shown after it)."""
    yield f"Conversation{which}, {len(turns)} turns:"
    yield ""
    for number, turn in enumerate(turns, start=1):
        yield f"User (turn {number}):"
        yield ""
        yield _fenced(bounded(turn.user, OUTPUT_TAIL_CHARS)).rstrip("\n")
        yield ""
        if number < len(turns):
            yield f"Agent (turn {number}):"
            yield ""
            yield _fenced(_output_tail(turn.agent)[0]).rstrip("\n")
            yield ""


def _transcript_lines(transcript: Transcript, which: str) -> Iterator[str]:
    """What the agent did, in short: the skills it loaded and its last tool calls."""
    loaded = ", ".join(
        escape(load.name) + (f" (subagent {escape(load.subagent)})" if load.subagent else "")
        for load in transcript.skills_loaded
    )
    yield f"Skills loaded{which}: {loaded or 'none'}"
    yield ""
    calls = transcript.last_tool_calls(LAST_TOOL_CALLS)
    if calls:
        yield f"Last tool calls{which}, of {len(transcript.tool_calls)}:"
        yield ""
        shown = [f"{call.tool} {call.arguments} -> {call.status or '?'}" for call in calls]
        yield _fenced("\n".join(shown)).rstrip("\n")
        yield ""


def _details_summary(result: ScenarioResult) -> str:
    name = _html(result.name)
    if result.criteria is None:
        return f"{name}: error"
    failed = sum(1 for c in result.criteria if not c.passed)
    total = len(result.criteria)
    noun = "criterion" if total == 1 else "criteria"
    state = f"{failed} of {total} {noun} failed" if failed else "all met"
    error = "; errored" if result.error is not None else ""
    return f"{name}: {_percent(result.percentage, 100)} ({state}{error})"


def _activations(result: ScenarioResult) -> list[tuple[str, ActivationRate]]:
    """Each arm's activation rate, by arm name ("" for the run's own), where it is known."""
    arms = [result] if result.baseline is None else [result, result.baseline]
    rates = [(arm.arm, scenario_activation(arm)) for arm in arms]
    return [(name, rate) for name, rate in rates if rate is not None]


def _details_section(result: ScenarioResult) -> Section:
    lines = ["<details>", f"<summary>{_details_summary(result)}</summary>", ""]
    description = result.plain_description
    if description:
        lines += [f"Description: {escape(description)}", ""]
    if result.error is not None:
        lines += [f"**Error:** {escape(result.error)}", ""]
    for arm_name, rate in _activations(result):
        where = f" (baseline arm {escape(arm_name)})" if arm_name else ""
        lines += [f"Skill{where}: {escape(rate.text)}", ""]
    if result.criteria:
        lines += [_criterion_item(c) for c in result.criteria] + [""]
    baseline = result.baseline
    arms = [result] if baseline is None else [result, baseline]
    several = any(len(arm.trials) > 1 for arm in arms)
    if baseline is not None and baseline.criteria:
        lines += [f"Criteria in the baseline arm {escape(baseline.arm)}:", ""]
        lines += [_criterion_item(c) for c in baseline.criteria] + [""]
    for arm in arms:
        shown = result.error if arm is result else None
        for trial in arm.trials:
            lines += _trial_lines(trial, arm.arm, several, shown)
    lines += _pairwise_lines(result)
    lines += ["</details>", ""]
    return Section("\n".join(lines) + "\n")


def _pairwise_lines(result: ScenarioResult) -> Iterator[str]:
    """Each pairwise verdict of the scenario's trials: which arm the judge found better with
    the skill's answer shown first, and with the baseline's shown first, and why."""
    for trial in result.trials:
        pairwise = trial.pairwise
        if pairwise is None or not pairwise.verdicts:
            continue
        yield f"Pairwise verdicts, trial {trial.index} (skill's answer first / baseline's first):"
        yield ""
        for v in pairwise.verdicts:
            flipped = "" if v.agrees else " (changed with the order)"
            yield (
                f"- {escape(v.name)}: {v.skill_first} / {v.baseline_first}{flipped}: "
                f"{escape(v.skill_first_reason)} / {escape(v.baseline_first_reason)}"
            )
        yield ""


def _triggers_section(run: LoggedRun) -> Section | None:
    """The trigger evals of the run, where it had any: each skill's line (queries passed,
    precision, recall and F1 with their intervals), then a table of the queries that failed
    the pass rule."""
    outcomes = recorded_outcomes(run.extras.get("trigger_query") or ())
    if not outcomes:
        return None
    lines = ["## Trigger evals", ""]
    for metrics in metrics_by_skill(outcomes):
        lines += [f"- {escape(metrics_line(metrics))}"]
    failed = [outcome for outcome in outcomes if not outcome.passed]
    if failed:
        lines += ["", "| query | should load | loaded | text |", "|---|---|---|---|"]
        for outcome in failed:
            should = "yes" if outcome.should_trigger else "no"
            loaded = f"{outcome.loads} of {len(outcome.activations)} runs"
            where = escape(f"{outcome.skill}: {outcome.name}")
            lines.append(f"| {where} | {should} | {loaded} | {escape(outcome.query)} |")
    return Section("\n".join(lines) + "\n\n")


def _kappa_cell(figures: Mapping[str, Any]) -> str:
    """κ and its interval as the agreement document holds them, or why it is undefined."""
    from pytest_openkata.core.agreement_view import stored_kappa_text

    return escape(stored_kappa_text(figures))


def _agreement_section(run: LoggedRun) -> Section | None:
    """The judge's agreement the run measured (``agreement_with``), where it did: the two
    sides, overall, a row per criterion, and the gate (see :mod:`..core.agreement_view`)."""
    records = run.extras.get("agreement") or ()
    document = records[0] if records else None
    if not isinstance(document, Mapping) or not isinstance(document.get("overall"), Mapping):
        return None
    overall = document["overall"]
    sides = f"{document.get('first', '?')} and {document.get('second', '?')}"
    lines = [
        "## Judge agreement",
        "",
        f"{escape(sides)}: {escape(str(overall.get('n', '?')))} paired verdicts, "
        f"κ {_kappa_cell(overall)}",
        "",
        "| criterion | n | agreement | κ \\[95% interval\\] | disagreements |",
        "|---|---|---|---|---|",
    ]
    criteria = document.get("criteria")
    for row in criteria if isinstance(criteria, list) else ():
        if not isinstance(row, Mapping):
            continue
        where = f"{row.get('skill_dir')}::{row.get('scenario')} [{row.get('criterion_index')}]"
        name = escape(f"{where} {row.get('criterion', '')}")
        raw = row.get("raw_agreement")
        agreement = f"{raw * 100:.0f}%" if isinstance(raw, int | float) else "?"
        disagreements = row.get("disagreements")
        count = len(disagreements) if isinstance(disagreements, list) else "?"
        cells = [name, escape(str(row.get("n", "?"))), agreement, _kappa_cell(row), str(count)]
        lines.append(_row(cells))
    gate = document.get("gate")
    if isinstance(gate, Mapping):
        below = gate.get("below")
        verdict = "passed" if gate.get("passed") else f"failed ({len(below or ())} below)"
        lines += [
            "",
            escape(f"Gate: κ at least {gate.get('min_kappa')} on every criterion: {verdict}"),
        ]
    return Section("\n".join(lines) + "\n\n", head=6)


# --- the document --------------------------------------------------------------------------


def sections(run: LoggedRun, summaries: Sequence[SkillSummary]) -> list[Section]:
    """The document's sections in order: the run, every skill's overview, then the details."""
    threshold = run.info.threshold
    found = [_run_section(run, summaries)]
    for summary in summaries:
        found += [_skill_head_section(summary, threshold), _table_section(summary)]
        errors = _errors_section(summary)
        if errors is not None:
            found.append(errors)
        if summary.comparison is not None:
            found.append(_uplift_section(summary.comparison, uplift_target(run.info.settings)))
        pairwise = _pairwise_section(summary)
        if pairwise is not None:
            found.append(pairwise)
        if summary.changes is not None:
            found.append(_changes_section(summary.changes))
        if summary.drift:
            found.append(_drift_section(summary))
    triggers = _triggers_section(run)
    if triggers is not None:
        found.append(triggers)
    agreement = _agreement_section(run)
    if agreement is not None:
        found.append(agreement)
    if any(summary.results for summary in summaries):
        found.append(Section("## Details\n\n"))
    for summary in summaries:
        found.append(Section(f"### {escape(summary.display)}\n\n"))
        found += [_details_section(result) for result in summary.results]
    return found


def _joined(parts: Sequence[Section]) -> str:
    return "".join(part.text for part in parts).rstrip("\n") + "\n"


def render_markdown(run: LoggedRun) -> str:
    """The whole Markdown report of a logged run, its skills scored as the run scored them."""
    return _joined(sections(run, skill_summaries(run)))


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def cut_note(full_report: str | None) -> str:
    """The note that ends a cut step summary, naming where the full report is."""
    where = (
        f"the full report is {escape(full_report)}"
        if full_report
        else "write the full report with --eval-markdown PATH"
    )
    return (
        "\n---\n\n**This summary was cut** to stay under GitHub's 1 MiB limit for a step "
        f"summary; {where}.\n"
    )


def cut_to(parts: Sequence[Section], budget: int, full_report: str | None) -> str:
    """The sections as one text of at most ``budget`` UTF-8 bytes: whole when they fit;
    else those that fit in order, the first that does not cut after a whole line (keeping its
    ``head``) or left out, the rest left out, and :func:`cut_note`. Empty when not even the
    note fits."""
    whole = _joined(parts)
    if _size(whole) <= budget:
        return whole
    note = cut_note(full_report)
    room = budget - _size(note)
    if room < 0:
        return ""
    kept: list[str] = []
    for part in parts:
        size = _size(part.text)
        if size <= room:
            kept.append(part.text)
            room -= size
            continue
        if part.head:
            lines = part.text.splitlines(keepends=True)
            prefix = []
            for line in lines:
                if _size(line) > room:
                    break
                prefix.append(line)
                room -= _size(line)
            if len(prefix) > part.head:
                kept.append("".join(prefix))
        break
    body = "".join(kept).rstrip("\n")
    return (body + "\n" if body else "") + note


def append_step_summary(
    path: Path,
    parts: Sequence[Section],
    full_report: str | None,
    limit: int = STEP_SUMMARY_LIMIT,
) -> None:
    """Append the sections to the step summary file at ``path`` in one write, cut so that the
    file holds at most ``limit`` bytes; a blank line separates them from what it holds."""
    with path.open("a+b") as handle:
        held = handle.seek(0, os.SEEK_END)
        separator = b""
        if held:
            handle.seek(held - 1)
            separator = b"\n" if handle.read(1) == b"\n" else b"\n\n"
        text = cut_to(parts, limit - held - len(separator), full_report)
        if text:
            handle.write(separator + text.encode("utf-8"))


# --- the reporter --------------------------------------------------------------------------


def _shown(path: Path, rootdir: Path) -> str:
    """A written file as a report may name it: relative to the rootdir, else its name."""
    absolute = path if path.is_absolute() else Path.cwd() / path
    try:
        return absolute.relative_to(rootdir).as_posix()
    except ValueError:
        return path.name


def _full_report(run: Run) -> str | None:
    """The fullest report of the run a step summary can point to: the Markdown report, the
    HTML report, or the run log, as the settings name them."""
    for target in (run.settings.markdown, run.settings.html):
        if target:
            return _shown(Path(target).expanduser(), run.rootdir)
    folder = log_folder(run.settings, run.rootdir)
    return None if folder is None else _shown(folder / log_name(run.finished_at), run.rootdir)


class MarkdownReporter:
    """Writes the Markdown report where ``--eval-markdown`` says, and appends the step summary
    where ``GITHUB_STEP_SUMMARY`` says (see the module docstring)."""

    name = "markdown"

    def report(self, run: Run) -> ReportOutcome | None:
        target = run.settings.markdown
        step_summary = os.environ.get(STEP_SUMMARY_ENV, "")
        if not target and not step_summary:
            return None
        parts = sections(run.logged, skill_summaries(run.logged))
        outcome = ReportOutcome()
        if target:
            path = Path(target).expanduser()
            removed: list[Path] = []
            try:
                written = write_new_report(path, _joined(parts), removed=removed)
                outcome += ReportOutcome(written={"Markdown report": written})
            except OSError as exc:
                problem = f"could not write the Markdown report {path}: {exc.strerror or exc}"
                outcome += ReportOutcome(errors=(problem,))
            outcome += ReportOutcome(removed=tuple(removed))
        if step_summary:
            try:
                append_step_summary(Path(step_summary), parts, _full_report(run))
            except OSError as exc:
                problem = (
                    f"could not append to the step summary {step_summary} "
                    f"({STEP_SUMMARY_ENV}): {exc.strerror or exc}"
                )
                outcome += ReportOutcome(errors=(problem,))
        return outcome


if TYPE_CHECKING:  # the protocol this provider implements, checked by mypy
    from pytest_openkata.core.reporting import Reporter

    _implements: type[Reporter] = MarkdownReporter
