"""The results JSON report: models, rendering, version lookup, paths and safe writing.

The layout follows the reference runner's report (spec section 10) so that its tooling,
``generate-versions`` in particular, reads our reports unchanged.
"""

from __future__ import annotations

import itertools
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from pytest_openkata.core.results import (
    ScenarioResult,
    TrialResult,
    Usage,
)
from pytest_openkata.providers.reporters import gojson

_FILE_TIMESTAMP = "%Y-%m-%dT%H%M%S"
_RFC3339_SECONDS = "%Y-%m-%dT%H:%M:%SZ"
_VERSION_HEADING = re.compile(r"## \[([^\]]*)\]")
_DIR_MODE = 0o755
_FILE_MODE = 0o644


class _ReportModel(BaseModel):
    model_config = ConfigDict(populate_by_name=True, frozen=True)


M = TypeVar("M", bound=_ReportModel)


class ReportConfig(_ReportModel):
    backend: str
    agent_model: str
    judge_model: str
    model_label: str = ""
    judge_backend: str = ""  # written only when the judge uses another backend than the agent


class CriterionEntry(_ReportModel):
    name: str
    passed: bool = Field(alias="pass")
    score: int
    max_score: int
    reason: str = ""
    votes: tuple[int, int] | None = None


class CallEntry(_ReportModel):
    """One role's calls: live ones, cache hits, and the live ones' tokens, seconds, cost."""

    calls: int
    cached: int
    input_tokens: int | None = None
    output_tokens: int | None = None
    seconds: float
    cost_usd: float | None = None


class UsageEntry(_ReportModel):
    agent: CallEntry
    judge: CallEntry


class _ScoredEntry(_ReportModel):
    """What a scenario and each of its trials have in common."""

    criteria: list[CriterionEntry] | None
    score: int
    max_score: int
    percentage: float
    passed: bool = Field(alias="pass")
    error: str | None = None
    usage: UsageEntry | None = None


class TrialEntry(_ScoredEntry):
    trial: int


class StatsEntry(_ReportModel):
    trials: int
    mean: float
    stdev: float
    ci95: tuple[float, float] | None
    passes: int
    pass_at_k: dict[int, float]
    pass_hat_k: dict[int, float]


class SkillStats(_ReportModel):
    """The interval of the overall percentage, when scenarios ran several trials."""

    ci95: tuple[float, float] | None
    straddles_threshold: bool


class ScenarioEntry(_ScoredEntry):
    name: str
    description: str
    agent_output: str | None = None
    judge_errors: int = 0
    trials: list[TrialEntry] | None = None
    stats: StatsEntry | None = None


class ResultsReport(_ReportModel):
    skill: str
    skill_version: str
    timestamp: str
    config: ReportConfig
    threshold: int
    scenarios: list[ScenarioEntry] | None
    overall_percentage: float
    passed: bool = Field(alias="pass")
    usage: UsageEntry | None = None
    stats: SkillStats | None = None


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
    entries: Sequence[ScenarioEntry] | None = None,
) -> ResultsReport:
    """Assemble the report; a naive ``timestamp`` is taken to be UTC. ``entries``, when
    given, are the results' :func:`scenario_entry`, made before."""
    if entries is None:
        entries = [scenario_entry(result) for result in results]
    return ResultsReport(
        skill=skill,
        skill_version=skill_version,
        timestamp=report_timestamp(timestamp),
        config=config,
        threshold=threshold,
        scenarios=list(entries) or None,
        overall_percentage=float(overall),
        passed=passed,
        usage=_usage_entry(sum((result.usage for result in results), Usage())),
        stats=stats,
    )


def report_timestamp(moment: datetime) -> str:
    """The report's ``timestamp`` field: UTC, to the second (a naive time is taken as UTC)."""
    return _utc(moment).strftime(_RFC3339_SECONDS)


def render_report(report: ResultsReport, scenario_texts: Sequence[str] | None = None) -> str:
    """Return the report text, byte-compatible with the reference's output.
    ``scenario_texts``, when given, are its scenarios' :func:`scenario_text`, made before."""
    return gojson.dumps(_report_dict(report, scenario_texts))


# Where a scenario sits in a report: in the list under the top object's "scenarios" key.
_SCENARIO_DEPTH = 2


def scenario_text(entry: ScenarioEntry) -> str:
    """A scenario's text in its skill's report: rendered as each result comes in, a skill's
    report needs little more than joining them when its last scenario is done."""
    return gojson.dumps_at(_scenario_dict(entry), _SCENARIO_DEPTH)


