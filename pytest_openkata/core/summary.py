"""Aggregation on the controller: per-skill scores, the threshold gate, results JSON, exit status.

Registered only where reports are final (no xdist, or the xdist controller), it sees every
scenario's result through ``user_properties``, whichever worker ran it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_openkata.core.results import ScenarioResult, Usage
from pytest_openkata.core.scoring import meets_threshold, overall_percentage
from pytest_openkata.core.stats import overall_interval_95, straddles
from pytest_openkata.infra.config import EvalSettings
from pytest_openkata.plugin.items import result_of_report

if TYPE_CHECKING:
    from pytest_openkata.providers.reporters.results_json import (
        RenderedReport,
        ResultsReport,
        ScenarioEntry,
    )

# The results JSON module is imported where it is used: its pydantic models cost every pytest
# process that loads the plugin about 35 ms to build, and only the process that aggregates
# evaluated scenarios renders a report (not an xdist worker, not a run without scenarios).


@dataclass
class SkillSummary:
    skill_dir: Path
    display: str
    results: list[ScenarioResult]
    total_scenarios: int
    overall: float
    passed: bool
    report_path: Path | None = None
    report_error: str | None = None
    # With several trials: the 95 % interval of ``overall`` and whether it holds the threshold.
    interval: tuple[float, float] | None = None
    straddles: bool = False

    @property
    def with_trials(self) -> bool:
        return any(len(result.trials) > 1 for result in self.results)

    @property
    def usage(self) -> Usage:
        return sum((result.usage for result in self.results), Usage())

    @property
    def name(self) -> str:
        return self.skill_dir.name

    @property
    def complete(self) -> bool:
        """Every scenario of the skill on disk ran; only then is the threshold enforced."""
        return len(self.results) >= self.total_scenarios

    @property
    def gate_failed(self) -> bool:
        return self.complete and not self.passed


def _display(path: Path, rootdir: Path) -> str:
    try:
        return path.relative_to(rootdir).as_posix()
    except ValueError:
        return str(path)


def summarise(results: list[ScenarioResult], threshold: int, rootdir: Path) -> list[SkillSummary]:
    """Group results by skill, in the reference's scenario order, and score each skill."""
    by_skill: dict[str, list[ScenarioResult]] = defaultdict(list)
    for result in results:
        by_skill[result.skill_dir].append(result)
    summaries = []
    for skill_dir, skill_results in sorted(by_skill.items()):
        skill_results.sort(key=lambda r: r.name)
        overall = overall_percentage([r.percentage for r in skill_results])
        total = max(len(r.skill_scenarios) for r in skill_results)
        interval = overall_interval_95([_spread(r) for r in skill_results])
        summaries.append(
            SkillSummary(
                skill_dir=Path(skill_dir),
                display=_display(Path(skill_dir), rootdir),
                results=skill_results,
                total_scenarios=total,
                overall=overall,
                passed=meets_threshold(overall, threshold, len(skill_results)),
                interval=interval,
                straddles=straddles(interval, threshold),
            )
        )
    return summaries


def _spread(result: ScenarioResult) -> tuple[float, float, int]:
    """A scenario's mean, standard deviation and number of trials."""
    if result.stats is None:
        return result.percentage, 0.0, 1
    return result.percentage, result.stats.stdev, result.stats.trials


def _report_path(
    summary: SkillSummary, settings: EvalSettings, now: datetime, several_skills: bool
) -> Path | None:
    from pytest_openkata.providers.reporters.results_json import (
        auto_report_path,
        output_report_path,
    )

    if settings.output:
        path = output_report_path(settings.output, now)
        return path.with_name(f"{summary.name}-{path.name}") if several_skills else path
    if summary.complete:
        return auto_report_path(summary.skill_dir, settings.model, now)
    return None  # a partial run without --eval-output writes nothing, as the reference does


def skill_report(
    summary: SkillSummary,
    settings: EvalSettings,
    now: datetime,
    entries: Sequence[ScenarioEntry] | None = None,
) -> ResultsReport:
    """The results JSON of one skill, as a model (``entries``: its results' entries, when
    made before)."""
    from pytest_openkata.providers.reporters.results_json import (
        ReportConfig,
        SkillStats,
        build_report,
        read_skill_version,
    )

    return build_report(
        skill=summary.name,
        skill_version=read_skill_version(summary.skill_dir),
        timestamp=now,
        config=ReportConfig(
            backend=settings.backend,
            agent_model=settings.model,
            judge_model=settings.judge_model,
            model_label=settings.model_label,
            judge_backend=settings.judge_backend,
        ),
        threshold=settings.threshold,
        results=summary.results,
        overall=summary.overall,
        passed=summary.passed,
        stats=SkillStats(ci95=summary.interval, straddles_threshold=summary.straddles)
        if summary.with_trials
        else None,
        entries=entries,
    )


