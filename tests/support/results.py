"""Constructed results for the tests of the views of a run (HTML, Markdown, CSV): criteria,
scenarios of trials, and the run log they make, read back as every view reads it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.results import (
    CallStats,
    CriterionResult,
    FileChange,
    ScenarioResult,
    TrialResult,
    TrialTrace,
    Usage,
)
from pytest_openkata.core.reporting import Reporter, ReportOutcome, Run, make_run
from pytest_openkata.core.runlog import LoggedRun, RunInfo, log_lines, parse_run_log
from pytest_openkata.core.summary import summarise
from pytest_openkata.core.trials import combine_trials, errored_trial, scored_trial

ROOT = Path("/checkout")
SETTINGS = {"agent": "http", "model": "gpt-4o", "judge": "http", "judge_model": "gpt-4o"}


def judged(name: str, points: int, passed: bool, reason: str = "ok") -> CriterionResult:
    return CriterionResult.judged(name, points, passed, reason)


def checked(name: str, points: int, passed: bool, reason: str) -> CriterionResult:
    return CriterionResult(name, passed, points if passed else 0, points, reason, kind="check")


def scenario(
    name: str,
    *trials: list[CriterionResult] | str,
    skill: str = "s",
    arm: str = "",
    output: str = "the agent's answer",
    changes: tuple[FileChange, ...] = (),
    seconds: float = 1.0,
    total: int | None = None,
) -> ScenarioResult:
    """A scenario of skill ``skill`` whose trials are criteria (scored) or an error text;
    ``total`` scenarios of the skill are on disk (default: this one)."""
    made: list[TrialResult] = []
    for index, trial in enumerate(trials or ([judged("c", 1, True)],), start=1):
        trace = TrialTrace(output=output, changes=changes, seconds=seconds)
        usage = Usage(agent=CallStats(calls=1, seconds=seconds))
        if isinstance(trial, str):
            made.append(errored_trial(index, trial, trace=trace, usage=usage))
        else:
            made.append(scored_trial(index, trial, trace=trace, usage=usage))
    names = [f"scenario-{n}" for n in range(total)] if total else [name]
    result = combine_trials(
        made,
        skill=skill,
        skill_dir=str(ROOT / "skills" / skill),
        name=name,
        description=f"about {name}",
        skill_scenarios=names,
    )
    return replace(result, arm=arm)


def logged(
    results: Sequence[ScenarioResult],
    *,
    complete: bool = True,
    threshold: int = 95,
    finished_at: str = "2026-12-01T10:00:00Z",
    extras: dict[str, list[dict[str, Any]]] | None = None,
) -> LoggedRun:
    """The run of ``results`` as its log holds it."""
    info = RunInfo(finished_at, complete=complete, threshold=threshold, settings=SETTINGS)
    return parse_run_log(log_lines(info, results, ROOT, extras))


def report_of(results: list[ScenarioResult], settings: EvalSettings, rootdir: Path = ROOT) -> Run:
    """What the reporters get after a run of ``results``."""
    return make_run(
        summarise(results, settings.threshold, rootdir),
        settings,
        datetime(2026, 12, 1, 10, 0, tzinfo=UTC),
        rootdir,
    )


def reported(reporter: Reporter, run: Run) -> Run:
    """``run`` finished with what ``reporter`` did of it."""
    return run.finished(reporter.report(run) or ReportOutcome())
