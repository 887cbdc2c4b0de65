"""A sandboxed scenario's agent run, once for every sandbox provider: the agent command, the
workspace it runs in, and the result graders see (the agent's output and the workspace changes).

The provider is the one ``sandbox.provider`` names in the registry
(:mod:`pytest_openkata.infra.registry`); it only makes environments that execute commands,
take and give tar streams, and are removed (:mod:`pytest_openkata.providers.sandboxes`).
Everything else happens here: one archive holds the workspace (``/workspace``, or the WORKDIR
a scenario's own image sets: the skill, the task, the inputs and the agent's own files) and,
outside it, the prompt; the workspace is snapshotted before and after the agent runs, the
snapshots are diffed, and the judge's text is built. The agent command is
``sandbox.agent``'s, with the files and host folders that agent asks for.
"""

from __future__ import annotations

import tarfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pytest_openkata.contracts.agents import (
    AgentCLI,
    AgentSettings,
    ContinuesSession,
    GivesTranscript,
)
from pytest_openkata.contracts.backends import DEFAULT_ANSWER_MAX_BYTES, answer_bound
from pytest_openkata.contracts.config import EvalSettings, SandboxSettings
from pytest_openkata.contracts.errors import (
    AGENT_CRASH,
    CHECK_FAILED,
    INVALID_INPUT,
    OUT_OF_MEMORY,
    TIMEOUT,
    AgentConfigError,
    BackendError,
    RetryableError,
    SandboxError,
    SandboxLost,
)
from pytest_openkata.contracts.results import (
    SCENARIO_ERROR,
    AgentResult,
    Snapshot,
    TrialEnvironment,
    Turn,
    WorkspaceDiff,
)
from pytest_openkata.contracts.sandboxes import (
    AgentCommand,
    AttachedProcess,
    ExecResult,
    SandboxEnvironment,
    SandboxProvider,
    SandboxSpec,
)
from pytest_openkata.contracts.transcripts import Transcript, joined_turns
from pytest_openkata.core.agent_versions import AgentVersions
from pytest_openkata.core.agents import make_agent
from pytest_openkata.core.checks import Check, CommandOutcome
from pytest_openkata.core.conversation import NextPrompt
from pytest_openkata.core.errors import ScenarioFailure
from pytest_openkata.core.files import SkillReader, files_under
from pytest_openkata.core.scenario import Scenario
from pytest_openkata.core.scenario_image import image_build
from pytest_openkata.core.skill_delivery import INSTALLED, discovering_agent, installed_skill_files
from pytest_openkata.core.workspace import (
    diff_snapshots,
    files_archive,
    fixture_files,
    judge_text,
    snapshot_from_tar,
    tool_files_of,
    workspace_archive,
)
from pytest_openkata.infra import registry
from pytest_openkata.infra.bounded import BoundedBuffer
from pytest_openkata.infra.retry import RetryPolicy, call_with_retry
from pytest_openkata.infra.text import utf8

if TYPE_CHECKING:
    from pytest_openkata.core.engine_pool import SlotsFor

T = TypeVar("T")

WORKSPACE = "/workspace"
# Outside the workspace, so the prompt is neither a file the agent sees there nor a change.
PROMPT_PATH = "/openkata/prompt.md"
# Where the check scripts (the scenario's checks/ folder) are copied once the agent exited.
CHECKS_DIR = "/openkata/checks"


def run_agent_argv(workspace: str = WORKSPACE) -> tuple[str, ...]:
    """The command that runs the agent's argv (appended) with the prompt on its standard
    input (an argument has a 128 KiB limit). The redirect is relative to the working folder
    ``workspace``, so a provider without its own root folder (a temporary folder on the host)
    runs it unchanged."""
    depth = len([part for part in workspace.split("/") if part])
    redirect = "../" * depth + PROMPT_PATH.lstrip("/")
    return ("sh", "-c", f'exec "$@" < {redirect}', "sh")


def workspace_of(environment: SandboxEnvironment) -> str:
    """Where ``environment`` holds the workspace: the working folder it says its image sets
    (``workdir``, a scenario's own image's WORKDIR), else ``/workspace``."""
    workdir = getattr(environment, "workdir", "")
    return workdir if isinstance(workdir, str) and workdir.startswith("/") else WORKSPACE


