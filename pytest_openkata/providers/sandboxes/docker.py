"""The Docker sandbox provider, over the docker SDK (spec section 6, with its weaknesses fixed).

Engine work only; the run itself (workspace, snapshots, diff, judge text) is the core's
(:mod:`pytest_openkata.core.sandboxed`). One fresh container per environment: labelled,
limited (CPU, memory, processes), with no-new-privileges, the scenario's network, and host
folders mounted read-only only when they exist. Files go in and come out as tar streams, so
nothing of the container is ever unpacked on the host. The host enforces an exec's timeout
(the container is killed, the partial output kept, its files stay readable), and every
container is removed whatever happens: after its run, on a failure while it is created or
started, and by :meth:`DockerProvider.close` on Ctrl-C and SIGTERM; those of a killed run are
swept when the next one connects.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import docker
import docker.errors
import requests.exceptions
from docker.constants import MINIMUM_DOCKER_API_VERSION

from pytest_openkata.infra.config import EvalSettings
from pytest_openkata.infra.environ import environ_snapshot, proxy_for
from pytest_openkata.infra.retry import RetryableError
from pytest_openkata.providers.sandboxes import ExecResult, SandboxError, SandboxSpec

LABEL = "openkata-eval"
MANAGED = f"{LABEL}.managed"
OWNER_PID = f"{LABEL}.pid"
OWNER_HOST = f"{LABEL}.host"
SCENARIO = f"{LABEL}.scenario"
WORKDIR = "/workspace"  # the container's working folder
KEEP_ALIVE = ["sleep", "2147483647"]  # the container's command; work runs through exec
STOP_GRACE = 10.0

_ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)


@dataclass(frozen=True)
class DockerLimits:
    """The image every container runs and the limits it runs with."""

    image: str
    cpus: float
    memory: str
    pids: int


def container_name(scenario: str) -> str:
    """``openkata-eval-<unix ms>-<random>-<scenario>`` with every ``/`` replaced (checks 42-43).

    The reference has no random part; here scenarios run at once, and two skills' scenarios
    of the same name can start in the same millisecond (in one process or two workers).
    """
    unique = secrets.token_hex(4)
    return f"{LABEL}-{int(time.time() * 1000)}-{unique}-{scenario.replace('/', '-')}"


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _engine_error(exc: Exception, doing: str | None = None) -> Exception:
    """The error to raise for an engine failure; ``doing`` names the step when the caller is
    the one to name it (an environment's errors get the step from the core)."""
    prefix = f"{doing}: " if doing else ""
    if isinstance(exc, requests.exceptions.ConnectionError):
        return SandboxError(
            f"{prefix}the Docker engine stopped answering ({exc.__class__.__name__}); "
            "check that dockerd is running and DOCKER_HOST points at it"
        )
    if isinstance(exc, docker.errors.APIError) and exc.is_server_error():
        return RetryableError(f"{prefix}Docker engine error: {exc.explanation or exc}")
    if isinstance(exc, _ENGINE_ERRORS):
        return SandboxError(f"{prefix}{exc}")
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
    except _ENGINE_ERRORS as exc:
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
    """Remove this host's labelled containers whose pytest process is gone (a killed run).

    The engine lists the containers with their labels in one answer: other runs create and
    remove theirs meanwhile, and a container gone between a listing and a look at it (what
    ``containers.list`` does for each) is simply no longer there to sweep.
    """
    host = socket.gethostname()
    removed = []
    filters: dict[str, str | list[str] | bool] = {
        "label": [f"{MANAGED}=true", f"{OWNER_HOST}={host}"]
    }
    for summary in client.api.containers(all=True, filters=filters):
        owner = (summary.get("Labels") or {}).get(OWNER_PID, "")
        if owner.isdigit() and not _process_alive(int(owner)):
            with contextlib.suppress(docker.errors.NotFound):
                client.api.remove_container(summary["Id"], force=True)
                names = summary.get("Names") or [summary["Id"]]
                removed.append(str(names[0]).lstrip("/"))
    return removed


def _remove_quietly(container: Any) -> None:
    # An engine that fails here leaves a labelled container, swept by the next run.
    with contextlib.suppress(*_ENGINE_ERRORS):
        container.remove(force=True)


class DockerEnvironment:
    """One container of a :class:`DockerProvider`."""

    def __init__(self, provider: DockerProvider, container: Any) -> None:
        self._provider = provider
        self.container = container

    @property
    def name(self) -> str:
        return str(self.container.name)

    def exec(
        self, argv: Sequence[str], *, env: Mapping[str, str], workdir: str, timeout: float
    ) -> ExecResult:
        api = self._provider.client.api
        try:
            exec_id = api.exec_create(
                self.container.id, list(argv), workdir=workdir, environment=dict(env)
            )["Id"]
            stream = api.exec_start(exec_id, stream=True)
        except _ENGINE_ERRORS as exc:
            raise _engine_error(exc) from exc
        chunks: list[bytes] = []
        failed: list[Exception] = []

        def collect(stream: Iterable[bytes]) -> None:
            try:
                for chunk in stream:
                    chunks.append(chunk)
            except _ENGINE_ERRORS as exc:
                failed.append(exc)

        reader = threading.Thread(target=collect, args=(stream,), daemon=True)
        reader.start()
        reader.join(timeout)
        timed_out = reader.is_alive()
        try:
            if timed_out:
                self.container.kill()  # ends the command; its output and the files stay
                reader.join(STOP_GRACE)
            elif failed:
                raise failed[0]
            exit_code = None if timed_out else api.exec_inspect(exec_id).get("ExitCode")
        except _ENGINE_ERRORS as exc:
            raise _engine_error(exc) from exc
        output = b"".join(chunks).decode("utf-8", errors="replace")
        return ExecResult(output, exit_code, timed_out)

    def put_archive(self, path: str, data: bytes) -> None:
        try:
            accepted = self.container.put_archive(path, data)
        except _ENGINE_ERRORS as exc:
            raise _engine_error(exc) from exc
        if not accepted:
            raise SandboxError("the engine refused the archive")

    def get_archive(self, path: str) -> Iterable[bytes]:
        try:
            stream, _stat = self.container.get_archive(path)
        except _ENGINE_ERRORS as exc:
            raise _engine_error(exc) from exc
        return _engine_errors_of(stream)

    def remove(self) -> None:
        self._provider._forget(self.container)
        _remove_quietly(self.container)


def _engine_errors_of(stream: Iterable[bytes]) -> Iterator[bytes]:
    """The stream's chunks; an engine failure while it is read raises this module's errors."""
    try:
        yield from stream
    except _ENGINE_ERRORS as exc:
        raise _engine_error(exc) from exc


class DockerProvider:
    """Makes containers on one engine; shared by the run's threads."""

    def __init__(self, client: docker.DockerClient, limits: DockerLimits) -> None:
        self.client = client
        self.limits = limits
        self._lock = threading.Lock()
        self._live: dict[str, Any] = {}  # containers not removed yet, by id
        self._closed = False

    def create(self, spec: SandboxSpec) -> DockerEnvironment:
        container = self._create(spec)
        environment = DockerEnvironment(self, container)
        try:
            with self._lock:
                self._live[container.id] = container
                closed = self._closed
            if closed:
                raise SandboxError("the sandbox was closed: the run is over")
            try:
                container.start()
            except _ENGINE_ERRORS as exc:
                raise _engine_error(exc, "docker start") from exc
        except BaseException:
            environment.remove()
            raise
        return environment

    def close(self) -> None:
        """Remove the containers still live (runs started ahead on other threads, when pytest
        stops early or is interrupted), then close the client."""
        with self._lock:
            self._closed = True
            live = list(self._live.values())
        for container in live:
            _remove_quietly(container)
        self.client.close()

    def _forget(self, container: Any) -> None:
        with self._lock:
            self._live.pop(container.id, None)

    def _volumes(self, mounts: Iterable[tuple[str, str]]) -> dict[str, dict[str, str]]:
        volumes = {}
        for host, target in mounts:
            path = Path(host).expanduser()
            if path.is_dir():
                volumes[str(path)] = {"bind": target, "mode": "ro"}
        return volumes

    def _create(self, spec: SandboxSpec) -> Any:
        name = container_name(spec.name)
        try:
            return self._create_named(name, spec)
        except BaseException:
            # Interrupted while the engine was creating it: remove it by name, if it exists.
            with contextlib.suppress(*_ENGINE_ERRORS):
                self.client.containers.get(name).remove(force=True)
            raise

    def _create_named(self, name: str, spec: SandboxSpec) -> Any:
        labels = {
            MANAGED: "true",
            OWNER_PID: str(os.getpid()),
            OWNER_HOST: socket.gethostname(),
            SCENARIO: spec.name,
        }
        try:
            return self.client.containers.create(
                self.limits.image,
                KEEP_ALIVE,
                name=name,
                network_mode=spec.network,
                working_dir=WORKDIR,
                labels=labels,
                environment=dict(spec.env),
                volumes=self._volumes(spec.mounts),
                nano_cpus=int(self.limits.cpus * 1e9),
                mem_limit=self.limits.memory,
                pids_limit=self.limits.pids,
                security_opt=["no-new-privileges"],
                detach=True,
            )
        except docker.errors.ImageNotFound:
            raise SandboxError(missing_image_message(self.limits.image)) from None
        except _ENGINE_ERRORS as exc:
            raise _engine_error(exc, "docker create") from exc


def missing_image_message(image: str) -> str:
    """Why a sandbox cannot be made without its image, and what gives one to a user of the
    installed package (who has no ``Dockerfile.eval``: it is in a checkout of the project)."""
    return (
        f"image {image!r} not found on the Docker engine: set sandbox.image "
        "(--eval-sandbox-image or OPENKATA_EVAL_SANDBOX_IMAGE) to an image it has, such as "
        "the packaged sandbox image that `python -m pytest_openkata.localmodel build "
        "--sandbox` builds into the engine of DOCKER_HOST and names (its agent is codex: "
        "--eval-sandbox-agent codex); in a checkout of pytest-openkata, docker build -f "
        f"Dockerfile.eval -t {image} . builds the default image"
    )


def from_settings(settings: EvalSettings) -> DockerProvider:
    """The ``docker`` sandbox provider: connect to the engine of ``DOCKER_HOST`` (or the
    default socket), sweep containers left by killed runs, and apply the settings' image and
    limits."""
    client = connect()
    try:
        sweep_stale_containers(client)
    except _ENGINE_ERRORS as exc:
        raise _engine_error(exc, "sweeping containers of killed runs") from exc
    box = settings.sandbox
    limits = DockerLimits(image=box.image, cpus=box.cpus, memory=box.memory, pids=box.pids)
    return DockerProvider(client, limits)


if TYPE_CHECKING:  # the protocol this provider implements, checked by mypy
    from pytest_openkata.providers.sandboxes import SandboxProvider

    _implements: type[SandboxProvider] = DockerProvider
