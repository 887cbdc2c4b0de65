"""The CLI backend: a coding-agent CLI run on the host as a Completer (spec section 5a).

Every CLI agent gets the reference kiro backend's prompt, ``system + "\\n\\n" + user`` (so an
empty system text leaves ``"\\n\\n"`` in front), on its **standard input**, never in ``argv``.
Standard output is the answer, standard error is kept for the error text. The CLI runs in a
new session; when the deadline passes, or when the CLI exits, its whole process group is
killed, so no helper process it started outlives the call. Should the run itself be killed
outright, the kernel kills the CLI (its parent-death signal), and the next run kills what the
CLI had started (every process of it carries the run's mark in its environment:
:mod:`pytest_openkata.infra.processes`). There are no retries: the runner owns the retry
policy.

Errors, in the reference's priority order and texts (``<cli>`` is the agent's name, e.g.
``kiro-cli``):

- ``<cli> printed more than 4 MiB, the bound of answer_max_bytes; it was stopped``
  (:class:`~.AnswerTooLargeError`): standard output is kept up to ``answer_max_bytes`` and
  the CLI's process group is killed as soon as it prints more; standard error is kept up to
  the same bound and the rest is read and dropped (it only ever goes into error texts);
- ``<cli> timed out after 2m0s`` (:class:`AgentTimeoutError`, with the partial output);
- ``<cli> failed: exit status 1\\nstderr: <stderr>`` when the CLI wrote to standard error,
  else ``<cli> failed: exit status 1`` (:class:`AgentFailedError`); a CLI ended by a signal
  reads ``signal: killed`` instead of ``exit status <n>``;
- ``<cli> not found in PATH`` plus the agent's install hint on a second line
  (:class:`AgentNotFoundError`); any other start failure is ``<cli> failed: <error>``;
- ``<cli> returned empty response`` when standard output is empty
  (:class:`~.MalformedResponseError`, of the kind ``agent_crash``). An agent whose events hold
  no final answer answered with nothing: that empty answer is graded, not an error.

Deviation: the stderr in an error text loses its trailing white space. Error texts pass through
``redact`` (the answer itself does not: it is the agent's output, masked where it is written).
"""

from __future__ import annotations

import contextlib
import copy
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, TYPE_CHECKING

from pytest_openkata.contracts.agents import (
    AgentCLI,
    AgentInvocation,
    ContinuesSession,
    GivesTranscript,
    ReadsEventsFile,
)
from pytest_openkata.contracts.backends import (
    DEFAULT_ANSWER_MAX_BYTES,
    ResponseSchema,
    answer_bound,
)
from pytest_openkata.contracts.errors import (
    AGENT_CRASH,
    AgentConfigError,
    AgentFailedError,
    AgentNotFoundError,
    AgentTimeoutError,
    AnswerTooLargeError,
    MalformedResponseError,
)
from pytest_openkata.contracts.transcripts import Transcript
from pytest_openkata.infra.bounded import BoundedBuffer
from pytest_openkata.infra.environ import environ_snapshot
from pytest_openkata.infra.processes import (
    OWNER_VARIABLE,
    owner_mark,
    with_parent_death_signal,
)
from pytest_openkata.infra.tempfiles import run_folder
from pytest_openkata.infra.text import utf8

__all__ = [
    "ERROR_OUTPUT_CHARS",
    "PROMPT_SEPARATOR",
    "AgentFailedError",
    "AgentNotFoundError",
    "AgentTimeoutError",
    "CLIBackend",
    "agent_prompt",
    "go_duration",
]

PROMPT_SEPARATOR = "\n\n"
# After the kill, how long to wait for output still in the pipes (a process that left the
# group may keep them open).
DRAIN_GRACE = 5.0
ERROR_OUTPUT_CHARS = 2000
EVENTS_FILE_NAME = "events.jsonl"
_READ_SIZE = 65536

CwdFactory = Callable[[], AbstractContextManager[Path | None]]


def agent_prompt(system: str, user: str) -> str:
    """The text a CLI agent gets on standard input (the reference kiro backend's layout)."""
    return system + PROMPT_SEPARATOR + user


