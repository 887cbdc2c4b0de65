"""Per-run state kept on the pytest config: the resolved settings and the redactor."""

from __future__ import annotations

import pytest

from pytest_openkata.infra.config import EvalSettings
from pytest_openkata.infra.redact import Redactor

settings_key = pytest.StashKey[EvalSettings]()
redactor_key = pytest.StashKey[Redactor]()


def settings_of(config: pytest.Config) -> EvalSettings:
    return config.stash[settings_key]


def redactor_of(config: pytest.Config) -> Redactor:
    return config.stash[redactor_key]
