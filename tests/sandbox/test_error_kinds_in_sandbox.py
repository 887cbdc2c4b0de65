"""Whose fault an error is decides where the report goes, in real containers: a check that
does not fit its scenario is the skill's own (published), an agent CLI that fails is not
(held back beside the run logs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import (
    EvalScript,
    reports_under,
    sandbox_args,
    write_scenario,
    write_skill,
)


def _skill(root: Path, broken_task: str, checks: list[dict[str, object]]) -> Path:
    skill = write_skill(root, "s", {"scenario-direct": {"d": 1}})
    folder = write_scenario(skill, "scenario-box", {"x": 1}, sandbox=True)
    folder.joinpath("task.md").write_text(broken_task)
    folder.joinpath("checks.json").write_text(json.dumps(checks))
    return skill


def test_a_check_that_fits_no_file_of_its_workspace_is_published_as_the_scenarios_error(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
) -> None:
    unchanged = {"name": "src-kept", "description": "sources untouched", "max_score": 1,
                 "type": "diff", "unchanged": ["src"]}  # fmt: skip
    _skill(pytester.path, "STANDIN: write notes.md done\n", [unchanged])

    result = pytester.runpytest("skills", *sandbox_args(endpoint.base_url, standin_image))

    result.assert_outcomes(passed=1, errors=1)
    (report,) = reports_under(pytester.path)
    box = next(
        s for s in json.loads(report.read_text())["scenarios"] if s["name"] == "scenario-box"
    )
    assert box["error_kind"] == "scenario"
    assert box["error"] == (
        "checks.json: [0] ('src-kept'): unchanged: 'src' matches no file of the workspace"
    )
    assert "Report not published" not in result.stdout.str()


def test_an_agent_cli_that_fails_holds_the_report_back(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
) -> None:
    output = {"name": "said", "description": "says done", "max_score": 1,
              "type": "output_regex", "pattern": "done"}  # fmt: skip
    _skill(pytester.path, "STANDIN: exit 7\n", [output])

    result = pytester.runpytest("skills", *sandbox_args(endpoint.base_url, standin_image))

    result.assert_outcomes(passed=1, errors=1)
    assert reports_under(pytester.path) == []
    (held,) = (pytester.path / ".openkata/runs/unpublished/s").rglob("*.json")
    box = next(s for s in json.loads(held.read_text())["scenarios"] if s["name"] == "scenario-box")
    assert box["error_kind"] == "infrastructure"
    assert box["error"].startswith("sandbox: kiro-cli: exit status 7")
    result.stdout.fnmatch_lines(["  Report not published: 1 scenario errored *"])
