"""Any agent that speaks the Agent Client Protocol (ACP), through the plugin's own ACP client.

The agent runs as ``python -m pytest_openkata.providers.agents.acp_client ... -- AGENT ARGV``
(:mod:`.acp_client`): the client starts the agent, runs one session in the working folder and
prints the agent's session updates, read into a transcript by :mod:`.acp_events`. The agent
is named by a preset, which knows its command line and how to point it at the configured
model and endpoint:

- ``acp:opencode``: OpenCode (npm ``opencode-ai``), ``opencode acp``; with an OpenAI base
  URL configured, a provider ``openkata`` of the OpenAI-compatible kind is defined for it in
  ``OPENCODE_CONFIG_CONTENT`` (its key read from ``OPENKATA_OPENCODE_KEY``) and the model is
  ``openkata/MODEL``;
- ``acp:qwen``: Qwen Code (npm ``@qwen-code/qwen-code``), ``qwen --acp --auth-type openai``,
  the base URL in ``--openai-base-url``, the key in ``OPENAI_API_KEY``;
- ``acp:claude``: Claude Code's ACP adapter (npm ``@zed-industries/claude-code-acp``), the
  Anthropic base URL in ``ANTHROPIC_BASE_URL``, the model in ``ANTHROPIC_MODEL``;
- ``acp:codex``: Codex's ACP adapter (npm ``@zed-industries/codex-acp``), the provider
  defined by ``-c`` options as the ``codex`` agent defines it;
- ``acp:gemini``: Gemini CLI (npm ``@google/gemini-cli``), ``gemini --experimental-acp -m
  MODEL``, its key from ``GEMINI_API_KEY`` in the environment (it speaks no OpenAI or
  Anthropic wire protocol);

or, as the agent ``acp``, by the command line in ``agent_command`` (split as a shell would,
never run by one), which learns the model from ``OPENKATA_AGENT_MODEL``. ``executable``
replaces a preset's program.

Tool approval follows the other agents' rule: the client approves every permission request
only in a disposable sandbox, edits of files in the workspace for a workspace agent on the
host, and nothing for a plain answer.

In the sandbox the client stays on the host (it is this package's Python, which the image
lacks) and the agent runs in the trial's environment, its standard input and output attached
to the client (:class:`~pytest_openkata.contracts.sandboxes.AttachesProcesses`; the core's
:mod:`~pytest_openkata.core.sandboxed` drives it with :func:`.acp_client.drive_attached`).
There the client grants every permission and serves no file of the host: the agent's own file
tools act on the sandbox's files. The agent's program must be in the image (the core says so,
naming the preset, when it is not): ``codex-acp``'s and ``opencode``'s native binaries run on
a glibc image as they are; the Node programs (``claude-code-acp``, ``qwen``, ``gemini``)
need Node there too. Claude Code's adapter refuses its permission bypass to root unless told
it runs in a sandbox: ``IS_SANDBOX=1`` is set for it there, and emptied on the host (where
an ``IS_SANDBOX`` of the user's environment would make the adapter offer root a bypass that
Claude Code then refuses, so that it does not start at all); Codex's
adapter gets ``sandbox_mode="danger-full-access"`` there (its own sandbox needs namespaces a
container does not grant: the container is the sandbox). A preset's own tuning variables
(``OPENCODE_EXPERIMENTAL_OUTPUT_TOKEN_MAX``, ``QWEN_CODE_MAX_OUTPUT_TOKENS``,
``CLAUDE_CODE_MAX_OUTPUT_TOKENS``), which the agent inherits on the host, are passed into the
sandbox from the environment when set.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING

from pytest_openkata.contracts.agents import (
    UNUSED_KEY,
    AgentInvocation,
    AgentSettings,
    NeedsNothingAround,
)
from pytest_openkata.contracts.errors import AgentConfigError
from pytest_openkata.contracts.transcripts import Transcript, final_answer
from pytest_openkata.infra.environ import environ_snapshot
from pytest_openkata.providers.agents.acp_client import drive_attached
from pytest_openkata.providers.agents.acp_events import acp_session_id, read_acp_events

__all__ = [
    "ACP_AGENT",
    "ACP_CLIENT_MODULE",
    "ACP_PRESETS",
    "MODEL_VARIABLE",
    "SANDBOX_VARIABLE",
    "AcpAgent",
    "AcpPreset",
]

ACP_AGENT = "acp"
ACP_CLIENT_MODULE = "pytest_openkata.providers.agents.acp_client"
MODEL_VARIABLE = "OPENKATA_AGENT_MODEL"
_PROVIDER = "openkata"
_CODEX_KEY_VARIABLE = "OPENKATA_CODEX_KEY"
_OPENCODE_KEY_VARIABLE = "OPENKATA_OPENCODE_KEY"  # read by its config, never in it
EMPTY_COMMAND = (
    "the acp agent needs the command line of an ACP agent: set --eval-agent-command "
    "(agent_command in the settings), or name a preset: "
)
# Claude Code (and its ACP adapter) grants its permission bypass to root only when this says
# it runs in a sandbox; set in the sandbox only.
SANDBOX_VARIABLE = "IS_SANDBOX"


@dataclass(frozen=True)
class _Launch:
    """An ACP agent's command line and environment for one model."""

    argv: list[str]
    env: dict[str, str]
    private_dirs: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Endpoints:
    openai_base_url: str = ""
    openai_api_key: str = field(default="", repr=False)
    anthropic_base_url: str = ""
    anthropic_api_key: str = field(default="", repr=False)