# The time in a report rendered ahead, replaced by the real one when it is written. Its
# ``"timestamp": "..."`` line comes before any value a run supplies (the skill's name and
# version come first, and a quote inside them is escaped), so the first one is the field.
_TIME_TO_COME = "0001-01-01T00:00:00Z"


@dataclass(frozen=True)
class RenderedReport:
    """A report rendered before its time is known (a skill done before the session's end):
    :meth:`at` gives the same text :func:`render_report` would, for that time."""

    head: str
    tail: str

    @classmethod
    def ahead(
        cls, report: ResultsReport, scenario_texts: Sequence[str] | None = None
    ) -> RenderedReport:
        text = render_report(report.model_copy(update={"timestamp": _TIME_TO_COME}), scenario_texts)
        head, found, tail = text.partition(_timestamp_field(_TIME_TO_COME))
        if not found:
            raise ValueError("the rendered report has no timestamp field")
        return cls(head, tail)

    def at(self, moment: datetime) -> str:
        return self.head + _timestamp_field(report_timestamp(moment)) + self.tail


def _timestamp_field(value: str) -> str:
    return f'"timestamp": "{value}"'


def read_skill_version(skill_dir: Path) -> str:
    """Return the first released version heading of ``<skill_dir>/CHANGELOG.md``, or ``""``.

    Only an exact ``Unreleased`` is skipped (spec 13.32), and ``## []`` yields ``""``.
    """
    try:
        raw = (Path(skill_dir) / "CHANGELOG.md").read_bytes()
    except OSError:
        return ""
    for line in raw.decode("utf-8", errors="replace").split("\n"):
        match = _VERSION_HEADING.match(line)
        if match and match.group(1) != "Unreleased":
            return match.group(1)
    return ""


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


def write_new_report(path: Path, text: str) -> Path:
    """Write ``text`` atomically to ``path`` or, if taken, to ``<stem>-2<suffix>``, ``-3``...

    The content goes to a temporary file in the target folder first and is then
    hard-linked to the final name; ``os.link`` fails instead of replacing, so an existing
    report is never overwritten, even by a concurrent writer. Returns the path written.
    """
    path = Path(path)
    _make_folders(path.parent)
    temp = _write_temp_file(path.parent, text)
    try:
        written = _link_to_free_name(temp, path)
    finally:
        temp.unlink(missing_ok=True)
    _fsync_folder(path.parent)
    return written


def _from(model: type[M], record: object) -> M:
    """A report model filled from a result record's attributes of the same names."""
    return model.model_validate(record, from_attributes=True)


def _scored(result: ScenarioResult | TrialResult) -> dict[str, Any]:
    criteria = [_from(CriterionEntry, c) for c in result.criteria or ()]
    return {
        "criteria": criteria or None,
        "score": result.score,
        "max_score": result.max_score,
        "percentage": float(result.percentage),
        "passed": result.passed,
        "error": result.error,
        "usage": _usage_entry(result.usage),
    }


def scenario_entry(result: ScenarioResult) -> ScenarioEntry:
    """A scenario's entry in its skill's report."""
    trials = [TrialEntry(trial=t.index, **_scored(t)) for t in result.trials]
    return ScenarioEntry(
        name=result.name,
        description=result.description,
        agent_output=result.agent_output,
        judge_errors=result.judge_errors,
        trials=trials if len(trials) > 1 else None,
        stats=None if result.stats is None else _from(StatsEntry, result.stats),
        **_scored(result),
    )


def _usage_entry(usage: Usage) -> UsageEntry | None:
    if usage.agent.empty and usage.judge.empty:
        return None
    return UsageEntry(agent=_from(CallEntry, usage.agent), judge=_from(CallEntry, usage.judge))


def _report_dict(
    report: ResultsReport, scenario_texts: Sequence[str] | None = None
) -> dict[str, Any]:
    if scenario_texts is None:
        scenarios: list[Any] = [_scenario_dict(s) for s in report.scenarios or ()]
    else:
        scenarios = [gojson.Encoded(text) for text in scenario_texts]
    data: dict[str, Any] = {
        "skill": report.skill,
        "skill_version": report.skill_version,
        "timestamp": report.timestamp,
        "config": _config_dict(report.config),
        "threshold": report.threshold,
        "scenarios": scenarios or None,
        "overall_percentage": float(report.overall_percentage),
        "pass": report.passed,
    }
    # Keys after the reference's, each only when it says something.
    if report.stats is not None:
        data["stats"] = {
            "ci95": _interval(report.stats.ci95),
            "straddles_threshold": report.stats.straddles_threshold,
        }
    if report.usage is not None:
        data["usage"] = _usage_dict(report.usage)
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


