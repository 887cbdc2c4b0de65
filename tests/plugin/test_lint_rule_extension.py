"""Lint rules from another distribution: a class plus one entry point in the group
``pytest_openkata.lint_rules``, installed from a temporary folder, run by ``--eval-lint``
beside the built-in rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_openkata.core.lint import SCENARIO_RULES, SKILL_RULES
from tests.support.distributions import install_distribution
from tests.support.evals import criteria_json

HOUSE_RULES = '''\
"""A team's own rules: no ticket numbers in a task, and every skill names its owner."""

import os
import re

from pytest_openkata import Finding, ProviderSetting

PROJECT = ProviderSetting("project", str, "JIRA", "the ticket project a task must not name")


class NoTicketInTask:
    scope = "scenario"
    settings = (PROJECT,)

    def lint(self, folder, settings):
        if os.environ.get("HOUSE_RULES_BREAK"):
            raise RuntimeError("the ticket list is unreachable")
        project = PROJECT.value_in(settings, "lint_rules.no-ticket-in-task")
        task = (folder / "task.md").read_text()
        for number, line in enumerate(task.splitlines(), start=1):
            if re.search(rf"\\b{re.escape(project)}-[0-9]+", line):
                where = f"evals/{folder.name}/task.md"
                yield Finding("any", "warning", where, number, "a ticket number in the task")


class SkillHasOwner:
    scope = "skill"

    def lint(self, folder, settings):
        if "owner:" not in (folder / "SKILL.md").read_text():
            return [Finding("any", "error", "SKILL.md", 1, "name the skill's owner")]
        return []
