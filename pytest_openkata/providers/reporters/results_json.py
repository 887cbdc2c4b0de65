"""The results JSON report: rendering, reading back, version lookup, paths and safe writing.

The layout follows the reference runner's report (spec section 10) so that its tooling,
``generate-versions`` in particular, reads our reports unchanged. A report is rendered from
the run's one representation of a result (:class:`~pytest_openkata.contracts.results.ScenarioResult`
in a :class:`~pytest_openkata.core.summary.SkillSummary`) straight into Go's JSON encoding;
reading a report back (:func:`parse_report`) validates it with pydantic at that boundary and
gives the same records.
"""

from __future__ import annotations

import itertools
import os
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from pytest_openkata.contracts.results import (
    CallStats,
    CriterionResult,
    ScenarioResult,
    TrialResult,
    TrialStats,
    TrialTrace,
    Usage,
)
from pytest_openkata.core.compare import CriterionMove, SkillComparison
from pytest_openkata.core.scenario import read_skill_version
from pytest_openkata.core.summary import SkillSummary, usage_of
from pytest_openkata.core.tile import TILE_FILE, is_tile_dir
from pytest_openkata.core.uplift import McNemar, Uplift
from pytest_openkata.infra import gojson
from pytest_openkata.infra.atomic import write_new_report
from pytest_openkata.infra.config import EvalSettings
from pytest_openkata.infra.text import plural
from pytest_openkata.providers.reporters import RunReport

__all__ = [
    "ReportConfig",
    "ResultsJsonReporter",
    "SkillReport",
    "SkillStats",
    "auto_report_path",
    "build_report",
    "output_report_path",
    "parse_report",
    "read_skill_version",
    "render_report",
    "report_path",
    "report_prefixes",
    "skill_report",
    "write_new_report",
]

_FILE_TIMESTAMP = "%Y-%m-%dT%H%M%S"
_RFC3339_SECONDS = "%Y-%m-%dT%H:%M:%SZ"


# --- what a report holds -----------------------------------------------------------------------


@dataclass(frozen=True)
class ReportConfig:
    backend: str
    agent_model: str
    judge_model: str
    model_label: str = ""
    judge_backend: str = ""  # written only when the judge uses another backend than the agent


@dataclass(frozen=True)
class SkillStats:
    """The interval of the overall percentage, when scenarios ran several trials."""

    ci95: tuple[float, float] | None
    straddles_threshold: bool


@dataclass(frozen=True)
class SkillReport:
    """One skill's results JSON: the header fields and the scenarios' results."""

    skill: str
    skill_version: str
    timestamp: str
    config: ReportConfig
    threshold: int
    scenarios: Sequence[ScenarioResult]
    overall_percentage: float
    passed: bool
    stats: SkillStats | None = None
    usage: Usage = field(default_factory=Usage)
    comparison: SkillComparison | None = None


def build_report(
    *,
    skill: str,
    skill_version: str,
    timestamp: datetime,
    config: ReportConfig,
    threshold: int,
    results: Sequence[ScenarioResult],
    overall: float,
    passed: bool,
    stats: SkillStats | None = None,
    comparison: SkillComparison | None = None,
) -> SkillReport:
    """Assemble a report; a naive ``timestamp`` is taken to be UTC. Its usage counts every
    model call, a baseline arm's included."""
    usage = usage_of(results)
    return SkillReport(
        skill=skill,
        skill_version=skill_version,
        timestamp=report_timestamp(timestamp),
        config=config,
        threshold=threshold,
        scenarios=list(results),
        overall_percentage=float(overall),
        passed=passed,
        stats=stats,
        usage=usage,
        comparison=comparison,
    )


def skill_report(summary: SkillSummary, settings: EvalSettings, now: datetime) -> SkillReport:
    """The results JSON of one skill's summary."""
    return build_report(
        skill=summary.name,
        skill_version=read_skill_version(summary.skill_dir),
        timestamp=now,
        config=ReportConfig(
            backend=settings.backend,
            agent_model=settings.model,
            judge_model=settings.judge_model,
            # The catalogue shows the label as the model's name: without one, the model.
            model_label=settings.model_label or settings.model,
            judge_backend=settings.judge_backend,
        ),
        threshold=settings.threshold,
        results=summary.results,
        overall=summary.overall,
        passed=summary.passed,
        stats=SkillStats(ci95=summary.interval, straddles_threshold=summary.straddles)
        if summary.with_trials
        else None,
        comparison=summary.comparison,
    )


