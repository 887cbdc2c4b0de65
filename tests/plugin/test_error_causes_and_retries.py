"""Direct scenarios against a real loopback endpoint: a model endpoint that fails is an error of
the kind ``model_endpoint``; ``retry.infrastructure`` runs such a trial again, keeping every
attempt, until it passes or the retries run out; an agent's empty answer is its own outcome,
graded and never run again. The terminal summary, the run log, the HTML and the Markdown
reports show how often the attempts errored, by kind."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_skill

# One attempt per HTTP call: only the trial is run again.
NO_CALL_RETRIES = ("--eval-retry-attempts", "1")


def _failing(count: int) -> list[Reply]:
    return [Reply(status=500, body="the model is down") for _ in range(count)]


def _trials(root: Path) -> list[dict[str, Any]]:
    (log,) = (root / ".openkata/runs").glob("*.jsonl")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    return [record for record in records if record["record"] == "trial"]


def test_a_model_endpoint_that_answers_500_is_a_model_endpoint_error(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    script.agent_replies = _failing(1)

    result = pytester.runpytest("skills", *eval_args(endpoint.base_url, *NO_CALL_RETRIES))

    result.assert_outcomes(errors=1)
    (trial,) = _trials(pytester.path)
    assert trial["error_kind"] == "infrastructure"
    assert trial["error_cause"] == "model_endpoint"
    assert "HTTP 500: the model is down" in trial["error"]
    assert (trial["attempts"], trial["environment"]) == ([], None)  # no retry asked; direct
    result.stdout.fnmatch_lines(["  Errors by kind: model_endpoint 1 of 1 attempt (100%)"])


def test_an_endpoint_failure_is_retried_and_the_trial_passes_with_every_attempt_kept(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    script.agent_replies = _failing(2)
    reports = ("--eval-html", "run.html", "--eval-markdown", "run.md")

    result = pytester.runpytest(
        "skills",
        *eval_args(endpoint.base_url, *NO_CALL_RETRIES, "--eval-retry-infrastructure", "2"),
        *reports,
    )

    result.assert_outcomes(passed=1)
    assert script.agent_calls == 3
    (trial,) = _trials(pytester.path)
    assert (trial["passed"], trial["error"], trial["error_cause"]) == (True, None, "")
    assert [(a["number"], a["cause"]) for a in trial["attempts"]] == [
        (1, "model_endpoint"),
        (2, "model_endpoint"),
    ]
    assert all("HTTP 500" in attempt["error"] for attempt in trial["attempts"])
    rate = "model_endpoint 2 of 3 attempts (67%, 2 retried)"
    result.stdout.fnmatch_lines([f"  Errors by kind: {rate}"])
    markdown = (pytester.path / "run.md").read_text()
    assert r"Errors by kind: model\_endpoint 2 of 3 attempts (67%, 2 retried)." in markdown
    html = (pytester.path / "run.html").read_text()
    assert "<caption>Errors by kind</caption>" in html
    assert "Attempt 2 (model_endpoint), run again: agent: HTTP 500: the model is down" in html
    assert '<td>model_endpoint</td><td class="num">2</td><td class="num">3</td>' in html


def test_retries_that_run_out_leave_the_trial_errored_with_every_attempt(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    script.agent_replies = _failing(3)

    result = pytester.runpytest(
        "skills",
        *eval_args(endpoint.base_url, *NO_CALL_RETRIES, "--eval-retry-infrastructure", "2"),
    )

    result.assert_outcomes(errors=1)
    assert script.agent_calls == 3
    (trial,) = _trials(pytester.path)
    assert trial["error_cause"] == "model_endpoint"
    assert [a["number"] for a in trial["attempts"]] == [1, 2]
    result.stdout.fnmatch_lines(
        ["  Errors by kind: model_endpoint 3 of 3 attempts (100%, 2 retried)"]
    )


def test_an_empty_answer_is_graded_and_never_retried(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    script.agent_answer = ""
    script.verdicts = {"x": (False, "the agent said nothing")}

    result = pytester.runpytest(
        "skills", *eval_args(endpoint.base_url, "--eval-retry-infrastructure", "2")
    )

    assert result.ret == 1  # the criterion failed: a graded outcome
    assert script.agent_calls == 1
    (trial,) = _trials(pytester.path)
    assert (trial["error"], trial["error_cause"], trial["attempts"]) == (None, "", [])
    assert trial["criteria"][0]["reason"] == "the agent said nothing"
    assert "Errors by kind" not in result.stdout.str()


def test_retry_infrastructure_is_bounded(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})

    result = pytester.runpytest(
        "skills", *eval_args(endpoint.base_url, "--eval-retry-infrastructure", "6")
    )

    assert result.ret != 0
    result.stderr.fnmatch_lines(["*--eval-retry-infrastructure*6*"])
