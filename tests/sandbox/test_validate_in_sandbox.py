"""``pytest --eval-validate`` on sandboxed scenarios, in real containers: ``solution/solve.sh``
runs in the workspace in place of the agent and the checks grade what it left; an empty agent
changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import docker
import pytest

from pytest_openkata.providers.sandboxes.docker import MANAGED
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import (
    EvalScript,
    eval_args,
    reports_under,
    sandbox_args,
    write_scenario,
    write_skill,
)

CHECKS = [
    {"name": "notes-file", "description": "notes.md is there", "max_score": 3,
     "type": "file", "path": "notes.md"},
    {"name": "summary", "description": "a summary heading", "max_score": 2,
     "type": "file_regex", "path": "notes.md", "pattern": "^## Summary$"},
    {"name": "input-kept", "description": "the input is untouched", "max_score": 1,
     "type": "diff", "unchanged": ["data.txt"]},
]  # fmt: skip
# It reads an input and a file of its own folder, as a real solution script may.
SOLVE = """set -eu
cat data.txt > notes.md
cat "$SOLUTION_DIR/summary.md" >> notes.md
"""


def _scenario(root: Path, solve: str | None) -> Path:
    skill = write_skill(root, "s", {})
    folder = write_scenario(skill, "scenario-0", {}, sandbox=True, inputs={"data.txt": "facts\n"})
    (folder / "criteria.json").write_text('{"context": "c", "checklist": []}')
    (folder / "checks.json").write_text(json.dumps(CHECKS))
    if solve is not None:
        (folder / "solution").mkdir()
        (folder / "solution" / "solve.sh").write_text(solve)
        (folder / "solution" / "summary.md").write_text("## Summary\n")
    return folder


def test_a_sandboxed_solution_runs_in_place_of_the_agent_and_scores_100(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
    docker_client: docker.DockerClient,
) -> None:
    _scenario(pytester.path, SOLVE)

    result = pytester.runpytest(
        "--eval-validate", "skills", *sandbox_args(endpoint.base_url, standin_image), "-v"
    )

    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*SUBPASSED[[]solution scores 100%[]]*",
            "*SUBPASSED[[]empty agent scores below 50%[]]*",
            # The empty agent changed nothing: only "the input is untouched" holds.
            "skills/s/evals::scenario-0: solution 100% ok; empty agent 17% ok; pass on nothing: "
            "input-kept",
        ]
    )
    assert script.agent_calls == 0  # no model was asked to be the agent
    assert script.judge_calls == 0  # an empty checklist: the checks alone grade it
    assert reports_under(pytester.path) == []
    assert docker_client.containers.list(all=True, filters={"label": f"{MANAGED}=true"}) == []


def test_a_solution_script_that_fails_is_a_validation_error(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
) -> None:
    _scenario(pytester.path, "echo 'cannot solve' >&2\nexit 3\n")

    result = pytester.runpytest(
        "--eval-validate", "skills", *sandbox_args(endpoint.base_url, standin_image)
    )

    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*validation error: solution: sandbox: solution: exit status 3*"])


def test_a_sandboxed_solution_that_leaves_work_undone_fails_with_what_it_missed(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
) -> None:
    _scenario(pytester.path, "cp data.txt notes.md\n")

    result = pytester.runpytest(
        "--eval-validate", "skills", *sandbox_args(endpoint.base_url, standin_image)
    )

    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["*the solution scores 67%; it misses: summary: notes.md does not match '^## Summary$'*"]
    )


SKILL_MD = "---\nname: notes\ndescription: Writes notes. Use when asked for notes.\n---\n"


def _notes_skill(root: Path) -> Path:
    skill = root / "skills" / "notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD)
    (skill / "CHANGELOG.md").write_text("# Changelog\n\n## [1.0.0] - 2026-11-01\n")
    return skill


def _notes_scenario(skill: Path, *, checklist: object, options: object, task: str) -> Path:
    folder = skill / "evals" / "scenario-0"
    folder.mkdir(parents=True)
    (folder / "task.md").write_text(task)
    (folder / "criteria.json").write_text(json.dumps(checklist))
    (folder / "scenario.json").write_text(json.dumps(options))
    return folder


def test_command_checks_do_not_see_the_solution_folder(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
) -> None:
    # A solution script holds what it removes or adds; the checks grep the workspace, which
    # must be what a real agent leaves: without the solution's folder.
    skill = _notes_skill(pytester.path)
    folder = _notes_scenario(
        skill,
        checklist={"context": "c", "checklist": []},
        options={"description": "d", "sandbox": True},
        task="Remove the leftover marker lines from `app.txt`.\n",
    )
    (folder / "inputs").mkdir()
    (folder / "inputs" / "app.txt").write_text("keep\nTODO: drop me\n")
    checks = [
        {"name": "no-todo", "description": "no TODO left", "max_score": 99,
         "type": "command", "run": "! grep -rq TODO ."},
        {"name": "control", "description": "app.txt has no TODO", "max_score": 1,
         "type": "command", "run": "! grep -q TODO app.txt"},
    ]  # fmt: skip
    (folder / "checks.json").write_text(json.dumps(checks))
    (folder / "solution").mkdir()
    (folder / "solution" / "solve.sh").write_text("sed -i '/TODO/d' app.txt\n")

    result = pytester.runpytest(
        "--eval-validate", "skills", *eval_args(endpoint.base_url),
        "--eval-sandbox-image", standin_image, "--eval-sandbox-mounts", "none",
    )  # fmt: skip

    result.stdout.fnmatch_lines(["skills/notes/evals::scenario-0: solution 100% ok; *"])
    result.assert_outcomes(passed=1)


def test_lint_reports_an_unchanged_glob_that_matches_no_workspace_file(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
) -> None:
    skill = _notes_skill(pytester.path)
    folder = _notes_scenario(
        skill,
        checklist={"context": "c", "checklist": []},
        options={"description": "d", "sandbox": True},
        task="Add a greeting to `app.txt`.\n",
    )
    (folder / "inputs").mkdir()
    (folder / "inputs" / "app.txt").write_text("hello\n")
    checks = [
        {"name": "app", "description": "app.txt changed", "max_score": 90,
         "type": "diff", "changed": ["app.txt"]},
        {"name": "config-kept", "description": "config untouched", "max_score": 10,
         "type": "diff", "unchanged": ["config.yaml"]},  # no such input
    ]  # fmt: skip
    (folder / "checks.json").write_text(json.dumps(checks))

    validate = pytester.runpytest(
        "--eval-validate", "skills", *eval_args(endpoint.base_url),
        "--eval-sandbox-image", standin_image, "--eval-sandbox-mounts", "none",
    )  # fmt: skip
    lint = pytester.runpytest("--eval-lint", "skills")

    validate.stdout.fnmatch_lines(["*unchanged: 'config.yaml' matches no file of the workspace*"])
    assert lint.ret == pytest.ExitCode.TESTS_FAILED, lint.stdout.str()
