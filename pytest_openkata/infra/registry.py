"""One table per kind of provider, from name to factory, filled from entry points.

Every provider kind has an entry-point group; the built-in providers are registered in
``pyproject.toml`` through the same groups a third-party package uses, so adding one is a
module plus one entry point:

- ``pytest_openkata.agents``: ``factory(AgentSettings) -> AgentCLI``; kiro, claude, codex,
  command;
- ``pytest_openkata.backends``: ``factory(BackendContext) -> Completer``; http, anthropic;
- ``pytest_openkata.graders``: a ``Grader`` class, made without arguments; judge;
- ``pytest_openkata.reporters``: a ``Reporter`` class, made without arguments; results_json,
  terminal, junit;
- ``pytest_openkata.sandboxes``: ``factory(EvalSettings) -> SandboxProvider``; docker;
- ``pytest_openkata.lint_rules``: a ``LintRule`` class, made without arguments; none built
  in (the built-in rules are the linter's own).

Names are listed from the installed distributions' metadata without importing anything; a
provider's module is imported only when it is loaded by name, so a run pays for the
providers it uses. Option choices, help texts and validation come from these tables.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from pytest_openkata.contracts.errors import OpenkataError

__all__ = [
    "AGENTS",
    "BACKENDS",
    "GRADERS",
    "REPORTERS",
    "SANDBOXES",
    "Registry",
    "UnknownProviderError",
    "backend_names",
]


class UnknownProviderError(OpenkataError, LookupError):
    """No provider of that kind is registered under that name; the message lists those that
    are."""


@functools.cache
def _entry_points(group: str) -> Mapping[str, EntryPoint]:
    # The first distribution to register a name keeps it, as importlib.metadata lists them.
    found: dict[str, EntryPoint] = {}
    for point in entry_points(group=group):
        found.setdefault(point.name, point)
    return found


@dataclass(frozen=True)
class Registry:
    """The providers of one kind: ``group`` is the entry-point group, ``kind`` the word that
    error messages use (``agent``, ``backend``, ...)."""

    group: str
    kind: str

    def names(self) -> tuple[str, ...]:
        """Every registered name, sorted."""
        return tuple(sorted(_entry_points(self.group)))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in _entry_points(self.group)

    def load(self, name: str) -> Any:
        """The factory registered as ``name`` (its module is imported now)."""
        point = _entry_points(self.group).get(name)
        if point is None:
            raise UnknownProviderError(self.unknown(name))
        # Not remembered here: the module system keeps the module, and a factory held past
        # it (a test runner that unloads modules between runs) would mix two copies of them.
        return point.load()

    def unknown(self, name: str) -> str:
        return f"unknown {self.kind} {name!r}; choose one of: {', '.join(self.names()) or '(none)'}"


AGENTS = Registry("pytest_openkata.agents", "agent")
BACKENDS = Registry("pytest_openkata.backends", "backend")
GRADERS = Registry("pytest_openkata.graders", "grader")
REPORTERS = Registry("pytest_openkata.reporters", "reporter")
SANDBOXES = Registry("pytest_openkata.sandboxes", "sandbox provider")
LINT_RULES = Registry("pytest_openkata.lint_rules", "lint rule")


def backend_names() -> tuple[str, ...]:
    """What ``backend`` and ``judge_backend`` accept: model backends and agent CLIs (run on
    the host), sorted."""
    return tuple(sorted({*BACKENDS.names(), *AGENTS.names()}))
