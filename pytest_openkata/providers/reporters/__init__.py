"""Reporters: write the skill summaries of a run somewhere.

Every registered reporter gets the same :class:`RunReport` once the run is over: the skill
summaries (:class:`~pytest_openkata.core.summary.SkillSummary`, with every scenario's
:class:`~pytest_openkata.contracts.results.ScenarioResult`), the settings and the finishing time.
Reporters run in the order of their ``order`` attribute, then of their names: the results JSON
reporter (0) records where it wrote each skill's report on its summary, so that reporters after
it (the terminal, 100) can show it. A reporter that cannot write records the reason rather than
raising, where the run's outcome should say so: on the skill's summary (``report_error``) for a
skill's own report, on the run (``errors``) for a file of the whole run.

Reporters are registered under the entry-point group ``pytest_openkata.reporters``; each entry
point names a class whose instances take no arguments. The built-ins are ``results_json``,
``junit``, ``run_log`` and ``terminal``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from pytest_openkata.core.summary import SkillSummary
from pytest_openkata.infra.config import EvalSettings

__all__ = [
    "TERMINAL_REPORTER",
    "Reporter",
    "RunReport",
    "Segment",
    "TerminalOutput",
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
class RunReport:
    """What every reporter gets. ``complete`` is False for a run that was interrupted or
    stopped by an error of its own (no results JSON is written then, but a run log is);
    ``junit_xml`` is the JUnit file pytest wrote, if any; ``terminal`` is None where nothing
    is shown."""

    summaries: Sequence[SkillSummary]
    settings: EvalSettings
    finished_at: datetime
    rootdir: Path
    complete: bool = True
    junit_xml: Path | None = None
    terminal: TerminalOutput | None = None
    # Further records for the run log, by kind (a comparison with an earlier run).
    log_extras: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)
    # The files reporters wrote besides each skill's results JSON, by what they are ("run
    # log", "HTML report"), for the terminal to list.
    written: dict[str, Path] = field(default_factory=dict)
    # What a reporter could not do for the whole run (a file it could not write): the run
    # fails, and the terminal says each once.
    errors: list[str] = field(default_factory=list)
    # The temporary files of killed runs removed from the cache and the folders written to,
    # for the terminal to list (see ``infra.tempfiles``).
    removed: list[Path] = field(default_factory=list)
    # What several reporters derive from the run, made once and shared (the run log's text,
    # the run read back from it: see ``runlog.logged_run``).
    views: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


class Reporter(Protocol):
    """Writes a run's summaries somewhere; see the module docstring."""

    name: str
    order: int

    def report(self, run: RunReport) -> None: ...


def reporters() -> list[Reporter]:
    """One instance of every registered reporter, in the order they run."""
    from pytest_openkata.infra import registry

    made: list[Reporter] = [registry.REPORTERS.load(name)() for name in registry.REPORTERS.names()]
    return sorted(made, key=lambda reporter: (reporter.order, reporter.name))


def report_run(run: RunReport) -> None:
    """Hand ``run`` to every registered reporter in turn. A reporter that raises does not stop
    the others, nor the run's summary and gate: its failure is one of the run's ``errors``
    (the run fails, saying which reporter), and its traceback goes to standard error. What
    reporters after the terminal's could not write is still said on the terminal."""
    import sys
    import traceback

    shown: int | None = None  # the run's errors the terminal reporter has shown
    for reporter in reporters():
        try:
            reporter.report(run)
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            run.errors.append(f"the {reporter.name} reporter failed: {type(exc).__name__}: {exc}")
        if reporter.name == TERMINAL_REPORTER:
            shown = len(run.errors)
    if shown is not None and run.terminal is not None and len(run.errors) > shown:
        from pytest_openkata.infra.text import visible

        run.terminal.write_lines(
            [[(visible(f"Not written: {error}"), "red")] for error in run.errors[shown:]]
        )