def report_timestamp(moment: datetime) -> str:
    """The report's ``timestamp`` field: UTC, to the second (a naive time is taken as UTC)."""
    return _utc(moment).strftime(_RFC3339_SECONDS)


# --- rendering -----------------------------------------------------------------------------------


def render_report(report: SkillReport) -> str:
    """The report text, byte-compatible with the reference's output (Go's encoding: ``100``
    rather than ``100.0``, ``<>&`` escaped, two-space indentation, a final newline)."""
    return gojson.dumps(_report_dict(report))


def _report_dict(report: SkillReport) -> dict[str, Any]:
    data: dict[str, Any] = {
        "skill": report.skill,
        "skill_version": report.skill_version,
        "timestamp": report.timestamp,
        "config": _config_dict(report.config),
        "threshold": report.threshold,
        "scenarios": [_scenario_dict(s) for s in report.scenarios] or None,
        "overall_percentage": float(report.overall_percentage),
        "pass": report.passed,
    }
    # Keys after the reference's, each only when it says something.
    if report.stats is not None:
        data["stats"] = {
            "ci95": _interval(report.stats.ci95),
            "straddles_threshold": report.stats.straddles_threshold,
        }
    usage = _usage_dict(report.usage)
    if usage is not None:
        data["usage"] = usage
    if report.comparison is not None:
        data["uplift"] = _uplift_dict(report.comparison)
    return data


def _uplift_dict(comparison: SkillComparison) -> dict[str, Any]:
    data: dict[str, Any] = {"arm": comparison.arm}
    uplift = comparison.uplift
    if uplift is not None:
        data.update(
            {
                "with": float(uplift.with_mean),
                "without": float(uplift.without_mean),
                "difference": float(uplift.difference),
                "ci95": _interval(uplift.ci95),
                "normalized_gain": float(uplift.normalized_gain),
                "p_value": float(uplift.p_value),
                "test": uplift.test,
                "verdict": uplift.verdict,
                "scenarios": uplift.scenarios,
            }
        )
        if uplift.mcnemar is not None:
            data["mcnemar"] = {
                "passed_with_only": uplift.mcnemar.b,
                "passed_without_only": uplift.mcnemar.c,
                "p_value": float(uplift.mcnemar.p_value),
            }
    data["criteria"] = [
        {
            "scenario": move.scenario,
            "name": move.name,
            "with": float(move.with_rate),
            "without": float(move.without_rate),
        }
        for move in comparison.criteria
    ] or None
    if comparison.left_out:
        data["left_out"] = [{"scenario": name, "why": why} for name, why in comparison.left_out]
    return data


def _config_dict(config: ReportConfig) -> dict[str, Any]:
    data: dict[str, Any] = {
        "backend": config.backend,
        "agent_model": config.agent_model,
        "judge_model": config.judge_model,
    }
    if config.model_label:
        data["model_label"] = config.model_label
    if config.judge_backend and config.judge_backend != config.backend:
        data["judge_backend"] = config.judge_backend
    return data


def _scored_dict(result: ScenarioResult | TrialResult) -> dict[str, Any]:
    return {
        "criteria": [_criterion_dict(c) for c in result.criteria or ()] or None,
        "score": result.score,
        "max_score": result.max_score,
        "percentage": float(result.percentage),
        "pass": result.passed,
    }


