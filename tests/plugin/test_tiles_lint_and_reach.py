"""Lint of tiles and free-named scenarios, and the run's warnings about files that never
reach the agent, through pytester."""

from __future__ import annotations

import json

import pytest

from tests.architecture.test_core_without_pytest import run_without_pytest
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_skill
from tests.support.tiles import TILE_JSON, write_tile

SOUND = {
    "checkout-flow": {
        "criteria": {"spans": 100},
        "options": {"sandbox": False, "description": "exports spans"},
    }
}


def test_a_tile_lints_as_one_unit_and_its_free_named_scenarios_too(
    pytester: pytest.Pytester,
) -> None:
    write_tile(pytester.path, SOUND)

    result = pytester.runpytest("tiles", "--eval-lint", "-v")

    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["*tiles/observability::skill PASSED*", "*tiles/observability/evals::checkout-flow PASSED*"]
    )


def test_a_broken_tile_json_fails_the_tiles_lint_item_naming_the_key(
    pytester: pytest.Pytester,
) -> None:
    tile = write_tile(pytester.path, SOUND)
    (tile / "tile.json").write_text(json.dumps({**TILE_JSON, "docs": "docs/missing.md"}))

    result = pytester.runpytest("tiles", "--eval-lint")

    result.stdout.fnmatch_lines(["*tile.json: docs: 'docs/missing.md': no such file in the tile*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_tile_without_a_version_is_told_why_it_matters(pytester: pytest.Pytester) -> None:
    tile = write_tile(pytester.path, SOUND)
    (tile / "tile.json").write_text(
        json.dumps({k: v for k, v in TILE_JSON.items() if k != "version"})
    )

    result = pytester.runpytest("tiles", "--eval-lint", "--eval-lint-strict")

    result.stdout.fnmatch_lines(['*tile.json*tile.json has no "version"*'])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_link_from_a_tiles_skill_outside_its_context_is_named_in_lint_and_in_a_run(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    tile = write_tile(pytester.path, SOUND)
    skill_md = tile / "skills/otel/tracing/SKILL.md"
    skill_md.write_text(
        "# Tracing\n\nSee [examples](EXAMPLES.md), [spans](references/spans.md) and the "
        "[docs](../../../docs/setup.md).\n"
    )

    lint = pytester.runpytest("tiles", "--eval-lint")
    run = pytester.runpytest("tiles", *eval_args(endpoint.base_url))

    message = (
        "skills/otel/tracing/SKILL.md links to skills/otel/tracing/EXAMPLES.md, which never "
        "reaches the agent's prompt*"
    )
    for result in (lint, run):
        result.stdout.fnmatch_lines(["*tiles/observability/skills/otel/tracing/SKILL.md:3: *"])
        result.stdout.fnmatch_lines([f"*EvalLintWarning: [[]unreached-files[]] {message}"])
        assert "spans.md, which never" not in result.stdout.str()
        assert "setup.md, which never" not in result.stdout.str()
    run.assert_outcomes(passed=1, warnings=1)


def test_a_run_warns_about_files_beside_task_md_and_unreachable_links_of_a_skill(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-0": {"a": 100}})
    (skill / "rules").mkdir()
    (skill / "rules" / "naming.md").write_text("Name things well.\n")
    (skill / "SKILL.md").write_text("# s\n\nFollow [the naming rules](rules/naming.md).\n")
    (skill / "evals" / "scenario-0" / "app.py").write_text("print('hi')\n")
    (skill / "evals" / "scenario-0" / "capability.txt").write_text("tests naming\n")

    result = pytester.runpytest("skills", *eval_args(endpoint.base_url))

    result.assert_outcomes(passed=1, warnings=2)
    result.stdout.fnmatch_lines(
        [
            "*EvalLintWarning: [[]unreached-files[]] SKILL.md links to rules/naming.md, which "
            "never reaches the agent's prompt: move it under references/ (and update the link)",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*EvalLintWarning: [[]unreached-files[]] evals/scenario-0/app.py never reaches the "
            "agent*move it under inputs/*"
        ]
    )
    assert "capability.txt never" not in result.stdout.str()


def test_evaluate_runs_a_tile_as_pytest_does(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_tile(pytester.path, SOUND)

    result = run_without_pytest(
        f"""
        from pytest_openkata import evaluate
        (summary,) = evaluate(
            "tiles", backend="http", http={{"base_url": {endpoint.base_url!r}}}
        )
        print(summary.name, summary.complete, [r.name for r in summary.results])
        """,
        cwd=pytester.path,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "acme/observability True ['checkout-flow']"
    reports = sorted(pytester.path.glob("tiles/observability/evals/results/*/*.json"))
    assert len(reports) == 1
