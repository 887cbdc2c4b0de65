"""Providers from another distribution: an agent, a grader, a reporter and a sandbox
provider, each a class plus one entry point, installed from a temporary folder and used by
name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.distributions import install_distribution
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, reports_under, write_skill

ENTRY_POINTS = {
    "pytest_openkata.agents": {"echo": "openkata_echo:EchoAgent"},
    "pytest_openkata.graders": {"words": "openkata_echo:WordGrader"},
    "pytest_openkata.reporters": {"counts": "openkata_echo:CountReporter"},
    "pytest_openkata.sandboxes": {"local": "openkata_echo:LocalProvider"},
}

MODULE = '''\
"""An agent that answers with the size of its prompt, a grader that looks for its words,
a reporter that counts scenarios, and a sandbox provider of local processes in a temporary
folder (it isolates nothing: it shows what a provider implements)."""

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from contextlib import nullcontext
from pathlib import Path

from pytest_openkata import AgentInvocation, CriterionResult, ExecResult, Grading


class EchoAgent:
    name = "echo"
    install_hint = ""
    output_in_errors = True
    credential_mounts = ()
    endpoint = "echo"

    def __init__(self, settings):
        self.settings = settings

    def invocation(self, *, model, workspace_agent, sandboxed=False):
        script = 'printf "echo agent answers as %s after reading " "$ECHO_MODEL"; wc -c'
        if sandboxed:
            script += "; echo written > RESULT.md"
        return AgentInvocation(["sh", "-c", script], {"ECHO_MODEL": model})

    def clean(self, output):
        return output.strip()

    def workspace_files(self):
        return ()

    def host_folder(self, skill_dir):
        return nullcontext(None)


class WordGrader:
    name = "words"

    def grade(self, task):
        passed = "echo agent answers" in task.agent.text
        return Grading([CriterionResult.judged("says-echo", 5, passed, "looked for the words")])


class CountReporter:
    name = "counts"

    def report(self, run):
        if os.environ.get("COUNTS_BREAK"):
            raise RuntimeError("counts broke")
        lines = [f"{s.name}: {len(s.results)} scenarios, {s.overall:.0f}%" for s in run.summaries]
        (run.rootdir / "openkata-counts.txt").write_text("\\n".join(lines) + "\\n")


class LocalEnvironment:
    def __init__(self, root, spec):
        self.root = root
        self.spec = spec

    def exec(self, argv, *, env, workdir, timeout):
        done = subprocess.run(
            list(argv),
            cwd=self.root / workdir.lstrip("/"),
            env={**os.environ, **self.spec.env, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=timeout,
            check=False,
        )
        return ExecResult(done.stdout.decode("utf-8", "replace"), done.returncode, False)

    def put_archive(self, path, data):
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            archive.extractall(self.root / path.lstrip("/"), filter="data")

    def get_archive(self, path):
        folder = self.root / path.lstrip("/")
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            archive.add(folder, arcname=folder.name)
        return [buffer.getvalue()]

    def remove(self):
        shutil.rmtree(self.root, ignore_errors=True)


class LocalProvider:
    def __init__(self, settings):
        self.made = []

    def create(self, spec):
        environment = LocalEnvironment(Path(tempfile.mkdtemp(prefix="openkata-local-")), spec)
        self.made.append(environment)
        return environment

    def close(self):
        for environment in self.made:
            environment.remove()
'''


@pytest.fixture(scope="module")
def echo_distribution(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The distribution installed into a folder of its own (put on PYTHONPATH by tests)."""
    return install_distribution(tmp_path_factory, "openkata-echo", MODULE, ENTRY_POINTS)


@pytest.fixture
def with_echo(echo_distribution: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(echo_distribution))


def test_the_options_list_the_installed_agent(pytester: pytest.Pytester, with_echo: None) -> None:
    result = pytester.runpytest_subprocess("--help")

    acp = "acp|acp:claude|acp:codex|acp:gemini|acp:opencode|acp:qwen"
    result.stdout.fnmatch_lines(
        [f"*--eval-backend={acp}|anthropic|claude|codex|command|echo|http|kiro*"]
    )
    assert "anthropic, claude, codex, command, echo, http or kiro" in " ".join(
        result.stdout.str().split()
    )


def test_a_scenario_runs_with_the_installed_agent_grader_and_reporter_by_name(
    pytester: pytest.Pytester, with_echo: None, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"judged": 10}})

    result = pytester.runpytest_subprocess(
        "skills",
        "-v",
        "--eval-backend", "echo",
        "--eval-model", "m-1",
        "--eval-judge-backend", "http",
        "--eval-base-url", endpoint.base_url,
    )  # fmt: skip

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["*SUBPASS*[[]says-echo (5/5)[]]*"])
    (report,) = reports_under(pytester.path)
    (scenario,) = json.loads(report.read_text())["scenarios"]
    assert [c["name"] for c in scenario["criteria"]] == ["judged", "says-echo"]
    assert scenario["percentage"] == 100
    assert script.agent_calls == 0  # the agent was the CLI, only the judge called the endpoint
    judged = script_judge_message(endpoint)
    assert "echo agent answers as m-1 after reading" in judged
    assert (pytester.path / "openkata-counts.txt").read_text() == "s: 1 scenarios, 100%\n"


def test_a_reporter_that_raises_fails_the_run_but_not_the_other_reports_nor_the_summary(
    pytester: pytest.Pytester,
    with_echo: None,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"judged": 10}})
    monkeypatch.setenv("COUNTS_BREAK", "1")

    result = pytester.runpytest_subprocess(
        "skills",
        "--eval-backend", "echo",
        "--eval-judge-backend", "http",
        "--eval-base-url", endpoint.base_url,
    )  # fmt: skip

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "  Overall: 100% PASS (threshold: 95%)",
            "Not written: the counts reporter failed: RuntimeError: counts broke",
        ]
    )
    assert result.outlines[-1] == "s 100% >= 95%; 1 report not written: exit 1"
    assert "RuntimeError: counts broke" in result.stderr.str()  # its traceback
    assert reports_under(pytester.path)  # the results JSON
    assert list((pytester.path / ".openkata" / "runs").glob("*.jsonl"))  # and the run log


def test_a_sandboxed_scenario_runs_on_the_installed_sandbox_provider(
    pytester: pytest.Pytester, with_echo: None, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"judged": 10}}, sandbox=True)

    result = pytester.runpytest_subprocess(
        "skills",
        "--eval-sandbox-provider", "local",
        "--eval-sandbox-agent", "echo",
        "--eval-backend", "http",
        "--eval-base-url", endpoint.base_url,
    )  # fmt: skip

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    judged = script_judge_message(endpoint)
    # The core's flow on the provider: the prompt on the agent's standard input, and what
    # it wrote in the workspace as the judge's "Workspace Changes".
    assert "echo agent answers as claude-sonnet-4.6 after reading" in judged
    assert "### Added Files\n\n**RESULT.md**\n```\nwritten\n\n```" in judged
    assert script.agent_calls == 0


def test_an_unknown_agent_names_the_installed_ones(
    pytester: pytest.Pytester, with_echo: None
) -> None:
    result = pytester.runpytest_subprocess("--eval-sandbox-agent", "ech0", "--collect-only")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*unknown agent 'ech0'; choose one of: acp, acp:claude, acp:codex, acp:gemini, "
            "acp:opencode, acp:qwen, claude, codex, command, echo, kiro"
        ]
    )


def script_judge_message(endpoint: ScriptedEndpoint) -> str:
    (request,) = endpoint.requests
    return str(request.json["messages"][-1]["content"])