@dataclass(frozen=True)
class AcpPreset:
    """A known ACP agent: its program, its npm package, and how it is launched for a model
    (``launch(program, model, endpoints)``); ``uses`` says which base URL it goes to, and
    ``needs`` what else its program needs to run (a Node program needs Node), which a
    sandbox image must hold too."""

    program: str
    package: str
    uses: str  # "openai", "anthropic" or "" (its own default)
    launch: Callable[[str, str, _Endpoints], _Launch]
    needs: str = ""
    sandbox_env: tuple[tuple[str, str], ...] = ()  # variables set in the sandbox only
    sandbox_args: tuple[str, ...] = ()  # arguments added in the sandbox only
    host_env: tuple[tuple[str, str], ...] = ()  # variables set on the host only
    # The agent's own tuning variables (its answer-token bound): on the host it inherits the
    # environment; into the sandbox they are passed from it when set.
    passed: tuple[str, ...] = ()


def _opencode(program: str, model: str, endpoints: _Endpoints) -> _Launch:
    env = {
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_SHARE": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    }
    if endpoints.openai_base_url:
        config = {
            "provider": {
                _PROVIDER: {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": _PROVIDER,
                    "options": {
                        "baseURL": endpoints.openai_base_url,
                        "apiKey": f"{{env:{_OPENCODE_KEY_VARIABLE}}}",
                    },
                    "models": {model: {"name": model}},
                }
            },
            "model": f"{_PROVIDER}/{model}",
        }
        env["OPENCODE_CONFIG_CONTENT"] = json.dumps(config)
        env[_OPENCODE_KEY_VARIABLE] = endpoints.openai_api_key or UNUSED_KEY
        argv = [program, "acp"]
    else:
        argv = [program, "acp"]
        env["OPENCODE_CONFIG_CONTENT"] = json.dumps({"model": model})
    # Its sessions and state in fresh folders: runs at the same time never share them.
    return _Launch(argv, env, private_dirs=("XDG_DATA_HOME", "XDG_STATE_HOME"))


def _qwen(program: str, model: str, endpoints: _Endpoints) -> _Launch:
    argv = [program, "--acp", "--auth-type", "openai", "-m", model]
    if endpoints.openai_base_url:
        argv += ["--openai-base-url", endpoints.openai_base_url]
    return _Launch(argv, {"OPENAI_API_KEY": endpoints.openai_api_key or UNUSED_KEY})


def _claude(program: str, model: str, endpoints: _Endpoints) -> _Launch:
    env = {
        "ANTHROPIC_API_KEY": endpoints.anthropic_api_key or UNUSED_KEY,
        "ANTHROPIC_MODEL": model,
        "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    if endpoints.anthropic_base_url:
        env["ANTHROPIC_BASE_URL"] = endpoints.anthropic_base_url
    return _Launch([program], env, private_dirs=("CLAUDE_CONFIG_DIR",))


def _codex(program: str, model: str, endpoints: _Endpoints) -> _Launch:
    argv = [program, "-c", f"model={json.dumps(model)}"]
    if endpoints.openai_base_url:
        provider = f"model_providers.{_PROVIDER}"
        for key, value in (
            ("model_provider", _PROVIDER),
            (f"{provider}.name", _PROVIDER),
            (f"{provider}.base_url", endpoints.openai_base_url),
            (f"{provider}.wire_api", "responses"),
            (f"{provider}.env_key", _CODEX_KEY_VARIABLE),
        ):
            argv += ["-c", f"{key}={json.dumps(value)}"]
    return _Launch(argv, {_CODEX_KEY_VARIABLE: endpoints.openai_api_key or UNUSED_KEY})


def _gemini(program: str, model: str, endpoints: _Endpoints) -> _Launch:
    return _Launch([program, "--experimental-acp", "-m", model], {})


_NODE = "Node (it is a Node program)"
ACP_PRESETS: dict[str, AcpPreset] = {
    "opencode": AcpPreset(
        "opencode",
        "opencode-ai",
        "openai",
        _opencode,
        passed=("OPENCODE_EXPERIMENTAL_OUTPUT_TOKEN_MAX",),
    ),
    "qwen": AcpPreset(
        "qwen",
        "@qwen-code/qwen-code",
        "openai",
        _qwen,
        needs=_NODE,
        passed=("QWEN_CODE_MAX_OUTPUT_TOKENS",),
    ),
    "claude": AcpPreset(
        "claude-code-acp",
        "@zed-industries/claude-code-acp",
        "anthropic",
        _claude,
        needs=_NODE,
        passed=("CLAUDE_CODE_MAX_OUTPUT_TOKENS",),
        sandbox_env=((SANDBOX_VARIABLE, "1"),),
        # Emptied on the host, whatever the user's environment says: with it set, the adapter
        # offers root a bypass that Claude Code then refuses unless it is exactly "1".
        host_env=((SANDBOX_VARIABLE, ""),),
    ),
    # Codex's own sandbox needs namespaces a container does not grant: the container is the
    # sandbox (as for the codex agent's --dangerously-bypass-approvals-and-sandbox).
    "codex": AcpPreset(
        "codex-acp",
        "@zed-industries/codex-acp",
        "openai",
        _codex,
        sandbox_args=("-c", 'sandbox_mode="danger-full-access"'),
    ),
    "gemini": AcpPreset("gemini", "@google/gemini-cli", "", _gemini, needs=_NODE),
}


@dataclass(frozen=True)
class AcpAgent(NeedsNothingAround):
    """An ACP agent run through :mod:`.acp_client`; see the module docstring. ``preset`` is a
    key of :data:`ACP_PRESETS`, or ``""`` for the command line in ``command``."""

    preset: str = ""
    command: str = ""
    executable: str = ""
    endpoints: _Endpoints = field(default_factory=_Endpoints)
    python: str = field(default=sys.executable)
    output_in_errors: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        if self.preset and self.preset not in ACP_PRESETS:
            raise AgentConfigError(
                f"unknown ACP agent {self.preset!r}; choose one of: "
                + ", ".join(f"acp:{name}" for name in ACP_PRESETS)
            )
        if not self.preset and not self.command.strip():
            raise AgentConfigError(EMPTY_COMMAND + ", ".join(f"acp:{name}" for name in ACP_PRESETS))
        if not self.preset:
            try:
                shlex.split(self.command)
            except ValueError as exc:
                raise AgentConfigError(
                    f"the acp agent's command line (agent_command) cannot be read: {exc}"
                ) from None

    @property
    def name(self) -> str:
        return f"{ACP_AGENT}:{self.preset}" if self.preset else ACP_AGENT

    @property
    def install_hint(self) -> str:
        """How to install a preset's agent (the client gives it when the agent is missing)."""
        return f"Install: npm install -g {ACP_PRESETS[self.preset].package}" if self.preset else ""

    @property
    def missing_hint(self) -> str:
        """What a sandbox image lacking the agent's program must be given: the program (and
        what it needs to run), and how it is installed."""
        if not self.preset:
            return "the agent_command's program must be in the image"
        preset = ACP_PRESETS[self.preset]
        needs = f", and {preset.needs}" if preset.needs else ""
        return (
            f"the image must hold {self.executable or preset.program} (npm "
            f"{preset.package}{needs}) on its PATH, or have it mounted there (sandbox.mounts)"
        )

    @property
    def endpoint(self) -> str:
        """Where its requests go: the base URL its preset uses, else the agent itself."""
        if not self.preset:
            return f"{ACP_AGENT}: {self.command}"
        base_urls = {
            "openai": self.endpoints.openai_base_url,
            "anthropic": self.endpoints.anthropic_base_url,
        }
        return base_urls.get(ACP_PRESETS[self.preset].uses, "") or self.name

    @classmethod
    def from_settings(cls, settings: AgentSettings) -> AcpAgent:
        """The ``acp`` agent: the command line in ``agent_command``."""
        return cls(command=settings.command, executable=settings.executable or "")

    def _launch(self, model: str) -> _Launch:
        if not self.preset:
            argv = shlex.split(self.command)
            if self.executable:
                argv[0] = self.executable
            return _Launch(argv, {MODEL_VARIABLE: model})
        preset = ACP_PRESETS[self.preset]
        return preset.launch(self.executable or preset.program, model, self.endpoints)

    def invocation(
        self, *, model: str, workspace_agent: bool, sandboxed: bool = False
    ) -> AgentInvocation:
        return self._client(model=model, workspace_agent=workspace_agent, sandboxed=sandboxed)

    def session_start(
        self, *, model: str, workspace_agent: bool, sandboxed: bool = False
    ) -> AgentInvocation:
        """The first turn of a conversation: a turn like any other (the client names its
        session in its output)."""
        return self._client(model=model, workspace_agent=workspace_agent, sandboxed=sandboxed)

    def session_id(self, output: str) -> str | None:
        """The session the client's turn went to: its ``session`` line."""
        return acp_session_id(output)

    def continuation(
        self, session_id: str, *, model: str, workspace_agent: bool, sandboxed: bool = False
    ) -> AgentInvocation:
        """The next prompt of the conversation: the client loads the session
        (``session/load``) and prompts it."""
        return self._client(
            model=model, workspace_agent=workspace_agent, sandboxed=sandboxed, resume=session_id
        )

    def _client(
        self, *, model: str, workspace_agent: bool, sandboxed: bool, resume: str | None = None
    ) -> AgentInvocation:
        launch = self._launch(model)
        if not sandboxed and self.preset:
            launch = replace(launch, env={**launch.env, **dict(ACP_PRESETS[self.preset].host_env)})
        if sandboxed:
            argv, env = list(launch.argv), dict(launch.env)
            if self.preset:
                preset = ACP_PRESETS[self.preset]
                argv += preset.sandbox_args
                env.update(preset.sandbox_env)
                host = environ_snapshot()
                env.update({name: host[name] for name in preset.passed if host.get(name)})
            return AgentInvocation(argv, env, driver=partial(drive_attached, self.name))
        approve = "edits" if workspace_agent else "none"
        argv = [
            self.python, "-m", ACP_CLIENT_MODULE, "--name", self.name, "--approve", approve,
            "--hint", self.install_hint,
        ]  # fmt: skip
        if resume is not None:
            argv += ["--resume", resume]
        argv += ["--", *launch.argv]
        return AgentInvocation(argv, launch.env, private_dirs=launch.private_dirs)

    def clean(self, output: str) -> str:
        """The final answer: the agent's last message."""
        transcript = read_acp_events(output)
        return output if transcript is None else final_answer(transcript)

    def transcript(self, output: str) -> Transcript | None:
        return read_acp_events(output)


def _preset_factory(preset: str) -> Callable[[AgentSettings], AcpAgent]:
    def make(settings: AgentSettings) -> AcpAgent:
        return AcpAgent(
            preset=preset,
            executable=settings.executable or "",
            endpoints=_Endpoints(
                settings.openai_base_url,
                settings.openai_api_key,
                settings.anthropic_base_url,
                settings.anthropic_api_key,
            ),
        )

    make.__doc__ = f"The ``acp:{preset}`` agent ({ACP_PRESETS[preset].package})."
    return make


opencode = _preset_factory("opencode")
qwen = _preset_factory("qwen")
claude = _preset_factory("claude")
codex = _preset_factory("codex")
gemini = _preset_factory("gemini")


if TYPE_CHECKING:  # the protocol this provider implements, checked by mypy
    from pytest_openkata.contracts.agents import AgentCLI, ContinuesSession

    _implements: type[AgentCLI] = AcpAgent
    _continues: type[ContinuesSession] = AcpAgent
