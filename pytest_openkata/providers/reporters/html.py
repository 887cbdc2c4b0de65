"""The HTML report: a run as one self-contained page (``--eval-html PATH``, or afterwards
``python -m pytest_openkata html LOG [-o PATH]``).

The page is rendered from the run as its log holds it (:attr:`~pytest_openkata.core.reporting.
Run.logged` during a run, :func:`~pytest_openkata.core.runlog.read_run_log`
afterwards), so a page written live and one rendered from the log later are the same bytes.

It is made to be opened anywhere, from a CI artifact or a mail attachment, and to show an
agent's output, whatever that holds, as text:

- Nothing is fetched: the style and the script are inline, there are no fonts, images or
  links to other pages, and a Content-Security-Policy allows no source at all but inline
  style and the page's one script (named by its sha256), so that neither a mistake here nor
  anything in the data can make a request or run code.
- Every value goes through Jinja's autoescaping, and ``://`` in a value is written as
  ``&#58;//``: the page reads the same, and the file never holds a URL (a check as simple as
  ``grep https://`` holds for any run). Outputs are shown in ``<pre>`` as text.
- Without JavaScript everything is there (``<details>`` collapse the long parts); with it,
  filters (failed, errored, flaky, changed) and expand/collapse all.
- The same log gives the same bytes: the only time shown is the run's, and element ids are
  positions in the run.
"""

from __future__ import annotations

import argparse
import base64
import functools
import hashlib
import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_openkata import _version
from pytest_openkata.contracts.results import (
    CallStats,
    CriterionResult,
    ScenarioResult,
    TrialResult,
    Turn,
)
from pytest_openkata.contracts.transcripts import Step, Transcript
from pytest_openkata.core.activation import ActivationRate, scenario_activation
from pytest_openkata.core.auto_trials import savings_text
from pytest_openkata.core.compare import CriterionMove, SkillComparison
from pytest_openkata.core.error_rates import ErrorRate, error_rates
from pytest_openkata.core.pairwise import (
    PairwiseFigures,
    noise_summary,
    pairwise_summary,
    scenario_pairwise,
    skill_pairwise,
)
from pytest_openkata.core.power import DEFAULT_TARGET, power_text, uplift_target
from pytest_openkata.core.recorded import rejudged_text
from pytest_openkata.core.regression import UNCHANGED, ScenarioChange
from pytest_openkata.core.reporting import ReportOutcome, Run
from pytest_openkata.core.runlog import (
    LoggedRun,
    RunLogError,
    read_run_log,
    skill_summaries,
)
from pytest_openkata.core.scoring import catalogue_colour, percent_against
from pytest_openkata.core.spending import budget_note
from pytest_openkata.core.summary import SkillSummary, usage_of
from pytest_openkata.core.triggers import (
    QueryOutcome,
    metrics_by_skill,
    metrics_line,
    recorded_outcomes,
)
from pytest_openkata.infra.atomic import write_new_report
from pytest_openkata.infra.tempfiles import REMOVED
from pytest_openkata.infra.text import plural, signed_points

if TYPE_CHECKING:
    from jinja2 import Environment

__all__ = ["HtmlReporter", "main", "page_view", "render_html", "template_environment"]

_SEPARATORS = tuple(sep for sep in (os.sep, os.altsep) if sep)
_PAGE = "html_report.html.j2"
_STYLE = "html_report.css.j2"
_SCRIPT = "html_report.js.j2"

# What the filters select; a scenario carries the names of those it matches.
FAILED, ERRORED, FLAKY, CHANGED = "failed", "errored", "flaky", "changed"
FILTERS = (
    (FAILED, "Failed", "scenarios below 100 %, errored ones included"),
    (ERRORED, "Errored", "scenarios that errored in some trial or arm"),
    (FLAKY, "Flaky", "scenarios whose trials disagree on passing or on a criterion"),
    (CHANGED, "Changed", "scenarios that changed against the earlier run or the baseline arm"),
)

