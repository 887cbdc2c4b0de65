"""Agent CLIs as the run makes them: by their registered name, through the registry."""

from __future__ import annotations

from pytest_openkata.contracts.agents import AgentCLI, AgentSettings
from pytest_openkata.contracts.errors import AgentConfigError

__all__ = ["make_agent"]


def make_agent(name: str, settings: AgentSettings) -> AgentCLI:
    """The agent registered as ``name``, configured from ``settings``."""
    from pytest_openkata.infra import registry

    try:
        factory = registry.AGENTS.load(name)
    except registry.UnknownProviderError as exc:
        raise AgentConfigError(str(exc)) from None
    agent: AgentCLI = factory(settings)
    return agent
