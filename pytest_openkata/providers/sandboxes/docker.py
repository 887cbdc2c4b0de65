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
import posixpath
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
from docker.tls import TLSConfig

from pytest_openkata.contracts.backends import DEFAULT_ANSWER_MAX_BYTES
from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.errors import RetryableError, SandboxError, SandboxLost
from pytest_openkata.contracts.sandboxes import EngineCheck, ExecResult, ImageBuild, SandboxSpec
from pytest_openkata.infra.bounded import BoundedBuffer
from pytest_openkata.infra.environ import environ_snapshot, proxy_for
from pytest_openkata.infra.processes import process_gone, run_mark, run_over
from pytest_openkata.infra.text import plural, visible
from pytest_openkata.providers.sandboxes.docker_attached import DockerAttachedProcess
from pytest_openkata.providers.sandboxes.docker_build import ImageBuilder

LABEL = "openkata-eval"
MANAGED = f"{LABEL}.managed"
OWNER_PID = f"{LABEL}.pid"
OWNER_HOST = f"{LABEL}.host"
# The run as its agents' processes are marked (host tag, pid, start): a pid namespace or a
# machine of the same host name, or a later process of the same pid, is not the owner.
OWNER_RUN = f"{LABEL}.run"
SCENARIO = f"{LABEL}.scenario"
WORKDIR = "/workspace"  # the container's working folder
KEEP_ALIVE = ["sleep", "2147483647"]  # the container's command; work runs through exec
# How many processes the kernel killed in the container for want of memory (cgroup v2, then
# v1), read only after a command failed.
OOM_KILLS = (
    "sh",
    "-c",
    "cat /sys/fs/cgroup/memory.events 2>/dev/null || "
    "grep oom_kill /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null",
)
STOP_GRACE = 10.0

# An ssh:// engine's transport (paramiko) raises its own errors, and the socket's, when the
# host or its sshd goes away: the engine is lost, as when a unix or tcp engine stops answering.
_SSH_ERRORS: tuple[type[Exception], ...] = (EOFError, OSError)
try:
    import paramiko

    _SSH_ERRORS = (*_SSH_ERRORS, paramiko.SSHException)
except ImportError:  # no ssh:// engines without it: the SDK says so when one is asked for
    pass
_ENGINE_ERRORS: tuple[type[Exception], ...] = (
    docker.errors.DockerException,
    requests.exceptions.RequestException,
    *_SSH_ERRORS,
)
_CONNECT_ERRORS: tuple[type[Exception], ...] = (*_ENGINE_ERRORS, ValueError)  # a bad URL too


@dataclass(frozen=True)
class DockerLimits:
    """The image every container runs and the limits it runs with; ``output_max_bytes`` is
    how much of a command's output is kept (``answer_max_bytes``)."""

    image: str
    cpus: float
    memory: str
    pids: int
    output_max_bytes: int = DEFAULT_ANSWER_MAX_BYTES


def container_name(scenario: str) -> str:
    """``openkata-eval-<unix ms>-<random>-<scenario>`` with every ``/`` replaced (checks 42-43).

    The reference has no random part; here scenarios run at once, and two skills' scenarios
    of the same name can start in the same millisecond (in one process or two workers).
    """
    unique = secrets.token_hex(4)
    return f"{LABEL}-{int(time.time() * 1000)}-{unique}-{scenario.replace('/', '-')}"


def _engine_error(exc: Exception, doing: str | None = None) -> Exception:
    """The error to raise for an engine failure; ``doing`` names the step when the caller is
    the one to name it (an environment's errors get the step from the core). An engine that
    stopped answering is lost (:class:`SandboxLost`): an engine pool moves the run elsewhere."""
    prefix = f"{doing}: " if doing else ""
    if _engine_gone(exc):
        return SandboxLost(
            f"{prefix}the Docker engine stopped answering ({exc.__class__.__name__}); "
            "check that dockerd is running and reachable (DOCKER_HOST, or sandbox.hosts)"
        )
    if isinstance(exc, docker.errors.APIError) and exc.is_server_error():
        return RetryableError(f"{prefix}Docker engine error: {exc.explanation or exc}")
    if isinstance(exc, _ENGINE_ERRORS):
        return SandboxError(f"{prefix}{exc}")
    return exc


