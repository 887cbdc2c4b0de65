"""Each errored sandboxed trial says what kind of failure ended it, and what it ran with: a
real engine, real containers and a scripted command agent (``sh -c COMMAND`` in the
container). A crash, a timeout and an out-of-memory kill are the agent's own and never run
again; a sandbox that cannot be made is the infrastructure's, and ``retry.infrastructure``
runs the trial again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import docker
import pytest

from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, sandbox_args, write_skill


def _scenario(root: Path, **options: object) -> Path:
    skill = write_skill(root, "s", {"scenario-box": {"x": 1}}, sandbox=True)
    folder = skill / "evals" / "scenario-box"
    if options:
        path = folder / "scenario.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **options}))
    return folder


def _command(command: str, *extra: str) -> tuple[str, ...]:
    return ("--eval-sandbox-agent", "command", "--eval-agent-command", command, *extra)


def _trials(root: Path) -> list[dict[str, Any]]:
    (log,) = (root / ".openkata/runs").glob("*.jsonl")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    return [record for record in records if record["record"] == "trial"]


def test_an_agent_that_exits_2_is_an_agent_crash_and_records_what_its_sandbox_had(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
    docker_client: docker.DockerClient,
) -> None:
    _scenario(pytester.path, cpus=0.5, memory_mb=96)

    result = pytester.runpytest(
        "skills",
        *sandbox_args(endpoint.base_url, standin_image),
        *_command("echo crashing; exit 2", "--eval-retry-infrastructure", "2"),
        "--eval-html",
        "run.html",
    )

    result.assert_outcomes(errors=1)
    (trial,) = _trials(pytester.path)
    assert trial["error_cause"] == "agent_crash"
    assert trial["error"].startswith("sandbox: command: exit status 2")
    assert trial["attempts"] == []  # a crash is never run again
    assert trial["environment"] == {
        "cpus": 0.5,
        "memory_mb": 96,
        "agent_version": "",  # the command agent is a shell: no version of its own
        "image_id": docker_client.images.get(standin_image).id,
        "workdir": "/workspace",
    }
    result.stdout.fnmatch_lines(["  Errors by kind: agent_crash 1 of 1 attempt (100%)"])
    html = (pytester.path / "run.html").read_text()
    assert "Kind of failure: agent_crash" in html
    image = trial["environment"]["image_id"]
    assert f"Sandbox: 0.5 CPUs, 96 MiB; agent version unknown; image {image}</p>" in html


def test_the_sandbox_is_created_with_the_scenarios_cpus_and_memory(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
) -> None:
    _scenario(pytester.path, cpus=0.5, memory_mb=64)
    # What the kernel enforces on the container, cgroup v2 or v1.
    limits = (
        "cd /sys/fs/cgroup; if [ -f cpu.max ]; then cat cpu.max memory.max; else "
        "cat cpu/cpu.cfs_quota_us cpu/cpu.cfs_period_us memory/memory.limit_in_bytes; fi"
    )

    result = pytester.runpytest(
        "skills", *sandbox_args(endpoint.base_url, standin_image), *_command(limits)
    )

    result.assert_outcomes(passed=1)
    (trial,) = _trials(pytester.path)
    # 0.5 CPU: 50 ms of every 100 ms; 64 MiB.
    assert trial["trace"]["output"].split() == ["50000", "100000", str(64 * 1024 * 1024)]
    assert (trial["environment"]["cpus"], trial["environment"]["memory_mb"]) == (0.5, 64)


def test_an_agent_past_the_sandbox_timeout_is_a_timeout(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
) -> None:
    _scenario(pytester.path)

    result = pytester.runpytest(
        "skills",
        *sandbox_args(endpoint.base_url, standin_image, "--eval-sandbox-timeout", "2"),
        *_command("sleep 60", "--eval-retry-infrastructure", "2"),
    )

    result.assert_outcomes(errors=1)
    (trial,) = _trials(pytester.path)
    assert (trial["error_cause"], trial["attempts"]) == ("timeout", [])
    assert "timed out after 2 s" in trial["error"]


def test_an_agent_killed_for_want_of_memory_is_out_of_memory(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
) -> None:
    _scenario(pytester.path, memory_mb=16)
    # tail keeps the last 256 MiB it reads in memory: far more than the sandbox has.
    allocate = "head -c 268435456 /dev/zero | tail -c 268435456 > /dev/null"

    result = pytester.runpytest(
        "skills",
        *sandbox_args(endpoint.base_url, standin_image),
        *_command(allocate, "--eval-retry-infrastructure", "2"),
    )

    result.assert_outcomes(errors=1)
    (trial,) = _trials(pytester.path)
    assert (trial["error_cause"], trial["attempts"]) == ("out_of_memory", [])
    assert trial["error"].startswith("sandbox: command ran out of memory of 16 MiB")
    assert trial["environment"]["memory_mb"] == 16
    result.stdout.fnmatch_lines(["  Errors by kind: out_of_memory 1 of 1 attempt (100%)"])


def test_a_sandbox_that_cannot_be_made_is_retried_as_infrastructure_then_errors(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
) -> None:
    _scenario(pytester.path)

    result = pytester.runpytest(
        "skills",
        *sandbox_args(endpoint.base_url, "openkata-no-such-image:none"),
        *_command("echo never", "--eval-retry-infrastructure", "2"),
    )

    result.assert_outcomes(errors=1)
    (trial,) = _trials(pytester.path)
    assert trial["error_cause"] == "sandbox_setup"
    assert "image 'openkata-no-such-image:none' not found" in trial["error"]
    assert [(a["number"], a["cause"]) for a in trial["attempts"]] == [
        (1, "sandbox_setup"),
        (2, "sandbox_setup"),
    ]
    assert trial["environment"] is None  # no sandbox was made
    result.stdout.fnmatch_lines(
        ["  Errors by kind: sandbox_setup 3 of 3 attempts (100%, 2 retried)"]
    )
