"""Re-judging a recorded run end to end with the real local model: a run's answers graded
again by another judge model with more votes, the agent's answers taken from the log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_openkata.local.model import LocalModelServer
from tests.support.evals import write_skill

pytestmark = pytest.mark.e2e


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_local_run_is_rejudged_with_another_judge_and_two_votes(
    pytester: pytest.Pytester, local_model: LocalModelServer
) -> None:
    write_skill(pytester.path, "notes", {"scenario-a": {"answers-the-task": 60, "is-brief": 40}})
    local = ["--eval-backend", "http", "--eval-base-url", local_model.base_url]
    pytester.runpytest("skills/notes", *local, "--eval-model", local_model.model)
    [source] = sorted((pytester.path / ".openkata" / "runs").glob("*.jsonl"))
    _head, recorded = _records(source)

    result = pytester.runpytest(
        "skills/notes",
        *local,
        *("--eval-model", local_model.model, "--eval-judge-model", "smollm2-second-judge"),
        *("--eval-judge-votes", "2", "--eval-rejudge", str(source)),
    )

    result.stdout.fnmatch_lines([f"Re-judged from run log {source.name} *smollm2*"])
    [new] = [log for log in (pytester.path / ".openkata" / "runs").glob("*.jsonl") if log != source]
    head, *rest = _records(new)  # then the trial, and the drift record (another judge)
    [trial] = [record for record in rest if record["record"] == "trial"]
    assert head["rejudged_from"]["log"] == source.name
    assert head["rejudged_from"]["judge_votes"] == 1
    assert head["settings"]["judge_model"] == "smollm2-second-judge"
    assert trial["error"] is None, trial["error"]
    assert trial["trace"]["output"] == recorded["trace"]["output"]
    # The recorded run's answer: its agent's calls are where it came from, not this run's.
    assert trial["recorded_agent"] == recorded["usage"]["agent"]
    assert (trial["usage"]["agent"]["calls"], trial["usage"]["agent"]["cached"]) == (0, 0)
    assert trial["usage"]["judge"]["calls"] == 2  # two live votes: nothing of judge 1 reused
    assert [c["votes"][1] for c in trial["criteria"]] == [2, 2]
