"""The lint rules on the real openkata corpus (read-only): its real findings, and no errors on
the scenarios that are sound, so that the rules do not cry wolf on real skills."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_openkata.core.lint import Finding, lint_scenario, lint_skill
from pytest_openkata.core.scenario import ScenarioLoadError, discover_scenarios, load_scenario
from pytest_openkata.core.versions import read_skill_version

# The scenarios whose scenario.json has "include": ["./inputs"], a key the run ignores.
INCLUDES = {
    "commit-conventions": ["scenario-2", "scenario-4"],
    "create-adr": [
        "scenario-0",
        "scenario-1",
        "scenario-10",
        "scenario-11",
        "scenario-12",
        "scenario-2",
        "scenario-5",
        "scenario-7",
        "scenario-8",
    ],
    "create-evals": [
        "scenario-complex-multi-step-skill",
        "scenario-minimal-skill-no-references",
        "scenario-simple-skill-happy-path",
    ],
    "create-profile": ["scenario-0", "scenario-1"],
    "create-rule": ["scenario-0", "scenario-1", "scenario-2", "scenario-3"],
    "grill-me": ["scenario-0", "scenario-1", "scenario-2", "scenario-3", "scenario-4"],
    "grill-with-docs": ["scenario-0", "scenario-1"],
    "spec-workflow": ["scenario-1"],
}


@pytest.fixture
def scenario_findings(corpus: Path) -> dict[str, list[Finding]]:
    """Every scenario's findings of every rule, by ``<skill>/<scenario>``."""
    found = {}
    for skill in sorted((corpus / "skills").iterdir()):
        for scenario in discover_scenarios(skill / "evals"):
            report = lint_scenario(scenario, shown_root=corpus)
            found[f"{skill.name}/{scenario.name}"] = [f for fs in report.values() for f in fs]
    return found


@pytest.fixture
def skill_findings(corpus: Path) -> dict[str, list[Finding]]:
    return {
        skill.name: [f for fs in lint_skill(skill).values() for f in fs]
        for skill in sorted((corpus / "skills").iterdir())
    }


def where(found: dict[str, list[Finding]], severity: str) -> set[tuple[str, str, str, int | None]]:
    return {
        (name, f.rule, f.file, f.line)
        for name, findings in found.items()
        for f in findings
        if f.severity == severity
    }


def test_every_scenario_is_linted(scenario_findings: dict[str, list[Finding]]) -> None:
    assert len(scenario_findings) == 52


def test_the_corpus_scenario_errors_are_exactly_its_real_problems(
    scenario_findings: dict[str, list[Finding]],
) -> None:
    # github-create-pr/scenario-0 holds only a scenario.json; two spec-workflow tasks say
    # "You are an AI developer agent using the spec-workflow skill". No weights fail: every
    # checklist of the corpus sums to 100. Every other scenario has no error.
    assert where(scenario_findings, "error") == {
        ("github-create-pr/scenario-0", "files", "evals/scenario-0/task.md", None),
        ("github-create-pr/scenario-0", "files", "evals/scenario-0/criteria.json", None),
        ("spec-workflow/scenario-3", "task-names-skill", "evals/scenario-3/task.md", 5),
        ("spec-workflow/scenario-4", "task-names-skill", "evals/scenario-4/task.md", 5),
    }


def test_the_spec_workflow_tasks_name_their_skill_in_prose(
    scenario_findings: dict[str, list[Finding]],
) -> None:
    for name in ("spec-workflow/scenario-3", "spec-workflow/scenario-4"):
        [finding] = [f for f in scenario_findings[name] if f.rule == "task-names-skill"]
        assert finding.severity == "error"
        assert finding.message.startswith("the task names the skill 'spec-workflow': describe")


def test_the_broken_scenario_is_the_one_the_loader_rejects(
    corpus: Path, scenario_findings: dict[str, list[Finding]]
) -> None:
    rejected = set()
    for skill in sorted((corpus / "skills").iterdir()):
        for scenario in discover_scenarios(skill / "evals"):
            try:
                load_scenario(scenario)
            except ScenarioLoadError:
                rejected.add(f"{skill.name}/{scenario.name}")
    broken = {name for name, _, _, _ in where(scenario_findings, "error")}
    named = {name for name, rule, _, _ in where(scenario_findings, "error") if rule == "files"}

    assert rejected == named == {"github-create-pr/scenario-0"}
    assert rejected < broken


def test_create_pr_names_its_skill_only_in_a_file_name_and_has_no_scenario_json(
    scenario_findings: dict[str, list[Finding]],
) -> None:
    found = scenario_findings["create-pr/scenario-0"]

    assert {(f.rule, f.severity, f.line) for f in found if f.rule != "referenced-inputs"} == {
        ("task-names-skill", "warning", 11),
        ("scenario-description", "warning", None),
    }


