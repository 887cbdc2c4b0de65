"""The reporter contract: one frozen :class:`Run` that every reporter reads, and what each
reporter gives back.

A run's reports are made in three steps, none of which changes what an earlier one made:

1. :func:`make_run` builds the :class:`Run` before any reporter runs: the skill summaries, each
   with its comparison with an earlier run and, where its results JSON is held back or not
   written at all, why (so every reporter sees the same decisions), the settings, the finishing
   time. The run as its log holds it (:attr:`Run.logged`) is made from the same data, once, on
   first use: HTML, Markdown and CSV render it, so a report rendered during the run and one
   rendered from its log afterwards show the same thing.
2. Every registered reporter but the terminal's is a function of that ``Run``: it writes its
   files and returns a :class:`ReportOutcome` (what it wrote, what it could not), in any order.
   A reporter that raises does not stop the others: its failure is one of the run's errors.
3. The outcomes are joined into the finished run (:meth:`Run.finished`: every skill's report
   path or error), which the terminal's reporter shows and the run's gate reads.

Reporters are registered under the entry-point group ``pytest_openkata.reporters``; each entry
point names a class whose instances take no arguments. The built-ins are ``results_json``,
``junit``, ``run_log``, ``html``, ``markdown``, ``csv`` and ``terminal``.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pytest_openkata.core.summary import SkillSummary

if TYPE_CHECKING:
    from pytest_openkata.contracts.config import EvalSettings
    from pytest_openkata.core.manifest import Drift, Manifest
    from pytest_openkata.core.recorded import RecordedRun
    from pytest_openkata.core.runlog import LoggedRun, ScenarioLines

__all__ = [
    "TERMINAL_REPORTER",
    "ReportOutcome",
    "Reporter",
    "Run",
    "Segment",
    "TerminalOutput",
    "make_run",
    "report_run",
    "reporters",
]

TERMINAL_REPORTER = "terminal"  # the reporter that shows what the others did

Segment = tuple[str, str | None]
"""A piece of a terminal line and its colour name (``green``, ``red``, ``yellow``, or None)."""


class TerminalOutput(Protocol):
    """Where terminal lines go: pytest's terminal writer, or any stream."""

    def write_lines(self, lines: Sequence[Sequence[Segment]]) -> None: ...


@dataclass(frozen=True)
class ReportOutcome:
    """What one reporter did: the files of the whole run it wrote, by what they are (``run
    log``, ``HTML report``); each skill's results JSON written, by skill folder; what it could
    not write, for the whole run (``errors``) or for one skill (``skill_errors``, by skill
    folder); the temporary files of killed runs it removed from the folders it wrote to."""

    written: Mapping[str, Path] = field(default_factory=dict)
    skill_reports: Mapping[Path, Path] = field(default_factory=dict)
    errors: tuple[str, ...] = ()
    skill_errors: Mapping[Path, str] = field(default_factory=dict)
    removed: tuple[Path, ...] = ()

    def __add__(self, other: ReportOutcome) -> ReportOutcome:
        return ReportOutcome(
            written={**self.written, **other.written},
            skill_reports={**self.skill_reports, **other.skill_reports},
            errors=self.errors + other.errors,
            skill_errors={**other.skill_errors, **self.skill_errors},  # the first one stays
            removed=self.removed + other.removed,
        )


@dataclass(frozen=True)
class Run:
    """What every reporter gets. ``complete`` is False for a run that was interrupted or
    stopped by an error of its own (no results JSON is written then, but a run log is);
    ``junit_xml`` is the JUnit file pytest wrote, if any; ``terminal`` is None where nothing
    is shown; ``log_extras`` the run log's further records by kind (a comparison with an
    earlier run). ``written``, ``errors`` and ``removed`` hold what was done before the
    reporters (a shard's file, the temporary files of killed runs swept from the cache) and,
    in the finished run, what the reporters did. ``manifest`` is what the run ran with
    (:mod:`pytest_openkata.core.manifest`), recorded in its log and results JSONs."""

    summaries: tuple[SkillSummary, ...]
    settings: EvalSettings
    finished_at: datetime
    rootdir: Path
    complete: bool = True
    junit_xml: Path | None = None
    terminal: TerminalOutput | None = field(default=None, compare=False)
    log_extras: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)
    written: Mapping[str, Path] = field(default_factory=dict)
    errors: tuple[str, ...] = ()
    removed: tuple[Path, ...] = ()
    # The recorded run this one graded again (``RecordedRun.rejudged_from``), or None.
    rejudged_from: Mapping[str, Any] | None = None
    manifest: Manifest | None = None
    # The file name of the live log the run kept while it ran ("" for none).
    live_log: str = ""
    # The scenarios' log lines the live log already rendered, reused by ``log_text``.
    rendered: ScenarioLines | None = field(default=None, compare=False, repr=False)

    @cached_property
    def log_text(self) -> str:
        """The run's log, as the run log reporter writes it."""
        from pytest_openkata.core.runlog import log_lines, run_info

        results = [result for summary in self.summaries for result in summary.results]
        info = run_info(
            self.settings,
            self.finished_at,
            complete=self.complete,
            rejudged_from=self.rejudged_from,
            manifest=self.manifest,
            live_log=self.live_log,
        )
        return log_lines(info, results, self.rootdir, self.log_extras, rendered=self.rendered)

    def skill_manifest(self, skill_dir: Path) -> Manifest | None:
        """The run's manifest of one skill (its results JSON's), None without a manifest."""
        if self.manifest is None:
            return None
        from pytest_openkata.core.runlog import relative_skill_dir

        return self.manifest.for_skill(relative_skill_dir(skill_dir, self.rootdir))

    @cached_property
    def logged(self) -> LoggedRun:
        """The run as its log holds it: what a reader of the log gets back."""
        from pytest_openkata.core.runlog import parse_run_log

        return parse_run_log(self.log_text, source="this run's log")

    def finished(self, outcome: ReportOutcome) -> Run:
        """This run with what the reporters did: every skill's report path, or why it was
        not written."""
        summaries = tuple(
            replace(
                summary,
                report_path=outcome.skill_reports.get(summary.skill_dir, summary.report_path),
                report_error=summary.report_error or outcome.skill_errors.get(summary.skill_dir),
            )
            for summary in self.summaries
        )
        return replace(
            self,
            summaries=summaries,
            written={**self.written, **outcome.written},
            errors=self.errors + outcome.errors,
            removed=self.removed + outcome.removed,
        )


