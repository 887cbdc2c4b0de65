"""A provider's own settings: what it declares, and how it reads the value a run resolved.

A provider (the object an entry point names: a class or a factory) may carry ``settings``, a
tuple of :class:`ProviderSetting`. Each joins the run's one settings table under the key of the
provider's entry point and its own name: a sandbox provider registered as ``acme`` in
``pytest_openkata.sandboxes`` that declares ``region`` is configured as
``sandboxes.acme.region``, spelled in every source as a built-in setting is
(``--eval-sandboxes-acme-region``, ``eval_sandboxes_acme_region``,
``OPENKATA_EVAL_SANDBOXES_ACME_REGION``, YAML ``sandboxes: {acme: {region: ...}}``). The
resolved values reach the provider in ``provider_settings`` (of the run's settings, or of an
agent's :class:`~pytest_openkata.contracts.agents.AgentSettings`), read through
:meth:`ProviderSetting.value_in`, typed as the declaration is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

__all__ = ["SETTING_TYPES", "ProviderSetting", "SettingValue"]

SettingValue = str | int | float | bool
"""The value of a provider's setting: text, a whole number, a number or a boolean."""

SETTING_TYPES: tuple[type, ...] = (str, int, float, bool)

_V = TypeVar("_V", str, int, float, bool)

_NAME = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class ProviderSetting(Generic[_V]):
    """One setting a provider declares: its ``name`` (lower case, digits and ``_``, as the
    keys of a section: ``region``), its ``type`` (``str``, ``int``, ``float`` or ``bool``), its
    ``default`` (of that type) and a one-line ``help`` for ``pytest --help``.

    A value given as text is parsed by its type, as built-in settings are: a whole number, a
    finite number, ``true``/``false`` (``yes``, ``no``, ``on``, ``off``, ``1``, ``0``); one
    that does not parse stops the run with an error naming its source and key.
    """

    name: str
    type: type[_V]
    default: _V
    help: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError(
                f"setting name {self.name!r}: use lower-case letters, digits and _, "
                "starting with a letter"
            )
        if self.type not in SETTING_TYPES:
            raise TypeError(f"setting {self.name}: type must be str, int, float or bool")
        if not _is_of(self.default, self.type):
            raise TypeError(
                f"setting {self.name}: default {self.default!r} is not a {self.type.__name__}"
            )
        if not isinstance(self.help, str) or not self.help.strip():
            raise ValueError(f"setting {self.name}: give a help text")

    def value_in(self, values: Mapping[str, object], provider: str) -> _V:
        """This setting's value for ``provider`` (its entry point's group and name:
        ``sandboxes.acme``) among a run's ``provider_settings``; its default when the run has
        none (a provider made outside a run, in a test)."""
        value = values.get(f"{provider}.{self.name}", self.default)
        if not _is_of(value, self.type):
            raise TypeError(
                f"setting {provider}.{self.name}: {value!r} is not a {self.type.__name__}"
            )
        if self.type is float and isinstance(value, int):
            value = float(value)
        return cast(_V, value)


def _is_of(value: object, kind: type) -> bool:
    """Whether ``value`` is of a setting's type: a ``bool`` is no whole number, and a whole
    number is a number."""
    if isinstance(value, bool):
        return kind is bool
    if kind is float:
        return isinstance(value, int | float)
    return isinstance(value, kind)
