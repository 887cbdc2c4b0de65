"""Coding-agent CLIs: one small protocol, one module per agent.

An :class:`AgentCLI` says how to start a CLI (:meth:`~AgentCLI.invocation`) and how to tidy its
answer (:meth:`~AgentCLI.clean`); it never runs anything itself. The host runs it through
:class:`~.CLIBackend`, the sandbox inside a container. The prompt
is never part of ``argv``: whoever runs the CLI writes it to the process's standard input, so
no prompt size hits Linux's 128 KiB limit on one argument (fix of the reference, spec section
13 item 9).

Three modes, chosen by the keyword arguments of :meth:`~AgentCLI.invocation`:

- plain (``workspace_agent=False``): a one-shot answer, as for the judge;
- workspace agent (``workspace_agent=True``): the agent works in its current folder and may
  edit files there, but gets no blanket tool approval on the host;
- sandboxed (``sandboxed=True``, implies a workspace agent): the agent runs in a disposable
  container and is allowed every tool without asking.

Agents (the registry of :func:`make_agent`): ``kiro`` (``kiro-cli``), ``claude`` (Claude Code),
``codex`` (OpenAI Codex) and ``command`` (any shell command line).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from pytest_openkata.providers.backends import BackendError

__all__ = [
    "AGENT_NAMES",
    "UNUSED_KEY",
    "AgentCLI",
    "AgentConfigError",
    "AgentInvocation",
    "AgentSettings",
    "make_agent",
]

AGENT_NAMES = ("kiro", "claude", "codex", "command")

UNUSED_KEY = "unused-key"
"""The API key given to a CLI when none is configured (local servers ignore it, and the CLIs
refuse to start without one)."""


class AgentConfigError(BackendError):
    """An agent cannot be built from the settings: an unknown name, an empty command."""


@dataclass(frozen=True)
class AgentSettings:
    """What the agent presets need from the plugin settings.

    ``executable`` replaces the CLI's path (for ``command``: the shell); empty base URLs mean
    each CLI's own default endpoint.
    """

    executable: str | None = None
    command: str = ""
    anthropic_base_url: str = ""
    anthropic_api_key: str = field(default="", repr=False)
    openai_base_url: str = ""
    openai_api_key: str = field(default="", repr=False)


@dataclass(frozen=True)
class AgentInvocation:
    """How to start the CLI. The prompt is not in ``argv``: it goes to standard input.

    ``env`` holds extra variables only; on the host they are merged over ``os.environ``.
    ``private_dirs`` names variables that the host runner points at a fresh empty folder for
    each call, removed afterwards: a CLI that keeps state in the user's home (and rewrites it
    while another copy of itself runs) then starts from a clean state every time. A container
    starts clean anyway, so the sandbox leaves them unset.
    """

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    private_dirs: tuple[str, ...] = ()


class AgentCLI(Protocol):
    """A coding-agent CLI.

    ``name`` is the CLI's name as error texts show it (``kiro-cli``, ``claude``, ``codex``,
    ``command``); ``install_hint`` is a line telling how to install it (may be empty).
    ``sandboxed=True`` is for runs inside a disposable container only: it implies a workspace
    agent and approves every tool (``--trust-all-tools``, ``--dangerously-skip-permissions``,
    ...). ``output_in_errors`` says whether a failed run that printed nothing on standard error
    shows its standard output instead: Claude Code prints its API errors there. kiro keeps the
    reference's bare ``kiro-cli failed: exit status N``.
    """

    name: str
    install_hint: str
    output_in_errors: bool

    def invocation(
        self, *, model: str, workspace_agent: bool, sandboxed: bool = False
    ) -> AgentInvocation: ...

    def clean(self, output: str) -> str: ...


def make_agent(name: str, settings: AgentSettings) -> AgentCLI:
    """The agent called ``name`` (one of :data:`AGENT_NAMES`), configured from ``settings``."""
    from pytest_openkata.providers.agents.claude import ClaudeAgent
    from pytest_openkata.providers.agents.codex import CodexAgent
    from pytest_openkata.providers.agents.command import CommandAgent
    from pytest_openkata.providers.agents.kiro import KiroAgent

    if name == "kiro":
        return KiroAgent.from_settings(settings)
    if name == "claude":
        return ClaudeAgent.from_settings(settings)
    if name == "codex":
        return CodexAgent.from_settings(settings)
    if name == "command":
        return CommandAgent.from_settings(settings)
    raise AgentConfigError(f"unknown agent {name!r}; choose one of: {', '.join(AGENT_NAMES)}")
