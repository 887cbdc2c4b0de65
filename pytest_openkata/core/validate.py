"""Validating a scenario before a model is asked to pass it: can it be passed, and is it
passed by doing nothing?

A scenario may hold a reference solution in ``solution/``: ``solution/answer.md`` for a
direct scenario (used as the agent's output) or ``solution/solve.sh`` for a sandboxed one
(run with bash, else sh, in the sandbox workspace in place of the agent, with the rest of
``solution/`` beside it under :data:`SOLUTION_MOUNT`, removed once it exited, before the
checks run). The scenario's graders, the judge and the checks, must give the solution
100 %; and an agent that does nothing (an empty answer, no workspace change) must score below
:data:`EMPTY_AGENT_LIMIT`, or the criteria it passes on nothing are named.

Only the agent is replaced: the prompt, the sandbox, the graders and the scoring are those of
a real run, so a scenario that validates is graded the same way when a model runs it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pytest_openkata.contracts.backends import ResponseSchema
from pytest_openkata.contracts.errors import SUSPICIOUS_RESULT
from pytest_openkata.contracts.results import ScenarioResult
from pytest_openkata.contracts.sandboxes import AgentCommand
from pytest_openkata.core.files import files_under
from pytest_openkata.core.jsonfiles import ScenarioLoadError
from pytest_openkata.core.run import Backends, RunOptions, run_scenario
from pytest_openkata.core.sandboxed import SandboxSetup
from pytest_openkata.core.scenario import load_scenario_options
from pytest_openkata.core.slots import CallSlot

__all__ = [
    "EMPTY_AGENT",
    "EMPTY_AGENT_LIMIT",
    "SOLUTION",
    "SOLUTION_DIR",
    "SOLUTION_MOUNT",
    "Validation",
    "validate_scenario",
]

SOLUTION_DIR = "solution"
ANSWER_FILE = "answer.md"
SOLVE_SCRIPT = "solve.sh"
# Where the solution folder is in the sandbox workspace; like an agent's own configuration
# files, it is not counted as a change.
SOLUTION_MOUNT = ".openkata-solution"
SOLUTION = "solution"
EMPTY_AGENT = "empty agent"
EMPTY_AGENT_LIMIT = 50.0  # percent: an agent that does nothing must score below it


def judged_all_on_nothing(result: ScenarioResult) -> bool:
    """The empty agent's run errored because the judge passed every criterion on its empty
    answer: a real run rejects that as suspicious, and it means every criterion passes on
    nothing."""
    return result.error is not None and SUSPICIOUS_RESULT in result.error


@dataclass(frozen=True)
class Validation:
    """The outcome of validating one scenario: the solution's run (None when the scenario
    has no solution), the empty agent's run, and what is wrong, if anything."""

    scenario: str
    empty: ScenarioResult
    solution: ScenarioResult | None = None
    # Why the solution could not be run (a direct scenario with only solve.sh, ...).
    solution_error: str | None = None

    @property
    def all_pass_on_nothing(self) -> bool:
        return judged_all_on_nothing(self.empty)

    @property
    def empty_error(self) -> str | None:
        """Why the empty agent's run could not be graded (not the judge passing it all)."""
        return None if self.all_pass_on_nothing else self.empty.error

    @property
    def passes_on_nothing(self) -> list[str]:
        """The criteria and checks the empty agent passes (every judged one when the judge
        passed them all)."""
        if self.all_pass_on_nothing:
            return ["every judged criterion"]
        return [c.name for c in self.empty.criteria or () if c.passed]

    @property
    def solution_misses(self) -> list[str]:
        """What the solution fails, each with its reason."""
        if self.solution is None:
            return []
        return [
            f"{c.name}: {c.reason}" if c.reason else c.name
            for c in self.solution.criteria or ()
            if not c.passed
        ]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able summary of the outcome, for the terminal summary of the run."""
        solution = self.solution
        return {
            "scenario": self.scenario,
            "solution": None if solution is None else solution.percentage,
            "solution_error": self.solution_error or (solution.error if solution else None),
            "solution_misses": self.solution_misses,
            "empty": 100.0 if self.all_pass_on_nothing else self.empty.percentage,
            "empty_error": self.empty_error,
            "passes_on_nothing": self.passes_on_nothing,
        }


class _FixedAnswer:
    """A direct agent that answers every prompt with the same text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.model = SOLUTION

    @property
    def endpoint(self) -> str:
        return "validation"

    def complete(self, system: str, user: str, *, schema: ResponseSchema | None = None) -> str:
        return self.text


def _digest(files: list[tuple[str, bytes]]) -> str:
    digest = hashlib.sha256()
    for name, data in files:
        digest.update(f"{name}\0{hashlib.sha256(data).hexdigest()}\0".encode())
    return digest.hexdigest()


