"""How the agent worked, end to end: a stand-in for Claude Code (which prints its events as
Claude Code's ``stream-json`` does) answers a scenario; the judge reads its final answer, and
the run log keeps its transcript, secrets masked. A model backend's answer is one turn."""

from __future__ import annotations

import csv
import io
import json
import os
import stat
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_skill

SECRET = "sk-transcript-secret-0123456789abcdef"

EVENTS = [
    {"type": "system", "subtype": "init", "session_id": "s-1", "model": "m"},
    {
        "type": "assistant",
        "message": {
            "content": [
                {"type": "text", "text": "Reading the skill first."},
                {"type": "tool_use", "id": "t1", "name": "Skill", "input": {"skill": "s"}},
            ]
        },
        "parent_tool_use_id": None,
    },
    {
        "type": "user",
        "message": {
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": f"token {SECRET}"},
            ]
        },
        "parent_tool_use_id": None,
    },
    {
        "type": "assistant",
        "message": {
            "content": [
                {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "ls"}},
            ]
        },
        "parent_tool_use_id": None,
    },
    {
        "type": "user",
        "message": {
            "content": [
                {"type": "tool_result", "tool_use_id": "t2", "content": "nope", "is_error": True}
            ]
        },
        "parent_tool_use_id": None,
    },
    {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": "The final answer, long enough to be judged on its own merits.",
        "num_turns": 2,
        "duration_ms": 1500,
        "usage": {"input_tokens": 900, "output_tokens": 30},
    },
]


