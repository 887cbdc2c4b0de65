"""Coding-agent CLIs: one module per agent (``kiro``, ``claude``, ``codex``, ``command``), over
the contract of :mod:`pytest_openkata.contracts.agents`, whose names are given here too for
agents written against this package; :func:`make_agent` builds one by its registered name."""

from __future__ import annotations

from pytest_openkata.contracts.agents import (
    UNUSED_KEY,
    AgentCLI,
    AgentInvocation,
    AgentSettings,
    Mount,
    NeedsNothingAround,
)
from pytest_openkata.contracts.errors import AgentConfigError
from pytest_openkata.core.agents import make_agent

__all__ = [
    "UNUSED_KEY",
    "AgentCLI",
    "AgentConfigError",
    "AgentInvocation",
    "AgentSettings",
    "Mount",
    "NeedsNothingAround",
    "make_agent",
]
