"""Edge cases of the run log and the comparison with an earlier run, through pytester against
a real scripted endpoint: a malformed log to compare with, a run rooted at the skill folder."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_skill


def _logs(root: Path) -> list[Path]:
    return sorted((root / ".openkata" / "runs").glob("*.jsonl"))


def test_comparing_with_a_malformed_run_log_is_an_error_naming_it_not_a_crash(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    pytester.runpytest("skills/s", *eval_args(endpoint.base_url))
    [log] = _logs(pytester.path)
    head, trial = log.read_text().splitlines()
    broken = pytester.path / "broken.jsonl"
    broken.write_text(head + "\n" + json.dumps({**json.loads(trial), "trace": []}) + "\n")

    result = pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url), "--eval-compare", "broken.jsonl"
    )

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*--eval-compare: broken.jsonl*line 2*"])


def test_a_run_rooted_at_the_skill_folder_names_the_skill_in_its_csv(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})

    result = pytester.runpytest(
        "skills/s",
        *eval_args(endpoint.base_url),
        "--rootdir",
        str(skill),
        "--eval-csv",
        "rows.csv",
    )

    assert result.ret == pytest.ExitCode.OK
    rows = list(csv.DictReader((pytester.path / "rows.csv").read_text().splitlines()))
    assert [row["skill"] for row in rows] == ["s"]
