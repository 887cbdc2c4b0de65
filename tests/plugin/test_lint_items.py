"""``pytest --eval-lint`` as users run it: lint items in place of scenario items, rules as
subtests, warnings as pytest warnings; and the unknown-key warnings of a normal run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_openkata.__main__ import main as openkata_main
from pytest_openkata.core.lint import SCENARIO_RULES, SKILL_RULES
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, criteria_json, eval_args

SKILL_MD = (
    "---\nname: {name}\ndescription: Writes tidy notes. Use when asked for notes.\n---\n\n# Notes\n"
)
CHANGELOG = "# Changelog\n\n## [1.0.0] - 2026-11-01\n"


def _skill(root: Path, name: str = "notes") -> Path:
    skill = root / "skills" / name
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD.format(name=name))
    (skill / "CHANGELOG.md").write_text(CHANGELOG)
    return skill


def _scenario(
    skill: Path,
    name: str,
    weights: dict[str, int],
    *,
    task: str = "Write a note about the meeting on Monday.\n",
    options: dict[str, object] | None = None,
) -> Path:
    folder = skill / "evals" / name
    folder.mkdir(parents=True)
    (folder / "task.md").write_text(task)
    (folder / "criteria.json").write_text(criteria_json(weights, context="notes"))
    scenario = {"description": f"about {name}", "sandbox": False} if options is None else options
    (folder / "scenario.json").write_text(json.dumps(scenario))
    return folder


def test_a_clean_skill_lints_without_a_model_or_a_sandbox(pytester: pytest.Pytester) -> None:
    skill = _skill(pytester.path)
    _scenario(skill, "scenario-0", {"names-the-day": 60, "one-line": 40})
    _scenario(skill, "scenario-1", {"lists-attendees": 100})

    # No backend is configured: kiro-cli is not installed, so any agent call would error.
    result = pytester.runpytest("--eval-lint", "skills", "-v")

    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines_random(
        [
            "skills/notes::skill PASSED*",
            "skills/notes/evals::scenario-0 PASSED*",
            "skills/notes/evals::scenario-1 PASSED*",
        ]
    )
    result.stdout.fnmatch_lines(["openkata: lint (no model, no sandbox)"])
    rules = 2 * len(SCENARIO_RULES) + len(SKILL_RULES)  # each rule is a subtest
    result.stdout.fnmatch_lines([f"*= 3 passed, {rules} subtests passed in *"])
    assert "openkata eval summary" not in result.stdout.str()
    assert not (skill / "evals" / "results").exists()
    assert not (pytester.path / ".openkata").exists()


def test_a_broken_scenario_fails_its_rule_and_the_others_still_run(
    pytester: pytest.Pytester,
) -> None:
    skill = _skill(pytester.path)
    _scenario(skill, "scenario-0", {"a": 60, "b": 30})
    _scenario(skill, "scenario-1", {"c": 100}, task="Use the notes skill to write a note.\n")
    _scenario(skill, "scenario-2", {"d": 100})

    result = pytester.runpytest("--eval-lint", "skills")

    # Two items failed, each with one failed subtest; the skill and scenario-2 passed.
    result.assert_outcomes(passed=2, failed=4)
    result.stdout.fnmatch_lines_random(
        [
            "evals/scenario-0/criteria.json: FAIL: skills/notes/evals/scenario-0 — sum=90 "
            "(expected 100)",
            "SUBFAILED[[]weights[]] skills/notes/evals::scenario-0 - *",
            "SUBFAILED[[]task-names-skill[]] skills/notes/evals::scenario-1 - *",
            "FAILED skills/notes/evals::scenario-0 - contains 1 failed subtest",
        ]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_warnings_are_pytest_warnings_at_their_file_and_strict_makes_them_errors(
    pytester: pytest.Pytester,
) -> None:
    skill = _skill(pytester.path)
    _scenario(
        skill,
        "scenario-0",
        {"a": 100},
        options={"description": "typo", "sandbx": False},
    )

    lenient = pytester.runpytest("--eval-lint", "skills")
    strict = pytester.runpytest("--eval-lint", "--eval-lint-strict", "skills")

    lenient.assert_outcomes(passed=2, warnings=1)
    lenient.stdout.fnmatch_lines(
        [
            "  skills/notes/evals/scenario-0/scenario.json:1: EvalLintWarning: [[]unknown-keys[]] "
            'unknown key "sandbx"; did you mean "sandbox"?*',
        ]
    )
    strict.assert_outcomes(passed=1, failed=2)  # the item and its subtest
    strict.stdout.fnmatch_lines(["SUBFAILED[[]unknown-keys[]] skills/notes/evals::scenario-0 *"])


def test_lint_selects_by_path_and_deselects_every_other_test(pytester: pytest.Pytester) -> None:
    skill = _skill(pytester.path)
    _scenario(skill, "scenario-0", {"a": 100})
    _scenario(skill, "scenario-1", {"b": 100})
    pytester.makepyfile(test_unrelated="def test_slow():\n    raise AssertionError('ran')\n")

    everything = pytester.runpytest("--eval-lint", "skills", "test_unrelated.py")
    one = pytester.runpytest("--eval-lint", "skills/notes/evals/scenario-1", "-v")

    everything.assert_outcomes(passed=3, deselected=1)
    one.assert_outcomes(passed=1)
    one.stdout.fnmatch_lines(["skills/notes/evals::scenario-1 PASSED*"])


def test_lint_under_xdist_gives_the_same_outcomes(pytester: pytest.Pytester) -> None:
    skill = _skill(pytester.path)
    _scenario(skill, "scenario-0", {"a": 50})
    _scenario(skill, "scenario-1", {"b": 100})

    result = pytester.runpytest("--eval-lint", "-n", "2", "skills")

    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(["*sum=50 (expected 100)*"])


def test_a_skill_without_skill_md_is_linted_and_named(pytester: pytest.Pytester) -> None:
    skill = _skill(pytester.path)
    (skill / "SKILL.md").unlink()
    _scenario(skill, "scenario-0", {"a": 100})

    result = pytester.runpytest("--eval-lint", "skills")

    # The skill item and its skill-md subtest; the scenario, which cannot run without it, and
    # its files subtest.
    result.assert_outcomes(failed=4)
    result.stdout.fnmatch_lines_random(
        [
            "SUBFAILED[[]skill-md[]] skills/notes::skill - *SKILL.md*",
            "SUBFAILED[[]files[]] skills/notes/evals::scenario-0 - *SKILL.md*",
        ]
    )


def test_mode_options_that_make_no_sense_are_usage_errors(pytester: pytest.Pytester) -> None:
    both = pytester.runpytest("--eval-lint", "--eval-validate")
    strict_alone = pytester.runpytest("--eval-lint-strict")

    assert both.ret == strict_alone.ret == pytest.ExitCode.USAGE_ERROR
    both.stderr.fnmatch_lines(["*give --eval-lint or --eval-validate, not both*"])
    strict_alone.stderr.fnmatch_lines(["*--eval-lint-strict needs --eval-lint*"])


def test_what_the_scaffold_writes_passes_strict_lint(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(pytester.path)
    assert openkata_main(["init", "skills/fresh-skill"]) == 0
    assert openkata_main(["new-scenario", "skills/fresh-skill", "edit", "--sandbox"]) == 0
    assert openkata_main(["new-scenario", "skills/fresh-skill", "answer"]) == 0

    result = pytester.runpytest("--eval-lint", "--eval-lint-strict", "skills")

    result.assert_outcomes(passed=4)


def test_the_project_skills_pass_lint(pytester: pytest.Pytester) -> None:
    """The example skill of this repository, as .ci/run lints it."""
    shutil.copytree(Path(__file__).resolve().parents[2] / "skills", pytester.path / "skills")

    result = pytester.runpytest("--eval-lint", "skills")

    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=len(list(pytester.path.glob("skills/*/evals/scenario-*"))) + 1)


# --- a normal run ---------------------------------------------------------------------------


def test_a_run_warns_about_a_typo_in_scenario_json_and_names_the_key_it_meant(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = _skill(pytester.path)
    folder = _scenario(skill, "scenario-0", {"a": 100}, options={"sandbx": False})
    criteria = json.loads((folder / "criteria.json").read_text())
    criteria["checklist"][0]["max_scroe"] = 5
    (folder / "criteria.json").write_text(json.dumps(criteria))

    result = pytester.runpytest("skills", *eval_args(endpoint.base_url))

    # The typo made the scenario a sandboxed one, which has no sandbox here: it errors, and the
    # warnings say why.
    result.stdout.fnmatch_lines_random(
        [
            "  skills/notes/evals/scenario-0/scenario.json:1: EvalLintWarning: "
            '[[]unknown-keys[]] unknown key "sandbx"; did you mean "sandbox"[?]',
            "  skills/notes/evals/scenario-0/criteria.json:1: EvalLintWarning: "
            "[[]unknown-keys[]] checklist[[]0[]] ('a'): unknown key \"max_scroe\"; did you "
            'mean "max_score"[?]',
        ]
    )
