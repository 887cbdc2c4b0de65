"""The Docker sandbox provider, over the docker SDK (spec section 6, with its weaknesses fixed).

One fresh container per scenario: labelled, limited (CPU, memory, processes), with
no-new-privileges, the scenario's network, and credential folders mounted read-only only when
configured and present. The workspace goes in and comes out as tar streams, so nothing of the
container is ever unpacked on the host. The prompt reaches the agent on its standard input
from a file outside the workspace, the host enforces the timeout (keeping the partial output
and the diff), and the container is removed whatever happens, Ctrl-C and SIGTERM included.
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import socket
import tarfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors
import requests.exceptions
from docker.constants import MINIMUM_DOCKER_API_VERSION

from pytest_openkata.core.workspace import (
    diff_snapshots,
    judge_text,
    snapshot_from_tar,
    workspace_files,
)
from pytest_openkata.infra.environ import environ_snapshot, proxy_for
from pytest_openkata.infra.retry import RetryableError
from pytest_openkata.providers.sandboxes import AgentCommand, SandboxError, SandboxRun

WORKSPACE = "/workspace"
PROMPT_DIR = "openkata"  # under the container's root, outside the workspace
PROMPT_PATH = f"/{PROMPT_DIR}/prompt.md"
LABEL = "openkata-eval"
MANAGED = f"{LABEL}.managed"
OWNER_PID = f"{LABEL}.pid"
OWNER_HOST = f"{LABEL}.host"
STOP_GRACE = 10.0


@dataclass(frozen=True)
class DockerLimits:
    image: str
    timeout: float
    cpus: float
    memory: str
    pids: int
    mounts: tuple[tuple[str, str], ...]  # (host path, container path), read-only


def container_name(scenario: str) -> str:
    """``openkata-eval-<unix ms>-<random>-<scenario>`` with every ``/`` replaced (checks 42-43).

    The reference has no random part; here scenarios run at once, and two skills' scenarios
    of the same name can start in the same millisecond (in one process or two workers).
    """
    unique = secrets.token_hex(4)
    return f"{LABEL}-{int(time.time() * 1000)}-{unique}-{scenario.replace('/', '-')}"


def _add_file(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    info.mtime = int(time.time())
    tar.addfile(info, io.BytesIO(data))


def workspace_archive(
    skill_dir: Path,
    scenario_dir: Path,
    agent_config: str | None,
    *,
    prefix: str = "",
    extra: Iterable[tuple[str, bytes]] = (),
) -> bytes:
    """The workspace (:func:`workspace_files`) and the agent configuration as a tar, each
    name under ``prefix``, followed by the ``extra`` files as named."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in workspace_files(skill_dir, scenario_dir):
            _add_file(tar, prefix + name, data)
        if agent_config is not None:
            _add_file(tar, f"{prefix}.kiro/agents/eval-agent.json", agent_config.encode())
        for name, data in extra:
            _add_file(tar, name, data)
    return buffer.getvalue()


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _engine_error(exc: Exception, doing: str) -> Exception:
    if isinstance(exc, requests.exceptions.ConnectionError):
        return SandboxError(
            f"{doing}: the Docker engine stopped answering ({exc.__class__.__name__}); "
            "check that dockerd is running and DOCKER_HOST points at it"
        )
    if isinstance(exc, docker.errors.APIError) and exc.is_server_error():
        return RetryableError(f"{doing}: Docker engine error: {exc.explanation or exc}")
    if isinstance(exc, docker.errors.DockerException):
        return SandboxError(f"{doing}: {exc}")
    return exc


def connect(timeout: float = 60.0) -> docker.DockerClient:
    """A client for the engine of ``DOCKER_HOST`` (or the default socket) that answers."""
    where = os.environ.get("DOCKER_HOST", "the default socket")
    try:
        # The engine's API version is asked first, as docker.from_env() does, but by a client
        # that already leaves the environment alone (see _engine_client).
        probe = _engine_client(int(timeout), MINIMUM_DOCKER_API_VERSION)
        try:
            version = probe.version(api_version=False)["ApiVersion"]
        finally:
            probe.close()
        return _engine_client(int(timeout), version)
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise SandboxError(
            f"no Docker engine answers at {where} ({exc}); start one (dockerd) or set "
            "DOCKER_HOST; direct scenarios are not affected"
        ) from None


def _engine_client(timeout: int, version: str) -> docker.DockerClient:
    """A client that makes no request until asked, and whose requests never read
    ``os.environ``: requests looks proxies up there on every call, which breaks when pytest's
    thread changes a variable meanwhile (see :mod:`pytest_openkata.infra.environ`). The proxy of an
    engine reached over TCP is looked up once, here."""
    client = docker.from_env(timeout=timeout, version=version, environment=environ_snapshot())
    client.api.trust_env = False
    base_url: str = client.api.base_url
    if base_url.startswith(("http://", "https://")):
        proxy = proxy_for(base_url)
        if proxy is not None:
            client.api.proxies = {base_url.split(":", 1)[0]: proxy}
    return client


def sweep_stale_containers(client: docker.DockerClient) -> list[str]:
    """Remove this host's labelled containers whose pytest process is gone (a killed run)."""
    host = socket.gethostname()
    removed = []
    filters = {"label": [f"{MANAGED}=true", f"{OWNER_HOST}={host}"]}
    for container in client.containers.list(all=True, filters=filters):
        owner = container.labels.get(OWNER_PID, "")
        if owner.isdigit() and not _process_alive(int(owner)):
            container.remove(force=True)
            removed.append(container.name)
    return removed