def _scenario_dict(result: ScenarioResult) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": result.name,
        "description": result.description,
        **_scored_dict(result),
    }
    if result.error is not None:
        data["error"] = result.error
        if result.error_kind:
            data["error_kind"] = result.error_kind
    if result.agent_output is not None:
        data["agent_output"] = result.agent_output
    if result.judge_errors:
        data["judge_errors"] = result.judge_errors
    if result.stats is not None:
        stats = result.stats
        data["stats"] = {
            "trials": stats.trials,
            "mean": float(stats.mean),
            "stdev": float(stats.stdev),
            "ci95": _interval(stats.ci95),
            "passes": stats.passes,
            "pass_at_k": {str(k): float(v) for k, v in stats.pass_at_k.items()},
            "pass_hat_k": {str(k): float(v) for k, v in stats.pass_hat_k.items()},
        }
    if len(result.trials) > 1:
        data["trials"] = [_trial_dict(t) for t in result.trials]
    usage = _usage_dict(result.usage)
    if usage is not None:
        data["usage"] = usage
    if result.engine:  # run on an engine pool: which engine ran it
        data["engine"] = result.engine
    if result.baseline is not None:
        data["baseline"] = _baseline_dict(result.baseline)
    return data


def _baseline_dict(baseline: ScenarioResult) -> dict[str, Any]:
    """A scenario's baseline arm: its name and percentage first, then the rest of its result."""
    data: dict[str, Any] = {
        "arm": baseline.arm,
        "percentage": float(baseline.percentage),
        **_scored_dict(baseline),
    }
    return _with_error_and_usage(data, baseline)


def _trial_dict(trial: TrialResult) -> dict[str, Any]:
    data = _with_error_and_usage({"trial": trial.index, **_scored_dict(trial)}, trial)
    if trial.engine:
        data["engine"] = trial.engine
    return data


def _with_error_and_usage(
    data: dict[str, Any], result: ScenarioResult | TrialResult
) -> dict[str, Any]:
    """``data`` followed by the result's ``error`` and ``usage``, each only when there is one."""
    if result.error is not None:
        data["error"] = result.error
        if result.error_kind:
            data["error_kind"] = result.error_kind
    usage = _usage_dict(result.usage)
    if usage is not None:
        data["usage"] = usage
    return data


def _interval(interval: tuple[float, float] | None) -> list[float] | None:
    return None if interval is None else [float(interval[0]), float(interval[1])]


def _usage_dict(usage: Usage) -> dict[str, Any] | None:
    if usage.agent.empty and usage.judge.empty:
        return None
    return {"agent": _calls_dict(usage.agent), "judge": _calls_dict(usage.judge)}


def _calls_dict(calls: CallStats) -> dict[str, Any]:
    data: dict[str, Any] = {"calls": calls.calls, "cached": calls.cached}
    if calls.input_tokens is not None:
        data["input_tokens"] = calls.input_tokens
    if calls.output_tokens is not None:
        data["output_tokens"] = calls.output_tokens
    data["seconds"] = round(float(calls.seconds), 3)
    if calls.cost_usd is not None:
        data["cost_usd"] = round(float(calls.cost_usd), 6)
    return data


def _criterion_dict(criterion: CriterionResult) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": criterion.name,
        "pass": criterion.passed,
        "score": criterion.score,
        "max_score": criterion.max_score,
        "reason": criterion.reason,
    }
    if criterion.votes is not None:
        data["votes"] = {"pass": criterion.votes[0], "total": criterion.votes[1]}
    if criterion.kind != "judge":
        data["kind"] = criterion.kind
    if criterion.category:
        data["category"] = criterion.category
    return data


# --- reading a report back (the boundary: pydantic validates the file) ----------------------------


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="ignore")


class _ConfigModel(_Model):
    backend: str
    agent_model: str
    judge_model: str
    model_label: str = ""
    judge_backend: str = ""


class _VotesModel(_Model):
    passed: int = Field(alias="pass")
    total: int


class CriterionModel(_Model):
    name: str
    passed: bool = Field(alias="pass")
    score: int
    max_score: int
    reason: str = ""
    votes: _VotesModel | None = None
    kind: str = "judge"
    category: str = ""


class _CallsModel(_Model):
    calls: int
    cached: int
    input_tokens: int | None = None
    output_tokens: int | None = None
    seconds: float
    cost_usd: float | None = None


class _UsageModel(_Model):
    agent: _CallsModel
    judge: _CallsModel


