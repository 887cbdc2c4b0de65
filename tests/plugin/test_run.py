"""Running scenarios as users do, through pytester, against a real scripted endpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, reports_under, write_scenario, write_skill

TWO_CRITERIA = {"a": 10, "b": 5}


def _only_report(root: Path) -> dict:
    reports = reports_under(root)
    assert len(reports) == 1, reports
    return json.loads(reports[0].read_text())


def test_all_criteria_pass(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})

    result = pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url), "-o", "verbosity_subtests=1"
    )

    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "skills/s",
            "  scenario-0: about scenario-0",
            "    ✓ a (10/10)",
            "    ✓ b (5/5)",
            "    Score: 15/15 (100%) PASS",
            "  Overall: 100% PASS (threshold: 95%)",
            "  Report: skills/s/evals/results/claude-sonnet-4.6/*.json",
        ]
    )
    report = _only_report(pytester.path)
    assert report["skill"] == "s"
    assert report["skill_version"] == "2.1.0"
    assert report["pass"] is True
    assert report["overall_percentage"] == 100
    [scenario] = report["scenarios"]
    assert (scenario["name"], scenario["score"], scenario["max_score"]) == ("scenario-0", 15, 15)
    assert scenario["percentage"] == 100
    assert scenario["pass"] is True
    assert "error" not in scenario
    assert script.agent_calls == 1  # check 37: the agent is called exactly once
    assert script.judge_calls == 1


def test_failed_criterion_is_a_failed_subtest_with_points_and_reason(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    script.verdicts["b"] = (False, "b was ignored")

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url), "-v")

    result.stdout.fnmatch_lines(
        [
            "*scenario-0 SUBPASSED[[]a (10/10)[]]*",
            "*scenario-0 SUBFAILED[[]b (0/5)[]]*",
            "*criterion 'b' not met (0/5): b was ignored*",
            "    ✗ b (0/5) — b was ignored",
            "    Score: 10/15 (67%) FAIL",
            "  Overall: 67% FAIL (threshold: 95%)",
        ]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # check 17: below the threshold
    report = _only_report(pytester.path)
    assert report["pass"] is False
    assert report["scenarios"][0]["percentage"] == pytest.approx(66.6666, abs=0.01)
    assert report["scenarios"][0]["criteria"][1] == {
        "name": "b",
        "pass": False,
        "score": 0,
        "max_score": 5,
        "reason": "b was ignored",
    }


def test_threshold_met_with_failed_criteria_exits_zero(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA, "scenario-1": {"c": 4}})
    script.verdicts["b"] = (False, "no")

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url, "--eval-threshold", "80"))

    # (66.67 + 100) / 2 = 83.3 >= 80: the failed subtest does not fail the run.
    result.stdout.fnmatch_lines(["  Overall: 83% PASS (threshold: 80%)"])
    assert result.ret == pytest.ExitCode.OK
    assert _only_report(pytester.path)["threshold"] == 80


@pytest.mark.parametrize(
    "selection",
    [
        ["skills/s/evals/scenario-0"],
        ["skills/s/evals/scenario-0/"],
        ["skills/s", "-k", "scenario-0"],
        ["skills/s", "--deselect", "skills/s/evals::scenario-1"],
    ],
)
def test_partial_run_does_not_gate_or_write_a_report(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    selection: list[str],
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA, "scenario-1": {"c": 4}})
    script.verdicts["b"] = (False, "no")

    result = pytester.runpytest(*selection, *eval_args(endpoint.base_url))

    result.stdout.fnmatch_lines(
        [
            "    Score: 10/15 (67%) FAIL",
            "  Overall: 67% (partial run: 1 of 2 scenarios; threshold 95% not enforced)",
        ]
    )
    assert result.ret == pytest.ExitCode.OK  # check 20: scenario mode at 60 % exits 0
    assert reports_under(pytester.path) == []
    assert script.agent_calls == 1


def test_partial_run_writes_a_report_when_an_output_is_given(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA, "scenario-1": {"c": 4}})

    result = pytester.runpytest(
        "skills/s/evals/scenario-1", *eval_args(endpoint.base_url, "--eval-output", "out/")
    )

    assert result.ret == pytest.ExitCode.OK
    [written] = (pytester.path / "out").iterdir()
    assert written.name.startswith("results-")
    assert written.suffix == ".json"
    assert [s["name"] for s in json.loads(written.read_text())["scenarios"]] == ["scenario-1"]


def test_last_failed_reruns_only_failures_as_a_partial_run(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA, "scenario-1": {"c": 4}})
    script.verdicts["b"] = (False, "no")
    pytester.runpytest("skills/s", *eval_args(endpoint.base_url))
    calls_before = script.agent_calls

    # refresh: the cache would answer the rerun with the same verdicts
    result = pytester.runpytest(
        "skills/s", "--lf", *eval_args(endpoint.base_url, "--eval-cache", "refresh")
    )

    assert script.agent_calls - calls_before == 1
    result.stdout.fnmatch_lines(["*partial run: 1 of 2 scenarios*"])
    assert result.ret == pytest.ExitCode.OK


def test_reports_are_never_overwritten(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    args = ("skills/s", *eval_args(endpoint.base_url, "--eval-output", "report.json"))
    pytester.runpytest(*args)
    [first] = pytester.path.glob("report-*.json")
    first_text = first.read_text()
    script.verdicts["a"] = (False, "second run")

    pytester.runpytest(*args)

    written = sorted(pytester.path.glob("report-*.json"))
    assert len(written) == 2
    assert first.read_text() == first_text
    assert not list(pytester.path.glob(".*.tmp"))


def test_every_report_of_a_run_carries_the_session_ends_time(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    """Skill "a" is complete long before the session ends (skill "b" waits 1.2 s for its
    agent); both reports carry the session end's time, and their names say it."""
    write_skill(pytester.path, "a", {"scenario-0": TWO_CRITERIA})
    write_skill(pytester.path, "b", {"scenario-0": TWO_CRITERIA})
    late = Reply.chat(script.agent_answer)
    script.agent_reply_when["# b\n"] = Reply(json=late.json, delay=1.2)

    result = pytester.runpytest("skills", *eval_args(endpoint.base_url))

    assert result.ret == pytest.ExitCode.OK
    reports = {path.parts[-5]: path for path in reports_under(pytester.path)}
    assert sorted(reports) == ["a", "b"]
    stamps = {json.loads(path.read_text())["timestamp"] for path in reports.values()}
    assert len(stamps) == 1
    assert {path.name for path in reports.values()} == {
        stamps.pop().replace(":", "").replace("Z", "") + ".json"
    }
    a = json.loads(reports["a"].read_text())
    assert [c["name"] for c in a["scenarios"][0]["criteria"]] == ["a", "b"]


