"""The criterion's category in the results JSON (written only when it has one, read back)
and in the JUnit file; the names of several skills' report files; the missing-image message."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.junit import scenario_key
from pytest_openkata.contracts.results import CriterionResult, ScenarioResult
from pytest_openkata.core.report_paths import report_prefixes
from pytest_openkata.core.reporting import make_run
from pytest_openkata.core.results_json import (
    ReportConfig,
    build_report,
    parse_report,
    render_report,
)
from pytest_openkata.core.summary import SkillSummary, summarise
from pytest_openkata.core.trials import combine_trials, errored_trial, scored_trial
from pytest_openkata.providers.reporters.junit import add_criteria_to_junit
from pytest_openkata.providers.reporters.results_json import ResultsJsonReporter
from pytest_openkata.providers.sandboxes.docker import missing_image_message
from tests.support.results import reported

NOW = datetime(2026, 6, 18, 11, 0, 0, tzinfo=UTC)
ROOT = Path("/checkout")


def _result(criteria: list[CriterionResult], skill_dir: Path = ROOT / "skills/s") -> ScenarioResult:
    return combine_trials(
        [scored_trial(1, criteria)],
        skill=skill_dir.name,
        skill_dir=str(skill_dir),
        name="scenario-0",
        description="about it",
        skill_scenarios=["scenario-0"],
    )


def _report_text(criteria: list[CriterionResult]) -> str:
    return render_report(
        build_report(
            skill="s",
            skill_version="1.0.0",
            timestamp=NOW,
            config=ReportConfig(backend="http", agent_model="m", judge_model="m"),
            threshold=95,
            results=[_result(criteria)],
            overall=50.0,
            passed=False,
        )
    )


# --- the results JSON -----------------------------------------------------------------------


def test_a_category_is_written_after_the_criterions_other_fields_and_read_back() -> None:
    intent = CriterionResult.judged("a", 10, True, "fine", category="INTENT")
    check = CriterionResult("b", False, 0, 5, "missing", kind="check", category="QUALITY")

    text = _report_text([intent, check])

    entries = json.loads(text)["scenarios"][0]["criteria"]
    assert list(entries[0]) == ["name", "pass", "score", "max_score", "reason", "category"]
    assert entries[0]["category"] == "INTENT"
    assert list(entries[1])[-2:] == ["kind", "category"]
    again = parse_report(text)
    criteria = again.scenarios[0].criteria
    assert criteria is not None
    assert [(c.name, c.kind, c.category) for c in criteria] == [
        ("a", "judge", "INTENT"),
        ("b", "check", "QUALITY"),
    ]
    assert render_report(again) == text


def test_a_criterion_without_a_category_is_written_as_the_reference_writes_it() -> None:
    text = _report_text([CriterionResult.judged("a", 10, True, "fine")])

    assert "category" not in text
    assert json.loads(text)["scenarios"][0]["criteria"] == [
        {"name": "a", "pass": True, "score": 10, "max_score": 10, "reason": "fine"}
    ]
    criteria = parse_report(text).scenarios[0].criteria
    assert criteria is not None
    assert criteria[0].category == ""
    assert render_report(parse_report(text)) == text


# --- the JUnit file ---------------------------------------------------------------------------


def _junit(path: Path, rootdir: Path) -> None:
    key = scenario_key(rootdir / "skills/s", "scenario-0", rootdir)
    path.write_text(
        '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="1" '
        'errors="0" failures="1" skipped="0"><testcase classname="skills.s.evals" '
        'name="scenario-0" file="skills/s/evals" time="0.1"><properties>'
        f'<property name="openkata_scenario" value="{key}"/></properties>'
        '<failure message="x">x</failure></testcase></testsuite></testsuites>'
    )


def test_a_criterions_category_is_a_junit_property_when_it_has_one(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    _junit(junit, tmp_path)
    result = _result(
        [
            CriterionResult.judged("a", 10, True, "fine", category="INTENT"),
            CriterionResult.judged("b", 5, False, "no"),
        ],
        skill_dir=tmp_path / "skills/s",
    )

    add_criteria_to_junit(junit, {scenario_key(result.skill_dir, result.name, tmp_path): result})

    cases = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ET.parse(junit).getroot().iter("testcase")
        if case.get("classname") == "skills.s.evals.scenario-0"
    }
    assert cases["a"] == {
        "points": "10",
        "max_points": "10",
        "reason": "fine",
        "kind": "judge",
        "category": "INTENT",
    }
    assert "category" not in cases["b"]


# --- the names of several skills' report files -------------------------------------------


def _summaries(rootdir: Path, *folders: str) -> list[SkillSummary]:
    results = [
        _result([CriterionResult.judged("c", 1, True, "ok")], skill_dir=rootdir / folder)
        for folder in folders
    ]
    return summarise(results, 95, rootdir)


def test_a_repeated_name_is_replaced_by_the_skills_folder_under_the_rootdir() -> None:
    summaries = _summaries(ROOT, "skills/a/commit-message", "skills/b/commit-message", "skills/u")

    assert report_prefixes(summaries, ROOT) == [
        "skills__a__commit-message",
        "skills__b__commit-message",
        "u",
    ]


def test_a_folder_outside_the_rootdir_is_named_by_its_last_folders_only() -> None:
    summaries = _summaries(ROOT, "skills/a/commit-message", "skills/b/commit-message")

    prefixes = report_prefixes(summaries, Path("/elsewhere"))

    assert prefixes == ["a__commit-message", "b__commit-message"]
    assert not any("checkout" in prefix for prefix in prefixes)


def test_folders_that_still_give_one_name_get_a_number_and_nothing_is_overwritten(
    tmp_path: Path,
) -> None:
    # skills/a__b/x and skills/a/b/x both read skills__a__b__x.
    summaries = _summaries(tmp_path, "skills/a/b/x", "skills/a__b/x")
    settings = EvalSettings(model="m", output=str(tmp_path / "out") + "/")
    run = make_run(summaries, settings, NOW, tmp_path)

    assert report_prefixes(summaries, tmp_path) == ["skills__a__b__x", "skills__a__b__x-2"]
    run = reported(ResultsJsonReporter(), run)

    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == [
        "skills__a__b__x-2-results-2026-06-18T110000.json",
        "skills__a__b__x-results-2026-06-18T110000.json",
    ]
    assert [s.report_path.name for s in run.summaries if s.report_path] == [
        "skills__a__b__x-results-2026-06-18T110000.json",
        "skills__a__b__x-2-results-2026-06-18T110000.json",
    ]


def test_a_held_back_report_of_a_repeated_name_goes_to_its_folders_name(tmp_path: Path) -> None:
    results = [
        combine_trials(
            [errored_trial(1, "agent: HTTP 503")],
            skill="commit-message",
            skill_dir=str(tmp_path / folder),
            name="scenario-0",
            description="about it",
            skill_scenarios=["scenario-0"],
        )
        for folder in ("skills/a/commit-message", "skills/b/commit-message")
    ]
    summaries = summarise(results, 95, tmp_path)
    run = make_run(summaries, EvalSettings(model="m"), NOW, tmp_path)

    run = reported(ResultsJsonReporter(), run)

    written = [
        s.report_path.relative_to(tmp_path).as_posix() for s in run.summaries if s.report_path
    ]
    assert written == [
        ".openkata/runs/unpublished/skills__a__commit-message/m/2026-06-18T110000.json",
        ".openkata/runs/unpublished/skills__b__commit-message/m/2026-06-18T110000.json",
    ]


# --- the missing image ------------------------------------------------------------------------


def test_the_missing_image_message_names_what_an_installed_package_has() -> None:
    message = missing_image_message("openkata-absent:1")

    assert message.startswith("image 'openkata-absent:1' not found on the Docker engine: ")
    assert "set sandbox.image (--eval-sandbox-image or OPENKATA_EVAL_SANDBOX_IMAGE)" in message
    assert "`python -m pytest_openkata.localmodel build --sandbox`" in message
    assert "--eval-sandbox-agent codex" in message
    # Dockerfile.eval is named only as what a checkout of the project has.
    assert message.endswith(
        "in a checkout of pytest-openkata, docker build -f Dockerfile.eval -t "
        "openkata-absent:1 . builds the default image"
    )
