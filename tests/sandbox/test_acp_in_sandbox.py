"""ACP agents in the sandbox, in real containers: the client stays on the host and drives the
agent process in the container over the engine's attached exec. The agent is a shell stand-in
(tests/support/standins/sandbox-acp-agent) speaking the real protocol in a busybox image,
which, like the sandbox image, has no Python; the agent command is the one the core makes
from the settings (``sandbox.agent = acp``, the stand-in's command line in agent_command)."""

from __future__ import annotations

import json
from pathlib import Path

import docker
import pytest

from pytest_openkata.contracts.config import EvalSettings, SandboxSettings
from pytest_openkata.contracts.errors import AGENT_CRASH, SandboxError
from pytest_openkata.core.conversation import scripted
from pytest_openkata.core.errors import ScenarioFailure
from pytest_openkata.core.sandboxed import (
    SandboxSetup,
    drive_agent,
    run_agent_in_sandbox,
    sandbox_agent,
    sandbox_spec,
)
from pytest_openkata.core.scenario import load_scenario
from pytest_openkata.infra.retry import NO_RETRY
from pytest_openkata.providers.sandboxes.docker import DockerLimits, DockerProvider
from tests.support.docker_engine import build_acp_standin_image
from tests.support.evals import write_scenario, write_skill


@pytest.fixture(scope="module")
def acp_image(docker_client: docker.DockerClient) -> str:
    return build_acp_standin_image(docker_client)


def _setup(
    docker_client: docker.DockerClient, image: str, agent: str, command: str, timeout: float
) -> SandboxSetup:
    settings = EvalSettings(
        sandbox=SandboxSettings(agent=agent, image=image), agent_command=command, model="m"
    )
    provider = DockerProvider(docker_client, DockerLimits(image, cpus=1.0, memory="256m", pids=64))
    return SandboxSetup(provider, sandbox_agent(settings), "none", timeout)


def _scenario(root: Path):  # type: ignore[no-untyped-def]
    skill = write_skill(root, "s", {})
    return load_scenario(write_scenario(skill, "scenario-0", {"x": 1}, sandbox=True))


def test_an_acp_agent_in_the_sandbox_is_granted_its_edit_and_gets_no_host_files(
    use_engine: str, docker_client: docker.DockerClient, acp_image: str, tmp_path: Path
) -> None:
    setup = _setup(docker_client, acp_image, "acp", "acp-agent work", 60.0)

    result, _ = run_agent_in_sandbox(_scenario(tmp_path), "Write the notes", setup, NO_RETRY)

    assert result.output == "notes written"
    assert result.changes is not None
    added = {path: content.data for path, content in result.changes.added}
    # Asked permission for its edit, was granted it, and edited the container's file itself.
    assert added["notes.md"] == b"granted in the sandbox\n"
    # The client offered it no file of the host and no terminal (ACP: what a client leaves
    # out of its capabilities, it does not offer).
    initialize = json.loads(added["client-initialize.json"])
    assert initialize["method"] == "initialize"
    capabilities = initialize["params"].get("clientCapabilities", {})
    assert not capabilities.get("fs", {}).get("readTextFile", False)
    assert not capabilities.get("fs", {}).get("writeTextFile", False)
    assert not capabilities.get("terminal", False)
    # Its session updates are the transcript, as on the host.
    assert result.transcript is not None
    assert result.transcript.source == "acp session/update"
    [call] = result.transcript.tool_calls
    assert (call.tool, call.status) == ("Write notes.md", "ok")
    assert result.transcript.files_written == ("/workspace/notes.md",)


def test_an_acp_agent_crashing_in_the_sandbox_is_an_agent_crash_naming_it(
    use_engine: str, docker_client: docker.DockerClient, acp_image: str, tmp_path: Path
) -> None:
    setup = _setup(docker_client, acp_image, "acp", "acp-agent crash", 60.0)

    with pytest.raises(ScenarioFailure) as failure:
        run_agent_in_sandbox(_scenario(tmp_path), "Fall over", setup, NO_RETRY)

    assert failure.value.cause == AGENT_CRASH
    message = str(failure.value)
    assert "acp: the agent exited mid-session (status 3)" in message
    assert "stand-in ACP agent: crashing on purpose" in message  # its standard error's end


def test_a_timed_out_acp_agent_is_stopped_in_the_container_too(
    use_engine: str, docker_client: docker.DockerClient, acp_image: str, tmp_path: Path
) -> None:
    setup = _setup(docker_client, acp_image, "acp", "acp-agent hang", 3.0)
    environment = setup.sandbox.create(sandbox_spec(_scenario(tmp_path), setup))
    try:
        result = drive_agent(environment, setup, "Never answer", None, "run acp")
        left = environment.exec(["ps", "-o", "pid,args"], env={}, workdir="/", timeout=30)
    finally:
        environment.remove()

    assert result.timed_out
    assert result.exit_code is None
    # Neither the agent nor the child it started outlived the timeout in the container.
    assert "acp-agent" not in left.output
    assert "sleep 3600" not in left.output
    assert "sleep 2147483647" in left.output  # the container's own process: still there


def test_a_preset_whose_program_the_image_lacks_says_so_naming_the_preset(
    use_engine: str, docker_client: docker.DockerClient, acp_image: str, tmp_path: Path
) -> None:
    setup = _setup(docker_client, acp_image, "acp:claude", "", 60.0)

    with pytest.raises(SandboxError) as error:
        run_agent_in_sandbox(_scenario(tmp_path), "Hello", setup, NO_RETRY)

    message = str(error.value)
    assert "acp:claude cannot run in the sandbox: the sandbox image has no 'claude-code-acp'" in (
        message
    )
    assert "@zed-industries/claude-code-acp" in message
    assert "Node" in message


def test_a_follow_up_to_an_acp_agent_without_session_load_says_it_cannot_continue(
    use_engine: str, docker_client: docker.DockerClient, acp_image: str, tmp_path: Path
) -> None:
    setup = _setup(docker_client, acp_image, "acp", "acp-agent work", 60.0)

    with pytest.raises(ScenarioFailure) as failure:
        run_agent_in_sandbox(
            _scenario(tmp_path),
            "Write the notes",
            setup,
            NO_RETRY,
            follow=scripted(["And again"]),
            task="Write the notes",
        )

    assert "cannot continue a session: it does not offer session/load" in str(failure.value)
