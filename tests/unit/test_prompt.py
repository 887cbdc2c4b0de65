"""The agent prompt: byte-compatible with openkata-eval, and no reads through symlinks that
lead out of the skill.

Spec references: section 4 (prompt construction and worked example), section 12 checks 1-8.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_openkata.core.prompt import SkillTexts, build_prompt

WORKED_EXAMPLE = (
    "# Test Skill\n\nUse this skill.\n\n\n"
    "--- guide.md ---\nReference content here.\n\n\n"
    '--- run.sh ---\n#!/bin/bash\necho "test"\n\n\n'
    "--- template.txt ---\nasset data\n\n\n"
    "Do the task described above.\n\n\n"
    "```src/main.js\nconst x = 1;\n```"
)
CRITERIA = {
    "context": "Test context",
    "type": "weighted_checklist",
    "checklist": [
        {"name": "criterion-a", "description": "Does A", "max_score": 10},
        {"name": "criterion-b", "description": "Does B", "max_score": 5},
    ],
}
SECRET = "OUTSIDE-SECRET-do-not-leak"


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_bytes(content.encode("utf-8"))
    return path


@pytest.fixture
def test_skill(tmp_path: Path) -> Path:
    """``testdata/test-skill`` as the spec's section 4 table and section 12 describe it."""
    skill = tmp_path / "testdata" / "test-skill"
    files: dict[str, str] = {
        "SKILL.md": "# Test Skill\n\nUse this skill.\n",
        "CHANGELOG.md": "# Changelog\n\nShould not appear in prompt.\n",
        "RATIONALE.md": "Why this skill exists.\n",
        ".tessl-plugin/plugin.json": '{"name": "test-skill"}\n',
        "tile.json": '{"name": "tile"}\n',
        ".tesslignore": "evals/\n",
        "references/guide.md": "Reference content here.\n",
        "references/ACKNOWLEDGMENTS.md": "Should be excluded.\n",
        "scripts/run.sh": '#!/bin/bash\necho "test"\n',
        "assets/template.txt": "asset data\n",
        "evals/scenario-0/criteria.json": json.dumps(CRITERIA),
        "evals/scenario-0/scenario.json": '{"description": "Test scenario", "sandbox": false}',
        "evals/scenario-0/task.md": "Do the task described above.\n",
        "evals/scenario-0/inputs/src/main.js": "const x = 1;\n",
    }
    for rel, content in files.items():
        write(skill / rel, content)
    return skill


def minimal_skill(tmp_path: Path, task: str = "Task.\n") -> tuple[Path, Path]:
    skill = tmp_path / "skill"
    scenario = skill / "evals" / "scenario-0"
    write(skill / "SKILL.md", "S\n")
    write(scenario / "task.md", task)
    return skill, scenario