def test_a_report_names_broken_files_relative_to_the_skill_and_holds_no_machine_path(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    # Reports are committed to repositories: an error names the file from the skill folder.
    skill = write_skill(
        pytester.path, "s", {"scenario-0": TWO_CRITERIA, "scenario-1": TWO_CRITERIA}
    )
    (skill / "evals" / "scenario-1" / "criteria.json").write_text('{"checklist": [}')
    write_scenario(skill, "scenario-2", TWO_CRITERIA).joinpath("task.md").unlink()

    result = pytester.runpytest("skills", *eval_args(endpoint.base_url))

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    (report,) = reports_under(pytester.path)
    text = report.read_text()
    assert str(pytester.path) not in text
    assert "/tmp" not in text
    errors = [s.get("error") for s in json.loads(text)["scenarios"]]
    assert errors[0] is None
    assert errors[1].startswith("evals/scenario-1/criteria.json: not valid JSON: ")
    assert errors[2] == (
        "evals/scenario-2/task.md: file not found (every scenario needs a task.md)"
    )


def test_scenarios_are_reported_in_the_reference_order(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    names = ["scenario-2", "scenario-10", "scenario-0", "scenario-1"]
    write_skill(pytester.path, "s", {n: {"x": 1} for n in names})

    pytester.runpytest("skills/s", *eval_args(endpoint.base_url))

    report = _only_report(pytester.path)
    assert [s["name"] for s in report["scenarios"]] == sorted(names)  # plain string order


def test_unknown_verdict_names_are_ignored_and_missing_ones_fail(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    script.judge_replies.append(
        '[{"name": "a", "pass": true, "reason": "fine"}, {"name": "zzz", "pass": true}]'
    )

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url))

    result.stdout.fnmatch_lines(["    ✗ b (0/5) — no verdict returned"])
    scenario = _only_report(pytester.path)["scenarios"][0]
    assert [c["name"] for c in scenario["criteria"]] == ["a", "b"]
    assert scenario["score"] == 10


def test_endpoint_failure_is_a_scenario_error_not_a_failed_criterion(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    write_scenario(skill, "scenario-1", {"c": 4}, description="second")
    failing = Reply(status=500, body="upstream exploded", headers={"Retry-After": "0"})
    script.agent_reply_when["scenario-0."] = failing  # 5xx is retried, then reported

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url, "--eval-threshold", "40"))

    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of s::scenario-0*",
            "scenario error: agent: failed after 3 attempts: HTTP 500: upstream exploded",
            "  scenario-0: about scenario-0",
            "    ERROR: agent: failed after 3 attempts: HTTP 500: upstream exploded",
            "    Score: 4/4 (100%) PASS",
            "  Overall: 50% PASS (threshold: 40%)",
        ]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # an error never lets the run pass
    # Not where the catalogue reads: it would publish 0 % for a scenario the endpoint failed.
    assert reports_under(pytester.path) == []
    held = sorted((pytester.path / ".openkata/runs/unpublished/s").rglob("*.json"))
    assert len(held) == 1
    result.stdout.fnmatch_lines(
        [
            f"  Report: .openkata/runs/unpublished/s/{held[0].parent.name}/{held[0].name}",
            "  Report not published: 1 scenario errored for reasons outside the skill (an "
            "endpoint, the judge, an agent CLI or the sandbox engine), so this report is not in "
            "evals/results/, where the catalogue would count it; --eval-publish-errors "
            "publishes it anyway",
        ]
    )
    errored = json.loads(held[0].read_text())["scenarios"][0]
    assert errored == {
        "name": "scenario-0",
        "description": "about scenario-0 (error: agent: failed after 3 attempts: "
        "HTTP 500: upstream exploded)",
        "criteria": None,
        "score": 0,
        "max_score": 0,
        "percentage": 0,
        "pass": False,
        "error": "agent: failed after 3 attempts: HTTP 500: upstream exploded",
        "error_kind": "infrastructure",
        "error_cause": "model_endpoint",
    }


