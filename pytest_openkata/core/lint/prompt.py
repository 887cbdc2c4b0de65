"""The prompt's rule: ``prompt-size``, a prompt over the context budget."""

from __future__ import annotations

from pytest_openkata.core.lint.context import ScenarioFiles
from pytest_openkata.core.lint.findings import TASK_FILE, Finding
from pytest_openkata.core.prompt_size import over_budget, prompt_size


def prompt_size_rule(scenario: ScenarioFiles) -> list[Finding]:
    """The scenario's prompt (the skill's part, its task and inputs, as a run builds it) is
    within the ``context_budget`` setting's estimated tokens; over it, a warning that names
    its largest parts. Found at task.md, the scenario's own part of the prompt."""
    said = over_budget(prompt_size(scenario.skill_dir, scenario.path), scenario.context_budget)
    if said is None:
        return []
    return [Finding("prompt-size", "warning", scenario.file(TASK_FILE), None, said)]
