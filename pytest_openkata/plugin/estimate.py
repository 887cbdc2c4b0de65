"""The dry run (``--eval-estimate``): collect, build every prompt, and show the estimated
tokens and cost of the run per skill and in total, with no model call, no sandbox and no
report (see :mod:`pytest_openkata.core.estimate`).

The run is collected as a run that evaluates is (``-k``, ``-m``, ``--eval-category`` and
``--eval-shard`` select alike), in this one process: ``-n`` starts no worker, since a dry run
has nothing to spread. No item runs; the exit status is 0 unless collection failed (then it
is pytest's).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.errors import OpenkataError
from pytest_openkata.infra.text import visible
from pytest_openkata.plugin.items import ScenarioItem


def run_in_this_process(config: pytest.Config) -> None:
    """Start no xdist worker: a dry run collects and shows, in the process that was started.
    (``dist`` is xdist's own command-line option, which it reads when it configures.)"""
    if getattr(config.option, "dist", "no") != "no":
        config.option.dist = "no"


class Estimate:
    """Estimates the collected scenarios instead of running them."""

    def __init__(self, settings: EvalSettings) -> None:
        self.settings = settings
        self.lines: list[str] = []

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from pytest_openkata.core.estimate import estimate_lines, estimate_run
        from pytest_openkata.core.run import registered_graders

        folders: list[tuple[Path, Path]] = []
        for item in session.items:
            if not isinstance(item, ScenarioItem):
                continue
            try:
                folder, _shown = item.runnable()
            except OpenkataError:
                folder = item.scenario_dir  # estimated as it is: its error is said
            folders.append((item.skill_dir, folder))
        from pytest_openkata.core.recorded import recorded_run

        rootdir = session.config.rootpath
        recorded = recorded_run(self.settings, rootdir)  # read at configure time: it can be
        estimate = estimate_run(folders, self.settings, registered_graders(), recorded)
        self.lines = estimate_lines(
            estimate, lambda skill: Path(os.path.relpath(skill, rootdir)).as_posix()
        )

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        """Nothing runs; a collection error stops the run as pytest stops it."""
        if session.testsfailed and not session.config.option.continue_on_collection_errors:
            return None  # pytest's own loop says so
        return True

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        terminalreporter.write_sep("=", "openkata cost estimate")
        for line in self.lines:
            terminalreporter.write_line(visible(line))
