"""Scenario discovery, loading and validation.

Spec references: section 3 (discovery, scenario.json, criteria.json) and section 13 item 29
(lexicographic order). Unlike the reference, a broken file is an error naming file and field.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_openkata.core.build_context import context_digest
from pytest_openkata.core.jsonfiles import read_json
from pytest_openkata.core.scenario import (
    Criterion,
    ScenarioLoadError,
    discover_scenarios,
    load_criteria,
    load_scenario,
    read_description,
    sandbox_mode,
    scenario_digests,
)

CORPUS = Path("/work/shared/corpus/openkata/skills")
GOOD_CRITERIA: dict[str, Any] = {
    "context": "Test context",
    "type": "weighted_checklist",
    "checklist": [
        {"name": "criterion-a", "description": "Does A", "max_score": 10},
        {"name": "criterion-b", "description": "Does B", "max_score": 5},
    ],
}


def make_scenario(
    skill: Path,
    name: str = "scenario-0",
    *,
    criteria: dict[str, Any] | str | None = None,
    scenario_json: str | None = None,
    task: str | None = "Do the task.\n",
    skill_md: bool = True,
) -> Path:
    """A skill folder with one scenario; ``criteria`` as a dict is dumped, as a str written."""
    scenario = skill / "evals" / name
    scenario.mkdir(parents=True, exist_ok=True)
    if skill_md:
        (skill / "SKILL.md").write_text("# Skill\n", encoding="utf-8")
    if task is not None:
        (scenario / "task.md").write_text(task, encoding="utf-8")
    body = GOOD_CRITERIA if criteria is None else criteria
    text = body if isinstance(body, str) else json.dumps(body)
    (scenario / "criteria.json").write_text(text, encoding="utf-8")
    if scenario_json is not None:
        (scenario / "scenario.json").write_text(scenario_json, encoding="utf-8")
    return scenario


def one_criterion(**fields: Any) -> dict[str, Any]:
    item = {"name": "a", "description": "d", "max_score": 10}
    item.update(fields)
    return {"checklist": [item]}


def load_error(scenario: Path) -> ScenarioLoadError:
    with pytest.raises(ScenarioLoadError) as info:
        load_scenario(scenario)
    return info.value


# --- discovery ------------------------------------------------------------------------------


def test_discovery_is_lexicographic_not_numeric(tmp_path: Path) -> None:
    evals = tmp_path / "evals"
    for name in ("scenario-2", "scenario-10", "scenario-0", "scenario-1"):
        (evals / name).mkdir(parents=True)
    assert [p.name for p in discover_scenarios(evals)] == [
        "scenario-0",
        "scenario-1",
        "scenario-10",
        "scenario-2",
    ]


def test_discovery_returns_paths_inside_evals(tmp_path: Path) -> None:
    evals = tmp_path / "evals"
    (evals / "scenario-x").mkdir(parents=True)
    assert discover_scenarios(evals) == [evals / "scenario-x"]


def test_discovery_skips_files_symlinks_and_other_folders(tmp_path: Path) -> None:
    evals = tmp_path / "evals"
    (evals / "scenario-real").mkdir(parents=True)
    (evals / "scenario-file").write_text("not a folder", encoding="utf-8")
    (evals / "results").mkdir()
    (evals / "Scenario-upper").mkdir()
    (evals / "scenario").mkdir()  # no dash
    (evals / "my-scenario-1").mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, evals / "scenario-link")
    os.symlink(evals / "scenario-real", evals / "scenario-link-inside")
    assert [p.name for p in discover_scenarios(evals)] == ["scenario-real"]


def test_discovery_of_missing_evals_is_empty(tmp_path: Path) -> None:
    assert discover_scenarios(tmp_path / "evals") == []


def test_discovery_of_empty_evals_is_empty(tmp_path: Path) -> None:
    (tmp_path / "evals").mkdir()
    assert discover_scenarios(tmp_path / "evals") == []


# --- loading a good scenario ----------------------------------------------------------------


def test_load_without_scenario_json_uses_defaults(tmp_path: Path) -> None:
    scenario = make_scenario(tmp_path / "skill")
    loaded = load_scenario(scenario)
    assert loaded.name == "scenario-0"
    assert loaded.path == scenario
    assert loaded.skill_dir == tmp_path / "skill"
    assert loaded.sandbox is True
    assert loaded.description == ""
    assert loaded.network == ""
    assert loaded.context == "Test context"
    assert loaded.criteria == (
        Criterion("criterion-a", "Does A", 10),
        Criterion("criterion-b", "Does B", 5),
    )


def test_load_reads_scenario_json(tmp_path: Path) -> None:
    scenario = make_scenario(
        tmp_path / "skill",
        scenario_json='{"description": "Test scenario", "sandbox": false, "network": "none"}',
    )
    loaded = load_scenario(scenario)
    assert loaded.sandbox is False
    assert loaded.description == "Test scenario"
    assert loaded.network == "none"


def test_scenario_json_keys_are_case_insensitive(tmp_path: Path) -> None:
    scenario = make_scenario(
        tmp_path / "skill", scenario_json='{"Sandbox": false, "DESCRIPTION": "Upper"}'
    )
    loaded = load_scenario(scenario)
    assert loaded.sandbox is False
    assert loaded.description == "Upper"


@pytest.mark.parametrize(
    ("text", "sandboxed"),
    [
        ('{"sandbox": true, "SANDBOX": false}', False),
        ('{"SANDBOX": false, "sandbox": true}', True),
        ('{"Sandbox": false, "sandbox": null}', False),
        ('{"sandbox": true, "Sandbox": false, "sandbox": true}', True),
    ],
)
def test_scenario_json_the_last_key_of_any_case_wins_and_null_changes_nothing(
    tmp_path: Path, text: str, sandboxed: bool
) -> None:
    # Go's encoding/json: a key matches a field in any case, later keys overwrite earlier
    # ones, a null leaves the field as it was. Keyword selection reads the same answer.
    scenario = make_scenario(tmp_path / "skill", scenario_json=text)

    assert load_scenario(scenario).sandbox is sandboxed
    assert sandbox_mode(scenario) == ("sandbox" if sandboxed else "direct")


@pytest.mark.parametrize(
    "content",
    [
        b'{"sandbox": false}',
        b'{\r\n"sandbox": false\r\n}',
        b'{\r"sandbox":\rfalse}',
        b'{\r"sandbox":\r\r,}',
        b'{"sandbox": 1}',
        b'{"sandbx": false}',
        b'{\r\n"sandbox": false,\r\n\r\n "trials": 0}',
        b'{"sandbox": false\r\n\r\n',
        b'\xef\xbb\xbf{"sandbox": false}',
        b'{"description": "\xff"}',
        b"[]",
    ],
)
def test_scenario_json_read_from_bytes_gives_what_reading_the_file_gives(
    tmp_path: Path, content: bytes
) -> None:
    # The same JSON or the same error (file, message, line and column of a JSON error),
    # whether the file is read or its bytes are handed over (loading hands them over).
    scenario = make_scenario(tmp_path / "skill", scenario_json="{}")
    path = scenario / "scenario.json"
    path.write_bytes(content)

    assert _json_or_error(path, content) == _json_or_error(path, None)


def _json_or_error(path: Path, content: bytes | None) -> object:
    try:
        return read_json(path, content)
    except ScenarioLoadError as exc:
        return str(exc)


def test_a_lone_surrogate_escape_in_a_scenario_file_reads_as_the_replacement_character(
    tmp_path: Path,
) -> None:
    # As Go's decoder reads it; a pair stays the character it encodes, repeated keys stay.
    path = tmp_path / "criteria.json"
    path.write_text(
        '{"criteria": [{"name": "a\\ud800b", "description": "\\ud83d\\ude00", "weight": 1}],'
        ' "k": ["\\udfff"], "k": {"\\udc00": 1}}'
    )

    data = read_json(path)

    assert data["criteria"] == [{"name": "a\ufffdb", "description": "\U0001f600", "weight": 1}]
    assert data.pairs[1:] == [("k", ["\ufffd"]), ("k", {"\ufffd": 1})]


def test_scenario_json_unknown_keys_are_ignored(tmp_path: Path) -> None:
    scenario = make_scenario(
        tmp_path / "skill",
        scenario_json='{"include": ["./inputs"], "sandbox": false, "timeout": 5}',
    )
    loaded = load_scenario(scenario)
    assert loaded.sandbox is False
    assert loaded.description == ""


# --- Tessl's fixtures and setup ---------------------------------------------------------------


def _fixture_options(**fixture: Any) -> str:
    return json.dumps({"fixtures": {"app": fixture}, "setup": ["make -C app"]})


def test_fixtures_and_setup_are_read_with_their_folder_and_install_path(tmp_path: Path) -> None:
    skill = tmp_path / "skill"
    (skill / "app").mkdir(parents=True)
    options = _fixture_options(type="directory", path="../../app", installPath="./src/app")
    loaded = load_scenario(make_scenario(skill, scenario_json=options))
    [fixture] = loaded.fixtures
    assert (fixture.name, fixture.source.resolve(), fixture.install_path) == (
        "app",
        (skill / "app").resolve(),
        "src/app",
    )
    assert loaded.setup == ("make -C app",)


def test_a_scenario_without_fixtures_or_setup_has_none(tmp_path: Path) -> None:
    loaded = load_scenario(make_scenario(tmp_path / "skill", scenario_json="{}"))
    assert (loaded.fixtures, loaded.setup) == ((), ())


@pytest.mark.parametrize(
    ("options", "where"),
    [
        ('{"fixtures": ["app"]}', "fixtures: must be a mapping"),
        ('{"fixtures": {"app": {"path": "../../missing"}}}', "fixtures.app.path: folder not found"),
        ('{"fixtures": {"app": {"type": "file", "path": "../../app"}}}', "fixtures.app.type: only"),
        ('{"fixtures": {"app": {"path": "../../app", "mode": 1}}}', "fixtures.app.mode: unknown"),
        (
            '{"fixtures": {"app": {"path": "../../app", "installPath": "../up"}}}',
            "fixtures.app.installPath: '../up' is not a path inside the workspace",
        ),
        ('{"fixtures": {"app": {"path": "../../../outside"}}}', "fixtures.app.path: '../../../o"),
        ('{"setup": [""]}', "setup: must be a list of non-empty shell commands"),
        ('{"setup": {"run": "make"}}', "setup: must be a list"),
    ],
)
def test_a_bad_fixture_or_setup_names_file_and_field(
    tmp_path: Path, options: str, where: str
) -> None:
    (tmp_path / "outside").mkdir()
    skill = tmp_path / "skill"
    (skill / "app").mkdir(parents=True)
    error = load_error(make_scenario(skill, scenario_json=options))
    assert str(error).startswith(f"evals/scenario-0/scenario.json: {where}")


@pytest.mark.parametrize("key", ["fixtures", "setup"])
def test_a_direct_scenario_with_fixtures_or_setup_is_an_error(tmp_path: Path, key: str) -> None:
    skill = tmp_path / "skill"
    (skill / "app").mkdir(parents=True)
    value: Any = {"app": {"path": "../../app"}} if key == "fixtures" else ["make"]
    options = json.dumps({"sandbox": False, key: value})
    error = load_error(make_scenario(skill, scenario_json=options))
    assert str(error) == (
        f"evals/scenario-0/scenario.json: {key}: a direct scenario runs no sandbox, so nothing "
        'can be copied into or run in its workspace: remove the key, or set "sandbox": true'
    )


def test_a_key_that_misspells_sandbox_leaves_the_kind_unknown_and_the_scenario_unloaded(
    tmp_path: Path,
) -> None:
    """The reference would run it sandboxed; which kind was meant cannot be told, so neither
    `-m direct` nor `-m sandbox` may leave it out, and it errors naming the key."""
    scenario = make_scenario(tmp_path / "skill", scenario_json='{"sandbx": false}')

    assert sandbox_mode(scenario) is None
    error = load_error(scenario)
    assert (error.path.name, error.field) == ("scenario.json", "sandbx")
    assert error.message.startswith('unknown key; did you mean "sandbox"? Until it is fixed')
    # What only reads the file's other fields still reads them.
    assert read_description(scenario) == ""


def test_scenario_json_sandbox_true_explicitly(tmp_path: Path) -> None:
    scenario = make_scenario(tmp_path / "skill", scenario_json='{"sandbox": true}')
    assert load_scenario(scenario).sandbox is True


def test_criteria_keys_are_case_insensitive_and_extras_ignored(tmp_path: Path) -> None:
    criteria = {
        "Context": "ctx",
        "Checklist": [{"NAME": "a", "Description": "d", "Max_Score": 3, "weight": 9}],
        "extra": True,
    }
    scenario = make_scenario(tmp_path / "skill", criteria=criteria)
    loaded = load_scenario(scenario)
    assert loaded.context == "ctx"
    assert loaded.criteria == (Criterion("a", "d", 3),)


def test_criteria_context_is_optional(tmp_path: Path) -> None:
    path = tmp_path / "criteria.json"
    path.write_text(
        '{"checklist": [{"name": "a", "description": "d", "max_score": 1}]}', encoding="utf-8"
    )
    assert load_criteria(path) == ("", (Criterion("a", "d", 1),))


@pytest.mark.parametrize("description", [None, "", " \n\t"], ids=["missing", "empty", "blank"])
def test_a_criterion_without_a_description_is_an_error_naming_it(
    tmp_path: Path, description: str | None
) -> None:
    """The reference accepts it, and its judge then grades a name alone."""
    second: dict[str, Any] = {"name": "b", "max_score": 5}
    if description is not None:
        second["description"] = description
    criteria = {"checklist": [{"name": "a", "description": "Does A", "max_score": 5}, second]}
    scenario = make_scenario(tmp_path / "skill", criteria=criteria)

    error = load_error(scenario)

    assert error.path == scenario / "criteria.json"
    assert str(error).startswith(
        "evals/scenario-0/criteria.json: checklist[1] ('b').description: must not be empty: "
        "say what the judge should find"
    )


def test_load_criteria_keeps_file_order(tmp_path: Path) -> None:
    path = tmp_path / "criteria.json"
    items = [
        {"name": n, "description": "d", "max_score": s} for n, s in (("z", 1), ("a", 2), ("m", 3))
    ]
    path.write_text(json.dumps({"checklist": items}), encoding="utf-8")
    _context, criteria = load_criteria(path)
    assert [c.name for c in criteria] == ["z", "a", "m"]
    assert [c.max_score for c in criteria] == [1, 2, 3]


# --- missing files --------------------------------------------------------------------------


def test_missing_skill_md(tmp_path: Path) -> None:
    scenario = make_scenario(tmp_path / "skill", skill_md=False)
    error = load_error(scenario)
    assert error.path == tmp_path / "skill" / "SKILL.md"
    assert "SKILL.md" in str(error)


def test_missing_task_md(tmp_path: Path) -> None:
    scenario = make_scenario(tmp_path / "skill", task=None)
    error = load_error(scenario)
    assert error.path == scenario / "task.md"
    assert str(error).startswith(f"evals/{scenario.name}/task.md:")
    assert "not found" in error.message


@pytest.mark.parametrize("text", ["", " \n\t\r\n"], ids=["empty", "whitespace"])
def test_an_empty_task_md_is_an_error(tmp_path: Path, text: str) -> None:
    """The reference sends the skill alone as the prompt, and a judge may pass it all."""
    scenario = make_scenario(tmp_path / "skill", task=text)

    error = load_error(scenario)

    assert error.path == scenario / "task.md"
    assert str(error) == (
        "evals/scenario-0/task.md: is empty: write there the prompt the agent is given"
    )


def test_missing_criteria_json(tmp_path: Path) -> None:
    scenario = make_scenario(tmp_path / "skill")
    (scenario / "criteria.json").unlink()
    error = load_error(scenario)
    assert error.path == scenario / "criteria.json"
    assert str(error).startswith(f"evals/{scenario.name}/criteria.json:")
    assert "not found" in error.message


def test_conftest_in_scenario_folder_is_an_error(tmp_path: Path) -> None:
    scenario = make_scenario(tmp_path / "skill")
    (scenario / "conftest.py").write_text("raise SystemExit\n", encoding="utf-8")
    error = load_error(scenario)
    assert error.path == scenario / "conftest.py"
    assert "inputs/" in error.message


@pytest.mark.parametrize("trap", ["__init__.py", "tests/conftest.py", "test_data/conftest.py"])
def test_files_pytest_would_import_from_a_scenario_folder_are_errors(
    tmp_path: Path, trap: str
) -> None:
    scenario = make_scenario(tmp_path / "skill")
    (scenario / trap).parent.mkdir(exist_ok=True)
    (scenario / trap).write_text("x = 1\n", encoding="utf-8")
    (scenario / "testing-notes").mkdir()  # a test* folder without a conftest.py is fine
    assert load_error(scenario).path == scenario / trap


def test_a_scenario_json_symlink_to_nothing_means_the_defaults(tmp_path: Path) -> None:
    scenario = make_scenario(tmp_path / "skill")
    (scenario / "scenario.json").symlink_to(tmp_path / "absent.json")
    assert load_scenario(scenario).sandbox is True


def test_a_scenario_json_that_is_a_folder_is_an_error(tmp_path: Path) -> None:
    scenario = make_scenario(tmp_path / "skill")
    (scenario / "scenario.json").mkdir()
    error = load_error(scenario)
    assert error.path == scenario / "scenario.json"
    assert "cannot be read" in error.message


def test_a_task_md_that_is_a_folder_is_missing(tmp_path: Path) -> None:
    scenario = make_scenario(tmp_path / "skill", task=None)
    (scenario / "task.md").mkdir()
    error = load_error(scenario)
    assert error.path == scenario / "task.md"
    assert "file not found" in error.message


def test_python_files_under_inputs_are_fine(tmp_path: Path) -> None:
    scenario = make_scenario(tmp_path / "skill")
    (scenario / "inputs").mkdir()
    (scenario / "inputs" / "conftest.py").write_text("x = 1\n", encoding="utf-8")
    assert load_scenario(scenario).name == "scenario-0"


# --- invalid criteria.json ------------------------------------------------------------------


def test_criteria_invalid_json_names_line_and_column(tmp_path: Path) -> None:
    scenario = make_scenario(tmp_path / "skill", criteria='{"checklist": [\n  {"name": "a",}\n]}')
    error = load_error(scenario)
    assert error.path == scenario / "criteria.json"
    assert error.field is None
    assert "not valid JSON" in error.message
    assert "line 2, column 16" in error.message
    assert str(error).startswith(f"evals/{scenario.name}/criteria.json: not valid JSON")


@pytest.mark.parametrize(
    ("value", "shown"),
    [(10.5, "10.5"), (0, "0"), (-1, "-1"), ("10", '"10"'), (True, "true"), (10.0, "10.0")],
)
def test_bad_max_score(tmp_path: Path, value: object, shown: str) -> None:
    scenario = make_scenario(tmp_path / "skill", criteria=one_criterion(max_score=value))
    error = load_error(scenario)
    assert error.path == scenario / "criteria.json"
    assert error.field is not None
    assert error.field.startswith("checklist[0]")
    assert error.field.endswith(".max_score")
    assert "positive integer" in error.message
    assert f"(got {shown})" in error.message
    assert str(error).startswith(f"evals/{scenario.name}/criteria.json: {error.field}:")


def test_bad_max_score_in_second_item_names_its_index(tmp_path: Path) -> None:
    criteria = {"checklist": [{"name": "a", "max_score": 1}, {"name": "b", "max_score": 0}]}
    error = load_error(make_scenario(tmp_path / "skill", criteria=criteria))
    assert error.field is not None
    assert error.field.startswith("checklist[1]")
    assert error.field.endswith(".max_score")


def test_missing_max_score(tmp_path: Path) -> None:
    criteria = {"checklist": [{"name": "a"}]}
    error = load_error(make_scenario(tmp_path / "skill", criteria=criteria))
    assert error.field is not None
    assert error.field.endswith(".max_score")
    assert error.message == "is required"


def test_missing_name(tmp_path: Path) -> None:
    criteria = {"checklist": [{"description": "d", "max_score": 1}]}
    scenario = make_scenario(tmp_path / "skill", criteria=criteria)
    error = load_error(scenario)
    assert error.path == scenario / "criteria.json"
    assert error.field == "checklist[0].name"
    assert error.message == "is required"


def test_null_name_counts_as_missing(tmp_path: Path) -> None:
    criteria = {"checklist": [{"name": None, "max_score": 1}]}
    error = load_error(make_scenario(tmp_path / "skill", criteria=criteria))
    assert error.field == "checklist[0].name"
    assert error.message == "is required"


def test_empty_name(tmp_path: Path) -> None:
    scenario = make_scenario(tmp_path / "skill", criteria=one_criterion(name=""))
    error = load_error(scenario)
    assert error.path == scenario / "criteria.json"
    assert error.field is not None
    assert error.field.startswith("checklist[0]")
    assert error.field.endswith(".name")
    # The module's own wording, as for every other field, not pydantic's English.
    assert error.message == 'must not be empty (got "")'


def test_name_of_wrong_type(tmp_path: Path) -> None:
    error = load_error(make_scenario(tmp_path / "skill", criteria=one_criterion(name=7)))
    assert error.field == "checklist[0].name"
    assert error.message == "must be a string (got 7)"


def test_duplicate_names(tmp_path: Path) -> None:
    criteria = {"checklist": [{"name": "a", "max_score": 1}, {"name": "a", "max_score": 2}]}
    scenario = make_scenario(tmp_path / "skill", criteria=criteria)
    error = load_error(scenario)
    assert error.path == scenario / "criteria.json"
    assert error.field == "checklist[1].name"
    assert "'a'" in error.message
    assert "duplicate" in error.message


def test_names_differing_only_in_case_are_not_duplicates(tmp_path: Path) -> None:
    criteria = {
        "checklist": [
            {"name": "a", "description": "d", "max_score": 1},
            {"name": "A", "description": "d", "max_score": 2},
        ]
    }
    loaded = load_scenario(make_scenario(tmp_path / "skill", criteria=criteria))
    assert [c.name for c in loaded.criteria] == ["a", "A"]


def test_empty_checklist(tmp_path: Path) -> None:
    scenario = make_scenario(tmp_path / "skill", criteria={"checklist": []})
    error = load_error(scenario)
    assert error.path == scenario / "criteria.json"
    assert error.field == "checklist"
    assert "at least one criterion" in error.message


@pytest.mark.parametrize("criteria", [{}, {"context": "c"}, {"checklist": None}])
def test_missing_checklist(tmp_path: Path, criteria: dict[str, Any]) -> None:
    scenario = make_scenario(tmp_path / "skill", criteria=criteria)
    error = load_error(scenario)
    assert error.path == scenario / "criteria.json"
    assert error.field == "checklist"
    assert error.message == "is required"


@pytest.mark.parametrize(("value", "shown"), [({}, "{}"), ("x", '"x"'), (3, "3")])
def test_checklist_not_a_list(tmp_path: Path, value: object, shown: str) -> None:
    scenario = make_scenario(tmp_path / "skill", criteria={"checklist": value})
    error = load_error(scenario)
    assert error.field == "checklist"
    assert error.message == f"must be a list (got {shown})"


def test_checklist_item_not_an_object(tmp_path: Path) -> None:
    error = load_error(make_scenario(tmp_path / "skill", criteria={"checklist": [1]}))
    assert error.field == "checklist[0]"
    assert "must be an object" in error.message


def test_criteria_top_level_not_an_object(tmp_path: Path) -> None:
    scenario = make_scenario(tmp_path / "skill", criteria="[]")
    error = load_error(scenario)
    assert error.path == scenario / "criteria.json"
    assert error.field == "(top level)"
    assert "must be an object" in error.message


def test_criteria_not_utf8(tmp_path: Path) -> None:
    scenario = make_scenario(tmp_path / "skill")
    (scenario / "criteria.json").write_bytes(b'{"context": "\xff"}')
    error = load_error(scenario)
    assert error.path == scenario / "criteria.json"
    assert "cannot be read" in error.message


def test_load_criteria_direct_error_has_path(tmp_path: Path) -> None:
    path = tmp_path / "criteria.json"
    with pytest.raises(ScenarioLoadError) as info:
        load_criteria(path)
    assert info.value.path == path
    assert info.value.field is None


# --- invalid scenario.json ------------------------------------------------------------------


def test_scenario_json_sandbox_as_string(tmp_path: Path) -> None:
    scenario = make_scenario(tmp_path / "skill", scenario_json='{"sandbox": "false"}')
    error = load_error(scenario)
    assert error.path == scenario / "scenario.json"
    assert error.field == "sandbox"
    assert error.message == 'must be true or false (got "false")'
    # Named relative to the skill folder: error texts go into committed reports.
    assert (
        str(error) == 'evals/scenario-0/scenario.json: sandbox: must be true or false (got "false")'
    )
    assert str(tmp_path) not in str(error)


def test_scenario_json_description_of_wrong_type(tmp_path: Path) -> None:
    scenario = make_scenario(tmp_path / "skill", scenario_json='{"description": 5}')
    error = load_error(scenario)
    assert error.field == "description"
    assert error.message == "must be a string (got 5)"


def test_scenario_json_bad_json(tmp_path: Path) -> None:
    scenario = make_scenario(tmp_path / "skill", scenario_json='{"sandbox": false')
    error = load_error(scenario)
    assert error.path == scenario / "scenario.json"
    assert "not valid JSON" in error.message
    assert "line 1, column" in error.message


def test_read_description_tolerates_broken_scenario_json(tmp_path: Path) -> None:
    good = make_scenario(tmp_path / "skill", "scenario-0", scenario_json='{"description": "D"}')
    broken = make_scenario(tmp_path / "skill", "scenario-1", scenario_json="{")
    absent = make_scenario(tmp_path / "skill", "scenario-2")
    assert read_description(good) == "D"
    assert read_description(broken) == ""
    assert read_description(absent) == ""


def test_one_broken_scenario_does_not_break_its_sibling(tmp_path: Path) -> None:
    skill = tmp_path / "skill"
    make_scenario(skill, "scenario-0")
    make_scenario(skill, "scenario-1", criteria="{")
    outcomes = {}
    for scenario in discover_scenarios(skill / "evals"):
        try:
            outcomes[scenario.name] = load_scenario(scenario).criteria[0].name
        except ScenarioLoadError as exc:
            outcomes[scenario.name] = type(exc).__name__
    assert outcomes == {"scenario-0": "criterion-a", "scenario-1": "ScenarioLoadError"}


# --- the real corpus (read-only) ------------------------------------------------------------


def test_real_corpus_loads_except_github_create_pr() -> None:
    loaded = []
    failed = {}
    for skill in sorted(CORPUS.iterdir()):
        for scenario in discover_scenarios(skill / "evals"):
            try:
                loaded.append(load_scenario(scenario))
            except ScenarioLoadError as exc:
                failed[scenario.relative_to(CORPUS).as_posix()] = exc
    # Hand count of evals/scenario-* folders: commit-conventions 5, create-adr 9,
    # create-evals 4, create-pr 1, create-profile 3, create-rule 4, create-skill 4,
    # critical-thinking 4, git-worktree 3, github-create-pr 1, grill-me 5,
    # grill-with-docs 2, makefile-conventions 2, spec-workflow 5 = 52, one without task.md.
    assert list(failed) == ["github-create-pr/evals/scenario-0"]
    error = failed["github-create-pr/evals/scenario-0"]
    assert error.path.name == "task.md"
    assert len(loaded) == 51
    assert all(s.criteria for s in loaded)


def test_real_corpus_create_adr_order_is_lexicographic() -> None:
    names = [p.name for p in discover_scenarios(CORPUS / "create-adr" / "evals")]
    assert names == [
        "scenario-0",
        "scenario-1",
        "scenario-10",
        "scenario-11",
        "scenario-12",
        "scenario-2",
        "scenario-5",
        "scenario-7",
        "scenario-8",
    ]


def test_real_corpus_results_folder_is_not_a_scenario() -> None:
    names = [p.name for p in discover_scenarios(CORPUS / "critical-thinking" / "evals")]
    assert "results" not in names
    assert len(names) == 4


def test_conftest_in_a_test_folder_of_the_scenario_is_an_error(tmp_path: Path) -> None:
    skill = tmp_path / "skills" / "s"
    scenario = skill / "evals" / "scenario-0"
    (scenario / "tests").mkdir(parents=True)
    (skill / "SKILL.md").write_text("# s\n")
    (scenario / "task.md").write_text("t\n")
    (scenario / "criteria.json").write_text('{"checklist": [{"name": "x", "max_score": 1}]}')
    (scenario / "tests" / "conftest.py").write_text("")

    with pytest.raises(ScenarioLoadError) as info:
        load_scenario(scenario)

    assert info.value.path == scenario / "tests" / "conftest.py"
    assert "move scenario files under inputs/" in str(info.value)


@pytest.mark.parametrize("with_checks", [False, True])
def test_the_digests_of_what_loading_read_equal_those_of_the_files_on_disk(
    tmp_path: Path, with_checks: bool
) -> None:
    # The run digests the bytes loading read instead of reading the files again.
    scenario = make_scenario(tmp_path / "skill", task="Do\r\nthe task.\r", scenario_json="{}")
    if with_checks:
        check = {"name": "says-hi", "max_score": 1, "type": "output_regex", "pattern": "hi"}
        (scenario / "checks.json").write_text(json.dumps([check]), encoding="utf-8")
    (scenario / "inputs").mkdir()
    (scenario / "inputs" / "a.txt").write_text("input", encoding="utf-8")

    loaded = load_scenario(scenario)

    names = {"task.md", "criteria.json", *(["checks.json"] if with_checks else [])}
    assert set(loaded.contents) == names
    assert all(loaded.contents[name] == (scenario / name).read_bytes() for name in names)
    from_disk = scenario_digests(scenario, "the prompt")
    assert scenario_digests(scenario, "the prompt", loaded.contents) == from_disk
    assert ("checks" in from_disk) is with_checks


# --- a scenario's own image ---------------------------------------------------------------


def test_a_scenario_names_its_image_or_a_dockerfile_inside_its_folder(tmp_path: Path) -> None:
    named = make_scenario(tmp_path / "a", scenario_json='{"image": "team/box:1"}')
    assert load_scenario(named).image == "team/box:1"
    built = make_scenario(tmp_path / "b", scenario_json='{"dockerfile": "environment/Dockerfile"}')
    (built / "environment").mkdir()
    (built / "environment" / "Dockerfile").write_text("FROM box\n")
    assert load_scenario(built).dockerfile == "environment/Dockerfile"
    assert load_scenario(built).build_timeout is None
    bounded = make_scenario(
        tmp_path / "c", scenario_json='{"dockerfile": "Dockerfile", "build_timeout_sec": 90.5}'
    )
    (bounded / "Dockerfile").write_text("FROM box\n")
    assert load_scenario(bounded).build_timeout == 90.5


@pytest.mark.parametrize("linked", ["env", "env/Dockerfile"])
def test_a_dockerfile_reached_through_a_link_is_refused(tmp_path: Path, linked: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "Dockerfile").write_text("FROM box\nCOPY id_rsa /\n")
    (outside / "id_rsa").write_text("a private key\n")
    scenario = make_scenario(tmp_path / "skill", scenario_json='{"dockerfile": "env/Dockerfile"}')
    if linked == "env":
        (scenario / "env").symlink_to(outside)
    else:
        (scenario / "env").mkdir()
        (scenario / "env" / "Dockerfile").symlink_to(outside / "Dockerfile")

    error = load_error(scenario)

    assert error.field == "dockerfile"
    assert f"{linked} is a symbolic link" in str(error)
    assert "scenario.json" in str(error)
    assert str(tmp_path) not in str(error)


def test_a_build_context_with_a_dangling_link_and_a_fifo_loads_and_digests(
    tmp_path: Path,
) -> None:
    scenario = make_scenario(tmp_path / "s", scenario_json='{"dockerfile": "env/Dockerfile"}')
    context = scenario / "env"
    context.mkdir()
    (context / "Dockerfile").write_text("FROM box\n")
    (context / "gone").symlink_to("nowhere")
    os.mkfifo(context / "pipe")  # opened, it would block the load for ever

    loaded = load_scenario(scenario)

    digest = context_digest(context, "Dockerfile")
    (context / "gone").unlink()
    (context / "gone").symlink_to("elsewhere")
    assert loaded.dockerfile == "env/Dockerfile"
    assert context_digest(context, "Dockerfile") != digest  # a link counts by its target


@pytest.mark.skipif(os.getuid() == 0, reason="root reads any file")
def test_an_unreadable_file_of_the_build_context_is_a_load_error_naming_it(
    tmp_path: Path,
) -> None:
    scenario = make_scenario(tmp_path / "s", scenario_json='{"dockerfile": "env/Dockerfile"}')
    (scenario / "env" / "keys").mkdir(parents=True)
    (scenario / "env" / "Dockerfile").write_text("FROM box\n")
    secret = scenario / "env" / "keys" / "secret"
    secret.write_text("x")
    secret.chmod(0)
    try:
        error = load_error(scenario)
    finally:
        secret.chmod(0o600)

    assert error.field == "dockerfile"
    assert "env/keys/secret: cannot be read" in str(error)
    assert str(tmp_path) not in str(error)


@pytest.mark.parametrize(
    ("options", "field", "says"),
    [
        ('{"dockerfile": "environment/Dockerfile"}', "dockerfile", "file not found"),
        ('{"dockerfile": "../Dockerfile"}', "dockerfile", "relative path inside"),
        ('{"image": "a", "dockerfile": "Dockerfile"}', "dockerfile", "not both"),
        ('{"sandbox": false, "image": "a"}', "image", "a direct scenario runs no sandbox"),
        ('{"image": "a", "build_timeout_sec": 60}', "build_timeout_sec", 'give "dockerfile"'),
        ('{"build_timeout_sec": 60}', "build_timeout_sec", "names none"),
        ('{"dockerfile": "Dockerfile", "build_timeout_sec": 0}', "build_timeout_sec", "seconds"),
        ('{"dockerfile": "Dockerfile", "build_timeout_sec": "1h"}', "build_timeout_sec", "600"),
    ],
)
def test_a_bad_image_or_dockerfile_is_an_error_naming_the_file_and_field(
    tmp_path: Path, options: str, field: str, says: str
) -> None:
    scenario = make_scenario(tmp_path / "s", scenario_json=options)
    (scenario / "Dockerfile").write_text("FROM box\n")

    error = load_error(scenario)

    assert error.field == field
    assert says in str(error)
    assert "scenario.json" in str(error)
