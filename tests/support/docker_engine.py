"""A real Docker engine for sandbox tests, and the small local images they run.

``.ci/run`` starts a private dockerd (its own socket and data folder, no bridge, no iptables)
and exports ``DOCKER_HOST``; without it, :func:`engine` starts one the same way for the test
session. No registry is reachable here, so images are built locally from the host's static
busybox (Debian's ``busybox-static``) plus the stand-in agent CLI.

:class:`EngineRelay` stands between a client and the engine and can be cut, so that a test sees
an engine stop answering while its containers live on (and are removed afterwards).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Self

import docker
import docker.errors

from pytest_openkata.local.sandbox import LocalEngine

STANDINS = Path(__file__).parent / "standins"
BUSYBOX = Path("/bin/busybox")
STANDIN_DOCKERFILE = """\
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
COPY kiro-cli /usr/local/bin/kiro-cli
ENV PATH=/usr/local/bin:/bin
WORKDIR /workspace
"""
ACP_STANDIN_DOCKERFILE = """\
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
COPY acp-agent /usr/local/bin/acp-agent
ENV PATH=/usr/local/bin:/bin
WORKDIR /workspace
"""
NO_SLEEP_DOCKERFILE = """\
FROM scratch
COPY marker /marker
"""


def _answers(host: str) -> bool:
    try:
        docker.DockerClient(base_url=host, timeout=5).ping()
    except (docker.errors.DockerException, OSError):
        return False
    return True


@dataclass(frozen=True)
class PrivateEngine:
    host: str  # the DOCKER_HOST value
    pid: int
    data: Path  # its data folder


@contextmanager
def private_dockerd() -> Iterator[PrivateEngine]:
    """Start dockerd on its own socket and a new data folder (the quick start's private
    engine); yield it; stop it and remove the folder."""
    with tempfile.TemporaryDirectory(
        prefix="openkata-dockerd-data-", ignore_cleanup_errors=True
    ) as data:
        private = LocalEngine(log=lambda _: None, data_root=Path(data))
        try:
            private.start_private()
            assert private.pid is not None
            yield PrivateEngine(private.host, private.pid, Path(data))
        finally:
            private.stop()


@contextmanager
def engine() -> Iterator[str]:
    """DOCKER_HOST of a running engine: the configured one, else a private one."""
    configured = os.environ.get("DOCKER_HOST")
    if configured:
        if not _answers(configured):
            raise RuntimeError(f"DOCKER_HOST={configured} does not answer")
        yield configured
        return
    with private_dockerd() as private:
        yield private.host


def build_standin_image(client: docker.DockerClient) -> str:
    """A 2 MB busybox image with the stand-in kiro-cli; tagged by content, built once."""
    if not BUSYBOX.is_file():
        raise RuntimeError(f"{BUSYBOX} is missing: apt-get install busybox-static")
    agent = (STANDINS / "sandbox-kiro-cli").read_bytes()
    digest = hashlib.sha256(STANDIN_DOCKERFILE.encode() + agent).hexdigest()[:12]
    tag = f"openkata-standin:{digest}"
    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    with tempfile.TemporaryDirectory() as context:
        shutil.copy2(BUSYBOX, Path(context, "busybox"))
        Path(context, "kiro-cli").write_bytes(agent)
        Path(context, "kiro-cli").chmod(0o755)
        Path(context, "Dockerfile").write_text(STANDIN_DOCKERFILE)
        client.images.build(path=context, tag=tag, rm=True)
    return tag


def build_acp_standin_image(client: docker.DockerClient) -> str:
    """A busybox image with the stand-in ACP agent (``acp-agent SCRIPT``, a shell script: the
    image has no Python, as the sandbox's has none); tagged by content, built once."""
    if not BUSYBOX.is_file():
        raise RuntimeError(f"{BUSYBOX} is missing: apt-get install busybox-static")
    agent = (STANDINS / "sandbox-acp-agent").read_bytes()
    digest = hashlib.sha256(ACP_STANDIN_DOCKERFILE.encode() + agent).hexdigest()[:12]
    tag = f"openkata-acp-standin:{digest}"
    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    with tempfile.TemporaryDirectory() as context:
        shutil.copy2(BUSYBOX, Path(context, "busybox"))
        Path(context, "acp-agent").write_bytes(agent)
        Path(context, "acp-agent").chmod(0o755)
        Path(context, "Dockerfile").write_text(ACP_STANDIN_DOCKERFILE)
        client.images.build(path=context, tag=tag, rm=True)
    return tag


def build_image_without_sleep(client: docker.DockerClient) -> str:
    """An image with one file and no program at all: its containers are created, but cannot
    start (their command, ``sleep``, is missing)."""
    tag = "openkata-no-sleep:1"
    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    with tempfile.TemporaryDirectory() as context:
        Path(context, "marker").write_text("no programs here\n")
        Path(context, "Dockerfile").write_text(NO_SLEEP_DOCKERFILE)
        client.images.build(path=context, tag=tag, rm=True)
    return tag


class EngineRelay:
    """A unix socket that relays every connection to the engine of ``upstream`` (a ``unix://``
    or ``tcp://`` DOCKER_HOST), until :meth:`cut`: then the socket is gone and every relayed
    connection is closed, as when the engine stops."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        # A short path: a unix socket's path has at most 107 bytes, pytest's tmp_path can be more.
        self._folder = Path(tempfile.mkdtemp(prefix="openkata-relay-"))
        self.path = self._folder / "engine.sock"
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(self.path))
        self._listener.listen()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []

    @property
    def host(self) -> str:
        """The DOCKER_HOST value that reaches the engine through the relay."""
        return f"unix://{self.path}"

    def __enter__(self) -> Self:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.cut()

    def cut(self) -> None:
        self._listener.close()
        shutil.rmtree(self._folder, ignore_errors=True)
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def _connect_upstream(self) -> socket.socket:
        if self.upstream.startswith("unix://"):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(self.upstream.removeprefix("unix://"))
            return sock
        host, _, port = self.upstream.removeprefix("tcp://").rpartition(":")
        return socket.create_connection((host, int(port)))

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # cut
                return
            upstream = self._connect_upstream()
            with self._lock:
                self._sockets += [client, upstream]
            threading.Thread(target=_relay, args=(client, upstream), daemon=True).start()
            threading.Thread(target=_relay, args=(upstream, client), daemon=True).start()


def _relay(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
