"""A second sandbox provider for tests: each environment is a temporary folder on the host and
its commands are local processes. It isolates nothing; it shows what a provider has to do, and
lets the core's flow and an engine pool run without a Docker engine.

:class:`LocalEngine` stands for one engine of a pool that can stop answering (as a killed
dockerd does): from then on every call of its environments raises :class:`SandboxLost`.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pytest_openkata.contracts.errors import SandboxError, SandboxLost
from pytest_openkata.contracts.sandboxes import AgentCommand, EngineCheck, ExecResult, SandboxSpec


class LocalEnvironment:
    """A temporary folder standing for the environment's root; commands are local processes.

    It isolates nothing (the host's network, no mounts, the host's programs): it only shows
    what a provider has to do.
    """

    def __init__(self, root: Path, spec: SandboxSpec) -> None:
        self.root = root
        self.spec = spec

    def _host(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def exec(
        self, argv: Sequence[str], *, env: Mapping[str, str], workdir: str, timeout: float
    ) -> ExecResult:
        process = subprocess.Popen(
            list(argv),
            cwd=self._host(workdir),
            env={**os.environ, **self.spec.env, **env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a timeout ends the command's children too
        )
        timed_out = False
        try:
            try:
                output, _ = process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                os.killpg(process.pid, signal.SIGKILL)
                output, _ = process.communicate()  # what it printed before
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise
        exit_code = None if timed_out else process.returncode
        return ExecResult(output.decode("utf-8", errors="replace"), exit_code, timed_out)

    def put_archive(self, path: str, data: bytes) -> None:
        try:
            with tarfile.open(fileobj=io.BytesIO(data)) as archive:
                archive.extractall(self._host(path), filter="data")
        except (tarfile.TarError, OSError) as exc:
            raise SandboxError(f"cannot extract the archive: {exc}") from exc

    def get_archive(self, path: str) -> Iterable[bytes]:
        folder = self._host(path)
        if not folder.is_dir():
            raise SandboxError(f"no folder {path}")
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            archive.add(folder, arcname=folder.name)
        data = buffer.getvalue()
        return (data[start : start + 4096] for start in range(0, len(data), 4096))

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class LocalProvider:
    def __init__(self) -> None:
        self.made: list[LocalEnvironment] = []

    def create(self, spec: SandboxSpec) -> LocalEnvironment:
        root = Path(tempfile.mkdtemp(prefix=f"openkata-local-{spec.name}-"))
        environment = self._environment(root, spec)
        self.made.append(environment)
        return environment

    def _environment(self, root: Path, spec: SandboxSpec) -> LocalEnvironment:
        return LocalEnvironment(root, spec)

    def close(self) -> None:
        for environment in self.made:
            environment.remove()


# An agent CLI: the prompt on its standard input, a line "VERB args" of it for each action.
LOCAL_AGENT_CODE = r"""
import os, sys, time
prompt = sys.stdin.read()
print("local agent", *sys.argv[1:], "var=" + os.environ.get("AGENT_VAR", "unset"))
print("prompt bytes:", len(prompt.encode()))
print("workspace:", *sorted(os.listdir(".")))
status = 0
for line in prompt.splitlines():
    verb, _, rest = line.partition(" ")
    if verb == "WRITE":
        path, _, text = rest.partition(" ")
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w") as file:
            file.write(text + "\n")
        print("wrote", path)
    elif verb == "DELETE":
        os.remove(rest)
        print("deleted", rest)
    elif verb == "SLEEP":
        print("sleeping", rest, flush=True)
        time.sleep(float(rest))
    elif verb == "EXIT":
        status = int(rest)
print("done")
sys.exit(status)
"""
LOCAL_AGENT = AgentCommand(
    "local-agent",
    [sys.executable, "-u", "-c", LOCAL_AGENT_CODE, "--model", "model-y"],
    env={"AGENT_VAR": "from-the-agent"},
    files=((".local-agent/config.json", b'{"tools":[]}'),),
)


class LocalEngine(LocalProvider):
    """A local provider that can stop answering, as an engine whose daemon was killed; it
    reports ``cpus`` when a pool checks it."""

    def __init__(self, cpus: int = 2, *, stops_in_exec: int | None = None) -> None:
        super().__init__()
        self.cpus = cpus
        self.stopped = threading.Event()
        self.closed = False
        # Stop while the Nth command of its environments runs (the agent's is the first).
        self.stops_in_exec = stops_in_exec
        self.execs = 0

    def stop(self) -> None:
        self.stopped.set()

    def _environment(self, root: Path, spec: SandboxSpec) -> LocalEnvironment:
        return _EngineEnvironment(root, spec, self)

    def create(self, spec: SandboxSpec) -> LocalEnvironment:
        if self.stopped.is_set():
            raise SandboxLost("the engine stopped answering")
        return super().create(spec)

    def check(self) -> EngineCheck:
        return EngineCheck(f"local, {self.cpus} CPUs", self.cpus)

    def close(self) -> None:
        self.closed = True
        super().close()


class _EngineEnvironment(LocalEnvironment):
    def __init__(self, root: Path, spec: SandboxSpec, engine: LocalEngine) -> None:
        super().__init__(root, spec)
        self.local_engine = engine
        self.engine_stopped = engine.stopped

    def _answering(self) -> None:
        if self.engine_stopped.is_set():
            raise SandboxLost("the engine stopped answering")

    def exec(
        self, argv: Sequence[str], *, env: Mapping[str, str], workdir: str, timeout: float
    ) -> ExecResult:
        self._answering()
        result = super().exec(argv, env=env, workdir=workdir, timeout=timeout)
        engine = self.local_engine
        engine.execs += 1
        if engine.execs == engine.stops_in_exec:
            engine.stop()
        self._answering()  # stopped while the command ran: its result is lost with it
        return result

    def put_archive(self, path: str, data: bytes) -> None:
        self._answering()
        super().put_archive(path, data)

    def get_archive(self, path: str) -> Iterable[bytes]:
        self._answering()
        return super().get_archive(path)
