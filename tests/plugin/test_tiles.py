"""Tessl tiles run as they are published: evals at the tile's root under free names, the whole
tile as the context, one unit named and versioned by tile.json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_skill
from tests.support.tiles import TILE_JSON, write_tile

DIRECT = {"sandbox": False}

# The docs' worked example: every file named by its path in the tile, the skills in
# tile.json's order (each as the reference orders a skill's files), then docs, then rules.
TILE_PROMPT = """\
--- skills/otel/tracing/SKILL.md ---
# Tracing

Name spans after the operation.


--- skills/otel/tracing/references/spans.md ---
Span names are verbs.


--- skills/otel/tracing/scripts/lint.sh ---
#!/bin/sh
echo lint


--- metrics/SKILL.md ---
# Metrics

Use base units.


--- metrics/assets/units.txt ---
seconds
bytes


--- docs/index.md ---
# Observability docs


--- docs/setup.md ---
Install the collector.


--- rules.md ---
Always say which signal you change.


Export the checkout spans.


```app.py
print("hi")
```"""


def _agent_prompts(endpoint: ScriptedEndpoint) -> list[str]:
    return [
        r.json["messages"][-1]["content"]
        for r in endpoint.requests
        if r.json["messages"][0]["role"] != "system"
    ]


def _reports(tile: Path) -> list[Path]:
    return sorted((tile / "evals" / "results").glob("**/*.json"))


def test_a_tile_is_collected_prompted_with_its_whole_context_and_reported_as_one_unit(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    tile = write_tile(
        pytester.path,
        {
            "checkout-flow": {
                "criteria": {"spans named": 60, "units": 40},
                "options": DIRECT,
                "task": "Export the checkout spans.\n",
                "inputs": {"app.py": 'print("hi")\n'},
            },
            "metrics-scenario-3": {
                "criteria": {"base units": 100},
                "options": {"sandbox": False, "description": "uses base units"},
            },
        },
    )

    result = pytester.runpytest("tiles", *eval_args(endpoint.base_url), "-p", "no:randomly")

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(passed=2)
    prompts = _agent_prompts(endpoint)
    assert TILE_PROMPT in prompts
    other = next(p for p in prompts if p != TILE_PROMPT)
    assert other.startswith("--- skills/otel/tracing/SKILL.md ---\n# Tracing\n")
    assert other.endswith("\n\nDo the task of metrics-scenario-3.\n")
    # Never in the context: the acknowledgements, a file outside the three folders, the README.
    for prompt in prompts:
        for left_out in ("thanks", "an example the prompt does not hold", "# The tile"):
            assert left_out not in prompt
    [report_path] = _reports(tile)
    assert report_path.parent.name == "claude-sonnet-4.6"
    report = json.loads(report_path.read_text())
    assert (report["skill"], report["skill_version"]) == ("acme/observability", "1.17.0")
    assert [s["name"] for s in report["scenarios"]] == ["checkout-flow", "metrics-scenario-3"]
    assert report["pass"] is True
    result.stdout.fnmatch_lines(["tiles/observability", "  Overall: 100% PASS (threshold: 95%)"])


def test_a_tile_scenario_is_selected_by_its_free_name_and_the_tiles_name(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_tile(
        pytester.path,
        {
            "checkout-flow": {"criteria": {"a": 100}, "options": DIRECT},
            "trace-export": {"criteria": {"a": 100}, "options": DIRECT},
        },
    )
    args = eval_args(endpoint.base_url)

    named = pytester.runpytest("tiles/observability/evals/trace-export", *args)
    by_name = pytester.runpytest("tiles", "-k", "skill:acme/observability", *args, "--co")

    named.assert_outcomes(passed=1)
    assert "trace-export" in named.stdout.str()
    assert script.agent_calls == 1
    by_name.stdout.fnmatch_lines(["*checkout-flow*", "*trace-export*", "*2 tests collected*"])


def test_a_skill_folder_with_a_tile_json_of_itself_keeps_the_references_prompt_and_report(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = write_skill(pytester.path, "commit-message", {"scenario-0": {"a": 100}})
    listing_itself = {
        "name": "acme/commit-message",
        "version": "9.9.9",
        "skills": {"commit-message": {"path": "SKILL.md"}},
    }
    (skill / "tile.json").write_text(json.dumps(listing_itself))

    result = pytester.runpytest("skills", *eval_args(endpoint.base_url))

    result.assert_outcomes(passed=1)
    [prompt] = _agent_prompts(endpoint)
    assert prompt == "# commit-message\n\nFollow the rules.\n\n\nDo the task of scenario-0.\n"
    [report_path] = sorted((skill / "evals" / "results").glob("**/*.json"))
    report = json.loads(report_path.read_text())
    assert (report["skill"], report["skill_version"]) == ("commit-message", "2.1.0")


@pytest.mark.parametrize(
    ("tile_json", "message"),
    [
        ('{"name": "t", "skills": {', "tile.json: not valid JSON: *"),
        (
            json.dumps({**TILE_JSON, "skills": {"gone": {"path": "skills/gone/SKILL.md"}}}),
            "tile.json: skills.gone.path: 'skills/gone/SKILL.md': no such file in the tile",
        ),
        (
            json.dumps({**TILE_JSON, "steering": {"out": {"rules": "../outside.md"}}}),
            "tile.json: steering.out.rules: '../outside.md' leads out of the tile",
        ),
        (
            json.dumps({**TILE_JSON, "docs": 3}),
            "tile.json: docs: must be a string (got 3)",
        ),
    ],
    ids=["bad-json", "missing-skill", "outside-rules", "docs-not-text"],
)
def test_a_broken_tile_json_errors_each_scenario_naming_the_file_and_key(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    tile_json: str,
    message: str,
) -> None:
    tile = write_tile(pytester.path, {"checkout-flow": {"criteria": {"a": 100}, "options": DIRECT}})
    (tile / "tile.json").write_text(tile_json)
    (pytester.path / "tiles" / "outside.md").write_text("outside\n")

    result = pytester.runpytest("tiles", *eval_args(endpoint.base_url))

    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*scenario error: {message}"])
    assert str(pytester.path) not in "".join(
        line for line in result.stdout.lines if "scenario error" in line
    )
    assert script.agent_calls == 0


def test_without_skill_baseline_of_a_tile_leaves_the_whole_tile_out(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_tile(
        pytester.path,
        {"checkout-flow": {"criteria": {"a": 100}, "options": DIRECT, "task": "Do it.\n"}},
    )

    result = pytester.runpytest(
        "tiles", *eval_args(endpoint.base_url), "--eval-baseline", "without-skill"
    )

    result.assert_outcomes(passed=1)
    prompts = sorted(_agent_prompts(endpoint), key=len)
    assert prompts[0] == "Do it.\n"
    assert prompts[1].startswith("--- skills/otel/tracing/SKILL.md ---\n")
    assert prompts[1].endswith(
        "--- rules.md ---\nAlways say which signal you change.\n\n\nDo it.\n"
    )


def test_a_tile_without_a_name_is_named_by_its_folder_and_the_report_moves_with_it(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    only_rules = {"steering": {"house-style": {"rules": "rules.md"}}}
    tile = write_tile(
        pytester.path,
        {"c": {"criteria": {"a": 100}, "options": DIRECT, "task": "T\n"}},
        tile_json=only_rules,
    )
    shutil.rmtree(tile / "skills")  # a tile may hold no skill at all

    result = pytester.runpytest("tiles", *eval_args(endpoint.base_url))

    result.assert_outcomes(passed=1)
    assert _agent_prompts(endpoint) == [
        "--- rules.md ---\nAlways say which signal you change.\n\n\nT\n"
    ]
    report = json.loads(_reports(tile)[0].read_text())
    assert (report["skill"], report["skill_version"]) == ("observability", "")


WRITING_SCENARIOS = Path(__file__).resolve().parents[2] / "docs" / "writing-scenarios.md"


def test_the_docs_worked_example_is_the_prompt_a_run_sends(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    text = WRITING_SCENARIOS.read_text()
    section = text[text.index("## Tiles: `tile.json`") :]
    start = section.index("````text\n") + len("````text\n")
    documented = section[start : section.index("\n````", start)]
    tile_json = json.loads(section[section.index("```json\n") + 8 : section.index("\n```\n")])
    tile = write_tile(
        pytester.path,
        {
            "checkout-flow": {
                "criteria": {"a": 100},
                "options": DIRECT,
                "task": "Export the checkout spans.\n",
                "inputs": {"app.py": 'print("hi")\n'},
            }
        },
        tile_json=tile_json,
    )
    # The documented tile has no scripts/ or assets/.
    (tile / "skills/otel/tracing/scripts/lint.sh").unlink()
    (tile / "metrics/assets/units.txt").unlink()

    result = pytester.runpytest("tiles", *eval_args(endpoint.base_url))

    result.assert_outcomes(passed=1)
    assert _agent_prompts(endpoint) == [documented]
