"""The coding-agent CLI's contract: one small protocol, and what an agent is given.

An :class:`AgentCLI` says how to start a CLI (:meth:`~AgentCLI.invocation`) and how to tidy its
answer (:meth:`~AgentCLI.clean`); it never runs anything itself. The host runs it through
:class:`~pytest_openkata.core.agent_backend.CLIBackend`, the sandbox inside a
container. The prompt
is never part of ``argv``: whoever runs the CLI writes it to the process's standard input, so
no prompt size hits Linux's 128 KiB limit on one argument (fix of the reference, spec section
13 item 9).

Three modes, chosen by the keyword arguments of :meth:`~AgentCLI.invocation`:

- plain (``workspace_agent=False``): a one-shot answer, as for the judge;
- workspace agent (``workspace_agent=True``): the agent works in its current folder and may
  edit files there, but gets no blanket tool approval on the host;
- sandboxed (``sandboxed=True``, implies a workspace agent): the agent runs in a disposable
  container and is allowed every tool without asking.

An agent also says what it needs around a run: files in its sandbox workspace
(:meth:`~AgentCLI.workspace_files`, kiro's agent configuration), host folders mounted read-only
in the sandbox (:attr:`~AgentCLI.credential_mounts`, kiro's ``~/.aws`` and ``~/.kiro``) and a
working folder on the host (:meth:`~AgentCLI.host_folder`, kiro's agent folder).

An agent that finds skills in its working folder by itself (Claude Code's ``.claude/skills/``,
Codex's ``.agents/skills/``) says where with :class:`DiscoversSkills`: the ``installed`` skill
delivery puts the skill there instead of pasting it into the prompt. An agent that does not
cannot be given a skill that way.

Agents are registered under the entry-point group ``pytest_openkata.agents``: each entry point
names a factory that takes :class:`AgentSettings` and returns an :class:`AgentCLI`. The
built-ins are ``kiro`` (``kiro-cli``), ``claude`` (Claude Code), ``codex`` (OpenAI Codex) and
``command`` (any shell command line); ``pytest_openkata.providers.agents.make_agent`` builds
one by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pytest_openkata.contracts.errors import (
    AgentConfigError,
)
from pytest_openkata.contracts.settings import SettingValue
from pytest_openkata.contracts.transcripts import Transcript

if TYPE_CHECKING:
    from pytest_openkata.contracts.sandboxes import Driver

__all__ = [
    "UNUSED_KEY",
    "AgentCLI",
    "AgentConfigError",
    "AgentInvocation",
    "AgentSettings",
    "ContinuesSession",
    "DiscoversSkills",
    "GivesTranscript",
    "Mount",
    "NeedsNothingAround",
    "ReadsEventsFile",
]

UNUSED_KEY = "unused-key"
"""The API key given to a CLI when none is configured (local servers ignore it, and the CLIs
refuse to start without one)."""


@dataclass(frozen=True)
class AgentSettings:
    """What the agent presets need from the plugin settings.

    ``executable`` replaces the CLI's path (for ``command``: the shell); empty base URLs mean
    each CLI's own default endpoint. ``provider_settings`` are the run's values of the
    settings that installed providers declare (an agent of another distribution reads its own
    with ``ProviderSetting.value_in``).
    """

    executable: str | None = None
    command: str = ""
    anthropic_base_url: str = ""
    anthropic_api_key: str = field(default="", repr=False)
    openai_base_url: str = ""
    openai_api_key: str = field(default="", repr=False)
    provider_settings: Mapping[str, SettingValue] = field(default_factory=dict)


@dataclass(frozen=True)
class AgentInvocation:
    """How to start the CLI. The prompt is not in ``argv``: it goes to standard input.

    ``env`` holds extra variables only; on the host they are merged over ``os.environ``.
    ``private_dirs`` names variables that the host runner points at a fresh empty folder for
    each call, removed afterwards: a CLI that keeps state in the user's home (and rewrites it
    while another copy of itself runs) then starts from a clean state every time. A container
    starts clean anyway, so the sandbox leaves them unset.

    ``events_variable`` names a variable the host runner points at a file path in a fresh
    folder of its own; whatever the agent wrote there is given, once it exited, to the agent's
    :meth:`ReadsEventsFile.events_transcript` (the ``command`` agent's events file). The
    sandbox leaves it unset.
    """

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    private_dirs: tuple[str, ...] = ()
    events_variable: str = ""
    # A sandboxed agent driven from the host (an ACP agent): ``argv`` is the agent process in
    # the sandbox, whose standard input and output this drives
    # (:data:`~pytest_openkata.contracts.sandboxes.Driver`). None on the host.
    driver: Driver | None = field(default=None, compare=False, repr=False)


Mount = tuple[str, str]
"""A host folder (``~`` allowed) and where it appears in the sandbox, mounted read-only."""


class AgentCLI(Protocol):
    """A coding-agent CLI.

    ``name`` is the CLI's name as error texts show it (``kiro-cli``, ``claude``, ``codex``,
    ``command``); ``install_hint`` is a line telling how to install it (may be empty).
    ``endpoint`` names where its requests go (a base URL, or the CLI itself), for cache keys
    and the in-flight cap. ``sandboxed=True`` is for runs inside a disposable container only:
    it implies a workspace agent and approves every tool (``--trust-all-tools``,
    ``--dangerously-skip-permissions``, ...). ``output_in_errors`` says whether a failed run
    that printed nothing on standard error shows its standard output instead: Claude Code
    prints its API errors there. kiro keeps the reference's bare ``kiro-cli failed: exit
    status N``. ``credential_mounts`` are host folders the agent needs in a sandbox (mounted
    only when they exist).

    An agent may also have ``version_flag``: the argument that makes its executable print its
    version (``--version`` when it has none), or None when it has no version of its own to
    tell (the ``command`` agent runs a shell).
    """

    @property
    def name(self) -> str: ...

    @property
    def install_hint(self) -> str: ...

    @property
    def output_in_errors(self) -> bool: ...

    @property
    def credential_mounts(self) -> tuple[Mount, ...]: ...

    @property
    def endpoint(self) -> str: ...

    def invocation(
        self, *, model: str, workspace_agent: bool, sandboxed: bool = False
    ) -> AgentInvocation: ...

    def clean(self, output: str) -> str: ...

    def workspace_files(self) -> tuple[tuple[str, bytes], ...]:
        """Files the agent needs in its sandbox workspace, by ``/``-separated relative path;
        they are not part of what the agent changed."""
        ...

    def host_folder(self, skill_dir: Path) -> AbstractContextManager[Path | None]:
        """The working folder of a workspace-agent run on the host (``None``: the current
        one), prepared for ``skill_dir`` and removed when the context ends."""
        ...


@runtime_checkable
class GivesTranscript(Protocol):
    """An agent CLI whose output tells how it worked (an event stream): :meth:`transcript`
    reads it, and :meth:`~AgentCLI.clean` gives the final answer from the same output."""

    def transcript(self, output: str) -> Transcript | None:
        """How the agent worked, read from what it printed; None when the output holds no
        events (an older CLI, a crash before the first event)."""
        ...


@runtime_checkable
class DiscoversSkills(Protocol):
    """An agent CLI that discovers skills in its working folder.

    ``skills_folder`` is that folder, ``/``-separated and relative to the agent's working
    folder (``.claude/skills``): each skill goes into ``<skills_folder>/<skill name>/``.
    :meth:`discovering` is the agent as it must be started for that discovery to happen (a
    CLI whose usual invocation switches discovery off returns a copy that leaves it on)."""

    @property
    def skills_folder(self) -> str: ...

    def discovering(self) -> AgentCLI:
        """This agent, started so that it discovers the skills of :attr:`skills_folder`."""


@runtime_checkable
class ReadsEventsFile(Protocol):
    """An agent CLI that may write how it worked to a file (see
    :attr:`AgentInvocation.events_variable`) rather than print it."""

    def events_transcript(self, events: str, output: str) -> Transcript | None:
        """How the agent worked, read from the ``events`` it wrote to its file; ``output`` is
        what it printed (its answer). Raises
        :class:`~pytest_openkata.contracts.errors.MalformedResponseError` naming the line of a
        line that cannot be read."""
        ...


@runtime_checkable
class ContinuesSession(Protocol):
    """An agent CLI that can be sent more prompts in the session of its first run: the
    follow-up turns of a scenario (``follow_ups``, a simulated user) go there.

    The first turn starts with :meth:`session_start` (which may differ from a one-turn
    :meth:`~AgentCLI.invocation`: Codex keeps its session files only then); :meth:`session_id`
    reads the session's id from what a turn printed; :meth:`continuation` sends the next
    prompt, again on standard input, to that session. Every turn of a trial on the host runs
    with the same folders for the invocations' ``private_dirs``, so the session's state
    survives from one turn to the next. An agent that speaks another protocol (one session
    object and a prompt request per turn) implements these three over its own transport.
    """

    def session_start(
        self, *, model: str, workspace_agent: bool, sandboxed: bool = False
    ) -> AgentInvocation:
        """How to start the first turn of a session that will be continued."""
        ...

    def session_id(self, output: str) -> str | None:
        """The session's id in what one turn printed; None when it names none."""
        ...

    def continuation(
        self, session_id: str, *, model: str, workspace_agent: bool, sandboxed: bool = False
    ) -> AgentInvocation:
        """How to send the next prompt (on standard input) to the session ``session_id``."""
        ...


class NeedsNothingAround:
    """The defaults of an agent that needs nothing around its run: no files in its sandbox
    workspace, no host folder mounted and the current folder on the host."""

    credential_mounts: tuple[Mount, ...] = ()

    def workspace_files(self) -> tuple[tuple[str, bytes], ...]:
        return ()

    def host_folder(self, skill_dir: Path) -> AbstractContextManager[Path | None]:
        return nullcontext(None)
