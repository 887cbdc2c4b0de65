"""Keep secrets out of everything the plugin writes: reports, JUnit files, terminal and logs."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from pytest_openkata.infra.environ import environ_snapshot

MASK = "***"
_SECRET_NAME = re.compile(r"(API_?KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)
# Short values (a "1", a "true") would mask ordinary words; real keys are longer.
_MIN_SECRET_LENGTH = 8


def secrets_from_environment(environ: Mapping[str, str] | None = None) -> set[str]:
    environ = environ_snapshot() if environ is None else environ
    return {
        value
        for name, value in environ.items()
        if _SECRET_NAME.search(name) and len(value) >= _MIN_SECRET_LENGTH
    }


class Redactor:
    """Replaces every known secret value in a text with ``***``."""

    def __init__(self, secrets: Iterable[str]) -> None:
        values = sorted({s for s in secrets if s}, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, values))) if values else None

    def __call__(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(MASK, text)