# The run settings a page names first, with their labels; others follow by name.
_SETTING_LABELS = {
    "agent": "agent backend",
    "model": "agent model",
    "model_label": "model label",
    "judge": "judge backend",
    "judge_model": "judge model",
    "trials": "trials",
    "judge_votes": "judge votes",
    "baseline": "baseline arm",
    "sandbox_agent": "sandbox agent",
    "sandbox_image": "sandbox image",
    "cache": "cache",
}


# --- what the page shows -----------------------------------------------------------------------


@dataclass(frozen=True)
class DiffLine:
    """One line of a unified diff and its kind: ``add``, ``del``, ``hunk``, ``meta``,
    ``note`` or ``context`` (the page colours them)."""

    kind: str
    text: str


@dataclass(frozen=True)
class FileView:
    path: str
    status: str
    lines: list[DiffLine]


@dataclass(frozen=True)
class CheckRun:
    """How a command check's command ended in one trial (from the checks grader's answers)."""

    name: str
    exit_code: int | None
    output: str
    timed_out: bool


@dataclass(frozen=True)
class VoteView:
    """One judge vote of a trial: its number, whether it came from the cache, and each
    criterion's verdict as (name, passed, reason)."""

    number: int
    cached: bool
    verdicts: list[tuple[str, bool, str]]


@dataclass(frozen=True)
class TrialView:
    """One trial with what it saw: the agent's output, what the judge read (when not the
    output), the workspace diff, the checks' commands, the judge's votes, and the answers of
    any other grader as JSON text."""

    trial: TrialResult
    output: str
    judged: str | None
    files: list[FileView]
    checks: dict[str, CheckRun]
    votes: list[VoteView]
    other_answers: list[tuple[str, str]]
    seconds: float | None  # None: the log kept no trace of the trial
    transcript: Transcript | None = None  # how the agent worked, where it said so
    turns: tuple[Turn, ...] = ()  # the conversation of a trial with follow-ups

    @staticmethod
    def loads_skill(step: Step) -> bool:
        """Whether a tool call loaded a skill (its skill tool, or a read of a SKILL.md)."""
        return step.kind == "tool_call" and (step.tool == "Skill" or "SKILL.md" in step.arguments)

    def unmatched_checks(self, criteria: Sequence[CriterionResult] | None) -> list[CheckRun]:
        """The command runs no criterion of ``criteria`` is named after."""
        names = {criterion.name for criterion in criteria or ()}
        return [run for name, run in self.checks.items() if name not in names]


@dataclass(frozen=True)
class ArmView:
    """One arm of a scenario (the run's own, or its baseline arm)."""

    result: ScenarioResult
    description: str
    colour: str
    trials: list[TrialView]
    flaky: bool
    # Whether the agent loaded the skill, over the trials (None: no trial could tell).
    activation: ActivationRate | None = None

    @property
    def single(self) -> TrialView | None:
        """The trial, when there is one only (its parts are shown in the scenario itself)."""
        return self.trials[0] if len(self.trials) == 1 else None

    @property
    def first_failed(self) -> int | None:
        """The number of the first trial that did not pass (the page unfolds that one)."""
        return next((v.trial.index for v in self.trials if not v.trial.passed), None)


@dataclass(frozen=True)
class ScenarioView:
    anchor: str
    own: ArmView
    baseline: ArmView | None
    change: ScenarioChange | None
    moves: list[CriterionMove]
    flags: list[str]
    # The judge's side-by-side comparison with the baseline arm (--eval-judge-pairwise).
    pairwise: PairwiseFigures | None = None

    @property
    def pairwise_trials(self) -> list[TrialResult]:
        """The own arm's trials that hold pairwise verdicts, for their table."""
        return [t for t in self.own.result.trials if t.pairwise and t.pairwise.verdicts]


@dataclass(frozen=True)
class UsageRow:
    role: str
    calls: CallStats


