"""Building a run's agent and judge from the settings, through the registries.

A backend name is a model backend of ``pytest_openkata.backends`` (built with a
:class:`~pytest_openkata.providers.backends.BackendContext`) or else an agent CLI of
``pytest_openkata.agents``, run on the host (:class:`~.cli.CLIBackend`). Nothing here knows a
provider by name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any, Literal

from pytest_openkata.core.run import Backends
from pytest_openkata.core.sandboxed import SandboxSetup, agent_settings, sandbox_identity
from pytest_openkata.infra.config import EvalSettings
from pytest_openkata.infra.retry import RetryPolicy
from pytest_openkata.infra.shares import ALONE, Share
from pytest_openkata.providers import registry
from pytest_openkata.providers.backends import BackendContext, BackendError, Completer

# The agent CLIs and the in-flight cap are imported where they are used: a run on a model
# backend (the common case) needs neither.

__all__ = ["build_backends", "close_backends", "make_completer", "retry_policy"]


def make_completer(
    name: str,
    model: str,
    settings: EvalSettings,
    client: Any,
    *,
    role: Literal["agent", "judge"],
) -> Completer:
    """The backend registered as ``name``, for the agent or the judge."""
    if name in registry.BACKENDS:
        factory = registry.BACKENDS.load(name)
        completer: Completer = factory(
            BackendContext(settings=settings, model=model, client=client, role=role)
        )
        return completer
    if name not in registry.AGENTS:
        raise BackendError(registry.BACKENDS.unknown(name))
    from pytest_openkata.providers.agents import make_agent
    from pytest_openkata.providers.backends.cli import CLIBackend

    return CLIBackend(
        make_agent(name, agent_settings(settings)),
        model=model,
        timeout=float(settings.direct_timeout),
        workspace_agent=role == "agent",
        answer_max_bytes=settings.answer_max_bytes,
    )


def _identity(name: str, completer: Completer) -> dict[str, str]:
    return {"backend": name, "model": completer.model, "endpoint": completer.endpoint}


def _limited(
    completer: Completer, settings: EvalSettings, lock_folder: Path | None, share: Share
) -> Completer:
    if lock_folder is None or settings.max_in_flight < 1:
        return completer
    from pytest_openkata.infra.inflight import InFlightLimit, LimitedCompleter

    slots = share.of(settings.max_in_flight)
    if slots < 1:
        raise BackendError(
            f"max_in_flight {settings.max_in_flight} leaves no request in flight for this "
            "host's workers: set it to at least the number of hosts"
        )
    limit = InFlightLimit(lock_folder, completer.endpoint, slots)
    return LimitedCompleter(completer, limit)


def retry_policy(settings: EvalSettings) -> RetryPolicy:
    return RetryPolicy(attempts=settings.retry.attempts, budget=settings.retry.budget)


def build_backends(
    settings: EvalSettings,
    client: Any,
    sandbox: Callable[[], SandboxSetup] | None = None,
    lock_folder: Path | None = None,
    share: Share = ALONE,
) -> Backends:
    """The agent and judge backends; each may use its own backend kind and model. With
    ``max_in_flight`` set, each is capped per endpoint through locks in ``lock_folder``, at
    ``share``'s part of the cap (xdist workers on other hosts count their own parts).
    ``client`` is the session's HTTP client, shared by the model backends."""
    agent = make_completer(settings.backend, settings.model, settings, client, role="agent")
    judge = make_completer(
        settings.judge_backend, settings.judge_model, settings, client, role="judge"
    )
    closers = tuple(
        close
        for completer in (agent, judge)
        if callable(close := getattr(completer, "close", None))
    )
    return Backends(
        agent=_limited(agent, settings, lock_folder, share),
        judge=_limited(judge, settings, lock_folder, share),
        retry=retry_policy(settings),
        sandbox=sandbox,
        agent_identity=_identity(settings.backend, agent),
        judge_identity=_identity(settings.judge_backend, judge),
        sandbox_identity=_OnFirstUse(partial(sandbox_identity, settings)),
        closers=closers,
    )


class _OnFirstUse(Mapping[str, Any]):
    """A mapping worked out when first read: the sandbox's identity loads the agent CLIs'
    modules, which a run without sandboxed scenarios never needs."""

    def __init__(self, build: Callable[[], Mapping[str, Any]]) -> None:
        self._build = build
        self._built: Mapping[str, Any] | None = None

    def _mapping(self) -> Mapping[str, Any]:
        if self._built is None:
            self._built = self._build()  # built twice at worst, by two threads: the same
        return self._built

    def __getitem__(self, key: str) -> Any:
        return self._mapping()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._mapping())

    def __len__(self) -> int:
        return len(self._mapping())


def close_backends(backends: Backends) -> None:
    """Stop what the backends still run (agent CLIs started ahead, after ``-x`` or Ctrl-C)."""
    for close in backends.closers:
        close()
