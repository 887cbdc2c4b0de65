"""The real pipeline against the real local model: HTTP, structured output, both APIs, failures.

A 135M model is no meaningful judge: these tests assert the plumbing (a complete, valid report,
a verdict for every criterion, clear errors), never the quality of answers.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from pytest_openkata.core.results_json import parse_report
from pytest_openkata.core.scenario import load_scenario
from pytest_openkata.local.model import LocalModelServer
from pytest_openkata.providers.backends.anthropic import AnthropicMessagesBackend
from pytest_openkata.providers.backends.http import OpenAIChatBackend, make_client
from pytest_openkata.providers.graders.judge import run_judge
from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.evals import write_skill
from tests.support.judged import run_judged

pytestmark = pytest.mark.e2e

EXAMPLE_SKILL = Path(__file__).resolve().parents[2] / "skills" / "commit-message"
DIRECT_SCENARIOS = ["scenario-breaking-api", "scenario-single-fix"]


@pytest.fixture
def example_skill(pytester: pytest.Pytester) -> Path:
    target = pytester.path / "skills" / "commit-message"
    shutil.copytree(EXAMPLE_SKILL, target, ignore=shutil.ignore_patterns("results"))
    return target


def _local_args(server: LocalModelServer, *extra: str) -> list[str]:
    return [
        "--eval-backend", "http", "--eval-base-url", server.base_url,
        "--eval-model", server.model, *extra,
    ]  # fmt: skip


def test_example_skill_direct_scenarios_give_a_complete_valid_report(
    pytester: pytest.Pytester, example_skill: Path, local_model: LocalModelServer
) -> None:
    # llama-server answers one request at a time: with two scenarios running at once, a call
    # may wait for the other's answer first, and a loaded machine makes both slow.
    result, written = run_judged(
        pytester,
        *("skills/commit-message", "-k", "direct"),
        *_local_args(local_model, "--eval-direct-timeout", "600"),
    )

    result.stdout.fnmatch_lines([f"  Report: {written.parent.name}/{written.name}"])
    report = parse_report(written.read_text())
    assert report.config.agent_model == "smollm2"
    assert [s.name for s in report.scenarios or []] == DIRECT_SCENARIOS
    for entry in report.scenarios or []:
        assert entry.error is None, entry.error
        loaded = load_scenario(example_skill / "evals" / entry.name)
        expected = [c.name for c in (*loaded.criteria, *loaded.checks)]
        assert [c.name for c in entry.criteria or []] == expected
        # The judged checklist (100 points) and the exact checks.
        assert entry.max_score == 100 + sum(check.max_score for check in loaded.checks)
        assert entry.score == sum(c.score for c in entry.criteria or [])
    assert report.overall_percentage == sum(s.percentage for s in report.scenarios or []) / 2


def test_judge_with_schema_returns_a_verdict_for_every_criterion(
    local_model: LocalModelServer,
) -> None:
    scenario = load_scenario(EXAMPLE_SKILL / "evals" / "scenario-single-fix")
    answer = (
        "fix(pricing): clamp discount rate to 1.0\n\n"
        "The rate was capped at 0.99, so full discounts were never applied."
    )
    with make_client(120) as client:
        judge = OpenAIChatBackend(
            client, base_url=local_model.base_url, api_key="", model=local_model.model
        )
        verdicts = run_judge(judge, answer, scenario.context, scenario.criteria)

    assert judge.structured_output is True  # llama-server accepted the json_schema format
    assert sorted(v.name for v in verdicts) == sorted(c.name for c in scenario.criteria)


def test_anthropic_messages_backend_talks_to_llama_server(local_model: LocalModelServer) -> None:
    with make_client(120) as client:
        backend = AnthropicMessagesBackend(
            client, base_url=local_model.root_url, api_key="unused", model=local_model.model
        )
        answer = backend.complete("Answer in one short sentence.", "What is a commit message?")

    assert answer.strip()


def test_agent_and_judge_can_use_different_backends(
    pytester: pytest.Pytester, example_skill: Path, local_model: LocalModelServer
) -> None:
    result, written = run_judged(
        pytester,
        "skills/commit-message/evals/scenario-single-fix",
        *_local_args(local_model),
        "--eval-backend", "anthropic", "--eval-anthropic-base-url", local_model.root_url,
        "--eval-anthropic-max-tokens", "256",
        "--eval-judge-backend", "http", "--eval-judge-model", "smollm2-judge",
    )  # fmt: skip

    result.stdout.fnmatch_lines(["openkata: backend=anthropic *judge_backend=http"])
    report = json.loads(written.read_text())
    assert report["config"]["backend"] == "anthropic"
    assert report["config"]["judge_model"] == "smollm2-judge"
    assert report["config"]["judge_backend"] == "http"  # after the reference's keys
    assert "error" not in report["scenarios"][0]


def test_the_server_says_its_slots_and_gives_each_its_own_context(
    local_model_files: tuple[Path, Path],
) -> None:
    """llama-server started with two slots says so where ``max_in_flight = auto`` asks, and
    gives each slot the whole context a request may need."""
    with (
        LocalModelServer(*local_model_files, slots=2) as server,
        make_client(120.0) as client,
    ):
        backend = OpenAIChatBackend(client, base_url=server.base_url, api_key="", model="m")
        assert backend.capacity() == 2
        with client.stream("GET", f"{server.root_url}/slots") as response:
            slots = json.loads(response.read())
    assert [slot["n_ctx"] for slot in slots] == [server.context, server.context]


def test_a_server_stopped_mid_run_errors_the_rest_clearly(
    pytester: pytest.Pytester, local_model_files: tuple[Path, Path]
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"a": 1}, "scenario-1": {"b": 1}})
    pytester.makeconftest(
        "import os, signal\n"
        "def pytest_runtest_teardown(item):\n"
        "    if item.name == 'scenario-0':\n"
        "        os.kill(int(os.environ['LOCAL_MODEL_PID']), signal.SIGKILL)\n"
    )
    with LocalModelServer(*local_model_files) as server:
        os.environ["LOCAL_MODEL_PID"] = str(server.pid)
        try:
            # One scenario at a time: scenario-1 must start after scenario-0's teardown.
            result = pytester.runpytest(
                "skills",
                *_local_args(server, "--eval-direct-timeout", "120", "--eval-concurrency", "1"),
            )
        finally:
            del os.environ["LOCAL_MODEL_PID"]

    result.stdout.fnmatch_lines(["*ERROR at setup of s::scenario-1*"])
    # Refused, or reset or closed when a kept-alive connection to the killed server is reused
    # before its closing is seen (the kinds the client names for a server that is gone).
    result.stdout.re_match_lines(
        [
            r"scenario error: agent: POST http://127\.0\.0\.1:\d+/v1/chat/completions: "
            r"(connection refused|connection closed or protocol error)"
        ]
    )
    assert "ERROR at setup of s::scenario-0" not in result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_server_that_never_answers_times_out_with_clear_errors(pytester: pytest.Pytester) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"a": 1}, "scenario-1": {"b": 1}})
    with ScriptedEndpoint() as silent:
        silent.respond_with(lambda request: Reply(json={"choices": []}, delay=600))
        result = pytester.runpytest(
            "skills", "--eval-backend", "http", "--eval-base-url", silent.base_url,
            "--eval-direct-timeout", "2",
        )  # fmt: skip

    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["scenario error: agent: POST *: timed out after 2s"] * 2)
