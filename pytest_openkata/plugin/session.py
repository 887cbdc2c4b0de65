"""Per-run state kept on the pytest config: the resolved settings, the redactor and the arms
of a variants file."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.infra.redact import Redactor

if TYPE_CHECKING:  # a run reads the variants file (core.variants) only when it names one
    from pytest_openkata.core.variants import VariantPlan, VariantsError

settings_key = pytest.StashKey[EvalSettings]()
redactor_key = pytest.StashKey[Redactor]()
# The arms the variants file gives, or why it gives none (None: no variants file).
variants_key: pytest.StashKey[VariantPlan | VariantsError | None] = pytest.StashKey()


def settings_of(config: pytest.Config) -> EvalSettings:
    return config.stash[settings_key]


def redactor_of(config: pytest.Config) -> Redactor:
    return config.stash[redactor_key]


# What the run does instead of evaluating: "lint" (--eval-lint), "validate" (--eval-validate),
# "estimate" (--eval-estimate), or "" for a run that evaluates.
LINT = "lint"
VALIDATE = "validate"
ESTIMATE = "estimate"  # --eval-estimate: the run's cost, worked out without running it
mode_key = pytest.StashKey[str]()


def mode_of(config: pytest.Config) -> str:
    return config.stash.get(mode_key, "")
