"""Tessl's ``scenario.json`` fixtures and setup in real containers: the fixture folder is in the
workspace at its install path and the setup commands have run before the agent starts, the
judge's diff holds only what the agent changed, a failing setup command is the scenario's
error, and both are part of the cache key.

The agent is the kiro-cli stand-in (tests/support/standins/sandbox-kiro-cli), scripted by the
``STANDIN:`` lines of its task; the judge is the scripted loopback endpoint.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import docker
import pytest

from pytest_openkata.contracts.sandboxes import AgentCommand
from pytest_openkata.core.errors import ScenarioFailure
from pytest_openkata.core.sandboxed import SandboxSetup, run_agent_in_sandbox
from pytest_openkata.core.scenario import load_scenario
from pytest_openkata.infra.retry import NO_RETRY
from pytest_openkata.providers.sandboxes.docker import (
    MANAGED,
    OWNER_PID,
    DockerLimits,
    DockerProvider,
)
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, sandbox_args, write_scenario, write_skill

# The agent copies what setup made and a fixture file into seen.txt: the only change it makes.
TASK = "STANDIN: shell cat made.txt app/data.txt > seen.txt\n"


def _with_fixture(skill: Path, scenario: str, setup: list[str]) -> Path:
    """A sandboxed scenario of ``skill`` whose fixture ``app`` (the skill's ``app/`` folder:
    data.txt and an executable greet.sh) is installed at ``app``, with ``setup``."""
    app = skill / "app"
    app.mkdir(exist_ok=True)
    (app / "data.txt").write_text("fixture data\n")
    greet = app / "greet.sh"
    greet.write_text("#!/bin/sh\necho hello from setup\n")
    greet.chmod(0o755)
    folder = write_scenario(skill, scenario, {"x": 1}, sandbox=True)
    folder.joinpath("task.md").write_text(TASK)
    options = {
        "sandbox": True,
        "fixtures": {"app": {"type": "directory", "path": "../../app", "installPath": "app"}},
        "setup": setup,
    }
    folder.joinpath("scenario.json").write_text(json.dumps(options))
    return folder


def _managed(client: docker.DockerClient) -> list[Any]:
    labels = [f"{MANAGED}=true", f"{OWNER_PID}={os.getpid()}"]
    return client.containers.list(all=True, filters={"label": labels})


def _report(folder: Path) -> dict[str, dict[str, Any]]:
    [path] = sorted(folder.glob("*.json"))
    return {s["name"]: s for s in json.loads(path.read_text())["scenarios"]}


def _changes_judged(endpoint: ScriptedEndpoint) -> list[str]:
    """The workspace changes part of every judge request."""
    return [
        r.json["messages"][1]["content"].split("## Workspace Changes", 1)[1]
        for r in endpoint.requests
        if r.json and r.json["messages"][0]["role"] == "system"
    ]


def test_fixtures_and_setup_come_before_the_agent_and_outside_its_changes(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
    docker_client: docker.DockerClient,
) -> None:
    skill = write_skill(pytester.path, "s", {})
    good = _with_fixture(
        skill, "scenario-good", ["./app/greet.sh > made.txt", "echo two >> made.txt"]
    )
    _with_fixture(skill, "scenario-bad", ["echo ok", "echo broken >&2; exit 3"])

    def run(output: str) -> dict[str, dict[str, Any]]:
        args = sandbox_args(endpoint.base_url, standin_image, "--eval-output", f"{output}/")
        pytester.runpytest("skills", *args)
        return _report(pytester.path / output)

    first = run("first")

    # The agent saw the fixture at its install path and what setup made; the judge sees only
    # the file the agent wrote, neither the fixture's files nor made.txt.
    [judged] = _changes_judged(endpoint)
    assert "seen.txt" in judged
    assert "hello from setup\ntwo\nfixture data\n" in judged
    assert "made.txt" not in judged
    assert "data.txt" not in judged
    assert first["scenario-good"]["criteria"][0]["pass"] is True
    # A failing setup command is the scenario's error, naming the command and how it ended.
    bad = first["scenario-bad"]
    assert bad["error_kind"] == "scenario"
    assert bad["error_cause"] == "invalid_input"
    assert bad["error"].startswith(
        "scenario.json: setup[1] 'echo broken >&2; exit 3' failed (exit status 3)\nbroken"
    )
    assert not bad.get("criteria")
    assert script.judge_calls == 1
    assert _managed(docker_client) == []

    # The cache key: unchanged, the agent's answer is reused; a changed fixture file or a
    # changed setup command runs the agent again.
    for path in sorted((skill / "evals" / "scenario-bad").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    (skill / "evals" / "scenario-bad").rmdir()
    assert run("again")["scenario-good"]["usage"]["agent"]["cached"] == 1

    (skill / "app" / "data.txt").write_text("other data\n")
    assert run("fixture")["scenario-good"]["usage"]["agent"]["cached"] == 0
    assert "hello from setup\ntwo\nother data\n" in _changes_judged(endpoint)[-1]

    options = json.loads((good / "scenario.json").read_text())
    options["setup"] = ["./app/greet.sh > made.txt"]
    (good / "scenario.json").write_text(json.dumps(options))
    assert run("setup")["scenario-good"]["usage"]["agent"]["cached"] == 0
    assert "hello from setup\nother data\n" in _changes_judged(endpoint)[-1]
    assert _managed(docker_client) == []


def test_a_setup_command_that_fails_stops_the_run_before_the_agent(
    use_engine: str, docker_client: docker.DockerClient, standin_image: str, tmp_path: Path
) -> None:
    skill = write_skill(tmp_path, "s", {})
    folder = _with_fixture(skill, "scenario-0", ["test -x app/greet.sh", "false"])
    scenario = load_scenario(folder)
    provider = DockerProvider(
        docker_client, DockerLimits(standin_image, cpus=1.0, memory="256m", pids=64)
    )
    agent = AgentCommand("echo", ["echo", "answered"])
    setup = SandboxSetup(provider, agent, "none", 60.0)

    with pytest.raises(ScenarioFailure) as raised:
        run_agent_in_sandbox(scenario, "prompt", setup, NO_RETRY)

    # setup[0] passed: the fixture's script kept its executable mode.
    assert str(raised.value) == "scenario.json: setup[1] 'false' failed (exit status 1)"
    assert (raised.value.kind, raised.value.cause) == ("scenario", "invalid_input")
    assert _managed(docker_client) == []