def test_unreachable_endpoint_errors_every_scenario(pytester: pytest.Pytester) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    with ScriptedEndpoint() as stopped:
        url = stopped.base_url

    result = pytester.runpytest("skills/s", *eval_args(url))

    result.stdout.fnmatch_lines(
        ["scenario error: agent: POST http://127.0.0.1:*: connection refused*"]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_judge_that_never_answers_in_json_errors_after_one_retry(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    script.judge_replies.extend(["I cannot decide.", "Still no JSON here."])

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url))

    result.stdout.fnmatch_lines(
        ["scenario error: judge: judge parse failed after retry: no JSON found in judge response"]
    )
    assert script.judge_calls == 2
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_judge_answer_cut_off_at_the_token_limit_is_asked_again(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    # Read leniently, the cut answer would give one verdict and fail the other criterion.
    cut = '[{"name": "a", "pass": true, "reason": "ok"}, {"name": "b'
    script.judge_replies.append(Reply.chat(cut, finish_reason="length"))
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url))

    assert script.judge_calls == 2
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1)


def test_a_judge_cut_off_twice_is_a_scenario_error(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    cut = '[{"name": "a", "pass": true, "reason": "ok"}, {"name": "b'
    script.judge_replies.extend([Reply.chat(cut, finish_reason="length")] * 2)
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url))

    result.stdout.fnmatch_lines(
        [
            "scenario error: judge: judge parse failed after retry: structured answer cut off "
            'at the token limit (finish_reason "length")'
        ]
    )
    assert script.judge_calls == 2
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_trivial_answer_with_all_criteria_passing_is_suspicious(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    script.agent_answer = "ok"

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url))

    result.stdout.fnmatch_lines(
        ["scenario error: judge: suspicious result: trivial agent response (2 chars)*"]
    )


def test_throttled_agent_is_retried_honouring_retry_after(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    throttled = Reply(status=429, body="rate limit exceeded", headers={"Retry-After": "0"})
    script.agent_replies.extend([throttled, throttled])

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url))

    assert script.agent_calls == 3  # check 38
    assert result.ret == pytest.ExitCode.OK


def test_throttling_that_never_ends_is_reported_as_such(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    throttled = Reply(status=429, body="slow down", headers={"Retry-After": "0"})
    script.agent_replies.extend([throttled] * 3)

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url))

    result.stdout.fnmatch_lines(
        ["scenario error: agent: throttled after 3 attempts: HTTP 429: slow down"]
    )
    assert script.agent_calls == 3


def test_a_sandboxed_scenario_without_an_engine_errors_clearly(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{pytester.path}/no-engine.sock")
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA}, sandbox=True)

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url))

    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["scenario error: sandbox: no Docker engine answers at *"])
    assert script.agent_calls == 0


