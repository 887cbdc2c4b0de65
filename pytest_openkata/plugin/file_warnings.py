"""What a run says about a skill's files before it runs them: said while collecting, for every
scenario collected (also one that ``-k``, ``-m`` or ``--deselect`` then leaves out), and said
again in a section of the terminal summary, which ``--disable-warnings`` does not hide.

Each is an :class:`~pytest_openkata.core.lint.EvalLintWarning` with the lint rule's words:
unknown keys of ``scenario.json`` and ``criteria.json``, the scaffold's placeholders left in
the skill or a scenario, and the files ``SKILL.md`` links to that never reach the prompt.
``-W error::pytest_openkata.EvalLintWarning`` makes them collection errors (as pytest's own
collection warnings), ``-W ignore::…`` silences both places. A key that misspells
``sandbox`` is more than a warning: its scenario errors when it runs (see
:data:`~pytest_openkata.core.scenario.KIND_UNTRUSTED`).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_openkata.infra.text import visible
from pytest_openkata.plugin.lint import warn_findings

__all__ = ["FileWarnings", "warn_about_files"]

SECTION = "openkata: check these files"


def warn_about_files(
    config: pytest.Config, skill_dir: Path, scenarios: Sequence[Path]
) -> dict[Path, bytes]:
    """The skill's findings (unreached links, placeholders in SKILL.md) and each collected
    scenario's (unknown keys, placeholders) as warnings at their file and line. Returns the
    scenario.json of each scenario that has one the rules could read, by scenario folder, so
    that collection reads no file twice."""
    from pytest_openkata.core.lint import skill_placeholders, unreached_skill_files
    from pytest_openkata.core.lint.context import ScenarioFiles
    from pytest_openkata.core.lint.findings import OPTIONS_FILE
    from pytest_openkata.core.lint.keys import unknown_keys_rule
    from pytest_openkata.core.lint.placeholders import placeholders_rule

    findings = [*unreached_skill_files(skill_dir), *skill_placeholders(skill_dir)]
    options: dict[Path, bytes] = {}
    for scenario_dir in scenarios:
        scenario = ScenarioFiles(scenario_dir, None)  # both rules read the same files
        findings += [*unknown_keys_rule(scenario), *placeholders_rule(scenario)]
        content = scenario.content(OPTIONS_FILE)
        if content is not None:
            options[scenario_dir] = content
    warn_findings(findings, skill_dir, config.rootpath)
    return options


class FileWarnings:
    """Repeats every ``EvalLintWarning`` of the run, once each, in its own section at the end
    of the terminal summary. It reads them from ``pytest_warning_recorded``, which xdist also
    calls on the controller for its workers' warnings."""

    def __init__(self) -> None:
        self.lines: dict[str, None] = {}  # in the order first seen, without repeats

    def pytest_warning_recorded(self, warning_message: warnings.WarningMessage) -> None:
        # Every lint warning is raised by the linter's code: before it is loaded there is none
        # (the plugin does not load it for runs that collect no scenario).
        lint = sys.modules.get("pytest_openkata.core.lint")
        if lint is None:
            return
        category = warning_message.category
        if not (isinstance(category, type) and issubclass(category, lint.EvalLintWarning)):
            return
        where = warning_message.filename
        if warning_message.lineno:
            where += f":{warning_message.lineno}"
        self.lines[f"{where}: {warning_message.message}"] = None

    @pytest.hookimpl(trylast=True)  # after the skills' results
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.lines:
            return
        terminalreporter.write_sep("=", SECTION, yellow=True)
        for line in self.lines:
            terminalreporter.write_line(visible(line), yellow=True)
