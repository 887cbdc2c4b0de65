"""The results JSON reporter: writes each skill's report where the run decided.

The format is :mod:`pytest_openkata.core.results_json`; where a report goes, and whether it is
held back, is :mod:`pytest_openkata.core.report_paths`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pytest_openkata.core.report_paths import later_names, report_namer, report_prefixes
from pytest_openkata.core.reporting import ReportOutcome, Run
from pytest_openkata.core.results_json import render_report, skill_report
from pytest_openkata.infra.atomic import write_new_report

__all__ = ["ResultsJsonReporter"]


class ResultsJsonReporter:
    """Writes each skill's results JSON and says where, or why it could not be. A report
    whose scenarios errored for reasons outside the skill goes beside the run logs; a broken
    skill's is not written (see :mod:`pytest_openkata.core.report_paths`). An incomplete run
    writes none."""

    name = "results_json"

    def report(self, run: Run) -> ReportOutcome | None:
        if not run.complete:
            return None
        several = len(run.summaries) > 1
        prefixes = report_prefixes(run.summaries, run.rootdir)
        written: dict[Path, Path] = {}
        problems: dict[Path, str] = {}
        removed: list[Path] = []
        for summary, prefix in zip(run.summaries, prefixes, strict=True):
            namer = report_namer(summary, run.settings, run.rootdir, several=several, prefix=prefix)
            path = namer(run.finished_at)
            if path is None:
                continue
            manifest = run.skill_manifest(summary.skill_dir)
            text = render_report(skill_report(summary, run.settings, run.finished_at, manifest))
            later = later_names(namer, run.finished_at)
            try:
                written[summary.skill_dir] = write_new_report(path, text, later, removed=removed)
            except OSError as exc:
                problems[summary.skill_dir] = f"could not write {path}: {exc.strerror or exc}"
        return ReportOutcome(skill_reports=written, skill_errors=problems, removed=tuple(removed))


if TYPE_CHECKING:  # the protocol this provider implements, checked by mypy
    from pytest_openkata.core.reporting import Reporter

    _implements: type[Reporter] = ResultsJsonReporter
