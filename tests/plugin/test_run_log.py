"""The run log and what the judge judged in pytest's own reports, through pytester against a
real scripted endpoint."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.core.reporting import Run
from pytest_openkata.core.runlog import SCHEMA_VERSION, read_run_log, skill_summaries
from pytest_openkata.providers.reporters.runlog import RunLogReporter
from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_skill
from tests.support.results import reported

SECRET = "sk-test-0123456789abcdef"


def _logs(root: Path) -> list[Path]:
    return sorted((root / ".openkata" / "runs").glob("*.jsonl"))


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_run_writes_one_log_with_every_trial_its_verdicts_answers_and_digests(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 10, "y": 5}, "scenario-b": {"z": 3}})
    script.verdicts["y"] = (False, "y was ignored")
    script.agent_answer = "An answer from the scripted agent that says enough to be judged."

    result = pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url), "--eval-trials", "2", "-p", "no:randomly"
    )

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    [log] = _logs(pytester.path)
    result.stdout.fnmatch_lines([f"run log: .openkata/runs/{log.name}"])
    head, *trials = _records(log)
    assert (head["record"], head["schema"]) == ("run", SCHEMA_VERSION)
    assert (head["complete"], head["threshold"]) == (True, 95)
    assert (head["settings"]["agent"], head["settings"]["trials"]) == ("http", 2)
    assert [(t["scenario"], t["trial"], t["arm"]) for t in trials] == [
        ("scenario-a", 1, ""),
        ("scenario-a", 2, ""),
        ("scenario-b", 1, ""),
        ("scenario-b", 2, ""),
    ]
    first = trials[0]
    assert (first["skill"], first["skill_dir"]) == ("s", "skills/s")
    assert first["task"] == "Do the task of scenario-a.\n"
    assert set(first["digests"]) >= {"prompt", "task", "criteria", "inputs"}
    verdicts = {c["name"]: (c["passed"], c["reason"], c["score"]) for c in first["criteria"]}
    assert verdicts == {"x": (True, "ok", 10), "y": (False, "y was ignored", 0)}
    [vote] = first["trace"]["answers"]["judge"]
    assert vote["vote"] == 1
    assert vote["verdicts"]["y"] == {"pass": False, "reason": "y was ignored"}
    assert first["trace"]["output"] == script.agent_answer
    assert (first["usage"]["agent"]["calls"], first["usage"]["judge"]["calls"]) == (1, 1)
    assert str(pytester.path) not in log.read_text()  # no machine paths


def test_the_secret_of_the_settings_never_reaches_the_log(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    monkeypatch.setenv("OPENKATA_EVAL_HTTP_API_KEY", SECRET)
    script.agent_answer = f"The key is {SECRET}, which is long enough an answer to be judged."

    pytester.runpytest("skills/s", *eval_args(endpoint.base_url))

    [log] = _logs(pytester.path)
    assert SECRET not in log.read_text()


def test_the_log_reads_back_as_the_run_scored_it(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 10, "y": 5}, "scenario-b": {"z": 3}})
    script.verdicts["y"] = (False, "no")

    pytester.runpytest("skills/s", *eval_args(endpoint.base_url), "--eval-output", "out/")

    [log] = _logs(pytester.path)
    [summary] = skill_summaries(read_run_log(log))
    [report] = (pytester.path / "out").glob("*.json")
    written = json.loads(report.read_text())
    assert summary.overall == pytest.approx(written["overall_percentage"])
    assert [r.percentage for r in summary.results] == pytest.approx(
        [s["percentage"] for s in written["scenarios"]]
    )
    assert summary.passed is False
    assert written["pass"] is False


def test_under_xdist_the_controller_writes_one_log_of_every_scenario(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {f"scenario-{n}": {"x": 1} for n in range(4)})

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url), "-n", "2")

    assert result.ret == pytest.ExitCode.OK
    [log] = _logs(pytester.path)
    scenarios = [r["scenario"] for r in _records(log)[1:]]
    assert scenarios == [f"scenario-{n}" for n in range(4)]


def test_a_run_stopped_early_still_writes_its_log_marked_incomplete(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}, "scenario-b": {"x": 1}})
    pytester.makeconftest(
        """
        import pytest

        def pytest_runtest_logfinish(nodeid):
            if nodeid.endswith("scenario-a"):
                raise KeyboardInterrupt
        """
    )

    result = pytester.runpytest_subprocess(
        "skills/s", *eval_args(endpoint.base_url), "-p", "no:randomly"
    )

    assert result.ret == pytest.ExitCode.INTERRUPTED
    [log] = _logs(pytester.path)
    head, *trials = _records(log)
    assert head["complete"] is False
    assert [t["scenario"] for t in trials] == ["scenario-a"]


def test_log_dir_off_writes_no_log_and_log_keep_keeps_the_newest(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    pytester.runpytest("skills/s", *eval_args(endpoint.base_url), "--eval-log-dir", "off")
    assert _logs(pytester.path) == []

    folder = pytester.path / ".openkata" / "runs"
    folder.mkdir(parents=True)
    old = [folder / f"2020010{day}T000000Z.jsonl" for day in range(1, 4)]
    for path in old:
        path.write_text("{}\n")
    (folder / "notes.txt").write_text("not a log")

    pytester.runpytest("skills/s", *eval_args(endpoint.base_url), "--eval-log-keep", "2")

    kept = _logs(pytester.path)
    assert len(kept) == 2
    assert kept[0] == old[-1]  # the newest old one, then this run's
    assert (folder / "notes.txt").exists()


def test_a_log_is_never_written_over_another(tmp_path: Path) -> None:
    settings = EvalSettings(log_dir="logs")
    moment = datetime(2026, 12, 1, 17, 30, 5, tzinfo=UTC)
    taken = tmp_path / "logs" / "20261201T173005Z.jsonl"
    taken.parent.mkdir()
    taken.write_text("an earlier log\n")
    run = Run(summaries=(), settings=settings, finished_at=moment, rootdir=tmp_path)

    run = reported(RunLogReporter(), run)

    assert taken.read_text() == "an earlier log\n"
    assert run.written["run log"] == taken.with_name("20261201T173005Z-2.jsonl")
    assert _records(run.written["run log"])[0]["finished_at"] == "2026-12-01T17:30:05Z"


def test_a_failed_scenario_shows_the_agent_output_in_pytest_and_junit(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}, "scenario-b": {"x": 1}})
    script.by_context = {}
    script.agent_answer = "The agent's own words: MARKER-OUTPUT, judged and found wanting."
    script.verdicts["x"] = (False, "wanting")

    result = pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url), "-rA", "--junitxml", "junit.xml"
    )

    result.stdout.fnmatch_lines(["*- agent output -*", "*MARKER-OUTPUT*"])
    # Once per scenario, not again for each of its failed criteria.
    assert result.stdout.str().count("MARKER-OUTPUT") == 2
    root = ET.parse(pytester.path / "junit.xml").getroot()
    outs = {
        case.get("name"): case.findtext("system-out") or ""
        for case in root.iter("testcase")
        if case.get("name", "").startswith("scenario-")
    }
    assert set(outs) == {"scenario-a", "scenario-b"}
    assert all(
        "----- agent output -----" in out and "MARKER-OUTPUT" in out for out in outs.values()
    )


def test_an_errored_scenario_shows_what_the_agent_printed_and_a_passing_one_nothing(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}, "scenario-b": {"x": 1}})
    script.agent_answer = "A passing answer, MARKER-PASSING, long enough to be judged well."
    script.agent_reply_when = {
        "scenario-b": Reply.chat("MARKER-ERRORED: the agent answered, the judge will not.")
    }
    # One scenario at a time, in order: scenario-a's judge call, then scenario-b's two
    # attempts, which answer no JSON: the trial errors after the agent answered.
    script.judge_replies = ['[{"name": "x", "pass": true, "reason": "ok"}]', "nonsense", "nonsense"]

    result = pytester.runpytest(
        "skills/s",
        *eval_args(endpoint.base_url),
        "-rA",
        "-p",
        "no:randomly",
        "--eval-concurrency",
        "1",
    )

    text = result.stdout.str()
    assert "scenario error: judge" in text
    assert "MARKER-ERRORED" in text.split("- agent output -")[1]
    assert "MARKER-PASSING" not in text


def test_control_characters_in_reasons_and_output_leave_the_junit_file_readable(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    script.agent_answer = "Coloured \x1b[31mred\x1b[0m output of an agent CLI, judged wanting."
    script.verdicts["x"] = (False, "the reason quotes \x1b[31mred\x1b[0m")

    pytester.runpytest("skills/s", *eval_args(endpoint.base_url), "--junitxml", "junit.xml")

    root = ET.parse(pytester.path / "junit.xml").getroot()  # an XML 1.0 parser reads it
    cases = {case.get("name"): case for case in root.iter("testcase")}
    reason = {p.get("name"): p.get("value") for p in cases["x"].iter("property")}["reason"]
    assert reason == "the reason quotes #x1B[31mred#x1B[0m"
    assert cases["x"].findtext("failure") == reason
    # The agent's output, as pytest shows it: control characters as their escapes.
    assert "Coloured \\x1b[31mred" in (cases["scenario-a"].findtext("system-out") or "")
