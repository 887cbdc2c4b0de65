"""Re-judging a recorded run (``--eval-rejudge LOG``, ``python -m pytest_openkata rejudge``):
a real run against the scripted endpoint writes a run log, then its agent answers are graded
again with another judge, or with edited criteria, without a call to the agent."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.evals import EvalScript, criteria_json, eval_args, write_skill
from tests.support.shards import merge

ANSWER = "The scripted agent's answer, recorded once and judged twice over."


def _logs(root: Path) -> list[Path]:
    return sorted((root / ".openkata" / "runs").glob("*.jsonl"))


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _trials(path: Path) -> list[dict[str, Any]]:
    """The trial records of a run log (a re-judged run's log also holds a drift record)."""
    return [r for r in _records(path) if r["record"] == "trial"]


def _verdicts(trial: dict[str, Any]) -> dict[str, bool]:
    return {c["name"]: c["passed"] for c in trial["criteria"]}


def _judge_models(endpoint: ScriptedEndpoint, since: int) -> set[str]:
    """The models the judge calls after the first ``since`` requests asked for."""
    return {
        r.json["model"]
        for r in endpoint.requests[since:]
        if r.json and r.json["messages"][0]["role"] == "system"
    }


def test_another_judge_grades_the_recorded_answers_and_the_agent_is_never_called(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 10, "y": 5}, "scenario-b": {"z": 3}})
    script.agent_answer = ANSWER
    script.verdicts["y"] = (False, "judge A: y is missing")
    first = pytester.runpytest(
        "skills/s",
        *eval_args(endpoint.base_url, "--eval-judge-model", "judge-a", "--eval-trials", "2"),
        "-p",
        "no:randomly",
    )
    assert first.ret == pytest.ExitCode.TESTS_FAILED
    [source] = _logs(pytester.path)
    source_head = _records(source)[0]
    agent_calls, judge_calls, requests = (
        script.agent_calls,
        script.judge_calls,
        len(endpoint.requests),
    )
    assert (agent_calls, judge_calls) == (4, 4)
    script.verdicts["y"] = (True, "judge B: y is there")

    rejudged = pytester.run(
        sys.executable,
        "-m",
        "pytest_openkata",
        "rejudge",
        str(source.relative_to(pytester.path)),
        *eval_args(endpoint.base_url, "--eval-judge-model", "judge-b"),
        "--eval-markdown",
        "run.md",
        "--eval-html",
        "run.html",
        "-p",
        "no:randomly",
    )

    assert rejudged.ret == pytest.ExitCode.OK, rejudged.stdout.str()
    assert script.agent_calls == agent_calls  # no agent call at all
    # judge B was asked for every trial: no verdict of judge A came from the cache
    assert script.judge_calls == judge_calls + 4
    assert _judge_models(endpoint, requests) == {"judge-b"}
    new = next(log for log in _logs(pytester.path) if log != source)
    head, *rest = _records(new)
    trials = [r for r in rest if r["record"] == "trial"]
    assert head["rejudged_from"] == {
        "log": source.name,
        "finished_at": source_head["finished_at"],
        "judge": "http",
        "judge_model": "judge-a",
        "judge_votes": 1,
    }
    assert head["settings"]["judge_model"] == "judge-b"
    assert [(t["scenario"], t["trial"]) for t in trials] == [
        ("scenario-a", 1),
        ("scenario-a", 2),
        ("scenario-b", 1),
        ("scenario-b", 2),
    ]
    assert _verdicts(trials[0]) == {"x": True, "y": True}
    assert trials[0]["criteria"][1]["reason"] == "judge B: y is there"
    assert {t["trace"]["output"] for t in trials} == {ANSWER}
    shown = f"Re-judged from run log {source.name}"
    rejudged.stdout.fnmatch_lines([f"{shown} (finished *; its judge http/judge-a, 1 vote(s))*"])
    assert shown in (pytester.path / "run.md").read_text()
    assert shown in (pytester.path / "run.html").read_text()


def test_an_edited_criterion_is_judged_again_and_an_unchanged_one_comes_from_the_cache(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = write_skill(
        pytester.path, "s", {"scenario-a": {"x": 10, "y": 5}, "scenario-b": {"z": 3}}
    )
    script.verdicts["y"] = (False, "y is missing")
    pytester.runpytest("skills/s", *eval_args(endpoint.base_url), "-p", "no:randomly")
    [source] = _logs(pytester.path)
    agent_calls, judge_calls = script.agent_calls, script.judge_calls
    edited = json.loads(criteria_json({"x": 10, "y": 5}, context="ctx scenario-a"))
    edited["checklist"][1]["description"] = "checks y, in its new wording"
    (skill / "evals" / "scenario-a" / "criteria.json").write_text(json.dumps(edited))
    script.verdicts["y"] = (True, "y as now worded is met")

    result = pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url, "--eval-rejudge", str(source))
    )

    assert result.ret == pytest.ExitCode.OK
    assert script.agent_calls == agent_calls
    assert script.judge_calls == judge_calls + 1  # scenario-a only: scenario-b is cached
    new = next(log for log in _logs(pytester.path) if log != source)
    a, b = _trials(new)
    assert _verdicts(a) == {"x": True, "y": True}
    assert (a["usage"]["judge"]["calls"], b["usage"]["judge"]["cached"]) == (1, 1)
    old_a = _records(source)[1]
    assert a["digests"]["criteria"] != old_a["digests"]["criteria"]
    assert a["digests"]["prompt"] == old_a["digests"]["prompt"]


