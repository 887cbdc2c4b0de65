"""Each published eval format read into the one scenario model, from folders laid out as the
format lays them out (tests/support/format_layouts.py), and the errors each gives for what it
cannot run: an unknown key, a grader this plugin cannot honour, a missing prompt file."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_openkata.core.formats import (
    EvalFormat,
    EvalScenario,
    FormatError,
    JudgedCriterion,
    detect_formats,
    load_format,
)
from pytest_openkata.core.formats.model import integer_weights
from pytest_openkata.core.formats.reading import read_json_file, read_yaml
from pytest_openkata.core.formats.skillgrade import SkillgradeFormat, score_command
from pytest_openkata.core.scenario import SimulatedUser, check_of
from tests.support import format_layouts as layouts


def read_all(folder: Path) -> list[EvalScenario]:
    (fmt,) = detect_formats(folder)
    return [fmt.load(source) for source in fmt.scenarios(folder)]


def checks_by_name(scenario: EvalScenario) -> dict[str, dict[str, Any]]:
    return {str(c["name"]): dict(c) for c in scenario.checks}


def test_every_built_in_format_is_registered_and_implements_the_contract() -> None:
    for name in ("openkata", "skill-creator", "waza", "skillgrade", "harbor"):
        fmt = load_format(name)
        assert isinstance(fmt, EvalFormat)
        assert fmt.name == name


# --- skill-creator --------------------------------------------------------------------------


def test_skill_creator_evals_become_scenarios_with_judged_expectations_and_output_checks(
    tmp_path: Path,
) -> None:
    skill = layouts.skill_creator(tmp_path)
    assert [f.name for f in detect_formats(skill)] == ["skill-creator"]
    first, second = read_all(skill)
    assert (first.name, second.name) == ("eval-1", "eval-2")
    assert first.source.path == skill / "evals" / "evals.json"
    assert first.task == "Sort people.csv by age and save it as sorted.csv."
    assert first.context == "A sorted.csv with al before bo."
    assert [(i.path, i.content) for i in first.inputs] == [
        ("people.csv", b"name,age\nbo,3\nal,2\n")
    ]
    assert first.criteria == (
        JudgedCriterion("sorted.csv lists al before bo", "sorted.csv lists al before bo", 1),
        JudgedCriterion("The header row is kept", "The header row is kept", 1),
    )
    assert second.criteria == (
        JudgedCriterion("The answer names a column", "The answer names a column", 1),
    )
    checks = checks_by_name(second)
    names_age = check_of(Path("x"), 0, checks["names age"])
    assert names_age.pattern is not None
    assert names_age.pattern.search("in age (years) order")
    assert not names_age.pattern.search("in age order")  # the parentheses are text, not a group
    assert checks["no apology"]["absent"] is True
    # Its evals folder, named itself, reads the same (files relative to the skill above it).
    assert read_all(skill / "evals") == [first, second]


@pytest.mark.parametrize(
    ("item", "field", "words"),
    [
        (
            {"id": 1, "prompt": "p", "assertions": [{"type": "llm", "value": "v"}]},
            "evals[0].assertions[0].type",
            "cannot be graded",
        ),
        ({"id": 1, "expectations": ["e"]}, "evals[0].prompt", "needs a prompt"),
        (
            {"id": 1, "prompt": "p", "files": ["evals/files/gone.csv"], "expectations": ["e"]},
            "evals[0].files[0]",
            "not found",
        ),
        ({"id": 1, "prompt": "p"}, "evals[0]", "needs expectations or assertions"),
    ],
)
def test_skill_creator_errors_name_the_file_the_key_and_the_format(
    tmp_path: Path, item: dict[str, Any], field: str, words: str
) -> None:
    skill = layouts.skill_creator(tmp_path, [item])
    with pytest.raises(FormatError) as caught:
        read_all(skill)
    message = str(caught.value)
    assert message.startswith(f"evals/evals.json: {field}: ")
    assert str(tmp_path) not in message  # no machine path in what a report may show
    assert words in message
    assert "(skill-creator format)" in message


# --- waza ------------------------------------------------------------------------------------


def test_waza_task_reads_prompt_file_inputs_follow_ups_trials_and_maps_graders(
    tmp_path: Path,
) -> None:
    folder = layouts.waza(tmp_path)
    assert [f.name for f in detect_formats(folder)] == ["waza"]
    (scenario,) = read_all(folder)
    assert scenario.name == "sort-by-age"
    assert scenario.source.path == folder / "tasks" / "sort.yaml"
    assert scenario.task == "Sort people.csv by age into sorted.csv.\n"
    assert {i.path: i.content for i in scenario.inputs} == {
        "people.csv": b"name,age\nbo,3\nal,2\n",
        "notes.txt": b"keep the header\n",
    }
    assert scenario.follow_ups == ("Now sort by name.",)
    assert scenario.trials == 3
    # Weights 1 (the eval's grader), 0.6, 0.3, 0.1 and 1 (expected output): tenths made whole.
    assert scenario.criteria == (JudgedCriterion("tidy", "The rows are sorted by age.", 6),)
    checks = checks_by_name(scenario)
    assert {n: (c["type"], c["max_score"]) for n, c in checks.items()} == {
        "no-errors": ("output_regex", 10),
        "file-made": ("file", 3),
        "lean": ("max_tool_calls", 1),
        "output contains 'sorted'": ("output_regex", 10),
    }
    assert checks["file-made"]["path"] == "sorted.csv"
    assert checks["lean"]["max"] == 12
    no_errors = check_of(Path("x"), 0, checks["no-errors"])
    assert no_errors.absent
    assert no_errors.pattern is not None
    assert no_errors.pattern.search("a traceback")  # waza's contains is case-insensitive


def test_waza_text_grader_values_share_its_weight(tmp_path: Path) -> None:
    task = {
        "id": "t",
        "name": "t",
        "inputs": {"prompt": "Say hi."},
        "graders": [
            {
                "name": "words",
                "type": "text",
                "weight": 2,
                "config": {"contains_cs": ["Hi", "there"]},
            },
            {"name": "judge", "type": "prompt", "config": {"prompt": "Friendly."}},
        ],
    }
    spec = {
        "name": "e",
        "skill": "s",
        "config": {"trials_per_task": 1, "timeout_seconds": 9, "executor": "mock", "model": "m"},
        "metrics": [{"name": "m"}],
        "tasks": ["tasks/*.yaml"],
    }
    (scenario,) = read_all(layouts.waza(tmp_path, task, spec))
    checks = checks_by_name(scenario)
    assert {n: c["max_score"] for n, c in checks.items()} == {"words [1]": 1, "words [2]": 1}
    assert scenario.criteria == (JudgedCriterion("judge", "Friendly.", 1),)


def test_waza_code_assertions_are_expression_checks_sharing_the_graders_weight(
    tmp_path: Path,
) -> None:
    task = {
        "id": "t",
        "name": "t",
        "inputs": {"prompt": "Say hi."},
        "graders": [
            {
                "name": "shape",
                "type": "code",
                "weight": 3,
                "config": {
                    "assertions": ["len(output) > 0", "'hi' in output.lower()", "len(output) > 0"]
                },
            },
            # A task's grader may give its assertions beside config: waza takes those.
            {
                "name": "lean",
                "type": "code",
                "weight": 2,
                "assertions": ["(len(tool_calls) <\n  3)"],
                "config": {"assertions": ["False"]},
            },
            {"name": "judge", "type": "prompt", "config": {"prompt": "Friendly."}},
        ],
    }
    (scenario,) = read_all(layouts.waza(tmp_path, task))
    checks = checks_by_name(scenario)
    # Weights 3 (three assertions), 2 (one), the judge's and the eval's text grader's 1.
    assert checks.pop("no-errors")["max_score"] == 1
    assert {n: (c["type"], c["expression"], c["max_score"]) for n, c in checks.items()} == {
        "shape: len(output) > 0": ("output_expression", "len(output) > 0", 1),
        "shape: 'hi' in output.lower()": ("output_expression", "'hi' in output.lower()", 1),
        "shape: len(output) > 0 [3]": ("output_expression", "len(output) > 0", 1),
        "lean: (len(tool_calls) < 3)": ("output_expression", "(len(tool_calls) <\n  3)", 2),
    }
    assert scenario.criteria == (JudgedCriterion("judge", "Friendly.", 1),)
    loaded = check_of(Path("x"), 0, checks["lean: (len(tool_calls) < 3)"])
    assert loaded.type == "output_expression"
    assert loaded.expression == "(len(tool_calls) <\n  3)"


def test_waza_s_earlier_regex_grader_is_output_patterns_sharing_the_graders_weight(
    tmp_path: Path,
) -> None:
    grader = {
        "name": "tone",
        "type": "regex",
        "weight": 2,
        "config": {"must_match": ["(?i)recurs(ion|ive)"], "must_not_match": ["fatal error"]},
    }
    task = {"id": "t", "name": "t", "inputs": {"prompt": "Explain it."}, "graders": [grader]}

    (scenario,) = read_all(layouts.waza(tmp_path, task))

    checks = checks_by_name(scenario)
    checks.pop("no-errors")  # the eval's own text grader
    assert {
        n: (c["pattern"], c.get("absent", False), c["max_score"]) for n, c in checks.items()
    } == {
        "tone [1]": ("(?i)recurs(ion|ive)", False, 1),
        "tone [2]": ("fatal error", True, 1),
    }


BASE_TASK: dict[str, Any] = {
    "id": "t",
    "name": "t",
    "inputs": {"prompt": "Go."},
    "graders": [{"name": "g", "type": "prompt", "config": {"prompt": "ok"}}],
}


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"retries": 2}, "retries", "unknown key"),
        (
            {"graders": [{"name": "c", "type": "code", "config": {"assertions": ["len(x) >"]}}]},
            "graders[0].config.assertions[0]",
            "not a Python expression",
        ),
        (
            {"graders": [{"name": "r", "type": "regex", "config": {"must_match": "x"}}]},
            "graders[0].config.must_match",
            "must be a list of patterns",
        ),
        (
            {"graders": [{"name": "r", "type": "regex", "config": {}}]},
            "graders[0].config",
            "a regex grader needs a pattern to look for",
        ),
        (
            {"graders": [{"name": "c", "type": "code", "config": {"assertions": []}}]},
            "graders[0].config.assertions",
            "a code grader needs a list of assertions",
        ),
        (
            {"graders": [{"name": "c", "type": "code", "config": {"language": "python"}}]},
            "graders[0].config.language",
            "unknown key",
        ),
        (
            {"graders": [{"name": "t", "type": "text", "assertions": ["len(output) > 0"]}]},
            "graders[0].assertions",
            "not a text grader's",
        ),
        (
            {
                "graders": [
                    {
                        "name": "t",
                        "type": "trigger",
                        "config": {"skill_path": "x", "mode": "positive"},
                    }
                ]
            },
            "graders[0].type",
            "not supported",
        ),
        (
            {"graders": [{"name": "b", "type": "behavior", "config": {"max_duration_ms": 5}}]},
            "graders[0].config.max_duration_ms",
            "not supported",
        ),
        ({"inputs": {"prompt_file": "missing.md"}}, "inputs.prompt_file", "prompt file not found"),
        (
            {"inputs": {"prompt": "Go.", "workdir": "src"}},
            "inputs.workdir",
            "not supported",
        ),
        ({"expected": {"should_trigger": True}}, "expected.should_trigger", "not supported"),
    ],
)
def test_waza_errors_name_the_file_the_key_and_the_format(
    tmp_path: Path, change: dict[str, Any], field: str, words: str
) -> None:
    folder = layouts.waza(tmp_path, {**BASE_TASK, **change})
    with pytest.raises(FormatError) as caught:
        read_all(folder)
    message = str(caught.value)
    assert f"sort.yaml: {field}: " in message
    assert words in message
    assert "(waza format)" in message


def test_a_waza_responder_is_the_simulated_user(tmp_path: Path) -> None:
    responder = {"instructions": "You want ages ascending.", "max_followups": 2, "model": "m"}
    task = {**BASE_TASK, "inputs": {"prompt": "Go.", "responder": responder}}
    (scenario,) = read_all(layouts.waza(tmp_path, task))
    assert scenario.simulated_user == SimulatedUser("You want ages ascending.", 2)
    assert scenario.follow_ups == ()


def test_waza_unknown_eval_key_is_an_error_as_in_waza(tmp_path: Path) -> None:
    folder = layouts.waza(tmp_path)
    spec = yaml.safe_load((folder / "eval.yaml").read_text())
    spec["config"]["max_workers"] = 4  # renamed to workers in waza: now unknown there
    (folder / "eval.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(FormatError, match=r"eval\.yaml: config\.max_workers: unknown key"):
        read_all(folder)


def test_a_disabled_waza_task_is_not_a_scenario(tmp_path: Path) -> None:
    folder = layouts.waza(tmp_path, {**BASE_TASK, "enabled": False})
    layouts.write(folder / "tasks" / "other.yaml", yaml.safe_dump({**BASE_TASK, "id": "other"}))
    assert [s.name for s in read_all(folder)] == ["other"]


# --- Skillgrade -----------------------------------------------------------------------------


def test_skillgrade_task_reads_files_workspace_graders_trials_threshold_and_docker(
    tmp_path: Path,
) -> None:
    skill = layouts.skillgrade(tmp_path)
    assert [f.name for f in detect_formats(skill)] == ["skillgrade"]
    (scenario,) = read_all(skill)
    assert scenario.name == "sort-rows"
    assert scenario.task == "Sort people.csv by age into sorted.csv.\n"
    assert [(i.path, i.executable) for i in scenario.inputs] == [
        ("people.csv", False),
        ("bin/check", True),
    ]
    assert scenario.criteria == (
        JudgedCriterion("llm_rubric 2", "Rows are sorted by age, header kept.", 3),
    )
    (check,) = scenario.checks
    assert (check["name"], check["type"], check["max_score"]) == ("deterministic 1", "command", 7)
    assert [(f.path, f.content) for f in scenario.check_files] == [
        ("graders/check.sh", (skill / "graders" / "check.sh").read_bytes())
    ]
    assert (scenario.trials, scenario.threshold) == (10, 0.8)
    assert scenario.setup == ("apt-get install -y jq",)
    assert (scenario.sandbox.image, scenario.sandbox.cpus, scenario.sandbox.memory_mb) == (
        "node:20-slim",
        2.0,
        2048,
    )


@pytest.mark.parametrize(
    ("printed", "passes"),
    [
        ('{"score": 1, "details": "ok"}', True),
        ('{"score": 0.67, "details": "2/3"}', False),
        ("no json", False),
    ],
)
def test_a_deterministic_grader_passes_on_a_printed_score_of_one(
    tmp_path: Path, printed: str, passes: bool
) -> None:
    command = score_command(f"printf '%s' '{printed}'", "true")
    done = subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, check=False, cwd=tmp_path
    )
    assert (done.returncode == 0) is passes
    assert printed in done.stdout  # the grader's own output stays in the check's evidence


@pytest.mark.parametrize(
    ("grader", "field", "words"),
    [
        ({"type": "human", "rubric": "x"}, "tasks[0].graders[0].type", "not supported"),
    ],
)
def test_skillgrade_errors_name_the_file_the_key_and_the_format(
    tmp_path: Path, grader: dict[str, Any], field: str, words: str
) -> None:
    data = {"version": "1", "tasks": [{"name": "t", "instruction": "Go.", "graders": [grader]}]}
    skill = layouts.skillgrade(tmp_path, data)
    with pytest.raises(FormatError) as caught:
        read_all(skill)
    assert f"eval.yaml: {field}: " in str(caught.value)
    assert words in str(caught.value)
    assert "(skillgrade format)" in str(caught.value)


def test_keys_skill_creator_does_not_have_are_passed_over_as_its_scripts_do_and_named(
    tmp_path: Path,
) -> None:
    evals = [
        {
            "id": 1,
            "name": "sorts",
            "prompt": "Sort it.",
            "expected_behavior": "Sorted.",
            "assertions": [{"type": "contains", "value": "al", "weight": 2}],
        },
        {"id": 2, "prompt": "Say hi.", "expectations": ["Says hi"]},
    ]
    skill = layouts.skill_creator(tmp_path, evals)
    data = json.loads((skill / "evals" / "evals.json").read_text())
    data["generated_by"] = "a tool"
    (skill / "evals" / "evals.json").write_text(json.dumps(data))

    first, second = read_all(skill)

    assert first.ignored_keys == (
        "generated_by",
        "evals[0].name",
        "evals[0].expected_behavior",
        "evals[0].assertions[0].weight",
    )
    assert first.task == "Sort it."
    assert [c["max_score"] for c in first.checks] == [1]
    assert second.ignored_keys == ("generated_by",)  # the file's, and none of the other eval's


def test_an_assertion_object_without_a_type_is_a_judged_statement_as_skill_creator_grades_it(
    tmp_path: Path,
) -> None:
    assertions = [
        {"name": "has-steps", "description": "All four steps are shown"},
        {"name": "Rows are sorted by age"},
        {"type": "contains", "value": "age"},
    ]
    skill = layouts.skill_creator(tmp_path, [{"id": 1, "prompt": "Go.", "assertions": assertions}])

    (scenario,) = read_all(skill)

    assert [(c.name, c.description, c.weight) for c in scenario.criteria] == [
        ("has-steps", "All four steps are shown", 1),
        ("Rows are sorted by age", "Rows are sorted by age", 1),
    ]
    assert [c["pattern"] for c in scenario.checks] == ["age"]


@pytest.mark.parametrize(
    ("assertion", "field", "words"),
    [
        ({}, "evals[0].assertions[0]", "needs a type (contains, not_contains, regex) or a"),
        ({"name": "x", "description": 3}, "evals[0].assertions[0].description", "non-empty"),
    ],
)
def test_an_assertion_object_with_nothing_to_judge_names_its_field(
    tmp_path: Path, assertion: dict[str, object], field: str, words: str
) -> None:
    skill = layouts.skill_creator(tmp_path, [{"id": 1, "prompt": "Go.", "assertions": [assertion]}])

    with pytest.raises(FormatError) as caught:
        read_all(skill)

    assert f"evals.json: {field}: " in str(caught.value)
    assert words in str(caught.value)


def test_keys_skillgrade_does_not_have_are_passed_over_and_those_it_cannot_honour_refused(
    tmp_path: Path,
) -> None:
    task = {
        "name": "t",
        "instruction": "Go.",
        "notes": "for people",
        "workspace": ["fixtures/people.csv", {"content": "a,b\n", "dest": "data/new.csv"}],
        "graders": [{"type": "llm_rubric", "rubric": "ok", "provider": "x"}],
    }
    data = {"version": "1", "owner": "me", "tasks": [task, {**task, "name": "u", "env": {}}]}
    skill = layouts.skillgrade(tmp_path, data)
    fmt = SkillgradeFormat()
    first, second = fmt.scenarios(skill)

    scenario = fmt.load(first)

    assert scenario.ignored_keys == ("owner", "tasks[0].notes", "tasks[0].graders[0].provider")
    assert {f.path: f.content for f in scenario.inputs} == {
        "people.csv": b"name,age\nbo,3\nal,2\n",
        "data/new.csv": b"a,b\n",
    }
    with pytest.raises(FormatError) as caught:
        fmt.load(second)  # its own error: the first task still runs
    assert "csv-tidy/eval.yaml: tasks[1].env: not supported by this plugin" in str(caught.value)


def test_a_skillgrade_workspace_file_outside_the_workspace_is_an_error(tmp_path: Path) -> None:
    data = {
        "version": "1",
        "tasks": [
            {
                "name": "t",
                "instruction": "Go.",
                "workspace": [{"src": "graders/check.sh", "dest": "/usr/local/bin/check"}],
                "graders": [{"type": "llm_rubric", "rubric": "ok"}],
            }
        ],
    }
    with pytest.raises(
        FormatError,
        match=r"tasks\[0\]\.workspace\[0\]\.dest: '/usr/local/bin/check' is not a path inside",
    ):
        read_all(layouts.skillgrade(tmp_path, data))


# --- Harbor ---------------------------------------------------------------------------------


def test_harbor_task_becomes_a_verifier_check_with_its_solution_and_environment(
    tmp_path: Path,
) -> None:
    dataset = layouts.harbor(tmp_path)
    assert [f.name for f in detect_formats(dataset)] == ["harbor"]
    (scenario,) = read_all(dataset)
    task = dataset / "sort-csv"
    assert scenario.name == "sort-csv"
    assert scenario.task == "Sort /app/people.csv by age, in place.\n"
    assert scenario.criteria == ()
    (check,) = scenario.checks
    assert (check["type"], check["timeout"], check["max_score"]) == ("command", 120.0, 1)
    # The verifier's files are check files: out of the agent's workspace until it finished.
    assert [f.path for f in scenario.check_files] == ["tests/test.sh"]
    assert scenario.inputs == ()
    assert scenario.solution == task / "solution"
    box = scenario.sandbox
    assert (box.network, box.cpus, box.memory_mb, box.dockerfile) == (
        "none",
        1.0,
        2048,
        task / "environment" / "Dockerfile",
    )
    # The task folder itself is read the same way.
    assert [s.name for s in read_all(task)] == ["sort-csv"]


@pytest.mark.parametrize("folder", ["environment", "solution"])
def test_a_harbor_folder_linked_out_of_the_task_is_an_error(tmp_path: Path, folder: str) -> None:
    dataset = layouts.harbor(tmp_path / "src")
    task = dataset / "sort-csv"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "Dockerfile").write_text("FROM box\nCOPY id_rsa /\n")
    (outside / "solve.sh").write_text("cat /id_rsa\n")
    (outside / "id_rsa").write_text("a private key\n")
    shutil.rmtree(task / folder, ignore_errors=True)
    (task / folder).symlink_to(outside)

    with pytest.raises(FormatError) as caught:
        read_all(dataset)

    assert f"task.toml: {folder}: " in str(caught.value)
    assert "leads out of the skill's folder" in str(caught.value)
    assert str(tmp_path) not in str(caught.value)


@pytest.mark.parametrize(
    ("toml", "field"),
    [
        ('schema_version = "1.1"\n', "schema_version"),
        ("[environment]\ngpus = 1\n", "environment.gpus"),
        ('[verifier]\nenv = { TOKEN = "x" }\n', "verifier.env"),
        ("[agent]\nturns = 3\n", "agent.turns"),
        ("[environment]\nbuild_timeout_sec = -1\n", "environment.build_timeout_sec"),
    ],
)
def test_harbor_errors_name_the_file_the_key_and_the_format(
    tmp_path: Path, toml: str, field: str
) -> None:
    with pytest.raises(FormatError) as caught:
        read_all(layouts.harbor(tmp_path, toml))
    assert f"task.toml: {field}: " in str(caught.value)
    assert "(harbor format)" in str(caught.value)


# --- openkata / Tessl -----------------------------------------------------------------------


def test_openkata_folders_read_with_tessl_fixtures_and_setup(tmp_path: Path) -> None:
    skill = layouts.openkata(tmp_path)
    assert [f.name for f in detect_formats(skill)] == ["openkata"]
    (scenario,) = read_all(skill)
    assert scenario.name == "scenario-1"
    assert scenario.task == "Sort people.csv by age.\n"
    assert scenario.context == "The agent works on a small CSV."
    assert scenario.criteria == (JudgedCriterion("sorted", "Rows are in age order", 7),)
    assert [dict(c) for c in scenario.checks] == [
        {"name": "file there", "type": "file", "path": "sorted.csv", "max_score": 3}
    ]
    (fixture,) = scenario.fixtures
    assert (fixture.name, fixture.source.resolve(), fixture.install_path) == (
        "app",
        (skill / "app").resolve(),
        "app",
    )
    assert scenario.setup == ("./app/setup.sh",)
    assert (scenario.trials, scenario.description) == (2, "sorting")


def test_a_tessl_file_fixture_is_an_error_naming_the_key(tmp_path: Path) -> None:
    skill = layouts.openkata(tmp_path)
    options = skill / "evals" / "scenario-1" / "scenario.json"
    options.write_text(json.dumps({"fixtures": {"one": {"type": "file", "path": "x"}}}))
    with pytest.raises(
        FormatError, match=re.escape("scenario.json: fixtures.one.type: only directory fixtures")
    ):
        read_all(skill)


def test_weights_keep_their_proportions_as_whole_points() -> None:
    assert integer_weights([3, 5]) == [3, 5]
    assert integer_weights([0.7, 0.3]) == [7, 3]
    assert integer_weights([0.25, 0.75]) == [25, 75]
    assert integer_weights([1 / 3, 2 / 3]) == [333, 667]


@pytest.mark.parametrize(
    "given",
    ["/etc/hostname", "../../outside.txt", "evals/files/link.txt"],
    ids=["absolute", "dots", "a link out"],
)
def test_a_skill_creator_file_leading_out_of_the_skill_is_an_error(
    tmp_path: Path, given: str
) -> None:
    (tmp_path / "outside.txt").write_text("the machine's own file\n")
    skill = layouts.skill_creator(
        tmp_path / "skills", [{"id": 1, "prompt": "Go.", "files": [given]}]
    )
    (skill / "evals" / "files" / "link.txt").symlink_to(tmp_path / "outside.txt")

    with pytest.raises(FormatError) as caught:
        read_all(skill)

    assert "files[0]: " in str(caught.value)
    assert "leads out of the skill's folder" in str(caught.value)


def test_a_waza_prompt_file_or_fixture_leading_out_of_the_eval_is_an_error(tmp_path: Path) -> None:
    folder = layouts.waza(tmp_path / "repo", {**BASE_TASK, "inputs": {"prompt_file": "../../x.md"}})
    (tmp_path / "repo" / "x.md").write_text("beside the eval's folder, not in it\n")

    with pytest.raises(FormatError) as caught:
        read_all(folder)

    assert "inputs.prompt_file: " in str(caught.value)
    assert "leads out of the skill's folder" in str(caught.value)


def test_a_skillgrade_instruction_file_leading_out_of_the_skill_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "secret.md").write_text("not the skill's\n")
    skill = layouts.skillgrade(tmp_path / "skills")
    spec = yaml.safe_load((skill / "eval.yaml").read_text())
    spec["tasks"][0]["instruction"] = str(tmp_path / "secret.md")
    (skill / "eval.yaml").write_text(yaml.safe_dump(spec))

    with pytest.raises(FormatError) as caught:
        read_all(skill)

    assert ".instruction: " in str(caught.value)
    assert "leads out of the skill's folder" in str(caught.value)


def test_a_format_file_in_group_folders_belongs_to_the_skill_above_them(tmp_path: Path) -> None:
    from pytest_openkata.core.formats.reading import unit_of

    skill = tmp_path / "skills" / "s"
    task = skill / "evals" / "g1" / "g2" / "tasks" / "t" / "task.toml"
    task.parent.mkdir(parents=True)
    (skill / "SKILL.md").write_text("# s\n")
    orphan = tmp_path / "loose" / "evals" / "a" / "b" / "eval.yaml"
    orphan.parent.mkdir(parents=True)

    assert unit_of(task) == skill
    assert unit_of(orphan) == tmp_path / "loose"  # the folder holding its evals


def test_a_harbor_dockerfile_is_staged_with_its_context_and_named_in_scenario_json(
    tmp_path: Path,
) -> None:
    from pytest_openkata.core.formats.harbor import HarborFormat
    from pytest_openkata.core.formats.writers import write_openkata

    task = tmp_path / "tasks" / "t"
    (task / "environment").mkdir(parents=True)
    (task / "environment" / "Dockerfile").write_text("FROM box\nCOPY data.txt /data.txt\n")
    (task / "environment" / "data.txt").write_text("data\n")
    (task / "tests").mkdir()
    (task / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    (task / "instruction.md").write_text("Do it.\n")
    (task / "task.toml").write_text("[environment]\ncpus = 1\n")
    fmt = HarborFormat()
    [source] = fmt.scenarios(task)

    notes = write_openkata([fmt.load(source)], tmp_path / "out")
    (task / "task.toml").write_text("[environment]\nbuild_timeout_sec = 42\n")
    write_openkata([fmt.load(source)], tmp_path / "bounded")

    folder = tmp_path / "out" / "scenario-t"
    options = json.loads((folder / "scenario.json").read_text())
    assert options["dockerfile"] == "environment/Dockerfile"
    assert options["build_timeout_sec"] == 600.0  # Harbor's default when task.toml has none
    bounded = json.loads((tmp_path / "bounded" / "scenario-t" / "scenario.json").read_text())
    assert bounded["build_timeout_sec"] == 42
    assert (folder / "environment" / "data.txt").read_text() == "data\n"
    assert not [n for n in notes if "Dockerfile" in n.what]


def test_two_workers_staging_into_a_skill_without_evals_share_the_folder_they_both_make(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under xdist each worker stages its own scenarios; when the skill has no ``evals``
    folder, another worker may make it between this one's look and its own mkdir."""
    from pytest_openkata.core.formats.harbor import HarborFormat
    from pytest_openkata.core.formats.staging import Staging

    skill = tmp_path / "harbor"
    (skill / "SKILL.md").parent.mkdir()
    (skill / "SKILL.md").write_text(layouts.SKILL_MD)
    layouts.harbor(skill)
    evals = skill / "evals"
    made_by_the_other_worker: list[Path] = []
    real_mkdir = Path.mkdir

    def other_worker_first(self: Path, *args: Any, **kwargs: Any) -> None:
        if self == evals and not made_by_the_other_worker:
            real_mkdir(self)
            made_by_the_other_worker.append(self)
        real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", other_worker_first)
    fmt = HarborFormat()
    [source] = fmt.scenarios(skill / "tasks")
    this_worker = Staging()

    staged = this_worker.stage(fmt, source, skill)

    assert made_by_the_other_worker == [evals]
    assert (staged.folder / "task.md").is_file()
    this_worker.close()
    assert evals.is_dir()  # the other worker's, still in use: not removed by this one


def test_a_lone_surrogate_escape_in_a_published_format_reads_as_the_replacement_character(
    tmp_path: Path,
) -> None:
    # The prompt becomes task.md and goes to the agent: neither can carry a lone surrogate.
    as_json = tmp_path / "evals.json"
    as_json.write_text('{"evals": [{"prompt": "fix \\ud800 it", "n": [1, "\\udfff"]}]}')
    as_yaml = tmp_path / "eval.yaml"
    as_yaml.write_text('prompt: "fix \\ud800 it"\n1: "\\U0000dfff"\n')

    assert read_json_file("skill-creator", as_json) == {
        "evals": [{"prompt": "fix \ufffd it", "n": [1, "\ufffd"]}]
    }
    assert read_yaml("waza", as_yaml) == {"prompt": "fix \ufffd it", 1: "\ufffd"}
