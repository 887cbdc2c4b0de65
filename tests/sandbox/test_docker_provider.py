"""The Docker provider against a real engine, through the sandbox interface: create, exec, put
and get archives, remove, close. The run built on it (workspace, snapshots, diff, outcomes) is
tested in test_sandboxed_runs.py."""

from __future__ import annotations

import contextlib
import io
import os
import socket
import subprocess
import sys
import tarfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import docker.models.containers
import pytest
import requests

from pytest_openkata.contracts.errors import RetryableError, SandboxError, SandboxLost
from pytest_openkata.contracts.sandboxes import ExecResult, SandboxSpec
from pytest_openkata.infra.processes import run_mark
from pytest_openkata.providers.sandboxes.docker import (
    KEEP_ALIVE,
    MANAGED,
    OWNER_HOST,
    OWNER_PID,
    OWNER_RUN,
    SCENARIO,
    DockerEnvironment,
    DockerLimits,
    DockerProvider,
    _engine_error,
    connect,
    container_name,
    sweep_stale_containers,
)
from pytest_openkata.providers.sandboxes.docker import WORKDIR as WORKSPACE
from tests.support.churn import environment_churn
from tests.support.docker_engine import EngineRelay, build_image_without_sleep
from tests.support.endpoint import Reply, ScriptedEndpoint


def _limits(image: str, **overrides: object) -> DockerLimits:
    values: dict = {"image": image, "cpus": 1.0, "memory": "256m", "pids": 64}
    values.update(overrides)
    return DockerLimits(**values)


def _spec(name: str = "scenario-0", **overrides: object) -> SandboxSpec:
    values: dict = {"name": name, "network": "none", "env": {}, "mounts": ()}
    values.update(overrides)
    return SandboxSpec(**values)


