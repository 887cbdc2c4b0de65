"""Sandbox providers: one module per provider (``docker``, and the engine ``pool`` over
several), over the contract of :mod:`pytest_openkata.contracts.sandboxes`, whose names are
given here too for providers written against this package."""

from __future__ import annotations

from pytest_openkata.contracts.sandboxes import (
    AgentCommand,
    EngineCheck,
    ExecResult,
    SandboxEnvironment,
    SandboxError,
    SandboxLost,
    SandboxProvider,
    SandboxSpec,
)

__all__ = [
    "AgentCommand",
    "EngineCheck",
    "ExecResult",
    "SandboxEnvironment",
    "SandboxError",
    "SandboxLost",
    "SandboxProvider",
    "SandboxSpec",
]
