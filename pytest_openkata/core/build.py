"""Building a run's agent and judge from the settings, through the registries.

A backend name is a model backend of ``pytest_openkata.backends`` (built with a
:class:`~pytest_openkata.providers.backends.BackendContext`) or else an agent CLI of
``pytest_openkata.agents``, run on the host (:class:`~.agent_backend.CLIBackend`). Nothing
here knows a provider by name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import cache, partial
from pathlib import Path
from typing import Any, Literal

from pytest_openkata.contracts.agents import GivesTranscript, ReadsEventsFile
from pytest_openkata.contracts.backends import BackendContext, CapacityAware, Completer
from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.errors import AgentConfigError, BackendError
from pytest_openkata.core.run import Backends
from pytest_openkata.core.sandboxed import SandboxSetup, agent_settings, sandbox_identity
from pytest_openkata.core.skill_delivery import INSTALLED, discovering_agent
from pytest_openkata.infra import registry
from pytest_openkata.infra.retry import RetryPolicy
from pytest_openkata.infra.shares import ALONE, Share

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
        if role == "agent" and settings.skill_delivery == INSTALLED:
            raise AgentConfigError(
                f"skill_delivery installed needs an agent CLI backend; {name} is a model "
                "backend, which only ever sees the prompt: use an agent such as claude or "
                "codex (or, for scenarios, skill_delivery prompt)"
            )
        factory = registry.BACKENDS.load(name)
        completer: Completer = factory(
            BackendContext(settings=settings, model=model, client=client, role=role)
        )
        return completer
    if name not in registry.AGENTS:
        raise BackendError(registry.BACKENDS.unknown(name))
    from pytest_openkata.core.agent_backend import CLIBackend
    from pytest_openkata.core.agents import make_agent

    agent = make_agent(name, agent_settings(settings))
    skills_folder = ""
    if role == "agent" and settings.skill_delivery == INSTALLED:
        agent, skills_folder = discovering_agent(agent)
    return CLIBackend(
        agent,
        model=model,
        timeout=float(settings.direct_timeout),
        workspace_agent=role == "agent",
        answer_max_bytes=settings.answer_max_bytes,
        skills_folder=skills_folder,
    )


# The version of what an agent's cached answer keeps of how it worked (its transcript).
TRANSCRIPT_FORMAT = 1


def _identity(name: str, completer: Completer, settings: EvalSettings) -> dict[str, Any]:
    """What decides a backend's answers, for cache keys: its name, model and endpoint, and
    the values of its own settings when it declares some."""
    identity: dict[str, Any] = {
        "backend": name,
        "model": completer.model,
        "endpoint": completer.endpoint,
    }
    kind = registry.BACKENDS if name in registry.BACKENDS else registry.AGENTS
    own = settings.provider_values(f"{kind.section}.{name}")
    if own:
        identity["provider_settings"] = own
    from pytest_openkata.core.agent_backend import CLIBackend

    if isinstance(completer, CLIBackend) and isinstance(
        completer.agent, GivesTranscript | ReadsEventsFile
    ):
        # Its answers come with their transcripts: none cached before that is taken for one.
        identity["events"] = TRANSCRIPT_FORMAT
    return identity


def _limited(
    completer: Completer,
    settings: EvalSettings,
    lock_folder: Path | None,
    share: Share,
    learned: dict[str, Any],
) -> Completer:
    """``completer`` under the in-flight cap, if there is one. With ``auto``, the agent and
    the judge of one endpoint share one learned cap (``learned``, by endpoint): the endpoint
    is asked once."""
    cap = settings.max_in_flight
    if lock_folder is None or cap == 0:
        return completer
    from pytest_openkata.infra.inflight import InFlightLimit, LearnedLimit, LimitedCompleter

    def part(slots: int) -> int:
        mine = share.of(slots)
        if mine < 1:
            said = f" (the endpoint serves {slots} at once)" if cap == "auto" else ""
            raise BackendError(
                f"max_in_flight {cap}{said} leaves no request in flight for this "
                "host's workers: set it to at least the number of hosts"
            )
        return mine

    endpoint = completer.endpoint
    if cap == "auto":
        if endpoint not in learned:
            learn = completer.capacity if isinstance(completer, CapacityAware) else _not_said
            learned[endpoint] = LearnedLimit(lock_folder, endpoint, learn, part)
        return LimitedCompleter(completer, learned[endpoint])
    return LimitedCompleter(completer, InFlightLimit(lock_folder, endpoint, part(cap)))


def _not_said() -> None:
    return None


def _sandbox_in_flight(
    settings: EvalSettings, agent: Completer
) -> Callable[[], AbstractContextManager[None]]:
    """What a sandboxed agent's run holds: one request in flight of the agent backend's cap
    when the agent in the sandbox is pointed at the same endpoint, nothing otherwise. Its
    calls go from the sandbox straight to the endpoint, one at a time, where the cap cannot
    count them one by one; counted as one for the whole run, they leave direct calls and
    judges only the rest, so the endpoint never gets more at once than the cap. Sandboxed runs
    never hold the last of the cap's slots (when it has more than one): direct calls and
    judges take turns on it instead of waiting for whole agent runs to end."""
    from pytest_openkata.infra.inflight import LimitedCompleter

    base_url = {"http": settings.http.base_url, "anthropic": settings.anthropic.base_url}.get(
        settings.backend, ""
    )
    if not base_url or not isinstance(agent, LimitedCompleter):
        return nullcontext
    limit = agent.limit

    @cache
    def pointed_at_it() -> bool:  # loads the agent CLIs' modules: on first use only
        from pytest_openkata.core.agents import make_agent

        try:
            sandboxed = make_agent(settings.sandbox.agent, agent_settings(settings))
        except BackendError:
            return False  # the sandbox cannot be built: its scenarios error with the reason
        return str(getattr(sandboxed, "base_url", "")) == base_url

    @contextmanager
    def hold() -> Iterator[None]:
        if not pointed_at_it():
            yield
            return
        with limit.acquire_long():
            yield

    return hold


def retry_policy(settings: EvalSettings) -> RetryPolicy:
    return RetryPolicy(attempts=settings.retry.attempts, budget=settings.retry.budget)


def build_backends(
    settings: EvalSettings,
    client: Any,
    sandbox: Callable[[], SandboxSetup] | None = None,
    lock_folder: Path | None = None,
    share: Share = ALONE,
) -> Backends:
    """The agent and judge backends (and the simulated user's, when ``simulated_user_model``
    names a model of its own); each may use its own backend kind and model. With
    ``max_in_flight`` set, each is capped per endpoint through locks in ``lock_folder``, at
    ``share``'s part of the cap (xdist workers on other hosts count their own parts).
    ``client`` is the session's HTTP client, shared by the model backends."""
    agent = make_completer(settings.backend, settings.model, settings, client, role="agent")
    judge = make_completer(
        settings.judge_backend, settings.judge_model, settings, client, role="judge"
    )
    user = None
    if settings.simulated_user_model and settings.simulated_user_model != settings.judge_model:
        user = make_completer(
            settings.judge_backend, settings.simulated_user_model, settings, client, role="judge"
        )
    closers = tuple(
        close
        for completer in (agent, judge, user)
        if callable(close := getattr(completer, "close", None))
    )
    learned: dict[str, Any] = {}
    limited_agent = _limited(agent, settings, lock_folder, share, learned)
    limited_user, user_identity = None, {}
    if user is not None:
        limited_user = _limited(user, settings, lock_folder, share, learned)
        user_identity = _identity(settings.judge_backend, user, settings)
    return Backends(
        agent=limited_agent,
        judge=_limited(judge, settings, lock_folder, share, learned),
        retry=retry_policy(settings),
        sandbox=sandbox,
        sandbox_in_flight=_sandbox_in_flight(settings, limited_agent),
        agent_identity=_identity(settings.backend, agent, settings),
        judge_identity=_identity(settings.judge_backend, judge, settings),
        simulated_user=limited_user,
        simulated_user_identity=user_identity,
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
