"""The trigger-queries lint rule: the files load as a run loads them, and a set of one kind
of query is named for what it cannot measure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_openkata.core.lint import SKILL_RULES, lint_skill


def _skill(root: Path, files: dict[str, str]) -> Path:
    skill = root / "s"
    (skill / "evals").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: s\ndescription: d\n---\n")
    for rel, text in files.items():
        (skill / rel).write_text(text)
    return skill


def _queries(*kinds: bool) -> str:
    return json.dumps([{"query": f"query {n}", "should_trigger": k} for n, k in enumerate(kinds)])


def test_the_rule_runs_with_the_skill_rules() -> None:
    assert SKILL_RULES[-1] == "trigger-queries"


def test_a_skill_without_trigger_queries_and_a_balanced_set_pass(tmp_path: Path) -> None:
    plain = _skill(tmp_path / "a", {})
    balanced = _skill(tmp_path / "b", {"evals/trigger_queries.json": _queries(True, False)})

    assert lint_skill(plain)["trigger-queries"] == []
    assert lint_skill(balanced)["trigger-queries"] == []


@pytest.mark.parametrize(
    ("kinds", "words"),
    [((True, True), "no precision"), ((False,), "no recall")],
    ids=["only should", "only should not"],
)
def test_a_set_of_one_kind_is_a_warning_saying_what_it_cannot_measure(
    tmp_path: Path, kinds: tuple[bool, ...], words: str
) -> None:
    skill = _skill(tmp_path, {"evals/trigger_queries.json": _queries(*kinds)})

    [finding] = lint_skill(skill)["trigger-queries"]

    assert (finding.severity, finding.file) == ("warning", "evals/trigger_queries.json")
    assert words in finding.message


def test_a_file_a_run_cannot_read_is_an_error_naming_it_and_the_entry(tmp_path: Path) -> None:
    queries = json.dumps([{"query": "a", "should_trigger": True}, {"query": "b"}])
    skill = _skill(tmp_path, {"evals/trigger_queries.json": queries})

    [finding] = lint_skill(skill)["trigger-queries"]

    assert (finding.severity, finding.file) == ("error", "evals/trigger_queries.json")
    assert finding.message == "entry 1: should_trigger: expected true or false"
    assert str(tmp_path) not in finding.message


def test_an_empty_set_is_the_runs_error(tmp_path: Path) -> None:
    skill = _skill(tmp_path, {"evals/trigger_queries.json": "[]"})

    [finding] = lint_skill(skill)["trigger-queries"]

    assert (finding.severity, finding.message) == ("error", "holds no query")


def test_wazas_file_is_read_with_its_own_keys(tmp_path: Path) -> None:
    waza = "skill: s\nshould_trigger_prompts:\n  - prompt: help me\nsurprise: 1\n"
    skill = _skill(tmp_path, {"evals/trigger_tests.yaml": waza})

    [finding] = lint_skill(skill)["trigger-queries"]

    assert (finding.severity, finding.file) == ("error", "evals/trigger_tests.yaml")
    assert "surprise" in finding.message
