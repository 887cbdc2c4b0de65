"""Published eval formats collected and run as they are, against the scripted endpoint; the
nested-group layout; a broken format file beside good scenarios; results equal to convert's."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_openkata.commands import convert
from tests.support import format_layouts
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, sandbox_args, write_scenario, write_skill

EVALS: list[dict[str, Any]] = [
    {
        "id": 1,
        "prompt": "Say which column people.csv is sorted by.",
        "expectations": ["The answer names a column"],
        "assertions": [{"name": "no apology", "type": "not_contains", "value": "sorry"}],
    },
    {"id": 2, "prompt": "Name the header of people.csv.", "expectations": ["It says name,age"]},
]


def _collected(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if "::" in line]


def _results(root: Path) -> dict[str, Any]:
    [path] = sorted((root / "out").glob("*.json"))
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def test_every_format_is_collected_with_ids_naming_its_file_and_scenario(
    pytester: pytest.Pytester,
) -> None:
    format_layouts.skill_creator(pytester.path / "skills")
    format_layouts.waza(pytester.path / "skills" / "csv-tidy")
    format_layouts.harbor(pytester.path / "skills" / "csv-tidy")
    format_layouts.skillgrade(pytester.path / "sg")

    result = pytester.runpytest("--collect-only", "-q", ".")

    assert _collected(result) == [
        "sg/csv-tidy/eval.yaml::sort-rows",
        "skills/csv-tidy/csv-tidy-eval/eval.yaml::sort-by-age",
        "skills/csv-tidy/evals/evals.json::eval-1",
        "skills/csv-tidy/evals/evals.json::eval-2",
        "skills/csv-tidy/tasks/sort-csv/task.toml::sort-csv",
    ]
    assert result.ret == pytest.ExitCode.OK
    selected = pytester.runpytest("--collect-only", "-q", ".", "-k", "evals.json and 2")
    assert _collected(selected) == ["skills/csv-tidy/evals/evals.json::eval-2"]
    sandboxed = pytester.runpytest("--collect-only", "-q", ".", "-m", "sandbox")
    assert len(_collected(sandboxed)) == 5  # every format here runs its agent in a sandbox
    direct = pytester.runpytest("--collect-only", "-q", ".", "-m", "direct")
    assert _collected(direct) == []
    named = pytester.runpytest("--collect-only", "-q", "skills/csv-tidy/evals/evals.json")
    assert _collected(named) == [
        "skills/csv-tidy/evals/evals.json::eval-1",
        "skills/csv-tidy/evals/evals.json::eval-2",
    ]


def test_a_broken_format_file_errors_alone_naming_file_and_key(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "fine", {"scenario-a": {"x": 1}})
    format_layouts.skill_creator(pytester.path / "skills", [{"id": 1, "expectations": ["e"]}])

    result = pytester.runpytest("skills", *eval_args(endpoint.base_url))

    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["*evals/evals.json: evals[[]0[]].prompt: every eval needs a prompt*skill-creator format*"]
    )
    assert str(pytester.path) not in result.stdout.str().replace(f"rootdir: {pytester.path}", "")


def test_scenarios_in_group_folders_are_collected_and_run(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-a": {"x": 1}, "task-b": {"y": 1}})
    (skill / "evals" / "g1").mkdir()
    for name in ("scenario-a", "task-b"):
        shutil.move(skill / "evals" / name, skill / "evals" / "g1" / name)

    listed = pytester.runpytest("--collect-only", "-q", "skills")
    named = pytester.runpytest("--collect-only", "-q", "skills/s/evals/g1/task-b")
    result = pytester.runpytest("skills", *eval_args(endpoint.base_url))

    assert _collected(listed) == ["skills/s/evals/g1::scenario-a"]
    listed.stdout.fnmatch_lines(
        ["*1 folder(s) with task.md and criteria.json not collected*g1/task-b*"]
    )
    assert _collected(named) == ["skills/s/evals/g1::task-b"]
    result.assert_outcomes(passed=1)


def test_skill_md_not_found_names_the_folder_and_the_nearest_one(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = write_skill(pytester.path, "x", {"scenario-a": {"x": 1}})
    (skill / "a" / "inner").mkdir(parents=True)  # two levels down: not the unit's skill
    (skill / "SKILL.md").rename(skill / "a" / "inner" / "SKILL.md")

    result = pytester.runpytest("skills", *eval_args(endpoint.base_url))

    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*SKILL.md: file not found in skills/x (every skill needs one); "
            "found skills/x/a/inner/SKILL.md"
        ]
    )


TIMING = frozenset({"seconds", "duration_seconds", "started", "finished", "timestamp"})


def _comparable(value: Any) -> Any:
    """A results JSON without the figures that measure time (they differ between any runs)."""
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    return value


def test_a_format_runs_in_the_engine_and_its_results_equal_those_of_its_conversion(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
) -> None:
    skill = format_layouts.skill_creator(pytester.path / "skills", EVALS)
    options = ("--eval-output", "out/", "--eval-cache", "off")
    args = ("skills", *sandbox_args(endpoint.base_url, standin_image, *options))

    as_it_is = pytester.runpytest(*args, "--junitxml=junit.xml")

    as_it_is.assert_outcomes(passed=2)
    scores = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}.get(
            "openkata_score"
        )
        for case in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    }
    # The results reached the scenarios' testcases of the JUnit file.
    assert (scores["eval-1"], scores["eval-2"]) == ("2/2", "1/1")
    assert not [p for p in (skill / "evals").iterdir() if p.name.startswith(".openkata")]
    first = _results(pytester.path)
    assert sorted(s["name"] for s in first["scenarios"]) == ["scenario-eval-1", "scenario-eval-2"]
    assert str(pytester.path) not in json.dumps(first)
    shutil.rmtree(pytester.path / "out")
    original = pytester.path / "original"
    shutil.copytree(skill, original)
    (skill / "evals" / "evals.json").unlink()
    assert convert.main([str(original), "--to", str(skill / "evals")]) == 0

    converted = pytester.runpytest(*args)

    converted.assert_outcomes(passed=2)
    assert _comparable(_results(pytester.path)["scenarios"]) == _comparable(first["scenarios"])


def _unit_with_skill_below(root: Path, plugin: dict[str, Any] | None) -> Path:
    """A unit whose ``evals/`` sits beside the skill folder (SKILL.md one level down), with a
    Tessl plugin manifest when ``plugin`` is given."""
    unit = write_skill(root, "unit", {"scenario-a": {"x": 1}}, changelog=None)
    (unit / "SKILL.md").unlink()
    skills = unit / "skills" if plugin is not None else unit
    (skills / "sorter").mkdir(parents=True)
    (skills / "sorter" / "SKILL.md").write_text("# sorter\n\nSort by the first column.\n")
    if plugin is not None:
        (unit / ".tessl-plugin").mkdir()
        (unit / ".tessl-plugin" / "plugin.json").write_text(json.dumps(plugin))
    return unit


def _agent_prompts(endpoint: ScriptedEndpoint) -> list[str]:
    return [
        r.json["messages"][-1]["content"]
        for r in endpoint.requests
        if r.json["messages"][0]["role"] != "system"
    ]


def test_a_skill_one_level_below_the_evals_folder_is_the_units_skill(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    _unit_with_skill_below(pytester.path, None)

    result = pytester.runpytest("skills", *eval_args(endpoint.base_url, "--eval-output", "out/"))

    result.assert_outcomes(passed=1)
    [prompt] = _agent_prompts(endpoint)
    assert "Sort by the first column." in prompt
    assert _results(pytester.path)["skill"] == "unit"


def test_a_tessl_plugin_names_its_unit_and_gives_its_version(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    plugin = {"name": "acme/csv", "version": "1.2.0", "skills": "./skills"}
    _unit_with_skill_below(pytester.path, plugin)
    args = eval_args(endpoint.base_url, "--eval-output", "out/")

    result = pytester.runpytest("skills", "-k", "skill:acme/csv", *args)

    result.assert_outcomes(passed=1)
    [prompt] = _agent_prompts(endpoint)
    assert "Sort by the first column." in prompt
    report = _results(pytester.path)
    assert (report["skill"], report["skill_version"]) == ("acme/csv", "1.2.0")


def test_a_file_of_a_formats_name_that_no_format_reads_is_named_in_a_warning(
    pytester: pytest.Pytester,
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    (skill / "evals" / "g1").mkdir()
    (skill / "evals" / "g1" / "eval.yaml").write_text("just: a mapping\n")
    format_layouts.harbor(skill / "evals")

    result = pytester.runpytest("--collect-only", "-q", "skills")

    assert _collected(result) == [
        "skills/s/evals::scenario-a",
        "skills/s/evals/tasks/sort-csv/task.toml::sort-csv",
    ]
    result.stdout.fnmatch_lines(["*1 file(s) not collected, since no eval format*g1/eval.yaml*"])


def test_a_scenario_its_format_cannot_read_errors_naming_the_file_and_key_never_the_staging(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    evals = [{"id": 1, "prompt": "Sort it.", "files": ["evals/files/missing.csv"]}]
    skill = format_layouts.skill_creator(pytester.path / "skills", evals)

    result = pytester.runpytest("skills", *eval_args(endpoint.base_url, "--eval-output", "out/"))

    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*scenario error: *evals.json: evals[[]0[]].files[[]0[]]*"])
    assert ".openkata-" not in result.stdout.str()
    assert ".openkata-" not in json.dumps(_results(pytester.path))
    assert script.agent_calls == 0
    assert not [p for p in (skill / "evals").iterdir() if p.name.startswith(".openkata")]


def test_lint_counts_a_published_formats_evals_as_evaluating_the_skill(tmp_path: Path) -> None:
    from pytest_openkata.core.lint.skill import scenarios_rule

    bare = write_skill(tmp_path, "bare", {})
    skill = format_layouts.skill_creator(tmp_path / "skills")

    assert [f.rule for f in scenarios_rule(bare)] == ["scenarios"]
    assert scenarios_rule(skill) == []


def test_a_skills_scenarios_from_every_source_count_for_the_gates_completeness(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    format_layouts.skill_creator(pytester.path / "skills", EVALS)
    write_scenario(pytester.path / "skills" / "csv-tidy", "scenario-a", {"x": 1})

    result = pytester.runpytest("skills", "-k", "scenario-a", *eval_args(endpoint.base_url))

    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*partial run: 1 of 3 scenarios; threshold 95% not enforced*"])


def test_an_interrupted_run_removes_the_staged_folders(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = format_layouts.skill_creator(pytester.path / "skills", EVALS)
    pytester.makeconftest(
        "import os\n"
        "def pytest_openkata_scenario_result(result, item):\n"
        "    evals = os.listdir(item.skill_dir / 'evals')\n"
        "    assert [p for p in evals if p.startswith('.openkata')], 'it ran from its folder'\n"
        "    raise KeyboardInterrupt\n"
    )

    # In a process of its own: the interrupt would otherwise reach this test's own run.
    result = pytester.runpytest_subprocess("skills", *eval_args(endpoint.base_url))

    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert not [p for p in (skill / "evals").iterdir() if p.name.startswith(".openkata")]


def test_a_run_killed_outright_leaves_its_staged_folder_to_the_next_run(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = format_layouts.skill_creator(pytester.path / "skills", EVALS)
    conftest = pytester.makeconftest(
        "import os, signal\n"
        "def pytest_openkata_scenario_result(result, item):\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )

    killed = pytester.runpytest_subprocess("skills", *eval_args(endpoint.base_url))
    [left] = [p for p in (skill / "evals").iterdir() if p.name.startswith(".openkata")]
    conftest.unlink()
    again = pytester.runpytest_subprocess("skills", *eval_args(endpoint.base_url))

    assert killed.ret == -9  # SIGKILL: nothing of the run could clean up
    # (However its scenarios end here: they are sandboxed, and no engine may answer.)
    assert "eval-1" in again.stdout.str()
    assert not left.exists()
    assert not [p for p in (skill / "evals").iterdir() if p.name.startswith(".openkata")]


def test_a_category_selection_leaves_format_scenarios_out_unread(
    pytester: pytest.Pytester,
) -> None:
    evals = [{"id": 1, "prompt": "Sort it.", "files": ["evals/files/missing.csv"]}]
    skill = format_layouts.skill_creator(pytester.path / "skills", evals)

    result = pytester.runpytest("--collect-only", "-q", "skills", "--eval-category", "INTENT")

    assert _collected(result) == []
    result.stdout.fnmatch_lines(["*1 deselected*"])
    assert not [p for p in (skill / "evals").iterdir() if p.name.startswith(".openkata")]


def test_what_a_run_does_not_apply_of_a_format_is_the_items_warning(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
) -> None:
    evals = [{**EVALS[0], "files": ["evals/files/people.csv"]}, EVALS[1]]
    skill = format_layouts.skill_creator(pytester.path / "skills", evals)
    (skill / "evals" / "files" / "people.csv").chmod(0o755)  # an executable input

    result = pytester.runpytest(
        "skills", *sandbox_args(endpoint.base_url, standin_image), "-k", "eval-1"
    )

    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*skills/csv-tidy/evals/evals.json:0: EvalLintWarning: [[]format[]] "
            "*evals/evals.json: evals[[]0[]]: a run does not apply the executable bit of inputs*"
        ]
    )
    assert "eval-2" not in result.stdout.str().split("warnings summary")[-1]


def test_a_format_scenario_named_as_a_scenario_folder_beside_it_errors_naming_both(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = format_layouts.skill_creator(pytester.path / "skills", EVALS)
    write_scenario(skill, "scenario-eval-1", {"x": 1})

    result = pytester.runpytest("--collect-only", "-q", "skills")
    ran = pytester.runpytest("skills", *eval_args(endpoint.base_url), "-k", "eval-1")

    assert "skills/csv-tidy/evals/evals.json::eval-1" in result.stdout.str()
    ran.stdout.fnmatch_lines(
        [
            "*cannot be collected: *evals/evals.json: evals[[]0[]]: its results would be named "
            "scenario-eval-1, as are those of the scenario folder evals/scenario-eval-1: "
            "rename one of them*"
        ]
    )


def test_a_waza_code_grader_runs_in_the_engine_scoring_as_waza_and_erroring_what_it_cannot_tell(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
) -> None:
    spec = {
        "name": "csv-tidy-eval",
        "skill": "csv-tidy",
        "config": {"trials_per_task": 1, "executor": "mock", "model": "any"},
        "tasks": ["tasks/*.yaml"],
    }
    task = {
        "id": "sort-by-age",
        "inputs": {"prompt": "Sort people.csv by age."},
        "graders": [
            {
                "name": "shape",
                "type": "code",
                "weight": 3,
                "config": {
                    "assertions": [
                        "'done' in output and duration_ms >= 0",
                        "re.search(r'^D[O]NE$', output, re.IGNORECASE | re.MULTILINE) is not None",
                        "len(output) > 1000",
                    ]
                },
            }
        ],
    }
    skill = pytester.path / "skills" / "csv-tidy"
    format_layouts.write(skill / "SKILL.md", format_layouts.SKILL_MD)
    folder = format_layouts.waza(skill, task, spec)
    # The stand-in agent reports no events: an assertion over its tool calls cannot be told.
    calls = {**task, "id": "calls", "graders": [{**task["graders"][0], "name": "calls"}]}
    calls["graders"][0]["config"] = {"assertions": ["len(tool_calls) == 0"]}
    (folder / "tasks" / "calls.yaml").write_text(json.dumps(calls), encoding="utf-8")
    options = ("--eval-output", "out/", "--eval-cache", "off")

    result = pytester.runpytest("skills", *sandbox_args(endpoint.base_url, standin_image, *options))

    result.assert_outcomes(failed=2, errors=1)  # the scenario and its failed check
    [scenario] = [s for s in _results(pytester.path)["scenarios"] if s["criteria"]]
    # waza's score of the grader: the assertions that hold over all of them.
    assert (scenario["score"], scenario["max_score"]) == (2, 3)
    assert {c["name"]: (c["kind"], c["pass"]) for c in scenario["criteria"]} == {
        "shape: 'done' in output and duration_ms >= 0": ("check", True),
        "shape: re.search(r'^D[O]NE$', output, re.IGNORECASE | re.MULTILINE) is not None": (
            "check",
            True,
        ),
        "shape: len(output) > 1000": ("check", False),
    }
    result.stdout.fnmatch_lines(
        ["*('calls: len(tool_calls) == 0'): kiro-cli gave no events to tell its tool calls*"]
    )
    assert script.judge_calls == 0
