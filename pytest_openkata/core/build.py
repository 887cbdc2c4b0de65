"""Building the run's backends and sandbox from the settings."""

from __future__ import annotations

import hashlib
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from pytest_openkata.core.run import Backends, SandboxSetup
from pytest_openkata.infra.config import EvalSettings
from pytest_openkata.infra.retry import RetryPolicy
from pytest_openkata.providers.backends import BackendError, Completer
from pytest_openkata.providers.backends.http import ModelClient, OpenAIChatBackend
from pytest_openkata.providers.sandboxes import AgentCommand

if TYPE_CHECKING:
    from pytest_openkata.providers.agents import AgentSettings
    from pytest_openkata.providers.backends.cli import CLIBackend

# The agent CLIs, the anthropic backend and the in-flight cap are imported where they are
# used: a run on the http backend (the common case) needs none of them, and every eval
# session (every xdist worker) would otherwise import them before its first model call.

CLI_BACKENDS = ("kiro", "claude", "codex", "command")
IN_FLIGHT_FOLDER = "openkata-in-flight"


def agent_settings(settings: EvalSettings) -> AgentSettings:
    from pytest_openkata.providers.agents import AgentSettings

    return AgentSettings(
        command=settings.agent_command,
        anthropic_base_url=settings.anthropic.base_url,
        anthropic_api_key=settings.anthropic.api_key,
        openai_base_url=settings.http.base_url,
        openai_api_key=settings.http.api_key,
    )


def endpoint_of(kind: str, settings: EvalSettings) -> str:
    """Where a backend's requests go: its base URL, or for a CLI with no endpoint setting, the
    CLI itself. Names the in-flight cap's slots and goes into cache keys."""
    if kind == "http":
        return settings.http.base_url
    if kind in ("anthropic", "claude"):
        return settings.anthropic.base_url
    if kind == "codex":
        return settings.http.base_url or "codex"
    if kind == "command":
        return f"command: {settings.agent_command}"
    return kind


def _identity(kind: str, model: str, settings: EvalSettings) -> dict[str, str]:
    return {"backend": kind, "model": model, "endpoint": endpoint_of(kind, settings)}


