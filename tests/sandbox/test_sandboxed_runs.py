"""Sandboxed scenarios run by pytest as users run them, in real containers."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest

from pytest_openkata.localmodel import LocalModelServer
from pytest_openkata.providers.reporters.results_json import ResultsReport
from pytest_openkata.providers.sandboxes.docker import MANAGED, OWNER_PID
from tests.support.docker_engine import build_standin_image, private_dockerd
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, reports_under, write_scenario, write_skill
from tests.support.judged import run_until_judged

EXAMPLE_SKILL = Path(__file__).resolve().parents[2] / "skills" / "commit-message"


def _sandbox_args(base_url: str, image: str, *extra: str) -> tuple[str, ...]:
    return (
        *eval_args(base_url),
        "--eval-sandbox-image",
        image,
        "--eval-sandbox-mounts",
        "none",
        *extra,
    )


def _judge_text(endpoint: ScriptedEndpoint) -> str:
    """The user message of the first judge request."""
    judge = next(r for r in endpoint.requests if r.json["messages"][0]["role"] == "system")
    return judge.json["messages"][1]["content"]


def _sandboxed_scenario(root: Path, task: str, inputs: dict[str, str] | None = None) -> Path:
    """Skill ``s`` with one sandboxed scenario (criterion ``x``) whose task.md is ``task``."""
    skill = write_skill(root, "s", {})
    scenario = write_scenario(skill, "scenario-0", {"x": 1}, sandbox=True, inputs=inputs)
    (scenario / "task.md").write_text(task)
    return scenario


def _managed(client: docker.DockerClient) -> list:
    """Sandbox containers of this test process (in-process pytester runs included)."""
    labels = [f"{MANAGED}=true", f"{OWNER_PID}={os.getpid()}"]
    return client.containers.list(all=True, filters={"label": labels})


def test_sandboxed_scenario_is_judged_on_output_and_changes(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
    docker_client: docker.DockerClient,
) -> None:
    _sandboxed_scenario(
        pytester.path,
        "Change a.txt.\nSTANDIN: write a.txt changed by the agent\n",
        inputs={"a.txt": "a\n"},
    )

    result = pytester.runpytest("skills", *_sandbox_args(endpoint.base_url, standin_image))

    assert result.ret == pytest.ExitCode.OK
    text = _judge_text(endpoint)
    assert re.match(
        r"## Agent Response\n\n<<<AGENT OUTPUT [0-9a-f]{16}>>>\n"
        r"## Agent Output\n\n> stand-in kiro-cli model=claude-sonnet-4\.6",
        text,
    )
    assert "### Modified Files\n\n**a.txt**\n```\nchanged by the agent\n" in text
    assert script.agent_calls == 0  # the agent ran in the container, not over HTTP
    assert _managed(docker_client) == []


def test_example_skill_runs_completely_with_sandboxes(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
) -> None:
    shutil.copytree(EXAMPLE_SKILL, pytester.path / "skills" / "commit-message",
                    ignore=shutil.ignore_patterns("results"))  # fmt: skip

    result = pytester.runpytest(
        "skills/commit-message", *_sandbox_args(endpoint.base_url, standin_image)
    )

    result.assert_outcomes(passed=4)
    assert result.ret == pytest.ExitCode.OK
    [report] = reports_under(pytester.path)
    scenarios = json.loads(report.read_text())["scenarios"]
    assert [s["pass"] for s in scenarios] == [True] * 4


def test_the_corpus_sandboxed_scenarios_all_run_in_containers(
    pytester: pytest.Pytester,
    corpus_copy: Path,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
) -> None:
    result = pytester.runpytest(
        "skills", *_sandbox_args(endpoint.base_url, standin_image), "-n", "2"
    )

    # 51 scenarios run (8 direct, 43 sandboxed); only the one without task.md errors.
    result.assert_outcomes(passed=51, errors=1)
    result.stdout.fnmatch_lines(["*github-create-pr/evals/scenario-0/task.md: file not found*"])


def test_timeout_agent_failure_and_missing_image_are_errors_with_reasons(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-direct": {"d": 1}})
    slow = write_scenario(skill, "scenario-slow", {"x": 1}, sandbox=True)
    slow.joinpath("task.md").write_text(
        "STANDIN: write partial.txt half done\nSTANDIN: sleep 600\n"
    )
    broken = write_scenario(skill, "scenario-broken", {"x": 1}, sandbox=True)
    broken.joinpath("task.md").write_text("STANDIN: exit 7\n")

    result = pytester.runpytest(
        "skills", *_sandbox_args(endpoint.base_url, standin_image, "--eval-sandbox-timeout", "3")
    )

    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines_random(
        [
            "scenario error: sandbox: kiro-cli timed out after 3 s *",
            "scenario error: sandbox: kiro-cli: exit status 7*",
        ]
    )
    [report] = reports_under(pytester.path)
    slow_entry = next(
        s for s in json.loads(report.read_text())["scenarios"] if s["name"] == "scenario-slow"
    )
    assert "sleeping 600" in slow_entry["agent_output"]
    assert "**partial.txt**\n```\nhalf done\n" in slow_entry["agent_output"]

    missing = pytester.runpytest("skills", *_sandbox_args(endpoint.base_url, "openkata-absent:9"))
    missing.assert_outcomes(passed=1, errors=2)
    missing.stdout.fnmatch_lines(["scenario error: sandbox: image 'openkata-absent:9' not found*"])


def test_without_an_engine_only_sandboxed_scenarios_error(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{pytester.path}/absent.sock")
    skill = write_skill(pytester.path, "s", {"scenario-direct": {"d": 1}})
    write_scenario(skill, "scenario-boxed", {"x": 1}, sandbox=True)

    result = pytester.runpytest("skills", *eval_args(endpoint.base_url))

    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["scenario error: sandbox: no Docker engine answers at unix://*absent.sock*"]
    )


def test_secrets_are_redacted_before_the_judge_and_in_reports(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token = "ghp_sandboxTOKEN1234567890"
    monkeypatch.setenv("GITHUB_TOKEN", token)
    _sandboxed_scenario(
        pytester.path, f"STANDIN: write leak.txt {token}\nSTANDIN: shell echo {token}\n"
    )
    script.verdicts["x"] = (False, f"the agent printed {token}")

    result = pytester.runpytest(
        "skills", *_sandbox_args(endpoint.base_url, standin_image, "--junitxml=j.xml")
    )

    judged = _judge_text(endpoint)
    assert token not in judged
    assert "***" in judged
    written = [result.stdout.str(), (pytester.path / "j.xml").read_text()]
    written += [p.read_text() for p in reports_under(pytester.path)]
    assert all(token not in text for text in written)


def test_sigterm_removes_the_running_container(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
    docker_client: docker.DockerClient,
) -> None:
    _sandboxed_scenario(pytester.path, "STANDIN: sleep 600\n")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "skills",
            *_sandbox_args(endpoint.base_url, standin_image),
        ],
        cwd=pytester.path,
        env={**os.environ, "DOCKER_HOST": use_engine},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    owned = {"label": f"{OWNER_PID}={process.pid}"}
    try:
        deadline = time.monotonic() + 60
        while not docker_client.containers.list(all=True, filters=owned):
            assert process.poll() is None, process.stdout.read().decode() if process.stdout else ""
            assert time.monotonic() < deadline, "no sandbox container appeared"
            time.sleep(0.1)

        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

    assert docker_client.containers.list(all=True, filters=owned) == []
    assert process.returncode != 0


@pytest.mark.e2e
def test_example_skill_sandboxes_judged_by_the_local_model(
    pytester: pytest.Pytester, local_model: LocalModelServer, use_engine: str, standin_image: str
) -> None:
    shutil.copytree(EXAMPLE_SKILL, pytester.path / "skills" / "commit-message",
                    ignore=shutil.ignore_patterns("results"))  # fmt: skip

    result, written = run_until_judged(
        pytester,
        "skills/commit-message", "-k", "sandbox",
        "--eval-backend", "http", "--eval-base-url", local_model.base_url,
        "--eval-model", local_model.model, "--eval-sandbox-image", standin_image,
        "--eval-sandbox-mounts", "none",
    )  # fmt: skip

    report = ResultsReport.model_validate_json(written.read_text())
    assert [s.name for s in report.scenarios or []] == [
        "scenario-amend-bad-message",
        "scenario-split-unrelated",
    ]
    for entry in report.scenarios or []:
        assert entry.error is None, entry.error
        assert entry.max_score == 100
        assert len(entry.criteria or []) == len(
            json.loads((EXAMPLE_SKILL / "evals" / entry.name / "criteria.json").read_text())[
                "checklist"
            ]
        )
    result.stdout.fnmatch_lines(["*partial run: 2 of 4 scenarios*"])


def test_an_engine_that_stops_mid_run_errors_the_remaining_sandboxes(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-2-direct": {"d": 1}})
    for name in ("scenario-0", "scenario-1"):
        write_scenario(skill, name, {"x": 1}, sandbox=True)
    pytester.makeconftest(
        "import os, signal\n"
        "def pytest_runtest_teardown(item):\n"
        "    if item.name == 'scenario-0':\n"
        "        os.kill(int(os.environ['DOOMED_DOCKERD_PID']), signal.SIGKILL)\n"
    )
    with private_dockerd() as doomed:
        image = build_standin_image(docker.DockerClient(base_url=doomed.host))
        monkeypatch.setenv("DOCKER_HOST", doomed.host)
        monkeypatch.setenv("DOOMED_DOCKERD_PID", str(doomed.pid))

        # One scenario at a time: scenario-1 must start after scenario-0's teardown.
        result = pytester.runpytest(
            "skills", *_sandbox_args(endpoint.base_url, image), "--eval-concurrency", "1"
        )

    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of s::scenario-1*",
            "scenario error: sandbox: docker create: the Docker engine stopped answering*",
        ]
    )


@pytest.mark.parametrize(
    ("configured", "in_scenario", "isolated"),
    [("host", "none", True), ("none", "", True), ("none", "host", False)],
)
def test_the_scenario_network_wins_over_the_configured_one(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
    configured: str,
    in_scenario: str,
    isolated: bool,
) -> None:  # check 45
    scenario = _sandboxed_scenario(pytester.path, "STANDIN: shell cat /proc/net/dev\n")
    options = {"sandbox": True, "network": in_scenario} if in_scenario else {"sandbox": True}
    scenario.joinpath("scenario.json").write_text(json.dumps(options))

    pytester.runpytest(
        "skills",
        *_sandbox_args(endpoint.base_url, standin_image, "--eval-sandbox-network", configured),
    )

    text = _judge_text(endpoint)
    interfaces = set(re.findall(r"^\s*([\w.-]+):\s+\d+", text, flags=re.MULTILINE))
    assert "lo" in interfaces
    assert (interfaces == {"lo"}) is isolated  # the host network has more than loopback


def test_a_cached_sandboxed_scenario_replays_without_an_engine(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scenario = _sandboxed_scenario(
        pytester.path, "STANDIN: write a.txt changed\n", inputs={"a.txt": "a\n"}
    )
    first = pytester.runpytest("skills", *_sandbox_args(endpoint.base_url, standin_image))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{pytester.path}/no-engine.sock")

    replayed = pytester.runpytest("skills", *_sandbox_args(endpoint.base_url, standin_image))
    (scenario / "inputs" / "a.txt").write_text("b\n")
    changed = pytester.runpytest("skills", *_sandbox_args(endpoint.base_url, standin_image))

    first.assert_outcomes(passed=1)
    replayed.assert_outcomes(passed=1)
    replayed.stdout.fnmatch_lines(["    From the cache: 1 agent answer, 1 judge verdict"])
    # Changed inputs make a new key: the run needs the engine again, and there is none.
    changed.assert_outcomes(errors=1)
    changed.stdout.fnmatch_lines(["scenario error: sandbox: no Docker engine answers at *"])
    assert script.judge_calls == 1