'''

CLASH = """\
from pytest_openkata import Finding


class Weights:
    scope = "scenario"

    def lint(self, folder, settings):
        return [Finding("weights", "warning", "task.md", 1, "never shown")]
"""

SKILL_MD = "---\nname: notes\ndescription: Writes tidy notes. Use when asked for notes.\n---\n"


@pytest.fixture(scope="module")
def house_rules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_distribution(
        tmp_path_factory,
        "house-rules",
        HOUSE_RULES,
        {
            "pytest_openkata.lint_rules": {
                "no-ticket-in-task": "house_rules:NoTicketInTask",
                "skill-has-owner": "house_rules:SkillHasOwner",
            }
        },
    )


def _skill(root: Path, *, owner: bool = True) -> Path:
    skill = root / "skills" / "notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD + ("owner: docs team\n" if owner else "") + "# N\n")
    (skill / "CHANGELOG.md").write_text("# Changelog\n\n## [1.0.0] - 2026-11-01\n")
    for name, task in (
        ("scenario-0", "Write a note about the meeting on Monday.\n"),
        ("scenario-1", "Write a note about the outage.\nIt was filed as JIRA-4521.\n"),
    ):
        folder = skill / "evals" / name
        folder.mkdir(parents=True)
        (folder / "task.md").write_text(task)
        (folder / "criteria.json").write_text(criteria_json({"names-it": 100}, context="n"))
        (folder / "scenario.json").write_text(f'{{"description": "{name}", "sandbox": false}}')
    return skill


def test_an_installed_rule_runs_beside_the_built_in_ones_under_its_name(
    pytester: pytest.Pytester, house_rules: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(house_rules))
    _skill(pytester.path)

    result = pytester.runpytest_subprocess("--eval-lint", "skills", "-v")

    result.assert_outcomes(passed=3)
    # Each installed rule is a subtest of its scope's items, after the built-in ones.
    subtests = 2 * (len(SCENARIO_RULES) + 1) + len(SKILL_RULES) + 1
    result.stdout.fnmatch_lines([f"*3 passed, 1 warning, {subtests} subtests passed*"])
    # Its warning, as every lint warning: at its file and line, under its registered name.
    result.stdout.fnmatch_lines(
        [
            "*skills/notes/evals/scenario-1/task.md:2: EvalLintWarning: "
            "[[]no-ticket-in-task[]] a ticket number in the task",
        ]
    )
    assert "scenario-0/task.md" not in result.stdout.str()

    strict = pytester.runpytest_subprocess("--eval-lint", "--eval-lint-strict", "skills")

    strict.assert_outcomes(passed=2, failed=2)  # scenario-1's item and its rule's subtest
    strict.stdout.fnmatch_lines(
        ["*no-ticket-in-task*", "*evals/scenario-1/task.md:2: a ticket number in the task*"]
    )


def test_a_rule_reads_the_setting_it_declares_from_the_run(
    pytester: pytest.Pytester, house_rules: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(house_rules))
    skill = _skill(pytester.path)
    task = skill / "evals" / "scenario-0" / "task.md"
    task.write_text("Write a note about the meeting.\nIt was filed as OPS-17.\n")

    by_option = pytester.runpytest_subprocess(
        "--eval-lint", "skills", "--eval-lint-rules-no-ticket-in-task-project", "OPS"
    )
    pytester.makeini("[pytest]\neval_lint_rules_no_ticket_in_task_project = OPS\n")
    by_ini = pytester.runpytest_subprocess("--eval-lint", "skills")

    for result in (by_option, by_ini):
        # OPS-17 in scenario-0 is found; JIRA-4521 in scenario-1 no longer is.
        result.stdout.fnmatch_lines(
            ["*scenario-0/task.md:2: EvalLintWarning: [[]no-ticket-in-task[]] a ticket*"]
        )
        assert "scenario-1/task.md:2" not in result.stdout.str()
    help_text = pytester.runpytest_subprocess("--help").stdout.str()
    assert "--eval-lint-rules-no-ticket-in-task-project" in help_text
    assert "the ticket project a task must not name" in help_text


def test_an_installed_skill_rule_fails_the_skill_item_with_its_error(
    pytester: pytest.Pytester, house_rules: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(house_rules))
    _skill(pytester.path, owner=False)

    result = pytester.runpytest_subprocess("--eval-lint", "skills")

    result.assert_outcomes(passed=2, failed=2)  # the skill's item and its rule's subtest
    result.stdout.fnmatch_lines(["*skill-has-owner*", "*SKILL.md:1: name the skill's owner*"])


def test_a_rule_that_raises_is_an_error_naming_it_and_the_other_rules_still_run(
    pytester: pytest.Pytester, house_rules: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(house_rules))
    monkeypatch.setenv("HOUSE_RULES_BREAK", "1")
    _skill(pytester.path)

    result = pytester.runpytest_subprocess("--eval-lint", "skills", "-v")

    # The skill's item passes; each scenario's item fails, and its broken rule's subtest.
    result.assert_outcomes(passed=1, failed=4)
    output = result.stdout.str()
    assert (
        output.count(
            "the lint rule 'no-ticket-in-task' failed: RuntimeError: the ticket list is unreachable"
        )
        >= 2
    ), output
    # Only the broken rule failed: every other rule of the skill and both scenarios passed.
    passed = 2 * len(SCENARIO_RULES) + len(SKILL_RULES) + 1
    result.stdout.fnmatch_lines([f"*4 failed, 1 passed, {passed} subtests passed*"])


def test_a_rule_named_as_a_built_in_one_is_refused_with_that_reason(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    clash = install_distribution(
        tmp_path_factory,
        "clash-rules",
        CLASH,
        {"pytest_openkata.lint_rules": {"weights": "clash_rules:Weights"}},
    )
    monkeypatch.setenv("PYTHONPATH", str(clash))
    skill = _skill(pytester.path)
    criteria = skill / "evals" / "scenario-0" / "criteria.json"
    criteria.write_text(criteria_json({"names-it": 90}, context="n"))

    result = pytester.runpytest_subprocess("--eval-lint", "skills")

    result.assert_outcomes(passed=1, failed=4)  # each scenario's item and the clash's subtest
    output = result.stdout.str()
    assert "the lint rule 'weights' has the name of a built-in rule" in output
    assert "never shown" not in output
    # The built-in rule of that name still ran: its finding stands beside the refusal.
    assert "sum=90 (expected 100)" in output
