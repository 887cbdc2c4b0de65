"""The deterministic checks of ``checks.json``, a grader beside the judge.

Each check gives an exact verdict (:mod:`pytest_openkata.core.checks`) on the trial's
evidence: the agent's final output, and for a sandboxed scenario the workspace before the
agent ran, the diff and the outcome of the command checks, which the core ran in the sandbox
after the agent (:mod:`pytest_openkata.core.sandboxed`). No check reaches the judge. A check
that cannot give a verdict errors the trial, naming ``checks.json`` and the check.

A re-judged trial (:mod:`pytest_openkata.core.recorded`) has no workspace, only its recorded
output and transcript: the checks that read the workspace keep the verdicts the recorded run
gave them, and one it gave none errors the trial.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, replace
from typing import TYPE_CHECKING

from pytest_openkata.contracts.results import SCENARIO_ERROR, CriterionResult
from pytest_openkata.core.activation import names_of
from pytest_openkata.core.checks import Check, CheckError, Evidence, evaluate_check
from pytest_openkata.core.scenario import CHECKS_FILE, Scenario
from pytest_openkata.core.workspace import workspace_files
from pytest_openkata.providers.graders import GradeError, Grading, GradingTask


def workspace_before(scenario: Scenario) -> dict[str, bytes]:
    """The workspace's files as the snapshot before the agent holds them: the task and the
    inputs (the skill's folder is a tool folder, left out of snapshots and diffs)."""
    return dict(workspace_files(scenario.skill_dir, scenario.path, skill=False))


def _skill_names(scenario: Scenario) -> tuple[str, ...]:
    """The names the skill goes by, read only for a scenario that checks its activation."""
    if any(check.type == "skill_activated" for check in scenario.checks):
        return names_of(scenario.skill_dir)
    return ()


def _recorded(verdicts: Mapping[str, CriterionResult], check: Check, where: str) -> CriterionResult:
    """A re-judged trial's verdict of a check that reads the workspace: the recorded one (a
    run log keeps the workspace only as diffs, which no check can read again)."""
    recorded = verdicts.get(check.name)
    if recorded is None or recorded.max_score != check.max_score:
        raise GradeError(
            f"{where}: reads the workspace, which a run log does not keep: a re-judged trial "
            "takes its verdict from the recorded run, which has none for it (the check is new, "
            "its points changed, checks.json changed since, or the trial was not graded)",
            kind=SCENARIO_ERROR,
        )
    return recorded


class ChecksGrader:
    """Grades ``checks.json``'s checks; a scenario without checks makes it do nothing."""

    name = "checks"
    order = 10

    def grade(self, task: GradingTask) -> Grading:
        scenario = task.scenario
        if not scenario.checks:
            return Grading()
        agent = task.agent
        evidence = Evidence(
            output=agent.output,
            before=workspace_before(scenario) if scenario.sandbox else None,
            diff=agent.changes,
            commands=task.commands,
            transcript=agent.transcript,
            skills=_skill_names(scenario),
            agent=task.context.agent_name,
        )
        redact = task.context.redact
        results = []
        for index, check in enumerate(scenario.checks):
            where = f"{CHECKS_FILE}: [{index}] ({check.name!r})"
            if task.recorded_checks is not None and check.reads_workspace:
                results.append(_recorded(task.recorded_checks, check, where))
                continue
            try:
                result = evaluate_check(check, evidence)
            except CheckError as exc:
                raise GradeError(redact(f"{where}: {exc}"), kind=exc.kind) from exc
            # A command's output can echo a secret of the environment.
            results.append(replace(result, reason=redact(result.reason)))
        answers = [
            {"check": name, **asdict(outcome)} for name, outcome in sorted(task.commands.items())
        ]
        return Grading(results, answers=answers)


if TYPE_CHECKING:  # the protocol this provider implements, checked by mypy
    from pytest_openkata.providers.graders import Grader

    _implements: type[Grader] = ChecksGrader