def write_reports(
    summaries: list[SkillSummary],
    settings: EvalSettings,
    now: datetime,
    built: Mapping[Path, tuple[int, RenderedReport]] | None = None,
) -> None:
    """Write each skill's report; ``built`` holds reports rendered before the session's end
    (with their number of scenarios), which only take the time ``now``."""
    from pytest_openkata.providers.reporters.results_json import render_report, write_new_report

    for summary in summaries:
        path = _report_path(summary, settings, now, several_skills=len(summaries) > 1)
        if path is None:
            continue
        count, rendered = (built or {}).get(summary.skill_dir, (-1, None))
        if rendered is not None and count == len(summary.results):
            text = rendered.at(now)
        else:
            text = render_report(skill_report(summary, settings, now))
        try:
            summary.report_path = write_new_report(path, text)
        except OSError as exc:
            summary.report_error = f"could not write {path}: {exc.strerror or exc}"


BODY_RAISED_ATTR = "openkata_body_raised"


def _is_soft_failure(report: pytest.TestReport, result: ScenarioResult | None) -> bool:
    """An unmet criterion (a failed subtest, or the parent that "contains failed subtests")
    is soft: it counts through the percentage, not through pytest's failure count."""
    if result is None or report.when != "call":
        return False
    if isinstance(report, pytest.SubtestReport):
        return True
    return getattr(report, BODY_RAISED_ATTR, True) is False


class EvalAggregator:
    """Collects scenario results and decides the run's outcome."""

    def __init__(self, config: pytest.Config, settings: EvalSettings) -> None:
        self.config = config
        self.settings = settings
        self.results: dict[str, ScenarioResult] = {}
        self.hard_failures: list[str] = []
        self.summaries: list[SkillSummary] = []
        self._by_skill: dict[str, list[ScenarioResult]] = defaultdict(list)
        # The report of each skill whose every scenario has a result, rendered as soon as
        # the last one came in: pytest is then still running other skills' scenarios, and
        # the session's end has only the time to put in (keyed by skill folder, with the
        # number of scenarios it holds).
        self._built: dict[Path, tuple[int, RenderedReport]] = {}
        # Each result's report entry and its text there, made as the result comes in and
        # given up when its skill's report is built (keyed by the result's id: every result
        # is kept in self.results meanwhile).
        self._entries: dict[int, tuple[ScenarioEntry, str]] = {}

    # tryfirst: the terminal reporter later flips a parent report with failed subtests to
    # "failed"; here the parent's own outcome is still what its body did.
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Each of a scenario's reports (setup, subtests, call, teardown) carries the result;
        # it is decoded once.
        if report.nodeid not in self.results:
            result = result_of_report(report, self.config)
            if result is not None:
                self.results[report.nodeid] = result
                self._skill_result(result)
        result = self.results.get(report.nodeid)
        if report.failed and not _is_soft_failure(report, result):
            self.hard_failures.append(report.nodeid)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.results:
            return
        self.summaries = summarise(
            list(self.results.values()), self.settings.threshold, self.config.rootpath
        )
        if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            write_reports(self.summaries, self.settings, datetime.now(UTC), self._built)
        self._set_exit_status(session)

    def _skill_result(self, result: ScenarioResult) -> None:
        from pytest_openkata.providers.reporters.results_json import (
            RenderedReport,
            scenario_entry,
            scenario_text,
        )

        entry = scenario_entry(result)
        self._entries[id(result)] = (entry, scenario_text(entry))
        results = self._by_skill[result.skill_dir]
        results.append(result)
        if len(results) != len(result.skill_scenarios):
            return
        (summary,) = summarise(list(results), self.settings.threshold, self.config.rootpath)
        if summary.complete:
            made = [self._entries.pop(id(done)) for done in summary.results]
            now = datetime.now(UTC)
            report = skill_report(summary, self.settings, now, [entry for entry, _ in made])
            rendered = RenderedReport.ahead(report, [text for _, text in made])
            self._built[summary.skill_dir] = (len(results), rendered)

    def _set_exit_status(self, session: pytest.Session) -> None:
        if session.exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            return  # interrupted, usage or internal errors keep pytest's own status
        failed = any(s.gate_failed or s.report_error for s in self.summaries) or self.hard_failures
        session.exitstatus = pytest.ExitCode.TESTS_FAILED if failed else pytest.ExitCode.OK
