"""Claude Code (``claude``, npm ``@anthropic-ai/claude-code``) in print mode.

``claude -p --bare --model M --output-format stream-json --verbose`` reads the prompt from
standard input and prints its events, one JSON object a line (read into a transcript by
:mod:`.claude_events`); the answer is the ``result`` of the last one.
A follow-up turn resumes the session: the same command with ``--resume <session_id>``, the id
the first turn's events carry (``session_id``); on the host every turn of a trial shares one
``CLAUDE_CONFIG_DIR``, where Claude Code keeps its sessions.
``--bare`` keeps runs reproducible: no hooks, plugins, auto-memory or CLAUDE.md discovery, and
authentication strictly through ``ANTHROPIC_API_KEY``. On the host, ``CLAUDE_CONFIG_DIR`` is a
fresh folder per call: Claude Code rewrites ``~/.claude.json`` on every start, and a copy of it
running at the same time (an xdist worker, the user's own session) can leave that file missing
with only a backup beside it, which makes the next start fail. Any Anthropic Messages endpoint works
through ``ANTHROPIC_BASE_URL`` (llama-server's ``/v1/messages`` included); telemetry and other
non-essential traffic are switched off.

Installed skills (the ``installed`` skill delivery) go into ``.claude/skills/<name>/`` of the
working folder. ``--bare`` switches their discovery off: Claude Code 2.1 then lists them in its
``init`` event but offers the model no Skill tool and no skill listing. The discovering agent
(:meth:`ClaudeAgent.discovering`) therefore runs without ``--bare`` and with
``--setting-sources project``: only the working folder's settings and skills are read (on the
host, ``CLAUDE_CONFIG_DIR`` is still a fresh folder per call, so no user setting applies).

Tool approval follows kiro's rule (blanket approval only in a disposable sandbox):

- workspace agent on the host: ``--permission-mode acceptEdits`` (file edits in the working
  folder are allowed, other tools that need approval are refused);
- sandboxed: ``--dangerously-skip-permissions`` with ``IS_SANDBOX=1``. Claude Code refuses
  that flag when it runs as root ("cannot be used with root/sudo privileges") unless
  ``IS_SANDBOX=1`` says it is inside a sandbox, and containers run as root.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from pytest_openkata.contracts.agents import (
    UNUSED_KEY,
    AgentInvocation,
    AgentSettings,
    NeedsNothingAround,
)
from pytest_openkata.contracts.transcripts import Transcript, final_answer
from pytest_openkata.providers.agents.claude_events import read_claude_events
from pytest_openkata.providers.agents.events import session_in

__all__ = [
    "CLAUDE_CLI",
    "CLAUDE_CONFIG_VARIABLE",
    "CLAUDE_INSTALL_HINT",
    "CLAUDE_SKILLS_FOLDER",
    "STREAM_JSON",
    "ClaudeAgent",
]

CLAUDE_CLI = "claude"
CLAUDE_INSTALL_HINT = "Install: npm install -g @anthropic-ai/claude-code"
CLAUDE_CONFIG_VARIABLE = "CLAUDE_CONFIG_DIR"
CLAUDE_SKILLS_FOLDER = ".claude/skills"
# What replaces --bare when installed skills must be discovered: project settings only.
DISCOVERY_FLAGS = ("--setting-sources", "project")
# Its events, one JSON object a line (--verbose is required with -p).
STREAM_JSON = ("--output-format", "stream-json", "--verbose")


@dataclass(frozen=True)
class ClaudeAgent(NeedsNothingAround):
    """``claude -p``; see the module docstring."""

    executable: str = CLAUDE_CLI
    base_url: str = ""
    api_key: str = field(default="", repr=False)
    name: str = field(default=CLAUDE_CLI, init=False)
    install_hint: str = field(default=CLAUDE_INSTALL_HINT, init=False)
    output_in_errors: bool = field(default=True, init=False)
    skills_folder: str = field(default=CLAUDE_SKILLS_FOLDER, init=False)
    # Started without --bare, so that the skills of skills_folder are offered to the model.
    discovers_skills: bool = False

    @property
    def endpoint(self) -> str:
        return self.base_url or CLAUDE_CLI

    def discovering(self) -> ClaudeAgent:
        return replace(self, discovers_skills=True)

    @classmethod
    def from_settings(cls, settings: AgentSettings) -> ClaudeAgent:
        return cls(
            settings.executable or CLAUDE_CLI,
            settings.anthropic_base_url,
            settings.anthropic_api_key,
        )

    def invocation(
        self, *, model: str, workspace_agent: bool, sandboxed: bool = False
    ) -> AgentInvocation:
        isolation = DISCOVERY_FLAGS if self.discovers_skills else ("--bare",)
        argv = [self.executable, "-p", *isolation, "--model", model, *STREAM_JSON]
        env = {
            "ANTHROPIC_API_KEY": self.api_key or UNUSED_KEY,
            "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        if self.base_url:
            env["ANTHROPIC_BASE_URL"] = self.base_url
        if sandboxed:
            argv.append("--dangerously-skip-permissions")
            env["IS_SANDBOX"] = "1"
            return AgentInvocation(argv, env)
        if workspace_agent:
            argv += ["--permission-mode", "acceptEdits"]
        return AgentInvocation(argv, env, private_dirs=(CLAUDE_CONFIG_VARIABLE,))

    def session_start(
        self, *, model: str, workspace_agent: bool, sandboxed: bool = False
    ) -> AgentInvocation:
        return self.invocation(model=model, workspace_agent=workspace_agent, sandboxed=sandboxed)

    def session_id(self, output: str) -> str | None:
        return session_in(output, "session_id")

    def continuation(
        self, session_id: str, *, model: str, workspace_agent: bool, sandboxed: bool = False
    ) -> AgentInvocation:
        first = self.invocation(model=model, workspace_agent=workspace_agent, sandboxed=sandboxed)
        return replace(first, argv=[*first.argv, "--resume", session_id])

    def clean(self, output: str) -> str:
        """The final answer: the ``result`` of its events, or what it printed when it printed
        no events (a CLI too old for ``stream-json``)."""
        transcript = read_claude_events(output)
        return output if transcript is None else final_answer(transcript)

    def transcript(self, output: str) -> Transcript | None:
        return read_claude_events(output)


if TYPE_CHECKING:  # the protocols this provider implements, checked by mypy
    from pytest_openkata.contracts.agents import AgentCLI, ContinuesSession, DiscoversSkills

    _implements: type[AgentCLI] = ClaudeAgent
    _discovers: type[DiscoversSkills] = ClaudeAgent
    _continues: type[ContinuesSession] = ClaudeAgent