def _engine_gone(exc: Exception) -> bool:
    """Whether ``exc`` says the engine stopped answering: a connection it refused or cut (also
    in the middle of an answer, as a download that ends short), or the ssh transport's
    failure. The SDK's and requests' other errors are answers (an HTTP error status among
    them, though requests' errors are OSErrors too)."""
    if isinstance(
        exc, requests.exceptions.ConnectionError | requests.exceptions.ChunkedEncodingError
    ):
        return True
    if isinstance(exc, requests.exceptions.RequestException | docker.errors.DockerException):
        return False
    return isinstance(exc, _SSH_ERRORS)


@dataclass(frozen=True)
class Engine:
    """Where an engine answers: ``url`` (None: the engine of ``DOCKER_HOST``, or the default
    socket) and, for a ``tcp://`` engine with certificates, the TLS settings."""

    url: str | None = None
    tls: TLSConfig | None = None

    @property
    def where(self) -> str:
        if self.url is None:
            return os.environ.get("DOCKER_HOST", "the default socket")
        return self.url


def engine_of(url: str, cert_path: str = "", name: str = "") -> Engine:
    """The engine at ``url``; a ``tcp://`` engine is reached over TLS, its certificate checked
    against ``ca.pem`` and ours given from ``cert.pem`` and ``key.pem`` (Docker's layout) of
    ``cert_path``, else of ``DOCKER_CERT_PATH``; without either, over plain TCP. Engines of
    other CAs take theirs from a subfolder named after the engine (``<cert_path>/<name>/``)."""
    if not url.startswith("tcp://"):
        return Engine(url)
    folder = cert_path or environ_snapshot().get("DOCKER_CERT_PATH", "")
    if not folder:
        return Engine(url)
    where = Path(folder).expanduser()
    if name and (where / name / "ca.pem").is_file():
        where = where / name
    ca, cert, key = (where / name for name in ("ca.pem", "cert.pem", "key.pem"))
    missing = [path.name for path in (ca, cert, key) if not path.is_file()]
    if missing:
        shown = folder if where.name != name or not name else f"{folder}/{name}"
        raise SandboxError(
            f"{url}: the TLS folder {shown} lacks {', '.join(missing)} (sandbox.tls_cert_path "
            "or DOCKER_CERT_PATH holds ca.pem, cert.pem and key.pem)"
        )
    return Engine(url, TLSConfig(client_cert=(str(cert), str(key)), ca_cert=str(ca), verify=True))


def connect(timeout: float = 60.0, engine: Engine = Engine()) -> docker.DockerClient:
    """A client for ``engine`` (by default the engine of ``DOCKER_HOST``, or the default
    socket) that answers."""
    try:
        # The engine's API version is asked first, as docker.from_env() does, but by a client
        # that already leaves the environment alone (see _engine_client).
        probe = _engine_client(int(timeout), MINIMUM_DOCKER_API_VERSION, engine)
        try:
            version = probe.version(api_version=False)["ApiVersion"]
        finally:
            probe.close()
        return _engine_client(int(timeout), version, engine)
    except _CONNECT_ERRORS as exc:
        hint = (
            "start one (dockerd) or set DOCKER_HOST"
            if engine.url is None
            else "check that its dockerd runs and that this host reaches it"
        )
        raise SandboxError(
            f"no Docker engine answers at {engine.where} ({exc}); {hint}; direct scenarios "
            "are not affected"
        ) from None


def _engine_client(timeout: int, version: str, engine: Engine) -> docker.DockerClient:
    """A client that makes no request until asked, and whose requests never read
    ``os.environ``: requests looks proxies up there on every call, which breaks when pytest's
    thread changes a variable meanwhile (see :mod:`pytest_openkata.infra.environ`). The proxy of an
    engine reached over TCP is looked up once, here. An ``ssh://`` engine is reached through
    the SDK's paramiko transport, which reads ``~/.ssh/config`` and ``~/.ssh/known_hosts`` and
    runs ``docker system dial-stdio`` on the remote host."""
    if engine.url is None:
        client = docker.from_env(timeout=timeout, version=version, environment=environ_snapshot())
    else:
        client = docker.DockerClient(
            base_url=engine.url, version=version, timeout=timeout, tls=engine.tls or False
        )
    client.api.trust_env = False
    base_url: str = client.api.base_url
    if base_url.startswith(("http://", "https://")):
        proxy = proxy_for(base_url)
        if proxy is not None:
            client.api.proxies = {base_url.split(":", 1)[0]: proxy}
    return client