def outside_folder(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    write(outside / "secret.md", SECRET + "\n")
    write(outside / "nested" / "deep.md", SECRET + " deep\n")
    return outside


# --- the worked example and checks 1-8 ------------------------------------------------------


def test_worked_example_is_byte_identical(test_skill: Path) -> None:
    prompt = build_prompt(test_skill, test_skill / "evals" / "scenario-0")
    assert prompt == WORKED_EXAMPLE


def test_worked_example_does_not_depend_on_relative_or_absolute_paths(
    test_skill: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(test_skill.parent)
    relative = Path("test-skill")
    assert build_prompt(relative, relative / "evals" / "scenario-0") == WORKED_EXAMPLE


@pytest.mark.parametrize(
    ("text", "present"),
    [
        ("Test Skill", True),  # check 1
        ("Reference content here.", True),  # check 2
        ("Should be excluded.", False),  # check 3
        ('echo "test"', True),  # check 4
        ("asset data", True),  # check 5
        ("Do the task described above.", True),  # check 6
        ("\n```src/main.js\n", True),  # check 7
        ("const x = 1;", True),  # check 7
        ("Should not appear in prompt.", False),  # check 8
        ("Why this skill exists.", False),  # RATIONALE.md
        ('"test-skill"', False),  # .tessl-plugin/plugin.json
        ("Test context", False),  # criteria.json
        ("Test scenario", False),  # scenario.json
        ("evals/", False),  # .tesslignore
    ],
)
def test_spec_checks(test_skill: Path, text: str, present: bool) -> None:
    prompt = build_prompt(test_skill, test_skill / "evals" / "scenario-0")
    assert (text in prompt) is present


# --- layout ---------------------------------------------------------------------------------


def test_without_inputs_ends_with_task_verbatim(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path, task="Line one.\nLine two.\n")
    prompt = build_prompt(skill, scenario)
    assert prompt == "S\n\n\nLine one.\nLine two.\n"
    assert prompt.endswith("Line two.\n")


def test_task_without_final_newline_is_kept_as_is(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path, task="No newline")
    assert build_prompt(skill, scenario) == "S\n\n\nNo newline"


def test_empty_folders_contribute_nothing(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    for folder in ("references", "scripts", "assets"):
        (skill / folder).mkdir()
    (scenario / "inputs").mkdir()
    assert build_prompt(skill, scenario) == "S\n\n\nTask.\n"


def test_sources_come_in_fixed_order(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    write(skill / "assets" / "a.txt", "A")
    write(skill / "scripts" / "s.txt", "S")
    write(skill / "references" / "r.txt", "R")
    write(scenario / "inputs" / "i.txt", "I")
    assert build_prompt(skill, scenario) == (
        "S\n\n\n--- r.txt ---\nR\n\n--- s.txt ---\nS\n\n--- a.txt ---\nA\n\n"
        "Task.\n\n\n```i.txt\nI\n```"
    )


def test_nested_files_show_path_relative_to_their_folder(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    write(skill / "references" / "deep" / "er" / "x.md", "x\n")
    prompt = build_prompt(skill, scenario)
    assert "--- deep/er/x.md ---\nx\n" in prompt
    assert "references/" not in prompt


def test_nested_acknowledgments_is_included(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    write(skill / "references" / "ACKNOWLEDGMENTS.md", "top level\n")
    write(skill / "references" / "sub" / "ACKNOWLEDGMENTS.md", "nested thanks\n")
    prompt = build_prompt(skill, scenario)
    assert "--- sub/ACKNOWLEDGMENTS.md ---\nnested thanks\n" in prompt
    assert "top level" not in prompt


@pytest.mark.parametrize("folder", ["scripts", "assets"])
def test_acknowledgments_outside_references_is_included(tmp_path: Path, folder: str) -> None:
    skill, scenario = minimal_skill(tmp_path)
    write(skill / folder / "ACKNOWLEDGMENTS.md", "kept\n")
    assert "--- ACKNOWLEDGMENTS.md ---\nkept\n" in build_prompt(skill, scenario)


def test_sort_upper_before_lower(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    write(skill / "references" / "a.md", "lower\n")
    write(skill / "references" / "A.md", "upper\n")
    assert build_prompt(skill, scenario) == (
        "S\n\n\n--- A.md ---\nupper\n\n\n--- a.md ---\nlower\n\n\nTask.\n"
    )


def test_sort_dash_dot_slash(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    write(skill / "references" / "a" / "x", "3")
    write(skill / "references" / "a.md", "2")
    write(skill / "references" / "a-b", "1")
    prompt = build_prompt(skill, scenario)
    assert prompt == "S\n\n\n--- a-b ---\n1\n\n--- a.md ---\n2\n\n--- a/x ---\n3\n\nTask.\n"


def test_inputs_are_sorted_by_full_relative_path(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    write(scenario / "inputs" / "b" / "a.txt", "ba")
    write(scenario / "inputs" / "a" / "z.txt", "az")
    write(scenario / "inputs" / "a.txt", "a")
    prompt = build_prompt(skill, scenario)
    assert prompt.endswith("```a.txt\na\n```\n\n```a/z.txt\naz\n```\n\n```b/a.txt\nba\n```")


def test_empty_file_gives_header_and_newline(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    write(skill / "references" / "x", "")
    assert build_prompt(skill, scenario) == "S\n\n\n--- x ---\n\n\nTask.\n"


def test_hidden_and_binary_files_are_included(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    write(skill / "assets" / ".DS_Store", b"\x00\x01hidden")
    prompt = build_prompt(skill, scenario)
    assert "--- .DS_Store ---\n\x00\x01hidden" in prompt


def test_inputs_strip_only_trailing_newlines(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    write(scenario / "inputs" / "crlf.txt", "a\r\nb\r\n\n\n")
    write(scenario / "inputs" / "lead.txt", "\n\nbody \n")
    prompt = build_prompt(skill, scenario)
    assert prompt.endswith("```crlf.txt\na\r\nb\r\n```\n\n```lead.txt\n\n\nbody \n```")


def test_empty_input_file(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    write(scenario / "inputs" / "empty.txt", "")
    assert build_prompt(skill, scenario).endswith("Task.\n\n\n```empty.txt\n\n```")


def test_references_keep_trailing_newlines(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    write(skill / "references" / "r.md", "r\n\n\n")
    assert "--- r.md ---\nr\n\n\n\n\nTask.\n" in build_prompt(skill, scenario)


def test_invalid_utf8_becomes_replacement_character(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    write(skill / "references" / "bad.md", b"ok \xff\xfe end\n")
    write(scenario / "inputs" / "bad.txt", b"in \xc3 put\n")
    prompt = build_prompt(skill, scenario)
    assert "--- bad.md ---\nok \ufffd\ufffd end\n" in prompt
    assert "```bad.txt\nin \ufffd put\n```" in prompt


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (b"\xe2\x82 cut", "\ufffd\ufffd cut"),  # a three-byte character cut after two bytes
        (b"\xf0\x9f\x98", "\ufffd\ufffd\ufffd"),  # a four-byte one cut at the end of the file
        (b"\xed\xa0\x80", "\ufffd\ufffd\ufffd"),  # a UTF-16 surrogate encoded as UTF-8
        (b"\xc0\xaf", "\ufffd\ufffd"),  # an overlong "/"
        (b"ok \xe2\x82\xac", "ok \u20ac"),  # valid: the euro sign
    ],
)
def test_invalid_utf8_is_one_replacement_character_per_byte_as_go_writes_it(
    tmp_path: Path, data: bytes, text: str
) -> None:
    """Go's JSON encoding of the prompt writes one U+FFFD per invalid byte (its UTF-8 decoder
    never takes more than one byte for an invalid rune), so the prompt's bytes are the same."""
    skill, scenario = minimal_skill(tmp_path)
    write(skill / "SKILL.md", data)

    assert build_prompt(skill, scenario).startswith(f"{text}\n\n")


def test_utf8_text_is_kept(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    write(skill / "references" / "ü.md", "Grüße — ✓\n")
    assert "--- ü.md ---\nGrüße — ✓\n" in build_prompt(skill, scenario)


def test_frontmatter_in_skill_md_is_kept(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    write(skill / "SKILL.md", "---\nname: x\n---\n# X\n")
    assert build_prompt(skill, scenario).startswith("---\nname: x\n---\n# X\n\n\n")


# --- missing files --------------------------------------------------------------------------


def test_missing_skill_md(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    (skill / "SKILL.md").unlink()
    with pytest.raises(FileNotFoundError) as info:
        build_prompt(skill, scenario)
    assert str(info.value).startswith("reading SKILL.md:")
    assert str(skill / "SKILL.md") in str(info.value)


def test_missing_task_md(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    (scenario / "task.md").unlink()
    with pytest.raises(FileNotFoundError) as info:
        build_prompt(skill, scenario)
    # The reference's text, the file named relative to the skill folder (no machine path).
    assert str(info.value) == (
        f"reading task.md: open evals/{scenario.name}/task.md: no such file or directory"
    )


# --- symlinks -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["SKILL.md", "task.md"])
def test_a_skill_md_or_task_md_linked_out_of_the_skill_is_not_read_and_said_so(
    tmp_path: Path, name: str
) -> None:
    skill, scenario = minimal_skill(tmp_path)
    own = skill / name if name == "SKILL.md" else scenario / name
    own.unlink()
    os.symlink(outside_folder(tmp_path) / "secret.md", own)

    with pytest.raises(FileNotFoundError) as info:
        build_prompt(skill, scenario)

    assert str(info.value) == (
        f"reading {name}: leads out of the skill folder through a symbolic link: it is not "
        "read; copy the file into the skill"
    )


def test_symlinked_file_to_outside_is_not_read(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    outside = outside_folder(tmp_path)
    write(skill / "references" / "real.md", "real\n")
    os.symlink(outside / "secret.md", skill / "references" / "leak.md")
    prompt = build_prompt(skill, scenario)
    assert SECRET not in prompt
    assert prompt == "S\n\n\n--- real.md ---\nreal\n\n\nTask.\n"


def test_relative_symlink_escaping_the_skill_is_not_read(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    outside_folder(tmp_path)
    (skill / "scripts").mkdir()
    os.symlink("../../outside/secret.md", skill / "scripts" / "leak.sh")
    assert SECRET not in build_prompt(skill, scenario)


def test_symlinked_input_file_to_outside_is_not_read(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    outside = outside_folder(tmp_path)
    (scenario / "inputs").mkdir()
    os.symlink(outside / "secret.md", scenario / "inputs" / "leak.md")
    assert SECRET not in build_prompt(skill, scenario)


@pytest.mark.parametrize("where", ["references", "scripts", "assets", "inputs"])
def test_symlinked_directory_to_outside_is_not_entered(tmp_path: Path, where: str) -> None:
    skill, scenario = minimal_skill(tmp_path)
    outside = outside_folder(tmp_path)
    folder = scenario / "inputs" if where == "inputs" else skill / where
    write(folder / "real.txt", "real\n")
    os.symlink(outside, folder / "linked")
    prompt = build_prompt(skill, scenario)
    assert SECRET not in prompt
    assert "linked/" not in prompt
    assert "real" in prompt


def test_symlinked_file_inside_the_skill_is_read(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    write(skill / "docs" / "shared.md", "shared body\n")
    (skill / "references").mkdir()
    os.symlink(skill / "docs" / "shared.md", skill / "references" / "shared.md")
    os.symlink("../docs/shared.md", skill / "references" / "relative.md")
    prompt = build_prompt(skill, scenario)
    assert "--- relative.md ---\nshared body\n" in prompt
    assert "--- shared.md ---\nshared body\n" in prompt


def test_symlinked_input_to_skill_file_is_read(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    (scenario / "inputs").mkdir()
    os.symlink(skill / "SKILL.md", scenario / "inputs" / "skill-copy.md")
    assert build_prompt(skill, scenario).endswith("```skill-copy.md\nS\n```")


@pytest.mark.parametrize("where", ["references", "scripts", "assets"])
def test_source_folder_itself_symlinked_outside_leaks_nothing(tmp_path: Path, where: str) -> None:
    skill, scenario = minimal_skill(tmp_path)
    outside = outside_folder(tmp_path)
    os.symlink(outside, skill / where)
    prompt = build_prompt(skill, scenario)
    assert SECRET not in prompt
    assert prompt == "S\n\n\nTask.\n"


def test_inputs_folder_symlinked_outside_leaks_nothing(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    outside = outside_folder(tmp_path)
    os.symlink(outside, scenario / "inputs")
    prompt = build_prompt(skill, scenario)
    assert SECRET not in prompt
    assert prompt == "S\n\n\nTask.\n"


def test_symlink_chain_ending_outside_is_not_read(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    outside = outside_folder(tmp_path)
    os.symlink(outside / "secret.md", skill / "hop.md")  # inside link, leads out
    (skill / "references").mkdir()
    os.symlink(skill / "hop.md", skill / "references" / "chain.md")
    assert SECRET not in build_prompt(skill, scenario)


def test_broken_symlink_is_skipped(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    (skill / "references").mkdir()
    os.symlink(skill / "nowhere.md", skill / "references" / "broken.md")
    assert build_prompt(skill, scenario) == "S\n\n\nTask.\n"


def test_skill_md_symlinked_outside_is_not_read(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    outside = outside_folder(tmp_path)
    (skill / "SKILL.md").unlink()
    os.symlink(outside / "secret.md", skill / "SKILL.md")
    with pytest.raises(FileNotFoundError, match=r"^reading SKILL\.md:"):
        build_prompt(skill, scenario)


def test_task_md_symlinked_outside_is_not_read(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    outside = outside_folder(tmp_path)
    (scenario / "task.md").unlink()
    os.symlink(outside / "secret.md", scenario / "task.md")
    with pytest.raises(FileNotFoundError, match=r"^reading task\.md:"):
        build_prompt(skill, scenario)


def test_skill_reached_through_a_symlinked_parent_still_works(tmp_path: Path) -> None:
    real_skill, _ = minimal_skill(tmp_path)
    write(real_skill / "references" / "r.md", "r\n")
    alias = tmp_path / "alias"
    os.symlink(real_skill, alias)
    prompt = build_prompt(alias, alias / "evals" / "scenario-0")
    assert prompt == "S\n\n\n--- r.md ---\nr\n\n\nTask.\n"


@pytest.mark.parametrize("where", ["references", "inputs"])
def test_a_symlinked_source_folder_leading_out_is_not_read(tmp_path: Path, where: str) -> None:
    skill, scenario = minimal_skill(tmp_path)
    outside = outside_folder(tmp_path)
    os.symlink(outside, scenario / "inputs" if where == "inputs" else skill / where)
    prompt = build_prompt(skill, scenario)
    assert SECRET not in prompt
    assert prompt == "S\n\n\nTask.\n"


def test_a_skill_reached_through_a_symlink_is_read_in_full(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    write(skill / "references" / "guide.md", "guide\n")
    linked = tmp_path / "linked-skill"
    os.symlink(skill, linked)
    scenario_through_link = linked / scenario.relative_to(skill)
    assert build_prompt(linked, scenario_through_link) == build_prompt(skill, scenario)
    assert "--- guide.md ---\nguide\n" in build_prompt(linked, scenario_through_link)


# --- the skill's part, read once per run ------------------------------------------------------


def test_skill_texts_give_the_same_prompts_as_reading_every_time(test_skill: Path) -> None:
    second = test_skill / "evals" / "scenario-1"
    write(second / "task.md", "Another task.\n")
    texts = SkillTexts()
    for scenario in (test_skill / "evals" / "scenario-0", second):
        assert build_prompt(test_skill, scenario, texts) == build_prompt(test_skill, scenario)


def test_a_run_sees_one_version_of_the_skill(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    texts = SkillTexts()
    assert build_prompt(skill, scenario, texts) == "S\n\n\nTask.\n"

    write(skill / "SKILL.md", "Edited while the run goes on.\n")
    write(scenario / "task.md", "Task, edited too.\n")

    assert build_prompt(skill, scenario, texts) == "S\n\n\nTask, edited too.\n"
    assert build_prompt(skill, scenario, SkillTexts()).startswith("Edited while the run")


def test_a_skill_without_skill_md_is_not_remembered(tmp_path: Path) -> None:
    skill, scenario = minimal_skill(tmp_path)
    (skill / "SKILL.md").unlink()
    texts = SkillTexts()
    with pytest.raises(FileNotFoundError, match=r"reading SKILL\.md"):
        build_prompt(skill, scenario, texts)

    write(skill / "SKILL.md", "Written late.\n")

    assert build_prompt(skill, scenario, texts) == "Written late.\n\n\nTask.\n"


def test_a_shared_reader_still_checks_every_scenarios_files(tmp_path: Path) -> None:
    skill, first = minimal_skill(tmp_path)
    outside = outside_folder(tmp_path)
    second = skill / "evals" / "scenario-1"
    write(second / "task.md", "Second task.\n")
    os.symlink(outside / "secret.md", second / "task-leak.md")
    write(second / "inputs" / "real.txt", "real\n")
    os.symlink(outside, second / "inputs" / "linked")
    os.symlink(outside / "secret.md", second / "inputs" / "leak.md")
    texts = SkillTexts()

    build_prompt(skill, first, texts)
    prompt = build_prompt(skill, second, texts)

    assert SECRET not in prompt
    assert prompt == "S\n\n\nSecond task.\n\n\n```real.txt\nreal\n```"
