"""``trials = auto`` run as users run it (pytester, a real scripted endpoint): the trials stop
once the scenario's mean is settled against the threshold, or at the maximum, and every report
says how many trials that saved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, reports_under, write_skill
from tests.support.shards import NO_CACHE, merge


def _verdict(passed: bool) -> str:
    return json.dumps([{"name": "a", "pass": passed, "reason": f"a {passed}"}])


def _log_records(root: Path) -> list[dict]:
    [log] = sorted((root / ".openkata" / "runs").glob("*.jsonl"))
    return [json.loads(line) for line in log.read_text().splitlines()]


def _auto_args(base_url: str, *extra: str) -> list[str]:
    return [*eval_args(base_url, "--eval-trials", "auto", "--eval-trials-max", "6", *extra)]


def test_trials_that_pass_every_time_stop_at_the_minimum_and_report_the_saving(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"a": 10}})

    result = pytester.runpytest(
        "skills/s",
        # Two passes put the low end of the mean's interval at 23 % (each of the five looks at
        # 99 %: z = 2.576, 2 / (2 + 6.635)): settled above a threshold of 20.
        *_auto_args(
            endpoint.base_url,
            "--eval-threshold",
            "20",
            "--eval-markdown",
            "run.md",
            "--eval-html",
            "run.html",
        ),
    )

    assert result.ret == pytest.ExitCode.OK
    assert (script.agent_calls, script.judge_calls) == (2, 2)
    [report] = reports_under(pytester.path)
    [scenario] = json.loads(report.read_text())["scenarios"]
    assert [trial["trial"] for trial in scenario["trials"]] == [1, 2]
    run, *trials = _log_records(pytester.path)
    assert run["settings"]["trials"] == "auto"
    assert (run["settings"]["trials_max"], run["settings"]["trials_confidence"]) == (6, 0.95)
    assert [record["auto_trials"] for record in trials] == [
        {"maximum": 6, "confidence": 0.95, "threshold": 20.0, "settled": "above"}
    ] * 2
    saving = "2 of at most 6 run (95% confidence), 4 saved; scenario-0: 2, above the threshold"
    result.stdout.fnmatch_lines([f"  Trials auto: {saving}"])
    assert f"Trials auto: {saving}." in (pytester.path / "run.md").read_text()
    assert f"Trials auto: {saving}" in (pytester.path / "run.html").read_text()


def test_trials_that_fail_every_time_stop_at_the_minimum_below_the_threshold(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"a": 10}})
    script.verdicts["a"] = (False, "missing")

    result = pytester.runpytest("skills/s", *_auto_args(endpoint.base_url))

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert script.agent_calls == 2
    result.stdout.fnmatch_lines(
        ["  Trials auto: 2 of at most 6 run (95% confidence), 4 saved; "
         "scenario-0: 2, below the threshold"]
    )  # fmt: skip
    assert {record["auto_trials"]["settled"] for record in _log_records(pytester.path)[1:]} == {
        "below"
    }


def test_trials_near_the_threshold_run_to_the_maximum(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"a": 10}})
    # 100, 0, 100, 0, ...: a mean of 50 % whose interval holds the threshold of 50 % throughout.
    script.judge_replies.extend(_verdict(number % 2 == 0) for number in range(6))

    result = pytester.runpytest(
        "skills/s", *_auto_args(endpoint.base_url, "--eval-threshold", "50")
    )

    assert (script.agent_calls, script.judge_calls) == (6, 6)
    trials = _log_records(pytester.path)[1:]
    assert [record["percentage"] for record in trials] == [100, 0, 100, 0, 100, 0]
    assert {record["auto_trials"]["settled"] for record in trials} == {""}
    result.stdout.fnmatch_lines(
        ["  Trials auto: 6 of at most 6 run (95% confidence), 0 saved; "
         "scenario-0: 6, not settled at the maximum"]
    )  # fmt: skip


def test_a_trial_that_errors_stops_the_trials(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"a": 10}})
    script.judge_replies.extend([_verdict(True), "no verdicts", "still none"])

    result = pytester.runpytest("skills/s", *_auto_args(endpoint.base_url))

    assert script.agent_calls == 2  # the second trial's judge failed: no third trial
    result.stdout.fnmatch_lines(
        ["  Trials auto: 2 of at most 6 run (95% confidence), 4 saved; "
         "scenario-0: 2, stopped by an error"]
    )  # fmt: skip


def test_scenario_json_trials_win_over_auto(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-0": {"a": 10}})
    options = skill / "evals" / "scenario-0" / "scenario.json"
    options.write_text(json.dumps({"sandbox": False, "trials": 3}))

    result = pytester.runpytest("skills/s", *_auto_args(endpoint.base_url))

    assert result.ret == pytest.ExitCode.OK
    assert script.agent_calls == 3
    assert all("auto_trials" not in record for record in _log_records(pytester.path)[1:])
    assert "Trials auto" not in result.stdout.str()


def test_auto_trials_pair_the_baseline_arm_trial_for_trial(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"a": 10}, "scenario-1": {"a": 10}})

    result = pytester.runpytest(
        "skills/s",
        *_auto_args(endpoint.base_url, "--eval-baseline", "same", "--eval-threshold", "20"),
    )

    assert result.ret == pytest.ExitCode.OK
    trials = _log_records(pytester.path)[1:]
    # Every arm stops where its scenario's own arm settled: two trials each.
    assert sorted((r["scenario"], r["arm"], r["trial"]) for r in trials) == [
        (name, arm, trial)
        for name in ("scenario-0", "scenario-1")
        for arm in ("", "same")
        for trial in (1, 2)
    ]
    # Both scenarios' arms agree exactly: no spread to plan from.
    result.stdout.fnmatch_lines(["    Power: the 2 scenarios' differences do not vary*"])


def test_shards_of_auto_trials_merge_with_their_saving_and_refuse_more_than_the_maximum(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"a": 10}, "scenario-1": {"a": 10}})
    args = ("skills", *_auto_args(endpoint.base_url, "--eval-threshold", "20", *NO_CACHE))
    for index in (1, 2):
        pytester.runpytest(*args, "--eval-shard", f"{index}/2", "--eval-shard-dir", f"out/{index}")
    assert script.agent_calls == 4  # each scenario settled after two trials

    merged = merge(pytester.path, "out")

    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert (
        "  Trials auto: 4 of at most 12 run (95% confidence), 8 saved; scenario-0: 2, above "
        "the threshold; scenario-1: 2, above the threshold"
    ) in merged.stdout
    # A shard holding a trial past the maximum is refused, naming the setting.
    [shard] = sorted((pytester.path / "out").glob("*/shard-1-of-2.jsonl"))
    lines = shard.read_text().splitlines()
    last = [json.loads(line) for line in lines if json.loads(line)["record"] == "trial"][-1]
    extra = [json.dumps({**last, "trial": number}) for number in range(3, 8)]
    shard.write_text("\n".join([*lines, *extra]) + "\n")
    refused = merge(pytester.path, "out")
    assert refused.returncode == 2
    assert refused.stderr.endswith(
        f"trial 7 of skills/s::{last['scenario']}, but the shards ran with trials: auto, "
        "at most 6\n"
    )


def test_under_xdist_each_scenario_stops_on_its_own_worker(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"a": 10}, "scenario-1": {"a": 10}})
    script.by_context["ctx scenario-1"] = {"a": (False, "missing")}

    result = pytester.runpytest("skills/s", *_auto_args(endpoint.base_url, "-n", "2"))

    assert result.ret == pytest.ExitCode.TESTS_FAILED  # scenario-1 scores 0 %
    # Six passes never prove the threshold of 95 % (low end 6 / 12.6 = 48 %); two failures put
    # the high end at 6.6 / 8.6 = 77 %, below it.
    assert script.agent_calls == 8
    settled = {r["scenario"]: r["auto_trials"]["settled"] for r in _log_records(pytester.path)[1:]}
    assert settled == {"scenario-0": "", "scenario-1": "below"}
    result.stdout.fnmatch_lines(
        ["  Trials auto: 8 of at most 12 run (95% confidence), 4 saved; scenario-0: 6, not "
         "settled at the maximum; scenario-1: 2, below the threshold"]
    )  # fmt: skip
