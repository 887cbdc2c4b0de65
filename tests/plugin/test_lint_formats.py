"""``pytest --eval-lint`` on the published formats' files: one lint item per scenario of a
skill's ``evals/evals.json`` and of a Harbor task anywhere, only the rules of its format, a
file its format cannot read as an error naming the file and the key, and nothing written
into the skill."""

from __future__ import annotations

import json

import pytest

from tests.support.format_layouts import SKILL_MD, write


def test_lint_collects_each_format_scenario_with_its_format_s_rules(
    pytester: pytest.Pytester,
) -> None:
    skill = pytester.path / "skills" / "csv-tidy"
    write(skill / "SKILL.md", SKILL_MD)
    write(skill / "CHANGELOG.md", "# Changelog\n\n## [1.0.0] - 2026-01-01\n")
    evals = [
        {"id": 1, "prompt": "Read `data/people.csv` and sort it.", "expectations": ["Rows sorted"]},
        {"id": 2, "prompt": "Sort it.", "assertions": [{"type": "icontains", "value": "x"}]},
    ]
    write(skill / "evals" / "evals.json", json.dumps({"skill_name": "csv-tidy", "evals": evals}))
    task = pytester.path / "tasks" / "fix-cron"
    write(task / "instruction.md", "Fix the cron entry.\n")
    write(task / "task.toml", 'version = "1.0"\n\n[verifier]\nretries = 2\n')
    write(task / "tests" / "test.sh", "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    before = sorted(p.relative_to(pytester.path) for p in pytester.path.rglob("*"))

    result = pytester.runpytest(
        "--eval-lint", "skills", "tasks", "-v", "-W", "default", "-p", "no:cacheprovider"
    )

    result.stdout.fnmatch_lines_random(
        [
            "*evals.json::eval-1*PASSED*",
            "*[[]referenced-inputs[]]*evals[[]0[]]: the task refers to `data/people.csv`, which "
            "is not in the eval's `files`*",
            "*evals/evals.json: evals[[]1[]]: evals[[]1[]].assertions[[]0[]].type: assertion "
            "type 'icontains'*(skill-creator format)*",
            "*task.toml: verifier.retries: unknown key*(harbor format)*",
        ]
    )
    assert "SUBPASSED[weights]" not in result.stdout.str()  # not a rule of these formats
    assert "SUBPASSED[criteria-json]" not in result.stdout.str()
    result.assert_outcomes(passed=2, failed=4)  # two items, each with a failed subtest
    assert sorted(p.relative_to(pytester.path) for p in pytester.path.rglob("*")) == before


def test_a_format_file_named_on_the_command_line_is_linted_alone(
    pytester: pytest.Pytester,
) -> None:
    skill = pytester.path / "skills" / "csv-tidy"
    write(skill / "SKILL.md", SKILL_MD)
    write(skill / "evals" / "scenario-0" / "task.md", "Sort it.\n")
    evals = [{"id": 1, "prompt": "Sort `people.csv`.", "expectations": ["Rows are sorted"]}]
    write(skill / "evals" / "evals.json", json.dumps({"skill_name": "csv-tidy", "evals": evals}))

    result = pytester.runpytest(
        "--eval-lint", "skills/csv-tidy/evals/evals.json", "-v", "-p", "no:cacheprovider"
    )

    result.stdout.fnmatch_lines(["*evals.json::eval-1 PASSED*"])
    assert "scenario-0" not in result.stdout.str()  # nor the skill's other items
    result.assert_outcomes(passed=1)
