"""The test engines are real: the TLS one takes only clients with its certificate, the ssh one
is a second engine reached through sshd in its own network namespace, execnet runs Python in
that namespace, a killed engine stops answering until restarted, and a stopped engine leaves
nothing behind."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
from pathlib import Path

import docker
import docker.errors
import docker.tls
import execnet
import pytest
import requests

from tests.pool.conftest import build_image, require_engines
from tests.support.engines import SshEngine, TlsEngine

# requests would verify the TLS engine against these bundles instead of its CA
# (docker/docker-py#2433); the engines' own clients ignore them, clients made here must too.
CA_BUNDLE_VARIABLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
# What an engine with a running container runs, and what its sshd adds for a client over ssh.
ENGINE_PROGRAMS = ("dockerd ", "containerd ", "containerd-shim-runc-v2 ", "sleep 300")
SSH_PROGRAMS = ("sshd: /usr/sbin/sshd -D", "sshd: root@notty", "docker system dial-stdio")


def _echo_in_container(client: docker.DockerClient, image: str, network: str = "none") -> str:
    container = client.containers.run(image, ["sleep", "300"], detach=True, network_mode=network)
    try:
        result = container.exec_run(["echo", "hello from a container"])
    finally:
        container.remove(force=True)
    assert result.exit_code == 0
    assert isinstance(result.output, bytes)  # not streamed
    return result.output.decode()


def _identity(pid: int) -> str | None:
    """A live process's id and start time (which tell it from a later one with its id); None
    when it is gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else f"{pid}@{fields[19]}"


def _namespaces() -> list[str]:
    listed = subprocess.run(["ip", "netns", "list"], check=True, capture_output=True, text=True)
    return [line.split()[0] for line in listed.stdout.splitlines() if line.strip()]


def _running(pids: set[int]) -> dict[str, str]:
    """The live processes among ``pids``: their identities and command lines (the program
    without its folder)."""
    found: dict[str, str] = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            program, _, arguments = command.partition(" ")
            if (identity := _identity(pid)) is not None:
                found[identity] = f"{Path(program).name} {arguments}"
    return found


def _missing(programs: tuple[str, ...], running: dict[str, str]) -> list[str]:
    """The programs of which no running command line starts with the name."""
    return [name for name in programs if not any(c.startswith(name) for c in running.values())]


def _leftovers(engine: TlsEngine | SshEngine, started: set[str]) -> list[str]:
    """What is left of a stopped engine: processes among ``started``, its folder, mounts and
    cgroups that name it."""
    left = [
        f"process {identity}"
        for identity in started
        if _identity(int(identity.split("@")[0])) == identity
    ]
    if engine.folder.exists():
        left.append(f"folder {engine.folder}")
    left += [
        f"mount {line}"
        for line in Path("/proc/self/mounts").read_text().splitlines()
        if engine.name in line
    ]
    left += [f"cgroup {path}" for path in Path("/sys/fs/cgroup").glob(f"*/{engine.name}")]
    return left


