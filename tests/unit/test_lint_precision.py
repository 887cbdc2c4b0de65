"""How often each lint rule is right, measured on repositories laid out as each published
format lays them out (tests/support/lint_layouts.py): every finding a rule gives there is
labelled true or false below, and each rule's precision (true findings over all of its
findings) must be at least 90 %. Each built-in rule speaks at least once, so that every
precision is defined; the figures are in docs/checking-scenarios.md. Also: every message
names what changes it (a setting, a file or a key: the rule's ``changed_by``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_openkata.core.formats import detect_formats
from pytest_openkata.core.formats.reading import unit_of
from pytest_openkata.core.lint import (
    BUILT_IN_RULES,
    FORMAT_RULE,
    Finding,
    built_in_rule,
    lint_format_scenario,
    lint_scenario,
    lint_skill,
)
from pytest_openkata.core.scenario import discover_scenarios
from pytest_openkata.core.tile import is_tile_dir
from tests.support.lint_layouts import LAYOUTS

_FORMAT_FILES = ("evals.json", "eval.yaml", "task.toml")


def lint_everything(root: Path) -> list[tuple[str, Finding]]:
    """Every finding lint gives under ``root``, each with its level ("skill", "scenario"), as
    ``--eval-lint`` collects them: each skill (a tile's skills through the tile, and a unit
    known by its evals and the skills below it as a tile), its scenario folders, and each
    scenario of a format's file."""
    found: list[tuple[str, Finding]] = []
    for current, folders, files in os.walk(root):
        here = Path(current)
        folders[:] = sorted(f for f in folders if not f.startswith(".") and f != "inputs")
        if ("SKILL.md" in files or is_tile_dir(here)) and not any(
            is_tile_dir(parent) for parent in here.parents
        ):
            found += [("skill", f) for fs in lint_skill(here).values() for f in fs]
            for scenario in discover_scenarios(here / "evals"):
                report = lint_scenario(scenario, shown_root=root)
                found += [("scenario", f) for fs in report.values() for f in fs]
        for name in sorted(set(files) & set(_FORMAT_FILES)):
            path = here / name
            for fmt in detect_formats(here):
                if name not in fmt.files:
                    continue
                for source in fmt.scenarios(here):
                    if path in (source.path, source.listed_in):
                        report = lint_format_scenario(fmt, source, unit_of(path))
                        found += [("scenario", f) for fs in report.values() for f in fs]
    return found


# Every finding on the layouts: (layout, rule, file, a part of its message) -> whether it is
# right, by reading the files it is about.
LABELS: dict[tuple[str, str, str, str], bool] = {
    # openkata: changelog-writer has only "## [Unreleased]".
    ("openkata", "changelog", "CHANGELOG.md", "no released version heading"): True,
    ("openkata", "unreached-files", "SKILL.md", "links to STYLE.md"): True,
    # An eval's task linked from SKILL.md: the fix is to remove the link, never to move it.
    ("openkata", "unreached-files", "SKILL.md", "links to evals/scenario-0/task.md"): True,
    ("openkata", "trigger-queries", "evals/trigger_queries.json", "every query should"): True,
    ("openkata", "unknown-keys", "evals/scenario-0/scenario.json", '"sandbx"'): True,
    ("openkata", "weights", "evals/scenario-0/criteria.json", "sum=90"): True,
    ("openkata", "task-names-skill", "evals/scenario-0/task.md", "'changelog-writer'"): True,
    ("openkata", "mechanical-criteria", "evals/scenario-0/criteria.json", "'export'"): True,
    ("openkata", "task-states-answer", "evals/scenario-0/task.md", "'## [2.0.0]"): True,
    ("openkata", "criteria-json", "evals/scenario-1/criteria.json", "max_score"): True,
    ("openkata", "scenario-json", "evals/scenario-1/scenario.json", "trials"): True,
    ("openkata", "checks-json", "evals/scenario-1/checks.json", '"comand"'): True,
    ("openkata", "unknown-keys", "evals/scenario-1/criteria.json", '"contxt"'): True,
    ("openkata", "empty-descriptions", "evals/scenario-1/criteria.json", "('a')"): True,
    ("openkata", "placeholders", "evals/scenario-1/task.md", "TODO: the request"): True,
    ("openkata", "weights", "evals/scenario-1/criteria.json", "sum=50"): True,
    ("openkata", "files", "evals/scenario-2/task.md", "file not found"): True,
    ("openkata", "scenario-description", "evals/scenario-2/scenario.json", "no scenario"): True,
    # firewall-rules: scenario-1's terraform files are read but never given; notes.txt is an
    # author's note that never reaches the agent (expected_answer.md is rightly left alone).
    ("openkata", "referenced-inputs", "evals/scenario-1/task.md", "`rules/egress.tf`"): True,
    ("openkata", "vague-criteria", "evals/scenario-1/criteria.json", "'The answer is good'"): True,
    ("openkata", "unreached-files", "evals/scenario-1/notes.txt", "notes.txt"): True,
    ("openkata", "scenarios", "evals", "leaves out smoke"): True,
    ("openkata", "skill-md", "SKILL.md", "'mis-named'"): True,
    ("openkata", "placeholders", "SKILL.md", "TODO: say in one"): True,
    ("openkata", "prompt-size", "evals/scenario-prose/task.md", "context budget"): True,
    # skill-creator: evals[1] reads a file no `files` entry gives; its first expectation is
    # vague; evals[2] uses an assertion type the format reader refuses; evals[3] names it.
    ("skill-creator", "referenced-inputs", "evals/evals.json", "`data/scores.json`"): True,
    ("skill-creator", "vague-criteria", "evals/evals.json", "good and clean"): True,
    ("skill-creator", FORMAT_RULE, "evals/evals.json", "'icontains'"): True,
    ("skill-creator", "task-names-skill", "evals/evals.json", "'pdf-forms'"): True,
    ("waza", "vague-criteria", "evals/tasks/lock.yaml", "'Clear and appropriate'"): True,
    ("waza", "referenced-inputs", "evals/tasks/rollback.yaml", "`migrations/003_drop.sql`"): True,
    # A key of the authors' own in each, which the run passes over as the format's tools do.
    ("skill-creator", "unknown-keys", "evals/evals.json", "evals[0]: `name`"): True,
    ("skillgrade", "unknown-keys", "eval.yaml", "tasks[1]: `notes`"): True,
    ("skillgrade", "referenced-inputs", "eval.yaml", "`app/package.json`"): True,
    ("skillgrade", "vague-criteria", "eval.yaml", "'Nice work'"): True,
    ("harbor", FORMAT_RULE, "task.toml", "verifier.retries"): True,
    # tessl-plugin: the shapes that were false on public repositories are silent (files held
    # inline or made by the task's shell lines, a file to keep up, one said not to be there,
    # names in addresses, a plain-word skill name, the given code's old names and parts, no
    # scenario.json, a version in plugin.json); what is left is right: queue.rb is said to be
    # there and is neither inline nor made; "the charts skill" names the skill; the export's
    # column is the criterion's answer; rules/inputs.md never reaches the prompt, and the
    # plugin has no tile.json to name it in.
    (
        "tessl-plugin",
        "referenced-inputs",
        "evals/tessl/log-shipper-scenario-1/task.md",
        "`queue.rb`",
    ): True,
    ("tessl-plugin", "task-names-skill", "evals/tessl/charts-scenario-1/task.md", "'charts'"): True,
    (
        "tessl-plugin",
        "task-states-answer",
        "evals/tessl/charts-scenario-1/task.md",
        "'total_errors_per_day'",
    ): True,
    (
        "tessl-plugin",
        "unreached-files",
        "skills/log-shipper/SKILL.md",
        "move it under the skill's references/ (and",
    ): True,
}


