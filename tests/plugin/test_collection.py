"""Collection and selection as users type them; broken scenarios error on their own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_scenario, write_skill

TRAP_CONFTEST = "raise RuntimeError('a scenario conftest was imported')\n"
TRAP_TEST = "def test_trap():\n    raise AssertionError('a scenario test was collected')\n"


@pytest.fixture
def two_skills(pytester: pytest.Pytester) -> Path:
    write_skill(pytester.path, "alpha", {"scenario-b": {"x": 1}, "scenario-a": {"x": 1}})
    beta = write_skill(pytester.path, "beta", {"scenario-10": {"x": 1}, "scenario-2": {"x": 1}})
    for scenario in ("scenario-10", "scenario-2"):
        inputs = beta / "evals" / scenario / "inputs"
        inputs.mkdir()
        (inputs / "conftest.py").write_text(TRAP_CONFTEST)
        (inputs / "test_app.py").write_text(TRAP_TEST)
        (inputs / "pkg").mkdir()
        (inputs / "pkg" / "__init__.py").write_text(TRAP_CONFTEST)
    (beta / "evals" / "results").mkdir()
    (beta / "evals" / "notes.md").write_text("not a scenario\n")
    return pytester.path


def _collected(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if "::" in line]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["skills"],
            [
                "skills/alpha/evals::scenario-a",
                "skills/alpha/evals::scenario-b",
                "skills/beta/evals::scenario-10",
                "skills/beta/evals::scenario-2",
            ],
        ),
        (["skills/beta"], ["skills/beta/evals::scenario-10", "skills/beta/evals::scenario-2"]),
        (["skills/beta/evals/scenario-2"], ["skills/beta/evals::scenario-2"]),
        (["skills/beta/evals/scenario-2/"], ["skills/beta/evals::scenario-2"]),
        (["skills", "-k", "scenario-1"], ["skills/beta/evals::scenario-10"]),
        (
            ["skills", "-k", "skill:alpha"],
            ["skills/alpha/evals::scenario-a", "skills/alpha/evals::scenario-b"],
        ),
        (["skills", "-k", "beta and not 10"], ["skills/beta/evals::scenario-2"]),
        (
            ["skills/alpha", "--deselect", "skills/alpha/evals::scenario-a"],
            ["skills/alpha/evals::scenario-b"],
        ),
        (
            ["skills", "--ignore", "skills/beta/evals/scenario-10"],
            [
                "skills/alpha/evals::scenario-a",
                "skills/alpha/evals::scenario-b",
                "skills/beta/evals::scenario-2",
            ],
        ),
    ],
)
def test_selection(
    pytester: pytest.Pytester, two_skills: Path, args: list[str], expected: list[str]
) -> None:
    result = pytester.runpytest("--collect-only", "-q", *args)

    assert _collected(result) == expected
    assert result.ret == pytest.ExitCode.OK


@pytest.mark.parametrize(
    ("rootdir", "expected"),
    [
        (".", "skills/alpha/evals/scenario-a"),
        ("skills/alpha", "evals/scenario-a"),
        ("skills/alpha/evals", "scenario-a"),
        ("skills/beta", "../alpha/evals/scenario-a"),
        ("skills/alpha/evals/scenario-a", "."),
        ("skills/alpha/evals/scenario-a/inputs", ".."),
    ],
)
def test_an_items_location_is_its_folder_from_the_rootdir(
    pytester: pytest.Pytester, two_skills: Path, rootdir: str, expected: str
) -> None:
    (two_skills / "skills/alpha/evals/scenario-a/inputs").mkdir(exist_ok=True)

    items, _ = pytester.inline_genitems("skills/alpha", f"--rootdir={rootdir}")
    items = [item for item in items if item.name == "scenario-a"]

    assert [item.location for item in items] == [(expected, None, "alpha::scenario-a")]
    # As pytest works it out for any item (the plugin takes a shorter way).
    assert items[0].location == pytest.Item.location.func(items[0])  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("setup", "args"),
    [
        ("ini", ["-o", "norecursedirs=scenario-1*"]),
        ("ini", ["--ignore-glob", "*/beta/evals/scenario-1*"]),
        ("conftest-list", []),
        ("conftest-hook", []),
    ],
)
def test_scenario_folders_are_ignored_as_pytest_ignores_folders(
    pytester: pytest.Pytester, two_skills: Path, setup: str, args: list[str]
) -> None:
    if setup == "conftest-list":
        (two_skills / "skills" / "beta" / "conftest.py").write_text(
            "collect_ignore = ['evals/scenario-10']\n"
        )
    elif setup == "conftest-hook":  # another implementation of the hook is asked per folder
        pytester.makeconftest(
            "def pytest_ignore_collect(collection_path):\n"
            "    return True if collection_path.name == 'scenario-10' else None\n"
        )

    result = pytester.runpytest("--collect-only", "-q", "skills", *args)

    assert _collected(result) == [
        "skills/alpha/evals::scenario-a",
        "skills/alpha/evals::scenario-b",
        "skills/beta/evals::scenario-2",
    ]


def test_a_plugins_ignore_hook_is_asked_for_every_scenario_folder(
    pytester: pytest.Pytester, two_skills: Path
) -> None:
    pytester.makepyfile(
        ignoring="def pytest_ignore_collect(collection_path, config):\n"
        "    return True if collection_path.name in ('scenario-a', 'scenario-10') else None\n"
    )
    pytester.syspathinsert()

    result = pytester.runpytest("--collect-only", "-q", "-p", "ignoring", "skills")

    assert _collected(result) == [
        "skills/alpha/evals::scenario-b",
        "skills/beta/evals::scenario-2",
    ]


def test_a_skills_conftest_ignores_only_below_its_folder(
    pytester: pytest.Pytester, two_skills: Path
) -> None:
    (two_skills / "skills" / "beta" / "conftest.py").write_text(
        "def pytest_ignore_collect(collection_path):\n"
        "    return True if collection_path.name.startswith('scenario-') else None\n"
    )

    result = pytester.runpytest("--collect-only", "-q", "skills")

    assert _collected(result) == [
        "skills/alpha/evals::scenario-a",
        "skills/alpha/evals::scenario-b",
    ]


def test_a_conftest_that_keeps_a_folder_wins_over_norecursedirs(
    pytester: pytest.Pytester, two_skills: Path
) -> None:
    # pluggy calls a conftest's hook before pytest's own: its False (keep) decides.
    pytester.makeconftest(
        "def pytest_ignore_collect(collection_path):\n"
        "    return False if collection_path.name == 'scenario-10' else None\n"
    )

    result = pytester.runpytest(
        "--collect-only", "-q", "skills/beta", "-o", "norecursedirs=scenario-*"
    )

    assert _collected(result) == ["skills/beta/evals::scenario-10"]


def test_a_scenario_folder_follows_pytests_virtualenv_rule(
    pytester: pytest.Pytester, two_skills: Path
) -> None:
    # Scenario folders get every one of pytest's ignore rules through its public hook,
    # the virtualenv rule included: pyvenv.cfg hides a folder unless --collect-in-virtualenv.
    (two_skills / "skills" / "alpha" / "evals" / "scenario-a" / "pyvenv.cfg").write_text("")

    hidden = pytester.runpytest("--collect-only", "-q", "skills/alpha")
    allowed = pytester.runpytest("--collect-only", "-q", "skills/alpha", "--collect-in-virtualenv")

    assert _collected(hidden) == ["skills/alpha/evals::scenario-b"]
    assert _collected(allowed) == [
        "skills/alpha/evals::scenario-a",
        "skills/alpha/evals::scenario-b",
    ]


def test_a_broken_scenario_json_does_not_stop_keyword_selection(
    pytester: pytest.Pytester,
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-0": {"x": 1}, "scenario-1": {"x": 1}})
    (skill / "evals" / "scenario-1" / "scenario.json").write_text("{not json")

    direct = pytester.runpytest("--collect-only", "-q", "skills", "-k", "direct")
    sandbox = pytester.runpytest("--collect-only", "-q", "skills", "-m", "sandbox")
    neither = pytester.runpytest("--collect-only", "-q", "skills", "-k", "not sandbox")

    # The broken one is of both kinds, so that either selection shows its error.
    both = ["skills/s/evals::scenario-0", "skills/s/evals::scenario-1"]
    assert _collected(direct) == both
    assert _collected(sandbox) == ["skills/s/evals::scenario-1"]
    assert _collected(neither) == ["skills/s/evals::scenario-0"]


def test_direct_and_sandbox_keywords_select_by_scenario_mode(pytester: pytest.Pytester) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-0": {"x": 1}})
    write_scenario(skill, "scenario-1", {"x": 1}, sandbox=True)
    write_scenario(skill, "scenario-2", {"x": 1}).joinpath("scenario.json").unlink()

    direct = pytester.runpytest("--collect-only", "-q", "skills", "-k", "direct")
    sandboxed = pytester.runpytest("--collect-only", "-q", "skills", "-k", "sandbox")

    assert _collected(direct) == ["skills/s/evals::scenario-0"]
    assert _collected(sandboxed) == ["skills/s/evals::scenario-1", "skills/s/evals::scenario-2"]


def test_keyword_selection_and_the_run_read_scenario_json_alike(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    # One reader of scenario.json: Go's rule (any case, the last key wins) decides both -k
    # and how the scenario runs, here directly (no sandbox is configured at all).
    skill = write_skill(pytester.path, "s", {"scenario-0": {"x": 1}})
    (skill / "evals" / "scenario-0" / "scenario.json").write_text(
        '{"sandbox": true, "SANDBOX": false}'
    )

    sandboxed = pytester.runpytest("--collect-only", "-q", "skills", "-k", "sandbox")
    direct = pytester.runpytest("skills", "-k", "direct", *eval_args(endpoint.base_url))

    assert _collected(sandboxed) == []
    assert direct.ret == pytest.ExitCode.OK
    direct.assert_outcomes(passed=1)
    assert script.agent_calls == 1


def test_nothing_under_a_scenario_is_imported(
    pytester: pytest.Pytester, two_skills: Path, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    result = pytester.runpytest("skills/beta/evals/scenario-2", *eval_args(endpoint.base_url))

    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1)
    assert "was imported" not in result.stdout.str()
    # The trap files still reach the agent as scenario inputs.
    assert (
        "```conftest.py\nraise RuntimeError" in endpoint.requests[0].json["messages"][0]["content"]
    )


def test_collection_keeps_ordinary_tests_beside_skills(
    pytester: pytest.Pytester, two_skills: Path
) -> None:
    helper = pytester.path / "skills" / "alpha" / "scripts"
    helper.mkdir()
    (helper / "test_helper.py").write_text("def test_helper():\n    pass\n")

    result = pytester.runpytest("--collect-only", "-q", "skills/alpha")

    assert "skills/alpha/scripts/test_helper.py::test_helper" in _collected(result)


def test_a_run_without_scenarios_leaves_the_evaluation_modules_unloaded(
    pytester: pytest.Pytester,
) -> None:
    # The plugin loads in every pytest run of its environment; what only an evaluation needs
    # (reports, backends, the docker SDK) is imported when a run has scenarios.
    pytester.makepyfile(
        test_plain="""
        import sys

        def test_plain():
            unloaded = [
                "pytest_openkata.providers.reporters.results_json",
                "pytest_openkata.core.build",
                "docker",
                "httpx",
            ]
            assert [name for name in unloaded if name in sys.modules] == []
        """
    )

    result = pytester.runpytest_subprocess("-p", "openkata")

    result.assert_outcomes(passed=1)


def _broken_skill(root: Path) -> Path:
    skill = write_skill(root, "s", {"scenario-good": {"x": 1}})
    write_scenario(skill, "scenario-no-task", {"x": 1}).joinpath("task.md").unlink()
    write_scenario(skill, "scenario-no-criteria", {"x": 1}).joinpath("criteria.json").unlink()
    write_scenario(skill, "scenario-bad-json", {"x": 1}).joinpath("criteria.json").write_text(
        '{"checklist": [\n  {"name": "x",}\n]}'
    )
    fractional = {"checklist": [{"name": "x", "description": "d", "max_score": 10.5}]}
    write_scenario(skill, "scenario-fractional", {"x": 1}).joinpath("criteria.json").write_text(
        json.dumps(fractional)
    )
    write_scenario(skill, "scenario-duplicate", {"x": 1}).joinpath("criteria.json").write_text(
        json.dumps({"checklist": [{"name": "x", "max_score": 1}, {"name": "x", "max_score": 2}]})
    )
    write_scenario(skill, "scenario-empty", {"x": 1}).joinpath("criteria.json").write_text(
        json.dumps({"context": "c", "checklist": []})
    )
    write_scenario(skill, "scenario-flag", {"x": 1}).joinpath("scenario.json").write_text(
        '{"description": "quoted flag", "sandbox": "false"}'
    )
    return skill


def test_broken_scenarios_error_naming_file_and_field(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    _broken_skill(pytester.path)

    result = pytester.runpytest("skills", *eval_args(endpoint.base_url), "--eval-threshold", "0")

    result.assert_outcomes(passed=1, errors=7)
    result.stdout.fnmatch_lines_random(
        [
            "scenario error: */scenario-no-task/task.md: file not found*",
            "scenario error: */scenario-no-criteria/criteria.json: file not found",
            "scenario error: */scenario-bad-json/criteria.json: "
            "not valid JSON: * (line 2, column *)",
            "scenario error: */scenario-fractional/criteria.json: "
            "checklist[[]0[]] ('x').max_score: must be a positive integer (got 10.5)",
            "scenario error: */scenario-duplicate/criteria.json: checklist[[]1[]].name: "
            "duplicate criterion name 'x'",
            "scenario error: */scenario-empty/criteria.json: "
            "checklist: must hold at least one criterion*",
            "scenario error: */scenario-flag/scenario.json: "
            'sandbox: must be true or false (got "false")',
        ]
    )
    assert script.agent_calls == 1  # only the good scenario reached the agent
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_skill_without_skill_md_errors_its_scenarios(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-0": {"x": 1}})
    (skill / "SKILL.md").unlink()
    write_skill(pytester.path, "fine", {"scenario-0": {"x": 1}})

    result = pytester.runpytest("skills", *eval_args(endpoint.base_url))

    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["scenario error: SKILL.md: file not found in skills/s (every skill needs one)"]
    )


def test_the_whole_corpus_collects(pytester: pytest.Pytester, corpus_copy: Path) -> None:
    result = pytester.runpytest("--collect-only", "-q", "skills")

    assert result.ret == pytest.ExitCode.OK
    collected = _collected(result)
    assert len(collected) == 52
    assert "skills/critical-thinking/evals::scenario-yield-with-exit-format" in collected
    assert collected.index("skills/create-adr/evals::scenario-10") < collected.index(
        "skills/create-adr/evals::scenario-2"
    )


def test_the_whole_corpus_runs_with_its_broken_scenarios_reported(
    pytester: pytest.Pytester, corpus_copy: Path, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    result = pytester.runpytest("skills", *eval_args(endpoint.base_url))

    # 8 direct scenarios run; 43 sandboxed ones and the one without task.md error on their own.
    result.assert_outcomes(passed=8, errors=44)
    # Named relative to its skill folder (reports hold no machine paths), under the skill.
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of github-create-pr::scenario-0*",
            "*scenario error: evals/scenario-0/task.md: file not found*",
        ]
    )
    assert script.agent_calls == 8
    assert result.ret == pytest.ExitCode.TESTS_FAILED
