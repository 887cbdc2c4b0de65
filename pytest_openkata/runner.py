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
from pytest_openkata.sandbox import AgentCommand, Sandbox
from pytest_openkata.scenario import Scenario, ScenarioLoadError, load_scenario, read_description
from pytest_openkata.scoring import match_verdicts, scenario_totals

DEFAULT_RETRY = RetryPolicy()
NO_SANDBOX = "sandboxed scenarios need a sandbox provider, and none is configured"


class ScenarioFailure(Exception):
    """Raised inside the runner for an error that ends the scenario; its text is reported,
    with what a timed-out agent printed and changed when there is any."""

    def __init__(self, message: str, agent_output: str | None = None) -> None:
        super().__init__(message)
        self.agent_output = agent_output


@dataclass(frozen=True)
class SandboxSetup:
    """A sandbox provider and the agent command it runs for every sandboxed scenario."""

    sandbox: Sandbox
    agent: AgentCommand
    network: str  # used when the scenario names none
    timeout: float


@dataclass(frozen=True)
class Backends:
    agent: Completer
    judge: Completer
    retry: RetryPolicy = DEFAULT_RETRY
    sandbox: Callable[[], SandboxSetup] | None = None
    # For agents that work inside a folder prepared from the skill (kiro's agent mode).
    agent_for_skill: Callable[[Path], Completer] | None = None

    def agent_of(self, skill_dir: Path) -> Completer:
        return self.agent if self.agent_for_skill is None else self.agent_for_skill(skill_dir)


def _run_in_sandbox(scenario: Scenario, prompt: str, backends: Backends) -> str:
    """The judge's text for a sandboxed scenario: the agent's output and workspace changes."""
    if backends.sandbox is None:
        raise ScenarioFailure(NO_SANDBOX)
    setup = backends.sandbox()
    run = call_with_retry(
        lambda: setup.sandbox.run(
            skill_dir=scenario.skill_dir,
            scenario_dir=scenario.path,
            network=scenario.network or setup.network,
            prompt=prompt,
            agent=setup.agent,
        ),
        backends.retry,
        describe="sandbox run",
    )
    name = setup.agent.name
    if run.timed_out:
        raise ScenarioFailure(
            f"sandbox: {name} timed out after {setup.timeout:g} s (its partial output and "
            "workspace changes are in the report's agent_output)",
            agent_output=run.judge_text,
        )
    if run.exit_code != 0:
        tail = run.output.strip().splitlines()[-5:]
        detail = ("\n" + "\n".join(tail)) if tail else ""
        raise ScenarioFailure(f"sandbox: {name}: exit status {run.exit_code}{detail}")
    return run.judge_text


def _judge_and_score(
    scenario_dir: Path,
    backends: Backends,
    *,
    skill: str,
    skill_dir: Path,
    redact: Callable[[str], str],
) -> ScenarioResult:
    scenario = load_scenario(scenario_dir)
    try:
        prompt = build_prompt(scenario.skill_dir, scenario.path)
    except FileNotFoundError as exc:
        raise ScenarioFailure(str(exc)) from exc
    if scenario.sandbox:
        try:
            response = _run_in_sandbox(scenario, prompt, backends)
        except BackendError as exc:
            raise ScenarioFailure(f"sandbox: {exc}") from exc
    else:
        try:
            agent = backends.agent_of(scenario.skill_dir)
            response = call_with_retry(
                lambda: agent.complete("", prompt), backends.retry, describe="agent call"
            )
        except BackendError as exc:
            raise ScenarioFailure(f"agent: {exc}") from exc
    response = redact(response)  # secrets the agent printed or wrote never reach the judge
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
        name=scenario_dir.name,
        description=scenario.description,
        criteria=criteria,
        score=score,
        max_score=max_score,
        percentage=pct,
        passed=passed,
    )


def error_result(
    scenario_dir: Path, skill: str, skill_dir: Path, error: str, agent_output: str | None = None
) -> ScenarioResult:
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
        agent_output=agent_output,
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
        result = _judge_and_score(
            scenario_dir, resolved, skill=skill, skill_dir=skill_dir, redact=redact
        )
    except (ScenarioLoadError, ScenarioFailure, BackendError) as exc:
        output = getattr(exc, "agent_output", None)
        return error_result(
            scenario_dir,
            skill,
            skill_dir,
            redact(str(exc)),
            agent_output=None if output is None else redact(output),
        )
    criteria = [replace(c, reason=redact(c.reason)) for c in result.criteria or ()]
    return replace(result, criteria=criteria)