def go_duration(seconds: float) -> str:
    """``seconds`` as Go's ``time.Duration.String()``: ``2m0s``, ``1m30s``, ``5s``, ``1h0m0s``,
    ``1.5s``, ``250ms``."""
    nanos = round(seconds * 1_000_000_000)
    sign = "-" if nanos < 0 else ""
    nanos = abs(nanos)
    if nanos == 0:
        return "0s"
    if nanos < 1_000:
        return f"{sign}{nanos}ns"
    if nanos < 1_000_000:
        return f"{sign}{_decimal(nanos, 3)}µs"
    if nanos < 1_000_000_000:
        return f"{sign}{_decimal(nanos, 6)}ms"
    minutes, second_nanos = divmod(nanos, 60_000_000_000)
    hours, minutes = divmod(minutes, 60)
    text = f"{_decimal(second_nanos, 9)}s"
    if hours:
        return f"{sign}{hours}h{minutes}m{text}"
    if minutes:
        return f"{sign}{minutes}m{text}"
    return f"{sign}{text}"


def _decimal(value: int, digits: int) -> str:
    """``value / 10**digits`` without trailing zeros, as Go prints duration fractions."""
    whole, fraction = divmod(value, 10**digits)
    decimals = str(fraction).rjust(digits, "0").rstrip("0")
    return f"{whole}.{decimals}" if decimals else str(whole)


def _no_cwd() -> AbstractContextManager[Path | None]:
    return contextlib.nullcontext(None)


def _identity(text: str) -> str:
    return text


