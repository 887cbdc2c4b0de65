"""Trigger evals' pure parts: reading both query formats (and naming the file and entry of a
broken one), the pass rule, precision/recall/F1 with Wilson intervals, and which files the
installed delivery puts where (a skill, a tile's skills)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_openkata.contracts.errors import ConfigError
from pytest_openkata.core.jsonfiles import ScenarioLoadError
from pytest_openkata.core.skill_delivery import installed_skill_files
from pytest_openkata.core.stats import wilson_interval_95
from pytest_openkata.core.triggers import (
    PassRule,
    QueryOutcome,
    load_trigger_queries,
    metrics_line,
    trigger_metrics,
)
from tests.support.tiles import write_tile


def _skill(tmp_path: Path, **files: str) -> Path:
    skill = tmp_path / "zoo"
    (skill / "evals").mkdir(parents=True)
    (skill / "SKILL.md").write_text("# Zoo\n")
    for name, text in files.items():
        (skill / "evals" / name).write_text(text)
    return skill


def test_both_formats_are_read_in_order_and_named_by_place(tmp_path: Path) -> None:
    skill = _skill(
        tmp_path,
        **{
            "trigger_queries.json": json.dumps(
                [{"query": "a", "should_trigger": True}, {"query": "b", "should_trigger": False}]
            ),
            "trigger_tests.yaml": "skill: zoo\nshould_not_trigger_prompts:\n  - prompt: c\n",
        },
    )

    queries = load_trigger_queries(skill)

    assert [(q.name, q.query, q.should_trigger, q.source) for q in queries] == [
        ("trigger-01", "a", True, "evals/trigger_queries.json"),
        ("trigger-02", "b", False, "evals/trigger_queries.json"),
        ("trigger-03", "c", False, "evals/trigger_tests.yaml"),
    ]


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        ("trigger_queries.json", "{}", "trigger_queries.json: expected a JSON list"),
        ("trigger_queries.json", "[1", "trigger_queries.json: not valid JSON"),
        (
            "trigger_queries.json",
            '[{"query": "a", "should_trigger": true}, {"query": "b", "should_trigger": "yes"}]',
            "trigger_queries.json: entry 1: should_trigger: expected true or false",
        ),
        (
            "trigger_queries.json",
            '[{"should_trigger": true}]',
            "trigger_queries.json: entry 0: query: expected a non-empty string",
        ),
        ("trigger_queries.json", "[]", "trigger_queries.json: holds no query"),
        (
            "trigger_tests.yaml",
            "skill: zoo\nshould_trigger: [a]\n",
            "trigger_tests.yaml: should_trigger: unknown key",
        ),
        (
            "trigger_tests.yaml",
            "should_trigger_prompts:\n  - prompt: a\n",
            "trigger_tests.yaml: skill: required",
        ),
        (
            "trigger_tests.yaml",
            "skill: zoo\nshould_trigger_prompts:\n  - prompt: a\n    confidence: low\n",
            "trigger_tests.yaml: should_trigger_prompts[0].confidence: expected high or medium",
        ),
    ],
)
def test_a_broken_query_file_names_the_file_and_the_entry(
    tmp_path: Path, name: str, text: str, said: str
) -> None:
    skill = _skill(tmp_path, **{name: text})

    with pytest.raises(ScenarioLoadError) as raised:
        load_trigger_queries(skill)

    assert said in str(raised.value)
    assert str(tmp_path) not in str(raised.value)


def test_the_pass_rule_counts_loads_both_ways_and_refuses_an_impossible_one() -> None:
    rule = PassRule(runs=3, needed=2, allowed=1)

    assert [rule.passes(True, loads) for loads in range(4)] == [False, False, True, True]
    assert [rule.passes(False, loads) for loads in range(4)] == [True, True, False, False]
    with pytest.raises(ConfigError, match="trigger_loads_needed 4 is more than"):
        PassRule(runs=3, needed=4)


def _outcome(should: bool, *states: str) -> QueryOutcome:
    return QueryOutcome("skills/zoo", "q", "text", should, states, True)  # type: ignore[arg-type]


def test_metrics_count_runs_and_give_wilson_intervals() -> None:
    outcomes = [
        _outcome(True, "loaded", "loaded", "loaded"),
        _outcome(True, "loaded", "not loaded", "not loaded"),
        _outcome(False, "loaded", "not loaded", "not loaded"),
        _outcome(False, "not loaded", "not loaded", "not loaded"),
    ]

    metrics = trigger_metrics("skills/zoo", outcomes)

    assert (metrics.true_positives, metrics.false_negatives) == (4, 2)
    assert (metrics.false_positives, metrics.true_negatives) == (1, 5)
    assert metrics.precision == pytest.approx(0.8)
    assert metrics.recall == pytest.approx(4 / 6)
    assert metrics.f1 == pytest.approx(2 * 0.8 * (4 / 6) / (0.8 + 4 / 6))
    assert metrics.precision_ci95 == wilson_interval_95(4, 5)
    assert metrics.recall_ci95 == wilson_interval_95(4, 6)
    low, high = metrics.f1_ci or (0, 0)
    assert low < metrics.f1 < high


def test_no_load_at_all_has_no_precision_and_says_so() -> None:
    metrics = trigger_metrics("skills/zoo", [_outcome(True, "not loaded", "not loaded")])

    assert metrics.precision is None
    assert metrics.recall == 0.0
    assert metrics.f1 is None
    assert "precision n/a, recall 0.00 [0.00, 0.66]" in metrics_line(metrics)


def test_wilson_matches_known_values() -> None:
    # Reference values of the Wilson score interval at z = 1.959964.
    assert wilson_interval_95(0, 10) == pytest.approx((0.0, 0.27753), abs=1e-5)
    assert wilson_interval_95(5, 10) == pytest.approx((0.23659, 0.76341), abs=1e-5)
    assert wilson_interval_95(10, 10) == pytest.approx((0.72247, 1.0), abs=1e-5)
    assert wilson_interval_95(0, 0) is None


def test_installed_files_of_a_skill_and_of_a_tile(tmp_path: Path) -> None:
    skill = _skill(tmp_path)
    (skill / "references").mkdir()
    (skill / "references" / "a.md").write_text("A\n")
    (skill / "evals" / "task.md").write_text("never installed\n")

    assert installed_skill_files(".agents/skills", skill) == [
        (".agents/skills/zoo/SKILL.md", b"# Zoo\n"),
        (".agents/skills/zoo/references/a.md", b"A\n"),
    ]
    tile = write_tile(tmp_path, {})
    names = [name for name, _ in installed_skill_files(".claude/skills", tile)]
    assert names == [
        ".claude/skills/tracing/SKILL.md",
        ".claude/skills/tracing/references/spans.md",
        ".claude/skills/tracing/scripts/lint.sh",
        ".claude/skills/metrics/SKILL.md",
        ".claude/skills/metrics/assets/units.txt",
    ]


def test_a_lone_surrogate_escape_in_a_query_reads_as_the_replacement_character(
    tmp_path: Path,
) -> None:
    # The query goes to an agent and into every report, neither of which can carry one.
    skill = _skill(
        tmp_path,
        **{
            "trigger_queries.json": '[{"query": "json \\ud800", "should_trigger": true}]',
            "trigger_tests.yaml": (
                'skill: zoo\nshould_trigger_prompts:\n  - prompt: "yaml \\ud800"\n'
            ),
        },
    )

    assert [query.query for query in load_trigger_queries(skill)] == [
        "json \ufffd",
        "yaml \ufffd",
    ]
