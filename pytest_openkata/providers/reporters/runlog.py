"""The run log reporter: every run, complete or not, leaves one JSON Lines file.

The log goes under the ``log_dir`` setting (relative to the rootdir; default
``.openkata/runs``), named by the run's UTC time, written atomically and never over another
log (a second run in the same second gets ``-2``). Only the newest ``log_keep`` logs of the
folder are kept. Its format is :mod:`pytest_openkata.core.runlog`; :func:`logged_run` gives
the same run to the reporters that render it (HTML, Markdown, CSV), so that a report rendered
during the run and one rendered from its log afterwards show the same thing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_openkata.core.runlog import (
    LoggedRun,
    RunInfo,
    log_lines,
    parse_run_log,
    relative_skill_dir,
)
from pytest_openkata.infra.atomic import write_new_report
from pytest_openkata.infra.config import EvalSettings
from pytest_openkata.providers.reporters import RunReport

__all__ = [
    "LOG_NAME",
    "RunLogReporter",
    "log_folder",
    "logged_run",
    "logs_newest_first",
    "run_info",
    "run_settings",
]

_STAMP = "%Y%m%dT%H%M%SZ"
LOG_NAME = re.compile(r"(?P<stamp>[0-9]{8}T[0-9]{6}Z)(?:-(?P<n>[0-9]+))?\.jsonl")
"""The name of a run log: its UTC time, then ``-N`` for the Nth log of the same second."""


def run_settings(settings: EvalSettings) -> dict[str, Any]:
    """The settings a run log records: what ran and how, never a secret or a machine path."""
    return {
        "agent": settings.backend,
        "model": settings.model,
        "model_label": settings.model_label,
        "judge": settings.judge_backend or settings.backend,
        "judge_model": settings.judge_model or settings.model,
        "trials": settings.trials,
        "judge_votes": settings.judge_votes,
        "baseline": settings.baseline,
        "sandbox_agent": settings.sandbox.agent,
        "sandbox_image": settings.sandbox.image,
        "cache": settings.cache,
        "category": settings.category,
    }


def run_info(run: RunReport) -> RunInfo:
    return RunInfo(
        finished_at=run.finished_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        complete=run.complete,
        threshold=run.settings.threshold,
        settings=run_settings(run.settings),
    )


def _log_text(run: RunReport) -> str:
    text = run.views.get("log text")
    if text is None:
        results = [result for summary in run.summaries for result in summary.results]
        text = run.views["log text"] = log_lines(
            run_info(run), results, run.rootdir, run.log_extras
        )
    return str(text)


def logged_run(run: RunReport) -> LoggedRun:
    """The run as its log holds it (read back from the log's text), made once per run and
    shared by every reporter that renders it."""
    logged = run.views.get("logged run")
    if logged is None:
        logged = run.views["logged run"] = parse_run_log(_log_text(run), source="this run's log")
    assert isinstance(logged, LoggedRun)
    return logged


def log_folder(settings: EvalSettings, rootdir: Path) -> Path | None:
    """Where run logs go (None: ``log_dir`` is off)."""
    if not settings.log_dir:
        return None
    return rootdir / Path(settings.log_dir).expanduser()


def logs_newest_first(folder: Path) -> list[Path]:
    """The run logs of ``folder`` (files named as logs are), the newest first."""
    found = []
    for path in folder.iterdir():
        match = LOG_NAME.fullmatch(path.name)
        if match and path.is_file():
            found.append(((match["stamp"], int(match["n"] or 1)), path))
    return [path for _key, path in sorted(found, reverse=True)]


def prune_logs(folder: Path, keep: int) -> None:
    """Delete all but the newest ``keep`` run logs of ``folder`` (other files are left)."""
    for old in logs_newest_first(folder)[keep:]:
        old.unlink(missing_ok=True)


class RunLogReporter:
    """Writes the run's log (see the module docstring) and records where on the run."""

    name = "run_log"
    order = 5

    def report(self, run: RunReport) -> None:
        folder = log_folder(run.settings, run.rootdir)
        if folder is None:
            return
        path = folder / f"{run.finished_at.strftime(_STAMP)}.jsonl"
        try:
            run.written["run log"] = write_new_report(path, _log_text(run), removed=run.removed)
            prune_logs(folder, run.settings.log_keep)
        except OSError as exc:
            shown = relative_skill_dir(folder, run.rootdir)  # no machine path on the terminal
            problem = f"could not write the run log under {shown}: {exc.strerror or exc}"
            run.errors.append(problem)


if TYPE_CHECKING:  # the protocol this provider implements, checked by mypy
    from pytest_openkata.providers.reporters import Reporter

    _implements: type[Reporter] = RunLogReporter