class _ScoredModel(_Model):
    criteria: list[CriterionModel] | None
    score: int
    max_score: int
    percentage: float
    passed: bool = Field(alias="pass")
    error: str | None = None
    error_kind: str = ""
    usage: _UsageModel | None = None


class _TrialModel(_ScoredModel):
    trial: int
    engine: str = ""


class _StatsModel(_Model):
    trials: int
    mean: float
    stdev: float
    ci95: tuple[float, float] | None
    passes: int
    pass_at_k: dict[int, float]
    pass_hat_k: dict[int, float]


class _SkillStatsModel(_Model):
    ci95: tuple[float, float] | None
    straddles_threshold: bool


class _BaselineModel(_ScoredModel):
    arm: str


class ScenarioModel(_ScoredModel):
    name: str
    description: str
    agent_output: str | None = None
    judge_errors: int = 0
    trials: list[_TrialModel] | None = None
    stats: _StatsModel | None = None
    baseline: _BaselineModel | None = None
    engine: str = ""


class _McNemarModel(_Model):
    passed_with_only: int
    passed_without_only: int
    p_value: float


class _MoveModel(_Model):
    scenario: str
    name: str
    with_rate: float = Field(alias="with")
    without_rate: float = Field(alias="without")


class _LeftOutModel(_Model):
    scenario: str
    why: str


class _UpliftModel(_Model):
    arm: str
    with_mean: float | None = Field(default=None, alias="with")
    without_mean: float | None = Field(default=None, alias="without")
    difference: float = 0.0
    ci95: tuple[float, float] = (0.0, 0.0)
    normalized_gain: float = 0.0
    p_value: float = 1.0
    test: str = ""
    verdict: str = ""
    scenarios: int = 0
    mcnemar: _McNemarModel | None = None
    criteria: list[_MoveModel] | None = None
    left_out: list[_LeftOutModel] | None = None


def _comparison(model: _UpliftModel) -> SkillComparison:
    uplift = None
    if model.with_mean is not None and model.without_mean is not None:
        mcnemar = model.mcnemar
        uplift = Uplift(
            arm=model.arm,
            with_mean=model.with_mean,
            without_mean=model.without_mean,
            difference=model.difference,
            ci95=model.ci95,
            normalized_gain=model.normalized_gain,
            p_value=model.p_value,
            test=model.test,
            verdict=model.verdict,
            scenarios=model.scenarios,
            mcnemar=None
            if mcnemar is None
            else McNemar(mcnemar.passed_with_only, mcnemar.passed_without_only, mcnemar.p_value),
        )
    return SkillComparison(
        arm=model.arm,
        uplift=uplift,
        criteria=[
            CriterionMove(m.scenario, m.name, m.with_rate, m.without_rate)
            for m in model.criteria or ()
        ],
        left_out=[(item.scenario, item.why) for item in model.left_out or ()],
    )


class _ReportModel(_Model):
    skill: str
    skill_version: str
    timestamp: str
    config: _ConfigModel
    threshold: int
    scenarios: list[ScenarioModel] | None
    overall_percentage: float
    passed: bool = Field(alias="pass")
    usage: _UsageModel | None = None
    stats: _SkillStatsModel | None = None
    uplift: _UpliftModel | None = None


def _usage(model: _UsageModel | None) -> Usage:
    if model is None:
        return Usage()
    return Usage(CallStats(**model.agent.model_dump()), CallStats(**model.judge.model_dump()))


def _criteria(models: list[CriterionModel] | None) -> list[CriterionResult] | None:
    if models is None:
        return None
    return [
        CriterionResult(
            c.name,
            c.passed,
            c.score,
            c.max_score,
            c.reason,
            None if c.votes is None else (c.votes.passed, c.votes.total),
            c.kind,
            c.category,
        )
        for c in models
    ]


def _trial(model: _ScoredModel, index: int, judge_errors: int = 0, engine: str = "") -> TrialResult:
    return TrialResult(
        index=index,
        criteria=_criteria(model.criteria),
        score=model.score,
        max_score=model.max_score,
        percentage=model.percentage,
        passed=model.passed,
        error=model.error,
        error_kind=model.error_kind,
        judge_errors=judge_errors,
        usage=_usage(model.usage),
        trace=TrialTrace(engine=engine) if engine else None,
    )