def _tar(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _files_of(chunks: object) -> dict[str, bytes]:
    """The regular files of a tar stream of chunks, by member name."""
    raw = b"".join(chunks)  # type: ignore[call-overload]
    with tarfile.open(fileobj=io.BytesIO(raw)) as archive:
        return {
            member.name: archive.extractfile(member).read()  # type: ignore[union-attr]
            for member in archive.getmembers()
            if member.isreg()
        }


def _sh(environment: DockerEnvironment, script: str, timeout: float = 60.0) -> ExecResult:
    return environment.exec(["sh", "-c", script], env={}, workdir=WORKSPACE, timeout=timeout)


def _managed(client: docker.DockerClient) -> list:
    """Sandbox containers of this test process (in-process pytester runs included)."""
    labels = [f"{MANAGED}=true", f"{OWNER_PID}={os.getpid()}"]
    return client.containers.list(all=True, filters={"label": labels})


@pytest.fixture
def client(use_engine: str, docker_client: docker.DockerClient) -> docker.DockerClient:
    return docker_client


@pytest.fixture
def provider(client: docker.DockerClient, standin_image: str) -> DockerProvider:
    """A provider on the session's client (not closed: the client is shared)."""
    return DockerProvider(client, _limits(standin_image))


@pytest.fixture
def environment(provider: DockerProvider) -> Iterator[DockerEnvironment]:
    made = provider.create(_spec())
    try:
        yield made
    finally:
        made.remove()


# --- create, exec, put, get, remove ----------------------------------------------------------


def test_an_environment_runs_commands_takes_and_gives_archives_and_is_removed(
    client: docker.DockerClient, provider: DockerProvider
) -> None:
    environment = provider.create(_spec(env={"FROM_SPEC": "spec-value"}))
    try:
        assert [c.name for c in _managed(client)] == [environment.name]
        environment.put_archive(
            "/", _tar({"workspace/a.txt": b"alpha\n", "outside/b.txt": b"beta\n"})
        )

        result = environment.exec(
            ["sh", "-c", 'pwd; cat a.txt ../outside/b.txt; echo "$FROM_SPEC $FROM_EXEC"; '
                         "echo to-stderr >&2; echo made > made.txt; exit 4"],
            env={"FROM_EXEC": "exec-value"}, workdir=WORKSPACE, timeout=60,
        )  # fmt: skip

        assert (result.exit_code, result.timed_out) == (4, False)
        # Standard output and error combined (the two streams' order is the engine's).
        assert sorted(result.output.splitlines()) == sorted(
            ["/workspace", "alpha", "beta", "spec-value exec-value", "to-stderr"]
        )
        # Each stream keeps its own order; the engine interleaves the two as they come.
        assert [line for line in result.output.splitlines() if line != "to-stderr"] == [
            "/workspace",
            "alpha",
            "beta",
            "spec-value exec-value",
        ]
        assert _files_of(environment.get_archive(WORKSPACE)) == {
            "workspace/a.txt": b"alpha\n",
            "workspace/made.txt": b"made\n",
        }
    finally:
        environment.remove()
    assert _managed(client) == []
    environment.remove()  # idempotent


def test_exec_output_is_decoded_with_replacement(environment: DockerEnvironment) -> None:
    result = _sh(environment, r"printf 'ok \377\376 end\n'")

    assert result.output == "ok \ufffd\ufffd end\n"
    assert result.exit_code == 0


def test_a_broken_archive_and_a_missing_folder_are_errors_without_the_step(
    environment: DockerEnvironment,
) -> None:
    # The engine answers 500 to a broken tar: retryable, as every server error of the engine.
    with pytest.raises(RetryableError, match=r"^Docker engine error: .*tar"):
        environment.put_archive("/", b"not a tar at all" * 64)
    with pytest.raises(
        SandboxError, match=r"^404 Client Error.*Could not find the file /no/such/folder"
    ):
        environment.get_archive("/no/such/folder")


# --- hardening, limits, labels, mounts -------------------------------------------------------


def test_container_is_hardened_limited_and_labelled(
    client: docker.DockerClient, standin_image: str
) -> None:
    limited = DockerProvider(client, _limits(standin_image, cpus=0.5, memory="96m", pids=77))
    environment = limited.create(_spec("path/to/scenario-limits", env={"A": "1"}))
    try:
        result = _sh(environment, "grep NoNewPrivs /proc/self/status; cat /proc/net/dev")
        container = client.containers.get(environment.name)
    finally:
        environment.remove()

    assert "NoNewPrivs:\t1" in result.output  # the agent cannot gain privileges
    interfaces = [line.split(":")[0].strip() for line in result.output.splitlines() if ":" in line]
    assert "lo" in interfaces
    assert "eth0" not in interfaces  # network "none"
    host = container.attrs["HostConfig"]
    assert host["PidsLimit"] == 77
    assert host["Memory"] == 96 * 1024 * 1024
    assert host["NanoCpus"] == 500_000_000
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert host["NetworkMode"] == "none"
    config = container.attrs["Config"]
    assert config["Cmd"] == KEEP_ALIVE == ["sleep", "2147483647"]
    assert config["WorkingDir"] == WORKSPACE
    assert "A=1" in config["Env"]
    assert container.labels[MANAGED] == "true"
    assert container.labels[OWNER_PID] == str(os.getpid())
    assert container.labels[OWNER_HOST] == socket.gethostname()
    assert container.labels[OWNER_RUN] == run_mark()
    assert container.labels[SCENARIO] == "path/to/scenario-limits"
    assert container.name.startswith("openkata-eval-")
    assert container.name.endswith("-path-to-scenario-limits")


def test_host_folders_are_read_only_and_only_mounted_when_present(
    provider: DockerProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    credentials = tmp_path / "aws"
    credentials.mkdir()
    (credentials / "config").write_text("[default]\n")
    home = tmp_path / "home"
    (home / "tool").mkdir(parents=True)
    (home / "tool" / "login").write_text("logged in\n")
    monkeypatch.setenv("HOME", str(home))
    mounts = (
        (str(credentials), "/root/.aws"),
        (str(tmp_path / "absent"), "/root/.kiro"),
        ("~/tool", "/root/.tool"),  # expanded by the provider too
    )
    environment = provider.create(_spec(mounts=mounts))
    try:
        result = _sh(
            environment,
            "cat /root/.aws/config /root/.tool/login; "
            "echo stolen > /root/.aws/config || echo write refused; "
            "ls /root/.kiro || echo no kiro folder",
        )
    finally:
        environment.remove()

    assert "[default]" in result.output
    assert "logged in" in result.output
    assert "write refused" in result.output
    assert "no kiro folder" in result.output
    assert (credentials / "config").read_text() == "[default]\n"


def test_a_command_cannot_write_to_the_host(environment: DockerEnvironment) -> None:
    probe = Path("/tmp") / f"openkata-escape-{uuid.uuid4().hex}"

    result = _sh(
        environment, f"mkdir -p /tmp && echo escaped > {probe} && echo wrote inside the container"
    )

    assert "wrote inside the container" in result.output
    assert not probe.exists()


# --- the host's timeout ----------------------------------------------------------------------


def test_host_timeout_keeps_partial_output_and_the_files(
    client: docker.DockerClient, provider: DockerProvider
) -> None:
    environment = provider.create(_spec())
    try:
        started = time.monotonic()
        result = _sh(environment, "echo early > early.txt; echo before the hang; sleep 600", 3.0)
        elapsed = time.monotonic() - started

        assert result == ExecResult("before the hang\n", None, True)
        assert elapsed < 30
        # The container was killed, its files stay readable until it is removed.
        assert client.containers.get(environment.name).status != "running"
        assert _files_of(environment.get_archive(WORKSPACE)) == {"workspace/early.txt": b"early\n"}
    finally:
        environment.remove()
    assert _managed(client) == []


# --- the bound on a command's output -----------------------------------------------------------


def test_output_past_the_bound_is_kept_up_to_it_and_the_command_runs_to_its_end(
    client: docker.DockerClient, standin_image: str
) -> None:
    provider = DockerProvider(client, _limits(standin_image, output_max_bytes=1 << 20))
    environment = provider.create(_spec())
    try:
        result = _sh(environment, "head -c 3000000 /dev/zero | tr '\\0' a; echo done > end.txt")

        assert result.exit_code == 0
        assert result.cut_at == 1 << 20
        assert result.output == "a" * (1 << 20)
        assert _files_of(environment.get_archive(WORKSPACE)) == {"workspace/end.txt": b"done\n"}
        assert _sh(environment, "echo small") == ExecResult("small\n", 0, False)
    finally:
        environment.remove()


# --- errors and removal ----------------------------------------------------------------------


def test_missing_image_is_a_clear_error(client: docker.DockerClient) -> None:
    provider = DockerProvider(client, _limits("openkata-absent:1"))

    # What a pip install has (the packaged image tooling, the setting) comes first.
    with pytest.raises(
        SandboxError,
        match=r"^image 'openkata-absent:1' not found on the Docker engine: set sandbox\.image "
        r"\(--eval-sandbox-image or OPENKATA_EVAL_SANDBOX_IMAGE\) to an image it has, such as "
        r"the packaged sandbox image that `python -m pytest_openkata\.localmodel build "
        r"--sandbox` builds .*; in a checkout of pytest-openkata, docker build -f "
        r"Dockerfile\.eval -t openkata-absent:1 \. builds the default image$",
    ):
        provider.create(_spec())
    assert _managed(client) == []


def test_a_container_that_cannot_start_is_removed(client: docker.DockerClient) -> None:
    provider = DockerProvider(client, _limits(build_image_without_sleep(client)))

    with pytest.raises(SandboxError, match=r"^docker start: .*sleep"):
        provider.create(_spec())
    assert _managed(client) == []


@pytest.mark.parametrize("step", ["create", "start"])
def test_a_container_interrupted_while_being_made_is_removed(
    client: docker.DockerClient,
    provider: DockerProvider,
    monkeypatch: pytest.MonkeyPatch,
    step: str,
) -> None:
    """Ctrl-C as the engine answers: the container exists, the provider has not returned it."""
    collection = docker.models.containers.ContainerCollection
    target = collection if step == "create" else docker.models.containers.Container
    real = getattr(target, step)

    def interrupted(*args: object, **kwargs: object) -> object:
        real(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(target, step, interrupted)

    with pytest.raises(KeyboardInterrupt):
        provider.create(_spec())
    assert _managed(client) == []


def test_close_removes_live_containers_and_refuses_new_ones(
    use_engine: str, client: docker.DockerClient, standin_image: str
) -> None:
    provider = DockerProvider(connect(timeout=30), _limits(standin_image))
    first, second = provider.create(_spec("a")), provider.create(_spec("b"))
    second.remove()
    assert [c.name for c in _managed(client)] == [first.name]

    provider.close()  # as pytest ends: runs abandoned after -x, Ctrl-C or SIGTERM

    assert _managed(client) == []
    with pytest.raises(SandboxError, match=r"^the sandbox was closed: the run is over$"):
        provider.create(_spec("c"))
    assert _managed(client) == []
    first.remove()  # a run that ends after close: nothing left to remove, no error


def test_a_closed_provider_removes_what_it_makes_and_refuses_to_run(
    client: docker.DockerClient, standin_image: str
) -> None:
    provider = DockerProvider(client, _limits(standin_image))
    provider._closed = True  # closed while another thread was creating its container

    with pytest.raises(SandboxError, match=r"^the sandbox was closed: the run is over$"):
        provider.create(_spec())
    assert _managed(client) == []


@contextlib.contextmanager
def _relayed(
    upstream: str, client: docker.DockerClient, image: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[EngineRelay, DockerProvider, DockerEnvironment]]:
    """A provider reaching the engine through a relay the test can cut, and one environment
    of it; the container is removed through ``client`` afterwards, whatever the test cut."""
    with EngineRelay(upstream) as relay:
        monkeypatch.setenv("DOCKER_HOST", relay.host)
        provider = DockerProvider(connect(timeout=30), _limits(image))
        environment = provider.create(_spec())
        try:
            yield relay, provider, environment
        finally:
            with contextlib.suppress(docker.errors.NotFound):
                client.containers.get(environment.name).remove(force=True)


def test_an_engine_that_stops_answering_is_a_clear_error(
    use_engine: str,
    client: docker.DockerClient,
    standin_image: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stopped = r"the Docker engine stopped answering \(ConnectionError\); check that dockerd is "
    with _relayed(use_engine, client, standin_image, monkeypatch) as (relay, provider, environment):
        environment.put_archive("/", _tar({"workspace/a.txt": b"a\n"}))
        relay.cut()

        # The environment's errors leave the step to the core; create names its own.
        with pytest.raises(SandboxError, match="^" + stopped):
            _sh(environment, "true")
        with pytest.raises(SandboxError, match="^" + stopped):
            environment.put_archive("/", _tar({"workspace/b.txt": b"b\n"}))
        with pytest.raises(SandboxError, match="^" + stopped):
            environment.get_archive(WORKSPACE)
        with pytest.raises(SandboxError, match="^docker create: " + stopped):
            provider.create(_spec())
        environment.remove()  # quietly: the next run's sweep would remove it
        provider.close()


def test_an_engine_that_stops_during_a_command_is_a_clear_error(
    use_engine: str,
    client: docker.DockerClient,
    standin_image: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with _relayed(use_engine, client, standin_image, monkeypatch) as (relay, _, environment):
        cut = threading.Timer(1.0, relay.cut)
        cut.start()
        try:
            with pytest.raises(SandboxError, match=r"^the Docker engine stopped answering"):
                _sh(environment, "echo started; sleep 600")
        finally:
            cut.cancel()


def test_an_engine_that_stops_during_a_download_is_lost(
    use_engine: str,
    client: docker.DockerClient,
    standin_image: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A connection cut in the middle of an answer ends the stream short (a chunked-encoding
    # error, not a connection error): the engine is lost all the same, so a pool moves the run.
    with _relayed(use_engine, client, standin_image, monkeypatch) as (relay, _, environment):
        # More than the sockets between us and the engine can hold once it is cut.
        assert _sh(environment, "head -c 16000000 /dev/urandom > big.bin").exit_code == 0
        chunks = iter(environment.get_archive(WORKSPACE))
        next(chunks)
        relay.cut()

        with pytest.raises(SandboxLost, match=r"^the Docker engine stopped answering \("):
            for _ in chunks:
                pass


def test_server_errors_of_the_engine_are_retried_others_are_not() -> None:
    def api_error(status: int) -> docker.errors.APIError:
        response = requests.Response()
        response.status_code = status
        return docker.errors.APIError("engine said no", response, explanation="busy")

    retryable = _engine_error(api_error(500), "docker create")
    assert isinstance(retryable, RetryableError)
    assert str(retryable) == "docker create: Docker engine error: busy"
    assert isinstance(_engine_error(api_error(503)), RetryableError)
    assert str(_engine_error(api_error(503))) == "Docker engine error: busy"
    refused = _engine_error(api_error(409))
    assert type(refused) is SandboxError
    assert not str(refused).startswith(":")


# --- the engine connection -------------------------------------------------------------------


def test_no_engine_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")

    with pytest.raises(SandboxError, match=r"no Docker engine answers at unix://.*no-such\.sock"):
        connect(timeout=5)


def test_the_engine_answers_while_a_variable_changes_in_another_thread(use_engine: str) -> None:
    # pytest's thread sets and removes PYTEST_CURRENT_TEST while scenarios call the engine;
    # requests, left to read proxies from os.environ on each call, raised KeyError.
    client = connect(timeout=30)
    try:
        with environment_churn():
            for _ in range(200):
                # sparse: the list alone, not each container inspected after it (one another
                # test removes in between is not this test's concern).
                client.containers.list(all=True, filters={"label": f"{MANAGED}=true"}, sparse=True)
    finally:
        client.close()


def _engine_over_tcp(monkeypatch: pytest.MonkeyPatch, proxy: ScriptedEndpoint) -> None:
    for name in ("DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "NO_PROXY", "no_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("HTTP_PROXY", proxy.base_url)


def test_an_engine_over_tcp_is_reached_through_the_proxy_the_environment_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with ScriptedEndpoint() as proxy:
        proxy.respond_with(
            lambda request: Reply(json={"ApiVersion": "1.41"} if "version" in request.path else [])
        )
        _engine_over_tcp(monkeypatch, proxy)
        client = connect(timeout=5)
        client.containers.list()
        client.close()

    assert client.api.api_version == "1.41"
    assert [request.path.split("?")[0] for request in proxy.requests] == [
        "http://127.0.0.1:9/version",
        "http://127.0.0.1:9/v1.41/containers/json",
    ]


def test_an_engine_over_tcp_that_no_proxy_names_is_reached_directly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with ScriptedEndpoint() as proxy:
        _engine_over_tcp(monkeypatch, proxy)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        with pytest.raises(SandboxError, match=r"no Docker engine answers at tcp://127\.0\.0\.1:9"):
            connect(timeout=5)
    assert proxy.requests == []


def _a_finished_process_id() -> str:
    """The id of a process that has ended (a killed run's, as the sweep sees it)."""
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)  # fmt: skip
    return finished.stdout.strip()


def test_stale_containers_of_a_killed_run_are_swept(
    client: docker.DockerClient, standin_image: str
) -> None:
    dead_pid = _a_finished_process_id()
    labels = {MANAGED: "true", OWNER_HOST: os.uname().nodename}
    stale = client.containers.create(
        standin_image, ["true"], labels={**labels, OWNER_PID: dead_pid}
    )
    live = client.containers.create(
        standin_image, ["true"], labels={**labels, OWNER_PID: str(os.getpid())}
    )
    try:
        removed = sweep_stale_containers(client)

        every = client.containers.list(all=True, filters={"label": f"{MANAGED}=true"})
        names = {c.name for c in every}
        assert stale.name in removed
        assert stale.name not in names
        assert live.name in names  # its pytest process is still running
    finally:
        for container in (stale, live):
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)


def test_the_sweep_tells_runs_apart_by_their_mark_not_by_a_process_id_alone(
    client: docker.DockerClient, standin_image: str
) -> None:
    # A process id means something only in its pid namespace and for its process's life: an
    # earlier run whose id this process reuses is over; a run of another namespace or machine
    # of the same host name, whose id is no process here, is not this host's to judge.
    dead_pid = _a_finished_process_id()
    mine = run_mark()
    tag, pid, start = mine.split(":")
    elsewhere = "0" * 8 if tag != "0" * 8 else "1" * 8
    labelled = {
        "ours": (mine, str(os.getpid())),
        "reused": (f"{tag}:{pid}:{int(start) - 1}", str(os.getpid())),
        "elsewhere": (f"{elsewhere}:{dead_pid}:1", dead_pid),
    }
    host = {MANAGED: "true", OWNER_HOST: socket.gethostname()}
    made = {
        role: client.containers.create(
            standin_image, ["true"], labels={**host, OWNER_RUN: mark, OWNER_PID: owner}
        )
        for role, (mark, owner) in labelled.items()
    }
    try:
        removed = sweep_stale_containers(client)

        left = {c.name for c in client.containers.list(all=True, filters={"label": MANAGED})}
        assert made["reused"].name in removed
        assert made["ours"].name in left
        assert made["elsewhere"].name in left
    finally:
        for container in made.values():
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)


def test_the_sweep_is_not_broken_by_containers_that_other_runs_remove_meanwhile(
    client: docker.DockerClient, standin_image: str
) -> None:
    # Other runs on the engine create and remove their containers while one sweeps (the CI
    # failure: a container listed, then gone when looked at, raised NotFound from the sweep).
    labels = {MANAGED: "true", OWNER_HOST: os.uname().nodename, OWNER_PID: str(os.getpid())}
    stop = threading.Event()
    churned = 0

    def churn() -> None:
        nonlocal churned
        while not stop.is_set():
            container = client.containers.create(standin_image, ["true"], labels=labels)
            container.remove(force=True)
            churned += 1

    worker = threading.Thread(target=churn, daemon=True)
    worker.start()
    try:
        for _ in range(40):
            sweep_stale_containers(client)
    finally:
        stop.set()
        worker.join(30)
    assert churned > 0  # the sweeps did run while containers came and went


def test_container_names_follow_the_reference() -> None:  # checks 42 and 43
    name = container_name("scenario-0")
    assert name.startswith("openkata-eval-")
    assert name.endswith("-scenario-0")
    assert "/" not in container_name("path/to/scenario")
    assert container_name("scenario-0") != container_name("scenario-0")  # run at once
