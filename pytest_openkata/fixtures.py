"""Fixtures: settings, backends and the scenario result. Any of them can be overridden in a
``conftest.py`` (for example a per-skill judge)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import httpx
import pytest

from pytest_openkata.backends import BackendError, Completer
from pytest_openkata.backends.anthropic import AnthropicMessagesBackend
from pytest_openkata.backends.http import OpenAIChatBackend, make_client
from pytest_openkata.config import EvalSettings
from pytest_openkata.items import ScenarioItem
from pytest_openkata.redact import Redactor
from pytest_openkata.results import ScenarioResult
from pytest_openkata.runner import Backends, run_scenario
from pytest_openkata.session import redactor_of, settings_of

KIRO_NOT_AVAILABLE = (
    "backend 'kiro' (kiro-cli) is not supported by this version of pytest-openkata yet; "
    "use the http backend: --eval-backend http --eval-base-url <OpenAI-compatible URL>"
)


@pytest.fixture(scope="session")
def openkata_settings(pytestconfig: pytest.Config) -> EvalSettings:
    """The resolved settings of this run."""
    return settings_of(pytestconfig)


@pytest.fixture(scope="session")
def openkata_redactor(pytestconfig: pytest.Config) -> Redactor:
    """Masks API keys and tokens in everything the plugin reports."""
    return redactor_of(pytestconfig)


def _backend(kind: str, model: str, settings: EvalSettings, client: httpx.Client) -> Completer:
    if kind == "kiro":
        raise BackendError(KIRO_NOT_AVAILABLE)
    if kind == "anthropic":
        return AnthropicMessagesBackend(
            client,
            base_url=settings.anthropic.base_url,
            api_key=settings.anthropic.api_key,
            model=model,
            max_tokens=settings.anthropic.max_tokens,
        )
    if not settings.http.base_url:
        raise BackendError(
            "the http backend needs a base URL: set --eval-base-url, the environment "
            "variable OPENKATA_EVAL_HTTP_BASE_URL, http.base_url in .openkata-eval.yaml "
            "or the ini option eval_http_base_url"
        )
    return OpenAIChatBackend(
        client, base_url=settings.http.base_url, api_key=settings.http.api_key, model=model
    )


def build_backends(settings: EvalSettings, client: httpx.Client) -> Backends:
    """The agent and judge backends; each may use its own backend kind and model."""
    return Backends(
        agent=_backend(settings.backend, settings.model, settings, client),
        judge=_backend(settings.judge_backend, settings.judge_model, settings, client),
    )


@pytest.fixture(scope="session")
def openkata_backends(openkata_settings: EvalSettings) -> Iterator[Callable[[], Backends]]:
    """A factory for the agent and judge backends, shared by the session (one HTTP client).

    A factory rather than the backends themselves, so that a backend that cannot be built
    errors each scenario with a clear message instead of breaking fixture setup.
    """
    with make_client(float(openkata_settings.direct_timeout)) as client:
        built: list[Backends] = []

        def factory() -> Backends:
            if not built:
                built.append(build_backends(openkata_settings, client))
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
    if result.error is not None:
        pytest.fail(f"scenario error: {result.error}", pytrace=False)
    return result