# How long a driven agent is given to end on its own once its turn is over (its standard
# input closed) before it is stopped, and its driver to end once it was.
_DRIVEN_EXIT_SECONDS = 5.0


@dataclass(frozen=True)
class SandboxSetup:
    """A sandbox provider and the agent command it runs for every sandboxed scenario."""

    sandbox: SandboxProvider
    agent: AgentCommand
    network: str  # used when the scenario names none
    timeout: float
    # Host folders (``~`` allowed) for every agent, besides the agent's own (sandbox.mounts);
    # mounted read-only when they exist.
    mounts: tuple[tuple[str, str], ...] = ()
    # The agent CLI's version in each image, asked once per run.
    versions: AgentVersions = field(default_factory=AgentVersions, compare=False, repr=False)
    # How much of a driven agent's output is kept (``answer_max_bytes``), as a provider keeps
    # of a command's.
    output_max_bytes: int = DEFAULT_ANSWER_MAX_BYTES

    def close(self) -> None:
        """Close its provider: the environments still live are removed."""
        self.sandbox.close()


def agent_settings(settings: EvalSettings) -> AgentSettings:
    return AgentSettings(
        command=settings.agent_command,
        anthropic_base_url=settings.anthropic.base_url,
        anthropic_api_key=settings.anthropic.api_key,
        openai_base_url=settings.http.base_url,
        openai_api_key=settings.http.api_key,
        provider_settings=settings.provider_settings,
    )


def sandbox_agent(settings: EvalSettings) -> AgentCommand:
    """The agent command run in every sandbox, with the configured model (fix of the
    reference, whose agent CLI ran its default model whatever was configured)."""
    agent = make_agent(settings.sandbox.agent, agent_settings(settings))
    skills_folder = ""
    if settings.skill_delivery == INSTALLED:
        agent, skills_folder = discovering_agent(agent)
    model = settings.model
    invocation = agent.invocation(model=model, workspace_agent=True, sandboxed=True)
    command = AgentCommand(
        agent.name,
        invocation.argv,
        invocation.env,
        files=agent.workspace_files(),
        mounts=agent.credential_mounts,
        skills_folder=skills_folder,
        read_output=_output_reader(agent) if isinstance(agent, GivesTranscript) else None,
        version_argv=_version_argv(agent, invocation.argv),
        driver=invocation.driver,
        missing_hint=str(getattr(agent, "missing_hint", "")),
    )
    if not isinstance(agent, ContinuesSession):
        return command
    start = agent.session_start(model=model, workspace_agent=True, sandboxed=True)

    def continue_argv(session_id: str) -> list[str]:
        return agent.continuation(
            session_id, model=model, workspace_agent=True, sandboxed=True
        ).argv

    return replace(
        command,
        session_argv=start.argv,
        session_of=agent.session_id,
        continue_argv=continue_argv,
    )


def _version_argv(agent: AgentCLI, argv: Sequence[str]) -> tuple[str, ...]:
    """How the agent's executable prints its version (see ``AgentCLI``): () for an agent
    without one, or without an executable."""
    flag = getattr(agent, "version_flag", "--version")
    if not isinstance(flag, str) or not argv:
        return ()
    return (argv[0], flag)


def _output_reader(agent: AgentCLI) -> Callable[[str], tuple[str, Transcript | None]]:
    """How a sandboxed agent's output is read when it prints its events: the final answer the
    agent's ``clean`` gives, and its transcript."""

    def read(output: str) -> tuple[str, Transcript | None]:
        transcript = agent.transcript(output) if isinstance(agent, GivesTranscript) else None
        return agent.clean(output), transcript

    return read