@dataclass(frozen=True)
class SkillView:
    anchor: str
    summary: SkillSummary
    status: str  # "pass", "fail" or "partial"
    overall: str
    scenarios: list[ScenarioView]
    usage: list[UsageRow]
    comparison: SkillComparison | None
    counts: dict[str, int] = field(default_factory=dict)
    # How often its attempts errored, by kind of failure ([] when none did).
    error_rates: list[ErrorRate] = field(default_factory=list)
    # The judge's side-by-side comparison with the baseline arm, over all its scenarios.
    pairwise: PairwiseFigures | None = None
    # What trials = auto saved (None when it did not run), and the uplift's power analysis.
    trials_saved: str | None = None
    power: str | None = None
    # What drifted between the runs or arms it was compared across, one line each.
    drift: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PageView:
    title: str
    finished_at: str
    complete: bool
    partial: bool
    threshold: int
    settings: list[tuple[str, str]]
    ran_with: str
    skills: list[SkillView]
    usage: list[UsageRow]
    filters: list[tuple[str, str, str, int]]
    total: int
    version: str
    # The run's trigger evals: each skill's metrics line, and the queries that failed the rule.
    trigger_lines: list[str] = field(default_factory=list)
    # What a re-judged run graded again ("" for a run of its own).
    rejudged: str = ""
    # What a run with a budget spent (core.spending), and whether the budget stopped it.
    budget: str = ""
    budget_reached: bool = False
    trigger_failures: list[QueryOutcome] = field(default_factory=list)
    # The judge's agreement the run measured (agreement_with), a line each ([] when it did not).
    agreement_lines: list[str] = field(default_factory=list)


# --- building it ---------------------------------------------------------------------------------


def diff_lines(diff: str) -> list[DiffLine]:
    """A unified diff's lines (each with its newline), with their kinds."""
    lines = []
    for line in diff.splitlines(keepends=True):
        if line.startswith(("+++ ", "--- ")):
            kind = "meta"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        elif line.startswith(" ") or line.strip() == "":
            kind = "context"
        else:
            kind = "note"  # "(binary file, ...)", "(the snapshot kept ...)"
        lines.append(DiffLine(kind, line if line.endswith("\n") else line + "\n"))
    return lines


