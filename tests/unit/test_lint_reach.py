"""The lint rules on what reaches the agent (pytest_openkata.core.lint): files SKILL.md links
to and files beside task.md that the prompt never holds, criteria that a check would grade
exactly, and tasks that state what a criterion expects. Each rule has failing and passing
examples, built in tmp_path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_openkata.core.checks import Check
from pytest_openkata.core.lint import (
    SCENARIO_RULES,
    SKILL_RULES,
    Finding,
    lint_scenario,
    lint_skill,
    unreached_scenario_files,
    unreached_skill_files,
)
from pytest_openkata.core.scenario import load_checks
from tests.support.tiles import write_tile

SKILL_MD = "---\nname: notes-writer\ndescription: Writes release notes.\n---\n# Notes writer\n"
CHANGELOG = "# Changelog\n\n## [1.0.0] - 2026-01-01\n\n- First release\n"
TASK = "# Release notes\n\nTurn the raw notes below into release notes.\n"
OPTIONS = '{"description": "Release notes from raw notes", "sandbox": false}\n'
SANDBOXED = '{"description": "Release notes from raw notes", "sandbox": true}\n'
PROMPT_FIX = "move it under references/ (and update the link)"


def criteria_with(*items: str) -> str:
    """A criteria.json whose checklist items are the given JSON texts, one a line from line 3."""
    return '{\n  "checklist": [\n' + ",\n".join(f"    {i}" for i in items) + "\n  ]\n}\n"


CRITERIA = criteria_with(
    '{"name": "title", "description": "A heading names the release", "max_score": 60}',
    '{"name": "fixes", "description": "A section lists both fixed bugs", "max_score": 40}',
)


def make_skill(root: Path, files: dict[str, str] | None = None) -> Path:
    """A skill ``notes-writer`` with one clean direct scenario, ``evals/scenario-0``;
    ``files`` (paths relative to the skill) are added or replace its files."""
    skill = root / "notes-writer"
    contents = {
        "SKILL.md": SKILL_MD,
        "CHANGELOG.md": CHANGELOG,
        "evals/scenario-0/task.md": TASK,
        "evals/scenario-0/criteria.json": CRITERIA,
        "evals/scenario-0/scenario.json": OPTIONS,
        **(files or {}),
    }
    for rel, text in contents.items():
        path = skill / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return skill


def scenario_with(tmp_path: Path, **files: str) -> Path:
    """The scenario folder of the skill, its files (``task_md=...``) replaced or added."""
    replaced = {f"evals/scenario-0/{name.replace('_', '.')}": text for name, text in files.items()}
    return make_skill(tmp_path, replaced) / "evals" / "scenario-0"


def scenario_rule(scenario: Path, rule: str) -> list[Finding]:
    return lint_scenario(scenario, shown_root=scenario.parents[2])[rule]


def suggested(finding: Finding) -> dict[str, object]:
    """The checks.json entry a mechanical-criteria warning ends with."""
    entry = json.loads(finding.message[finding.message.index(": {") + 2 :])
    assert isinstance(entry, dict)
    return entry


def loaded(tmp_path: Path, entry: dict[str, object], *, sandboxed: bool) -> Check:
    """The one check of a checks.json holding ``entry``, as the run loads it."""
    path = tmp_path / "checks.json"
    path.write_text(json.dumps([entry]), encoding="utf-8")
    [check] = load_checks(path, sandboxed=sandboxed)
    return check


def test_the_rules_are_registered_after_the_existing_ones() -> None:
    assert SCENARIO_RULES[-4:] == (
        "unreached-files",
        "mechanical-criteria",
        "task-states-answer",
        "prompt-size",
    )
    assert SKILL_RULES[-2:] == ("unreached-files", "trigger-queries")


def test_a_clean_skill_has_none_of_these_findings(tmp_path: Path) -> None:
    skill = make_skill(tmp_path)
    scenario = skill / "evals" / "scenario-0"

    assert lint_skill(skill)["unreached-files"] == []
    for rule in ("unreached-files", "mechanical-criteria", "task-states-answer"):
        assert scenario_rule(scenario, rule) == []


# --- unreached-files (skill) ---------------------------------------------------------------

LINKING_SKILL_MD = (
    SKILL_MD
    + "\n"  # line 6
    + "Name things as [the naming rules](rules/naming.md#casing) say.\n"  # 7
    + "See the [examples][ex] and the [checklists](checklists/ 'all of them').\n"  # 8
    + "Again: [naming](./rules/naming.md?plain=1).\n"  # 9: seen on line 7
    + "\n"
    + "[ex]: <EXAMPLES.md>\n"  # 11
)


def test_linked_files_outside_the_prompt_s_folders_are_warned(tmp_path: Path) -> None:
    skill = make_skill(
        tmp_path,
        {
            "SKILL.md": LINKING_SKILL_MD,
            "rules/naming.md": "# Naming\n",
            "EXAMPLES.md": "# Examples\n",
            "checklists/review.md": "- [ ] review\n",
        },
    )

    found = lint_skill(skill)["unreached-files"]

    assert found == [
        Finding(
            "unreached-files",
            "warning",
            "SKILL.md",
            7,
            "SKILL.md links to rules/naming.md, which never reaches the agent's prompt: "
            + PROMPT_FIX,
        ),
        Finding(
            "unreached-files",
            "warning",
            "SKILL.md",
            8,
            "SKILL.md links to checklists/, which never reaches the agent's prompt: " + PROMPT_FIX,
        ),
        Finding(
            "unreached-files",
            "warning",
            "SKILL.md",
            11,
            "SKILL.md links to EXAMPLES.md, which never reaches the agent's prompt: " + PROMPT_FIX,
        ),
    ]
    assert unreached_skill_files(skill) == found


def test_a_link_to_an_evals_file_is_never_told_to_move_into_the_prompt(tmp_path: Path) -> None:
    text = SKILL_MD + "See the [example task](evals/scenario-0/task.md).\n"
    skill = make_skill(tmp_path, {"SKILL.md": text})

    [finding] = unreached_skill_files(skill)

    assert finding.message == (
        "SKILL.md links to evals/scenario-0/task.md, which never reaches the agent's prompt: "
        "it is an eval's file, which the agent must not see: remove the link"
    )
    assert "references/" not in finding.message


def test_a_linked_file_the_prompt_leaves_out_of_references_is_warned(tmp_path: Path) -> None:
    text = SKILL_MD + "Thanks: [acknowledgements](references/ACKNOWLEDGMENTS.md).\n"
    skill = make_skill(
        tmp_path, {"SKILL.md": text, "references/ACKNOWLEDGMENTS.md": "Thanks to all.\n"}
    )

    [finding] = unreached_skill_files(skill)

    assert (finding.rule, finding.severity, finding.file, finding.line) == (
        "unreached-files",
        "warning",
        "SKILL.md",
        6,
    )
    assert finding.message == (
        "SKILL.md links to references/ACKNOWLEDGMENTS.md, which never reaches the agent's "
        "prompt: the prompt leaves it out: rename it (and update the link)"
    )


def test_links_the_prompt_holds_or_that_are_no_skill_file_pass(tmp_path: Path) -> None:
    text = SKILL_MD + (
        "Read [the format](references/format.md), run [the script](scripts/check.sh), use\n"
        "![the logo](assets/logo.png) and the [assets](assets/) folder. See [this](SKILL.md),\n"
        "[the site](https://example.com/rules/naming.md), [mail](mailto:team@example.com),\n"
        "[below](#rules), [the repo](../README.md), [gone](rules/missing.md) and\n"
        "`[in code](rules/naming.md)`.\n"
        "\n"
        "```markdown\n"
        "[in a fence](rules/naming.md)\n"
        "```\n"
        "\n"
        "[^1]: evals hold the scenarios, a footnote and no link.\n"
    )
    skill = make_skill(
        tmp_path,
        {
            "SKILL.md": text,
            "references/format.md": "# Format\n",
            "scripts/check.sh": "#!/bin/sh\n",
            "assets/logo.png": "png\n",
            "rules/naming.md": "# Naming\n",
        },
    )
    (tmp_path / "README.md").write_text("outside the skill\n", encoding="utf-8")

    assert lint_skill(skill)["unreached-files"] == []
    assert unreached_skill_files(skill) == []


def test_a_skill_without_skill_md_has_no_unreached_files(tmp_path: Path) -> None:
    skill = make_skill(tmp_path)
    (skill / "SKILL.md").unlink()

    assert unreached_skill_files(skill) == []


# --- unreached-files (scenario) ------------------------------------------------------------


def test_files_beside_task_md_are_warned(tmp_path: Path) -> None:
    scenario = scenario_with(tmp_path, notes_md="# Notes for maintainers\n")
    (scenario / "data").mkdir()
    (scenario / "data" / "raw.txt").write_text("fixed: crash\n", encoding="utf-8")

    found = scenario_rule(scenario, "unreached-files")

    assert found == [
        Finding(
            "unreached-files",
            "warning",
            "evals/scenario-0/data",
            None,
            "evals/scenario-0/data/ never reaches the agent (it is given task.md and the files "
            "under inputs/): move it under inputs/ if the agent needs it",
        ),
        Finding(
            "unreached-files",
            "warning",
            "evals/scenario-0/notes.md",
            None,
            "evals/scenario-0/notes.md never reaches the agent (it is given task.md and the "
            "files under inputs/): move it under inputs/ if the agent needs it",
        ),
    ]
    assert unreached_scenario_files(scenario) == found


def test_a_scenario_s_own_files_dotfiles_and_python_traps_pass(tmp_path: Path) -> None:
    scenario = scenario_with(
        tmp_path,
        checks_json="[]\n",
        capability_txt="writing\n",
        conftest_py="",
    )
    for folder in ("inputs", "solution", "results", ".cache", "__pycache__", "test_x"):
        (scenario / folder).mkdir()
    (scenario / "test_x" / "conftest.py").write_text("", encoding="utf-8")
    (scenario / ".editorconfig").write_text("root = true\n", encoding="utf-8")

    assert scenario_rule(scenario, "unreached-files") == []
    assert unreached_scenario_files(scenario) == []
    # The traps are the files rule's errors, once.
    assert {f.file for f in scenario_rule(scenario, "files")} == {
        "evals/scenario-0/conftest.py",
        "evals/scenario-0/test_x/conftest.py",
    }


# --- mechanical-criteria -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("description", "pattern", "text", "other"),
    [
        ('The output contains "Fixes:"', "Fixes:", "## Fixes:", "## fixes:"),
        ("Contains 'v2.1.0' (case-sensitive).", r"v2\.1\.0", "v2.1.0", "v2x1x0"),
        (
            "The answer contains `BREAKING CHANGE` (case-insensitive)",
            r"(?i)BREAKING\ CHANGE",
            "a breaking change",
            "breaking-change",
        ),
        (
            "The subject line matches the pattern: ^fix\\(\\w+\\): .+",
            r"^fix\(\w+\): .+",
            "fix(parser): empty input",
            "feat(parser): x",
        ),
        ("The reply matches the regex `^OK$`.", "^OK$", "done\nOK\n", "OK then"),
        ("Matches /^v\\d+$/i", r"(?i)^v\d+$", "V12", "v1.2"),
    ],
)
def test_a_criterion_a_regex_decides_is_warned_with_the_check_to_use(
    tmp_path: Path, description: str, pattern: str, text: str, other: str
) -> None:
    item = {"name": "marker", "description": description, "max_score": 40}
    criteria = criteria_with(
        '{"name": "title", "description": "A heading names the release", "max_score": 60}',
        json.dumps(item),
    )
    scenario = scenario_with(tmp_path, criteria_json=criteria)

    [finding] = scenario_rule(scenario, "mechanical-criteria")

    entry = {"name": "marker", "type": "output_regex", "pattern": pattern, "max_score": 40}
    assert (finding.rule, finding.severity, finding.file, finding.line) == (
        "mechanical-criteria",
        "warning",
        "evals/scenario-0/criteria.json",
        4,
    )
    assert finding.message == (
        "checklist[1] ('marker'): mechanical criterion: a check grades it exactly; replace it "
        "with this checks.json entry, and give its points to the other criteria (criteria.json's "
        "scores still sum to 100, as the reference's weights script checks; the check's come on "
        "top): " + json.dumps(entry)
    )
    check = loaded(tmp_path, suggested(finding), sandboxed=False)
    assert check.pattern is not None
    assert (check.name, check.type, check.max_score) == ("marker", "output_regex", 40)
    assert check.pattern.search(text) is not None
    assert check.pattern.search(other) is None


def test_a_sandboxed_criterion_naming_a_file_gets_a_file_regex_check(tmp_path: Path) -> None:
    scenario = scenario_with(
        tmp_path,
        scenario_json=SANDBOXED,
        criteria_json=criteria_with(
            '{"name": "entry", "description": "The file `docs/CHANGELOG.md` contains '
            '\\"## [2.0.0]\\"", "max_score": 100}'
        ),
    )

    [finding] = scenario_rule(scenario, "mechanical-criteria")
    entry = suggested(finding)

    assert finding.line == 3
    assert entry == {
        "name": "entry",
        "type": "file_regex",
        "path": "docs/CHANGELOG.md",
        "pattern": r"\#\#\ \[2\.0\.0\]",
        "max_score": 100,
    }
    check = loaded(tmp_path, entry, sandboxed=True)
    assert check.type == "file_regex"
    assert check.pattern is not None
    assert check.pattern.search("# Changelog\n\n## [2.0.0] - 2026-01-01\n") is not None


def test_a_direct_criterion_naming_a_file_gets_an_output_check(tmp_path: Path) -> None:
    scenario = scenario_with(
        tmp_path,
        criteria_json=criteria_with(
            '{"name": "entry", "description": "CHANGELOG.md contains \\"2.0.0\\"", '
            '"max_score": 100}'
        ),
    )

    [finding] = scenario_rule(scenario, "mechanical-criteria")
    entry = suggested(finding)

    assert entry == {
        "name": "entry",
        "type": "output_regex",
        "pattern": r"2\.0\.0",
        "max_score": 100,
    }
    assert loaded(tmp_path, entry, sandboxed=False).type == "output_regex"


def test_a_mechanical_criterion_name_counts_too(tmp_path: Path) -> None:
    item = {"name": 'contains "Fixes"', "description": "A section lists fixes", "max_score": 100}
    scenario = scenario_with(tmp_path, criteria_json=criteria_with(json.dumps(item)))

    [finding] = scenario_rule(scenario, "mechanical-criteria")

    assert finding.message.endswith(
        json.dumps(
            {
                "name": 'contains "Fixes"',
                "type": "output_regex",
                "pattern": "Fixes",
                "max_score": 100,
            }
        )
    )


@pytest.mark.parametrize(
    "description",
    [
        "A Fixes section lists both fixed bugs",
        'The output never contains "TODO"',
        'The output does not contain "TODO"',
        'Explains why the change is safe and, when it is not, contains "risk" in its summary',
        "The subject line matches the pattern of the skill's examples, as `fix(scope): x`",
        "The version matches the regex [unclosed",
        'The output contains "Fixes" and "Features"',
        "The reply matches the regex `^OK$` or `^Done$`",
        "The reply matches /^OK$/ or /^Done$/",
        "Root Makefile contains `.DEFAULT_GOAL := help` so bare `make` shows help",
    ],
)
def test_criteria_a_judge_must_read_pass(tmp_path: Path, description: str) -> None:
    item = {"name": "marker", "description": description, "max_score": 100}
    scenario = scenario_with(tmp_path, criteria_json=criteria_with(json.dumps(item)))

    assert scenario_rule(scenario, "mechanical-criteria") == []


def test_a_criterion_without_a_usable_score_gets_no_suggestion(tmp_path: Path) -> None:
    item = {"name": "marker", "description": 'Output contains "Fixes"', "max_score": 0}
    scenario = scenario_with(tmp_path, criteria_json=criteria_with(json.dumps(item)))

    assert scenario_rule(scenario, "mechanical-criteria") == []


# --- task-states-answer --------------------------------------------------------------------


def test_a_task_stating_a_mechanical_criterion_s_value_is_warned(tmp_path: Path) -> None:
    task = (
        "# Commit message\n"  # 1
        "\n"
        "Write a commit message for the diff below.\n"  # 3
        "Its subject must be\n"  # 4
        "FIX(Parser):   handle empty input.\n"  # 5: the value, case and spaces aside
    )
    criteria = criteria_with(
        '{"name": "subject", "description": "The output contains '
        '\\"fix(parser): handle empty input\\"", "max_score": 100}'
    )
    scenario = scenario_with(tmp_path, task_md=task, criteria_json=criteria)

    assert scenario_rule(scenario, "task-states-answer") == [
        Finding(
            "task-states-answer",
            "warning",
            "evals/scenario-0/task.md",
            5,
            "the task gives away what criterion 'subject' checks: it states "
            "'fix(parser): handle empty input'; leave it out of task.md so that the agent has "
            "to find it (or let the criterion check something the agent must work out)",
        )
    ]


def test_a_task_stating_a_quoted_value_across_lines_is_warned(tmp_path: Path) -> None:
    task = (
        "# Makefile\n"  # 1
        "\n"
        "Write a Makefile for the project. Set `.DEFAULT_GOAL\n"  # 3
        ":= help` so that it prints its targets.\n"
    )
    criteria = criteria_with(
        '{"name": "goal", "description": "The Makefile sets `.DEFAULT_GOAL := help` so '
        'bare `make` shows the help", "max_score": 100}'
    )
    scenario = scenario_with(tmp_path, task_md=task, criteria_json=criteria)

    [finding] = scenario_rule(scenario, "task-states-answer")

    assert (finding.rule, finding.severity, finding.file, finding.line) == (
        "task-states-answer",
        "warning",
        "evals/scenario-0/task.md",
        3,
    )
    assert finding.message.startswith(
        "the task gives away what criterion 'goal' checks: it states '.DEFAULT_GOAL := help';"
    )


def test_values_a_task_may_share_with_its_criteria_pass(tmp_path: Path) -> None:
    task = (
        "# Release notes for main\n"  # a heading: the task's title
        "\n"
        "Update `docs/CHANGELOG.md` on the main branch and build the release notes.\n"
        "Do not push to main.\n"
    )
    criteria = criteria_with(
        '{"name": "branch", "description": "Stays on `main` and runs `build`", "max_score": 30}',
        '{"name": "file", "description": "Edits `docs/CHANGELOG.md` only", "max_score": 30}',
        '{"name": "title", "description": "A `# Release notes` heading", "max_score": 20}',
        '{"name": "short", "description": "Says \\"push\\" once", "max_score": 10}',
        '{"name": "new", "description": "Adds \\"## [2.0.0] - 2026-01-01\\"", "max_score": 10}',
    )
    scenario = scenario_with(tmp_path, task_md=task, criteria_json=criteria)

    assert scenario_rule(scenario, "task-states-answer") == []


def test_a_command_the_task_tells_the_agent_to_run_is_no_answer(tmp_path: Path) -> None:
    task = (
        "# Help\n\nAdd a help system. Capture `make test` to test-help.txt, and run\n"
        "`make lint`.\nThe test target is called `make check`.\n"
    )
    criteria = criteria_with(
        '{"name": "help", "description": "Bare `make test`, `make lint` and `make check` '
        'show help", "max_score": 100}'
    )
    scenario = scenario_with(tmp_path, task_md=task, criteria_json=criteria)

    found = scenario_rule(scenario, "task-states-answer")

    assert [(f.line, f.message.split("states ")[1].split(";")[0]) for f in found] == [
        (5, "'make check'")
    ]


def test_a_value_inside_a_longer_word_is_not_stated(tmp_path: Path) -> None:
    task = "# Notes\n\nWrite notes about the refactoring of the parser.\n"
    criteria = criteria_with(
        '{"name": "kind", "description": "The output contains \\"refactor\\"", "max_score": 100}'
    )
    scenario = scenario_with(tmp_path, task_md=task, criteria_json=criteria)

    assert scenario_rule(scenario, "task-states-answer") == []


def test_a_tiles_link_to_an_evals_file_is_never_told_to_move_into_the_prompt(
    tmp_path: Path,
) -> None:
    tile = write_tile(tmp_path, {"flow": {"criteria": {"a": 100}}})
    skill_md = tile / "metrics" / "SKILL.md"
    skill_md.write_text("# Metrics\n\nSee [a task](../evals/flow/task.md).\n")

    [finding] = unreached_skill_files(tile)

    assert finding.message == (
        "metrics/SKILL.md links to evals/flow/task.md, which never reaches the agent's prompt: "
        "it is an eval's file, which the agent must not see: remove the link"
    )


def test_a_tiles_scenarios_may_have_any_weights(tmp_path: Path) -> None:
    # Tessl's format scores the points got of the points there are: sums of 2 or 90 are fine
    # for a tile's own evals and for a skill inside the tile, never for a skill of its own.
    tile = write_tile(tmp_path / "a", {"flow": {"criteria": {"spans": 2}}})
    nested = tile / "metrics" / "evals" / "scenario-0"
    nested.mkdir(parents=True)
    (nested / "task.md").write_text("Add metrics.\n")
    (nested / "criteria.json").write_text(
        criteria_with('{"name": "a", "description": "d", "max_score": 90}')
    )
    skill = make_skill(
        tmp_path / "b",
        {
            "evals/scenario-0/criteria.json": criteria_with(
                '{"name": "a", "description": "d", "max_score": 90}'
            )
        },
    )

    assert "weights" not in lint_scenario(tile / "evals" / "flow")  # the rule is not run
    assert "weights" not in lint_scenario(nested)
    [finding] = lint_scenario(skill / "evals" / "scenario-0")["weights"]
    assert "sum=90 (expected 100)" in finding.message


def test_a_tile_evaluated_through_its_skills_own_evals_is_not_told_nothing_evaluates_it(
    tmp_path: Path,
) -> None:
    tile = write_tile(tmp_path, {})
    nested = tile / "metrics" / "evals" / "scenario-0"
    nested.mkdir(parents=True)
    (nested / "task.md").write_text("Add metrics.\n")
    (nested / "criteria.json").write_text(CRITERIA)
    bare = write_tile(tmp_path / "bare", {})

    assert lint_skill(tile)["scenarios"] == []
    [finding] = lint_skill(bare)["scenarios"]
    assert "nothing evaluates this skill" in finding.message


def test_the_build_context_scenario_json_names_is_not_an_unreached_file(tmp_path: Path) -> None:
    scenario = scenario_with(tmp_path)
    (scenario / "scenario.json").write_text('{"dockerfile": "environment/Dockerfile"}\n')
    (scenario / "environment").mkdir()
    (scenario / "environment" / "Dockerfile").write_text("FROM box\n", encoding="utf-8")
    (scenario / "notes.md").write_text("mine\n", encoding="utf-8")

    assert [f.file for f in unreached_scenario_files(scenario)] == ["evals/scenario-0/notes.md"]


def test_files_the_task_supplies_itself_are_not_missing_inputs(tmp_path: Path) -> None:
    # Held inline ("=== FILE: ... ==="), made by the task's own shell lines, or a folder on
    # the way to one: the agent has them. Code that compares (`a > b`) or maps (`k => v`)
    # supplies nothing, and a file neither held nor made is still named.
    task = (
        "The module `lib/billing/` already has `rates.rb` and `tax.rb`. Read "
        "`samples/may.log` and `conf/ship.yaml`, then look at `conf/other.yaml` and the "
        "folder `limit/`.\n\n"
        "```bash\nmkdir -p samples\ncurl -sL -o samples/may.log https://example.com/may.log\n"
        "cat > conf/ship.yaml <<'EOF'\nlevel: info\nEOF\n```\n\n"
        "```ruby\nretry! if retries > limit\nmap = { other => 'conf/x' }\n```\n\n"
        "=============== FILE: lib/billing/rates.rb ===============\nRATES = {}\n"
    )
    scenario = scenario_with(tmp_path, task_md=task)

    named = [f.message.split("`")[1] for f in scenario_rule(scenario, "referenced-inputs")]

    assert named == ["tax.rb", "conf/other.yaml", "limit/"]


def test_a_one_word_skill_name_is_named_only_beside_skill_or_tile(tmp_path: Path) -> None:
    # "eslint" is the skill's name and the tool's: "the eslint plugin" and `eslint/` are the
    # task's own subject; "the eslint skill" points at the skill.
    task = (
        "Add the eslint plugin for React to `eslint/config.mjs` and run eslint.\n\n"
        "Then use the eslint skill to explain each rule.\n"
    )
    skill = make_skill(
        tmp_path,
        {
            "evals/scenario-0/task.md": task,
            "SKILL.md": "---\nname: eslint\ndescription: Lint JavaScript.\n---\n\n# eslint\n",
        },
    )
    scenario = skill.rename(tmp_path / "eslint") / "evals" / "scenario-0"

    findings = scenario_rule(scenario, "task-names-skill")

    assert [(f.severity, f.line) for f in findings] == [("error", 3)]
