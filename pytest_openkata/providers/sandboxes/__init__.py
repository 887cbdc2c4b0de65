"""Sandboxed scenarios: an environment interface, its providers and the workspace diff.

A provider runs one agent command in a fresh, isolated environment holding the skill, the task
and the scenario's inputs, and reports what the agent printed and changed. Docker is the one
provider today (:mod:`pytest_openkata.providers.sandboxes.docker`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pytest_openkata.core.workspace import WorkspaceDiff
from pytest_openkata.providers.backends import BackendError


class SandboxError(BackendError):
    """The sandbox itself failed (no engine, a missing image, a copy that failed); the message
    says which and what to do."""


@dataclass(frozen=True)
class AgentCommand:
    """What to run in the workspace: ``argv`` gets the prompt on its standard input."""

    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    agent_config: str | None = None  # kiro's .kiro/agents/eval-agent.json, when the agent uses one


@dataclass(frozen=True)
class SandboxRun:
    output: str
    exit_code: int | None
    timed_out: bool
    diff: WorkspaceDiff
    judge_text: str


class Sandbox(Protocol):
    def run(
        self, *, skill_dir: Path, scenario_dir: Path, network: str, prompt: str, agent: AgentCommand
    ) -> SandboxRun: ...

    def close(self) -> None: ...
