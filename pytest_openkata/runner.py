"""One scenario from folder to result: load -> prompt -> agent -> judge -> score.

Every failure becomes data (an errored :class:`ScenarioResult`), never an exception, so that
the caller decides how to show it and the controller can still count it as 0 %.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from pytest_openkata.backends import BackendError, Completer
from pytest_openkata.judge import JudgeError, run_judge
from pytest_openkata.prompt import build_prompt
from pytest_openkata.results import ScenarioResult
from pytest_openkata.retry import RetryPolicy, call_with_retry
from pytest_openkata.scenario import ScenarioLoadError, load_scenario, read_description
from pytest_openkata.scoring import match_verdicts, scenario_totals

DEFAULT_RETRY = RetryPolicy()
SANDBOX_NOT_IMPLEMENTED = (
    'sandbox not implemented: sandboxed scenarios (scenario.json "sandbox": true, the '
    "default) are not supported by this version of pytest-openkata yet"
)


class ScenarioFailure(Exception):
    """Raised inside the runner for an error that ends the scenario; its text is reported."""


@dataclass(frozen=True)
class Backends:
    agent: Completer
    judge: Completer
    retry: RetryPolicy = DEFAULT_RETRY


def _judge_and_score(
    scenario_name: str, skill: str, skill_dir: Path, backends: Backends, scenario_dir: Path
) -> ScenarioResult:
    scenario = load_scenario(scenario_dir)
    try:
        prompt = build_prompt(scenario.skill_dir, scenario.path)
    except FileNotFoundError as exc:
        raise ScenarioFailure(str(exc)) from exc
    if scenario.sandbox:
        raise ScenarioFailure(SANDBOX_NOT_IMPLEMENTED)
    try:
        response = call_with_retry(
            lambda: backends.agent.complete("", prompt), backends.retry, describe="agent call"
        )
    except BackendError as exc:
        raise ScenarioFailure(f"agent: {exc}") from exc
    try:
        verdicts = run_judge(
            backends.judge, response, scenario.context, scenario.criteria, retry=backends.retry
        )
    except JudgeError as exc:
        raise ScenarioFailure(f"judge: {exc}") from exc
    criteria = match_verdicts(scenario.criteria, verdicts)
    score, max_score, pct, passed = scenario_totals(criteria)
    return ScenarioResult(
        skill=skill,
        skill_dir=str(skill_dir),
        name=scenario_name,
        description=scenario.description,
        criteria=criteria,
        score=score,
        max_score=max_score,
        percentage=pct,
        passed=passed,
    )


def error_result(scenario_dir: Path, skill: str, skill_dir: Path, error: str) -> ScenarioResult:
    """The reference's errored result (0 %, ``criteria: null``) plus an explicit error."""
    description = read_description(scenario_dir)
    return ScenarioResult(
        skill=skill,
        skill_dir=str(skill_dir),
        name=scenario_dir.name,
        description=f"{description} (error: {error})",
        criteria=None,
        score=0,
        max_score=0,
        percentage=0.0,
        passed=False,
        error=error,
    )


def run_scenario(
    scenario_dir: Path,
    backends: Backends | Callable[[], Backends],
    *,
    skill_dir: Path | None = None,
    skill: str | None = None,
    redact: Callable[[str], str] = lambda text: text,
) -> ScenarioResult:
    """Run one scenario and return its result; errors are returned as errored results.

    ``backends`` may be a factory, so that a backend that cannot be built (no base URL, no
    agent CLI) errors the scenarios that need it, like any other agent failure.
    """
    skill_dir = skill_dir or scenario_dir.parent.parent
    skill = skill or skill_dir.name
    try:
        resolved = backends() if callable(backends) else backends
        result = _judge_and_score(scenario_dir.name, skill, skill_dir, resolved, scenario_dir)
    except (ScenarioLoadError, ScenarioFailure, BackendError) as exc:
        return error_result(scenario_dir, skill, skill_dir, redact(str(exc)))
    criteria = [replace(c, reason=redact(c.reason)) for c in result.criteria or ()]
    return replace(result, criteria=criteria)
