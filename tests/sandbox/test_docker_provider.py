"""The Docker provider against a real engine, with a stand-in agent in a local image."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from pathlib import Path

import docker
import pytest

from pytest_openkata.providers.sandboxes import AgentCommand, SandboxError
from pytest_openkata.providers.sandboxes.docker import (
    MANAGED,
    OWNER_HOST,
    OWNER_PID,
    DockerLimits,
    DockerSandbox,
    connect,
    container_name,
    sweep_stale_containers,
)
from tests.support.churn import environment_churn
from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.evals import write_scenario, write_skill

KIRO = AgentCommand(
    "kiro-cli",
    [
        "kiro-cli",
        "chat",
        "--agent",
        "eval-agent",
        "--trust-all-tools",
        "--no-interactive",
        "--model",
        "model-x",
    ],
    agent_config='{"name":"eval-agent"}',
)


def _limits(image: str, **overrides: object) -> DockerLimits:
    values: dict = {
        "image": image,
        "timeout": 60.0,
        "cpus": 1.0,
        "memory": "256m",
        "pids": 64,
        "mounts": (),
    }
    values.update(overrides)
    return DockerLimits(**values)


def _scenario(tmp_path: Path, task: str, inputs: dict[str, str] | None = None) -> Path:
    skill = write_skill(tmp_path, "s", {})
    (skill / "references").mkdir()
    (skill / "references" / "guide.md").write_text("a guide\n")
    (skill / "references" / "ACKNOWLEDGMENTS.md").write_text("thanks\n")
    scenario = write_scenario(skill, "scenario-0", {"x": 1}, sandbox=True, inputs=inputs)
    (scenario / "task.md").write_text(task)
    return scenario


def _run(
    client: docker.DockerClient, image: str, scenario: Path, **limits: object
) -> tuple[object, DockerSandbox]:
    sandbox = DockerSandbox(client, _limits(image, **limits))
    run = sandbox.run(
        skill_dir=scenario.parent.parent,
        scenario_dir=scenario,
        network="none",
        prompt=scenario.joinpath("task.md").read_text(),
        agent=KIRO,
    )
    return run, sandbox


def _managed(client: docker.DockerClient) -> list:
    """Sandbox containers of this test process (in-process pytester runs included)."""
    labels = [f"{MANAGED}=true", f"{OWNER_PID}={os.getpid()}"]
    return client.containers.list(all=True, filters={"label": labels})


@pytest.fixture
def client(use_engine: str, docker_client: docker.DockerClient) -> docker.DockerClient:
    return docker_client


def test_workspace_layout_prompt_on_stdin_and_diff(
    client: docker.DockerClient, standin_image: str, tmp_path: Path
) -> None:
    task = (
        "Edit the project.\n"
        "STANDIN: shell ls -a /workspace /workspace/skill /workspace/skill/references\n"
        "STANDIN: shell cat /workspace/.kiro/agents/eval-agent.json\n"
        "STANDIN: write NOTES.md written by the agent\n"
        "STANDIN: write src/app.py print('changed')\n"
        "STANDIN: delete old.txt\n"
    )
    padding = "x" * 300_000  # far above one argument's 128 KiB limit
    scenario = _scenario(
        tmp_path, task + padding + "\n", {"src/app.py": "print('hi')\n", "old.txt": "old\n"}
    )

    run, _ = _run(client, standin_image, scenario)

    assert run.exit_code == 0
    assert not run.timed_out
    assert "model=model-x agent=eval-agent" in run.output  # the configured model reaches it
    assert f"prompt bytes: {len(task) + len(padding) + 1}" in run.output
    assert "task.md" in run.output
    assert "guide.md" in run.output
    assert "ACKNOWLEDGMENTS.md" not in run.output  # excluded, as from the prompt
    assert '{"name":"eval-agent"}' in run.output
    assert [path for path, _ in run.diff.added] == ["NOTES.md"]
    assert [path for path, _ in run.diff.modified] == ["src/app.py"]
    assert run.diff.deleted == ["old.txt"]
    assert run.judge_text.startswith("## Agent Output\n\n> stand-in kiro-cli")
    assert "### Added Files\n\n**NOTES.md**\n```\nwritten by the agent\n" in run.judge_text
    assert _managed(client) == []  # removed after the run


def test_container_is_hardened_and_limited(
    client: docker.DockerClient, standin_image: str, tmp_path: Path
) -> None:
    task = "STANDIN: shell grep NoNewPrivs /proc/self/status\nSTANDIN: shell cat /proc/net/dev\n"
    run, _ = _run(client, standin_image, _scenario(tmp_path, task))

    assert "NoNewPrivs:\t1" in run.output  # the agent cannot gain privileges
    interfaces = [line.split(":")[0].strip() for line in run.output.splitlines() if ":" in line]
    assert "lo" in interfaces
    assert "eth0" not in interfaces  # network "none"

    limited = DockerSandbox(client, _limits(standin_image, cpus=0.5, memory="96m", pids=77))
    container = limited._create("scenario-limits", "none", {})
    try:
        host = container.attrs["HostConfig"]
        assert host["PidsLimit"] == 77
        assert host["Memory"] == 96 * 1024 * 1024
        assert host["NanoCpus"] == 500_000_000
        assert host["SecurityOpt"] == ["no-new-privileges"]
        assert host["NetworkMode"] == "none"
        assert container.labels[MANAGED] == "true"
        assert container.labels[OWNER_PID] == str(os.getpid())
    finally:
        container.remove(force=True)


def test_credential_folders_are_read_only_and_only_mounted_when_present(
    client: docker.DockerClient, standin_image: str, tmp_path: Path
) -> None:
    credentials = tmp_path / "aws"
    credentials.mkdir()
    (credentials / "config").write_text("[default]\n")
    task = (
        "STANDIN: shell cat /root/.aws/config\n"
        "STANDIN: shell echo stolen > /root/.aws/config || echo write refused\n"
        "STANDIN: shell ls /root/.kiro || echo no kiro folder\n"
    )
    mounts = ((str(credentials), "/root/.aws"), (str(tmp_path / "absent"), "/root/.kiro"))

    run, _ = _run(client, standin_image, _scenario(tmp_path, task), mounts=mounts)

    assert "[default]" in run.output
    assert "write refused" in run.output
    assert "no kiro folder" in run.output
    assert (credentials / "config").read_text() == "[default]\n"


def test_the_agent_cannot_write_to_the_host(
    client: docker.DockerClient, standin_image: str, tmp_path: Path
) -> None:
    probe = Path("/tmp") / f"openkata-escape-{uuid.uuid4().hex}"
    task = f"STANDIN: shell echo escaped > {probe} && echo wrote inside the container\n"

    run, _ = _run(client, standin_image, _scenario(tmp_path, task))

    assert "wrote inside the container" in run.output
    assert not probe.exists()


def test_symlinks_out_of_the_skill_are_not_copied_in(
    client: docker.DockerClient, standin_image: str, tmp_path: Path
) -> None:
    secret = tmp_path / "host-secret.txt"
    secret.write_text("host secret value\n")
    scenario = _scenario(tmp_path, "STANDIN: shell ls -a /workspace; cat /workspace/leak.txt\n")
    (scenario / "inputs").mkdir(exist_ok=True)
    (scenario / "inputs" / "leak.txt").symlink_to(secret)
    (scenario.parent.parent / "references" / "outside.md").symlink_to(secret)

    run, _ = _run(client, standin_image, scenario)

    assert "host secret value" not in run.output
    assert "cat: can't open '/workspace/leak.txt': No such file or directory" in run.output


def test_host_timeout_keeps_partial_output_and_changes(
    client: docker.DockerClient, standin_image: str, tmp_path: Path
) -> None:
    task = "STANDIN: write early.txt before the hang\nSTANDIN: sleep 600\n"

    run, _ = _run(client, standin_image, _scenario(tmp_path, task), timeout=3.0)

    assert run.timed_out
    assert run.exit_code is None
    assert "wrote early.txt" in run.output
    assert [path for path, _ in run.diff.added] == ["early.txt"]
    assert _managed(client) == []


def test_agent_exit_status_is_reported(
    client: docker.DockerClient, standin_image: str, tmp_path: Path
) -> None:
    run, _ = _run(client, standin_image, _scenario(tmp_path, "STANDIN: exit 3\n"))

    assert run.exit_code == 3


def test_missing_image_is_a_clear_error(client: docker.DockerClient, tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match=r"image 'openkata-absent:1' not found.*docker build"):
        _run(client, "openkata-absent:1", _scenario(tmp_path, "task\n"))
    assert _managed(client) == []


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
                client.containers.list(all=True, filters={"label": f"{MANAGED}=true"})
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


def test_stale_containers_of_a_killed_run_are_swept(
    client: docker.DockerClient, standin_image: str
) -> None:
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)  # fmt: skip
    dead_pid = finished.stdout.strip()
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


def test_container_names_follow_the_reference() -> None:  # checks 42 and 43
    name = container_name("scenario-0")
    assert name.startswith("openkata-eval-")
    assert name.endswith("-scenario-0")
    assert "/" not in container_name("path/to/scenario")
    assert container_name("scenario-0") != container_name("scenario-0")  # run at once
