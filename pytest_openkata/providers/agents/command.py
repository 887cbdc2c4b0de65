"""Any agent as a shell command line: ``sh -c COMMAND``, the prompt on standard input.

The command learns the configured model from ``OPENKATA_AGENT_MODEL``. Its output is taken
as it is. The same command runs in every mode; the sandbox, if any, is the caller's.

On the host, ``OPENKATA_AGENT_EVENTS`` names a file the command may write how it worked to,
as JSON Lines (:mod:`.command_events` gives the format); when it does, that file is its
transcript. A sandboxed command gets no events file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_openkata.contracts.agents import AgentInvocation, AgentSettings, NeedsNothingAround
from pytest_openkata.contracts.errors import AgentConfigError
from pytest_openkata.contracts.transcripts import Transcript
from pytest_openkata.providers.agents.command_events import EVENTS_VARIABLE, read_command_events

__all__ = ["COMMAND_AGENT", "EVENTS_VARIABLE", "MODEL_VARIABLE", "CommandAgent"]

COMMAND_AGENT = "command"
MODEL_VARIABLE = "OPENKATA_AGENT_MODEL"
EMPTY_COMMAND = (
    "the command agent needs a shell command line: set --eval-agent-command "
    "(agent_command in the settings)"
)


@dataclass(frozen=True)
class CommandAgent(NeedsNothingAround):
    """``sh -c COMMAND``; ``shell`` replaces ``sh``. An empty command is refused."""

    command: str
    shell: str = "sh"
    name: str = field(default=COMMAND_AGENT, init=False)
    install_hint: str = field(default="", init=False)
    output_in_errors: bool = field(default=True, init=False)
    # Its executable is a shell: its version says nothing of the agent.
    version_flag: None = field(default=None, init=False)

    @property
    def endpoint(self) -> str:
        return f"command: {self.command}"

    def __post_init__(self) -> None:
        if not self.command.strip():
            raise AgentConfigError(EMPTY_COMMAND)

    @classmethod
    def from_settings(cls, settings: AgentSettings) -> CommandAgent:
        return cls(settings.command, settings.executable or "sh")

    def invocation(
        self, *, model: str, workspace_agent: bool, sandboxed: bool = False
    ) -> AgentInvocation:
        return AgentInvocation(
            [self.shell, "-c", self.command],
            {MODEL_VARIABLE: model},
            events_variable="" if sandboxed else EVENTS_VARIABLE,
        )

    def clean(self, output: str) -> str:
        return output

    def events_transcript(self, events: str, output: str) -> Transcript | None:
        return read_command_events(events, output, agent=self.name)


if TYPE_CHECKING:  # the protocol this provider implements, checked by mypy
    from pytest_openkata.contracts.agents import AgentCLI, ReadsEventsFile

    _implements: type[AgentCLI] = CommandAgent
    _reads_events: type[ReadsEventsFile] = CommandAgent
