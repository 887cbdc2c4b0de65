"""Building the run's backends and sandbox from the settings."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import httpx

from pytest_openkata.agents import AgentSettings, make_agent
from pytest_openkata.agents.kiro import EVAL_AGENT_SANDBOX, agent_config_json, prepare_agent_dir
from pytest_openkata.backends import BackendError, Completer
from pytest_openkata.backends.anthropic import AnthropicMessagesBackend
from pytest_openkata.backends.cli import CLIBackend
from pytest_openkata.backends.http import OpenAIChatBackend
from pytest_openkata.config import EvalSettings
from pytest_openkata.runner import Backends, SandboxSetup
from pytest_openkata.sandbox import AgentCommand
from pytest_openkata.sandbox.docker import (
    DockerLimits,
    DockerSandbox,
    connect,
    sweep_stale_containers,
)

CLI_BACKENDS = ("kiro", "claude", "codex", "command")


def agent_settings(settings: EvalSettings) -> AgentSettings:
    return AgentSettings(
        command=settings.agent_command,
        anthropic_base_url=settings.anthropic.base_url,
        anthropic_api_key=settings.anthropic.api_key,
        openai_base_url=settings.http.base_url,
        openai_api_key=settings.http.api_key,
    )


def _backend(
    kind: str, model: str, settings: EvalSettings, client: httpx.Client, *, agent: bool
) -> Completer:
    if kind in CLI_BACKENDS:
        return CLIBackend(
            make_agent(kind, agent_settings(settings)),
            model=model,
            timeout=float(settings.direct_timeout),
            workspace_agent=agent,
        )
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


def _kiro_agent_for_skill(settings: EvalSettings) -> Callable[[Path], Completer]:
    """kiro's agent mode runs in a folder holding eval-agent.json and a link to the skill."""
    kiro = make_agent("kiro", agent_settings(settings))

    def for_skill(skill_dir: Path) -> Completer:
        return CLIBackend(
            kiro,
            model=settings.model,
            timeout=float(settings.direct_timeout),
            cwd_factory=partial(prepare_agent_dir, skill_dir),
            workspace_agent=True,
        )

    return for_skill


def build_backends(
    settings: EvalSettings,
    client: httpx.Client,
    sandbox: Callable[[], SandboxSetup] | None = None,
) -> Backends:
    """The agent and judge backends; each may use its own backend kind and model."""
    return Backends(
        agent=_backend(settings.backend, settings.model, settings, client, agent=True),
        judge=_backend(settings.judge_backend, settings.judge_model, settings, client, agent=False),
        sandbox=sandbox,
        agent_for_skill=_kiro_agent_for_skill(settings) if settings.backend == "kiro" else None,
    )


def sandbox_agent(settings: EvalSettings) -> AgentCommand:
    """The agent command run in every sandbox, with the configured model (fix of the
    reference, which ran kiro-cli's default model whatever was configured)."""
    agent = make_agent(settings.sandbox.agent, agent_settings(settings))
    invocation = agent.invocation(model=settings.model, workspace_agent=True, sandboxed=True)
    config = agent_config_json(EVAL_AGENT_SANDBOX) if settings.sandbox.agent == "kiro" else None
    return AgentCommand(agent.name, invocation.argv, invocation.env, config)


def build_sandbox(settings: EvalSettings) -> SandboxSetup:
    """Connect to the Docker engine, sweep containers left by killed runs, and set up."""
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
        DockerSandbox(client, limits), sandbox_agent(settings), box.network, float(box.timeout)
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
