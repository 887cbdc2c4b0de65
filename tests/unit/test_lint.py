"""The lint rules (pytest_openkata.core.lint), each on skill folders built in tmp_path.

Every rule has a failing and a passing example; the JSON rules are also held to the loader:
what it rejects is a lint error carrying its message. Spec references: section 3 (loading),
section 10 (the ``skill_version`` rule), section 11b (``scripts/check-eval-weights.sh``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_openkata.core.lint import (
    SCENARIO_RULES,
    SKILL_RULES,
    Finding,
    lint_scenario,
    lint_skill,
    unknown_keys,
)
from pytest_openkata.core.scenario import ScenarioLoadError, load_scenario

SKILL_MD = "---\nname: notes-writer\ndescription: Writes release notes.\n---\n# Notes writer\n"
CHANGELOG = "# Changelog\n\n## [Unreleased]\n\n## [1.0.0] - 2026-01-01\n\n- First release\n"
TASK = "# Release notes\n\nTurn the raw notes in `notes/raw.txt` into release notes.\n"
CRITERIA = """{
  "context": "Release notes from raw notes",
  "checklist": [
    {"name": "title", "description": "The notes start with a `# Release` heading", "max_score": 60},
    {"name": "fixes", "description": "A `Fixes` section lists both fixed bugs", "max_score": 40}
  ]
}
"""
OPTIONS = '{"description": "Release notes from raw notes"}\n'


def make_skill(root: Path, files: dict[str, str | None] | None = None) -> Path:
    """A clean skill ``notes-writer`` with one scenario, ``evals/scenario-0``; ``files`` (paths
    relative to the skill) replace its files, and None removes one."""
    skill = root / "notes-writer"
    contents: dict[str, str | None] = {
        "SKILL.md": SKILL_MD,
        "CHANGELOG.md": CHANGELOG,
        "evals/scenario-0/task.md": TASK,
        "evals/scenario-0/criteria.json": CRITERIA,
        "evals/scenario-0/scenario.json": OPTIONS,
        "evals/scenario-0/inputs/notes/raw.txt": "fixed: crash on start\nfixed: typo\n",
    }
    contents.update(files or {})
    for rel, text in contents.items():
        if text is None:
            continue
        path = skill / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return skill


def scenario_of(tmp_path: Path, **files: str | None) -> Path:
    """The scenario folder of a clean skill whose scenario files (by name) are replaced."""
    replaced = {f"evals/scenario-0/{name.replace('_', '.')}": text for name, text in files.items()}
    return make_skill(tmp_path, replaced) / "evals" / "scenario-0"


def findings(scenario: Path, rule: str) -> list[Finding]:
    return lint_scenario(scenario, shown_root=scenario.parents[2])[rule]


def messages(found: list[Finding]) -> list[str]:
    return [f.message for f in found]


def criteria_with(*items: str) -> str:
    """A criteria.json whose checklist items are the given JSON texts, one a line from line 3."""
    return '{\n  "checklist": [\n' + ",\n".join(f"    {i}" for i in items) + "\n  ]\n}\n"


# --- the whole lint ------------------------------------------------------------------------


def test_a_clean_skill_has_no_findings_and_every_rule_is_there_in_order(tmp_path: Path) -> None:
    skill = make_skill(tmp_path)

    scenario = lint_scenario(skill / "evals" / "scenario-0")
    skill_findings = lint_skill(skill)

    assert tuple(scenario) == SCENARIO_RULES
    assert tuple(skill_findings) == SKILL_RULES
    assert scenario == {rule: [] for rule in SCENARIO_RULES}
    assert skill_findings == {rule: [] for rule in SKILL_RULES}


def test_finding_text_names_file_and_line() -> None:
    with_line = Finding("weights", "error", "evals/scenario-0/task.md", 3, "say more")
    without = Finding("weights", "error", "SKILL.md", None, "say more")

    assert str(with_line) == "evals/scenario-0/task.md:3: say more"
    assert str(without) == "SKILL.md: say more"


def test_a_scenario_with_several_problems_gets_all_of_them(tmp_path: Path) -> None:
    scenario = scenario_of(
        tmp_path,
        task_md=None,
        criteria_json=criteria_with(
            '{"name": "a", "description": "The code is clean", "max_score": 0}',
            '{"name": "b", "description": "", "max_scroe": 5}',
        ),
        scenario_json='{"sandbx": false}',
        conftest_py="",
    )

    report = lint_scenario(scenario, shown_root=tmp_path)
    found = {(f.rule, f.severity, f.file, f.line) for fs in report.values() for f in fs}

    assert found == {
        ("files", "error", "evals/scenario-0/task.md", None),
        ("files", "error", "evals/scenario-0/conftest.py", None),
        ("criteria-json", "error", "evals/scenario-0/criteria.json", 3),  # max_score 0
        ("criteria-json", "error", "evals/scenario-0/criteria.json", 4),  # max_score missing
        ("unknown-keys", "error", "evals/scenario-0/scenario.json", 1),  # misspells sandbox
        ("unknown-keys", "warning", "evals/scenario-0/criteria.json", 4),
        ("empty-descriptions", "error", "evals/scenario-0/criteria.json", 4),
        ("weights", "error", "evals/scenario-0/criteria.json", None),
        ("vague-criteria", "warning", "evals/scenario-0/criteria.json", 3),
        ("scenario-description", "warning", "evals/scenario-0/scenario.json", None),
    }
    for name, rule_findings in report.items():
        assert all(f.rule == name for f in rule_findings)


# --- files ---------------------------------------------------------------------------------


def test_missing_task_and_criteria_are_errors(tmp_path: Path) -> None:
    scenario = scenario_of(tmp_path, task_md=None, criteria_json=None)

    found = findings(scenario, "files")

    assert [(f.severity, f.file, f.line) for f in found] == [
        ("error", "evals/scenario-0/task.md", None),
        ("error", "evals/scenario-0/criteria.json", None),
    ]
    assert found[0].message.startswith("file not found (every scenario needs a task.md)")
    assert found[1].message.startswith("file not found (every scenario needs a criteria.json)")
    assert "may be empty when checks.json holds checks" in found[1].message


@pytest.mark.parametrize("text", ["", "\n \t\n"], ids=["empty", "whitespace"])
def test_an_empty_task_is_an_error_as_in_a_run(tmp_path: Path, text: str) -> None:
    scenario = scenario_of(tmp_path, task_md=text)

    found = findings(scenario, "files")

    assert [(f.severity, f.file, f.line, f.message) for f in found] == [
        (
            "error",
            "evals/scenario-0/task.md",
            None,
            "is empty: write there the prompt the agent is given",
        )
    ]
    with pytest.raises(ScenarioLoadError) as error:
        load_scenario(scenario)
    assert str(error.value) == f"{found[0].file}: {found[0].message}"


@pytest.mark.parametrize(
    "trap", ["conftest.py", "__init__.py", "tests/conftest.py", "test_data/conftest.py"]
)
def test_python_files_pytest_would_import_are_errors(tmp_path: Path, trap: str) -> None:
    scenario = make_skill(tmp_path, {f"evals/scenario-0/{trap}": ""}) / "evals" / "scenario-0"

    found = findings(scenario, "files")

    assert [(f.severity, f.file) for f in found] == [("error", f"evals/scenario-0/{trap}")]
    assert found[0].message.endswith("move scenario files under inputs/")


def test_python_files_under_inputs_are_fine(tmp_path: Path) -> None:
    scenario = scenario_of(tmp_path)
    (scenario / "inputs" / "conftest.py").write_text("", encoding="utf-8")
    (scenario / "inputs" / "tests").mkdir()
    (scenario / "inputs" / "tests" / "conftest.py").write_text("", encoding="utf-8")

    assert findings(scenario, "files") == []


# --- criteria.json -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "shown"),
    [("0", "0"), ("-1", "-1"), ("1.5", "1.5"), ("NaN", "NaN"), ('"10"', '"10"'), ("true", "true")],
)
def test_a_max_score_that_is_not_a_positive_integer_is_an_error(
    tmp_path: Path, value: str, shown: str
) -> None:
    criteria = criteria_with(
        '{"name": "a", "description": "Has `a`", "max_score": 100}',
        f'{{"name": "b", "description": "Has `b`", "max_score": {value}}}',
    )
    scenario = scenario_of(tmp_path, criteria_json=criteria)

    found = findings(scenario, "criteria-json")

    assert [(f.severity, f.file, f.line, f.message) for f in found] == [
        (
            "error",
            "evals/scenario-0/criteria.json",
            4,
            f"checklist[1] ('b').max_score: must be a positive integer (got {shown})",
        )
    ]


def test_every_bad_max_score_is_reported_the_first_as_the_loader_words_it(tmp_path: Path) -> None:
    criteria = """{
  "checklist": [
    {
      "name": "a",
      "max_score": 0
    },
    {
      "name": "b",
      "max_score": 2.5
    }
  ]
}
"""
    scenario = scenario_of(tmp_path, criteria_json=criteria)
    with pytest.raises(ScenarioLoadError) as loader:
        load_scenario(scenario)

    found = findings(scenario, "criteria-json")

    assert [(f.line, f.message) for f in found] == [
        (5, "checklist[0] ('a').max_score: must be a positive integer (got 0)"),
        (9, "checklist[1] ('b').max_score: must be a positive integer (got 2.5)"),
    ]
    assert f"{found[0].file}: {found[0].message}" == str(loader.value)


def test_duplicate_criterion_names_are_errors_on_the_repeated_name(tmp_path: Path) -> None:
    criteria = criteria_with(
        '{"name": "a", "description": "Has `a`", "max_score": 40}',
        '{"name": "a", "description": "Has `b`", "max_score": 30}',
        '{"name": "a", "description": "Has `c`", "max_score": 30}',
    )
    scenario = scenario_of(tmp_path, criteria_json=criteria)

    found = findings(scenario, "criteria-json")

    assert [(f.line, f.message) for f in found] == [
        (4, "checklist[1].name: duplicate criterion name 'a'"),
        (5, "checklist[2].name: duplicate criterion name 'a'"),
    ]


def test_criteria_that_is_not_json_is_one_error_with_its_line(tmp_path: Path) -> None:
    scenario = scenario_of(tmp_path, criteria_json='{\n  "checklist": [\n    {"name": }\n  ]\n}\n')

    found = findings(scenario, "criteria-json")

    assert len(found) == 1
    assert found[0].line == 3
    assert found[0].message.startswith("not valid JSON: Expecting value (line 3")


def test_an_empty_checklist_is_an_error_unless_checks_json_holds_checks(tmp_path: Path) -> None:
    scenario = scenario_of(tmp_path, criteria_json='{"checklist": []}')

    assert messages(findings(scenario, "criteria-json")) == [
        "checklist: must hold at least one criterion (or checks.json at least one check)"
    ]

    checks = '[{"name": "runs", "type": "command", "run": "true", "max_score": 100}]'
    (scenario / "checks.json").write_text(checks, encoding="utf-8")
    assert findings(scenario, "criteria-json") == []


def test_criteria_keys_match_without_regard_to_case_as_the_loader_reads_them(
    tmp_path: Path,
) -> None:
    criteria = '{"Checklist": [{"NAME": "a", "Description": "Has `a`", "Max_Score": 100}]}'
    scenario = scenario_of(tmp_path, criteria_json=criteria)

    report = lint_scenario(scenario)

    assert report["criteria-json"] == []
    assert report["unknown-keys"] == []
    assert report["weights"] == []


def test_a_criteria_folder_is_an_error_and_no_crash(tmp_path: Path) -> None:
    scenario = scenario_of(tmp_path, criteria_json=None)
    (scenario / "criteria.json").mkdir()

    report = lint_scenario(scenario)

    assert [f.message.split(":")[0] for f in report["criteria-json"]] == ["cannot be read"]
    assert report["files"] == []


# --- scenario.json -------------------------------------------------------------------------


def test_every_bad_scenario_option_is_an_error(tmp_path: Path) -> None:
    options = '{\n  "description": "Notes",\n  "sandbox": "false",\n  "trials": 0\n}\n'
    scenario = scenario_of(tmp_path, scenario_json=options)

    found = findings(scenario, "scenario-json")

    assert [(f.severity, f.file, f.line, f.message) for f in found] == [
        (
            "error",
            "evals/scenario-0/scenario.json",
            3,
            'sandbox: must be true or false (got "false")',
        ),
        (
            "error",
            "evals/scenario-0/scenario.json",
            4,
            "trials: must be a positive integer (got 0)",
        ),
    ]


def test_tessl_fixtures_and_setup_are_known_keys(tmp_path: Path) -> None:
    options = json.dumps(
        {"fixtures": {"app": {"type": "directory", "path": "app"}}, "setup": ["make"]}
    )
    scenario = scenario_of(tmp_path, scenario_json=options)
    (scenario / "app").mkdir()

    assert unknown_keys(scenario) == []
    assert findings(scenario, "scenario-json") == []


def test_a_bad_fixture_is_a_scenario_json_error(tmp_path: Path) -> None:
    options = json.dumps({"fixtures": {"app": {"path": "nowhere"}}})
    scenario = scenario_of(tmp_path, scenario_json=options)

    found = findings(scenario, "scenario-json")

    assert [(f.severity, f.file, f.message) for f in found] == [
        (
            "error",
            "evals/scenario-0/scenario.json",
            "fixtures.app.path: folder not found: 'nowhere'",
        )
    ]


def test_bad_follow_ups_and_simulated_user_name_their_fields(tmp_path: Path) -> None:
    options = (
        '{\n  "follow_ups": ["Now add tests.", 3],\n'
        '  "simulated_user": {\n    "instructions": "A user",\n    "max_turns": 0\n  }\n}\n'
    )
    scenario = scenario_of(tmp_path, scenario_json=options)

    found = findings(scenario, "scenario-json")

    assert [(f.severity, f.line, f.message) for f in found] == [
        ("error", 2, "follow_ups[1]: must be a string (got 3)"),
        ("error", 5, "simulated_user.max_turns: must be a positive integer (got 0)"),
    ]


def test_good_follow_ups_and_simulated_user_pass(tmp_path: Path) -> None:
    options = (
        '{"follow_ups": ["Now add tests."], '
        '"Simulated_User": {"Instructions": "A hurried user", "max_turns": 2}}'
    )
    scenario = scenario_of(tmp_path, scenario_json=options)

    assert findings(scenario, "scenario-json") == []
    assert findings(scenario, "unknown-keys") == []


def test_an_unknown_key_of_the_simulated_user_is_a_warning(tmp_path: Path) -> None:
    options = '{\n  "simulated_user": {\n    "instructions": "A user",\n    "max_turn": 2\n  }\n}\n'
    scenario = scenario_of(tmp_path, scenario_json=options)

    found = findings(scenario, "unknown-keys")

    assert [(f.severity, f.line, f.message) for f in found] == [
        ("warning", 4, 'simulated_user: unknown key "max_turn"; did you mean "max_turns"?')
    ]


def test_good_scenario_options_pass(tmp_path: Path) -> None:
    options = '{"description": "Notes", "Sandbox": false, "network": "none", "trials": 3}'
    scenario = scenario_of(tmp_path, scenario_json=options)

    assert findings(scenario, "scenario-json") == []


def test_bad_resources_are_errors_naming_the_field(tmp_path: Path) -> None:
    options = '{\n  "description": "Notes",\n  "cpus": 0,\n  "memory_mb": 2.5\n}\n'
    scenario = scenario_of(tmp_path, scenario_json=options)

    found = findings(scenario, "scenario-json")

    assert [(f.file, f.line, f.message) for f in found] == [
        (
            "evals/scenario-0/scenario.json",
            3,
            "cpus: must be a positive number of CPUs, e.g. 0.5 or 2 (got 0)",
        ),
        (
            "evals/scenario-0/scenario.json",
            4,
            "memory_mb: must be a whole number of MiB, at least 6 (Docker's least) (got 2.5)",
        ),
    ]
    with pytest.raises(ScenarioLoadError, match=r"scenario.json: cpus: must be a positive"):
        load_scenario(scenario)


def test_a_direct_scenario_asking_for_resources_is_an_error(tmp_path: Path) -> None:
    options = '{"description": "Notes", "sandbox": false, "memory_mb": 64}'
    scenario = scenario_of(tmp_path, scenario_json=options)

    (found,) = findings(scenario, "scenario-json")

    assert (found.severity, found.file) == ("error", "evals/scenario-0/scenario.json")
    assert found.message.startswith("memory_mb: a direct scenario runs no sandbox")
    with pytest.raises(ScenarioLoadError, match=r"scenario.json: memory_mb: a direct scenario"):
        load_scenario(scenario)


def test_a_sandboxed_scenarios_resources_are_loaded(tmp_path: Path) -> None:
    options = '{"description": "Notes", "cpus": 1.5, "memory_mb": 512}'
    scenario = scenario_of(tmp_path, scenario_json=options)

    assert findings(scenario, "scenario-json") == []
    loaded = load_scenario(scenario)
    assert (loaded.cpus, loaded.memory_mb) == (1.5, 512)


# --- checks.json ---------------------------------------------------------------------------


def test_every_bad_check_is_an_error(tmp_path: Path) -> None:
    checks = """[
  {"name": "runs", "type": "command", "run": "make test", "max_score": 0},
  {"name": "exists", "type": "file", "pathh": "out.md", "max_score": 10},
  {"name": "runs", "type": "command", "run": "make lint", "max_score": 10}
]
"""
    scenario = scenario_of(tmp_path, checks_json=checks)

    found = findings(scenario, "checks-json")

    assert [(f.severity, f.file, f.line, f.message) for f in found] == [
        (
            "error",
            "evals/scenario-0/checks.json",
            2,
            "[0] ('runs').max_score: must be a positive integer (got 0)",
        ),
        (
            "error",
            "evals/scenario-0/checks.json",
            3,
            "[1] ('exists').pathh: unknown key for a check of type file; did you mean 'path'?",
        ),
        (
            "error",
            "evals/scenario-0/checks.json",
            4,
            "[2] ('runs').name: duplicate check name 'runs'",
        ),
    ]


def test_a_check_named_as_a_criterion_is_an_error(tmp_path: Path) -> None:
    checks = '[\n  {"name": "title", "type": "output_regex", "pattern": "^#", "max_score": 5}\n]\n'
    scenario = scenario_of(tmp_path, checks_json=checks)

    found = findings(scenario, "checks-json")

    assert [(f.file, f.line, f.message) for f in found] == [
        (
            "evals/scenario-0/checks.json",
            2,
            "check name 'title' is also a criterion of criteria.json",
        )
    ]


def test_a_workspace_check_in_a_direct_scenario_is_an_error(tmp_path: Path) -> None:
    checks = '[{"name": "out", "type": "file", "path": "out.md", "max_score": 10}]'
    scenario = scenario_of(
        tmp_path, checks_json=checks, scenario_json='{"description": "d", "sandbox": false}'
    )

    found = findings(scenario, "checks-json")

    assert messages(found) == [
        "[0] ('out').type: a file check reads the workspace, which only a sandboxed scenario "
        'has (scenario.json: "sandbox": true)'
    ]


def test_check_paths_and_globs_that_leave_the_workspace_are_errors(tmp_path: Path) -> None:
    checks = """[
  {"name": "up", "type": "file", "path": "../secret.txt", "max_score": 10},
  {"name": "abs", "type": "file_regex", "path": "/etc/passwd", "pattern": "root", "max_score": 5},
  {"name": "in", "type": "json_schema", "path": "/workspace/out/../a.json", "schema": {},
   "max_score": 5},
  {"name": "d", "type": "diff", "changed": ["out/*", "/tmp/*"],
   "unchanged": ["src/../../*"], "max_score": 5}
]
"""
    scenario = scenario_of(tmp_path, checks_json=checks)

    found = findings(scenario, "checks-json")

    why = "and a check sees only the workspace's files: name a path relative to it (or under "
    assert [(f.severity, f.file, f.line, f.message) for f in found] == [
        (
            "error",
            "evals/scenario-0/checks.json",
            line,
            f"{field}: {value!r} leads out of /workspace, {why}/workspace/)",
        )
        for line, field, value in [
            (2, "[0] ('up').path", "../secret.txt"),
            (3, "[1] ('abs').path", "/etc/passwd"),
            (6, "[3] ('d').changed[1]", "/tmp/*"),
            (7, "[3] ('d').unchanged[0]", "src/../../*"),
        ]
    ]


def test_good_checks_pass(tmp_path: Path) -> None:
    checks = '[{"name": "out", "type": "file", "path": "out.md", "max_score": 10}]'
    criteria = criteria_with('{"name": "a", "description": "Has `a`", "max_score": 100}')
    scenario = scenario_of(tmp_path, checks_json=checks, criteria_json=criteria)

    report = lint_scenario(scenario)

    assert report["checks-json"] == []
    assert report["weights"] == []  # the checks' points come on top of the checklist's 100


# --- unknown keys --------------------------------------------------------------------------


def test_unknown_keys_say_the_closest_known_key(tmp_path: Path) -> None:
    criteria = criteria_with('{"name": "a", "description": "Has `a`", "max_scroe": 100}')
    options = '{\n  "descripton": "Notes",\n  "sandbox": false\n}\n'
    scenario = scenario_of(tmp_path, criteria_json=criteria, scenario_json=options)

    found = unknown_keys(scenario)

    assert [(f.rule, f.severity, f.file, f.line, f.message) for f in found] == [
        (
            "unknown-keys",
            "warning",
            "evals/scenario-0/scenario.json",
            2,
            'unknown key "descripton"; did you mean "description"?',
        ),
        (
            "unknown-keys",
            "warning",
            "evals/scenario-0/criteria.json",
            3,
            'checklist[0] (\'a\'): unknown key "max_scroe"; did you mean "max_score"?',
        ),
    ]
    assert lint_scenario(scenario)["unknown-keys"] == found


@pytest.mark.parametrize("key", ["sandbx", "Sandboxed", "use_sandbox"])
def test_a_key_that_misspells_sandbox_is_an_error_as_in_a_run(tmp_path: Path, key: str) -> None:
    """The reference runs the scenario sandboxed whatever the key says: its kind, and so
    which of `-m direct` and `-m sandbox` takes it, cannot be trusted."""
    options = f'{{\n  "description": "Notes",\n  "{key}": false\n}}\n'
    scenario = scenario_of(tmp_path, scenario_json=options)

    report = lint_scenario(scenario)

    assert [(f.severity, f.file, f.line, f.message) for f in report["unknown-keys"]] == [
        (
            "error",
            "evals/scenario-0/scenario.json",
            3,
            f'unknown key "{key}"; did you mean "sandbox"? Until it is fixed the scenario does '
            "not run: whether it runs in a sandbox cannot be trusted",
        )
    ]
    assert report["scenario-json"] == []  # said once
    with pytest.raises(ScenarioLoadError) as error:
        load_scenario(scenario)
    assert str(error.value) == (
        f'evals/scenario-0/scenario.json: {key}: unknown key; did you mean "sandbox"? Until it '
        "is fixed the scenario does not run: whether it runs in a sandbox cannot be trusted"
    )


def test_a_misspelt_sandbox_beside_sandbox_itself_is_only_a_warning(tmp_path: Path) -> None:
    scenario = scenario_of(tmp_path, scenario_json='{"sandbox": false, "sandbx": true}')

    assert [f.severity for f in unknown_keys(scenario)] == ["warning"]
    assert load_scenario(scenario).sandbox is False


def test_an_unknown_key_with_no_close_match_lists_the_known_keys(tmp_path: Path) -> None:
    options = '{"description": "Notes", "include": ["./inputs"]}'
    criteria = '{"kind": "x", ' + CRITERIA[1:]
    scenario = scenario_of(tmp_path, scenario_json=options, criteria_json=criteria)

    assert messages(unknown_keys(scenario)) == [
        'unknown key "include" (the run ignores it; the known keys are description, sandbox, '
        "network, trials, cpus, memory_mb, follow_ups, simulated_user, image, dockerfile, "
        "build_timeout_sec, fixtures, setup)",
        'unknown key "kind" (the run ignores it; the known keys are context, type, checklist)',
    ]


def test_keys_in_another_case_are_known(tmp_path: Path) -> None:
    scenario = scenario_of(tmp_path, scenario_json='{"Description": "Notes", "Sandbox": true}')

    assert unknown_keys(scenario) == []


@pytest.mark.parametrize("text", [None, "{not json", "\xff\xfe"])
def test_unknown_keys_of_missing_or_broken_files_are_none(tmp_path: Path, text: str | None) -> None:
    scenario = scenario_of(tmp_path, scenario_json=text, criteria_json=text)

    assert unknown_keys(scenario) == []


# --- criterion descriptions ----------------------------------------------------------------


def test_empty_criterion_descriptions_are_errors(tmp_path: Path) -> None:
    criteria = criteria_with(
        '{"name": "a", "max_score": 50}',
        '{"name": "b", "description": "  ", "max_score": 50}',
    )
    scenario = scenario_of(tmp_path, criteria_json=criteria)

    found = findings(scenario, "empty-descriptions")

    assert [(f.severity, f.file, f.line) for f in found] == [
        ("error", "evals/scenario-0/criteria.json", 3),
        ("error", "evals/scenario-0/criteria.json", 4),
    ]
    assert found[0].message.startswith(
        "checklist[0] ('a').description: must not be empty: say what"
    )
    # As the run words it, once: the criteria.json rule leaves them to this rule.
    with pytest.raises(ScenarioLoadError) as error:
        load_scenario(scenario)
    assert str(error.value) == f"evals/scenario-0/criteria.json: {found[0].message}"
    assert findings(scenario, "criteria-json") == []


def test_criteria_with_descriptions_pass(tmp_path: Path) -> None:
    assert findings(scenario_of(tmp_path), "empty-descriptions") == []


# --- weights -------------------------------------------------------------------------------


def test_weights_that_do_not_sum_to_100_fail_with_the_reference_message(tmp_path: Path) -> None:
    criteria = criteria_with(
        '{"name": "a", "description": "Has `a`", "max_score": 60}',
        '{"name": "b", "description": "Has `b`", "max_score": 30}',
    )
    scenario = (
        make_skill(tmp_path / "skills", {"evals/scenario-0/criteria.json": criteria})
        / "evals"
        / "scenario-0"
    )

    found = lint_scenario(scenario, shown_root=tmp_path)["weights"]

    assert [(f.severity, f.file, f.line) for f in found] == [
        ("error", "evals/scenario-0/criteria.json", None)
    ]
    expected = (
        "FAIL: skills/notes-writer/evals/scenario-0 — sum=90 (expected 100): make the "
        "checklist's max_score values sum to 100"
    )
    assert found[0].message.encode() == expected.encode()


def test_weights_name_the_folder_from_the_current_directory_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    criteria = criteria_with('{"name": "a", "description": "Has `a`", "max_score": 99}')
    scenario = scenario_of(tmp_path, criteria_json=criteria)
    monkeypatch.chdir(tmp_path)

    assert messages(lint_scenario(scenario)["weights"]) == [
        "FAIL: notes-writer/evals/scenario-0 — sum=99 (expected 100): make the checklist's "
        "max_score values sum to 100"
    ]


def test_weights_are_the_checklist_s_as_the_reference_script_sums_them(tmp_path: Path) -> None:
    criteria = criteria_with('{"name": "a", "description": "Has `a`", "max_score": 70}')
    checks = '[{"name": "runs", "type": "command", "run": "make test", "max_score": 30}]'
    scenario = scenario_of(tmp_path, criteria_json=criteria, checks_json=checks)

    found = lint_scenario(scenario, shown_root=tmp_path)["weights"]

    assert [(f.file, f.message) for f in found] == [
        (
            "evals/scenario-0/criteria.json",
            "FAIL: notes-writer/evals/scenario-0 — sum=70 (expected 100): make the checklist's "
            "max_score values sum to 100",
        )
    ]


def test_a_scenario_graded_by_checks_only_needs_its_checks_to_sum_to_100(tmp_path: Path) -> None:
    criteria = '{"context": "c", "type": "weighted_checklist", "checklist": []}'
    short = '[{"name": "runs", "type": "command", "run": "make test", "max_score": 60}]'
    full = '[{"name": "runs", "type": "command", "run": "make test", "max_score": 100}]'
    failing = scenario_of(tmp_path / "a", criteria_json=criteria, checks_json=short)
    passing = scenario_of(tmp_path / "b", criteria_json=criteria, checks_json=full)

    found = lint_scenario(failing, shown_root=tmp_path / "a")["weights"]

    assert [(f.file, f.message) for f in found] == [
        (
            "evals/scenario-0/checks.json",
            "FAIL: notes-writer/evals/scenario-0 — sum=60 (expected 100): make the checks' "
            "max_score values sum to 100",
        )
    ]
    assert lint_scenario(passing)["weights"] == []


def test_weights_summing_to_100_pass(tmp_path: Path) -> None:
    assert findings(scenario_of(tmp_path), "weights") == []


# --- the task names the skill --------------------------------------------------------------


def test_the_skill_named_in_the_task_prose_is_an_error(tmp_path: Path) -> None:
    task = "# Notes\n\nYou are an agent using the Notes-Writer skill.\nWrite the notes.\n"
    scenario = scenario_of(tmp_path, task_md=task)

    found = findings(scenario, "task-names-skill")

    assert [(f.severity, f.file, f.line) for f in found] == [
        ("error", "evals/scenario-0/task.md", 3)
    ]
    assert found[0].message.startswith("the task names the skill 'notes-writer': describe")


def test_the_skill_named_in_code_or_a_path_is_a_warning(tmp_path: Path) -> None:
    task = (
        "# Notes\n"
        "Write `notes-writer.sh`.\n"
        "Put it under skills/notes-writer/ or notes-writer.md.\n"
        "```\n"
        "notes-writer --help\n"
        "```\n"
    )
    scenario = scenario_of(tmp_path, task_md=task)

    found = findings(scenario, "task-names-skill")

    assert [(f.severity, f.line) for f in found] == [
        ("warning", 2),
        ("warning", 3),
        ("warning", 3),
        ("warning", 5),
    ]
    assert "in code or a file name ('notes-writer.sh')" in found[0].message


def test_the_front_matter_name_counts_too(tmp_path: Path) -> None:
    skill_md = "---\nname: release-notes\ndescription: Writes notes.\n---\n"
    skill = make_skill(
        tmp_path,
        {"SKILL.md": skill_md, "evals/scenario-0/task.md": "Use release-notes here.\n"},
    )

    found = findings(skill / "evals" / "scenario-0", "task-names-skill")

    assert [(f.severity, f.line) for f in found] == [("error", 1)]
    assert "'release-notes'" in found[0].message


def test_the_skill_name_inside_a_longer_word_is_no_mention(tmp_path: Path) -> None:
    task = "Compare github-notes-writer with notes-writer-v2 and notes-writers.\n"
    scenario = scenario_of(tmp_path, task_md=task)

    assert findings(scenario, "task-names-skill") == []


# --- referenced inputs ---------------------------------------------------------------------


def test_a_backticked_path_missing_from_inputs_is_a_warning(tmp_path: Path) -> None:
    task = "# Notes\n\nRead `notes/raw.txt` and `notes/extra.md`.\nAgain: `notes/extra.md`.\n"
    scenario = scenario_of(tmp_path, task_md=task)

    found = findings(scenario, "referenced-inputs")

    assert [(f.severity, f.file, f.line) for f in found] == [
        ("warning", "evals/scenario-0/task.md", 3)
    ]
    assert found[0].message == (
        "the task refers to `notes/extra.md`, which is not in evals/scenario-0/inputs/: add it "
        "there if the agent should find it (ignore this if the task asks the agent to create it)"
    )


def test_paths_in_inputs_and_spans_that_are_no_paths_pass(tmp_path: Path) -> None:
    task = (
        "Read `notes/raw.txt`, `./notes/raw.txt`, `inputs/notes/raw.txt` and `notes/`.\n"
        "Not paths: `make test`, `make`, `ENV=dev`, `https://example.com/a.md`, `/etc/hosts`,\n"
        "`~/.bashrc`, `../secret.md`, `{ data }`, `src/*.js`, `skills/<name>/`, `--out=x/y`.\n"
        "```\n"
        "cat `missing/in/a/fence.md`\n"
        "```\n"
    )
    scenario = scenario_of(tmp_path, task_md=task)

    assert findings(scenario, "referenced-inputs") == []


@pytest.mark.parametrize(
    "task",
    [
        "Write the summary to `summary.md`.\n",
        "Save the output of `git log` to `log.txt` and produce `notes/out.md`.\n",
        "Put the rule in a directory named `rules/api/` in the repository.\n",
        "Some files use kebab-case (`user-profile.ts`), others camelCase.\n",
        "Use a name such as `notes/2026.md` from the team's scheme.\n",
        "# Output\n\n- a `Makefile` and any supporting files under `mk/`\n",
        "The change touches `src/a.js`.\n\nCreate minimal placeholder files, then commit.\n",
        "Read the guide in `references/guide.md` first.\n",  # the skill's own file
        "The scripts can be assumed to exist at `scripts/test.sh`.\n",
    ],
    ids=[
        "written",
        "saved and produced",
        "named",
        "an example in brackets",
        "an example after such as",
        "under a heading of what to hand in",
        "stand-ins the agent makes",
        "a file of the skill",
        "assumed",
    ],
)
def test_paths_the_agent_is_to_make_or_that_are_examples_are_not_warned(
    tmp_path: Path, task: str
) -> None:
    scenario = scenario_of(tmp_path, task_md=task)
    (scenario.parents[1] / "references").mkdir(exist_ok=True)
    (scenario.parents[1] / "references" / "guide.md").write_text("# guide\n")

    assert findings(scenario, "referenced-inputs") == []


@pytest.mark.parametrize(
    ("task", "path"),
    [
        ("The project contains these folders: `infra/` and more.\n", "infra/"),
        ("There's a `src/` folder with TypeScript files.\n", "src/"),
        ("The `specs/_current` file points to the spec.\n", "specs/_current"),
        ("Fix the bug in `app/main.py`. Then write `report.md`.\n", "app/main.py"),
    ],
    ids=["contains", "there is", "a file that points", "fix in, then write another"],
)
def test_paths_the_task_speaks_of_as_there_are_warned(tmp_path: Path, task: str, path: str) -> None:
    scenario = scenario_of(tmp_path, task_md=task)

    assert [f.message.split("`")[1] for f in findings(scenario, "referenced-inputs")] == [path]


# --- vague criteria ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "description",
    [
        "The code is clean and well-written",
        "Good commit message",
        "The output is correct",
        "Appropriate documentation",
        "High quality response",
    ],
)
def test_a_criterion_resting_on_vague_words_is_a_warning(tmp_path: Path, description: str) -> None:
    criteria = criteria_with(f'{{"name": "v", "description": "{description}", "max_score": 100}}')
    scenario = scenario_of(tmp_path, criteria_json=criteria)

    found = findings(scenario, "vague-criteria")

    assert [(f.severity, f.file, f.line) for f in found] == [
        ("warning", "evals/scenario-0/criteria.json", 3)
    ]
    assert found[0].message.startswith(f"checklist[0] ('v'): vague criterion {description!r}")


@pytest.mark.parametrize(
    "description",
    [
        "Response presents a clear counterargument against the user's stated position",
        "A clear `## Usage` section",
        "Good: the commit message says 'fix' first",
        "Uses proper error handling",
        "The changelog lists all 3 fixes correctly",
        "Clean up the notes/raw.txt file",
    ],
)
def test_a_criterion_naming_what_to_observe_is_not_vague(tmp_path: Path, description: str) -> None:
    criteria = criteria_with(f'{{"name": "v", "description": "{description}", "max_score": 100}}')
    scenario = scenario_of(tmp_path, criteria_json=criteria)

    assert findings(scenario, "vague-criteria") == []


# --- scenario description ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "line", "start"),
    [
        (None, None, "no scenario.json: add"),
        ('{"sandbox": true}', None, "scenario.json has no description: add"),
        ('{\n  "description": "  "\n}\n', 2, "scenario.json has no description: add"),
    ],
)
def test_a_scenario_without_description_is_a_warning(
    tmp_path: Path, options: str | None, line: int | None, start: str
) -> None:
    scenario = scenario_of(tmp_path, scenario_json=options)

    found = findings(scenario, "scenario-description")

    assert [(f.severity, f.file, f.line) for f in found] == [
        ("warning", "evals/scenario-0/scenario.json", line)
    ]
    assert found[0].message.startswith(start)
    assert "for the catalogue" in found[0].message


def test_a_described_scenario_passes_and_a_broken_one_is_left_to_its_rule(
    tmp_path: Path,
) -> None:
    assert findings(scenario_of(tmp_path), "scenario-description") == []
    broken = scenario_of(tmp_path / "b", scenario_json='{"description": 5}')
    assert findings(broken, "scenario-description") == []
    assert messages(findings(broken, "scenario-json")) == ["description: must be a string (got 5)"]


# --- SKILL.md ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("skill_md", "line", "start"),
    [
        (None, None, "missing: every skill needs a SKILL.md"),
        ("# Notes writer\n", 1, "no YAML front matter: start SKILL.md with a `---` line"),
        ("---\nname: notes-writer\n", 1, "the front matter is not closed"),
        (
            "---\nname: notes-writer\ndescription: [a\n---\n",
            3,
            "the front matter is not valid YAML",
        ),
        ("---\n- a list\n---\n", 2, "the front matter must be YAML keys"),
        (
            "---\ndescription: Writes.\n---\n",
            1,
            "the front matter has no name: add `name: notes-writer`",
        ),
        (
            "---\nname: notes\ndescription: Writes.\n---\n",
            2,
            "the front matter's name 'notes' differs from the folder's name 'notes-writer'",
        ),
        (
            "---\nname: notes-writer\ndescription: ''\n---\n",
            3,
            "the front matter has no description",
        ),
    ],
)
def test_skill_md_problems_are_errors(
    tmp_path: Path, skill_md: str | None, line: int | None, start: str
) -> None:
    skill = make_skill(tmp_path, {"SKILL.md": skill_md})

    found = lint_skill(skill)["skill-md"]

    assert [(f.rule, f.severity, f.file, f.line) for f in found] == [
        ("skill-md", "error", "SKILL.md", line)
    ]
    assert found[0].message.startswith(start)


def test_a_folded_description_and_more_keys_pass(tmp_path: Path) -> None:
    skill_md = "---\nname: notes-writer\ndescription: >\n  Writes notes.\nmetadata:\n  v: 1\n---\n"
    skill = make_skill(tmp_path, {"SKILL.md": skill_md})

    assert lint_skill(skill)["skill-md"] == []


# --- CHANGELOG.md --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changelog", "line", "start"),
    [
        (None, None, "missing: add a CHANGELOG.md with a released version heading"),
        ("# Changelog\n\n## [Unreleased]\n\n- wip\n", None, "no released version heading"),
        ("# Changelog\n\n## 1.1.0 — 2026-05-05\n", None, "no released version heading"),
        ("# Changelog\n\n## [Unreleased]\n## []\n## [1.0.0]\n", 4, "the version heading `## []`"),
    ],
)
def test_a_changelog_without_a_released_version_is_an_error(
    tmp_path: Path, changelog: str | None, line: int | None, start: str
) -> None:
    skill = make_skill(tmp_path, {"CHANGELOG.md": changelog})

    found = lint_skill(skill)["changelog"]

    assert [(f.severity, f.file, f.line) for f in found] == [("error", "CHANGELOG.md", line)]
    assert found[0].message.startswith(start)
    assert found[0].message.endswith(
        "reports carry an empty skill_version and the catalogue never counts them"
    )


def test_a_released_version_after_unreleased_passes(tmp_path: Path) -> None:
    skill = make_skill(tmp_path, {"CHANGELOG.md": "## [Unreleased]\r\n## [0.5.0]\r\n"})

    assert lint_skill(skill)["changelog"] == []


# --- scenarios -----------------------------------------------------------------------------


def test_a_skill_without_scenarios_is_a_warning(tmp_path: Path) -> None:
    skill = tmp_path / "notes-writer"
    (skill / "evals" / "results").mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD, encoding="utf-8")

    found = lint_skill(skill)["scenarios"]

    assert [(f.severity, f.file, f.line) for f in found] == [("warning", "evals", None)]
    assert found[0].message.startswith("no evals/scenario-* folder")


def test_a_skill_with_a_scenario_passes(tmp_path: Path) -> None:
    assert lint_skill(make_skill(tmp_path))["scenarios"] == []


def test_a_skill_with_trigger_queries_only_is_evaluated_by_them(tmp_path: Path) -> None:
    skill = tmp_path / "notes-writer"
    (skill / "evals").mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD, encoding="utf-8")
    (skill / "evals" / "trigger_queries.json").write_text(
        '[{"query": "take notes", "should_trigger": true}]'
    )

    assert lint_skill(skill)["scenarios"] == []


# --- held to the loader, and robust --------------------------------------------------------


BROKEN = {
    "no task": {"task.md": None},
    "no criteria": {"criteria.json": None},
    "criteria not JSON": {"criteria.json": "{"},
    "criteria a list": {"criteria.json": "[]"},
    "checklist not a list": {"criteria.json": '{"checklist": {}}'},
    "item not an object": {"criteria.json": '{"checklist": [5]}'},
    "name empty": {"criteria.json": '{"checklist": [{"name": "", "max_score": 100}]}'},
    "context a number": {
        "criteria.json": '{"context": 1, "checklist": [{"name": "a", "max_score": 100}]}'
    },
    "options not JSON": {"scenario.json": "{"},
    "options a list": {"scenario.json": "[]"},
    "checks not a list": {"checks.json": "{}"},
    "check without type": {"checks.json": '[{"name": "a", "max_score": 1}]'},
    "check bad regex": {
        "checks.json": '[{"name": "a", "type": "output_regex", "pattern": "(", "max_score": 1}]'
    },
    "check bad schema": {
        "checks.json": '[{"name": "a", "type": "json_schema", "schema": {"type": 5}, '
        '"max_score": 1}]'
    },
    "diff without globs": {"checks.json": '[{"name": "a", "type": "diff", "max_score": 1}]'},
    "check bad expression": {
        "checks.json": '[{"name": "a", "type": "output_expression", "expression": "1 +", '
        '"max_score": 1}]'
    },
    "init file": {"__init__.py": ""},
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_what_the_loader_rejects_is_a_lint_error_with_its_message(
    tmp_path: Path, case: str
) -> None:
    files = {f"evals/scenario-0/{name}": text for name, text in BROKEN[case].items()}
    scenario = make_skill(tmp_path, files) / "evals" / "scenario-0"
    with pytest.raises(ScenarioLoadError) as loader:
        load_scenario(scenario)

    errors = [f for fs in lint_scenario(scenario).values() for f in fs if f.severity == "error"]

    shown = str(loader.value)
    assert any(shown in f"{f.file}: {f.message}" for f in errors)


def test_unreadable_files_give_findings_not_exceptions(tmp_path: Path) -> None:
    skill = make_skill(tmp_path)
    scenario = skill / "evals" / "scenario-0"
    (scenario / "task.md").write_bytes(b"\xff\xfe not utf-8")
    (scenario / "criteria.json").write_bytes(b"\xff\xfe")
    (scenario / "scenario.json").write_text(json.dumps([1, [2, {"a": None}]]), encoding="utf-8")
    (scenario / "checks.json").write_text("[1, null]", encoding="utf-8")
    (skill / "SKILL.md").write_bytes(b"\xff")

    report = lint_scenario(scenario)

    assert [f.rule for f in report["criteria-json"]] == ["criteria-json"]
    assert report["criteria-json"][0].message.startswith("cannot be read")
    assert [f.message for f in report["checks-json"]] == [
        "[0]: must be an object",
        "[1]: must be an object",
    ]
    assert lint_skill(skill)["skill-md"][0].message == "cannot be read as UTF-8 text"