def sweep_stale_containers(client: docker.DockerClient) -> list[str]:
    """Remove this host's labelled containers whose run is over (a killed run): the run its
    :data:`OWNER_RUN` label names, as a sweep of processes tells it (of this host and pid
    namespace, its process gone or a later one in its place); a container labelled by a
    version without that label, by its pytest process id alone.

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
        labels = summary.get("Labels") or {}
        if _run_is_over(labels):
            with contextlib.suppress(docker.errors.NotFound):
                client.api.remove_container(summary["Id"], force=True)
                names = summary.get("Names") or [summary["Id"]]
                removed.append(str(names[0]).lstrip("/"))
    return removed


def _run_is_over(labels: dict[str, str]) -> bool:
    mark = labels.get(OWNER_RUN)
    if mark is not None:
        return run_over(mark)
    owner = labels.get(OWNER_PID, "")
    return owner.isdigit() and process_gone(int(owner))


def _remove_quietly(container: Any) -> None:
    # An engine that fails here leaves a labelled container, swept by the next run.
    with contextlib.suppress(*_ENGINE_ERRORS):
        container.remove(force=True)


class DockerEnvironment:
    """One container of a :class:`DockerProvider`."""

    def __init__(
        self, provider: DockerProvider, container: Any, spec: SandboxSpec | None = None
    ) -> None:
        self._provider = provider
        self.container = container
        self._oom_kills_seen = 0  # the cgroup's count of OOM kills when last looked at
        limits = provider.limits
        # What the container was given and runs, which each trial records.
        self.cpus: float = limits.cpus if spec is None or spec.cpus is None else spec.cpus
        self.memory_mb: int | None = (
            memory_mb_of(limits.memory)
            if spec is None or spec.memory_mb is None
            else spec.memory_mb
        )
        attrs = getattr(container, "attrs", None) or {}
        self.image_id: str = str(attrs.get("Image", ""))
        # The folder commands run in and the workspace is: /workspace, or the WORKDIR of a
        # scenario's own image (see DockerProvider._working_dir).
        self.workdir: str = str((attrs.get("Config") or {}).get("WorkingDir") or WORKDIR)

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
        # Past the bound the output is read and dropped: the command goes on to its end.
        output = BoundedBuffer(self._provider.limits.output_max_bytes)
        failed: list[Exception] = []

        def collect(stream: Iterable[bytes]) -> None:
            try:
                for chunk in stream:
                    output.add(chunk)
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
            oom_killed = exit_code not in (None, 0) and self._oom_killed()
        except _ENGINE_ERRORS as exc:
            raise _engine_error(exc) from exc
        cut_at = output.limit if output.over.is_set() else None
        text = output.data().decode("utf-8", "replace")
        return ExecResult(text, exit_code, timed_out, cut_at, oom_killed=oom_killed)

    def attach(
        self, argv: Sequence[str], *, env: Mapping[str, str], workdir: str
    ) -> DockerAttachedProcess:
        """``argv`` started in the container with its standard input and output held here
        (:mod:`.docker_attached`)."""
        try:
            return DockerAttachedProcess(
                self._provider.client.api, self.container.id, argv, env=env, workdir=workdir
            )
        except _ENGINE_ERRORS as exc:
            raise _engine_error(exc) from exc

    def _oom_killed(self) -> bool:
        """Whether the kernel killed a process of the container for want of memory since the
        last look: Docker's ``State.OOMKilled`` (set when the container's own process was), or
        the OOM kills its cgroup counts (``memory.events``; a command run by exec is not the
        container's own process, and Docker's state does not see it killed) grown since then,
        so that a kill an earlier command survived is not blamed on a later one's exit."""
        self.container.reload()
        if (self.container.attrs.get("State") or {}).get("OOMKilled"):
            return True
        api = self._provider.client.api
        exec_id = api.exec_create(self.container.id, list(OOM_KILLS), stdout=True, stderr=False)
        told = bytes(api.exec_start(exec_id["Id"])).decode("utf-8", "replace")
        counts = [
            int(words[1])
            for words in (line.split() for line in told.splitlines())
            if words[:1] == ["oom_kill"] and len(words) > 1 and words[1].isdigit()
        ]
        kills = max(counts, default=0)
        grown = kills > self._oom_kills_seen
        self._oom_kills_seen = kills
        return grown

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

    def __init__(
        self, client: docker.DockerClient, limits: DockerLimits, *, tls: bool = False
    ) -> None:
        self.client = client
        self.limits = limits
        self.tls = tls
        self._lock = threading.Lock()
        self._live: dict[str, Any] = {}  # containers not removed yet, by id
        self._closed = False
        self.builder = ImageBuilder(client)  # scenarios' Dockerfiles, built once per run

    def check(self) -> EngineCheck:
        """What the engine is (version, API version, CPUs) and whether it has the image; an
        engine pool calls it at the start of a run, and leaves the engine out on a problem."""
        image = self.limits.image
        try:
            version = self.client.version(api_version=False)
            cpus = int(self.client.info().get("NCPU") or 0) or None
            present = _has_image(self.client, image)
        except _ENGINE_ERRORS as exc:
            raise _engine_error(exc, "checking the engine") from exc
        summary = (
            f"Docker {version.get('Version', '?')} (API {version.get('ApiVersion', '?')})"
            + (", TLS" if self.tls else "")
            + (f", {plural(cpus, 'CPU')}" if cpus else "")
        )
        if not present:
            return EngineCheck(summary, cpus, f"image {image!r} not found on this engine")
        return EngineCheck(f"{summary}, image {image} present", cpus)

    def create(self, spec: SandboxSpec) -> DockerEnvironment:
        container = self._create(spec)
        environment = DockerEnvironment(self, container, spec)
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

    def _image(self, spec: SandboxSpec) -> str:
        """The image of ``spec``'s container: the scenario's Dockerfile built on this
        engine, or the scenario's image, else the ``sandbox.image`` setting."""
        if spec.build is not None:
            return self.built(spec.build)
        return spec.image or self.limits.image

    def own_image_id(self, spec: SandboxSpec) -> str:
        """What the scenario's own image is on this engine, for the result cache's key
        (:class:`~pytest_openkata.contracts.sandboxes.NamesOwnImages`): the tag its build
        has, made from its context's digest and its base images' ids (nothing is built), or
        the id of the image it names."""
        if spec.build is not None:
            return self.builder.tag_of(spec.build)
        try:
            return str(self.client.images.get(spec.image).id)
        except docker.errors.ImageNotFound:
            raise SandboxError(_missing_own_image(spec.image)) from None
        except _ENGINE_ERRORS as exc:
            raise _engine_error(exc, "docker image inspect") from exc

    def _working_dir(self, spec: SandboxSpec, image: str) -> str:
        """The container's working folder: the WORKDIR a scenario's own image sets (Harbor's
        tasks and their verifiers expect to work there), else ``/workspace``."""
        if spec.build is None and not spec.image:
            return WORKDIR
        try:
            config = self.client.images.get(image).attrs.get("Config") or {}
        except docker.errors.ImageNotFound:
            raise SandboxError(_missing_own_image(image)) from None
        except _ENGINE_ERRORS as exc:
            raise _engine_error(exc, "docker image inspect") from exc
        return own_workdir(str(config.get("WorkingDir") or ""), image)

    def built(self, build: ImageBuild) -> str:
        """The tag of ``build``'s image on this engine, built first when the engine lacks it."""
        return self.builder.image_of(build)

    def _memory(self, spec: SandboxSpec) -> dict[str, Any]:
        """The container's memory: the scenario's ``memory_mb`` (and no swap beyond it, so
        that the bound is the one it asked for), else the ``sandbox.memory`` setting."""
        if spec.memory_mb is None:
            return {"mem_limit": self.limits.memory}
        limit = f"{spec.memory_mb}m"
        return {"mem_limit": limit, "memswap_limit": limit}

    def _create_named(self, name: str, spec: SandboxSpec) -> Any:
        labels = {
            MANAGED: "true",
            OWNER_PID: str(os.getpid()),
            OWNER_HOST: socket.gethostname(),
            OWNER_RUN: run_mark(),
            SCENARIO: spec.name,
        }
        image = self._image(spec)
        working_dir = self._working_dir(spec, image)
        try:
            return self.client.containers.create(
                image,
                KEEP_ALIVE,
                name=name,
                network_mode=spec.network,
                working_dir=working_dir,
                labels=labels,
                environment=dict(spec.env),
                volumes=self._volumes(spec.mounts),
                nano_cpus=int((spec.cpus or self.limits.cpus) * 1e9),
                **self._memory(spec),
                pids_limit=self.limits.pids,
                security_opt=["no-new-privileges"],
                detach=True,
            )
        except docker.errors.ImageNotFound:
            if spec.image:
                raise SandboxError(_missing_own_image(spec.image)) from None
            raise SandboxError(missing_image_message(self.limits.image)) from None
        except _ENGINE_ERRORS as exc:
            raise _engine_error(exc, "docker create") from exc


