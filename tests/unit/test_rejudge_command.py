"""The pytest command line of ``python -m pytest_openkata rejudge LOG``: the log's scenarios,
and what the log says of its answers unless the command line says otherwise."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_openkata.commands.rejudge import pytest_arguments
from pytest_openkata.core.runlog import parse_run_log

HEAD = {
    "record": "run",
    "schema": 1,
    "finished_at": "2026-12-01T10:00:00Z",
    "settings": {
        "agent": "http",
        "model": "agent-m",
        "model_label": "",
        "judge": "http",
        "judge_model": "judge-a",
        "baseline": "without-skill",
    },
}


def _trial(scenario: str, arm: str = "") -> dict[str, object]:
    return {
        "record": "trial",
        "skill": "s",
        "skill_dir": "skills/s",
        "scenario": scenario,
        "description": "",
        "skill_scenarios": ["scenario-a", "other-format"],
        "arm": arm,
        "trial": 1,
        "criteria": None,
        "score": 0,
        "max_score": 0,
        "percentage": 0.0,
        "passed": False,
        "error": "agent: down",
        "usage": {"agent": {}, "judge": {}},
    }


def test_the_log_gives_the_scenarios_agent_judge_and_baseline_unless_the_command_line_does(
    tmp_path: Path,
) -> None:
    (tmp_path / "skills" / "s" / "evals" / "scenario-a").mkdir(parents=True)
    records = [HEAD, _trial("scenario-a"), _trial("scenario-a", "without-skill")]
    records.append(_trial("other-format"))  # not a folder of evals/: its skill is collected
    run = parse_run_log("".join(json.dumps(r) + "\n" for r in records))

    arguments = pytest_arguments(
        Path("run.jsonl"), run, ["--rootdir", str(tmp_path), "--eval-judge-model=judge-b"]
    )

    assert arguments == [
        *("--eval-rejudge", "run.jsonl"),
        *("--eval-backend", "http", "--eval-model", "agent-m", "--eval-judge-backend", "http"),
        *("--eval-baseline", "without-skill"),
        str(tmp_path / "skills" / "s" / "evals" / "scenario-a"),
        str(tmp_path / "skills" / "s"),
        *("--rootdir", str(tmp_path), "--eval-judge-model=judge-b"),
    ]