class Reporter(Protocol):
    """Writes what it reports of a :class:`Run`; see the module docstring. ``report`` may
    return None for "wrote nothing"."""

    name: str

    def report(self, run: Run) -> ReportOutcome | None: ...


def make_run(
    summaries: Sequence[SkillSummary],
    settings: EvalSettings,
    finished_at: datetime,
    rootdir: Path,
    *,
    drifts: Sequence[Drift] = (),
    rejudged: RecordedRun | None = None,
    **details: Any,
) -> Run:
    """The run every reporter reads: its manifest; each skill's arms checked for drift (a
    baseline arm), each skill compared with the earlier run (the ``compare`` setting) and its
    results JSON's fate decided (held back, not written), before any reporter runs. ``drifts``
    are the whole run's (a merge's, between its shards); a re-judging run (``rejudged``: the
    recorded run whose answers it graded again) is checked for drift from that run's manifest
    and says where its answers came from; ``details`` are the other fields of :class:`Run`."""
    from pytest_openkata import _version
    from pytest_openkata.core.drift import with_arm_drift, with_run_drift
    from pytest_openkata.core.manifest import REJUDGE, compare_manifests
    from pytest_openkata.core.report_paths import with_report_decisions
    from pytest_openkata.core.run_manifest import build_manifest

    results = [result for summary in summaries for result in summary.results]
    manifest = build_manifest(settings, results, rootdir, _version.__version__)
    if rejudged is not None:
        drifts = (
            *drifts,
            compare_manifests(
                rejudged.info.manifest,
                manifest,
                comparison=REJUDGE,
                against=f"the recorded run {rejudged.log_name}",
                allowed=settings.allow_drift,
            ),
        )
        details["rejudged_from"] = rejudged.rejudged_from()
    compared, extras = with_run_drift(summaries, drifts)
    compared, arm_extras = with_arm_drift(compared, settings, rootdir)
    extras = _joined(extras, arm_extras)
    if settings.compare:  # the comparison's modules load only for a run that asks for it
        from pytest_openkata.core.earlier import compare_run

        compared, compare_extras = compare_run(compared, settings, rootdir, manifest)
        extras = _joined(extras, compare_extras)
    # An incomplete run writes no results JSON: there is nothing to hold back.
    complete = details.get("complete", True)
    decided = (
        with_report_decisions(compared, settings, finished_at, rootdir) if complete else compared
    )
    return Run(
        summaries=tuple(decided),
        settings=settings,
        finished_at=finished_at,
        rootdir=rootdir,
        log_extras=_joined(details.pop("log_extras", {}), extras),
        manifest=manifest,
        **details,
    )


def _joined(
    first: Mapping[str, list[dict[str, Any]]], second: Mapping[str, list[dict[str, Any]]]
) -> dict[str, list[dict[str, Any]]]:
    """Extra records by kind, those of ``first`` before those of ``second``."""
    joined = {kind: list(records) for kind, records in first.items()}
    for kind, records in second.items():
        joined.setdefault(kind, []).extend(records)
    return joined


def reporters() -> list[Reporter]:
    """One instance of every registered reporter, by name."""
    from pytest_openkata.infra import registry

    return [registry.REPORTERS.load(name)() for name in registry.REPORTERS.names()]


def report_run(run: Run) -> Run:
    """Hand ``run`` to every registered reporter, the terminal's last with what the others
    did, and give back the finished run. A reporter that raises does not stop the others, nor
    the run's summary and gate: its failure is one of the run's ``errors`` (the run fails,
    saying which reporter), and its traceback goes to standard error."""
    outcome = ReportOutcome()
    terminal: list[Reporter] = []
    for reporter in reporters():
        if reporter.name == TERMINAL_REPORTER:
            terminal.append(reporter)
            continue
        outcome += _outcome_of(reporter, run)
    done = run.finished(outcome)
    for reporter in terminal:
        failed = _outcome_of(reporter, done)
        done = done.finished(failed)
        if failed.errors and done.terminal is not None:
            from pytest_openkata.infra.text import visible

            done.terminal.write_lines(
                [[(visible(f"Not written: {error}"), "red")] for error in failed.errors]
            )
    return done


def _outcome_of(reporter: Reporter, run: Run) -> ReportOutcome:
    try:
        return reporter.report(run) or ReportOutcome()
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        return ReportOutcome(
            errors=(f"the {reporter.name} reporter failed: {type(exc).__name__}: {exc}",)
        )