def _scenario(model: ScenarioModel, skill: str) -> ScenarioResult:
    if model.trials:
        trials = [_trial(t, t.trial, engine=t.engine) for t in model.trials]
        if model.judge_errors:  # the count is the scenario's: give it to its first trial
            trials[0] = TrialResult(**{**trials[0].__dict__, "judge_errors": model.judge_errors})
    else:
        trials = [_trial(model, 1, model.judge_errors, model.engine)]
    stats = model.stats
    baseline = model.baseline
    return ScenarioResult(
        skill=skill,
        skill_dir="",
        name=model.name,
        description=model.description,
        baseline=None if baseline is None else _baseline(baseline, model, skill),
        criteria=_criteria(model.criteria),
        score=model.score,
        max_score=model.max_score,
        percentage=model.percentage,
        passed=model.passed,
        error=model.error,
        agent_output=model.agent_output,
        trials=trials,
        stats=None if stats is None else TrialStats(**stats.model_dump()),
        usage=_usage(model.usage),
    )


def _baseline(model: _BaselineModel, scenario: ScenarioModel, skill: str) -> ScenarioResult:
    return ScenarioResult(
        skill=skill,
        skill_dir="",
        name=scenario.name,
        description=scenario.description,
        criteria=_criteria(model.criteria),
        score=model.score,
        max_score=model.max_score,
        percentage=model.percentage,
        passed=model.passed,
        error=model.error,
        trials=[_trial(model, 1)],
        usage=_usage(model.usage),
        arm=model.arm,
    )


def parse_report(text: str | bytes) -> SkillReport:
    """A results JSON read back into the records it was rendered from; raises
    ``pydantic.ValidationError`` for a file that is not such a report."""
    model = _ReportModel.model_validate_json(text)
    stats = model.stats
    return SkillReport(
        skill=model.skill,
        skill_version=model.skill_version,
        timestamp=model.timestamp,
        config=ReportConfig(**model.config.model_dump()),
        threshold=model.threshold,
        scenarios=[_scenario(s, model.skill) for s in model.scenarios or ()],
        overall_percentage=model.overall_percentage,
        passed=model.passed,
        stats=None if stats is None else SkillStats(stats.ci95, stats.straddles_threshold),
        usage=_usage(model.usage),
        comparison=None if model.uplift is None else _comparison(model.uplift),
    )


# --- the reporter ---------------------------------------------------------------------------------


def report_path(
    summary: SkillSummary,
    settings: EvalSettings,
    now: datetime,
    several_skills: bool,
    prefix: str | None = None,
) -> Path | None:
    """Where a skill's report goes: under ``--eval-output`` when given (prefixed, when several
    skills ran, with ``prefix``, by default the skill's name: see :func:`report_prefixes`),
    else, for a complete skill only, the reference's automatic path; None for a partial run
    without ``--eval-output``, as in the reference."""
    if settings.output:
        path = output_report_path(settings.output, now)
        if not several_skills:
            return path
        name = prefix or summary.name.replace("/", PATH_SEPARATOR)
        return path.with_name(f"{name}-{path.name}")
    if summary.complete:
        return auto_report_path(summary.skill_dir, settings.model, now)
    return None


PATH_SEPARATOR = "__"


