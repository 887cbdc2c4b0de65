"""Edges of tiles, free scenario names, categories and the new lint rules, each found by a
review as a bug and fixed: baselines at a git ref, normalised tile paths, Go-style keys,
partial runs, the catalogue, lint below a tile, warnings under xdist, multi-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.architecture.test_core_without_pytest import run_without_pytest
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_scenario, write_skill
from tests.support.tiles import TILE_JSON, write_tile

DIRECT = {"sandbox": False, "description": "a direct scenario"}


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


def _agent_prompts(endpoint: ScriptedEndpoint) -> list[str]:
    return [
        r.json["messages"][-1]["content"]
        for r in endpoint.requests
        if r.json["messages"][0]["role"] != "system"
    ]


# --- lint ----------------------------------------------------------------------------------


def test_lint_scenarios_rule_follows_the_scenario_names_setting(
    pytester: pytest.Pytester,
) -> None:
    skill = write_skill(pytester.path, "s", {})
    write_scenario(skill, "checkout-flow", {"a": 100})

    result = pytester.runpytest("skills", "--eval-lint", "--eval-scenario-names", "*", "-v")

    # The scenario is linted (the setting takes it) ...
    result.stdout.fnmatch_lines(["*skills/s/evals::checkout-flow PASSED*"])
    # ... yet the skill's scenarios rule says a run leaves it out.
    assert "a run leaves out checkout-flow" not in result.stdout.str()


def test_lint_scenario_description_counts_capability_txt(pytester: pytest.Pytester) -> None:
    tile = write_tile(
        pytester.path,
        {"checkout-flow": {"criteria": {"spans": 100}, "capability": "Exports spans.\n"}},
    )
    assert not (tile / "evals" / "checkout-flow" / "scenario.json").exists()

    result = pytester.runpytest("tiles", "--eval-lint")

    # capability.txt is the scenario's description in a run and in its report.
    assert "[scenario-description]" not in result.stdout.str()


def test_lint_skill_item_of_a_tile_is_selected_by_the_tiles_name(
    pytester: pytest.Pytester,
) -> None:
    write_tile(pytester.path, {"checkout-flow": {"criteria": {"spans": 100}, "options": DIRECT}})

    result = pytester.runpytest(
        "tiles", "--eval-lint", "-k", "skill:acme/observability", "--co", "-q"
    )

    result.stdout.fnmatch_lines(["*checkout-flow*"])
    # The tile's own item (which checks tile.json) is left out by its own name.
    result.stdout.fnmatch_lines(["*tiles/observability::skill*"])


# --- tile.json -----------------------------------------------------------------------------


def test_tile_json_keys_of_listed_entries_match_without_regard_to_case(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    tile_json = {
        **TILE_JSON,
        "skills": {"metrics": {"Path": "metrics/SKILL.md"}},
        "steering": {"house-style": {"Rules": "rules.md"}},
    }
    write_tile(
        pytester.path,
        {"c": {"criteria": {"a": 100}, "options": DIRECT}},
        tile_json={**tile_json, "Docs": "docs/index.md"},
    )

    result = pytester.runpytest("tiles", *eval_args(endpoint.base_url))

    # The top-level "Docs" is read as Go reads it; the entries' "Path" and "Rules" are not.
    result.assert_outcomes(passed=1)


def test_a_docs_path_with_dotdot_keeps_the_evals_and_readme_out_of_the_prompt(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    # "docs/../rules.md" is rules.md at the tile's root, whose folder is not listed.
    tile_json = {"name": "acme/observability", "docs": "docs/../rules.md"}
    write_tile(
        pytester.path,
        {"c": {"criteria": {"a": 100}, "options": DIRECT, "task": "T\n"}},
        tile_json=tile_json,
    )

    result = pytester.runpytest("tiles", *eval_args(endpoint.base_url))

    result.assert_outcomes(passed=1)
    [prompt] = _agent_prompts(endpoint)
    # The whole tile is listed instead, the scenario's criteria.json (the answer key) included.
    assert "criteria.json" not in prompt
    assert prompt == "--- rules.md ---\nAlways say which signal you change.\n\n\nT\n"


# --- baselines at a git ref ----------------------------------------------------------------


def test_a_tile_whose_tile_json_was_broken_at_the_baseline_ref_errors_the_baseline_arm(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    tile = write_tile(pytester.path, {"c": {"criteria": {"a": 100}, "options": DIRECT}})
    good = (tile / "tile.json").read_text()
    (tile / "tile.json").write_text('{"name": "acme/observability", "skills": {')
    _git(pytester.path, "init", "-q")
    _git(pytester.path, "add", "tiles")
    _git(pytester.path, "commit", "-q", "-m", "v1")
    _git(pytester.path, "tag", "v1")
    (tile / "tile.json").write_text(good)

    result = pytester.runpytest("tiles", *eval_args(endpoint.base_url, "--eval-baseline", "v1"))

    # As for an unknown ref: the scenario errors with the reason, naming the baseline.
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*baseline v1:*tile.json: not valid JSON*"])
    assert "INTERNALERROR" not in result.stdout.str()
    assert "Traceback" not in result.stdout.str()


def test_a_skill_with_a_tile_json_keeps_the_reference_prompt_at_a_ref_before_its_evals(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = pytester.path / "skills" / "commit-message"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("# commit-message\n\nAn early draft.\n")
    listing_itself = {
        "name": "acme/commit-message",
        "version": "1.0.0",
        "skills": {"commit-message": {"path": "SKILL.md"}},
    }
    (skill / "tile.json").write_text(json.dumps(listing_itself))
    _git(pytester.path, "init", "-q")
    _git(pytester.path, "add", "skills")
    _git(pytester.path, "commit", "-q", "-m", "the skill, before its evals")
    _git(pytester.path, "tag", "v1")
    (skill / "SKILL.md").write_text("# commit-message\n\nFollow the rules.\n")
    write_scenario(skill, "scenario-0", {"a": 100})

    result = pytester.runpytest("skills", *eval_args(endpoint.base_url, "--eval-baseline", "v1"))

    result.assert_outcomes(passed=1)
    old = [p for p in _agent_prompts(endpoint) if "An early draft." in p]
    # The same skill at v1, prompted as the reference prompts a skill (as the own arm is).
    assert old == ["# commit-message\n\nAn early draft.\n\n\nDo the task of scenario-0.\n"]


# --- categories ----------------------------------------------------------------------------


def test_evaluate_with_a_category_leaves_out_scenarios_without_one(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_tile(
        pytester.path,
        {
            "with-intent": {"criteria": {"a": (100, "INTENT")}, "options": DIRECT},
            "quality-only": {"criteria": {"b": (100, "QUALITY")}, "options": DIRECT},
        },
    )

    result = run_without_pytest(
        f"""
        from pytest_openkata import evaluate
        (summary,) = evaluate(
            "tiles", backend="http", http={{"base_url": {endpoint.base_url!r}}},
            category="INTENT",
        )
        print([(r.name, r.error) for r in summary.results])
        """,
        cwd=pytester.path,
    )

    assert result.returncode == 0, result.stderr
    # pytest deselects quality-only; the API errors it.
    assert result.stdout.strip() == "[('with-intent', None)]"


# --- the catalogue -------------------------------------------------------------------------


def test_effectiveness_lists_a_tile_with_reports_by_the_plugins_rule_not_the_catalogues(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    root = pytester.path
    write_tile(root, {"c": {"criteria": {"a": 100}, "options": DIRECT}})
    skills = root / "skills"
    skills.mkdir()
    # A tile kept in the skills folder; the catalogue lists only folders with a SKILL.md.
    (root / "tiles" / "observability").rename(skills / "observability")
    result = pytester.runpytest("skills", *eval_args(endpoint.base_url))
    result.assert_outcomes(passed=1)
    assert sorted((skills / "observability" / "evals" / "results").glob("**/*.json"))

    shown = {
        rule: subprocess.run(
            [sys.executable, "-m", "pytest_openkata", "effectiveness", "skills", "--json", *rule],
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
        )
        for rule in ((), ("--plugin-rule",))
    }

    catalogue, plugin = shown[()], shown[("--plugin-rule",)]
    assert catalogue.returncode == 0, catalogue.stderr
    assert json.loads(catalogue.stdout) == {"skills": {}}
    assert "note: observability: by the plugin's rule: listed at version" in catalogue.stderr
    assert "the catalogue's rule does not list it (no SKILL.md)" in catalogue.stderr
    assert plugin.returncode == 0, plugin.stderr
    assert "observability" in json.loads(plugin.stdout)["skills"], plugin.stdout


# --- lint of a tile's nested skills ----------------------------------------------------------


def test_lint_takes_the_scenarios_of_a_skill_inside_a_tile_that_a_run_takes(
    pytester: pytest.Pytester,
) -> None:
    tile = write_tile(
        pytester.path, {"checkout-flow": {"criteria": {"spans": 100}, "options": DIRECT}}
    )
    # A listed skill of the tile with evals of its own; its weights sum to 90.
    write_scenario(tile / "metrics", "scenario-0", {"a": 90})

    collected = pytester.runpytest("tiles", "--co", "-q")
    linted = pytester.runpytest("tiles", "--eval-lint", "--co", "-q")

    collected.stdout.fnmatch_lines(["tiles/observability/metrics/evals::scenario-0"])
    linted.stdout.fnmatch_lines(["*tiles/observability/metrics/evals::scenario-0*"])


# --- a free-named scenario named on the command line -----------------------------------------


def test_naming_one_of_two_free_named_scenarios_is_a_partial_run(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = write_skill(pytester.path, "s", {})
    write_scenario(skill, "checkout-flow", {"a": 100})
    write_scenario(skill, "rate-limits", {"a": 100})

    result = pytester.runpytest("skills/s/evals/checkout-flow", *eval_args(endpoint.base_url))

    result.assert_outcomes(passed=1)
    # One scenario folder of a skill is a partial run: no gate, no published report.
    assert not sorted(skill.glob("evals/results/**/*.json"))
    assert "partial" in result.stdout.lines[-1]


# --- xdist -------------------------------------------------------------------------------------


def test_the_collection_warnings_are_said_once_under_xdist(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-0": {"a": 100}, "scenario-1": {"a": 100}})
    write_scenario(skill, "checkout-flow", {"a": 100})
    (skill / "SKILL.md").write_text("# s\n\nSee [the rules](rules/naming.md).\n")
    (skill / "rules").mkdir()
    (skill / "rules" / "naming.md").write_text("Name things well.\n")
    args = eval_args(endpoint.base_url, "--eval-cache", "off")

    serial = pytester.runpytest("skills", *args)
    spread = pytester.runpytest("skills", *args, "-n", "2")

    assert serial.parseoutcomes()["warnings"] == 2
    # Each worker collects the skill and says both warnings again.
    assert spread.parseoutcomes()["warnings"] == 2


# --- terminal ----------------------------------------------------------------------------------


def test_an_error_of_several_lines_stays_inside_its_scenarios_block(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    from tests.support.endpoint import Reply

    skill = write_skill(pytester.path, "s", {"scenario-0": {"a": 10}})
    write_scenario(skill, "scenario-1", {"c": 4})
    script.agent_reply_when["scenario-1."] = Reply(
        status=400, body="bad request:\n\nline two", headers={"Retry-After": "0"}
    )

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url))

    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if "openkata eval summary" in line) + 1
    end = next(i for i, line in enumerate(lines[start:], start) if line.startswith("==="))
    block = lines[start:end]
    # As a criterion's reason of several lines: every line indented, none left empty.
    at = next(i for i, line in enumerate(block) if "ERROR: agent: HTTP 400" in line)
    assert block[at + 1 : at + 3] == ["    ", "    line two"]