def test_a_scenario_the_log_lacks_errors_by_name_and_an_agent_error_stays_an_error(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}, "scenario-b": {"x": 1}})
    script.agent_reply_when["scenario-b"] = Reply(status=400, body="bad request")
    pytester.runpytest("skills/s", *eval_args(endpoint.base_url), "-p", "no:randomly")
    [source] = _logs(pytester.path)
    recorded_error = _records(source)[2]["error"]
    assert recorded_error
    write_skill(pytester.path, "s", {"scenario-c": {"x": 1}})
    agent_calls = script.agent_calls

    result = pytester.runpytest(
        "skills/s",
        *eval_args(endpoint.base_url, "--eval-rejudge", str(source), "--eval-model", "m2"),
        "--eval-allow-drift",  # another agent model: refused without it
        "-p",
        "no:randomly",
    )

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert script.agent_calls == agent_calls
    result.stdout.fnmatch_lines(
        ["*are the agent model claude-sonnet-4.6's, and this run's reports name m2*"]
    )
    new = next(log for log in _logs(pytester.path) if log != source)
    by_name = {t["scenario"]: t for t in _trials(new)}
    assert by_name["scenario-c"]["error"].startswith(
        f"skills/s::scenario-c is not in the run log {source.name}: "
    )
    assert by_name["scenario-a"]["passed"] is True
    assert by_name["scenario-b"]["error"] == recorded_error


def test_a_log_that_cannot_be_read_is_a_usage_error_naming_it(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    (pytester.path / "bad.jsonl").write_text('{"record": "trial"}\n')

    result = pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url, "--eval-rejudge", "bad.jsonl")
    )

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--eval-rejudge: rejudge: *bad.jsonl: line 1: not a run log*"])
    assert script.agent_calls == script.judge_calls == 0


def test_a_baseline_arm_is_rejudged_with_the_own_arm(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    script.verdicts["x"] = (False, "judge A: no")
    pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url, "--eval-baseline", "without-skill")
    )
    [source] = _logs(pytester.path)
    agent_calls = script.agent_calls
    assert agent_calls == 2
    script.verdicts["x"] = (True, "judge B: yes")

    result = pytester.run(
        sys.executable,
        *("-m", "pytest_openkata", "rejudge", str(source), "--eval-judge-model", "judge-b"),
        *eval_args(endpoint.base_url),
    )

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert script.agent_calls == agent_calls
    new = next(log for log in _logs(pytester.path) if log != source)
    head, *rest = _records(new)
    trials = [r for r in rest if r["record"] == "trial"]
    assert head["settings"]["baseline"] == "without-skill"
    assert [(t["arm"], _verdicts(t)) for t in trials] == [
        ("", {"x": True}),
        ("without-skill", {"x": True}),
    ]


def test_under_xdist_every_worker_grades_the_recorded_answers(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {f"scenario-{n}": {"x": 1} for n in range(3)})
    script.verdicts["x"] = (False, "judge A: no")
    pytester.runpytest("skills/s", *eval_args(endpoint.base_url))
    [source] = _logs(pytester.path)
    agent_calls = script.agent_calls
    script.verdicts["x"] = (True, "judge B: yes")

    result = pytester.runpytest(
        "skills/s",
        *eval_args(endpoint.base_url, "--eval-rejudge", str(source.relative_to(pytester.path))),
        *("--eval-judge-model", "judge-b", "-n", "2"),
    )

    assert result.ret == pytest.ExitCode.OK
    assert script.agent_calls == agent_calls
    new = next(log for log in _logs(pytester.path) if log != source)
    head, *rest = _records(new)
    trials = [r for r in rest if r["record"] == "trial"]
    assert head["rejudged_from"]["log"] == source.name
    assert [_verdicts(t) for t in trials] == [{"x": True}] * 3


