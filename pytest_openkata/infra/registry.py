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
  in (the built-in rules are the linter's own);
- ``pytest_openkata.formats``: an ``EvalFormat`` class (``core.formats``), made without
  arguments; openkata, skill-creator, waza, skillgrade, harbor.

Names are listed from the installed distributions' metadata without importing anything; a
provider's module is imported only when it is loaded by name, so a run pays for the
providers it uses. Option choices, help texts and validation come from these tables.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, EntryPoints, entry_points
from typing import Any

from pytest_openkata.contracts.errors import OpenkataError

__all__ = [
    "AGENTS",
    "BACKENDS",
    "FORMATS",
    "GRADERS",
    "LINT_RULES",
    "REPORTERS",
    "SANDBOXES",
    "Registry",
    "UnknownProviderError",
    "backend_names",
]


class UnknownProviderError(OpenkataError, LookupError):
    """No provider of that kind is registered under that name; the message lists those that
    are."""


# One reading of every distribution's entry points for all the groups: each reading walks
# every installed distribution, and start-up lists the providers of every group. Python 3.11
# gives them grouped (its SelectableGroups); both kinds select a group alike.
if sys.version_info >= (3, 12):

    @functools.cache
    def _every_entry_point() -> EntryPoints:
        return entry_points()

else:
    from importlib.metadata import SelectableGroups

    @functools.cache
    def _every_entry_point() -> SelectableGroups:
        return entry_points()


@functools.cache
def _entry_points(group: str) -> Mapping[str, EntryPoint]:
    # The first distribution to register a name keeps it, as importlib.metadata lists them.
    found: dict[str, EntryPoint] = {}
    for point in _every_entry_point().select(group=group):
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

    @property
    def section(self) -> str:
        """The first part of the keys of its providers' own settings: the group's last word
        (``sandboxes`` for ``pytest_openkata.sandboxes``)."""
        return self.group.rpartition(".")[2]

    def not_built_in(self) -> tuple[str, ...]:
        """The names whose providers live outside this package, sorted, told by the module
        each entry point names (no distribution's metadata is read): the providers that may
        declare settings of their own (a built-in provider's settings are rows of the settings
        table itself)."""
        return tuple(
            sorted(
                name
                for name, point in _entry_points(self.group).items()
                if point.module.partition(".")[0] != OWN_PACKAGE
            )
        )

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
FORMATS = Registry("pytest_openkata.formats", "eval format")


OWN_PACKAGE = __name__.partition(".")[0]


def backend_names() -> tuple[str, ...]:
    """What ``backend`` and ``judge_backend`` accept: model backends and agent CLIs (run on
    the host), sorted."""
    return tuple(sorted({*BACKENDS.names(), *AGENTS.names()}))
