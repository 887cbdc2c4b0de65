"""A scenario's prompt size before a model reads it: exact characters, estimated tokens,
its largest parts, and what is said of a prompt over the context budget."""

from __future__ import annotations

from pathlib import Path

from pytest_openkata.core.lint import lint_scenario
from pytest_openkata.core.prompt import build_prompt
from pytest_openkata.core.prompt_size import over_budget, prompt_size


def _skill(root: Path) -> tuple[Path, Path]:
    skill = root / "s"
    (skill / "references").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: s\ndescription: d\n---\n" + "rule. " * 100)
    (skill / "references" / "big.md").write_text("x" * 4000)
    scenario = skill / "evals" / "scenario-0"
    (scenario / "inputs" / "data").mkdir(parents=True)
    (scenario / "task.md").write_text("Summarise the data.\n")
    (scenario / "inputs" / "data" / "rows.csv").write_text("a,b\n" * 300)
    (scenario / "criteria.json").write_text(
        '{"checklist": [{"name": "a", "description": "d", "max_score": 100}]}'
    )
    return skill, scenario


def test_the_size_is_the_built_prompts_part_by_part_largest_first(tmp_path: Path) -> None:
    skill, scenario = _skill(tmp_path)

    size = prompt_size(skill, scenario)

    assert size.characters == len(build_prompt(skill, scenario))
    assert size.tokens == -(-size.characters // 4)
    assert [name for name, _ in size.parts] == [
        "big.md",
        "inputs/data/rows.csv",
        "SKILL.md",
        "task.md",
    ]
    assert dict(size.parts)["task.md"] == len("Summarise the data.\n")


def test_a_prompt_over_the_budget_is_named_with_its_largest_parts(tmp_path: Path) -> None:
    skill, scenario = _skill(tmp_path)
    size = prompt_size(skill, scenario)

    said = over_budget(size, 1000)

    assert said is not None
    assert said.startswith(f"the prompt is about {size.tokens:,} tokens ({size.characters:,} ")
    assert "over the context budget of 1,000 (context_budget)" in said
    assert said.endswith(
        "its largest parts: big.md (1,004), inputs/data/rows.csv (305), SKILL.md (158)"
    )
    assert over_budget(size, size.tokens) is None
    assert over_budget(size, 0) is None  # no budget


def test_lint_warns_of_a_prompt_over_the_budget_only(tmp_path: Path) -> None:
    _, scenario = _skill(tmp_path)

    [finding] = lint_scenario(scenario, context_budget=1000)["prompt-size"]

    assert (finding.rule, finding.severity, finding.file) == (
        "prompt-size",
        "warning",
        "evals/scenario-0/task.md",
    )
    assert lint_scenario(scenario)["prompt-size"] == []  # within the default budget


def test_a_scenario_whose_skill_cannot_be_read_still_has_a_size(tmp_path: Path) -> None:
    skill, scenario = _skill(tmp_path)
    (skill / "SKILL.md").unlink()

    size = prompt_size(skill, scenario)

    assert [name for name, _ in size.parts] == ["inputs/data/rows.csv", "task.md"]
