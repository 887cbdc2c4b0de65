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
            "(expected 100): make the checklist's max_score values sum to 100",
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
        options={"description": "typo", "sandbox": False, "netwrok": "none"},
    )

    lenient = pytester.runpytest("--eval-lint", "skills")
    strict = pytester.runpytest("--eval-lint", "--eval-lint-strict", "skills")

    lenient.assert_outcomes(passed=2, warnings=1)
    lenient.stdout.fnmatch_lines(
        [
            "  skills/notes/evals/scenario-0/scenario.json:1: EvalLintWarning: [[]unknown-keys[]] "
            'unknown key "netwrok"; did you mean "network"?*',
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


def _scaffold(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(pytester.path)
    assert openkata_main(["init", "skills/fresh-skill"]) == 0
    assert openkata_main(["new-scenario", "skills/fresh-skill", "edit", "--sandbox"]) == 0
    assert openkata_main(["new-scenario", "skills/fresh-skill", "answer"]) == 0
    return pytester.path / "skills" / "fresh-skill"


def test_the_untouched_scaffold_fails_strict_lint_on_its_placeholders_only(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _scaffold(pytester, monkeypatch)

    result = pytester.runpytest("--eval-lint", "--eval-lint-strict", "skills")

    # The skill and each of its three scenarios fail their placeholders subtest, and no other.
    result.assert_outcomes(failed=8)  # four items, each with its one failed subtest
    subfailed = [line for line in result.outlines if line.startswith("SUBFAILED")]
    assert len(subfailed) == 4
    assert all(line.startswith("SUBFAILED[placeholders] ") for line in subfailed)
    result.stdout.fnmatch_lines_random(
        [
            "SKILL.md:3: the scaffold's placeholder \"TODO: say in one or two sentences what this "
            'skill does ..." is still there (6 placeholders left, *',
            "evals/scenario-edit/task.md:1: the scaffold's placeholder \"TODO: the request in a "
            'few words ..." is still there (2 placeholders left, on lines 1, 3): replace each '
            "with the scenario's own text",
            "evals/scenario-edit/inputs/README.md:1: *",
        ]
    )


def test_the_untouched_scaffold_warns_under_plain_lint(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _scaffold(pytester, monkeypatch)

    result = pytester.runpytest("--eval-lint", "skills")

    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines_random(
        [
            "  skills/fresh-skill/SKILL.md:3: EvalLintWarning: [[]placeholders[]] the scaffold's *",
            "  skills/fresh-skill/evals/scenario-answer/criteria.json:2: EvalLintWarning: "
            "[[]placeholders[]] *(4 placeholders left, on lines 2, 7, 12, 17)*",
        ]
    )


def test_the_scaffold_with_every_placeholder_filled_in_passes_strict_lint(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    skill = _scaffold(pytester, monkeypatch)
    for path in [skill / "SKILL.md", *skill.glob("evals/*/*.*")]:
        path.write_text(path.read_text().replace("TODO: ", ""))
    (skill / "evals" / "scenario-edit" / "inputs" / "README.md").write_text("# The project\n")

    result = pytester.runpytest("--eval-lint", "--eval-lint-strict", "skills")

    result.assert_outcomes(passed=4)


def test_a_half_filled_scaffold_fails_strict_lint_where_placeholders_are_left(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    skill = _scaffold(pytester, monkeypatch)
    for path in [skill / "SKILL.md", *skill.glob("evals/*/*.*")]:
        path.write_text(path.read_text().replace("TODO: ", ""))
    (skill / "evals" / "scenario-edit" / "inputs" / "README.md").write_text("# The project\n")
    task = skill / "evals" / "scenario-answer" / "task.md"
    task.write_text("TODO: write the request as a user would make it.\n\nSay hello.\n")

    result = pytester.runpytest("--eval-lint", "--eval-lint-strict", "skills")

    result.assert_outcomes(passed=3, failed=2)  # the item and its placeholders subtest
    result.stdout.fnmatch_lines(
        [
            "evals/scenario-answer/task.md:1: the scaffold's placeholder \"TODO: write the "
            'request as a user would make it ..." is still there (1 placeholder left, on line 1)*'
        ]
    )


def test_a_skill_about_todo_comments_passes_strict_lint(pytester: pytest.Pytester) -> None:
    skill = _skill(pytester.path, "todo-comments")
    (skill / "SKILL.md").write_text(
        "---\nname: todo-comments\ndescription: Writes TODO comments. Use when asked to mark "
        "open work.\n---\n\n# TODO comments\n\nTODO: as the first word, then the owner: "
        "`TODO: (alice) remove after v2`.\n"
    )
    _scenario(
        skill,
        "scenario-0",
        {"names-the-owner": 100},
        task="Mark the open question in this function with a TODO: comment.\n\n"
        "```python\ndef parse(text):\n    return text  # TODO: handle an empty text\n```\n",
    )

    result = pytester.runpytest("--eval-lint", "--eval-lint-strict", "skills")

    result.assert_outcomes(passed=2)


def test_the_project_skills_pass_lint(pytester: pytest.Pytester) -> None:
    """The example skill of this repository, as .ci/run lints it."""
    shutil.copytree(Path(__file__).resolve().parents[2] / "skills", pytester.path / "skills")

    result = pytester.runpytest("--eval-lint", "skills")

    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=len(list(pytester.path.glob("skills/*/evals/scenario-*"))) + 1)


# --- a normal run ---------------------------------------------------------------------------


def test_a_run_errors_a_scenario_whose_key_misspells_sandbox_and_warns_about_other_typos(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = _skill(pytester.path)
    folder = _scenario(skill, "scenario-0", {"a": 100}, options={"sandbx": False})
    criteria = json.loads((folder / "criteria.json").read_text())
    criteria["checklist"][0]["max_scroe"] = 5
    (folder / "criteria.json").write_text(json.dumps(criteria))

    result = pytester.runpytest("skills", *eval_args(endpoint.base_url))

    # The reference would run it sandboxed, whatever the typo meant: it errors, naming the key.
    result.assert_outcomes(errors=1)
    assert script.agent_calls == 0
    result.stdout.fnmatch_lines(
        [
            "scenario error: evals/scenario-0/scenario.json: sandbx: unknown key; did you mean "
            '"sandbox"[?] Until it is fixed the scenario does not run: *',
        ]
    )
    result.stdout.fnmatch_lines_random(
        [
            "  skills/notes/evals/scenario-0/scenario.json:1: EvalLintWarning: "
            '[[]unknown-keys[]] unknown key "sandbx"; did you mean "sandbox"[?] *',
            "  skills/notes/evals/scenario-0/criteria.json:1: EvalLintWarning: "
            "[[]unknown-keys[]] checklist[[]0[]] ('a'): unknown key \"max_scroe\"; did you "
            'mean "max_score"[?]',
        ]
    )


def test_a_prompt_over_the_context_budget_is_a_lint_warning_naming_its_largest_parts(
    pytester: pytest.Pytester,
) -> None:
    skill = _skill(pytester.path)
    (skill / "references").mkdir()
    (skill / "references" / "manual.md").write_text("Read this. " * 2000)
    _scenario(skill, "scenario-0", {"a": 100})

    within = pytester.runpytest("--eval-lint", "skills")
    over = pytester.runpytest("--eval-lint", "skills", "--eval-context-budget", "5000")

    assert "prompt-size" not in within.stdout.str()
    over.stdout.fnmatch_lines(
        [
            "*EvalLintWarning: [[]prompt-size[]] the prompt is about 5,* tokens (2*,* characters), "
            "over the context budget of 5,000 (context_budget); its largest parts: "
            "manual.md (5,505), SKILL.md (*"
        ]
    )


def test_a_run_warns_of_a_prompt_over_the_context_budget_before_it_runs_it(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = _skill(pytester.path)
    (skill / "references").mkdir()
    (skill / "references" / "manual.md").write_text("Read this. " * 400)
    _scenario(skill, "scenario-0", {"a": 100}, options={"sandbox": False})
    big = _scenario(skill, "scenario-1", {"a": 100}, options={"sandbox": False})
    (big / "inputs").mkdir()
    (big / "inputs" / "log.txt").write_text("line\n" * 2000)

    result = pytester.runpytest(
        "skills", *eval_args(endpoint.base_url), "--eval-context-budget", "2000"
    )

    # Both still run: a budget is advice, and the model's own limit decides.
    result.assert_outcomes(passed=2, warnings=1)
    assert script.agent_calls == 2
    result.stdout.fnmatch_lines(
        [
            "  skills/notes/evals/scenario-1/task.md:0: EvalLintWarning: [[]prompt-size[]] the "
            "prompt is about 3,* tokens (*), over the context budget of 2,000 (context_budget); "
            "its largest parts: inputs/log.txt (2,5*), manual.md (1,1*), *"
        ]
    )
    assert "scenario-0/task.md:0: EvalLintWarning" not in result.stdout.str()


def test_an_installed_skill_is_not_counted_in_the_prompts_size(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = _skill(pytester.path)
    (skill / "references").mkdir()
    (skill / "references" / "manual.md").write_text("Read this. " * 1000)
    folder = _scenario(skill, "scenario-0", {"a": 100}, options={"sandbox": False})
    (folder / "inputs").mkdir()
    (folder / "inputs" / "log.txt").write_text("line\n" * 800)
    args = ("skills", *eval_args(endpoint.base_url), "--eval-context-budget", "2000")

    # About 2,750 tokens of the skill and 1,000 of the inputs: over the budget with the skill
    # in the prompt, within it when the skill is installed (the prompt: the task, its inputs).
    pasted = pytester.runpytest(*args)
    installed = pytester.runpytest(*args, "--eval-skill-delivery", "installed")

    assert "[prompt-size] the prompt is about 3," in pasted.stdout.str()
    # (A model backend cannot have a skill installed: that scenario errors, unread by a model.)
    installed.stdout.fnmatch_lines(["*scenario error:*install*"])
    assert "prompt-size" not in installed.stdout.str()
