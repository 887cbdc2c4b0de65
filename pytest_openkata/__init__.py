"""pytest-openkata: evaluate AI agent skills with pytest, compatible with openkata-eval."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from pytest_openkata.core.results import (
    CallStats,
    CriterionResult,
    ScenarioResult,
    TrialResult,
    Usage,
    Verdict,
)
from pytest_openkata.core.stats import TrialStats
from pytest_openkata.infra.config import ConfigError, EvalSettings

try:
    __version__ = version("pytest-openkata")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0"

__all__ = [
    "CallStats",
    "ConfigError",
    "CriterionResult",
    "EvalSettings",
    "ScenarioResult",
    "TrialResult",
    "TrialStats",
    "Usage",
    "Verdict",
    "__version__",
]