def _looks_secret(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL"))


_DEFAULT_PROVIDER = SandboxSettings().provider


def _endpoint_named(settings: EvalSettings) -> Callable[[str], str]:
    """Replaces the HTTP base URL in an agent's argument or variable by ``http.endpoint_id``
    when one is set: the agent's endpoint is then known by what answers there, as the
    backend's is, and not by a port that changes every run."""
    base_url, endpoint_id = settings.http.base_url, settings.http.endpoint_id
    if not (base_url and endpoint_id):
        return lambda text: text
    return lambda text: text.replace(base_url, endpoint_id)


def sandbox_identity(settings: EvalSettings) -> dict[str, Any]:
    """What decides a sandboxed run besides its workspace, for the cache key: the provider,
    the image, the agent command and the default network. Variables that look like
    credentials are left out. Read from the settings, so a run answered from the cache needs
    no sandbox engine."""
    agent = sandbox_agent(settings)
    named = _endpoint_named(settings)
    env = {name: named(value) for name, value in agent.env.items() if not _looks_secret(name)}
    box = settings.sandbox
    identity: dict[str, Any] = {
        "image": box.image,
        "argv": [named(arg) for arg in agent.argv],
        "env": env,
        "network": box.network,
    }
    if box.provider != _DEFAULT_PROVIDER:  # the keys made before there was a choice stay
        identity["provider"] = box.provider
    # What the provider and the agent were configured with, when they declare settings.
    own = {
        provider: values
        for provider in (
            f"{registry.SANDBOXES.section}.{box.provider}",
            f"{registry.AGENTS.section}.{box.agent}",
        )
        if (values := settings.provider_values(provider))
    }
    if own:
        identity["provider_settings"] = own
    return identity


def build_provider(settings: EvalSettings, slots_for: SlotsFor | None = None) -> SandboxProvider:
    """The configured sandbox provider: on the engine it finds itself (Docker: DOCKER_HOST),
    or with ``sandbox.hosts``, an engine pool of one such provider per engine, whose room
    ``slots_for`` counts (:mod:`pytest_openkata.core.engine_pool`)."""
    factory = registry.SANDBOXES.load(settings.sandbox.provider)
    if not settings.sandbox.hosts:
        provider: SandboxProvider = factory(settings)
        return provider
    from pytest_openkata.core.engine_pool import build_pool

    return build_pool(settings, factory, slots_for)


def build_sandbox(settings: EvalSettings, slots_for: SlotsFor | None = None) -> SandboxSetup:
    """Connect the configured sandbox provider (or engine pool) and set up the agent command."""
    box = settings.sandbox
    return SandboxSetup(
        build_provider(settings, slots_for),
        sandbox_agent(settings),
        box.network,
        float(box.timeout),
        mounts=box.mounts,
        output_max_bytes=settings.answer_max_bytes,
    )


def sandbox_spec(scenario: Scenario, setup: SandboxSetup) -> SandboxSpec:
    """What the scenario's environment is created with: the scenario's network (or the
    configured one), the agent's variables, and the configured host folders and the agent's
    own, ``~`` expanded."""
    mounts = tuple(
        (str(Path(host).expanduser()), target)
        for host, target in (*setup.mounts, *setup.agent.mounts)
    )
    return SandboxSpec(
        name=scenario.path.name,
        network=scenario.network or setup.network,
        env=dict(setup.agent.env),
        mounts=mounts,
        cpus=scenario.cpus,
        memory_mb=scenario.memory_mb,
        image=scenario.image,
        build=image_build(scenario),
    )


@dataclass(frozen=True)
class SandboxRun:
    """One agent run in a sandbox: how it ended, what it changed and, when the agent exited
    0, how each command check ended."""

    result: ExecResult
    diff: WorkspaceDiff
    judge_text: str
    commands: dict[str, CommandOutcome] | None = None
    engine: str = ""  # the engine of a pool it ran on
    lost_engines: tuple[str, ...] = ()  # engines of the pool lost while its sandbox was made
    # The agent's answer as its output gives it (the output itself unless the agent prints its
    # events), and how it worked where it says so.
    answer: str = ""
    transcript: Transcript | None = None
    turns: tuple[Turn, ...] = ()  # every turn of a conversation with follow-ups
    # What the environment was given and ran (CPUs, memory, agent CLI version, image id).
    environment: TrialEnvironment | None = None


def environment_of(environment: SandboxEnvironment, agent_version: str = "") -> TrialEnvironment:
    """What ``environment`` was given and runs, as far as its provider says, and the working
    folder the agent runs in."""
    cpus = getattr(environment, "cpus", None)
    memory = getattr(environment, "memory_mb", None)
    return TrialEnvironment(
        cpus=float(cpus) if isinstance(cpus, int | float) else None,
        memory_mb=memory if isinstance(memory, int) else None,
        agent_version=agent_version,
        image_id=str(getattr(environment, "image_id", "")),
        workdir=workspace_of(environment),
    )


def _at_step(step: str, call: Callable[[], T]) -> T:
    """``call()``; a provider's error names ``step`` first, and keeps whether it is retried
    (or run again on another engine)."""
    try:
        return call()
    except RetryableError as exc:
        raise RetryableError(
            f"{step}: {exc}", retry_after=exc.retry_after, throttled=exc.throttled
        ) from exc
    except SandboxLost as exc:
        raise SandboxLost(f"{step}: {exc}", elsewhere=exc.elsewhere) from exc
    except BackendError as exc:
        raise SandboxError(f"{step}: {exc}") from exc


def _snapshot(
    environment: SandboxEnvironment, step: str, exclude: Callable[[str], bool], workspace: str
) -> Snapshot:
    try:
        return _at_step(
            step, lambda: snapshot_from_tar(environment.get_archive(workspace), exclude=exclude)
        )
    except tarfile.TarError as exc:
        raise SandboxError(f"{step}: unreadable workspace archive: {exc}") from exc


def check_scripts(scenario: Scenario) -> list[tuple[str, bytes]]:
    """The scenario's ``checks/`` folder, by path under :data:`CHECKS_DIR` (never in the
    workspace or the prompt)."""
    reader = SkillReader(scenario.skill_dir)
    found = []
    for rel, path in files_under(scenario.path / "checks"):
        data = reader.read(path)
        if data is not None:
            found.append((f"{CHECKS_DIR.lstrip('/')}/{rel}", data))
    return found


def prepare_workspace(
    environment: SandboxEnvironment, scenario: Scenario, timeout: float, workspace: str = WORKSPACE
) -> None:
    """Give the workspace (the folder ``workspace``) what scenario.json asks for before the
    agent starts: its directory
    fixtures copied in at their install paths, then its setup commands run there in order.
    A setup command that exits non-zero, or does not end within ``timeout``, is the
    scenario's error (its own command failed), naming the command and how it ended."""
    if scenario.fixtures:
        prefix = f"{workspace.lstrip('/')}/"
        files = fixture_files(scenario.skill_dir, scenario.fixtures)
        for executable, mode in ((False, 0o644), (True, 0o755)):
            chosen = [(prefix + name, data) for name, data, x in files if x is executable]
            if chosen:
                archive = files_archive(chosen, mode=mode)
                _at_step("copy fixtures", partial(environment.put_archive, "/", archive))
    for index, command in enumerate(scenario.setup):
        result = _at_step(
            f"setup[{index}]",
            partial(
                environment.exec, ["sh", "-c", command], env={}, workdir=workspace, timeout=timeout
            ),
        )
        if result.timed_out:
            ended = f"did not end within {timeout:g} s"
        elif result.exit_code != 0:
            ended = f"exit status {result.exit_code}"
        else:
            continue
        tail = result.output.strip().splitlines()[-5:]
        detail = ("\n" + "\n".join(tail)) if tail else ""
        raise ScenarioFailure(
            f"scenario.json: setup[{index}] {command!r} failed ({ended}){detail}",
            kind=SCENARIO_ERROR,
            cause=INVALID_INPUT,
        )


def own_image_named(spec: SandboxSpec) -> str:
    """How messages name a scenario's own image: the Dockerfile it was built from, or its
    name."""
    if spec.build is not None:
        return f"the image built from {spec.build.shown}"
    return f"the image {spec.image!r}"


def check_agent_present(
    environment: SandboxEnvironment, spec: SandboxSpec, agent: AgentCommand
) -> None:
    """In a scenario's own image, and for an agent driven from the host (an ACP agent) in
    any image, that the agent's executable is there: an image that lacks it is the sandbox's
    error naming the image and the agent, not the agent's crash. The run's own image
    (``sandbox.image``) is the one made for a command-line agent, and is not asked."""
    own_image = bool(spec.image or spec.build)
    if not (own_image or agent.driver is not None) or not agent.argv:
        return
    executable = agent.argv[0]
    found = _at_step(
        "look for the agent CLI",
        partial(
            environment.exec,
            ["sh", "-c", 'command -v "$1" >/dev/null', "sh", executable],
            env=dict(agent.env),
            workdir="/",
            timeout=60,
        ),
    )
    if found.exit_code == 0:
        return
    if agent.driver is not None:
        image = own_image_named(spec) if own_image else "the sandbox image"
        hint = f": {agent.missing_hint}" if agent.missing_hint else ""
        raise SandboxError(
            f"{agent.name} cannot run in the sandbox: {image} has no {executable!r} "
            f"(exit status {found.exit_code}){hint}"
        )
    raise SandboxError(
        f"{own_image_named(spec)} has no agent CLI {executable!r} (exit status "
        f"{found.exit_code}): a scenario's image must hold the agent, as the sandbox "
        "image does (build it FROM the sandbox image, or install the agent in it)"
    )


def _exec_check(environment: SandboxEnvironment, check: Check, workspace: str) -> ExecResult:
    return environment.exec(
        ["sh", "-c", check.run],
        env={"OPENKATA_CHECKS": CHECKS_DIR},
        workdir=workspace,
        timeout=check.timeout,
    )


def run_commands(
    environment: SandboxEnvironment,
    scenario: Scenario,
    commands: Sequence[Check],
    workspace: str = WORKSPACE,
) -> dict[str, CommandOutcome]:
    """Copy the check scripts in (only now, once the agent's command has exited: the agent
    never saw them, though a process it left running in the background could) and run each
    command check in the workspace (the agent's working folder), in order."""
    scripts = check_scripts(scenario)
    if scripts:
        archive = files_archive(scripts, mode=0o755)
        _at_step("copy check scripts", lambda: environment.put_archive("/", archive))
    outcomes: dict[str, CommandOutcome] = {}
    for check in commands:
        result = _at_step(
            f"check {check.name!r}", partial(_exec_check, environment, check, workspace)
        )
        output = result.output
        if result.cut_at is not None:  # its status still counts; its end is not in ``output``
            output += f"\n... (output cut at {answer_bound(result.cut_at)})"
        outcomes[check.name] = CommandOutcome(result.exit_code, output, result.timed_out)
        if result.timed_out:  # the environment was stopped with it: nothing more can run
            break
    return outcomes


def agent_workspace_files(
    scenario: Scenario, agent: AgentCommand, skill: Path | bool
) -> tuple[tuple[tuple[str, bytes], ...], Path | bool]:
    """The files the agent's workspace gets besides the task (its own, and the installed
    skill where it discovers skills), and where the workspace's ``skill/`` folder comes from:
    with installed skills the workspace has none, and the skill is only where the agent
    looks. Both are the agent's tools: the workspace diff leaves them out."""
    if not agent.skills_folder:
        return agent.files, skill
    installed: list[tuple[str, bytes]] = []
    if skill is not False:
        source = None if skill is True else skill
        installed = installed_skill_files(agent.skills_folder, scenario.skill_dir, source)
    return (*agent.files, *installed), False


def sandbox_run(
    scenario: Scenario,
    prompt: str,
    setup: SandboxSetup,
    *,
    commands: Sequence[Check] = (),
    skill: Path | bool = True,
    follow: NextPrompt | None = None,
    task: str = "",
) -> SandboxRun:
    """One run of the agent in a fresh environment, removed afterwards whatever happens; when
    the agent exited 0, the ``commands`` checks run in it next. ``skill`` is where
    ``/workspace/skill`` comes from (:func:`~pytest_openkata.core.workspace.workspace_files`).
    With ``follow``, each prompt it gives is sent after the agent's answer to the same
    session, in the same environment (``task`` is the first turn's text as the conversation
    shows it); the workspace is snapshotted after the last turn."""
    agent = setup.agent
    agent_files, skill = agent_workspace_files(scenario, agent, skill)
    exclude = tool_files_of(agent_files)
    spec = sandbox_spec(scenario, setup)
    environment = setup.sandbox.create(spec)
    outcomes = None
    turns: list[Turn] = []
    transcripts: list[Transcript | None] = []
    try:
        workspace = workspace_of(environment)
        # One archive, extracted at the root: the workspace and, outside it, the prompt.
        archive = workspace_archive(
            scenario.skill_dir,
            scenario.path,
            agent_files,
            prefix=f"{workspace.lstrip('/')}/",
            extra=[(PROMPT_PATH.lstrip("/"), utf8(prompt))],
            skill=skill,
        )
        check_agent_present(environment, spec, agent)
        _at_step("copy workspace", lambda: environment.put_archive("/", archive))
        prepare_workspace(environment, scenario, setup.timeout, workspace)
        # After the fixtures and setup: neither counts among the agent's changes.
        before = _snapshot(environment, "snapshot before", exclude, workspace)
        version = setup.versions.of(environment, agent.version_argv, workspace)
        had = environment_of(environment, version)
        argv = agent.argv if follow is None else (agent.session_argv or agent.argv)
        result = _run_turn(
            environment,
            setup,
            argv,
            prompt,
            session=None,
            step=f"run {agent.name}",
            workspace=workspace,
        )
        if follow is not None:
            result = _follow_ups(
                environment,
                setup,
                result,
                task=task,
                follow=follow,
                turns=turns,
                transcripts=transcripts,
                workspace=workspace,
            )
        after = _snapshot(environment, "snapshot after", exclude, workspace)
        if commands and _exited_well(result):
            outcomes = run_commands(environment, scenario, commands, workspace)
    finally:
        environment.remove()
    diff = diff_snapshots(before, after)
    engine = str(getattr(environment, "engine", ""))
    lost = tuple(getattr(environment, "lost_engines", ()))
    answer, transcript = _read_turn(agent, result)
    if turns and _exited_well(result):
        told = [t for t in transcripts if t is not None]
        transcript = None
        if len(told) == len(transcripts):
            transcript = joined_turns(told, [turn.user for turn in turns[1:]])
    return SandboxRun(
        result,
        diff,
        judge_text(answer, diff),
        outcomes,
        engine,
        lost,
        answer=answer,
        transcript=transcript,
        environment=had,
        turns=tuple(turns) if _exited_well(result) else (),
    )


def _exited_well(result: ExecResult) -> bool:
    return result.exit_code == 0 and not result.timed_out and result.cut_at is None


def _read_turn(agent: AgentCommand, result: ExecResult) -> tuple[str, Transcript | None]:
    """The answer and transcript of one turn's output (the output itself where the agent
    prints no events, or when it timed out)."""
    if agent.read_output is not None and not result.timed_out:
        return agent.read_output(result.output)
    return result.output, None


def _run_turn(
    environment: SandboxEnvironment,
    setup: SandboxSetup,
    argv: Sequence[str],
    prompt: str,
    *,
    session: str | None,
    step: str,
    workspace: str,
) -> ExecResult:
    """One turn of the agent: ``argv`` run with the prompt file on its standard input, or,
    for an agent driven from the host, its process attached and driven with ``prompt`` (to
    the session ``session`` names, when one is continued)."""
    agent = setup.agent
    if agent.driver is not None:
        return drive_agent(environment, setup, prompt, session, step, workspace=workspace)
    return _at_step(
        step,
        lambda: environment.exec(
            [*run_agent_argv(workspace), *argv],
            env=agent.env,
            workdir=workspace,
            timeout=setup.timeout,
        ),
    )


def drive_agent(
    environment: SandboxEnvironment,
    setup: SandboxSetup,
    prompt: str,
    session: str | None,
    step: str,
    *,
    workspace: str = WORKSPACE,
) -> ExecResult:
    """One turn of an agent driven from the host: its process started in ``environment``
    with standard input and output attached, and the agent's driver run against it on a
    thread of its own, for at most ``sandbox.timeout``. On every way out (its end, a timeout,
    a failure, an interrupt) the process and whatever it started in the environment are
    stopped: the environment side, not only the host's end. The result is as a command's:
    the driver's output (bounded), status 0 or 1, and the end of the agent's standard error
    after a failure."""
    agent = setup.agent
    driver = agent.driver
    attach = getattr(environment, "attach", None)
    if driver is None or attach is None:
        raise AgentConfigError(
            f"{agent.name} runs driven from the host, and the sandbox provider cannot attach "
            "a process in its environments: choose another agent or provider"
        )
    process: AttachedProcess = _at_step(
        step, partial(attach, agent.argv, env=agent.env, workdir=workspace)
    )
    output = BoundedBuffer(setup.output_max_bytes)
    ended: list[int] = []
    failed: list[BaseException] = []

    def write(text: str) -> None:
        output.add(text.encode())

    def turn() -> None:
        try:
            ended.append(driver(process, prompt, session, write))
        except BaseException as exc:  # raised again on the caller's thread
            failed.append(exc)

    worker = threading.Thread(target=turn, name=f"{agent.name} turn", daemon=True)
    timed_out = True
    try:
        worker.start()
        worker.join(setup.timeout)
        timed_out = worker.is_alive()
    finally:
        try:
            process.close_input()
            if not timed_out:
                process.wait(_DRIVEN_EXIT_SECONDS)  # its own end first: it may save its session
        finally:  # a second interrupt in that wait still stops it in the environment
            process.stop()
        worker.join(_DRIVEN_EXIT_SECONDS)
    if failed:
        raise failed[0]
    status = None if timed_out else (ended[0] if ended else 1)
    text = output.data().decode("utf-8", "replace")
    if status not in (0, None):
        errors = process.errors().strip().splitlines()[-5:]
        if errors:
            text += "\n" + "\n".join(errors)
    cut_at = output.limit if output.over.is_set() else None
    return ExecResult(text, status, timed_out, cut_at)


def _follow_ups(
    environment: SandboxEnvironment,
    setup: SandboxSetup,
    first: ExecResult,
    *,
    task: str,
    follow: NextPrompt,
    turns: list[Turn],
    transcripts: list[Transcript | None],
    workspace: str,
) -> ExecResult:
    """Send each follow-up prompt to the agent's session after its answer, until ``follow``
    gives none or a turn does not exit well (that turn's result is returned, and ends the
    trial). ``turns`` and ``transcripts`` get each turn."""
    agent, result, user = setup.agent, first, task
    while _exited_well(result):
        answer, transcript = _read_turn(agent, result)
        turns.append(Turn(user, answer))
        transcripts.append(transcript)
        following = follow(turns)
        if following is None:
            return result
        if agent.continue_argv is None or agent.session_of is None:
            raise AgentConfigError(f"the agent {agent.name} cannot continue a session")
        session_id = agent.session_of(result.output)
        if session_id is None:  # the agent's own failure, not the sandbox's
            unnamed = SandboxError(f"{agent.name} named no session to continue in its output")
            unnamed.cause = AGENT_CRASH
            raise unnamed
        number = len(turns) + 1
        if agent.driver is None:
            prompt = files_archive([(PROMPT_PATH.lstrip("/"), utf8(following))])
            _at_step(
                f"copy the prompt of turn {number}",
                partial(environment.put_archive, "/", prompt),
            )
        argv = agent.continue_argv(session_id)
        result = _run_turn(
            environment,
            setup,
            argv,
            following,
            session=session_id,
            step=f"run {agent.name} (turn {number})",
            workspace=workspace,
        )
        user = following
    return result


def again_elsewhere(call: Callable[[], T], lost: list[str]) -> T:
    """``call()``, made again while it fails because its engine was lost and the provider has
    others (an engine pool takes each lost engine out, so this ends); each loss is added to
    ``lost``. A loss with nowhere else to go raises."""
    while True:
        try:
            return call()
        except SandboxLost as exc:
            if not exc.elsewhere:
                raise
            lost.append(str(exc))


def replay_commands(
    scenario: Scenario,
    setup: SandboxSetup,
    changes: WorkspaceDiff,
    commands: Sequence[Check],
    *,
    skill: Path | bool = True,
) -> dict[str, CommandOutcome]:
    """Run the command checks on the workspace an earlier agent run left (its result came from
    the cache): a fresh environment gets the workspace as it was before that run, then the
    run's changes. Only the workspace is rebuilt: whatever else the agent changed in its
    environment is not there, and as snapshots keep no file modes, a changed file is
    executable when it starts with ``#!``."""
    agent = setup.agent
    cut = [path for path, content in (*changes.added, *changes.modified) if content.truncated]
    if cut:
        raise ScenarioFailure(
            f"checks: {cut[0]} is larger than the cached workspace keeps, so the checks cannot "
            "run again on it; run with --eval-cache refresh",
            cause=CHECK_FAILED,
        )
    agent_files, skill = agent_workspace_files(scenario, agent, skill)
    environment = setup.sandbox.create(sandbox_spec(scenario, setup))
    try:
        workspace = workspace_of(environment)
        prefix = f"{workspace.lstrip('/')}/"
        base = workspace_archive(
            scenario.skill_dir, scenario.path, agent_files, prefix=prefix, skill=skill
        )
        # Snapshots keep no file modes: a script (``#!``) is made executable again.
        changed = [
            (prefix + path, content.data) for path, content in (*changes.added, *changes.modified)
        ]
        overlay = files_archive([(n, d) for n, d in changed if not d.startswith(b"#!")])
        scripts = files_archive([(n, d) for n, d in changed if d.startswith(b"#!")], mode=0o755)
        _at_step("copy workspace", lambda: environment.put_archive("/", base))
        prepare_workspace(environment, scenario, setup.timeout, workspace)
        _at_step("copy the agent's changes", lambda: environment.put_archive("/", overlay))
        _at_step("copy the agent's scripts", lambda: environment.put_archive("/", scripts))
        if changes.deleted:
            removed = _at_step(
                "remove the files the agent deleted",
                lambda: environment.exec(
                    ["rm", "-f", "--", *changes.deleted], env={}, workdir=workspace, timeout=60
                ),
            )
            if removed.exit_code != 0:
                raise SandboxError(f"remove the files the agent deleted: {removed.output.strip()}")
        return run_commands(environment, scenario, commands, workspace)
    finally:
        environment.remove()


def run_agent_in_sandbox(
    scenario: Scenario,
    prompt: str,
    setup: SandboxSetup,
    retry: RetryPolicy,
    *,
    commands: Sequence[Check] = (),
    skill: Path | bool = True,
    follow: NextPrompt | None = None,
    task: str = "",
) -> tuple[AgentResult, dict[str, CommandOutcome]]:
    """Run the agent in a fresh sandbox, then the ``commands`` checks in it; the agent's
    output and workspace changes as graders see them, and how each command ended.

    A timed-out agent, one that exits non-zero or one that printed more than
    ``answer_max_bytes`` ends the trial (:class:`ScenarioFailure`): no check runs then.
    """
    lost: list[str] = []
    run = again_elsewhere(
        lambda: call_with_retry(
            lambda: sandbox_run(
                scenario,
                prompt,
                setup,
                commands=commands,
                skill=skill,
                follow=follow,
                task=task,
            ),
            retry,
            describe="sandbox run",
        ),
        lost,
    )
    name, result = setup.agent.name, run.result
    if result.oom_killed:
        memory = "" if scenario.memory_mb is None else f" of {scenario.memory_mb} MiB"
        raise ScenarioFailure(
            f"sandbox: {name} ran out of memory{memory} and was killed "
            f"(exit status {result.exit_code})",
            cause=OUT_OF_MEMORY,
            environment=run.environment,
        )
    if result.cut_at is not None:
        raise ScenarioFailure(
            f"sandbox: {name} printed more than {answer_bound(result.cut_at)}",
            cause=AGENT_CRASH,
            environment=run.environment,
        )
    if result.timed_out:
        raise ScenarioFailure(
            f"sandbox: {name} timed out after {setup.timeout:g} s (its partial output and "
            "workspace changes are in the report's agent_output)",
            agent_output=run.judge_text,
            cause=TIMEOUT,
            environment=run.environment,
        )
    if result.exit_code != 0:
        tail = result.output.strip().splitlines()[-5:]
        detail = ("\n" + "\n".join(tail)) if tail else ""
        raise ScenarioFailure(
            f"sandbox: {name}: exit status {result.exit_code}{detail}",
            cause=AGENT_CRASH,
            environment=run.environment,
        )
    agent = AgentResult(
        run.judge_text,
        run.answer,
        run.diff,
        engine=run.engine,
        lost_engines=(*lost, *run.lost_engines),
        transcript=run.transcript,
        environment=run.environment,
        turns=run.turns,
    )
    return agent, run.commands or {}


def run_in_sandbox(
    scenario: Scenario, prompt: str, setup: SandboxSetup, retry: RetryPolicy
) -> AgentResult:
    """Run the agent in a fresh sandbox; its output and workspace changes as graders see them
    (:func:`run_agent_in_sandbox` without checks)."""
    return run_agent_in_sandbox(scenario, prompt, setup, retry)[0]


__all__ = [
    "CHECKS_DIR",
    "SandboxRun",
    "SandboxSetup",
    "again_elsewhere",
    "agent_settings",
    "agent_workspace_files",
    "build_provider",
    "build_sandbox",
    "check_agent_present",
    "check_scripts",
    "drive_agent",
    "environment_of",
    "own_image_named",
    "prepare_workspace",
    "replay_commands",
    "run_agent_argv",
    "run_agent_in_sandbox",
    "run_commands",
    "run_in_sandbox",
    "sandbox_agent",
    "sandbox_identity",
    "sandbox_run",
    "sandbox_spec",
    "workspace_of",
]
