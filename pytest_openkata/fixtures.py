"""Fixtures: settings, backends and the scenario result. Any of them can be overridden in a
``conftest.py`` (for example a per-skill judge)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

from pytest_openkata.backends.http import make_client
from pytest_openkata.config import EvalSettings
from pytest_openkata.factory import build_backends, build_sandbox, sigterm_as_interrupt
from pytest_openkata.items import ScenarioItem
from pytest_openkata.redact import Redactor
from pytest_openkata.results import ScenarioResult
from pytest_openkata.runner import Backends, SandboxSetup, run_scenario
from pytest_openkata.session import redactor_of, settings_of


@pytest.fixture(scope="session")
def openkata_settings(pytestconfig: pytest.Config) -> EvalSettings:
    """The resolved settings of this run."""
    return settings_of(pytestconfig)


@pytest.fixture(scope="session")
def openkata_redactor(pytestconfig: pytest.Config) -> Redactor:
    """Masks API keys and tokens in everything the plugin reports."""
    return redactor_of(pytestconfig)


@pytest.fixture(scope="session")
def openkata_sandbox(openkata_settings: EvalSettings) -> Iterator[Callable[[], SandboxSetup]]:
    """A factory of the Docker sandbox, connected on first use: a run without sandboxed
    scenarios never needs an engine, and a missing one errors only those scenarios."""
    built: list[SandboxSetup] = []

    def factory() -> SandboxSetup:
        if not built:
            built.append(build_sandbox(openkata_settings))
        return built[0]

    with sigterm_as_interrupt():
        yield factory
    for setup in built:
        setup.sandbox.close()


@pytest.fixture(scope="session")
def openkata_backends(
    openkata_settings: EvalSettings, openkata_sandbox: Callable[[], SandboxSetup]
) -> Iterator[Callable[[], Backends]]:
    """A factory for the agent and judge backends, shared by the session (one HTTP client).

    A factory rather than the backends themselves, so that a backend that cannot be built
    errors each scenario with a clear message instead of breaking fixture setup.
    """
    with make_client(float(openkata_settings.direct_timeout)) as client:
        built: list[Backends] = []

        def factory() -> Backends:
            if not built:
                built.append(build_backends(openkata_settings, client, openkata_sandbox))
            return built[0]

        yield factory


@pytest.fixture
def openkata_result(
    request: pytest.FixtureRequest,
    openkata_backends: Callable[[], Backends],
    openkata_redactor: Redactor,
) -> ScenarioResult:
    """Runs the scenario (prompt, agent, judge, score) and records its result.

    A scenario that cannot be evaluated errors here, in setup, with the reason on one line.
    """
    item = request.node
    if not isinstance(item, ScenarioItem):
        raise pytest.UsageError("openkata_result is only available to scenario items")
    result = run_scenario(
        item.scenario_dir, openkata_backends, skill_dir=item.skill_dir, redact=openkata_redactor
    )
    result = replace(result, skill_scenarios=list(item.skill_scenarios))
    item.record_result(result)
    item.ihook.pytest_openkata_scenario_result(result=result, item=item)
    if result.error is not None:
        pytest.fail(f"scenario error: {result.error}", pytrace=False)
    return result