def test_the_include_key_is_the_only_unknown_key(
    scenario_findings: dict[str, list[Finding]],
) -> None:
    unknown = {
        name: [f.message for f in found if f.rule == "unknown-keys"]
        for name, found in scenario_findings.items()
    }
    expected = {f"{skill}/{name}" for skill, names in INCLUDES.items() for name in names}

    assert {name for name, keys in unknown.items() if keys} == expected
    for name in expected:
        assert len(unknown[name]) == 1
        assert unknown[name][0].startswith('unknown key "include" (the run ignores it;')


def test_no_corpus_criterion_is_vague(scenario_findings: dict[str, list[Finding]]) -> None:
    vague = [f for found in scenario_findings.values() for f in found if f.rule == "vague-criteria"]

    assert vague == []


def test_inputs_that_a_task_describes_but_no_folder_holds_are_warned(
    scenario_findings: dict[str, list[Finding]],
) -> None:
    # spec-workflow/scenario-3 runs without a workspace and says "The spec at
    # `specs/0002-notifications/` ... The `specs/_current` file points to this spec".
    missing = {
        f.message.split("`")[1]
        for f in scenario_findings["spec-workflow/scenario-3"]
        if f.rule == "referenced-inputs"
    }
    # spec-workflow/scenario-1 provides the spec it names under inputs/.
    provided = [
        f for f in scenario_findings["spec-workflow/scenario-1"] if f.rule != "unknown-keys"
    ]

    assert missing == {"specs/0002-notifications/", "specs/_current"}
    assert provided == []


def test_every_skill_has_a_version_from_a_manifest_and_no_changelog_error(
    corpus: Path, skill_findings: dict[str, list[Finding]]
) -> None:
    # Five write "## 1.1.0 — date" (no brackets) and create-evals has only "## [Unreleased]":
    # their CHANGELOGs give no version, but every skill's .tessl-plugin/plugin.json does.
    skills = corpus / "skills"

    assert [f for found in skill_findings.values() for f in found] == []
    assert read_skill_version(skills / "commit-conventions") == "0.2.1"  # plugin.json
    assert read_skill_version(skills / "create-evals") == "0.1.1"  # plugin.json, no tile.json
    assert read_skill_version(skills / "create-pr") == "0.1.0"  # its CHANGELOG's release


# Every `referenced-inputs` warning on the corpus, labelled by reading its task: True when the
# task speaks of the path as already there and the scenario does not provide it.
REFERENCED_INPUTS_LABELS = {
    # "The skill is located at `skills/<name>/SKILL.md` (provided in inputs)": inputs/ holds
    # it under another name.
    ("create-evals/scenario-complex-multi-step-skill", "skills/deploy-service/SKILL.md"): True,
    ("create-evals/scenario-minimal-skill-no-references", "skills/rename-files/SKILL.md"): True,
    ("create-evals/scenario-simple-skill-happy-path", "skills/greet-user/SKILL.md"): True,
    # "The project contains the following top-level directories: ..." and the agent is asked
    # to explore them.
    ("create-profile/scenario-3", ".github/"): True,
    ("create-profile/scenario-3", "infra/"): True,
    ("create-profile/scenario-3", "scripts/deploy/"): True,
    ("create-profile/scenario-3", "scripts/db/"): True,
    ("create-profile/scenario-3", "src/"): True,
    ("create-rule/scenario-2", "src/"): True,  # "There's a `src/` folder with ... files"
    ("grill-with-docs/scenario-1", "docs/context/"): True,  # "The `docs/context/` directory exists"
    # "The project already has several scripts in a `scripts/` directory", but a later line
    # says they "can be assumed to already exist": the author left them out on purpose.
    ("makefile-conventions/scenario-0", "scripts/"): False,
    ("spec-workflow/scenario-3", "specs/0002-notifications/"): True,
    ("spec-workflow/scenario-3", "specs/_current"): True,
}


def test_referenced_inputs_is_right_at_least_nine_times_in_ten(
    scenario_findings: dict[str, list[Finding]],
) -> None:
    warned = {
        (scenario, f.message.split("`")[1])
        for scenario, found in scenario_findings.items()
        for f in found
        if f.rule == "referenced-inputs"
    }

    assert warned == set(REFERENCED_INPUTS_LABELS)  # every warning it gives is labelled
    right = sum(REFERENCED_INPUTS_LABELS[key] for key in warned)
    assert right / len(warned) >= 0.9
