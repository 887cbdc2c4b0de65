"""A newcomer's early mistakes, caught before a token is spent on them: an empty task or
criterion, a typo'd key (said when its scenario runs, and by lint of a scenario that -k, -m or
--deselect leaves out), a scenario whose kind cannot be trusted under -m, and the scaffold's
placeholders in a run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_openkata.__main__ import main as openkata_main
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, reports_under, write_skill

SECTION = "*= openkata: check these files =*"
TYPO = (
    'skills/s/evals/scenario-typo/scenario.json:1: [[]unknown-keys[]] unknown key "netwrok"; '
    'did you mean "network"[?]'
)


# --- an empty task or criterion -------------------------------------------------------------


def test_an_empty_task_or_description_errors_its_scenario_and_the_others_still_run(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = write_skill(pytester.path, "s", {f"scenario-{i}": {"a": 100} for i in range(3)})
    (skill / "evals" / "scenario-1" / "task.md").write_text(" \n\t\n")
    criteria = skill / "evals" / "scenario-2" / "criteria.json"
    document = json.loads(criteria.read_text())
    document["checklist"][0]["description"] = "  "
    criteria.write_text(json.dumps(document))

    result = pytester.runpytest("skills", *eval_args(endpoint.base_url))

    result.assert_outcomes(passed=1, errors=2)
    assert script.agent_calls == 1
    result.stdout.fnmatch_lines_random(
        [
            "scenario error: evals/scenario-1/task.md: is empty: write there the prompt the "
            "agent is given",
            "scenario error: evals/scenario-2/criteria.json: checklist[[]0[]] ('a').description: "
            "must not be empty: say what the judge should find *",
        ]
    )
    (report,) = reports_under(pytester.path)
    scores = {s["name"]: s["percentage"] for s in json.loads(report.read_text())["scenarios"]}
    assert scores == {"scenario-0": 100, "scenario-1": 0, "scenario-2": 0}


def test_lint_says_the_same_of_them(pytester: pytest.Pytester) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-0": {"a": 100}, "scenario-1": {"a": 100}})
    (skill / "evals" / "scenario-0" / "task.md").write_text("")
    criteria = skill / "evals" / "scenario-1" / "criteria.json"
    criteria.write_text(criteria.read_text().replace('"checks a"', '""'))

    result = pytester.runpytest("--eval-lint", "skills")

    result.stdout.fnmatch_lines_random(
        [
            "SUBFAILED[[]files[]] skills/s/evals::scenario-0 *",
            "SUBFAILED[[]empty-descriptions[]] skills/s/evals::scenario-1 *",
            "evals/scenario-0/task.md: is empty: write there the prompt the agent is given",
            "evals/scenario-1/criteria.json:1: checklist[[]0[]] ('a').description: must not be "
            "empty: *",
        ]
    )


# --- a typo'd key, selected or not ----------------------------------------------------------


def _typo_skill(root: Path) -> Path:
    skill = write_skill(root, "s", {"scenario-ok": {"a": 100}, "scenario-typo": {"a": 100}})
    options = skill / "evals" / "scenario-typo" / "scenario.json"
    options.write_text(json.dumps({"description": "typo", "sandbox": False, "netwrok": "none"}))
    return skill


@pytest.mark.parametrize("spread", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_typo_is_said_when_its_scenario_runs(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    spread: list[str],
) -> None:
    _typo_skill(pytester.path)

    # --disable-warnings hides pytest's warnings summary, not the section.
    result = pytester.runpytest(
        "skills", *spread, "--disable-warnings", *eval_args(endpoint.base_url)
    )

    result.assert_outcomes(passed=2, warnings=1)  # said once, by the one process that ran it
    result.stdout.fnmatch_lines([SECTION, TYPO])


@pytest.mark.parametrize(
    "selection",
    [
        ["-k", "scenario-ok"],
        ["-m", "sandbox"],
        ["--deselect", "skills/s/evals::scenario-typo"],
        ["-k", "scenario-ok", "-n", "2"],
    ],
    ids=["-k", "-m", "--deselect", "-k under xdist"],
)
def test_a_typo_in_a_scenario_left_out_is_for_lint_to_say(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    selection: list[str],
) -> None:
    # Collection reads no scenario's files for warnings: a scenario the run leaves out is not
    # read, and --eval-lint says what is wrong with every scenario.
    _typo_skill(pytester.path)

    result = pytester.runpytest("skills", *selection, *eval_args(endpoint.base_url))
    lint = pytester.runpytest("--eval-lint", "skills")

    # (-m sandbox leaves out both: every scenario of the skill answers directly)
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
    assert "scenario-typo PASSED" not in result.stdout.str()
    assert "netwrok" not in result.stdout.str()
    lint.stdout.fnmatch_lines([f"*{TYPO.replace(': [[]', ': EvalLintWarning: [[]', 1)}"])


def test_the_section_is_absent_when_nothing_is_wrong(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"a": 100}})

    result = pytester.runpytest("skills", *eval_args(endpoint.base_url))

    result.assert_outcomes(passed=1)
    assert "check these files" not in result.stdout.str()


def test_ignoring_the_warning_class_silences_the_section_too(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    _typo_skill(pytester.path)

    result = pytester.runpytest(
        "skills",
        "-W",
        "ignore::pytest_openkata.EvalLintWarning",
        *eval_args(endpoint.base_url),
    )

    result.assert_outcomes(passed=2)
    assert "check these files" not in result.stdout.str()


# --- a kind that cannot be trusted ----------------------------------------------------------


@pytest.mark.parametrize(
    "selection",
    [["-m", "direct"], ["-m", "sandbox"], ["-k", "direct"], ["-k", "sandbox"]],
    ids=["-m direct", "-m sandbox", "-k direct", "-k sandbox"],
)
def test_a_key_that_misspells_sandbox_keeps_its_scenario_in_either_selection_and_errors(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    selection: list[str],
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-0": {"a": 100}})
    (skill / "evals" / "scenario-0" / "scenario.json").write_text('{"sandbx": false}')

    result = pytester.runpytest("skills", *selection, *eval_args(endpoint.base_url))

    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "scenario error: evals/scenario-0/scenario.json: sandbx: unknown key; did you mean "
            '"sandbox"[?] Until it is fixed the scenario does not run: whether it runs in a '
            "sandbox cannot be trusted",
        ]
    )


@pytest.mark.parametrize("text", ['{"sandbox": "no"}', "{not json"], ids=["invalid", "not JSON"])
def test_a_scenario_json_that_does_not_load_stays_in_a_kind_selection(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript, text: str
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-0": {"a": 100}})
    (skill / "evals" / "scenario-0" / "scenario.json").write_text(text)

    result = pytester.runpytest("skills", "-m", "direct", *eval_args(endpoint.base_url))

    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*scenario error: evals/scenario-0/scenario.json: *"])


# --- the scaffold in a run ------------------------------------------------------------------


def test_a_run_of_the_untouched_scaffold_warns_about_its_placeholders(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
) -> None:
    monkeypatch.chdir(pytester.path)
    assert openkata_main(["init", "skills/fresh"]) == 0

    result = pytester.runpytest("skills", *eval_args(endpoint.base_url))

    result.stdout.fnmatch_lines(
        [
            SECTION,
            "skills/fresh/SKILL.md:3: [[]placeholders[]] the scaffold's placeholder *",
            "skills/fresh/evals/scenario-example/task.md:1: [[]placeholders[]] *",
            "skills/fresh/evals/scenario-example/criteria.json:2: [[]placeholders[]] *",
            "skills/fresh/evals/scenario-example/scenario.json:2: [[]placeholders[]] *",
        ]
    )
