"""The scaffold's placeholders (pytest_openkata.core.placeholders and the ``placeholders`` lint
rules): every one the scaffold writes is found, in every file it writes, and the word TODO in a
skill's own text never is."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from pytest_openkata.commands.scaffold import Written, scenario_files, skill_files, write_missing
from pytest_openkata.core.lint import lint_scenario, lint_skill
from pytest_openkata.core.placeholders import SCAFFOLD_PLACEHOLDERS, placeholders_in


def _scaffold_texts() -> dict[str, str]:
    texts = {f"skill/{rel}": text for rel, text in skill_files("x", date(2026, 1, 1)).items()}
    for sandbox in (False, True):
        for rel, text in scenario_files(sandbox).items():
            texts[f"{'sandbox' if sandbox else 'direct'}/{rel}"] = text
    return texts


@pytest.mark.parametrize("rel", sorted(_scaffold_texts()))
def test_every_placeholder_the_scaffold_writes_is_found(rel: str) -> None:
    text = _scaffold_texts()[rel]

    found = placeholders_in(text)

    assert len(found) == text.count("TODO") + text.count("replace this file")


def test_each_placeholder_is_written_by_the_scaffold() -> None:
    """No entry of the list is stale: each is in a file the scaffold writes."""
    written = " ".join(" ".join(text.split()) for text in _scaffold_texts().values())

    assert [p for p in SCAFFOLD_PLACEHOLDERS if p not in written] == []


def test_a_placeholder_wrapped_onto_the_next_line_is_found_at_its_first_line() -> None:
    text = "# Title\n\nTODO: write the request\n   as a user would make it.\n"

    assert placeholders_in(text) == [(3, "TODO: write the request as a user would make it")]


def test_todo_in_a_skill_about_todo_comments_is_not_a_placeholder(tmp_path: Path) -> None:
    skill = tmp_path / "todo-comments"
    scenario = skill / "evals" / "scenario-0"
    scenario.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: todo-comments\ndescription: Writes TODO comments. Use for TODO: notes.\n"
        "---\n\n# TODO comments\n\nTODO: the first word of every TODO comment, then an owner.\n"
        "\n```python\n# TODO: the request in a moment, once the cache is warm\n```\n"
    )
    (scenario / "task.md").write_text(
        "TODO: fix the parser\n\nAdd a TODO: comment for each open question in `app.py`.\n"
    )
    criteria = {
        "context": "TODO: comments",
        "checklist": [
            {"name": "todo", "description": "Each TODO: names an owner", "max_score": 100}
        ],
    }
    (scenario / "criteria.json").write_text(json.dumps(criteria))
    (scenario / "scenario.json").write_text('{"description": "TODO: comments", "sandbox": false}')

    assert lint_skill(skill)["placeholders"] == []
    assert lint_scenario(scenario)["placeholders"] == []


def test_the_untouched_scaffold_warns_once_per_file_at_its_first_placeholder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    skill = tmp_path / "x"
    write_missing(skill, skill_files("x", date(2026, 1, 1)), Written())
    write_missing(skill / "evals" / "scenario-0", scenario_files(sandbox=True), Written())
    capsys.readouterr()

    skill_found = lint_skill(skill)["placeholders"]
    scenario_found = lint_scenario(skill / "evals" / "scenario-0")["placeholders"]

    assert [(f.severity, f.file, f.line) for f in skill_found] == [("warning", "SKILL.md", 3)]
    assert skill_found[0].message.startswith(
        "the scaffold's placeholder \"TODO: say in one or two sentences what this skill does "
        '..." is still there (6 placeholders left, on lines 3, 8, 12, 14, 18, 22): replace each '
        "with the skill's own text"
    )
    assert [(f.severity, f.file, f.line) for f in scenario_found] == [
        ("warning", "evals/scenario-0/task.md", 1),
        ("warning", "evals/scenario-0/criteria.json", 2),
        ("warning", "evals/scenario-0/scenario.json", 2),
        ("warning", "evals/scenario-0/inputs/README.md", 1),
    ]
    assert "(4 placeholders left, on lines 2, 7, 12, 17)" in scenario_found[1].message


def test_a_half_filled_scaffold_still_warns_about_what_is_left(tmp_path: Path) -> None:
    scenario = tmp_path / "x" / "evals" / "scenario-0"
    write_missing(scenario, scenario_files(sandbox=False), Written())
    task = scenario / "task.md"
    task.write_text(task.read_text().replace("# TODO: the request in a few words", "# Notes"))

    (found,) = lint_scenario(scenario)["placeholders"][:1]

    assert (found.file, found.line) == ("evals/scenario-0/task.md", 3)
    assert "(1 placeholder left, on line 3)" in found.message