def in_flight_folder(config: pytest.Config) -> Path:
    """The lock folder of the in-flight cap, shared by the controller and every xdist worker
    of a run: in pytest's cache folder, or with the cache provider disabled, in the temporary
    folder under a name derived from the rootdir."""
    cache = getattr(config, "cache", None)
    if cache is not None:
        return Path(cache.mkdir(IN_FLIGHT_FOLDER))
    digest = hashlib.sha256(str(config.rootpath).encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"{IN_FLIGHT_FOLDER}-{digest}"
    folder.mkdir(exist_ok=True)
    return folder


def _limited(
    completer: Completer, endpoint: str, settings: EvalSettings, lock_folder: Path | None
) -> Completer:
    if lock_folder is None or settings.max_in_flight < 1:
        return completer
    from pytest_openkata.infra.inflight import InFlightLimit, LimitedCompleter

    return LimitedCompleter(completer, InFlightLimit(lock_folder, endpoint, settings.max_in_flight))


def _backend(
    kind: str, model: str, settings: EvalSettings, client: ModelClient, *, agent: bool
) -> Completer:
    if kind in CLI_BACKENDS:
        from pytest_openkata.providers.agents import make_agent
        from pytest_openkata.providers.backends.cli import CLIBackend

        return CLIBackend(
            make_agent(kind, agent_settings(settings)),
            model=model,
            timeout=float(settings.direct_timeout),
            workspace_agent=agent,
        )
    if kind == "anthropic":
        from pytest_openkata.providers.backends.anthropic import AnthropicMessagesBackend

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


def _kiro_agent_for_skill(
    backend: CLIBackend, limit: Callable[[Completer], Completer]
) -> Callable[[Path], Completer]:
    """kiro's agent mode runs in a folder holding eval-agent.json and a link to the skill."""
    from pytest_openkata.providers.agents.kiro import prepare_agent_dir

    def for_skill(skill_dir: Path) -> Completer:
        return limit(backend.in_folder(partial(prepare_agent_dir, skill_dir)))

    return for_skill


def retry_policy(settings: EvalSettings) -> RetryPolicy:
    return RetryPolicy(attempts=settings.retry.attempts, budget=settings.retry.budget)


def build_backends(
    settings: EvalSettings,
    client: ModelClient,
    sandbox: Callable[[], SandboxSetup] | None = None,
    lock_folder: Path | None = None,
) -> Backends:
    """The agent and judge backends; each may use its own backend kind and model. With
    ``max_in_flight`` set, each is capped per endpoint through locks in ``lock_folder``."""
    agent_endpoint = endpoint_of(settings.backend, settings)
    judge_endpoint = endpoint_of(settings.judge_backend, settings)
    agent = _backend(settings.backend, settings.model, settings, client, agent=True)
    judge = _backend(settings.judge_backend, settings.judge_model, settings, client, agent=False)
    kiro_agent = None
    cli_backends = [
        cast("CLIBackend", completer)
        for kind, completer in ((settings.backend, agent), (settings.judge_backend, judge))
        if kind in CLI_BACKENDS
    ]
    if settings.backend == "kiro":
        kiro_agent = _kiro_agent_for_skill(
            cast("CLIBackend", agent),
            partial(_limited, endpoint=agent_endpoint, settings=settings, lock_folder=lock_folder),
        )
    closers = tuple(c.close for c in cli_backends)
    return Backends(
        agent=_limited(agent, agent_endpoint, settings, lock_folder),
        judge=_limited(judge, judge_endpoint, settings, lock_folder),
        retry=retry_policy(settings),
        sandbox=sandbox,
        agent_for_skill=kiro_agent,
        agent_identity=_identity(settings.backend, settings.model, settings),
        judge_identity=_identity(settings.judge_backend, settings.judge_model, settings),
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


def sandbox_agent(settings: EvalSettings) -> AgentCommand:
    """The agent command run in every sandbox, with the configured model (fix of the
    reference, which ran kiro-cli's default model whatever was configured)."""
    from pytest_openkata.providers.agents import make_agent
    from pytest_openkata.providers.agents.kiro import EVAL_AGENT_SANDBOX, agent_config_json

    agent = make_agent(settings.sandbox.agent, agent_settings(settings))
    invocation = agent.invocation(model=settings.model, workspace_agent=True, sandboxed=True)
    config = agent_config_json(EVAL_AGENT_SANDBOX) if settings.sandbox.agent == "kiro" else None
    return AgentCommand(agent.name, invocation.argv, invocation.env, config)


def _looks_secret(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL"))


def sandbox_identity(settings: EvalSettings) -> dict[str, Any]:
    """What decides a sandboxed run besides its workspace, for the cache key: the image, the
    agent command and the default network. Variables that look like credentials are left
    out. Read from the settings, so a run answered from the cache needs no Docker engine."""
    agent = sandbox_agent(settings)
    env = {name: value for name, value in agent.env.items() if not _looks_secret(name)}
    box = settings.sandbox
    return {"image": box.image, "argv": agent.argv, "env": env, "network": box.network}


def build_sandbox(settings: EvalSettings) -> SandboxSetup:
    """Connect to the Docker engine, sweep containers left by killed runs, and set up."""
    # Imported here: the docker SDK (and requests) cost a run without sandboxes most of a
    # second of start-up, in every xdist worker.
    from pytest_openkata.providers.sandboxes.docker import (
        DockerLimits,
        DockerSandbox,
        connect,
        sweep_stale_containers,
    )

    client = connect()
    sweep_stale_containers(client)
    box = settings.sandbox
    limits = DockerLimits(
        image=box.image,
        timeout=float(box.timeout),
        cpus=box.cpus,
        memory=box.memory,
        pids=box.pids,
        mounts=tuple((str(Path(host).expanduser()), target) for host, target in box.mounts),
    )
    return SandboxSetup(
        DockerSandbox(client, limits),
        sandbox_agent(settings),
        box.network,
        float(box.timeout),
    )


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt while sandboxes may run, so that ``finally`` blocks
    remove their containers, as they do on Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous not in (signal.SIG_DFL, None):
        yield  # somebody else handles SIGTERM
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