def report_prefixes(summaries: Sequence[SkillSummary], rootdir: Path) -> list[str]:
    """Each skill's name in the names of files of several skills' reports (``--eval-output``
    with several skills, the held-back reports): the skill's name, or, where two skills of the
    run have the same name, its folder relative to the rootdir with ``__`` for ``/``
    (``skills__a__commit-message``); a folder outside the rootdir is named by as many of its
    last folders as tell it from the others of its name, never by its absolute path. A name
    still shared (folders named with ``__``) gets ``-2``, ``-3``... in the summaries' order."""
    names = Counter(summary.name for summary in summaries)
    groups: dict[str, list[Path]] = {}
    for summary in summaries:
        groups.setdefault(summary.name, []).append(Path(summary.skill_dir))
    prefixes = []
    for summary in summaries:
        if names[summary.name] == 1:
            # A tile's name is ``owner/name``: one file name, not a folder.
            prefixes.append(summary.name.replace("/", PATH_SEPARATOR))
            continue
        parts = _relative_parts(Path(summary.skill_dir), rootdir)
        if parts is None:
            parts = _distinct_suffix(Path(summary.skill_dir), groups[summary.name])
        prefixes.append(PATH_SEPARATOR.join(parts))
    seen: Counter[str] = Counter()
    distinct = []
    for prefix in prefixes:
        seen[prefix] += 1
        distinct.append(prefix if seen[prefix] == 1 else f"{prefix}-{seen[prefix]}")
    return distinct


def _relative_parts(path: Path, rootdir: Path) -> tuple[str, ...] | None:
    """The folders of ``path`` under the rootdir (None: it is not under it)."""
    try:
        parts = path.relative_to(rootdir).parts
    except ValueError:
        return None
    return parts or None


def _distinct_suffix(path: Path, others: Sequence[Path]) -> tuple[str, ...]:
    """The fewest last folders of ``path`` that no other of ``others`` ends with."""
    parts = path.parts[1:] if path.anchor else path.parts
    for count in range(1, len(parts)):
        suffix = parts[-count:]
        if sum(1 for other in others if other.parts[-count:] == suffix) == 1:
            return suffix
    return parts


UNPUBLISHED_FOLDER = "unpublished"


def held_back(summary: SkillSummary, settings: EvalSettings) -> int:
    """How many of the skill's scenarios errored because something the run depends on failed
    (an endpoint, the judge, an agent CLI, the sandbox engine) when that keeps its report out
    of ``evals/results/``; 0 when it is published there.

    The catalogue counts the newest report of a model, so such a run would publish 0 % for
    those scenarios over a good score. ``--eval-output`` (the user names the place) and
    ``--eval-publish-errors`` publish it anyway."""
    if settings.output or settings.publish_errors:
        return 0
    return sum(1 for result in summary.results if result.infrastructure_errors)


def skill_broken(summary: SkillSummary) -> bool:
    """Whether the skill itself is broken (its SKILL.md, or a tile's tile.json, is missing or
    cannot be read): then no report of it is written at all, not even at ``--eval-output``.
    Every scenario of such a skill errors before its agent runs, so a report would publish 0 %
    for a skill that did not run; the reference writes none either (it stops first)."""
    return any(result.skill_errors for result in summary.results)


def unpublished_report_path(
    summary: SkillSummary,
    settings: EvalSettings,
    now: datetime,
    rootdir: Path,
    prefix: str | None = None,
) -> Path:
    """Where a held-back report goes: beside the run logs, laid out as ``evals/results/``
    (``<log folder>/unpublished/<skill>/<model>/<UTC time>.json``, ``<skill>`` being
    ``prefix`` when given: see :func:`report_prefixes`), so that it can be moved there by hand
    once its errors are understood. With the run log off, the default log folder is used."""
    logs = rootdir / Path(settings.log_dir or EvalSettings().log_dir).expanduser()
    published = auto_report_path(summary.skill_dir, settings.model, now)
    folder = prefix or summary.name.replace("/", PATH_SEPARATOR)
    return logs / UNPUBLISHED_FOLDER / folder / published.parent.name / published.name


def later_names(path_at: Callable[[datetime], Path | None], now: datetime) -> Iterator[Path]:
    """The names a report of ``now`` takes when its own is taken: the same name format at the
    next free second. The catalogue takes the greatest name as the newest, and
    ``<time>-2.json`` would sort before ``<time>.json``."""
    for seconds in itertools.count(1):
        path = path_at(now + timedelta(seconds=seconds))
        if path is not None:
            yield path


