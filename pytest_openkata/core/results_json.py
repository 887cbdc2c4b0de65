"""The results JSON format: rendering a skill's report and reading one back.

The layout follows the reference runner's report (spec section 10) so that its tooling,
``generate-versions`` in particular, reads our reports unchanged. A report is rendered from
the run's one representation of a result (:class:`~pytest_openkata.contracts.results.ScenarioResult`
in a :class:`~pytest_openkata.core.summary.SkillSummary`) straight into Go's JSON encoding;
reading a report back (:func:`parse_report`) validates it with pydantic at that boundary and
gives the same records. Where reports go is :mod:`pytest_openkata.core.report_paths`; the
reporter that writes them is ``providers.reporters.results_json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.results import (
    CallStats,
    CriterionResult,
    ScenarioResult,
    TrialResult,
    TrialStats,
    TrialTrace,
    Usage,
)
from pytest_openkata.core.activation import ActivationRate, scenario_activation
from pytest_openkata.core.compare import CriterionMove, SkillComparison
from pytest_openkata.core.manifest import Manifest
from pytest_openkata.core.report_paths import as_utc
from pytest_openkata.core.summary import SkillSummary, usage_of
from pytest_openkata.core.uplift import McNemar, Uplift
from pytest_openkata.core.versions import read_skill_version
from pytest_openkata.infra import gojson

__all__ = [
    "ReportConfig",
    "SkillReport",
    "SkillStats",
    "build_report",
    "parse_report",
    "render_report",
    "report_timestamp",
    "skill_report",
]

_RFC3339_SECONDS = "%Y-%m-%dT%H:%M:%SZ"


# --- what a report holds -----------------------------------------------------------------------


@dataclass(frozen=True)
class ReportConfig:
    backend: str
    agent_model: str
    judge_model: str
    model_label: str = ""
    judge_backend: str = ""  # written only when the judge uses another backend than the agent
    # The label of the variant of a variants file that is the own arm; written only then.
    variant: str = ""


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
    # What the run ran with (its manifest, of this skill); None in a report written before
    # manifests or by the reference runner.
    manifest: Manifest | None = None


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
    manifest: Manifest | None = None,
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
        manifest=manifest,
    )


def skill_report(
    summary: SkillSummary,
    settings: EvalSettings,
    now: datetime,
    manifest: Manifest | None = None,
) -> SkillReport:
    """The results JSON of one skill's summary, with the run's ``manifest`` of that skill."""
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
            variant=settings.variant if settings.variants else "",
        ),
        threshold=settings.threshold,
        results=summary.results,
        overall=summary.overall,
        passed=summary.passed,
        stats=SkillStats(ci95=summary.interval, straddles_threshold=summary.straddles)
        if summary.with_trials
        else None,
        comparison=summary.comparison,
        manifest=manifest,
    )


def report_timestamp(moment: datetime) -> str:
    """The report's ``timestamp`` field: UTC, to the second (a naive time is taken as UTC)."""
    return as_utc(moment).strftime(_RFC3339_SECONDS)


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
    if report.manifest is not None:  # the catalogue reads only the reference's keys (§11)
        data["manifest"] = report.manifest.to_dict()
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
    if config.variant:
        data["variant"] = config.variant
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
        _add_error_kinds(data, result)
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
    activation = scenario_activation(result)
    if activation is not None:
        data["skill_activation"] = _activation_dict(activation)
    if result.baseline is not None:
        data["baseline"] = _baseline_dict(result.baseline)
    return data


def _activation_dict(rate: ActivationRate) -> dict[str, Any]:
    """How many trials loaded the skill, of those whose agent's events could tell, and the
    skill's files they read (only when some were)."""
    data: dict[str, Any] = {"loaded": rate.loaded, "known": rate.known, "trials": rate.trials}
    if rate.files_read:
        data["files_read"] = list(rate.files_read)
    return data


def _baseline_dict(baseline: ScenarioResult) -> dict[str, Any]:
    """A scenario's baseline arm: its name and percentage first, then the rest of its result."""
    data: dict[str, Any] = {
        "arm": baseline.arm,
        "percentage": float(baseline.percentage),
        **_scored_dict(baseline),
    }
    activation = scenario_activation(baseline)
    if activation is not None:
        data["skill_activation"] = _activation_dict(activation)
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
        _add_error_kinds(data, result)
    usage = _usage_dict(result.usage)
    if usage is not None:
        data["usage"] = usage
    return data


def _add_error_kinds(data: dict[str, Any], result: ScenarioResult | TrialResult) -> None:
    """Whose fault an error is and what kind of failure it was, each when known (fields of
    this plugin's, after the reference's)."""
    if result.error_kind:
        data["error_kind"] = result.error_kind
    if result.error_cause:
        data["error_cause"] = result.error_cause


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
    variant: str = ""


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
    error_cause: str = ""
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
    manifest: dict[str, Any] | None = None


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
        error_cause=model.error_cause,
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


def parse_report(text: str | bytes, *, source: str = "results JSON") -> SkillReport:
    """A results JSON read back into the records it was rendered from; raises
    ``pydantic.ValidationError`` for a file that is not such a report, and
    :class:`~pytest_openkata.core.manifest.ManifestError` naming ``source`` for one whose
    manifest cannot be read."""
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
        manifest=None
        if model.manifest is None
        else Manifest.from_dict(model.manifest, source=source),
    )
