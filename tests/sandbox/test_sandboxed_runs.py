"""Sandboxed runs: the core's flow (:func:`run_in_sandbox`) on the Docker provider and on a second,
local provider written here, then sandboxed scenarios run by pytest as users run them, in real
containers."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import docker
import pytest

from pytest_openkata.contracts.errors import RetryableError, SandboxError
from pytest_openkata.contracts.results import AgentResult
from pytest_openkata.contracts.sandboxes import AgentCommand, ExecResult, SandboxSpec
from pytest_openkata.core.errors import ScenarioFailure
from pytest_openkata.core.results_json import parse_report
from pytest_openkata.core.sandboxed import SandboxSetup, run_in_sandbox
from pytest_openkata.core.scenario import Scenario, load_scenario
from pytest_openkata.infra.retry import NO_RETRY, RetriesExhaustedError, RetryPolicy
from pytest_openkata.local.model import LocalModelServer
from pytest_openkata.providers.sandboxes.docker import (
    MANAGED,
    OWNER_PID,
    DockerLimits,
    DockerProvider,
    connect,
)
from tests.support.docker_engine import EngineRelay, build_standin_image, private_dockerd
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import (
    EvalScript,
    eval_args,
    reports_under,
    sandbox_args,
    write_scenario,
    write_skill,
)
from tests.support.judged import run_judged
from tests.support.local_sandbox import LOCAL_AGENT, LocalEnvironment, LocalProvider

EXAMPLE_SKILL = Path(__file__).resolve().parents[2] / "skills" / "commit-message"


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


# --- the flow on the Docker provider --------------------------------------------------------

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
    files=((".kiro/agents/eval-agent.json", b'{"name":"eval-agent"}'),),
)


def _docker_setup(
    client: docker.DockerClient,
    image: str,
    *,
    timeout: float = 60.0,
    agent: AgentCommand = KIRO,
    mounts: tuple[tuple[str, str], ...] = (),
) -> SandboxSetup:
    provider = DockerProvider(client, DockerLimits(image, cpus=1.0, memory="256m", pids=64))
    return SandboxSetup(provider, agent, "none", timeout, mounts=mounts)


def _scenario(root: Path, task: str, inputs: dict[str, str] | None = None) -> Scenario:
    """A skill with a reference (and acknowledgments) and one sandboxed scenario."""
    skill = write_skill(root, "s", {})
    (skill / "references").mkdir()
    (skill / "references" / "guide.md").write_text("a guide\n")
    (skill / "references" / "ACKNOWLEDGMENTS.md").write_text("thanks\n")
    folder = write_scenario(skill, "scenario-0", {"x": 1}, sandbox=True, inputs=inputs)
    (folder / "task.md").write_text(task)
    return load_scenario(folder)


def _run(scenario: Scenario, setup: SandboxSetup, retry: RetryPolicy = NO_RETRY) -> AgentResult:
    return run_in_sandbox(scenario, scenario.path.joinpath("task.md").read_text(), setup, retry)


def test_workspace_layout_prompt_on_stdin_and_diff(
    use_engine: str, docker_client: docker.DockerClient, standin_image: str, tmp_path: Path
) -> None:
    task = (
        "Edit the project.\n"
        "STANDIN: shell ls -a /workspace /workspace/skill /workspace/skill/references\n"
        "STANDIN: shell cat /workspace/.kiro/agents/eval-agent.json\n"
        "STANDIN: shell ls /openkata\n"
        "STANDIN: write NOTES.md written by the agent\n"
        "STANDIN: write src/app.py print('changed')\n"
        "STANDIN: delete old.txt\n"
    )
    padding = "x" * 300_000  # far above one argument's 128 KiB limit
    scenario = _scenario(
        tmp_path, task + padding + "\n", {"src/app.py": "print('hi')\n", "old.txt": "old\n"}
    )

    result = _run(scenario, _docker_setup(docker_client, standin_image))

    assert "model=model-x agent=eval-agent" in result.output  # the configured model reaches it
    assert f"prompt bytes: {len(task) + len(padding) + 1}" in result.output
    assert "task.md" in result.output
    assert "guide.md" in result.output
    assert "ACKNOWLEDGMENTS.md" not in result.output  # excluded, as from the prompt
    assert '{"name":"eval-agent"}' in result.output
    assert "prompt.md" in result.output  # in /openkata, outside the workspace
    diff = result.changes
    assert diff is not None
    assert [path for path, _ in diff.added] == ["NOTES.md"]  # no prompt.md, no .kiro/
    assert [path for path, _ in diff.modified] == ["src/app.py"]
    assert diff.deleted == ["old.txt"]
    assert diff.unchanged == ["task.md"]  # skill/ and the agent's files are left out
    assert result.text.startswith("## Agent Output\n\n> stand-in kiro-cli")
    assert result.text.startswith(f"## Agent Output\n\n{result.output}\n\n## Workspace Changes")
    assert "### Added Files\n\n**NOTES.md**\n```\nwritten by the agent\n" in result.text
    assert _managed(docker_client) == []  # removed after the run


def test_host_folders_of_the_settings_and_of_the_agent_are_mounted_read_only_when_present(
    use_engine: str,
    docker_client: docker.DockerClient,
    standin_image: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    credentials = tmp_path / "aws"
    credentials.mkdir()
    (credentials / "config").write_text("[default]\n")
    home = tmp_path / "home"
    (home / ".tool").mkdir(parents=True)
    (home / ".tool" / "login").write_text("logged in\n")
    monkeypatch.setenv("HOME", str(home))
    agent = AgentCommand(
        KIRO.name,
        KIRO.argv,
        files=KIRO.files,
        mounts=(("~/.tool", "/root/.tool"), ("~/.kiro", "/root/.kiro")),  # ~/.kiro is absent
    )
    task = (
        "STANDIN: shell cat /root/.aws/config /root/.tool/login\n"
        "STANDIN: shell echo stolen > /root/.aws/config || echo write refused\n"
        "STANDIN: shell echo stolen > /root/.tool/login || echo write refused again\n"
        "STANDIN: shell ls /root/.kiro || echo no kiro folder\n"
    )
    setup = _docker_setup(
        docker_client, standin_image, agent=agent, mounts=((str(credentials), "/root/.aws"),)
    )

    result = _run(_scenario(tmp_path, task), setup)

    assert "[default]" in result.output
    assert "logged in" in result.output
    assert "write refused\n" in result.output
    assert "write refused again" in result.output
    assert "no kiro folder" in result.output
    assert (credentials / "config").read_text() == "[default]\n"
    assert (home / ".tool" / "login").read_text() == "logged in\n"


def test_symlinks_out_of_the_skill_are_not_copied_in(
    use_engine: str, docker_client: docker.DockerClient, standin_image: str, tmp_path: Path
) -> None:
    secret = tmp_path / "host-secret.txt"
    secret.write_text("host secret value\n")
    scenario = _scenario(tmp_path, "STANDIN: shell ls -a /workspace; cat /workspace/leak.txt\n")
    (scenario.path / "inputs").mkdir(exist_ok=True)
    (scenario.path / "inputs" / "leak.txt").symlink_to(secret)
    (scenario.skill_dir / "references" / "outside.md").symlink_to(secret)

    result = _run(scenario, _docker_setup(docker_client, standin_image))

    assert "host secret value" not in result.output
    assert "cat: can't open '/workspace/leak.txt': No such file or directory" in result.output


def test_host_timeout_keeps_partial_output_and_changes(
    use_engine: str, docker_client: docker.DockerClient, standin_image: str, tmp_path: Path
) -> None:
    task = "STANDIN: write early.txt before the hang\nSTANDIN: sleep 600\n"

    with pytest.raises(ScenarioFailure) as failure:
        _run(_scenario(tmp_path, task), _docker_setup(docker_client, standin_image, timeout=3.0))

    assert str(failure.value) == (
        "sandbox: kiro-cli timed out after 3 s (its partial output and workspace changes are "
        "in the report's agent_output)"
    )
    partial = failure.value.agent_output or ""
    assert "wrote early.txt" in partial
    assert "sleeping 600" in partial
    assert "### Added Files\n\n**early.txt**\n```\nbefore the hang\n" in partial
    assert _managed(docker_client) == []


def test_an_agent_that_prints_past_the_bound_errors_the_trial(
    use_engine: str, docker_client: docker.DockerClient, standin_image: str, tmp_path: Path
) -> None:
    task = "STANDIN: shell head -c 1000000 /dev/zero | tr '\\0' a\n"
    limits = DockerLimits(standin_image, cpus=1.0, memory="256m", pids=64, output_max_bytes=65536)
    setup = SandboxSetup(DockerProvider(docker_client, limits), KIRO, "none", 60.0)

    with pytest.raises(ScenarioFailure) as failure:
        _run(_scenario(tmp_path, task), setup)

    assert str(failure.value) == (
        "sandbox: kiro-cli printed more than 64 KiB, the bound of answer_max_bytes"
    )
    assert failure.value.agent_output is None
    assert _managed(docker_client) == []


def test_agent_exit_status_fails_the_trial_with_its_last_lines(
    use_engine: str, docker_client: docker.DockerClient, standin_image: str, tmp_path: Path
) -> None:
    task = "".join(f"STANDIN: shell echo line {n}\n" for n in range(8)) + "STANDIN: exit 3\n"

    with pytest.raises(ScenarioFailure) as failure:
        _run(_scenario(tmp_path, task), _docker_setup(docker_client, standin_image))

    assert str(failure.value) == (
        "sandbox: kiro-cli: exit status 3\nline 4\nline 5\nline 6\nline 7\ndone"
    )
    assert failure.value.agent_output is None
    assert _managed(docker_client) == []


def test_a_missing_image_is_the_providers_error_unwrapped(
    use_engine: str, docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    with pytest.raises(SandboxError, match=r"^image 'openkata-absent:1' not found.*docker build"):
        _run(_scenario(tmp_path, "task\n"), _docker_setup(docker_client, "openkata-absent:1"))
    assert _managed(docker_client) == []


def test_an_engine_that_stops_during_the_run_names_the_step(
    use_engine: str,
    docker_client: docker.DockerClient,
    standin_image: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with EngineRelay(use_engine) as relay:
        monkeypatch.setenv("DOCKER_HOST", relay.host)
        setup = _docker_setup(connect(timeout=30), standin_image)
        cut = threading.Timer(1.5, relay.cut)
        cut.start()
        try:
            with pytest.raises(
                SandboxError, match=r"^run kiro-cli: the Docker engine stopped answering \("
            ):
                _run(_scenario(tmp_path, "STANDIN: sleep 600\n"), setup)
        finally:
            cut.cancel()
            for container in _managed(docker_client):  # the next run's sweep would
                container.remove(force=True)


# --- the flow on a second provider: local processes in a temporary folder --------------------


def _local_setup(provider: LocalProvider | None = None, timeout: float = 60.0) -> SandboxSetup:
    return SandboxSetup(provider or LocalProvider(), LOCAL_AGENT, "host", timeout)


def test_the_flow_runs_on_a_second_provider_that_only_creates_execs_puts_gets_and_removes(
    tmp_path: Path,
) -> None:
    task = (
        "Edit the project.\nWRITE notes/NOTES.md written locally\nWRITE src/app.py changed\n"
        "DELETE old.txt\n"
    )
    scenario = _scenario(tmp_path, task, {"src/app.py": "print('hi')\n", "old.txt": "old\n"})
    provider = LocalProvider()

    result = _run(scenario, _local_setup(provider))

    assert result.output.startswith(
        f"local agent --model model-y var=from-the-agent\nprompt bytes: {len(task)}\n"
        "workspace: .local-agent old.txt skill src task.md\n"
    )
    diff = result.changes
    assert diff is not None
    assert [path for path, _ in diff.added] == ["notes/NOTES.md"]
    assert [path for path, _ in diff.modified] == ["src/app.py"]
    assert diff.deleted == ["old.txt"]
    assert diff.unchanged == ["task.md"]  # no skill/, no .local-agent/, no prompt
    assert result.text == (
        f"## Agent Output\n\n{result.output}\n\n## Workspace Changes\n\n"
        "### Added Files\n\n**notes/NOTES.md**\n```\nwritten locally\n\n```\n\n"
        "### Modified Files\n\n**src/app.py**\n```\nchanged\n\n```\n\n"
        "### Deleted Files\n\n- old.txt\n\n"
    )
    [environment] = provider.made
    assert environment.spec == SandboxSpec(
        name="scenario-0", network="host", env={"AGENT_VAR": "from-the-agent"}, mounts=()
    )
    assert not environment.root.exists()  # removed


def test_the_spec_gets_the_scenario_network_and_every_mount_expanded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", "/home/someone")
    scenario = _scenario(tmp_path, "task\n")
    scenario.path.joinpath("scenario.json").write_text('{"sandbox": true, "network": "none"}')
    agent = AgentCommand(**{**vars(LOCAL_AGENT), "mounts": (("~/.agent", "/root/.agent"),)})
    provider = LocalProvider()
    setup = SandboxSetup(provider, agent, "host", 60.0, mounts=(("~/.aws", "/root/.aws"),))

    _run(load_scenario(scenario.path), setup)

    assert provider.made[0].spec.network == "none"
    assert provider.made[0].spec.mounts == (
        ("/home/someone/.aws", "/root/.aws"),
        ("/home/someone/.agent", "/root/.agent"),
    )


def test_a_timed_out_agent_on_the_second_provider_keeps_its_partial_output(
    tmp_path: Path,
) -> None:
    provider = LocalProvider()
    scenario = _scenario(tmp_path, "WRITE early.txt before the hang\nSLEEP 600\n")

    started = time.monotonic()
    with pytest.raises(ScenarioFailure, match=r"^sandbox: local-agent timed out after 1\.5 s"):
        _run(scenario, _local_setup(provider, timeout=1.5))

    assert time.monotonic() - started < 30
    assert not provider.made[0].root.exists()


class FaultyEnvironment(LocalEnvironment):
    """Each method first takes the next of its faults: an error to raise, bytes to give as the
    archive, or None to work."""

    faults: dict[str, list[BaseException | bytes | None]]

    def _fault(self, method: str) -> bytes | None:
        queue = self.faults.get(method, [])
        fault = queue.pop(0) if queue else None
        if isinstance(fault, BaseException):
            raise fault
        return fault

    def put_archive(self, path: str, data: bytes) -> None:
        self._fault("put_archive")
        super().put_archive(path, data)

    def get_archive(self, path: str) -> Iterable[bytes]:
        garbage = self._fault("get_archive")
        return [garbage] if garbage is not None else super().get_archive(path)

    def exec(
        self, argv: Sequence[str], *, env: Mapping[str, str], workdir: str, timeout: float
    ) -> ExecResult:
        self._fault("exec")
        return super().exec(argv, env=env, workdir=workdir, timeout=timeout)


class FaultyProvider(LocalProvider):
    def __init__(self, **faults: list[BaseException | bytes | None]) -> None:
        super().__init__()
        self.faults = faults

    def _environment(self, root: Path, spec: SandboxSpec) -> LocalEnvironment:
        environment = FaultyEnvironment(root, spec)
        environment.faults = self.faults
        return environment


@pytest.mark.parametrize(
    ("faults", "message"),
    [
        ({"put_archive": [SandboxError("disk full")]}, "copy workspace: disk full"),
        ({"get_archive": [SandboxError("gone")]}, "snapshot before: gone"),
        ({"get_archive": [None, SandboxError("gone")]}, "snapshot after: gone"),
        ({"exec": [SandboxError("no such program")]}, "run local-agent: no such program"),
        (
            {"get_archive": [b"garbage" * 100]},
            "snapshot before: unreadable workspace archive: ",
        ),
    ],
)
def test_a_failed_step_of_the_provider_is_named_and_the_environment_removed(
    tmp_path: Path, faults: dict[str, list[BaseException | bytes | None]], message: str
) -> None:
    provider = FaultyProvider(**faults)

    with pytest.raises(SandboxError) as failure:
        _run(_scenario(tmp_path, "WRITE a.txt a\n"), _local_setup(provider))

    assert str(failure.value).startswith(message)
    assert type(failure.value) is SandboxError
    assert not provider.made[0].root.exists()


def test_a_retryable_error_of_a_step_retries_the_whole_run(tmp_path: Path) -> None:
    retry = RetryPolicy(attempts=3, base_delay=0.0, jitter=0.0)
    scenario = _scenario(tmp_path, "WRITE a.txt a\n")
    provider = FaultyProvider(put_archive=[RetryableError("engine busy")])

    result = _run(scenario, _local_setup(provider), retry)

    assert result.changes is not None
    assert [path for path, _ in result.changes.added] == ["a.txt"]
    assert len(provider.made) == 2
    assert not any(environment.root.exists() for environment in provider.made)

    busy = FaultyProvider(get_archive=[None, RetryableError("engine busy", retry_after=0)] * 3)
    with pytest.raises(RetriesExhaustedError) as exhausted:
        _run(scenario, _local_setup(busy), retry)
    assert isinstance(exhausted.value.last_error, RetryableError)
    assert str(exhausted.value.last_error) == "snapshot after: engine busy"
    assert exhausted.value.last_error.retry_after == 0
    assert len(busy.made) == 3

    with pytest.raises(RetryableError, match=r"^copy workspace: engine busy$"):
        _run(scenario, _local_setup(FaultyProvider(put_archive=[RetryableError("engine busy")])))


def test_an_interrupted_run_removes_its_environment(tmp_path: Path) -> None:
    provider = FaultyProvider(exec=[KeyboardInterrupt()])

    with pytest.raises(KeyboardInterrupt):
        _run(_scenario(tmp_path, "task\n"), _local_setup(provider))
    assert not provider.made[0].root.exists()


# --- sandboxed scenarios run by pytest -------------------------------------------------------


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

    result = pytester.runpytest("skills", *sandbox_args(endpoint.base_url, standin_image))

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


def _no_match(scenario: str, check: str) -> str:
    """The reason of an output_regex check of the example skill that did not match."""
    [pattern] = [
        c.pattern
        for c in load_scenario(EXAMPLE_SKILL / "evals" / scenario).checks
        if c.name == check
    ]
    assert pattern is not None
    return f"the agent's output does not match {pattern.pattern!r}"


def test_example_skill_runs_completely_with_sandboxes_and_its_checks_see_an_idle_agent(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
) -> None:
    shutil.copytree(EXAMPLE_SKILL, pytester.path / "skills" / "commit-message",
                    ignore=shutil.ignore_patterns("results"))  # fmt: skip

    result = pytester.runpytest(
        "skills/commit-message", *sandbox_args(endpoint.base_url, standin_image)
    )

    # Every scenario ran; the scripted judge passes every criterion, but the stand-in agent
    # (which acts only on STANDIN lines) changed nothing, and the exact checks say so.
    result.assert_outcomes(failed=4 + 9)  # the four scenarios and their nine failed checks
    [report] = reports_under(pytester.path)
    scenarios = json.loads(report.read_text())["scenarios"]
    assert [s.get("error") for s in scenarios] == [None] * 4
    judged = [c for s in scenarios for c in s["criteria"] if "kind" not in c]
    assert all(c["pass"] for c in judged)
    checks = {
        (s["name"], c["name"]): (c["pass"], c["reason"])
        for s in scenarios
        for c in s["criteria"]
        if c.get("kind") == "check"
    }
    assert checks == {
        ("scenario-amend-bad-message", "draft-still-a-file"): (
            True, "DRAFT_COMMIT_MSG is a file of 550 bytes"),
        ("scenario-amend-bad-message", "only-the-draft-changed"): (
            False, "nothing matching 'DRAFT_COMMIT_MSG' changed"),
        ("scenario-amend-bad-message", "no-issue-number"): (
            False, "DRAFT_COMMIT_MSG matches '#[0-9]+': '#4521'"),
        ("scenario-amend-bad-message", "header-at-most-72"): (
            False, "exit status 1: header of 116 characters"),
        ("scenario-breaking-api", "bang-before-colon"): (
            False, _no_match("scenario-breaking-api", "bang-before-colon")),
        ("scenario-breaking-api", "breaking-change-footer-line"): (
            False, _no_match("scenario-breaking-api", "breaking-change-footer-line")),
        ("scenario-single-fix", "fix-header-line"): (
            False, _no_match("scenario-single-fix", "fix-header-line")),
        ("scenario-split-unrelated", "commits-file-written"): (
            False, "COMMITS.md does not exist"),
        ("scenario-split-unrelated", "existing-files-untouched"): (
            False, "nothing matching 'COMMITS.md' changed"),
        ("scenario-split-unrelated", "two-fenced-messages"): (
            False, "exit status 1: no COMMITS.md"),
    }  # fmt: skip
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # below the threshold


def test_the_corpus_sandboxed_scenarios_all_run_in_containers(
    pytester: pytest.Pytester,
    corpus_copy: Path,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
) -> None:
    result = pytester.runpytest(
        "skills", *sandbox_args(endpoint.base_url, standin_image), "-n", "2"
    )

    # 51 scenarios run (8 direct, 43 sandboxed); only the one without task.md errors.
    result.assert_outcomes(passed=51, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of github-create-pr::scenario-0*",
            "*scenario error: evals/scenario-0/task.md: file not found*",
        ]
    )


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
        "skills",
        *sandbox_args(
            endpoint.base_url, standin_image, "--eval-sandbox-timeout", "3", "--eval-publish-errors"
        ),
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

    missing = pytester.runpytest("skills", *sandbox_args(endpoint.base_url, "openkata-absent:9"))
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
        "skills", *sandbox_args(endpoint.base_url, standin_image, "--junitxml=j.xml")
    )

    judged = _judge_text(endpoint)
    assert token not in judged
    assert "***" in judged
    written = [result.stdout.str(), (pytester.path / "j.xml").read_text()]
    written += [p.read_text() for p in reports_under(pytester.path)]
    # The run log holds the workspace diff, which shows leak.txt's text.
    [log] = (pytester.path / ".openkata" / "runs").glob("*.jsonl")
    written.append(log.read_text())
    assert "+++ b/leak.txt" in written[-1]
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
            *sandbox_args(endpoint.base_url, standin_image),
        ],
        cwd=pytester.path,
        env={**os.environ, "DOCKER_HOST": use_engine},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    owned = {"label": f"{OWNER_PID}={process.pid}"}
    # The engine lists containers with their labels in one answer: a container removed while
    # containers.list() looks at each in turn would raise NotFound there.
    try:
        deadline = time.monotonic() + 60
        while not docker_client.api.containers(all=True, filters=owned):
            assert process.poll() is None, process.stdout.read().decode() if process.stdout else ""
            assert time.monotonic() < deadline, "no sandbox container appeared"
            time.sleep(0.1)

        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

    assert docker_client.api.containers(all=True, filters=owned) == []
    assert process.returncode != 0


@pytest.mark.e2e
def test_example_skill_sandboxes_judged_by_the_local_model(
    pytester: pytest.Pytester, local_model: LocalModelServer, use_engine: str, standin_image: str
) -> None:
    shutil.copytree(EXAMPLE_SKILL, pytester.path / "skills" / "commit-message",
                    ignore=shutil.ignore_patterns("results"))  # fmt: skip

    result, written = run_judged(
        pytester,
        "skills/commit-message", "-k", "sandbox",
        "--eval-backend", "http", "--eval-base-url", local_model.base_url,
        "--eval-model", local_model.model, "--eval-sandbox-image", standin_image,
        "--eval-sandbox-mounts", "none",
    )  # fmt: skip

    report = parse_report(written.read_text())
    assert [s.name for s in report.scenarios or []] == [
        "scenario-amend-bad-message",
        "scenario-split-unrelated",
    ]
    for entry in report.scenarios or []:
        assert entry.error is None, entry.error
        loaded = load_scenario(EXAMPLE_SKILL / "evals" / entry.name)
        # The judged checklist (100 points) and the exact checks.
        assert entry.max_score == 100 + sum(check.max_score for check in loaded.checks)
        assert [c.name for c in entry.criteria or []] == [
            *(c.name for c in loaded.criteria),
            *(c.name for c in loaded.checks),
        ]
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
            "skills", *sandbox_args(endpoint.base_url, image), "--eval-concurrency", "1"
        )

    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of s::scenario-1*",
            "scenario error: sandbox: docker create: the Docker engine stopped answering*",
        ]
    )
    # A lost engine is a kind of failure of its own, which the summary counts.
    result.stdout.fnmatch_lines(["  Errors by kind: engine_lost 1 of 3 attempts (33%)"])
    # The killed engine's data folder, which dockerd had mounted on itself, is let go.
    mounted = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    assert str(doomed.data.resolve()) not in mounted


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
        *sandbox_args(endpoint.base_url, standin_image, "--eval-sandbox-network", configured),
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
    first = pytester.runpytest("skills", *sandbox_args(endpoint.base_url, standin_image))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{pytester.path}/no-engine.sock")

    replayed = pytester.runpytest("skills", *sandbox_args(endpoint.base_url, standin_image))
    (scenario / "inputs" / "a.txt").write_text("b\n")
    changed = pytester.runpytest("skills", *sandbox_args(endpoint.base_url, standin_image))

    first.assert_outcomes(passed=1)
    replayed.assert_outcomes(passed=1)
    replayed.stdout.fnmatch_lines(["    From the cache: 1 agent answer, 1 judge verdict"])
    # Changed inputs make a new key: the run needs the engine again, and there is none.
    changed.assert_outcomes(errors=1)
    changed.stdout.fnmatch_lines(["scenario error: sandbox: no Docker engine answers at *"])
    assert script.judge_calls == 1