def _scored_dict(entry: ScenarioEntry | TrialEntry) -> dict[str, Any]:
    return {
        "criteria": [_criterion_dict(c) for c in entry.criteria or ()] or None,
        "score": entry.score,
        "max_score": entry.max_score,
        "percentage": float(entry.percentage),
        "pass": entry.passed,
    }


def _scenario_dict(scenario: ScenarioEntry) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": scenario.name,
        "description": scenario.description,
        **_scored_dict(scenario),
    }
    if scenario.error is not None:
        data["error"] = scenario.error
    if scenario.agent_output is not None:
        data["agent_output"] = scenario.agent_output
    if scenario.judge_errors:
        data["judge_errors"] = scenario.judge_errors
    if scenario.stats is not None:
        stats = scenario.stats
        data["stats"] = {
            "trials": stats.trials,
            "mean": float(stats.mean),
            "stdev": float(stats.stdev),
            "ci95": _interval(stats.ci95),
            "passes": stats.passes,
            "pass_at_k": {str(k): float(v) for k, v in stats.pass_at_k.items()},
            "pass_hat_k": {str(k): float(v) for k, v in stats.pass_hat_k.items()},
        }
    if scenario.trials is not None:
        data["trials"] = [_trial_dict(t) for t in scenario.trials]
    if scenario.usage is not None:
        data["usage"] = _usage_dict(scenario.usage)
    return data


def _trial_dict(trial: TrialEntry) -> dict[str, Any]:
    data: dict[str, Any] = {"trial": trial.trial, **_scored_dict(trial)}
    if trial.error is not None:
        data["error"] = trial.error
    if trial.usage is not None:
        data["usage"] = _usage_dict(trial.usage)
    return data


def _interval(interval: tuple[float, float] | None) -> list[float] | None:
    return None if interval is None else [float(interval[0]), float(interval[1])]


def _usage_dict(usage: UsageEntry) -> dict[str, Any]:
    return {"agent": _calls_dict(usage.agent), "judge": _calls_dict(usage.judge)}


def _calls_dict(calls: CallEntry) -> dict[str, Any]:
    data: dict[str, Any] = {"calls": calls.calls, "cached": calls.cached}
    if calls.input_tokens is not None:
        data["input_tokens"] = calls.input_tokens
    if calls.output_tokens is not None:
        data["output_tokens"] = calls.output_tokens
    data["seconds"] = round(float(calls.seconds), 3)
    if calls.cost_usd is not None:
        data["cost_usd"] = round(float(calls.cost_usd), 6)
    return data


def _criterion_dict(criterion: CriterionEntry) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": criterion.name,
        "pass": criterion.passed,
        "score": criterion.score,
        "max_score": criterion.max_score,
        "reason": criterion.reason,
    }
    if criterion.votes is not None:
        data["votes"] = {"pass": criterion.votes[0], "total": criterion.votes[1]}
    return data


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


def _make_folders(folder: Path) -> None:
    """Like Go's ``os.MkdirAll(folder, 0755)``: every missing level gets mode 0755.

    ``Path.mkdir(parents=True)`` would create the intermediate levels with mode 0777.
    """
    missing = list(itertools.takewhile(lambda p: not p.exists(), (folder, *folder.parents)))
    for level in reversed(missing):
        with suppress(FileExistsError):
            level.mkdir(mode=_DIR_MODE)


def _write_temp_file(folder: Path, text: str) -> Path:
    fd, name = tempfile.mkstemp(dir=folder, prefix=".report-", suffix=".tmp")
    temp = Path(name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.chmod(temp, _FILE_MODE)
            os.fsync(handle.fileno())
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return temp


def _link_to_free_name(temp: Path, path: Path) -> Path:
    for candidate in _candidate_paths(path):
        try:
            os.link(temp, candidate)
        except FileExistsError:
            continue
        return candidate
    raise AssertionError("unreachable: the candidate names never run out")


def _fsync_folder(folder: Path) -> None:
    """Make the new directory entry durable; best effort, not every platform allows it."""
    with suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _candidate_paths(path: Path) -> Iterator[Path]:
    numbered = (path.with_name(f"{path.stem}-{n}{path.suffix}") for n in itertools.count(2))
    return itertools.chain([path], numbered)