class DockerSandbox:
    """Runs agents in fresh containers of one engine."""

    def __init__(self, client: docker.DockerClient, limits: DockerLimits) -> None:
        self.client = client
        self.limits = limits
        self._lock = threading.Lock()
        self._live: dict[str, object] = {}  # running containers by id
        self._closed = False

    def close(self) -> None:
        """Remove the containers still running (runs started ahead on other threads, when
        pytest stops early or is interrupted), then close the client."""
        with self._lock:
            self._closed = True
            live = list(self._live.values())
        for container in live:
            with contextlib.suppress(
                docker.errors.DockerException, requests.exceptions.RequestException
            ):
                container.remove(force=True)  # type: ignore[attr-defined]
        self.client.close()

    def _volumes(self) -> dict[str, dict[str, str]]:
        volumes = {}
        for host, target in self.limits.mounts:
            path = Path(host).expanduser()
            if path.is_dir():
                volumes[str(path)] = {"bind": target, "mode": "ro"}
        return volumes

    def _create(self, scenario: str, network: str, env: dict[str, str]):  # type: ignore[no-untyped-def]
        name = container_name(scenario)
        try:
            return self._create_named(name, scenario, network, env)
        except BaseException:
            # Interrupted while the engine was creating it: remove it by name, if it exists.
            with contextlib.suppress(
                docker.errors.DockerException, requests.exceptions.RequestException
            ):
                self.client.containers.get(name).remove(force=True)
            raise

    def _create_named(self, name: str, scenario: str, network: str, env: dict[str, str]):  # type: ignore[no-untyped-def]
        labels = {
            MANAGED: "true",
            OWNER_PID: str(os.getpid()),
            OWNER_HOST: socket.gethostname(),
            f"{LABEL}.scenario": scenario,
        }
        try:
            return self.client.containers.create(
                self.limits.image,
                ["sleep", "2147483647"],
                name=name,
                network_mode=network,
                working_dir=WORKSPACE,
                labels=labels,
                environment=env,
                volumes=self._volumes(),
                nano_cpus=int(self.limits.cpus * 1e9),
                mem_limit=self.limits.memory,
                pids_limit=self.limits.pids,
                security_opt=["no-new-privileges"],
                detach=True,
            )
        except docker.errors.ImageNotFound:
            raise SandboxError(
                f"image {self.limits.image!r} not found on the Docker engine: build it "
                f"(docker build -f Dockerfile.eval -t {self.limits.image} .) or set "
                "sandbox.image"
            ) from None
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise _engine_error(exc, "docker create") from exc

    def run(
        self, *, skill_dir: Path, scenario_dir: Path, network: str, prompt: str, agent: AgentCommand
    ) -> SandboxRun:
        container = self._create(scenario_dir.name, network, agent.env)
        with self._lock:
            self._live[container.id] = container
            closed = self._closed
        try:
            if closed:
                raise SandboxError("the sandbox was closed: the run is over")
            return self._run_in(container, skill_dir, scenario_dir, prompt, agent)
        finally:
            with self._lock:
                self._live.pop(container.id, None)
            # An engine that fails here leaves a labelled container, swept by the next run.
            with contextlib.suppress(
                docker.errors.DockerException, requests.exceptions.RequestException
            ):
                container.remove(force=True)

    def _run_in(self, container, skill_dir, scenario_dir, prompt, agent):  # type: ignore[no-untyped-def]
        step = "docker start"
        try:
            container.start()
            step = "copy workspace"
            # One archive, extracted at the root: the workspace and, outside it, the prompt.
            archive = workspace_archive(
                skill_dir,
                scenario_dir,
                agent.agent_config,
                prefix=f"{WORKSPACE.lstrip('/')}/",
                extra=[(PROMPT_PATH.lstrip("/"), prompt.encode())],
            )
            if not container.put_archive("/", archive):
                raise SandboxError(f"{step}: the engine refused the archive")
            step = "snapshot before"
            before = snapshot_from_tar(container.get_archive(WORKSPACE)[0])
            step = f"run {agent.name}"
            output, exit_code, timed_out = self._exec(container, agent)
            step = "snapshot after"
            after = snapshot_from_tar(container.get_archive(WORKSPACE)[0])
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise _engine_error(exc, step) from exc
        except tarfile.TarError as exc:
            raise SandboxError(f"{step}: unreadable workspace archive: {exc}") from exc
        diff = diff_snapshots(before, after)
        return SandboxRun(output, exit_code, timed_out, diff, judge_text(output, diff))

    def _exec(self, container, agent: AgentCommand) -> tuple[str, int | None, bool]:  # type: ignore[no-untyped-def]
        api = self.client.api
        command = ["sh", "-c", f'exec "$@" < {PROMPT_PATH}', "sh", *agent.argv]
        exec_id = api.exec_create(container.id, command, workdir=WORKSPACE, environment=agent.env)
        chunks: list[bytes] = []

        def collect(stream: Iterable[bytes]) -> None:
            for chunk in stream:
                chunks.append(chunk)

        reader = threading.Thread(
            target=collect, args=(api.exec_start(exec_id["Id"], stream=True),), daemon=True
        )
        reader.start()
        reader.join(self.limits.timeout)
        timed_out = reader.is_alive()
        if timed_out:
            container.kill()  # ends the agent; the partial output and the files stay readable
            reader.join(STOP_GRACE)
        output = b"".join(chunks).decode("utf-8", errors="replace")
        exit_code = None if timed_out else api.exec_inspect(exec_id["Id"]).get("ExitCode")
        return output, exit_code, timed_out
