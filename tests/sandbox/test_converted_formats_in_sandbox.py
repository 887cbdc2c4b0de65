"""Harbor and Skillgrade scenarios, as they are and converted, run in a real engine as the
plugin runs any scenario: the stand-in agent acts on its task's ``STANDIN:`` lines, the
verifier's and the grader's files reach the checks only after the agent finished, and the
judge is the scripted loopback endpoint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, sandbox_args
from tests.support.format_layouts import SKILL_MD, write

TEST_SH = (
    "#!/bin/sh\n"
    'if [ "$(cat answer.txt 2>/dev/null)" = "$(cat /tests/expected.txt)" ]; then\n'
    "  echo 1 > /logs/verifier/reward.txt\nelse\n  echo 0 > /logs/verifier/reward.txt\nfi\n"
)
CHECK_SH = (
    '#!/bin/sh\nif [ -f sorted.csv ]; then echo \'{"score": 1, "details": "made"}\';\n'
    'else echo \'{"score": 0, "details": "missing"}\'; fi\n'
)


def _harbor_task(dataset: Path, name: str, instruction: str) -> None:
    task = dataset / name
    write(task / "instruction.md", instruction)
    write(task / "task.toml", "[verifier]\ntimeout_sec = 60.0\n")
    write(task / "tests" / "test.sh", TEST_SH)
    write(task / "tests" / "expected.txt", "42\n")


def _convert(source: Path, dest: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest_openkata", "convert", str(source), "--to", str(dest)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def _scenarios(out: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for path in sorted(out.glob("*.json")):
        for entry in json.loads(path.read_text())["scenarios"]:
            found[entry["name"]] = entry
    return found


def _write_sources(source: Path) -> Path:
    """Two Harbor tasks under ``source/tasks`` and a Skillgrade skill ``source/csv-tidy``."""
    _harbor_task(
        source / "tasks", "answered", "Write 42 to answer.txt.\nSTANDIN: write answer.txt 42\n"
    )
    _harbor_task(source / "tasks", "unanswered", "Write 42 to answer.txt.\n")
    skill = source / "csv-tidy"
    write(skill / "SKILL.md", SKILL_MD)
    write(skill / "graders" / "check.sh", CHECK_SH)
    task = {
        "name": "sort-rows",
        "instruction": "Sort the rows into sorted.csv.\nSTANDIN: write sorted.csv al,2\n",
        "graders": [
            {"type": "deterministic", "run": "sh graders/check.sh", "weight": 0.5},
            {"type": "llm_rubric", "rubric": "The rows are sorted.", "weight": 0.5},
        ],
    }
    write(skill / "eval.yaml", yaml.safe_dump({"version": "1", "tasks": [task]}))
    return skill


def _verdicts(scenarios: dict[str, dict[str, Any]]) -> dict[str, dict[str, bool]]:
    return {
        name: {c["name"]: c["pass"] for c in entry["criteria"]} for name, entry in scenarios.items()
    }


VERDICTS = {
    "scenario-answered": {"tests/test.sh": True},
    "scenario-unanswered": {"tests/test.sh": False},
    "scenario-sort-rows": {"llm_rubric 2": True, "deterministic 1": True},
}


def test_harbor_tasks_and_a_skillgrade_eval_run_as_they_are_in_the_engine(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
) -> None:
    harbor = pytester.path / "skills" / "harbor"
    write(harbor / "SKILL.md", SKILL_MD)
    skill = _write_sources(harbor)
    skill.rename(pytester.path / "skills" / "csv-tidy")

    pytester.runpytest(
        "skills", *sandbox_args(endpoint.base_url, standin_image, "--eval-output", "out/")
    )

    assert _verdicts(_scenarios(pytester.path / "out")) == VERDICTS
    assert script.judge_calls == 1
    assert not list(pytester.path.glob("skills/*/evals/.openkata-formats-*"))


def test_converted_harbor_and_skillgrade_scenarios_run_in_the_engine(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
) -> None:
    source = pytester.path / "src"
    skill = _write_sources(source)
    for name in ("harbor", "skillgrade"):
        write(pytester.path / "skills" / name / "SKILL.md", SKILL_MD)
    _convert(source / "tasks", pytester.path / "skills" / "harbor" / "evals")
    _convert(skill, pytester.path / "skills" / "skillgrade" / "evals")

    pytester.runpytest(
        "skills", *sandbox_args(endpoint.base_url, standin_image, "--eval-output", "out/")
    )

    scenarios = _scenarios(pytester.path / "out")
    assert _verdicts(scenarios) == VERDICTS
    unanswered = {c["name"]: c for c in scenarios["scenario-unanswered"]["criteria"]}
    assert "reward: 0" in unanswered["tests/test.sh"]["reason"]
    assert script.judge_calls == 1  # only the Skillgrade task has a judged criterion