# Folders an image's WORKDIR cannot be for the workspace: the workspace is copied in and
# snapshotted whole, and these are the kernel's or the engine's.
_NOT_A_WORKSPACE = ("/proc", "/sys", "/dev", "/openkata")


def own_workdir(workdir: str, image: str) -> str:
    """The working folder of a container of a scenario's own ``image`` whose WORKDIR is
    ``workdir``: that folder, or ``/workspace`` when the image sets none (or ``/``, the
    engine's default). A :class:`SandboxError` naming the image when it is not a plain
    absolute path, or is a system folder."""
    if workdir in ("", "/"):
        return WORKDIR
    plain = workdir.startswith("/") and posixpath.normpath(workdir) == workdir
    if (
        not plain
        or not workdir.isprintable()
        or any(workdir == folder or workdir.startswith(folder + "/") for folder in _NOT_A_WORKSPACE)
    ):
        raise SandboxError(
            f"the image {visible(image)!r} sets WORKDIR {visible(workdir)!r}, which cannot "
            "hold the scenario's workspace: set a plain absolute folder such as /app"
        )
    return workdir


def _missing_own_image(image: str) -> str:
    return (
        f"image {image!r} (the scenario's image) not found on the Docker engine: the sandbox "
        "pulls no image; build or pull it into the engine, and let it hold the agent CLI"
    )


