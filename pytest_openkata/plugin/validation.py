"""``pytest --eval-validate``: can each scenario be passed, and is it passed by doing nothing?

In validate mode every scenario folder is collected as a validation item
(:class:`~pytest_openkata.plugin.items.ValidationItem`, running :func:`check_validation`) in
place of its scenario item, and every other item is deselected. The item runs the scenario's
solution and an empty agent through the real graders (:mod:`pytest_openkata.core.validate`);
each of the two verdicts is a subtest. A run that cannot be graded (an endpoint, the judge,
the sandbox engine) is a setup error, never a failed verdict. Nothing is written to
``evals/results/``; the terminal summary lists every scenario's two scores.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, runtime_checkable

import pytest

from pytest_openkata.contracts.errors import OpenkataError
from pytest_openkata.core.run import Backends, RunOptions
from pytest_openkata.core.validate import EMPTY_AGENT_LIMIT, Validation, validate_scenario
from pytest_openkata.infra.redact import Redactor
from pytest_openkata.infra.text import visible
from pytest_openkata.plugin.session import VALIDATE, mode_of

__all__ = [
    "NOTHING_PROPERTY",
    "VALIDATION_PROPERTY",
    "ValidationSummary",
    "check_validation",
    "openkata_validation",
]

VALIDATION_PROPERTY = "openkata_validation"
# A format's scenario without a reference solution: why there is nothing to validate.
NOTHING_PROPERTY = "openkata_nothing_to_validate"
SOLUTION_SUBTEST = "solution scores 100%"
EMPTY_SUBTEST = f"empty agent scores below {EMPTY_AGENT_LIMIT:g}%"


def _percent(value: float) -> str:
    return f"{value:.0f}%"


def check_validation(openkata_validation: Validation, subtests: pytest.Subtests) -> None:
    """The solution must score 100 % and an empty agent below the limit: one subtest each."""
    validation = openkata_validation
    solution = validation.solution
    if solution is not None:
        with subtests.test(msg=SOLUTION_SUBTEST):
            if solution.percentage < 100:
                misses = "; ".join(validation.solution_misses)
                pytest.fail(
                    visible(
                        f"the solution scores {_percent(solution.percentage)}; it misses: {misses}"
                    ),
                    pytrace=False,
                )
    with subtests.test(msg=EMPTY_SUBTEST):
        empty = validation.empty
        if validation.all_pass_on_nothing:
            pytest.fail(
                "the judge passes every criterion on an agent that does nothing (a run rejects "
                "that as a suspicious result and errors the scenario)",
                pytrace=False,
            )
        if empty.percentage >= EMPTY_AGENT_LIMIT:
            passing = ", ".join(validation.passes_on_nothing)
            pytest.fail(
                visible(
                    f"an agent that does nothing scores {_percent(empty.percentage)}; "
                    f"pass on nothing: {passing}"
                ),
                pytrace=False,
            )


@runtime_checkable
class _Validated(Protocol):
    """A scenario item in validate mode (an openkata folder's, or a format's scenario's)."""

    skill_dir: Path
    user_properties: list[tuple[str, object]]

    def warn_before_run(self) -> None: ...

    def runnable(self) -> tuple[Path, Callable[[str], str]]: ...


@pytest.fixture
def openkata_validation(
    request: pytest.FixtureRequest,
    openkata_backends: Callable[[], Backends],
    openkata_redactor: Redactor,
    openkata_run_options: RunOptions,
) -> Validation:
    """Runs the scenario's solution and an empty agent; a run that could not be graded
    errors here, in setup."""
    item = request.node
    if mode_of(item.config) != VALIDATE or not isinstance(item, _Validated):
        raise pytest.UsageError("openkata_validation is only available in validate mode")
    item.warn_before_run()  # as in a run
    try:
        # A format's scenario is written out as an openkata folder here, on first use.
        scenario_dir, shown = item.runnable()
    except OpenkataError as exc:
        pytest.fail(visible(f"validation error: {openkata_redactor(str(exc))}"), pytrace=False)
    validation = validate_scenario(
        scenario_dir,
        openkata_backends,
        options=openkata_run_options,
        redact=lambda text: shown(openkata_redactor(text)),
        skill_dir=item.skill_dir,
    )
    item.user_properties.append((VALIDATION_PROPERTY, json.dumps(validation.to_dict())))
    errors = [
        f"{what}: {error}"
        for what, error in (
            ("solution", validation.solution_error),
            ("solution", validation.solution.error if validation.solution else None),
            ("empty agent", validation.empty_error),
        )
        if error
    ]
    if errors:
        pytest.fail(visible("validation error: " + "; ".join(errors)), pytrace=False)
    return validation


class ValidationSummary:
    """Lists every validated scenario's scores in the terminal summary, from the reports
    (their user properties cross from xdist workers as they are)."""

    def __init__(self) -> None:
        self.outcomes: dict[str, dict[str, object]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == VALIDATION_PROPERTY and isinstance(value, str):
                self.outcomes[report.nodeid] = json.loads(value)
            elif name == NOTHING_PROPERTY and isinstance(value, str):
                self.outcomes[report.nodeid] = {"nothing": value}

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.outcomes:
            return
        terminalreporter.write_sep("=", "openkata validation")
        for nodeid in sorted(self.outcomes):
            terminalreporter.write_line(visible(_line(nodeid, self.outcomes[nodeid])))


def _line(nodeid: str, outcome: dict[str, object]) -> str:
    if isinstance(outcome.get("nothing"), str):
        return f"{nodeid}: {outcome['nothing']}"
    parts = []
    solution = outcome.get("solution")
    if outcome.get("solution_error"):
        parts.append(f"solution: error: {outcome['solution_error']}")
    elif isinstance(solution, int | float):
        mark = "ok" if solution >= 100 else "FAIL"
        parts.append(f"solution {_percent(solution)} {mark}")
    else:
        parts.append("no solution")
    empty = outcome.get("empty")
    if outcome.get("empty_error"):
        parts.append(f"empty agent: error: {outcome['empty_error']}")
    elif isinstance(empty, int | float):
        mark = "ok" if empty < EMPTY_AGENT_LIMIT else "FAIL"
        parts.append(f"empty agent {_percent(empty)} {mark}")
    passing = outcome.get("passes_on_nothing")
    if isinstance(passing, list) and passing:
        parts.append("pass on nothing: " + ", ".join(str(name) for name in passing))
    return f"{nodeid}: " + "; ".join(parts)
