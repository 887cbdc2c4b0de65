"""The run log reporter: every run, complete or not, leaves one JSON Lines file.

The log goes under the ``log_dir`` setting (relative to the rootdir; default
``.openkata/runs``), named by the run's UTC time, written atomically and never over another
log (a second run in the same second gets ``-2``). Only the newest ``log_keep`` logs of the
folder are kept. Its format is :mod:`pytest_openkata.core.runlog`; its text is the run's own
(:attr:`~pytest_openkata.core.reporting.Run.log_text`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pytest_openkata.core.reporting import ReportOutcome, Run
from pytest_openkata.core.runlog import log_folder, log_name, prune_logs, relative_skill_dir
from pytest_openkata.infra.atomic import write_new_report

__all__ = ["RunLogReporter"]


class RunLogReporter:
    """Writes the run's log (see the module docstring) and says where."""

    name = "run_log"

    def report(self, run: Run) -> ReportOutcome | None:
        folder = log_folder(run.settings, run.rootdir)
        if folder is None:
            return None
        removed: list[Path] = []
        try:
            target = folder / log_name(run.finished_at)
            path = write_new_report(target, run.log_text, removed=removed)
            prune_logs(folder, run.settings.log_keep)
        except OSError as exc:
            shown = relative_skill_dir(folder, run.rootdir)  # no machine path on the terminal
            problem = f"could not write the run log under {shown}: {exc.strerror or exc}"
            return ReportOutcome(errors=(problem,), removed=tuple(removed))
        return ReportOutcome(written={"run log": path}, removed=tuple(removed))


if TYPE_CHECKING:  # the protocol this provider implements, checked by mypy
    from pytest_openkata.core.reporting import Reporter

    _implements: type[Reporter] = RunLogReporter