def test_the_tls_engine_answers_only_clients_with_its_certificate(
    tls_engine: TlsEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in CA_BUNDLE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with contextlib.closing(tls_engine.client()) as client:
        assert client.version()["ApiVersion"]
    # DOCKER_CERT_PATH's layout, as docker.from_env() and the plugin read it.
    with contextlib.closing(docker.from_env(environment=tls_engine.environment)) as client:
        assert client.version()["ApiVersion"]

    ca_only = docker.tls.TLSConfig(ca_cert=str(tls_engine.cert_path / "ca.pem"), verify=True)
    with pytest.raises(docker.errors.DockerException) as refused:
        docker.DockerClient(base_url=tls_engine.url, tls=ca_only, timeout=10)

    # The client trusted the engine's certificate; the engine refused the client for having none.
    assert isinstance(refused.value.__cause__, requests.exceptions.SSLError)
    assert "BAD_CERTIFICATE" in str(refused.value)
    assert "CERTIFICATE_VERIFY_FAILED" not in str(refused.value)


def test_a_container_on_the_tls_engine_runs_a_command(tls_engine: TlsEngine) -> None:
    with contextlib.closing(tls_engine.client()) as client:
        assert _echo_in_container(client, tls_engine.image) == "hello from a container\n"


def test_the_ssh_engine_is_a_second_engine_inside_its_namespace(
    ssh_engine: SshEngine, tls_engine: TlsEngine
) -> None:
    assert ssh_engine.url == f"ssh://root@{ssh_engine.address}"
    with (
        contextlib.closing(ssh_engine.client()) as client,
        contextlib.closing(tls_engine.client()) as other,
    ):
        assert client.version()["ApiVersion"]
        assert _echo_in_container(client, ssh_engine.image) == "hello from a container\n"
        container = client.containers.run(
            ssh_engine.image, ["ls", "/sys/class/net"], detach=True, network_mode="host"
        )
        try:
            assert container.wait(timeout=60)["StatusCode"] == 0
            interfaces = container.logs().decode().split()
            elsewhere = {found.id for found in other.containers.list(all=True)}
        finally:
            container.remove(force=True)
        assert client.info()["ID"] != other.info()["ID"]

    # The engine's host network is the namespace's; its containers are its own.
    assert ssh_engine.interface in interfaces
    assert ssh_engine.root_interface not in interfaces
    assert container.id not in elsewhere


def test_execnet_runs_python_inside_the_namespace(ssh_engine: SshEngine) -> None:
    address, config = ssh_engine.address, ssh_engine.ssh_config
    spec = f"ssh=root@{address}//ssh_config={config}//python={sys.executable}"
    assert ssh_engine.execnet_spec() == spec
    gateway = execnet.makegateway(spec)
    try:
        channel = gateway.remote_exec(
            "import os, sys\nchannel.send((sorted(os.listdir('/sys/class/net')), sys.executable))"
        )
        interfaces, python = channel.receive(timeout=60)
    finally:
        gateway.exit()
        gateway.join(timeout=30)

    assert ssh_engine.interface in interfaces
    assert ssh_engine.root_interface not in interfaces
    assert python == sys.executable


def test_a_killed_tls_engine_stops_answering_until_it_is_restarted(tls_engine: TlsEngine) -> None:
    with contextlib.closing(tls_engine.client(timeout=10)) as client:
        container = client.containers.run(
            tls_engine.image, ["sleep", "300"], detach=True, network_mode="none"
        )
        try:
            tls_engine.kill()

            with pytest.raises(requests.exceptions.ConnectionError):
                client.version()
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", tls_engine.port), timeout=5).close()
            assert tls_engine.processes() == set()  # containerd, shims and containers too

            tls_engine.restart()

            assert client.version()["ApiVersion"]
            container.reload()
            assert container.status == "exited"
            assert client.images.get(tls_engine.image).tags == [tls_engine.image]
        finally:
            container.remove(force=True)


def test_a_killed_ssh_engine_stops_answering_until_it_is_restarted(ssh_engine: SshEngine) -> None:
    with contextlib.closing(ssh_engine.client(timeout=10)) as client:
        assert client.version()["ApiVersion"]
        ssh_engine.kill()

        with pytest.raises(requests.exceptions.ConnectionError):
            client.version()

        ssh_engine.restart()
        assert client.version()["ApiVersion"]
        assert _echo_in_container(client, ssh_engine.image) == "hello from a container\n"


def test_a_stopped_ssh_engine_leaves_nothing_behind() -> None:
    require_engines()
    # The client is closed after the engine stops: its ssh session is still open at the stop.
    with contextlib.ExitStack() as later, SshEngine() as engine:
        build_image(engine)
        client = later.enter_context(contextlib.closing(engine.client()))
        client.containers.run(engine.image, ["sleep", "300"], detach=True, network_mode="none")
        started = _running(engine.processes())
        assert _missing(ENGINE_PROGRAMS + SSH_PROGRAMS, started) == []
        assert engine.name in _namespaces()

    assert _leftovers(engine, set(started)) == []
    assert engine.name not in _namespaces()
    link = subprocess.run(
        ["ip", "link", "show", engine.root_interface], check=False, capture_output=True
    )
    assert link.returncode != 0


def test_a_killed_tls_engine_leaves_nothing_behind_once_stopped() -> None:
    require_engines()
    with TlsEngine() as engine:
        build_image(engine)
        with contextlib.closing(engine.client()) as client:
            client.containers.run(engine.image, ["sleep", "300"], detach=True, network_mode="none")
        started = _running(engine.processes())
        assert _missing(ENGINE_PROGRAMS, started) == []
        engine.kill()
        # The container's cgroups outlive it: dockerd is no longer there to remove them.
        assert any(path.is_dir() for path in Path("/sys/fs/cgroup").glob(f"*/{engine.name}/*"))

    assert _leftovers(engine, set(started)) == []