class ResultsJsonReporter:
    """Writes each skill's results JSON (see :func:`report_path`) and records the path written,
    or why it could not be, on the skill's summary. A report whose scenarios errored for
    reasons outside the skill is held back (:func:`held_back`); a broken skill's is not
    written (:func:`skill_broken`)."""

    name = "results_json"
    order = 0

    def report(self, run: RunReport) -> None:
        if not run.complete:
            return
        several = len(run.summaries) > 1
        prefixes = report_prefixes(run.summaries, run.rootdir)
        for summary, prefix in zip(run.summaries, prefixes, strict=True):
            namer = self._namer(run, summary, several, prefix)
            path = namer(run.finished_at)
            if path is None:
                continue
            text = render_report(skill_report(summary, run.settings, run.finished_at))
            later = later_names(namer, run.finished_at)
            try:
                summary.report_path = write_new_report(path, text, later, removed=run.removed)
            except OSError as exc:
                problem = f"could not write {path}: {exc.strerror or exc}"
                summary.report_error = summary.report_error or problem

    @staticmethod
    def _namer(
        run: RunReport, summary: SkillSummary, several: bool, prefix: str
    ) -> Callable[[datetime], Path | None]:
        """The report's path for a time (None: no report), held back when it must be."""
        settings = run.settings
        if skill_broken(summary):
            own_file = TILE_FILE if is_tile_dir(Path(summary.skill_dir)) else "SKILL.md"
            summary.report_held = (
                f"the skill's {own_file} is missing or broken, so no report of it is written "
                "(the catalogue would show 0 % for a skill that did not run)"
            )
            return lambda moment: None
        errored = held_back(summary, settings)
        if not errored or report_path(summary, settings, run.finished_at, several) is None:
            return lambda moment: report_path(summary, settings, moment, several, prefix)
        summary.report_held = (
            f"{plural(errored, 'scenario')} errored for reasons outside the skill (an "
            "endpoint, the judge, an agent CLI or the sandbox engine), so this report is not "
            "in evals/results/, where the catalogue would count it; --eval-publish-errors "
            "publishes it anyway"
        )
        return lambda moment: unpublished_report_path(
            summary, settings, moment, run.rootdir, prefix
        )


# --- paths and writing -------------------------------------------------------------------------


def auto_report_path(skill_dir: Path, model: str, now: datetime) -> Path:
    """Return ``<skill_dir>/evals/results/<model>/<UTC timestamp>.json``.

    Unlike the reference, path separators in ``model`` become ``_`` so that a model such
    as ``openai/gpt-4o`` is one folder that ``generate-versions`` can see (spec 13.30).
    """
    folder = model.replace("/", "_").replace("\\", "_")
    return Path(skill_dir) / "evals" / "results" / folder / f"{_file_timestamp(now)}.json"


def output_report_path(output: Path | str, now: datetime) -> Path:
    """Resolve ``--output`` into a timestamped report path (spec section 10).

    Pass the option as a ``str`` to keep a trailing separator: ``out/`` that does not exist
    yet is taken as a folder (``out/results-<ts>.json``), where the reference produced
    ``out/-<ts>.json``.
    """
    text = os.fspath(output)
    stamp = _file_timestamp(now)
    if os.path.isdir(text) or _has_trailing_separator(text):
        return Path(text) / f"results-{stamp}.json"
    ext = _go_ext(text)
    base = text[: len(text) - len(ext)]
    return Path(f"{base}-{stamp}{ext or '.json'}")


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _file_timestamp(now: datetime) -> str:
    return _utc(now).strftime(_FILE_TIMESTAMP)


def _has_trailing_separator(text: str) -> bool:
    separators = tuple(sep for sep in ("/", os.sep, os.altsep) if sep)
    return text.endswith(separators)


def _go_ext(text: str) -> str:
    """Go's ``filepath.Ext``: the suffix from the last ``.`` of the final path element."""
    for index in range(len(text) - 1, -1, -1):
        char = text[index]
        if char in (os.sep, os.altsep):
            return ""
        if char == ".":
            return text[index:]
    return ""


if TYPE_CHECKING:  # the protocol this provider implements, checked by mypy
    from pytest_openkata.providers.reporters import Reporter

    _implements: type[Reporter] = ResultsJsonReporter