@pytest.fixture(scope="module")
def layout_findings(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str, Finding]]:
    found = []
    for name, build in LAYOUTS.items():
        root = tmp_path_factory.mktemp(name)
        build(root)
        found += [(name, level, finding) for level, finding in lint_everything(root)]
    return found


def _label_of(layout: str, finding: Finding) -> tuple[str, str, str, str]:
    [key] = [
        key
        for key in LABELS
        if key[:3] == (layout, finding.rule, finding.file) and key[3] in finding.message
    ] or [(layout, finding.rule, finding.file, f"UNLABELLED: {finding.message}")]
    return key


def precision_by_rule(found: list[tuple[str, str, Finding]]) -> dict[str, tuple[int, int]]:
    """Each rule's true findings and all of its findings."""
    counts: dict[str, tuple[int, int]] = {}
    for layout, _level, finding in found:
        right, total = counts.get(finding.rule, (0, 0))
        counts[finding.rule] = (right + LABELS[_label_of(layout, finding)], total + 1)
    return counts


def test_every_finding_on_the_layouts_is_labelled(
    layout_findings: list[tuple[str, str, Finding]],
) -> None:
    given = [_label_of(layout, finding) for layout, _level, finding in layout_findings]

    assert sorted(given) == sorted(LABELS)
    assert len(given) == len(set(given))  # one finding a label


def test_every_rule_speaks_and_is_right_at_least_nine_times_in_ten(
    layout_findings: list[tuple[str, str, Finding]],
) -> None:
    counts = precision_by_rule(layout_findings)

    assert set(counts) == {rule.name for rule in BUILT_IN_RULES} | {FORMAT_RULE}
    assert {
        rule: right / total for rule, (right, total) in counts.items() if right / total < 0.9
    } == {}


def test_every_message_names_what_changes_it(
    layout_findings: list[tuple[str, str, Finding]],
) -> None:
    unnamed = []
    for _layout, level, finding in layout_findings:
        if finding.rule == FORMAT_RULE:
            continue  # the reader's error: it names the file and the key
        knobs = built_in_rule(finding.rule, level).changed_by  # type: ignore[arg-type]
        if not any(k in finding.message or finding.file.endswith(k) for k in knobs):
            unnamed.append((finding.rule, finding.message))

    assert unnamed == []


def test_no_rule_advises_moving_an_eval_file_to_where_the_agent_reads(
    layout_findings: list[tuple[str, str, Finding]],
) -> None:
    advice = [
        f.message
        for _layout, _level, f in layout_findings
        if "evals/" in f.message.partition(":")[2] and "move it under" in f.message
    ]

    assert advice == []


@pytest.mark.parametrize("layout", ["tessl-tile", "skill-creator", "waza", "skillgrade", "harbor"])
def test_a_format_that_takes_any_weights_gets_no_weights_rule(
    layout_findings: list[tuple[str, str, Finding]], layout: str
) -> None:
    assert [
        f for name, _level, f in layout_findings if name == layout and f.rule == "weights"
    ] == []
    assert not built_in_rule("weights", "scenario").applies_to(layout)


def test_the_docs_give_the_measured_figures(
    layout_findings: list[tuple[str, str, Finding]],
) -> None:
    docs = Path(__file__).parents[2] / "docs" / "checking-scenarios.md"
    table = docs.read_text(encoding="utf-8").partition("### Lint and the formats")[2]
    shown = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 6 and cells[0].startswith("`") and cells[5].endswith("%"):
            shown[cells[0].strip("`")] = (int(cells[4]), int(cells[5].rstrip(" %")))
    counts = precision_by_rule(layout_findings)

    assert shown == {
        rule: (total, round(100 * right / total)) for rule, (right, total) in counts.items()
    }