def test_api_key_never_reaches_output_report_or_junit(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = "sk-live-9f8e7d6c5b4a"
    monkeypatch.setenv("OPENKATA_EVAL_HTTP_API_KEY", key)
    skill = write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    write_scenario(skill, "scenario-1", {"c": 4})
    script.agent_reply_when["scenario-0."] = Reply(status=401, body=f"invalid key {key}")
    script.verdicts["c"] = (False, f"the answer quoted {key}")

    result = pytester.runpytest(
        "skills/s",
        *eval_args(endpoint.base_url, "--junitxml=junit.xml", "-v", "--eval-publish-errors"),
    )

    assert endpoint.requests[0].headers["authorization"] == f"Bearer {key}"
    everything = [
        result.stdout.str(),
        result.stderr.str(),
        (pytester.path / "junit.xml").read_text(),
        *(p.read_text() for p in reports_under(pytester.path)),
        *(
            p.read_text()
            for p in (pytester.path / ".pytest_cache" / "d" / "openkata").rglob("*")
            if p.is_file()
        ),
    ]
    assert reports_under(pytester.path)
    assert any('"verdicts"' in text for text in everything)  # the cache entries are read too
    for text in everything:
        assert key not in text
    assert "invalid key ***" in result.stdout.str()
    assert "the answer quoted ***" in everything[2]


def test_every_skill_is_gated_and_reported_on_its_own(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "good", {"scenario-0": {"g": 1}})
    write_skill(pytester.path, "weak", {"scenario-0": {"w": 1}})
    script.verdicts["w"] = (False, "no")

    result = pytester.runpytest("skills", *eval_args(endpoint.base_url))

    result.stdout.fnmatch_lines(
        [
            "skills/good",
            "  Overall: 100% PASS (threshold: 95%)",
            "skills/weak",
            "  Overall: 0% FAIL*",
        ]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert [p.parts[-5] for p in reports_under(pytester.path)] == ["good", "weak"]


def test_ordinary_failing_tests_still_fail_the_run(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    pytester.makepyfile(test_unit="def test_broken():\n    assert False\n")

    result = pytester.runpytest("skills", "test_unit.py", *eval_args(endpoint.base_url))

    result.stdout.fnmatch_lines(["  Overall: 100% PASS (threshold: 95%)"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


@pytest.mark.parametrize("colour", ["yes", "no"])
def test_colour_follows_pytest(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript, colour: str
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    script.verdicts["b"] = (False, "no")

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url), f"--color={colour}")

    output = result.stdout.str()
    coloured = ["\x1b[32m✓", "\x1b[31m✗", "\x1b[31mFAIL"]
    if colour == "yes":
        assert all(c in output for c in coloured)
    else:
        assert "\x1b[" not in output
        assert "    ✓ a (10/10)" in output


def test_model_label_and_config_file(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    pytester.path.joinpath(".openkata-eval.yaml").write_text(
        f"backend: http\nmodel: local-model\njudge_model: judge-model\nthreshold: 90\n"
        f"http:\n  base_url: {endpoint.base_url}\n"
    )

    result = pytester.runpytest("skills/s", "--eval-model-label", "Local Model")

    assert result.ret == pytest.ExitCode.OK
    report = _only_report(pytester.path)
    assert report["config"] == {
        "backend": "http",
        "agent_model": "local-model",
        "judge_model": "judge-model",
        "model_label": "Local Model",
    }  # no judge_backend key: the judge uses the agent's backend
    assert report["threshold"] == 90
    assert reports_under(pytester.path)[0].parent.name == "local-model"
    models = [r.json["model"] for r in endpoint.requests]
    assert models == ["local-model", "judge-model"]


def test_http_backend_without_base_url_errors_each_scenario(pytester: pytest.Pytester) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})

    result = pytester.runpytest("skills/s", "--eval-backend", "http")

    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["scenario error: the http backend needs a base URL*"])


def test_kiro_backend_errors_clearly(pytester: pytest.Pytester) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})

    pytester.makeini("[pytest]\n")
    result = pytester.runpytest("skills/s")  # kiro is the reference's default backend

    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["scenario error: agent: kiro-cli not found in PATH*", "*https://docs.kiro.dev/install*"]
    )


def test_a_report_that_cannot_be_written_fails_the_run(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    pytester.path.joinpath("blocker").write_text("a file, not a folder\n")

    result = pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url, "--eval-output", "blocker/report.json")
    )

    result.stdout.fnmatch_lines(
        ["  Overall: 100% PASS (threshold: 95%)", "  Report not written: could not write *blocker*"]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_other_plugins_get_each_scenario_result(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA, "scenario-1": {"c": 4}})
    script.verdicts["b"] = (False, "no")
    pytester.makeconftest(
        "import json\n"
        "def pytest_openkata_scenario_result(result, item):\n"
        "    with open('seen.jsonl', 'a') as out:\n"
        "        out.write(json.dumps([item.name, result.score, result.max_score]) + '\\n')\n"
    )

    pytester.runpytest("skills", *eval_args(endpoint.base_url))

    seen = [json.loads(line) for line in (pytester.path / "seen.jsonl").read_text().splitlines()]
    assert seen == [["scenario-0", 10, 15], ["scenario-1", 4, 4]]