class _LiveProcesses:
    """The CLI processes running now, so that :meth:`CLIBackend.close` can end them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pids: set[int] = set()
        self.closed = False

    def start(self, spawn: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes] | None:
        """The process ``spawn`` starts, kept so that :meth:`kill_all` ends it; None, and
        nothing started, once the backend is closed. Started and kept under the lock that
        :meth:`kill_all` takes: a run that stops (Ctrl-C, SIGTERM) while a scenario's thread
        starts its CLI either ends that CLI or keeps it from starting, and never leaves one
        running that nothing will end."""
        with self._lock:
            if self.closed:
                return None
            process = spawn()
            self._pids.add(process.pid)
            return process

    def discard(self, pid: int) -> None:
        """Called before the process is reaped: its group id cannot be reused until then."""
        with self._lock:
            self._pids.discard(pid)

    def kill_all(self) -> None:
        with self._lock:
            self.closed = True
            for pid in self._pids:
                _kill_group(pid)


@dataclass(frozen=True)
class _Finished:
    stdout: bytes
    stderr: bytes
    returncode: int
    timed_out: bool
    stdout_over: bool = False  # it printed more than the bound: it was stopped there


class CLIBackend:
    """A :class:`~.Completer` that runs an :class:`AgentCLI` per call.

    ``cwd_factory`` gives, per call, a context manager yielding the working folder (``None``:
    the current one), e.g. ``functools.partial(prepare_agent_dir, skill)`` for kiro's agent
    mode; it is left once the CLI has exited. ``timeout`` (seconds) bounds each call.
    """

    def __init__(
        self,
        agent: AgentCLI,
        *,
        model: str,
        timeout: float,
        cwd_factory: CwdFactory | None = None,
        workspace_agent: bool = False,
        redact: Callable[[str], str] = _identity,
        answer_max_bytes: int = DEFAULT_ANSWER_MAX_BYTES,
        skills_folder: str = "",
    ) -> None:
        if not timeout > 0:
            raise ValueError(f"timeout must be positive seconds, got {timeout!r}")
        self.agent = agent
        self.model = model
        self.timeout = timeout
        self.answer_max_bytes = answer_max_bytes
        self.workspace_agent = workspace_agent
        # Where the agent discovers installed skills ("": the skill is in the prompt).
        self.skills_folder = skills_folder
        self._cwd_factory = cwd_factory or _no_cwd
        self._redact = redact
        self._live = _LiveProcesses()

    @property
    def endpoint(self) -> str:
        return self.agent.endpoint

    def for_skill(self, skill_dir: Path, *, source: Path | bool = True) -> CLIBackend:
        """A workspace agent runs each call in the folder its agent prepares from the skill
        (kiro's agent folder; for most agents the current folder). With installed skills
        (``skills_folder``), each call runs in a temporary folder holding the skill where the
        agent discovers it, read from ``source`` (True: ``skill_dir``; a folder: another copy
        of it; False: no skill, a baseline arm's)."""
        if not self.workspace_agent:
            return self
        if self.skills_folder:
            from pytest_openkata.core.skill_delivery import installed_folder, installed_skill_files

            files = (
                []
                if source is False
                else installed_skill_files(
                    self.skills_folder, skill_dir, None if source is True else source
                )
            )
            return self.in_folder(partial(installed_folder, files))
        return self.in_folder(partial(self.agent.host_folder, skill_dir))

    def installing(self, files: Sequence[tuple[str, bytes]]) -> CLIBackend:
        """The same backend running each call in a temporary folder holding ``files`` (the
        installed skills, by path relative to that folder)."""
        from pytest_openkata.core.skill_delivery import installed_folder

        return self.in_folder(partial(installed_folder, list(files)))

    def in_folder(self, cwd_factory: CwdFactory) -> CLIBackend:
        """The same backend running each call in the folder ``cwd_factory`` gives; it shares
        this one's running processes, so :meth:`close` of either ends them all."""
        view = copy.copy(self)
        view._cwd_factory = cwd_factory
        return view

    def close(self) -> None:
        """Kill the CLIs still running (scenarios abandoned after ``-x`` or Ctrl-C); later calls
        start none."""
        self._live.kill_all()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(agent={self.agent.name!r}, model={self.model!r}, "
            f"workspace_agent={self.workspace_agent!r})"
        )

    def complete(self, system: str, user: str, *, schema: ResponseSchema | None = None) -> str:
        """The agent's cleaned answer; ``schema`` is ignored (CLIs answer in free text)."""
        return self.complete_transcribed(system, user)[0]

    def complete_transcribed(self, system: str, user: str) -> tuple[str, Transcript | None]:
        """The agent's cleaned answer, and how it worked where its output says so."""
        return self._read(*self._stdout(system, user))

    @contextlib.contextmanager
    def session(self) -> Iterator[Callable[[str], tuple[str, Transcript | None]]]:
        """Sends prompts one after another to one session of the agent (follow-up turns): the
        first as :meth:`complete_transcribed` sends it, each later one on its own to the
        session the previous turn's output names. Every turn runs in the same working folder
        and with the same private folders, removed when the session ends. Raises
        :class:`AgentConfigError` when the agent cannot continue a session."""
        agent = self.agent
        if not isinstance(agent, ContinuesSession):
            raise AgentConfigError(f"the agent {agent.name} cannot continue a session")
        with self._cwd_factory() as cwd, contextlib.ExitStack() as stack:
            folders: dict[str, str] = {}
            printed: list[str] = []

            def private_for(invocation: AgentInvocation) -> dict[str, str]:
                for variable in invocation.private_dirs:
                    if variable not in folders:
                        folders[variable] = stack.enter_context(run_folder(agent.name))
                return {variable: folders[variable] for variable in invocation.private_dirs}

            def send(prompt: str) -> tuple[str, Transcript | None]:
                model, workspace_agent = self.model, self.workspace_agent
                if not printed:
                    invocation = agent.session_start(model=model, workspace_agent=workspace_agent)
                    data = agent_prompt("", prompt)
                else:
                    session_id = agent.session_id(printed[-1])
                    if session_id is None:
                        raise MalformedResponseError(
                            f"{agent.name} named no session to continue in its output"
                        )
                    invocation = agent.continuation(
                        session_id, model=model, workspace_agent=workspace_agent
                    )
                    data = prompt
                finished = self._run(invocation, utf8(data), cwd, private_for(invocation))
                printed.append(self._answer(finished))
                return self._read(printed[-1])

            yield send

    def _read(self, stdout: str, events: str | None = None) -> tuple[str, Transcript | None]:
        """The cleaned answer of what the agent printed, and its transcript where it says: in
        the ``events`` it wrote to its events file, else in what it printed."""
        transcript = None
        if events is not None and isinstance(self.agent, ReadsEventsFile):
            try:
                transcript = self.agent.events_transcript(events, stdout)
            except MalformedResponseError as exc:
                raise MalformedResponseError(self._redact(str(exc))) from None
        elif isinstance(self.agent, GivesTranscript):
            transcript = self.agent.transcript(stdout)
        # Events that hold no final answer are the agent's own outcome (it gave up, or ended
        # without a word): an empty answer, graded like any other, never an error.
        answer = self.agent.clean(stdout)
        return answer, transcript

    def _stdout(self, system: str, user: str) -> tuple[str, str | None]:
        """What the agent printed on standard output, once it exited well, and what it wrote
        to its events file (None: it has none, or wrote nothing there)."""
        invocation = self.agent.invocation(model=self.model, workspace_agent=self.workspace_agent)
        prompt = utf8(agent_prompt(system, user))
        with self._cwd_factory() as cwd, contextlib.ExitStack() as stack:
            private = {
                variable: stack.enter_context(run_folder(self.agent.name))
                for variable in invocation.private_dirs
            }
            events_file = None
            if invocation.events_variable:
                folder = stack.enter_context(run_folder(f"{self.agent.name}-events"))
                events_file = Path(folder) / EVENTS_FILE_NAME
                private[invocation.events_variable] = str(events_file)
            finished = self._run(invocation, prompt, cwd, private)
            stdout = self._answer(finished)
            events = None if events_file is None else self._events(events_file)
        return stdout, events

    def _events(self, path: Path) -> str | None:
        """What the agent wrote to its events file, at most ``answer_max_bytes`` of it."""
        try:
            with path.open("rb") as file:
                data = file.read(self.answer_max_bytes + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise AgentFailedError(
                self._redact(f"{self.agent.name}: its events file cannot be read: {exc.strerror}")
            ) from exc
        if len(data) > self.answer_max_bytes:
            raise AnswerTooLargeError(
                self._redact(
                    f"{self.agent.name} wrote more than {answer_bound(self.answer_max_bytes)} "
                    "to its events file"
                )
            )
        return data.decode(errors="replace")

    def _run(
        self,
        invocation: AgentInvocation,
        prompt: bytes,
        cwd: Path | None,
        private_dirs: dict[str, str],
    ) -> _Finished:
        name = self.agent.name
        env = {
            **environ_snapshot(),
            **invocation.env,
            **private_dirs,
            OWNER_VARIABLE: owner_mark(),
        }
        executable = invocation.argv[0]
        if os.sep not in executable and shutil.which(executable, path=env.get("PATH")) is None:
            raise AgentNotFoundError(self._with_hint(f"{name} not found in PATH"))
        if os.sep in executable and not os.path.isfile(executable):
            raise AgentNotFoundError(self._with_hint(f"{name} not found at {executable}"))
        try:
            process = self._live.start(
                lambda: subprocess.Popen(
                    # On Linux through a launcher that gives the CLI the parent-death signal.
                    with_parent_death_signal(list(invocation.argv)),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    cwd=cwd,
                    env=env,
                    start_new_session=True,
                )
            )
        except FileNotFoundError as exc:
            if cwd is not None and exc.filename == str(cwd):
                raise AgentFailedError(self._redact(f"{name} failed: {exc}")) from exc
            where = "in PATH" if os.sep not in executable else f"at {executable}"
            raise AgentNotFoundError(self._with_hint(f"{name} not found {where}")) from exc
        except OSError as exc:
            raise AgentFailedError(self._redact(f"{name} failed: {exc}")) from exc
        if process is None:
            raise AgentFailedError(f"{name} was not started: the run is stopping")
        return _communicate(process, prompt, self.timeout, self._live, self.answer_max_bytes)

    def _with_hint(self, message: str) -> str:
        hint = self.agent.install_hint
        return self._redact(f"{message}\n{hint}" if hint else message)

    def _answer(self, finished: _Finished) -> str:
        name = self.agent.name
        stdout = finished.stdout.decode(errors="replace")
        stderr = finished.stderr.decode(errors="replace")
        if finished.stdout_over:
            too_large = AnswerTooLargeError(
                self._redact(
                    f"{name} printed more than {answer_bound(self.answer_max_bytes)}; "
                    "it was stopped"
                )
            )
            too_large.cause = AGENT_CRASH  # the CLI's output, not an endpoint's answer
            raise too_large
        if finished.timed_out:
            raise AgentTimeoutError(
                self._redact(f"{name} timed out after {go_duration(self.timeout)}"),
                timeout=self.timeout,
                partial_output=self._redact(stdout),
                partial_stderr=self._redact(stderr),
            )
        if finished.returncode != 0:
            status = _exit_text(finished.returncode)
            message = f"{name} failed: {status}"
            if finished.stderr:
                message += f"\nstderr: {stderr.rstrip()}"
            elif stdout.strip() and self.agent.output_in_errors:
                message += f"\nstdout: {_tail(stdout.rstrip())}"
            raise AgentFailedError(
                self._redact(message),
                exit_status=finished.returncode,
                stderr=self._redact(stderr),
                output=self._redact(stdout),
            )
        if not finished.stdout:  # the reference's error: the CLI printed nothing at all
            silent = MalformedResponseError(f"{name} returned empty response")
            silent.cause = AGENT_CRASH
            raise silent
        return stdout


def _tail(text: str) -> str:
    """The end of ``text``, where a CLI prints why it stopped, at most ``ERROR_OUTPUT_CHARS``."""
    if len(text) <= ERROR_OUTPUT_CHARS:
        return text
    return "..." + text[-ERROR_OUTPUT_CHARS:]


def _exit_text(returncode: int) -> str:
    """Go's ``ExitError`` text: ``exit status 2`` or ``signal: killed``."""
    if returncode >= 0:
        return f"exit status {returncode}"
    try:
        description = signal.strsignal(-returncode) or f"signal {-returncode}"
    except ValueError:
        description = f"signal {-returncode}"
    return f"signal: {description.lower()}"


def _communicate(
    process: subprocess.Popen[bytes],
    prompt: bytes,
    timeout: float,
    live: _LiveProcesses,
    max_bytes: int = DEFAULT_ANSWER_MAX_BYTES,
) -> _Finished:
    """Feed ``prompt``, collect both outputs up to ``max_bytes`` each, and kill the process
    group when the deadline passes, when standard output goes past ``max_bytes``, or when the
    CLI exits (or the caller is interrupted)."""
    stdin, out_pipe, err_pipe = process.stdin, process.stdout, process.stderr
    if stdin is None or out_pipe is None or err_pipe is None:  # Popen was given PIPE for all
        raise RuntimeError("the agent process has no pipes")
    stdout = BoundedBuffer(max_bytes)
    stderr = BoundedBuffer(max_bytes)  # past the bound, read and dropped
    threads = [
        threading.Thread(target=_feed, args=(stdin, prompt), daemon=True),
        threading.Thread(target=_drain, args=(out_pipe, stdout), daemon=True),
        threading.Thread(target=_drain, args=(err_pipe, stderr), daemon=True),
    ]
    for thread in threads:
        thread.start()
    try:
        timed_out = not _wait_unreaped(process.pid, timeout, stdout.over)
    finally:
        # The leader is alive or an unreaped zombie here, so its group id cannot have been
        # reused: killing the group reaches the CLI's own processes only.
        _kill_group(process.pid)
        live.discard(process.pid)
        process.wait()
    deadline = time.monotonic() + DRAIN_GRACE
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return _Finished(
        stdout.data(), stderr.data(), process.returncode, timed_out, stdout.over.is_set()
    )


def _wait_unreaped(pid: int, timeout: float, stop: threading.Event | None = None) -> bool:
    """Wait until ``pid`` exits, without reaping it, or ``stop`` is set; False when ``timeout``
    passed first."""
    deadline = time.monotonic() + timeout
    delay = 0.0005
    while True:
        if stop is not None and stop.is_set():
            return True
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        delay = min(delay * 2, remaining, 0.05)
        time.sleep(delay)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _feed(pipe: IO[bytes], data: bytes) -> None:
    """Write the prompt and close standard input; a CLI that exits without reading it is fine."""
    with contextlib.suppress(OSError):
        pipe.write(data)
    with contextlib.suppress(OSError):
        pipe.close()


def _drain(pipe: IO[bytes], sink: BoundedBuffer) -> None:
    read = getattr(pipe, "read1", pipe.read)
    with contextlib.suppress(OSError, ValueError):
        while chunk := read(_READ_SIZE):
            sink.add(chunk)


if TYPE_CHECKING:  # the protocol this provider implements, checked by mypy
    from pytest_openkata.contracts.backends import Completer

    _implements: type[Completer] = CLIBackend
