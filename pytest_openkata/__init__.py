"""pytest-openkata: evaluate AI agent skills with pytest, compatible with openkata-eval.

The public surface: :func:`evaluate` (a run without pytest), the result types every reporter
and hook receives, the settings, and the protocols a provider implements (an agent CLI, a
model backend, a grader, a reporter, a sandbox provider), each registered through its
entry-point group (see :mod:`pytest_openkata.infra.registry`), with the settings it may
declare of its own (:class:`ProviderSetting`).
"""

import typing as _typing

from pytest_openkata._version import __version__
from pytest_openkata.contracts.agents import AgentCLI, AgentInvocation, AgentSettings
from pytest_openkata.contracts.backends import BackendContext, Completer
from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.errors import BackendError, ConfigError, OpenkataError, SandboxError
from pytest_openkata.contracts.results import (
    AgentResult,
    CallStats,
    CriterionResult,
    ScenarioResult,
    TrialResult,
    TrialStats,
    Usage,
    Verdict,
)
from pytest_openkata.contracts.sandboxes import (
    AgentCommand,
    ExecResult,
    SandboxEnvironment,
    SandboxProvider,
    SandboxSpec,
)
from pytest_openkata.contracts.settings import ProviderSetting
from pytest_openkata.core.checks import Check, CommandOutcome
from pytest_openkata.core.compare import CriterionMove, SkillComparison
from pytest_openkata.core.grading import GradeError, Grader, Grading, GradingTask
from pytest_openkata.core.lint import EvalLintWarning, Finding, LintRule
from pytest_openkata.core.reporting import Reporter, ReportOutcome, Run
from pytest_openkata.core.summary import SkillSummary
from pytest_openkata.core.uplift import McNemar, Uplift

if _typing.TYPE_CHECKING:
    from pytest_openkata.core.evaluate import evaluate

__all__ = [
    "AgentCLI",
    "AgentCommand",
    "AgentInvocation",
    "AgentResult",
    "AgentSettings",
    "BackendContext",
    "BackendError",
    "CallStats",
    "Check",
    "CommandOutcome",
    "Completer",
    "ConfigError",
    "CriterionMove",
    "CriterionResult",
    "EvalLintWarning",
    "EvalSettings",
    "ExecResult",
    "Finding",
    "GradeError",
    "Grader",
    "Grading",
    "GradingTask",
    "LintRule",
    "McNemar",
    "OpenkataError",
    "ProviderSetting",
    "ReportOutcome",
    "Reporter",
    "Run",
    "SandboxEnvironment",
    "SandboxError",
    "SandboxProvider",
    "SandboxSpec",
    "ScenarioResult",
    "SkillComparison",
    "SkillSummary",
    "TrialResult",
    "TrialStats",
    "Uplift",
    "Usage",
    "Verdict",
    "__version__",
    "evaluate",
]


def __getattr__(name: str) -> _typing.Any:
    # evaluate() brings the run's machinery; the plugin, which loads in every pytest run of
    # the environment, imports this package without needing it.
    if name == "evaluate":
        from pytest_openkata.core.evaluate import evaluate

        return evaluate
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
