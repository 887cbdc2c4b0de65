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
from tests.support.evals import EvalScript, eval_args, reports_under, write_scenario, write_skill

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


def _sandbox_args(base_url: str, image: str) -> tuple[str, ...]:
    return (
        *eval_args(base_url),
        "--eval-sandbox-image",
        image,
        "--eval-sandbox-mounts",
        "none",
    )


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
        "--eval-validate", "skills", *_sandbox_args(endpoint.base_url, standin_image), "-v"
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
        "--eval-validate", "skills", *_sandbox_args(endpoint.base_url, standin_image)
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
        "--eval-validate", "skills", *_sandbox_args(endpoint.base_url, standin_image)
    )

    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["*the solution scores 67%; it misses: summary: notes.md does not match '^## Summary$'*"]
    )