def memory_mb_of(memory: str) -> int | None:
    """A Docker memory limit (``512m``, ``2g``, ``1048576``) in MiB; None when it is none."""
    text = memory.strip().lower().removesuffix("b")
    units = {"k": 1 / 1024, "m": 1, "g": 1024}
    try:
        if text[-1:] in units:
            return max(1, int(float(text[:-1]) * units[text[-1]]))
        return max(1, int(text) // (1024 * 1024)) if text else None
    except ValueError:
        return None


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


def _has_image(client: docker.DockerClient, image: str) -> bool:
    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        return False
    return True


def from_settings(settings: EvalSettings) -> DockerProvider:
    """The ``docker`` sandbox provider: connect to the engine of ``DOCKER_HOST`` (or the
    default socket), or to the one engine of ``sandbox.hosts`` an engine pool gives it, sweep
    containers left by killed runs, and apply the settings' image and limits."""
    box = settings.sandbox
    if len(box.hosts) > 1:
        raise SandboxError("the docker provider drives one engine; a pool makes one per engine")
    engine = Engine()
    if box.hosts:
        name, url = box.hosts[0]
        engine = engine_of(url, box.tls_cert_path, name)
    client = connect(engine=engine)
    try:
        sweep_stale_containers(client)
    except _ENGINE_ERRORS as exc:
        client.close()
        raise _engine_error(exc, "sweeping containers of killed runs") from exc
    limits = DockerLimits(
        image=box.image,
        cpus=box.cpus,
        memory=box.memory,
        pids=box.pids,
        output_max_bytes=settings.answer_max_bytes,
    )
    return DockerProvider(client, limits, tls=engine.tls is not None)


if TYPE_CHECKING:  # the protocol this provider implements, checked by mypy
    from pytest_openkata.contracts.sandboxes import AttachesProcesses, SandboxProvider

    _implements: type[SandboxProvider] = DockerProvider
    _attaches: type[AttachesProcesses] = DockerEnvironment
