"""OpenAI Codex (``codex``, npm ``@openai/codex``) in ``exec`` mode.

``codex exec --json ... -`` reads the prompt from standard input and prints its events on
standard output, one JSON object a line (read into a transcript by :mod:`.codex_events`); the
answer is its last agent message. The model provider is defined on the
command line as ``openkata``: the OpenAI *Responses* API at the configured base URL (Codex
speaks no other wire protocol to custom providers), with the key taken from the environment
variable ``OPENKATA_CODEX_KEY``. ``--ephemeral`` keeps session files out of ``~/.codex``.

A follow-up turn continues the session with ``codex exec resume ... <thread_id> -`` (the id of
the first turn's ``thread.started`` event). ``exec resume`` takes no ``-s``: the sandbox policy
is given as ``-c sandbox_mode=...`` instead. A session that will be continued is not
``--ephemeral`` (Codex must keep its files); on the host it keeps them in a ``CODEX_HOME`` of
the trial's own, shared by its turns.

Sandbox policy: ``-s read-only`` for plain answers, ``-s workspace-write`` for a workspace agent
on the host (Codex's own sandbox confines writes to the working folder), and, inside a
disposable container, ``--dangerously-bypass-approvals-and-sandbox``: Codex's sandbox needs
namespaces a container usually does not grant, and the container is the sandbox.

Installed skills (the ``installed`` skill delivery) go into ``.agents/skills/<name>/`` of the
working folder, where Codex 0.171 discovers them in every mode used here: its invocation stays
as it is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_openkata.contracts.agents import (
    UNUSED_KEY,
    AgentInvocation,
    AgentSettings,
    NeedsNothingAround,
)
from pytest_openkata.contracts.transcripts import Transcript, final_answer
from pytest_openkata.providers.agents.codex_events import read_codex_events
from pytest_openkata.providers.agents.events import session_in

__all__ = [
    "CODEX_CLI",
    "CODEX_HOME_VARIABLE",
    "CODEX_INSTALL_HINT",
    "CODEX_KEY_VARIABLE",
    "CODEX_PROVIDER",
    "CODEX_SKILLS_FOLDER",
    "DEFAULT_OPENAI_BASE_URL",
    "CodexAgent",
]

CODEX_CLI = "codex"
CODEX_INSTALL_HINT = "Install: npm install -g @openai/codex"
CODEX_PROVIDER = "openkata"
CODEX_KEY_VARIABLE = "OPENKATA_CODEX_KEY"
DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
CODEX_SKILLS_FOLDER = ".agents/skills"
CODEX_HOME_VARIABLE = "CODEX_HOME"


def _toml_string(text: str) -> str:
    """A TOML basic string: ``-c key=value`` parses ``value`` as TOML, and a quoted value can
    never be read as a number, a boolean or a table."""
    return json.dumps(text, ensure_ascii=False)


@dataclass(frozen=True)
class CodexAgent(NeedsNothingAround):
    """``codex exec``; see the module docstring."""

    executable: str = CODEX_CLI
    base_url: str = ""
    api_key: str = field(default="", repr=False)
    name: str = field(default=CODEX_CLI, init=False)
    install_hint: str = field(default=CODEX_INSTALL_HINT, init=False)
    output_in_errors: bool = field(default=True, init=False)
    skills_folder: str = field(default=CODEX_SKILLS_FOLDER, init=False)

    @property
    def endpoint(self) -> str:
        return self.base_url or CODEX_CLI

    def discovering(self) -> CodexAgent:
        return self

    @classmethod
    def from_settings(cls, settings: AgentSettings) -> CodexAgent:
        return cls(
            settings.executable or CODEX_CLI, settings.openai_base_url, settings.openai_api_key
        )

    def invocation(
        self, *, model: str, workspace_agent: bool, sandboxed: bool = False
    ) -> AgentInvocation:
        return self._exec(
            ["exec"],
            model=model,
            workspace_agent=workspace_agent,
            sandboxed=sandboxed,
            ephemeral=True,
        )

    def session_start(
        self, *, model: str, workspace_agent: bool, sandboxed: bool = False
    ) -> AgentInvocation:
        return self._exec(
            ["exec"], model=model, workspace_agent=workspace_agent, sandboxed=sandboxed
        )

    def session_id(self, output: str) -> str | None:
        return session_in(output, "thread_id", "thread.started")

    def continuation(
        self, session_id: str, *, model: str, workspace_agent: bool, sandboxed: bool = False
    ) -> AgentInvocation:
        return self._exec(
            ["exec", "resume"],
            model=model,
            workspace_agent=workspace_agent,
            sandboxed=sandboxed,
            session_id=session_id,
        )

    def _exec(
        self,
        command: list[str],
        *,
        model: str,
        workspace_agent: bool,
        sandboxed: bool,
        session_id: str = "",
        ephemeral: bool = False,
    ) -> AgentInvocation:
        argv = [self.executable, *command, "--json", "--skip-git-repo-check"]
        if ephemeral:
            argv.append("--ephemeral")
        policy = "workspace-write" if workspace_agent else "read-only"
        if sandboxed:
            argv.append("--dangerously-bypass-approvals-and-sandbox")
        elif not session_id:
            argv += ["-s", policy]
        argv += ["-m", model]
        provider = f"model_providers.{CODEX_PROVIDER}"
        settings = [
            ("model_provider", CODEX_PROVIDER),
            (f"{provider}.name", CODEX_PROVIDER),
            (f"{provider}.base_url", self.base_url or DEFAULT_OPENAI_BASE_URL),
            (f"{provider}.wire_api", "responses"),
            (f"{provider}.env_key", CODEX_KEY_VARIABLE),
        ]
        if session_id and not sandboxed:
            settings.append(("sandbox_mode", policy))
        for key, value in settings:
            argv += ["-c", f"{key}={_toml_string(value)}"]
        if session_id:
            argv.append(session_id)
        argv.append("-")  # the prompt comes from standard input
        env = {CODEX_KEY_VARIABLE: self.api_key or UNUSED_KEY}
        # A session kept on the host lives in a folder of the trial's own.
        kept = not (ephemeral or sandboxed)
        return AgentInvocation(argv, env, private_dirs=(CODEX_HOME_VARIABLE,) if kept else ())

    def clean(self, output: str) -> str:
        """The final answer: the last agent message of its events, or what it printed when it
        printed no events."""
        transcript = read_codex_events(output)
        return output if transcript is None else final_answer(transcript)

    def transcript(self, output: str) -> Transcript | None:
        return read_codex_events(output)


if TYPE_CHECKING:  # the protocols this provider implements, checked by mypy
    from pytest_openkata.contracts.agents import AgentCLI, ContinuesSession, DiscoversSkills

    _implements: type[AgentCLI] = CodexAgent
    _discovers: type[DiscoversSkills] = CodexAgent
    _continues: type[ContinuesSession] = CodexAgent
