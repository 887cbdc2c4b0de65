"""pytest-openkata: evaluate AI agent skills with pytest, compatible with openkata-eval.

The public surface: :func:`evaluate` (a run without pytest), the result types every reporter
and hook receives, the settings, and the protocols a provider implements (an agent CLI, a
model backend, a grader, a reporter, a sandbox provider), each registered through its
entry-point group (see :mod:`pytest_openkata.infra.registry`), with the settings it may
declare of its own (:class:`ProviderSetting`).
"""

import importlib as _importlib
import typing as _typing

from pytest_openkata._version import __version__

if _typing.TYPE_CHECKING:
    from pytest_openkata.contracts.agents import AgentCLI, AgentInvocation, AgentSettings
    from pytest_openkata.contracts.backends import BackendContext, Completer
    from pytest_openkata.contracts.config import EvalSettings
    from pytest_openkata.contracts.errors import (
        BackendError,
        ConfigError,
        OpenkataError,
        SandboxError,
    )
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
    from pytest_openkata.core.evaluate import evaluate
    from pytest_openkata.core.grading import GradeError, Grader, Grading, GradingTask
    from pytest_openkata.core.lint import EvalLintWarning, Finding, LintRule
    from pytest_openkata.core.reporting import Reporter, ReportOutcome, Run
    from pytest_openkata.core.summary import SkillSummary
    from pytest_openkata.core.uplift import McNemar, Uplift

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


# Where each public name is defined. The plugin, which pytest loads in every run of the
# environment, imports this package: each name is imported on first use, so that a run takes in
# only the modules it needs (the lint, the reports' renderers, the statistics of uplift ...).
_DEFINED_IN = {
    "AgentCLI": "pytest_openkata.contracts.agents",
    "AgentCommand": "pytest_openkata.contracts.sandboxes",
    "AgentInvocation": "pytest_openkata.contracts.agents",
    "AgentResult": "pytest_openkata.contracts.results",
    "AgentSettings": "pytest_openkata.contracts.agents",
    "BackendContext": "pytest_openkata.contracts.backends",
    "BackendError": "pytest_openkata.contracts.errors",
    "CallStats": "pytest_openkata.contracts.results",
    "Check": "pytest_openkata.core.checks",
    "CommandOutcome": "pytest_openkata.core.checks",
    "Completer": "pytest_openkata.contracts.backends",
    "ConfigError": "pytest_openkata.contracts.errors",
    "CriterionMove": "pytest_openkata.core.compare",
    "CriterionResult": "pytest_openkata.contracts.results",
    "EvalLintWarning": "pytest_openkata.core.lint",
    "EvalSettings": "pytest_openkata.contracts.config",
    "ExecResult": "pytest_openkata.contracts.sandboxes",
    "Finding": "pytest_openkata.core.lint",
    "GradeError": "pytest_openkata.core.grading",
    "Grader": "pytest_openkata.core.grading",
    "Grading": "pytest_openkata.core.grading",
    "GradingTask": "pytest_openkata.core.grading",
    "LintRule": "pytest_openkata.core.lint",
    "McNemar": "pytest_openkata.core.uplift",
    "OpenkataError": "pytest_openkata.contracts.errors",
    "ProviderSetting": "pytest_openkata.contracts.settings",
    "ReportOutcome": "pytest_openkata.core.reporting",
    "Reporter": "pytest_openkata.core.reporting",
    "Run": "pytest_openkata.core.reporting",
    "SandboxEnvironment": "pytest_openkata.contracts.sandboxes",
    "SandboxError": "pytest_openkata.contracts.errors",
    "SandboxProvider": "pytest_openkata.contracts.sandboxes",
    "SandboxSpec": "pytest_openkata.contracts.sandboxes",
    "ScenarioResult": "pytest_openkata.contracts.results",
    "SkillComparison": "pytest_openkata.core.compare",
    "SkillSummary": "pytest_openkata.core.summary",
    "TrialResult": "pytest_openkata.contracts.results",
    "TrialStats": "pytest_openkata.contracts.results",
    "Uplift": "pytest_openkata.core.uplift",
    "Usage": "pytest_openkata.contracts.results",
    "Verdict": "pytest_openkata.contracts.results",
    "evaluate": "pytest_openkata.core.evaluate",
}


def __getattr__(name: str) -> _typing.Any:
    module = _DEFINED_IN.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value  # once taken, an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