def _json_text(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def _votes(answers: Sequence[Any]) -> list[VoteView] | None:
    """The judge's answers as votes; None when they are not in the judge's shape."""
    if not isinstance(answers, list):
        return None
    votes: list[VoteView] = []
    for answer in answers:
        if not isinstance(answer, Mapping) or not isinstance(answer.get("verdicts"), Mapping):
            return None
        number = answer.get("vote", len(votes) + 1)
        if not isinstance(number, int):
            return None
        verdicts = []
        for name, verdict in answer["verdicts"].items():
            if not isinstance(verdict, Mapping):
                return None
            verdicts.append((str(name), bool(verdict.get("pass")), str(verdict.get("reason", ""))))
        votes.append(VoteView(number, bool(answer.get("cached")), verdicts))
    return votes


def _checks(answers: Sequence[Any]) -> dict[str, CheckRun] | None:
    """The checks grader's answers by check name; None when they are not in its shape."""
    if not isinstance(answers, list):
        return None
    runs = {}
    for answer in answers:
        if not isinstance(answer, Mapping) or "check" not in answer:
            return None
        exit_code = answer.get("exit_code")
        name = str(answer["check"])
        runs[name] = CheckRun(
            name=name,
            exit_code=exit_code if isinstance(exit_code, int) else None,
            output=str(answer.get("output", "")),
            timed_out=bool(answer.get("timed_out")),
        )
    return runs


def _trial_view(trial: TrialResult) -> TrialView:
    trace = trial.trace
    answers = dict(trace.answers) if trace is not None else {}
    votes = _votes(answers["judge"]) if "judge" in answers else []
    checks = _checks(answers["checks"]) if "checks" in answers else {}
    # Other graders' answers, and the judge's or the checks' in a shape the page does not
    # know, are shown as JSON: nothing the log holds is left out.
    understood = {"judge": votes is not None, "checks": checks is not None}
    other = [
        (name, _json_text(value))
        for name, value in sorted(answers.items())
        if not understood.get(name, False)
    ]
    output = trace.output if trace is not None and trace.output else trial.agent_output or ""
    return TrialView(
        trial=trial,
        output=output,
        judged=trace.judged if trace is not None else None,
        files=[
            FileView(change.path, change.status, diff_lines(change.diff))
            for change in (trace.changes if trace is not None else ())
        ],
        checks=checks or {},
        votes=votes or [],
        other_answers=other,
        seconds=trace.seconds if trace is not None else None,
        transcript=trace.transcript if trace is not None else None,
        turns=trace.turns if trace is not None else (),
    )


def _flaky(trials: Sequence[TrialResult]) -> bool:
    """Whether the trials disagree on passing or on some criterion's verdict."""
    if len({trial.passed for trial in trials}) > 1:
        return True
    verdicts: dict[str, set[bool]] = {}
    for trial in trials:
        for criterion in trial.criteria or ():
            verdicts.setdefault(criterion.name, set()).add(criterion.passed)
    return any(len(seen) > 1 for seen in verdicts.values())


def _arm_view(result: ScenarioResult) -> ArmView:
    return ArmView(
        result=result,
        description=result.plain_description,
        colour=catalogue_colour(result.percentage),
        trials=[_trial_view(trial) for trial in result.trials],
        flaky=len(result.trials) > 1 and _flaky(result.trials),
        activation=scenario_activation(result),
    )


def _scenario_view(anchor: str, result: ScenarioResult, summary: SkillSummary) -> ScenarioView:
    own = _arm_view(result)
    baseline = None if result.baseline is None else _arm_view(result.baseline)
    change = None
    if summary.changes is not None:
        change = next((s for s in summary.changes.scenarios if s.name == result.name), None)
    moves = []
    if summary.comparison is not None:
        moves = [m for m in summary.comparison.criteria if m.scenario == result.name]
    flags = []
    if not result.passed:
        flags.append(FAILED)
    if result.error is not None or (baseline is not None and baseline.result.error is not None):
        flags.append(ERRORED)
    if own.flaky:
        flags.append(FLAKY)
    if (change is not None and change.tier != UNCHANGED) or any(m.change != 0 for m in moves):
        flags.append(CHANGED)
    return ScenarioView(anchor, own, baseline, change, moves, flags, scenario_pairwise(result))


def _overall(summary: SkillSummary, threshold: int) -> str:
    """The overall percentage with one decimal, or more where one would misstate the gate
    of a complete skill (a partial one has no gate)."""
    if not summary.complete:
        return f"{summary.overall:.1f}%"
    return percent_against(summary.overall, threshold, passed=summary.passed, min_digits=1)


def _usage_rows(results: Iterable[ScenarioResult]) -> list[UsageRow]:
    usage = usage_of(results)
    return [
        UsageRow(role, calls)
        for role, calls in (("agent", usage.agent), ("judge", usage.judge))
        if not calls.empty
    ]


def _skill_view(
    index: int, summary: SkillSummary, threshold: int, target: float = DEFAULT_TARGET
) -> SkillView:
    anchor = f"skill-{index}"
    scenarios = [
        _scenario_view(f"{anchor}-scenario-{number}", result, summary)
        for number, result in enumerate(summary.results, start=1)
    ]
    status = "partial" if not summary.complete else "pass" if summary.passed else "fail"
    counts = {name: sum(name in s.flags for s in scenarios) for name, _, _ in FILTERS}
    return SkillView(
        anchor=anchor,
        summary=summary,
        status=status,
        overall=_overall(summary, threshold),
        scenarios=scenarios,
        usage=_usage_rows(summary.results),
        comparison=summary.comparison,
        counts=counts,
        error_rates=error_rates(summary.results),
        pairwise=skill_pairwise(summary.results),
        trials_saved=savings_text(summary.results),
        power=None if summary.comparison is None else power_text(summary.comparison.power(target)),
        drift=[line for drift in summary.drift for line in drift.lines()],
    )


def _setting_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _settings(settings: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The run's settings as (label, value), the known ones first; empty values left out."""
    known = [key for key in _SETTING_LABELS if key in settings]
    others = sorted(key for key in settings if key not in _SETTING_LABELS)
    return [
        (_SETTING_LABELS.get(key, key), _setting_text(settings[key]))
        for key in (*known, *others)
        if settings[key] not in ("", None)
    ]


def _ran_with(settings: Mapping[str, Any]) -> str:
    """One line of what ran: the agent, the judge and the trials."""

    def who(backend: str, model: str) -> str:
        name = _setting_text(settings.get(backend, ""))
        detail = _setting_text(settings.get(model, ""))
        return f"{name} ({detail})" if name and detail else name or detail or "unknown"

    parts = [f"agent {who('agent', 'model')}", f"judge {who('judge', 'judge_model')}"]
    trials = settings.get("trials")
    if trials == "auto":
        most = settings.get("trials_max")
        parts.append("trials auto" + (f" (at most {most})" if isinstance(most, int) else ""))
    elif trials is not None:
        parts.append(f"{trials} trial{'s' if trials != 1 else ''}")
    votes = settings.get("judge_votes")
    if votes not in (None, 1):
        parts.append(f"{votes} judge votes")
    variant = settings.get("variant")  # the own arm's variant of a variants file
    if variant:
        parts.append(f"variant {variant}")
    baseline = settings.get("baseline")
    if baseline:
        parts.append(f"baseline arm {baseline}")
    return ", ".join(parts)


def _agreement_lines(run: LoggedRun) -> list[str]:
    """The lines of the judge agreement the run measured; its module loads only for a run that
    measured one."""
    records = run.extras.get("agreement") or ()
    if not records:
        return []
    from pytest_openkata.core.agreement_view import document_lines

    return document_lines(records[0])


def page_view(run: LoggedRun, *, source: str = "run log") -> PageView:
    """What the page of ``run`` shows; :class:`RunLogError` (naming ``source``) when the log's
    comparison records are not well formed."""
    summaries = skill_summaries(replace(run, source=source))
    info = run.info
    skills = [
        _skill_view(index, summary, info.threshold, uplift_target(info.settings))
        for index, summary in enumerate(summaries, start=1)
    ]
    shown = [summary.display for summary in summaries]
    names = ", ".join(shown) if len(shown) <= 3 else f"{len(shown)} skills"
    names = names or "no scenario ran"
    filters = [
        (name, label, title, sum(skill.counts[name] for skill in skills))
        for name, label, title in FILTERS
    ]
    outcomes = recorded_outcomes(run.extras.get("trigger_query") or ())
    budget = budget_note(run.extras)
    return PageView(
        title=f"openkata eval: {names}, {info.finished_at}",
        finished_at=info.finished_at,
        complete=info.complete,
        partial=not info.complete or any(not summary.complete for summary in summaries),
        threshold=info.threshold,
        settings=_settings(info.settings) + ([] if info.manifest is None else info.manifest.rows()),
        ran_with=_ran_with(info.settings),
        skills=skills,
        usage=_usage_rows(run.results),
        filters=filters,
        total=sum(len(skill.scenarios) for skill in skills),
        version=_version.__version__,
        trigger_lines=[metrics_line(metrics) for metrics in metrics_by_skill(outcomes)],
        trigger_failures=[outcome for outcome in outcomes if not outcome.passed],
        agreement_lines=_agreement_lines(run),
        rejudged="" if info.rejudged_from is None else rejudged_text(info.rejudged_from),
        budget="" if budget is None else budget[0],
        budget_reached=budget is not None and budget[1],
    )


# --- rendering ---------------------------------------------------------------------------------


def _finalize(value: Any) -> Any:
    """Every value the page shows, escaped, with ``://`` written as ``&#58;//`` so that the
    file holds no URL; None shows as nothing."""
    from markupsafe import Markup, escape

    if value is None:
        return Markup("")
    return Markup(str(escape(value)).replace("://", "&#58;//"))


def _percent(value: float, digits: int = 1) -> str:
    return f"{value:.{digits}f}%"


def _rate(value: float) -> str:
    return f"{value * 100:.0f}%"


def _count(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def _cost(value: float | None) -> str:
    return "not reported" if value is None else f"${value:.4f}"


@functools.cache
def template_environment(*packages: str) -> Environment:
    """The templates of the report, with its escaping (autoescape, ``://`` as ``&#58;//``,
    None as nothing) and filters; the templates of ``packages`` (their ``templates``
    folders) are found first, so that another page (the viewer's) is built of the report's
    parts and shows every value as the report does."""
    # jinja2 is imported here: every run loads the reporters, few write a page.
    from jinja2 import ChoiceLoader, Environment, PackageLoader, StrictUndefined

    loaders = [PackageLoader(package, "templates") for package in packages]
    environment = Environment(
        loader=ChoiceLoader([*loaders, PackageLoader("pytest_openkata.providers.reporters")]),
        autoescape=True,
        finalize=_finalize,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    environment.filters.update(
        percent=_percent, rate=_rate, points=signed_points, count=_count, cost=_cost, plural=plural
    )
    environment.filters.update(pairwise=pairwise_summary, swayed=noise_summary)
    return environment


def _sha256_source(text: str) -> str:
    """A Content-Security-Policy source naming an inline block by its digest."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def render_html(run: LoggedRun, *, source: str = "run log") -> str:
    """The page of a logged run (see the module docstring); :class:`RunLogError` for a log
    whose records the page cannot read."""
    from markupsafe import Markup

    environment = template_environment()
    style = environment.get_template(_STYLE).render()
    script = environment.get_template(_SCRIPT).render()
    policy = (
        "default-src 'none'; "
        # Inline style attributes draw the bars; a digest would forbid them.
        "style-src 'unsafe-inline'; "
        f"script-src {_sha256_source(script)}; "
        "base-uri 'none'; form-action 'none'"
    )
    return environment.get_template(_PAGE).render(
        page=page_view(run, source=source),
        style=Markup(style),
        script=Markup(script),
        policy=policy,
    )


# --- the reporter and the command ----------------------------------------------------------------


class HtmlReporter:
    """Writes the run's page where ``--eval-html`` says (relative to the current folder, as
    pytest's ``--junitxml``), never over another file, for partial runs too; records the path
    written on the run, or the reason it could not be on every skill's summary."""

    name = "html"

    def report(self, run: Run) -> ReportOutcome | None:
        target = run.settings.html
        if not target:
            return None
        path = Path(target).expanduser()
        removed: list[Path] = []
        try:
            if path.is_dir() or target.endswith(_SEPARATORS):
                raise IsADirectoryError(f"{target} is a folder, not a file name")
            text = render_html(run.logged, source="this run's log")
            written = write_new_report(path, text, removed=removed)
        except (OSError, RunLogError) as exc:
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            problem = f"could not write the HTML report {target} (--eval-html): {detail}"
            return ReportOutcome(errors=(problem,), removed=tuple(removed))
        return ReportOutcome(written={"HTML report": written}, removed=tuple(removed))


def main(argv: list[str]) -> int:
    """``python -m pytest_openkata html LOG [-o PATH]``: the page of a run log, written to
    PATH (default: LOG with the suffix ``.html``, beside it; ``-2`` and on when taken).
    Prints the path written and returns 0; 2 for a log that cannot be read or bad arguments
    (an output that is a folder among them), 1 when the page cannot be written."""
    parser = argparse.ArgumentParser(
        prog="python -m pytest_openkata html",
        description="Render the HTML report of a run from its run log.",
    )
    parser.add_argument("log", type=Path, help="a run log (.openkata/runs/*.jsonl)")
    parser.add_argument(
        "-o", "--output", type=Path, help="where to write the page (default: LOG.html)"
    )
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed why
        return 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 2
    log: Path = args.log
    try:
        text = render_html(read_run_log(log), source=str(log))
    except RunLogError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    output: Path = args.output or log.with_suffix(".html")
    if output.is_dir():
        print(f"error: {output} is a folder; give the page's file name with -o", file=sys.stderr)
        return 2
    removed: list[Path] = []
    try:
        written = write_new_report(output, text, removed=removed)
    except OSError as exc:
        print(f"error: cannot write {output}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    for leftover in removed:
        print(f"note: {REMOVED}: {leftover}", file=sys.stderr)
    print(written)
    return 0


if TYPE_CHECKING:  # the protocol this provider implements, checked by mypy
    from pytest_openkata.core.reporting import Reporter

    _implements: type[Reporter] = HtmlReporter