@pytest.fixture
def claude_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``claude`` executable first on PATH that reads its prompt and prints ``EVENTS``."""
    folder = tmp_path / "bin"
    folder.mkdir()
    events = folder / "events.jsonl"
    events.write_text("".join(json.dumps(event) + "\n" for event in EVENTS))
    claude = folder / "claude"
    claude.write_text(f"#!/bin/sh\ncat > /dev/null\ncat '{events}'\n")
    claude.chmod(claude.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return claude


def _run_claude(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, *extra: str
) -> pytest.RunResult:
    """The skill ``s`` answered by the ``claude`` on PATH and judged by the endpoint."""
    return pytester.runpytest_subprocess(
        "skills/s",
        "--eval-backend", "claude",
        "--eval-judge-backend", "http",
        "--eval-base-url", endpoint.base_url,
        *extra,
    )  # fmt: skip


def _trial_records(root: Path) -> list[dict]:
    [log] = (root / ".openkata" / "runs").glob("*.jsonl")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    return [record for record in records if record["record"] == "trial"]


def test_an_agents_events_become_its_transcript_and_the_judge_reads_its_final_answer(
    pytester: pytest.Pytester,
    claude_on_path: Path,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    monkeypatch.setenv("OPENKATA_EVAL_HTTP_API_KEY", SECRET)

    result = _run_claude(pytester, endpoint)

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    judged = str(endpoint.requests[-1].json["messages"][-1]["content"])
    assert "The final answer, long enough to be judged" in judged
    assert '"type": "result"' not in judged  # the judge reads the answer, not the events
    [trial] = _trial_records(pytester.path)
    transcript = trial["trace"]["transcript"]
    assert transcript["source"] == "claude stream-json"
    assert [(s["kind"], s["tool"] or s["role"], s["status"]) for s in transcript["steps"]] == [
        ("message", "assistant", ""),
        ("tool_call", "Skill", "ok"),
        ("tool_call", "Bash", "error"),
    ]
    assert transcript["skills_loaded"] == [{"name": "s", "subagent": ""}]
    assert (transcript["turns"], transcript["input_tokens"], transcript["output_tokens"]) == (
        2,
        900,
        30,
    )
    assert trial["trace"]["output"] == EVENTS[-1]["result"]
    log_text = next((pytester.path / ".openkata" / "runs").glob("*.jsonl")).read_text()
    assert SECRET not in log_text  # masked in the tool result too
    assert "token ***" in transcript["steps"][1]["result"]


def test_a_repeat_answered_from_the_cache_keeps_the_transcript(
    pytester: pytest.Pytester,
    claude_on_path: Path,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    first = _run_claude(pytester, endpoint)
    claude_on_path.write_text("#!/bin/sh\nexit 3\n")  # a live call now would fail
    second = _run_claude(pytester, endpoint)

    assert first.ret == second.ret == pytest.ExitCode.OK, second.stdout.str()
    logs = sorted((pytester.path / ".openkata" / "runs").glob("*.jsonl"))
    transcripts = [
        next(
            json.loads(line)["trace"]["transcript"]
            for line in log.read_text().splitlines()
            if json.loads(line)["record"] == "trial"
        )
        for log in logs
    ]
    assert len(transcripts) == 2
    assert transcripts[0] == transcripts[1]


def test_a_model_backends_answer_is_a_one_turn_transcript(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})

    pytester.runpytest_subprocess("skills/s", *eval_args(endpoint.base_url))

    [trial] = _trial_records(pytester.path)
    transcript = trial["trace"]["transcript"]
    assert transcript["source"] == "direct"
    assert transcript["turns"] == 1
    assert [(s["role"], s["text"]) for s in transcript["steps"]] == [
        ("assistant", script.agent_answer)
    ]


def test_an_agent_that_prints_no_events_has_no_transcript_and_its_output_is_its_answer(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    answer = "A plain answer from a command, long enough to be judged on its merits."

    result = pytester.runpytest_subprocess(
        "skills/s",
        "--eval-backend", "command",
        "--eval-agent-command", f"cat > /dev/null; echo '{answer}'",
        "--eval-judge-backend", "http",
        "--eval-base-url", endpoint.base_url,
    )  # fmt: skip

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    [trial] = _trial_records(pytester.path)
    assert trial["trace"]["transcript"] is None
    assert trial["trace"]["output"] == answer + "\n"  # as the command printed it


def test_a_failed_criterions_report_names_the_agents_last_tool_calls(
    pytester: pytest.Pytester,
    claude_on_path: Path,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    script.verdicts["x"] = (False, "x was not done")

    result = _run_claude(pytester, endpoint)

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*- last tool calls -*",
            'Skill {"skill": "s"} -> ok',
            'Bash {"command": "ls"} -> error',
        ]
    )


def test_the_skills_activation_is_reported_per_scenario_and_checked(
    pytester: pytest.Pytester,
    claude_on_path: Path,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    checks = [
        {"name": "loads-it", "description": "loads s", "max_score": 2, "type": "skill_activated"},
        {
            "name": "never-it",
            "description": "does not load s",
            "max_score": 2,
            "type": "skill_activated",
            "activated": False,
        },
    ]
    scenario_dir = pytester.path / "skills" / "s" / "evals" / "scenario-a"
    (scenario_dir / "checks.json").write_text(json.dumps(checks))

    result = _run_claude(
        pytester,
        endpoint,
        "--eval-output", "out/",
        "--eval-threshold", "0",
        "--eval-csv", "rows.csv",
        "--junitxml", "junit.xml",
    )  # fmt: skip

    result.stdout.fnmatch_lines(["  Skill loaded in 1 of 1 trial"])
    [report] = (pytester.path / "out").glob("*.json")
    [entry] = json.loads(report.read_text())["scenarios"]
    assert entry["skill_activation"] == {"loaded": 1, "known": 1, "trials": 1}
    rows = list(csv.DictReader(io.StringIO((pytester.path / "rows.csv").read_text())))
    assert {row["skill_activation"] for row in rows} == {"loaded"}
    assert len(rows) == 3  # the judge's criterion and the two checks
    cases = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    [case] = [case for case in cases if case.get("name") == "scenario-a"]
    properties = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert properties["openkata_skill_activation"] == "1/1/1"
    verdicts = {c["name"]: c["pass"] for c in entry["criteria"]}
    assert verdicts == {"x": True, "loads-it": True, "never-it": False}


def test_a_model_backends_run_says_nothing_of_activation(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})

    result = pytester.runpytest_subprocess(
        "skills/s",
        *eval_args(endpoint.base_url),
        "--eval-output", "out/",
        "--eval-csv", "rows.csv",
        "--junitxml", "junit.xml",
    )  # fmt: skip

    assert "Skill loaded" not in result.stdout.str()
    [report] = (pytester.path / "out").glob("*.json")
    [entry] = json.loads(report.read_text())["scenarios"]
    assert "skill_activation" not in entry
    [row] = csv.DictReader(io.StringIO((pytester.path / "rows.csv").read_text()))
    assert row["skill_activation"] == "unknown"
    junit = (pytester.path / "junit.xml").read_text()
    assert "openkata_score" in junit
    assert "skill_activation" not in junit


HOSTILE_TEXT = "\x1b[2J\x1b]0;owned\x07 nul\x00 line\u2028sep </details><b id=injected>x</b>"


def test_hostile_text_in_a_transcript_survives_the_terminal_the_log_and_the_reports(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hostile = [
        {
            "type": "assistant",
            "message": {
                "content": [
                    {"type": "text", "text": HOSTILE_TEXT * 2000},
                    {
                        "type": "tool_use",
                        "id": "t1",
                        "name": HOSTILE_TEXT,
                        "input": {"a": HOSTILE_TEXT},
                    },
                ]
            },
        },
        {
            "type": "user",
            "message": {
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": HOSTILE_TEXT * 500}
                ]
            },
        },
        {
            "type": "result",
            "subtype": "success",
            "result": "An answer long enough to be judged here.",
        },
    ]
    folder = tmp_path / "hostile-bin"
    folder.mkdir()
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in hostile))
    claude = folder / "claude"
    claude.write_text(f"#!/bin/sh\ncat > /dev/null\ncat '{folder / 'events.jsonl'}'\n")
    claude.chmod(claude.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    script.verdicts["x"] = (False, "not done")

    result = _run_claude(
        pytester,
        endpoint,
        "--eval-html",
        "r.html",
        "--eval-markdown",
        "r.md",
        "--eval-csv",
        "r.csv",
    )

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    terminal = result.stdout.str()
    assert "\x1b" not in terminal
    assert "\x00" not in terminal
    assert "\u2028" not in terminal
    assert "\\x1b[2J" in terminal  # the last tool calls, shown as escapes
    [log] = (pytester.path / ".openkata" / "runs").glob("*.jsonl")
    lines = log.read_text().split("\n")
    assert all(json.loads(line) for line in lines if line)  # one record per line still
    [trial] = _trial_records(pytester.path)
    step = trial["trace"]["transcript"]["steps"][0]
    assert len(step["text"]) < 5000
    assert step["text"].endswith("more characters cut]")
    page = (pytester.path / "r.html").read_text()
    assert "<b id=injected>" not in page
    assert "&lt;b id=injected&gt;" in page
    assert (pytester.path / "r.md").is_file()
    assert (pytester.path / "r.csv").is_file()
