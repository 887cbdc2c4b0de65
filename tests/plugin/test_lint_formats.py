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


def test_keys_a_format_s_own_tools_pass_over_are_warned_relative_to_their_eval(
    pytester: pytest.Pytester,
) -> None:
    skill = pytester.path / "skills" / "csv-tidy"
    write(skill / "SKILL.md", SKILL_MD)
    write(skill / "CHANGELOG.md", "# Changelog\n\n## [1.0.0] - 2026-01-01\n")
    evals = [{"id": 1, "name": "sorts", "prompt": "Sort it.", "expectations": ["Rows sorted"]}]
    data = {"skill_name": "csv-tidy", "generated_by": "a tool", "evals": evals}
    write(skill / "evals" / "evals.json", json.dumps(data))

    result = pytester.runpytest("--eval-lint", "skills", "-W", "default", "-p", "no:cacheprovider")

    warnings = [line for line in result.stdout.lines if "[unknown-keys]" in line]
    assert [line.split("[unknown-keys] ", 1)[1] for line in warnings] == [
        "evals[0]: `generated_by` (of the whole file) is not a key of the format: the run "
        "ignores it, as the format's own tools do",
        "evals[0]: `name` is not a key of the format: the run ignores it, as the format's own "
        "tools do",
    ]
    result.assert_outcomes(passed=2)  # the skill and its eval: warnings, not failures


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


@pytest.mark.parametrize("mode", [["--eval-lint"], ["--collect-only"]])
def test_a_harbor_task_s_own_folders_are_not_collected_as_host_tests(
    pytester: pytest.Pytester, mode: list[str]
) -> None:
    # Each task's verifier tests share one module name and read /app: collected on the host,
    # the second one stopped the whole run (exit 2) and the first ran where it cannot pass.
    for name in ("decode", "encode"):
        task = pytester.path / "tasks" / name
        write(task / "instruction.md", f"Write the {name}d text to `/app/out.txt`.\n")
        write(task / "task.toml", 'version = "1.0"\n\n[metadata]\ndifficulty = "easy"\n')
        write(task / "environment" / "Dockerfile", "FROM debian:bookworm-slim\nWORKDIR /app\n")
        write(task / "tests" / "test.sh", "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
        write(
            task / "tests" / "test_outputs.py",
            "from pathlib import Path\n\ndef test_out():\n"
            "    assert Path('/app/out.txt').exists()\n",
        )
        write(task / "solution" / "test_solve.py", "def test_solve():\n    assert False\n")
    other = pytester.path / "tools" / "tests"
    write(other / "test_tool.py", "def test_tool():\n    assert True\n")

    result = pytester.runpytest(*mode, ".", "-q", "-p", "no:cacheprovider")

    assert result.ret == 0
    text = result.stdout.str()
    assert "test_outputs.py" not in text
    assert "test_solve.py" not in text
    if mode == ["--collect-only"]:
        result.stdout.fnmatch_lines_random(
            ["tasks/decode/task.toml::decode", "tasks/encode/task.toml::encode", "*test_tool*"]
        )
