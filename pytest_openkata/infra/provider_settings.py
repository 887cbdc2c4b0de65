"""The settings that installed providers declare, read once per process from their entry points.

A provider of another distribution may carry ``settings``, a tuple of
:class:`~pytest_openkata.contracts.settings.ProviderSetting` (on the object its entry point
names, or on the class of a ``Class.factory`` it names). Options are registered before any
run starts, so the declarations are read then: the entry points of the providers that other
distributions register are loaded once (their modules imported) and their declarations kept.
The built-in providers are not loaded for it: their settings are rows of the settings table
itself (:data:`~pytest_openkata.infra.config.FIELDS`), so a pytest run without other
providers installed imports no provider module to register its options.

A declaration that cannot be read (a provider whose module does not import, ``settings``
that is not a tuple of ``ProviderSetting``) is a problem the run reports as a settings error;
it never stops pytest from starting.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from pytest_openkata.contracts.settings import ProviderSetting
from pytest_openkata.infra import registry

__all__ = ["Declarations", "DeclaredSetting", "declarations"]

# The kinds of provider that get the run's settings, in the order the table lists theirs.
CONFIGURABLE = (
    registry.AGENTS,
    registry.BACKENDS,
    registry.GRADERS,
    registry.LINT_RULES,
    registry.REPORTERS,
    registry.SANDBOXES,
)

# A provider's name as one part of a dotted key (entry-point names may also hold dots).
_KEY_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


@dataclass(frozen=True)
class DeclaredSetting:
    """A setting of one provider: ``provider`` is its entry point's group and name
    (``sandboxes.acme``), ``kind`` the word that messages use (``sandbox provider``)."""

    provider: str
    kind: str
    setting: ProviderSetting[Any]

    @property
    def key(self) -> str:
        return f"{self.provider}.{self.setting.name}"


@dataclass(frozen=True)
class Declarations:
    """Every readable declaration, and a sentence for each that could not be read."""

    settings: tuple[DeclaredSetting, ...] = ()
    problems: tuple[str, ...] = ()


def _declared_by(provider: object) -> object:
    """The ``settings`` the entry point's object carries, or its class's (for a bound
    ``Class.from_settings``); ``()`` when neither declares any."""
    declared = getattr(provider, "settings", None)
    if declared is None:
        declared = getattr(getattr(provider, "__self__", None), "settings", None)
    return () if declared is None else declared


@functools.cache
def declarations() -> Declarations:
    """The settings that the installed providers of other distributions declare, by kind,
    then provider name, then the order of the declaration."""
    found: list[DeclaredSetting] = []
    problems: list[str] = []
    for kind in CONFIGURABLE:
        for name in kind.not_built_in():
            what = f"the {kind.kind} {name!r}"
            try:
                declared = _declared_by(kind.load(name))
            except Exception as exc:  # any failure of another party's import
                problems.append(
                    f"{what} cannot be loaded to read its settings: {type(exc).__name__}: {exc}"
                )
                continue
            if not isinstance(declared, tuple | list) or not all(
                isinstance(item, ProviderSetting) for item in declared
            ):
                problems.append(
                    f"{what} declares settings that are not a tuple of ProviderSetting: "
                    f"{declared!r}"
                )
                continue
            if declared and not _KEY_PART.fullmatch(name):
                problems.append(
                    f"{what} declares settings, but its name cannot be part of a settings key: "
                    "use letters, digits, _ and -"
                )
                continue
            names = [item.name for item in declared]
            twice = sorted({item for item in names if names.count(item) > 1})
            if twice:
                problems.append(f"{what} declares the setting {twice[0]!r} twice")
                continue
            provider = f"{kind.section}.{name}"
            found += [DeclaredSetting(provider, kind.kind, item) for item in declared]
    return Declarations(tuple(found), tuple(problems))