def test_the_python_api_rejudges_a_log_too(
    tmp_path: Path,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_skill(tmp_path, "s", {"scenario-a": {"x": 1}})
    monkeypatch.chdir(tmp_path)
    from pytest_openkata import evaluate

    settings = {"backend": "http", "http": {"base_url": endpoint.base_url}, "cache": "off"}
    script.verdicts["x"] = (False, "judge A: no")
    [first] = evaluate("skills", **settings)
    [source] = _logs(tmp_path)
    agent_calls = script.agent_calls
    script.verdicts["x"] = (True, "judge B: yes")

    [second] = evaluate("skills", **settings, judge_model="judge-b", rejudge=str(source))

    assert (first.passed, second.passed) == (False, True)
    assert script.agent_calls == agent_calls
    new = next(log for log in _logs(tmp_path) if log != source)
    assert _records(new)[0]["rejudged_from"]["log"] == source.name


def test_answers_of_another_agent_model_are_refused_unless_drift_is_allowed(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    pytester.runpytest("skills/s", *eval_args(endpoint.base_url), "-p", "no:randomly")
    [source] = _logs(pytester.path)
    calls = (script.agent_calls, script.judge_calls)
    # The reports would name m2 as the agent of answers claude-sonnet-4.6 gave.
    args = (
        "skills/s",
        *eval_args(endpoint.base_url, "--eval-rejudge", str(source), "--eval-model", "m2"),
    )

    refused = pytester.runpytest(*args, "-p", "no:randomly")

    # Refused when the run starts: no judge call is paid for, no run log is written.
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(
        [
            f"*--eval-rejudge: refused to compare with the recorded run {source.name} "
            "(rejudge): it drifted: agent.model: 'claude-sonnet-4.6' before, 'm2' now. "
            "Set allow_drift (--eval-allow-drift) to compare anyway*",
        ]
    )
    assert (script.agent_calls, script.judge_calls) == calls
    assert _logs(pytester.path) == [source]

    allowed = pytester.runpytest(*args, "--eval-allow-drift", "-p", "no:randomly")

    assert allowed.ret == pytest.ExitCode.OK, allowed.stdout.str()
    assert script.agent_calls == calls[0]
    [newest] = [log for log in _logs(pytester.path) if log != source]
    [drift] = [r["data"] for r in _records(newest) if r.get("kind") == "drift"]
    assert drift["allowed"] is True
    refusing = {i["field"]: i["refuses"] for i in drift["items"]}
    assert refusing == {"agent.model": True, "judge.model": False}


def test_settings_that_shaped_the_recorded_agent_s_run_and_an_edited_task_are_only_reported(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    """No agent runs in a re-judge: another agent timeout or sandbox timeout, or a task
    edited since, change nothing of the recorded answers: they are graded as answers to the
    task they were given, which the re-judged result shows with its digest."""
    skill = write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    pytester.runpytest("skills/s", *eval_args(endpoint.base_url), "-p", "no:randomly")
    [source] = _logs(pytester.path)
    task = skill / "evals/scenario-a/task.md"
    given = task.read_text()
    task.write_text("A task edited after the run.\n")
    agent_calls, requests = script.agent_calls, len(endpoint.requests)

    rejudged = pytester.runpytest(
        "skills/s",
        *eval_args(endpoint.base_url, "--eval-rejudge", str(source)),
        *("--eval-direct-timeout", "17", "--eval-sandbox-timeout", "19", "--eval-cache", "off"),
        "-p",
        "no:randomly",
    )

    assert rejudged.ret == pytest.ExitCode.OK, rejudged.stdout.str() + rejudged.stderr.str()
    assert script.agent_calls == agent_calls
    judged = [r.json["messages"][-1]["content"] for r in endpoint.requests[requests:] if r.json]
    assert judged
    assert not any("edited after the run" in text for text in judged)
    new = next(log for log in _logs(pytester.path) if log != source)
    [before], [after] = _trials(source), _trials(new)
    assert after["task"] == before["task"] == given
    assert after["digests"]["task"] == before["digests"]["task"]
    [drift] = [r["data"] for r in _records(new) if r.get("kind") == "drift"]
    fields = {i["field"]: i["refuses"] for i in drift["items"]}
    assert fields == {
        "settings.direct_timeout": False,
        "settings.sandbox.timeout": False,
    }
    rejudged.stdout.fnmatch_lines(
        [f"*Drift against the recorded run {source.name} (reported): settings.direct_timeout*"]
    )


def test_the_shards_of_a_rejudge_merge_into_a_run_that_says_it_was_rejudged(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}, "scenario-b": {"x": 1}})
    pytester.runpytest("skills/s", *eval_args(endpoint.base_url), "-p", "no:randomly")
    [source] = _logs(pytester.path)
    agent_calls = script.agent_calls
    args = eval_args(endpoint.base_url, "--eval-rejudge", str(source), "--eval-judge-model", "b")
    for index in (1, 2):
        pytester.runpytest(
            "skills/s", *args, "--eval-shard", f"{index}/2", "--eval-shard-dir", f"out/{index}"
        )

    merged = merge(pytester.path, "out/1", "out/2")

    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert script.agent_calls == agent_calls
    assert f"Re-judged from run log {source.name}" in merged.stdout
    [written] = [line for line in merged.stdout.splitlines() if line.startswith("run log: ")]
    merged_log = pytester.path / written.removeprefix("run log: ")
    assert _records(merged_log)[0]["rejudged_from"]["log"] == source.name