def _with_agent(
    backends: Backends, answer: str | None, command: AgentCommand | None, identity: str
) -> Backends:
    """``backends`` with its agent (direct) and its sandbox's agent replaced; ``identity``
    keeps their cache entries apart from a model's."""
    sandbox = backends.sandbox
    replaced_sandbox: Callable[[], SandboxSetup] | None = sandbox
    if sandbox is not None and command is not None:

        def replaced_sandbox() -> SandboxSetup:
            assert sandbox is not None
            return replace(sandbox(), agent=command)

    return replace(
        backends,
        agent=_FixedAnswer(answer or ""),
        agent_identity={"validation": identity},
        sandbox=replaced_sandbox,
        sandbox_identity={**backends.sandbox_identity, "validation": identity},
    )


def _solution_agent(
    scenario_dir: Path, sandboxed: bool
) -> tuple[str | None, AgentCommand | None, str]:
    """The solution's answer or sandbox command and its identity; ``ValueError`` saying why
    the solution cannot be used."""
    folder = scenario_dir / SOLUTION_DIR
    if sandboxed:
        if not (folder / SOLVE_SCRIPT).is_file():
            raise ValueError(
                f"{SOLUTION_DIR}/{SOLVE_SCRIPT} not found: a sandboxed scenario's solution is a "
                "script run in the workspace in place of the agent"
            )
        files = [
            (f"{SOLUTION_MOUNT}/{rel}", path.read_bytes()) for rel, path in files_under(folder)
        ]
        command = AgentCommand(
            SOLUTION,
            ["sh", "-c", _RUN_SOLUTION],
            files=tuple(files),
        )
        return None, command, f"{SOLUTION}:{_digest(files)}"
    answer_path = folder / ANSWER_FILE
    if not answer_path.is_file():
        raise ValueError(
            f"{SOLUTION_DIR}/{ANSWER_FILE} not found: a direct scenario's solution is the "
            "answer the agent should give"
        )
    answer = answer_path.read_text(encoding="utf-8")
    return answer, None, f"{SOLUTION}:{hashlib.sha256(answer.encode()).hexdigest()}"


_EMPTY_COMMAND = AgentCommand(EMPTY_AGENT, ["true"])
# solve.sh with bash (sh where the image has none: published solutions, Harbor's among them,
# are bash scripts), then its folder removed, so that the checks run after it see the
# workspace a real agent would leave; its exit status is the run's. Its folder is in the
# working folder, wherever the workspace is (/workspace, or an own image's WORKDIR).
_RUN_SOLUTION = (
    f'SOLUTION_DIR="$PWD/{SOLUTION_MOUNT}"; export SOLUTION_DIR; '
    "if command -v bash >/dev/null 2>&1; then shell=bash; else shell=sh; fi; "
    f'"$shell" "$SOLUTION_DIR/{SOLVE_SCRIPT}"; status=$?; rm -rf "$SOLUTION_DIR"; exit "$status"'
)


def validate_scenario(
    scenario_dir: Path,
    backends: Backends | Callable[[], Backends],
    *,
    options: RunOptions,
    redact: Callable[[str], str] = lambda text: text,
    slot: CallSlot | None = None,
    skill_dir: Path | None = None,
) -> Validation:
    """Run the scenario with its solution (when it has one) and with an empty agent, graded
    as a real run grades it; errors are in the results, never raised."""
    # One trial each, whatever scenario.json says, and no result cache: a validation grades
    # the scenario's files as they are now (a cached solution run could be replayed into a
    # workspace that holds the solution's files).
    options = replace(options, baseline="", trials=1, trials_fixed=True, cache=None)
    extra: dict[str, Any] = {"redact": redact, "options": options, "skill_dir": skill_dir}
    if slot is not None:
        extra["slot"] = slot

    def built() -> Backends:
        return backends() if callable(backends) else backends

    def run(answer: str | None, command: AgentCommand | None, identity: str) -> ScenarioResult:
        return run_scenario(
            scenario_dir, lambda: _with_agent(built(), answer, command, identity), **extra
        )

    empty = run("", _EMPTY_COMMAND, EMPTY_AGENT)
    name = scenario_dir.name
    if not (scenario_dir / SOLUTION_DIR).is_dir():
        return Validation(name, empty)
    try:
        sandboxed = load_scenario_options(scenario_dir / "scenario.json").sandbox
        answer, command, identity = _solution_agent(scenario_dir, sandboxed)
    except (ScenarioLoadError, ValueError, OSError) as exc:
        return Validation(name, empty, solution_error=str(exc))
    return Validation(name, empty, run(answer, command, identity))
