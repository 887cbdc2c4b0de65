"""What a run says about a skill's files before it runs them: the skill's own (SKILL.md) while
collecting, each scenario's when that scenario is about to run (collection reads no scenario
file), and all of them again in a section of the terminal summary, which
``--disable-warnings`` does not hide.

Each is an :class:`~pytest_openkata.core.lint.EvalLintWarning` with the lint rule's words:
unknown keys of ``scenario.json`` and ``criteria.json``, the scaffold's placeholders left in
the skill or a scenario, the files ``SKILL.md`` links to that never reach the prompt, and a
prompt over the ``context_budget`` (before any model is paid to read it).
``-W error::pytest_openkata.EvalLintWarning`` makes a skill's a collection error (as pytest's
own collection warnings) and a scenario's an error of that scenario, ``-W ignore::…`` silences
both places. A key that misspells
``sandbox`` is more than a warning: its scenario errors when it runs (see
:data:`~pytest_openkata.core.scenario.KIND_UNTRUSTED`).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_openkata.infra.text import visible
from pytest_openkata.plugin.lint import warn_findings
from pytest_openkata.plugin.session import settings_key

if TYPE_CHECKING:
    from pytest_openkata.core.prompt_size import PromptBudget

__all__ = ["FileWarnings", "warn_about_scenario", "warn_about_skill"]

SECTION = "openkata: check these files"
_prompt_budget_key = pytest.StashKey["PromptBudget"]()


def warn_about_skill(config: pytest.Config, skill_dir: Path) -> None:
    """The skill's findings (unreached links, placeholders in SKILL.md) as warnings at their
    file and line: said while collecting, once per skill, before ``-k``, ``-m`` or
    ``--deselect`` leave any scenario out. Collection reads no scenario's file for them."""
    from pytest_openkata.core.lint import skill_placeholders, unreached_skill_files

    findings = [*unreached_skill_files(skill_dir), *skill_placeholders(skill_dir)]
    warn_findings(findings, skill_dir, config.rootpath)


def warn_about_scenario(config: pytest.Config, scenario_dir: Path) -> None:
    """The scenario's findings (unknown keys, placeholders, files beside task.md that never
    reach the agent, a prompt over the context budget) as warnings at their file and line:
    said when the scenario is about to run, in pytest's thread, so that they belong to the
    scenario's item (a scenario that ``-k``, ``-m`` or ``--deselect`` leaves out is not read,
    and ``--eval-lint`` says them of every scenario)."""
    from pytest_openkata.core.lint import Finding, unreached_scenario_files
    from pytest_openkata.core.lint.context import ScenarioFiles
    from pytest_openkata.core.lint.findings import TASK_FILE
    from pytest_openkata.core.lint.keys import unknown_keys_rule
    from pytest_openkata.core.lint.placeholders import placeholders_rule

    scenario = ScenarioFiles(scenario_dir, None)  # both rules read the same files
    findings = [
        *unknown_keys_rule(scenario),
        *placeholders_rule(scenario),
        *unreached_scenario_files(scenario_dir),
    ]
    with_skill = config.stash[settings_key].skill_delivery == "prompt"  # else: installed
    over = _prompt_budget(config).over(scenario.skill_dir, scenario_dir, with_skill=with_skill)
    if over is not None:
        findings.append(Finding("prompt-size", "warning", scenario.file(TASK_FILE), None, over))
    warn_findings(findings, scenario.skill_dir, config.rootpath)


def _prompt_budget(config: pytest.Config) -> PromptBudget:
    """The run's check of prompt sizes, made on first use (each skill's part measured once)."""
    budget = config.stash.get(_prompt_budget_key, None)
    if budget is None:
        from pytest_openkata.core.prompt_size import PromptBudget

        budget = PromptBudget(config.stash[settings_key].context_budget)
        config.stash[_prompt_budget_key] = budget
    return budget


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
