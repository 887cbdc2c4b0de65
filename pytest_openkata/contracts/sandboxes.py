"""Sandboxed scenarios: the environment interface its providers implement, and the agent command.

In the manner of Inspect AI's sandbox environments, a provider only creates environments, and
an environment only executes commands, puts and gets files (as tar streams) and is removed.
Everything else a sandboxed run does (building the workspace, the snapshots before and after,
the diff, the judge's text, the outcome) lives once in the core
(:mod:`pytest_openkata.core.sandboxed`), for every provider. Docker is the first provider
(:mod:`pytest_openkata.providers.sandboxes.docker`); a provider is registered under the
entry-point group ``pytest_openkata.sandboxes`` as ``factory(EvalSettings) -> SandboxProvider``.

Errors: a provider raises :class:`SandboxError` for what is not worth retrying (no engine, a
missing image, a refused archive), :class:`SandboxLost` when the engine itself stopped
answering (an engine pool then moves the run to another engine), and
:class:`~pytest_openkata.contracts.errors.RetryableError` for what is (an engine's 5xx). The
messages of an environment's methods do not name the step: the core puts the step it was at in
front (``copy workspace: ...``). :meth:`SandboxProvider.create` names its own steps, which only
the provider knows (``docker create: ...``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from pytest_openkata.contracts.errors import (
    SandboxError,
    SandboxLost,
)
from pytest_openkata.contracts.transcripts import Transcript

__all__ = [
    "AgentCommand",
    "AttachedProcess",
    "AttachesProcesses",
    "Driver",
    "EngineCheck",
    "ExecResult",
    "ImageBuild",
    "NamesOwnImages",
    "SandboxEnvironment",
    "SandboxError",
    "SandboxLost",
    "SandboxProvider",
    "SandboxSpec",
]


class AttachedProcess(Protocol):
    """A process started in an environment whose standard input and output the host holds
    (:meth:`AttachesProcesses.attach`): an agent that speaks a protocol on them, driven from
    the host (an ACP agent, whose client is this package's Python, which the image lacks)."""

    @property
    def workdir(self) -> str:
        """The folder it runs in, as the environment names it."""
        ...

    def send(self, data: bytes) -> None:
        """Write ``data`` to its standard input (blocking until it is taken)."""
        ...

    def close_input(self) -> None:
        """Close its standard input (an agent ends its session there). Idempotent."""
        ...

    def receive(self) -> bytes:
        """The next bytes of its standard output, blocking until some come; ``b""`` once it
        closed its output (it exited, or was stopped)."""
        ...

    def errors(self) -> str:
        """The end of what it printed on its standard error so far (bounded)."""
        ...

    def wait(self, timeout: float) -> int | None:
        """Its exit status once it exited, waiting at most ``timeout`` seconds; None while it
        runs."""
        ...

    def stop(self) -> None:
        """Stop it and every process it started in the environment (the environment side,
        not only the host's end of the pipe); its files stay readable. Idempotent; it does not
        raise."""
        ...


class AttachesProcesses(Protocol):
    """An environment that can start a process with its standard input and output attached to
    the host. Optional: a provider whose environments lack it cannot run driven agents (a
    sandboxed ACP agent), which is then a clear error."""

    def attach(
        self, argv: Sequence[str], *, env: Mapping[str, str], workdir: str
    ) -> AttachedProcess:
        """Start ``argv`` in ``workdir`` with ``env`` added to the environment's variables.
        The caller enforces the time limit, and calls :meth:`AttachedProcess.stop` on every
        way out."""
        ...


Driver = Callable[[AttachedProcess, str, str | None, Callable[[str], None]], int]
"""The host side of a driven agent: ``driver(process, prompt, session, write)`` runs one turn
with the agent ``process`` (a new session, or the session ``session`` names), writes what the
agent reported with ``write`` (as the agent's output: what its ``read_output`` and
``session_of`` read) and returns 0, or 1 after writing one line that says why the turn
failed (the agent crashed, broke the protocol, answered with an error)."""


@dataclass(frozen=True)
class AgentCommand:
    """What to run in the workspace: ``argv`` gets the prompt on its standard input."""

    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    # Files the agent needs in the workspace (kiro's .kiro/agents/eval-agent.json), by path;
    # they are not counted as the agent's changes.
    files: tuple[tuple[str, bytes], ...] = ()
    # Host folders (``~`` allowed) the agent needs, mounted read-only when they exist.
    mounts: tuple[tuple[str, str], ...] = ()
    # Where the agent discovers installed skills, relative to the workspace ("": the skill is
    # in the prompt and in the workspace's skill/ folder, not installed).
    skills_folder: str = ""
    # How to read what the agent printed: its answer and how it worked (an agent that prints
    # its events); None: the output is the answer, and no transcript is known.
    read_output: Callable[[str], tuple[str, Transcript | None]] | None = field(
        default=None, compare=False, repr=False
    )
    # The command that prints the agent CLI's version (``claude --version``); () when it
    # has none to ask.
    version_argv: tuple[str, ...] = ()
    # For an agent that can continue its session (follow-up turns): the command of a first
    # turn that will be continued, the session's id read from what a turn printed, and the
    # command sending the next prompt (on standard input) to a session. None: it cannot.
    session_argv: list[str] | None = None
    session_of: Callable[[str], str | None] | None = field(default=None, compare=False, repr=False)
    continue_argv: Callable[[str], list[str]] | None = field(
        default=None, compare=False, repr=False
    )
    # For an agent driven from the host (a sandboxed ACP agent): ``argv`` is the agent
    # process started with :meth:`AttachesProcesses.attach` (the prompt does not go to its
    # standard input: the driver sends it), and this drives each turn. None: ``argv`` is run
    # with the prompt on its standard input.
    driver: Driver | None = field(default=None, compare=False, repr=False)
    # What an image lacking a driven agent's program must be given (its package, what it
    # needs to run), for the error that says so.
    missing_hint: str = ""


@dataclass(frozen=True)
class ImageBuild:
    """A scenario's own image, built from a Dockerfile: ``context`` is the folder sent to the
    builder, ``dockerfile`` the Dockerfile's path in it, ``digest`` a digest of every file of
    the context (a provider tags the image by it, so that it builds again only when the
    context changed), and ``shown`` how messages name the Dockerfile (a path relative to the
    skill, never a machine path). ``timeout`` bounds the build in seconds (None: the
    provider's own bound); a build that takes longer is stopped, and its error names
    ``timeout_named``, the setting that gave the bound (``scenario.json: build_timeout_sec``)."""

    context: Path
    dockerfile: str
    digest: str
    shown: str
    timeout: float | None = None
    timeout_named: str = ""


@dataclass(frozen=True)
class SandboxSpec:
    """What one environment is created with."""

    name: str  # the scenario's name (for the provider's names and labels)
    network: str  # the provider's network name (Docker: host, none, a network's name)
    env: Mapping[str, str]  # the environment's variables
    # (host path, path in the environment), read-only; the host paths are already expanded
    # (no ``~``). A provider mounts a host folder only when it exists.
    mounts: tuple[tuple[str, str], ...] = ()
    # What the scenario asks its environment be given (scenario.json's ``cpus`` and
    # ``memory_mb``); None: the provider's own limits.
    cpus: float | None = None
    memory_mb: int | None = None
    # The scenario's own image (scenario.json's ``image``) or the Dockerfile it is built
    # from (``dockerfile``); neither: the provider's image (``sandbox.image``).
    image: str = ""
    build: ImageBuild | None = None


@dataclass(frozen=True)
class EngineCheck:
    """What a provider found when it checked its engine at the start of a run (its optional
    ``check()`` method, which an engine pool calls): ``summary`` for the run's line about the
    engine (version, CPUs, image), ``cpus`` for its default room (None: unknown), and
    ``problem`` when sandboxes cannot run there (the image is missing): the pool leaves it out."""

    summary: str
    cpus: int | None = None
    problem: str | None = None


@dataclass(frozen=True)
class ExecResult:
    """What a command printed and how it ended."""

    output: str  # standard output and error combined, UTF-8 decoded with replacement
    exit_code: int | None  # None when it timed out
    timed_out: bool
    # When the command printed more than the provider keeps (``answer_max_bytes``): the bytes
    # kept, where ``output`` ends; the rest was read and dropped.
    cut_at: int | None = None
    # Whether the kernel killed the command (or the environment) for want of memory, where the
    # provider can tell (Docker's State.OOMKilled, the container's OOM kill count).
    oom_killed: bool = False


class SandboxEnvironment(Protocol):
    """One fresh, isolated environment, made by :meth:`SandboxProvider.create`.

    Paths are absolute paths of the environment (``/workspace``); the environment's root is
    writable.
    """

    def exec(
        self, argv: Sequence[str], *, env: Mapping[str, str], workdir: str, timeout: float
    ) -> ExecResult:
        """Run ``argv`` in ``workdir``, with ``env`` added to the environment's variables.

        The timeout is enforced from outside: the command is stopped, the result keeps the
        output so far (``timed_out``, no exit code), and the environment's files stay readable
        with :meth:`get_archive` until it is removed. A provider keeps a bounded part of the
        output and says where it cut it (``cut_at``).
        """
        ...

    def put_archive(self, path: str, data: bytes) -> None:
        """Extract the tar ``data`` at the folder ``path``."""
        ...

    def get_archive(self, path: str) -> Iterable[bytes]:
        """The folder at ``path`` as a tar stream whose members are under the folder's own name
        (``workspace/...``), as chunks; errors while it is read are this module's errors too."""
        ...

    def remove(self) -> None:
        """Remove the environment and everything in it. Idempotent; it does not raise (what
        could not be removed is the provider's to clean up later)."""
        ...

    # An environment of an engine pool also has ``engine``, the name of its engine, and
    # ``lost_engines``, the engines lost while it was being made; the reports show both.
    # An environment that knows them also has ``cpus`` and ``memory_mb`` (what it was given)
    # and ``image_id`` (its image's id or digest), which each trial records. One made from a
    # scenario's own image whose WORKDIR is set also has ``workdir``, that folder (absolute):
    # the workspace is there instead of ``/workspace``, as the image's author expects.
    # Other environments need not have them.


class SandboxProvider(Protocol):
    """Makes environments; one per run of the plugin, shared by its threads."""

    def create(self, spec: SandboxSpec) -> SandboxEnvironment:
        """A fresh environment, ready to run commands. What was made of it before a failure
        (or an interrupt) is removed before the error leaves. After :meth:`close` it raises
        :class:`SandboxError`."""
        ...

    def close(self) -> None:
        """Remove every environment still live (runs abandoned after ``-x``, Ctrl-C,
        SIGTERM), then release the engine."""
        ...


@runtime_checkable
class NamesOwnImages(Protocol):
    """A provider that can say which image a scenario's own image is on its engine, without
    building it: the result cache keys such a scenario by it, so that a changed image (or a
    changed base image of its Dockerfile) is never answered from the cache."""

    def own_image_id(self, spec: SandboxSpec) -> str:
        """For ``spec.build``, what its image is made from (the digest of its context and the
        ids its base images have on the engine); for ``spec.image``, the image's id on the
        engine. A :class:`SandboxError` when the engine lacks one of them."""
        ...
