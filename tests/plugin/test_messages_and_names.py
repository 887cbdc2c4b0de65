"""What a run says as users read it, run through pytester against a real scripted endpoint:
judge reasons of several lines kept inside their block, a scenario without a description
named alone, skills of the same name told apart by their folders (in the terminal, in
``--eval-output`` file names and in JUnit), and the criterion's category in the reports."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_scenario, write_skill

SUMMARY = "openkata eval summary"
XDIST = pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
FAILING = Reply(status=500, body="upstream exploded", headers={"Retry-After": "0"})


def _block(result: pytest.RunResult) -> list[str]:
    """The lines of the openkata summary section."""
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if SUMMARY in line) + 1
    end = next(i for i, line in enumerate(lines[start:], start) if line.startswith("==="))
    return lines[start:end]


def _two_skills_named_commit_message(root: Path) -> tuple[Path, Path]:
    """``skills/a/commit-message`` and ``skills/b/commit-message``, one scenario each; the
    first one's SKILL.md says ``group a`` (what an agent's prompt can be told apart by)."""
    made = []
    for group in ("a", "b"):
        written = write_skill(root / f"made-{group}", "commit-message", {"scenario-0": {"c": 1}})
        skill = root / "skills" / group / "commit-message"
        skill.parent.mkdir(parents=True, exist_ok=True)
        written.rename(skill)
        for leftover in (written.parent, written.parent.parent):
            leftover.rmdir()
        made.append(skill)
    (made[0] / "SKILL.md").write_text("# commit-message\n\nFollow the rules of group a.\n")
    return made[0], made[1]


# --- judge reasons of several lines ---------------------------------------------------------


@XDIST
def test_every_line_of_a_reason_of_several_lines_keeps_the_criterions_indentation(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    workers: tuple[str, ...],
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-0": {"a": 10, "b": 5}})
    write_scenario(skill, "scenario-1", {"c": 4})
    script.verdicts["b"] = (False, "the header is wrong:\n- no type\n\n  indented detail\n")

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url), *workers)

    assert _block(result)[:12] == [
        "skills/s",
        "  scenario-0: about scenario-0",
        "    ✓ a (10/10)",
        "    ✗ b (0/5) — the header is wrong:",
        "    - no type",
        "    ",
        "      indented detail",
        "    Score: 10/15 (67%) FAIL",
        "",
        "  scenario-1: about scenario-1",
        "    ✓ c (4/4)",
        "    Score: 4/4 (100%) PASS",
    ]


# --- a scenario without a description ---------------------------------------------------------


@XDIST
def test_a_scenario_without_a_description_is_named_without_a_colon(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    workers: tuple[str, ...],
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-0": {"a": 10}})
    write_scenario(skill, "scenario-1", {"c": 4})
    write_scenario(skill, "scenario-2", {"d": 4})
    for name in ("scenario-0", "scenario-1"):
        (skill / "evals" / name / "scenario.json").write_text('{"sandbox": false}')
    script.agent_reply_when["scenario-1."] = FAILING

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url), *workers)

    block = _block(result)
    assert block[:10] == [
        "skills/s",
        "  scenario-0",
        "    ✓ a (10/10)",
        "    Score: 10/10 (100%) PASS",
        "",
        "  scenario-1",
        "    ERROR: agent: failed after 3 attempts: HTTP 500: upstream exploded",
        "",
        "  scenario-2: about scenario-2",
        "    ✓ d (4/4)",
    ]
    assert not any(line.rstrip().endswith(":") for line in block if line.startswith("  scen"))


# --- skills of the same name ------------------------------------------------------------------


@XDIST
def test_skills_of_the_same_name_are_told_apart_by_their_folders(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    workers: tuple[str, ...],
) -> None:
    _two_skills_named_commit_message(pytester.path)
    write_skill(pytester.path, "unique", {"scenario-0": {"u": 1}})
    script.agent_reply_when["rules of group a"] = FAILING

    result = pytester.runpytest("skills", *eval_args(endpoint.base_url), *workers)

    block = _block(result)
    assert "skills/a/commit-message" in block
    assert "skills/b/commit-message" in block
    assert "skills/unique" in block
    gate = result.outlines[-1]
    assert gate.startswith(
        "skills/a/commit-message 0% < 95%; skills/b/commit-message 100% >= 95%; unique 100% >= 95%"
    ), gate


def test_a_skill_whose_name_is_unique_keeps_its_name_in_the_gate_line(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "commit-message", {"scenario-0": {"c": 1}})
    write_skill(pytester.path, "other", {"scenario-0": {"c": 1}})

    result = pytester.runpytest("skills", *eval_args(endpoint.base_url))

    assert result.outlines[-1] == "commit-message 100% >= 95%; other 100% >= 95%: exit 0"


@XDIST
def test_output_files_of_skills_of_the_same_name_are_named_by_their_folders(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    workers: tuple[str, ...],
) -> None:
    _two_skills_named_commit_message(pytester.path)
    write_skill(pytester.path, "unique", {"scenario-0": {"u": 1}})
    script.verdicts["c"] = (False, "not quite")

    result = pytester.runpytest(
        "skills", *eval_args(endpoint.base_url, "--eval-output", "out/"), *workers
    )

    files = sorted((pytester.path / "out").iterdir())
    prefixes = sorted(path.name.split("-results-")[0] for path in files)
    assert prefixes == ["skills__a__commit-message", "skills__b__commit-message", "unique"]
    # One timestamp for all: the names differ by the skill, not by a later second.
    assert len({path.name.split("-results-")[1] for path in files}) == 1
    for path in files:
        report = json.loads(path.read_text())
        assert report["skill"] in ("commit-message", "unique")
        name = path.name
        result.stdout.fnmatch_lines([f"  Report: out/{name}"])
    assert str(pytester.path) not in " ".join(path.name for path in files)


def test_output_files_of_skills_of_the_same_name_are_the_same_in_every_run(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    _two_skills_named_commit_message(pytester.path)

    pytester.runpytest("skills", *eval_args(endpoint.base_url, "--eval-output", "first/"))
    pytester.runpytest("skills", *eval_args(endpoint.base_url, "--eval-output", "second/"))

    def prefixes(folder: str) -> list[str]:
        return sorted(p.name.split("-results-")[0] for p in (pytester.path / folder).iterdir())

    assert (
        prefixes("first")
        == prefixes("second")
        == [
            "skills__a__commit-message",
            "skills__b__commit-message",
        ]
    )


# --- the criterion's category ----------------------------------------------------------------


def _with_categories(scenario: Path, categories: dict[str, str]) -> None:
    criteria = json.loads((scenario / "criteria.json").read_text())
    for item in criteria["checklist"]:
        if item["name"] in categories:
            item["category"] = categories[item["name"]]
    (scenario / "criteria.json").write_text(json.dumps(criteria))


def _criterion_properties(junit: Path) -> dict[str, dict[str, str]]:
    root = ET.parse(junit).getroot()
    return {
        case.get("name", ""): {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
        for case in root.iter("testcase")
        if ".scenario-" in case.get("classname", "")
    }


@XDIST
def test_a_criterions_category_is_in_the_report_and_the_junit_properties(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    workers: tuple[str, ...],
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-0": {"a": 10, "b": 5}})
    _with_categories(skill / "evals" / "scenario-0", {"a": "INTENT"})
    script.verdicts["b"] = (False, "b was ignored")
    junit = pytester.path / "junit.xml"

    pytester.runpytest(
        "skills/s",
        *eval_args(endpoint.base_url, "--eval-output", "out.json", f"--junitxml={junit}"),
        *workers,
    )

    [path] = pytester.path.glob("out-*.json")
    criteria = json.loads(path.read_text())["scenarios"][0]["criteria"]
    assert criteria[0] == {
        "name": "a",
        "pass": True,
        "score": 10,
        "max_score": 10,
        "reason": "ok",
        "category": "INTENT",
    }
    assert "category" not in criteria[1]
    properties = _criterion_properties(junit)
    assert properties["a"]["category"] == "INTENT"
    assert properties["a"]["kind"] == "judge"
    assert "category" not in properties["b"]


@XDIST
def test_errors_of_skills_of_the_same_name_have_headers_naming_their_folders(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, workers: tuple[str, ...]
) -> None:
    first, second = _two_skills_named_commit_message(pytester.path)
    for skill in (first, second):
        (skill / "evals" / "scenario-0" / "criteria.json").write_text("{broken")
    write_skill(pytester.path, "unique", {"scenario-0": {"u": 1}})
    (pytester.path / "skills/unique/evals/scenario-0/criteria.json").write_text("{broken")

    result = pytester.runpytest("skills", *eval_args(endpoint.base_url), *workers)

    result.assert_outcomes(errors=3)
    headers = sorted(line.strip("_ ") for line in result.outlines if "ERROR at setup of" in line)
    assert headers == [
        "ERROR at setup of skills/a/commit-message::scenario-0",
        "ERROR at setup of skills/b/commit-message::scenario-0",
        "ERROR at setup of unique::scenario-0",
    ]
