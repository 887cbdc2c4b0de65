"""The result cache as users meet it: repeat runs, changed criteria, the options, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.evals import (
    EvalScript,
    criteria_json,
    eval_args,
    reports_under,
    write_skill,
)

TWO_CRITERIA = {"a": 10, "b": 5}


def _latest_report(root: Path) -> dict:
    [report] = reports_under(root)  # _run removes the earlier ones
    return json.loads(report.read_text())


def _calls(script: EvalScript) -> tuple[int, int]:
    return script.agent_calls, script.judge_calls


def _run(pytester: pytest.Pytester, endpoint: ScriptedEndpoint, *extra: str) -> pytest.RunResult:
    for earlier in reports_under(pytester.path):
        earlier.unlink()
    return pytester.runpytest("skills/s", *eval_args(endpoint.base_url, *extra))


def test_a_repeat_run_is_answered_from_the_cache_and_says_so(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    script.verdicts["b"] = (False, "b is missing")
    first = _run(pytester, endpoint)

    second = _run(pytester, endpoint)

    assert _calls(script) == (1, 1)
    assert first.ret == second.ret == pytest.ExitCode.TESTS_FAILED
    [scenario] = _latest_report(pytester.path)["scenarios"]
    assert [c["pass"] for c in scenario["criteria"]] == [True, False]
    assert scenario["criteria"][1]["reason"] == "b is missing"
    assert scenario["usage"]["agent"] == {"calls": 0, "cached": 1, "seconds": 0}
    assert scenario["usage"]["judge"] == {"calls": 0, "cached": 1, "seconds": 0}
    second.stdout.fnmatch_lines(["    From the cache: 1 agent answer, 1 judge verdict"])
    first.stdout.no_fnmatch_line("*From the cache*")


def test_changing_only_the_criteria_reruns_only_the_judge(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    _run(pytester, endpoint)
    criteria = skill / "evals" / "scenario-0" / "criteria.json"
    criteria.write_text(criteria_json({**TWO_CRITERIA, "c": 3}, context="ctx scenario-0"))

    result = _run(pytester, endpoint)

    assert _calls(script) == (1, 2)
    [scenario] = _latest_report(pytester.path)["scenarios"]
    assert [c["name"] for c in scenario["criteria"]] == ["a", "b", "c"]
    result.stdout.fnmatch_lines(["    From the cache: 1 agent answer"])


def test_changing_the_skill_reruns_the_agent(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    _run(pytester, endpoint)
    (skill / "SKILL.md").write_text("# s\n\nFollow the new rules.\n")

    _run(pytester, endpoint)

    # The scripted agent answers with the same text, so the judge's verdict on it is reused.
    assert _calls(script) == (2, 1)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (("--eval-cache", "off"), (2, 2)),
        (("--eval-cache", "refresh"), (2, 2)),
        (("--cache-clear",), (2, 2)),
        (("-p", "no:cacheprovider"), (2, 2)),
        (("--eval-model", "another-model"), (2, 2)),
        (("--eval-judge-model", "another-judge"), (1, 2)),
        (("--eval-trials", "2"), (2, 2)),  # trial 1 is cached, trial 2 is new
    ],
)
def test_options_that_bypass_or_miss_the_cache(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    options: tuple[str, ...],
    expected: tuple[int, int],
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    _run(pytester, endpoint)

    _run(pytester, endpoint, *options)

    assert _calls(script) == expected


def test_refresh_replaces_the_entries_that_later_runs_use(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    _run(pytester, endpoint)
    script.verdicts["a"] = (False, "judged again")
    _run(pytester, endpoint, "--eval-cache", "refresh")

    _run(pytester, endpoint)

    assert _calls(script) == (2, 2)
    [scenario] = _latest_report(pytester.path)["scenarios"]
    assert scenario["criteria"][0]["reason"] == "judged again"


def test_errors_are_never_cached(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    script.agent_reply_when["scenario-0."] = Reply(status=400, body="bad request")
    failed = _run(pytester, endpoint)
    script.agent_reply_when.clear()

    result = _run(pytester, endpoint)

    failed.assert_outcomes(errors=1)
    result.assert_outcomes(passed=1)
    assert _calls(script) == (2, 1)


def test_a_judge_failure_is_retried_on_demand_without_rerunning_the_agent(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA, "scenario-1": {"c": 1}})
    script.judge_replies.extend(["not json", "not json either"])  # the first judge call, twice
    failed = _run(pytester, endpoint, "--eval-concurrency", "1")

    retried = _run(pytester, endpoint, "--lf")

    failed.assert_outcomes(passed=1, errors=1)
    retried.assert_outcomes(passed=1)
    retried.stdout.fnmatch_lines(["    From the cache: 1 agent answer"])
    assert _calls(script) == (2, 4)  # 2 agent calls in all; the judge: 2 + 1 + 1 retried


def test_a_damaged_cache_entry_is_a_miss_not_a_crash(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    _run(pytester, endpoint)
    judge_entries = list(
        (pytester.path / ".pytest_cache" / "d" / "openkata" / "judge").rglob("*.json")
    )
    for entry in judge_entries:
        data = json.loads(entry.read_text())
        entry.write_text(json.dumps({**data, "value": {"verdicts": [{"bogus": 1}]}}))
    agent_entries = list(
        (pytester.path / ".pytest_cache" / "d" / "openkata" / "agent").rglob("*.json")
    )
    for entry in agent_entries:
        entry.write_text('{"format": 1, "key": "trunc')

    result = _run(pytester, endpoint)

    assert (len(judge_entries), len(agent_entries)) == (1, 1)
    result.assert_outcomes(passed=1)
    assert _calls(script) == (2, 2)


def test_an_endpoint_named_by_what_answers_is_the_same_endpoint_on_another_port(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    # A local server gets a new port every run: http.endpoint_id names it for the cache.
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    named = ("--eval-http-endpoint-id", "smollm2 sha256:1234")
    _run(pytester, endpoint, *named)

    with ScriptedEndpoint() as moved:
        again = EvalScript()
        moved.respond_with(again)
        same = _run(pytester, moved, *named)
        changed = _run(pytester, moved, "--eval-http-endpoint-id", "smollm2 sha256:5678")

    assert _calls(script) == (1, 1)
    assert same.ret == pytest.ExitCode.OK
    same.stdout.fnmatch_lines(["    From the cache: 1 agent answer, 1 judge verdict"])
    assert changed.ret == pytest.ExitCode.OK
    changed.stdout.no_fnmatch_line("*From the cache*")
    assert _calls(again) == (1, 1)  # another identity: another endpoint, asked anew
