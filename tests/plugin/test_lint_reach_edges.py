"""Edges of the lint rules on what never reaches the agent, mechanical criteria and tasks
that give the answer away, and of the CSV of same-named skills: each found by a review as a
bug and fixed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_openkata.core.lint import lint_scenario, unreached_skill_files
from pytest_openkata.core.scenario import load_checks
from pytest_openkata.core.workspace import workspace_files
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_scenario, write_skill

SKILL_FRONT = "---\nname: s\ndescription: does things\n---\n"


def _skill(root: Path, skill_md: str) -> Path:
    skill = write_skill(root, "s", {"scenario-a": {"a": 100}})
    (skill / "SKILL.md").write_text(SKILL_FRONT + skill_md)
    return skill


def _criteria(folder: Path, checklist: list[dict[str, object]]) -> None:
    data = {"context": "ctx", "type": "weighted_checklist", "checklist": checklist}
    (folder / "criteria.json").write_text(json.dumps(data))


def _suggested(findings: list[object]) -> dict[str, object]:
    (finding,) = findings
    return json.loads(re.search(r"checks\.json entry.*?: (\{.*\})$", str(finding)).group(1))


# --- unreached-files (skill): links ------------------------------------------------------


def test_a_link_whose_text_wraps_onto_the_next_line_is_still_seen(tmp_path: Path) -> None:
    skill = _skill(tmp_path, "Read the [worked\nexamples](EXAMPLES.md) before you start.\n")
    (skill / "EXAMPLES.md").write_text("examples\n")

    findings = unreached_skill_files(skill)

    assert [f.message.split(",")[0] for f in findings] == ["SKILL.md links to EXAMPLES.md"]


def test_a_link_around_an_image_is_seen(tmp_path: Path) -> None:
    skill = _skill(tmp_path, "[![the flow](assets/flow.png)](docs/flow.md)\n")
    (skill / "assets").mkdir()
    (skill / "assets" / "flow.png").write_bytes(b"png")
    (skill / "docs").mkdir()
    (skill / "docs" / "flow.md").write_text("the flow\n")

    findings = unreached_skill_files(skill)

    assert [f.message.split(",")[0] for f in findings] == ["SKILL.md links to docs/flow.md"]


def test_a_commented_out_link_is_no_link(tmp_path: Path) -> None:
    skill = _skill(tmp_path, "Steps.\n\n<!-- old: see [the notes](NOTES.md) -->\n")
    (skill / "NOTES.md").write_text("notes\n")

    assert unreached_skill_files(skill) == []


# --- mechanical-criteria ---------------------------------------------------------------------


def test_a_dotted_product_name_in_the_subject_is_no_file(tmp_path: Path) -> None:
    skill = write_skill(tmp_path, "s", {"scenario-a": {"a": 100}}, sandbox=True)
    scenario = skill / "evals" / "scenario-a"
    description = 'The explanation of Node.js streams contains "backpressure".'
    _criteria(scenario, [{"name": "a", "description": description, "max_score": 100}])

    entry = _suggested(lint_scenario(scenario)["mechanical-criteria"])

    # The agent's explanation is its output; no file "Node.js" is asked for.
    assert entry["type"] == "output_regex", entry


def test_a_criterion_on_an_input_file_gets_the_files_workspace_path(tmp_path: Path) -> None:
    skill = write_skill(tmp_path, "s", {}, sandbox=True)
    scenario = write_scenario(
        skill, "scenario-a", {"a": 100}, sandbox=True, inputs={"app.py": "TIMEOUT = 5\n"}
    )
    (scenario / "task.md").write_text("Raise the timeout in `inputs/app.py` to half a minute.\n")
    description = '`inputs/app.py` contains "TIMEOUT = 30".'
    _criteria(scenario, [{"name": "a", "description": description, "max_score": 100}])
    assert lint_scenario(scenario)["referenced-inputs"] == []  # the task's wording is sound

    entry = _suggested(lint_scenario(scenario)["mechanical-criteria"])
    (scenario / "checks.json").write_text(json.dumps([entry]))
    (check,) = load_checks(scenario / "checks.json", sandboxed=True)

    workspace = [name for name, _data in workspace_files(skill, scenario)]
    assert check.path in workspace, (check.path, workspace)


def test_following_the_mechanical_suggestion_passes_lint(tmp_path: Path) -> None:
    skill = write_skill(tmp_path, "s", {"scenario-a": {"a": 100}})
    scenario = skill / "evals" / "scenario-a"
    checklist = [
        {"name": "explains", "description": "Explains why the region matters", "max_score": 70},
        {"name": "host", "description": 'The reply contains "eu2.example.com".', "max_score": 30},
    ]
    _criteria(scenario, checklist)
    entry = _suggested(lint_scenario(scenario)["mechanical-criteria"])

    # As the warning says: replace the criterion with the entry, give its points to the others.
    _criteria(scenario, [{**checklist[0], "max_score": 100}])
    (scenario / "checks.json").write_text(json.dumps([entry]))
    found = lint_scenario(scenario)

    errors = [str(f) for rule in found.values() for f in rule if f.severity == "error"]
    assert errors == []


# --- task-states-answer ------------------------------------------------------------------------


def test_a_value_the_criterion_forbids_is_not_a_given_away_answer(tmp_path: Path) -> None:
    skill = write_skill(tmp_path, "s", {"scenario-a": {"a": 100}})
    scenario = skill / "evals" / "scenario-a"
    (scenario / "task.md").write_text(
        "My push to main was rejected. A colleague says to just run git push --force.\n"
        "What should I do?\n"
    )
    description = 'The reply does not recommend "git push --force" on the shared branch'
    _criteria(scenario, [{"name": "a", "description": description, "max_score": 100}])

    assert lint_scenario(scenario)["task-states-answer"] == []


# --- CSV of skills of the same name ------------------------------------------------------------


def test_csv_rows_of_skills_of_the_same_name_can_be_told_apart(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    import csv

    for group in ("a", "b"):
        skill = write_skill(pytester.path / "made", "s", {"scenario-0": {"c": 100}})
        target = pytester.path / "skills" / group / "s"
        target.parent.mkdir(parents=True)
        skill.rename(target)
        (target / "SKILL.md").write_text(f"# s\n\nRules of group {group}.\n")

    result = pytester.runpytest("skills", *eval_args(endpoint.base_url, "--eval-csv", "out.csv"))

    assert (pytester.path / "out.csv").is_file(), result.stdout.str()
    rows = list(csv.DictReader((pytester.path / "out.csv").read_text().splitlines()))
    assert len(rows) >= 2, rows
    assert len({row["skill"] for row in rows}) == 2, rows
