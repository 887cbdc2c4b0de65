from __future__ import annotations

import dataclasses
import json
import os
import stat
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from pydantic import ValidationError

from pytest_openkata.contracts.results import CallStats, CriterionResult, ScenarioResult, Usage
from pytest_openkata.core.compare import compare_skill
from pytest_openkata.core.report_paths import auto_report_path, output_report_path
from pytest_openkata.core.results_json import (
    ReportConfig,
    SkillReport,
    build_report,
    parse_report,
    render_report,
)
from pytest_openkata.core.trials import combine_trials, errored_trial, scored_trial
from pytest_openkata.core.versions import read_skill_version
from pytest_openkata.infra.atomic import write_new_report

NOW = datetime(2026, 6, 18, 11, 0, 0, tzinfo=UTC)
TS = "2026-06-18T110000"
REAL_REPORT = Path(
    "/work/shared/corpus/openkata/skills/critical-thinking/evals/results/"
    "claude-sonnet-4.6/2026-06-22T075103.json"
)
JUDGE_ERROR = "judge: judge parse failed after retry: no JSON found in judge response"

SPEC_EXAMPLE_PREFIX = """\
{
  "skill": "test-skill",
  "skill_version": "1.0.0",
  "timestamp": "2026-06-21T19:43:00Z",
  "config": {
    "backend": "kiro",
    "agent_model": "claude-sonnet-4.6",
    "judge_model": "claude-sonnet-4.6",
    "model_label": "Sonnet 4.6"
  },
  "threshold": 95,
  "scenarios": [
    {
      "name": "scenario-0",
      "description": "Test scenario",
      "criteria": [
        {
          "name": "criterion-a",
          "pass": true,
          "score": 10,
          "max_score": 10,
          "reason": "well done"
        },
        {
          "name": "criterion-b",
          "pass": false,
          "score": 0,
          "max_score": 5,
          "reason": "missing"
        }
      ],
      "score": 10,
      "max_score": 15,
      "percentage": 66.66666666666666,
      "pass": false
    },
    {
      "name": "scenario-1",
      "description": " (error: JUDGE_ERROR)",
      "criteria": null,
      "score": 0,
      "max_score": 0,
      "percentage": 0,
      "pass": false""".replace("JUDGE_ERROR", JUDGE_ERROR)

SPEC_EXAMPLE_SUFFIX = """
    }
  ],
  "overall_percentage": 33.33333333333333,
  "pass": false
}
"""


def _scenario(
    name: str = "scenario-0",
    *,
    criteria: list[CriterionResult] | None = None,
    score: int = 0,
    max_score: int = 0,
    percentage: float = 0.0,
    passed: bool = False,
    description: str = "Test scenario",
    error: str | None = None,
) -> ScenarioResult:
    return ScenarioResult(
        skill="test-skill",
        skill_dir="skills/test-skill",
        name=name,
        description=description,
        criteria=criteria,
        score=score,
        max_score=max_score,
        percentage=percentage,
        passed=passed,
        error=error,
    )


def _spec_example_results() -> list[ScenarioResult]:
    criteria = [
        CriterionResult("criterion-a", True, 10, 10, "well done"),
        CriterionResult("criterion-b", False, 0, 5, "missing"),
    ]
    return [
        _scenario(criteria=criteria, score=10, max_score=15, percentage=10 / 15 * 100),
        _scenario(
            "scenario-1",
            description=f" (error: {JUDGE_ERROR})",
            error=JUDGE_ERROR,
        ),
    ]


def _spec_example_report(model_label: str = "Sonnet 4.6") -> SkillReport:
    return build_report(
        skill="test-skill",
        skill_version="1.0.0",
        timestamp=datetime(2026, 6, 21, 19, 43, 0, tzinfo=UTC),
        config=ReportConfig(
            backend="kiro",
            agent_model="claude-sonnet-4.6",
            judge_model="claude-sonnet-4.6",
            model_label=model_label,
        ),
        threshold=95,
        results=_spec_example_results(),
        overall=(10 / 15 * 100 + 0.0) / 2,
        passed=False,
    )


def _simple_report(skill: str = "commit-conventions") -> SkillReport:
    criteria = [CriterionResult("has-type", True, 10, 10, "")]
    return build_report(
        skill=skill,
        skill_version="",
        timestamp=NOW,
        config=ReportConfig(backend="http", agent_model="gpt-4o", judge_model="gpt-4o"),
        threshold=95,
        results=[
            _scenario(criteria=criteria, score=10, max_score=10, percentage=100.0, passed=True)
        ],
        overall=50.0,
        passed=False,
    )


# --- rendering ---------------------------------------------------------------------------


def test_spec_example_renders_byte_exactly_with_error_key_last() -> None:
    text = render_report(_spec_example_report())

    error_line = f',\n      "error": "{JUDGE_ERROR}"'
    assert text == SPEC_EXAMPLE_PREFIX + error_line + SPEC_EXAMPLE_SUFFIX
    errored = json.loads(text)["scenarios"][1]
    assert list(errored)[-1] == "error"


def test_error_key_absent_for_scenarios_that_did_not_error() -> None:
    data = json.loads(render_report(_spec_example_report()))
    assert list(data["scenarios"][0]) == [
        "name",
        "description",
        "criteria",
        "score",
        "max_score",
        "percentage",
        "pass",
    ]


def test_report_keys_follow_reference_order() -> None:
    data = json.loads(render_report(_spec_example_report()))
    assert list(data) == [
        "skill",
        "skill_version",
        "timestamp",
        "config",
        "threshold",
        "scenarios",
        "overall_percentage",
        "pass",
    ]
    assert list(data["scenarios"][0]["criteria"][0]) == [
        "name",
        "pass",
        "score",
        "max_score",
        "reason",
    ]


def test_model_label_is_left_out_when_empty() -> None:
    data = json.loads(render_report(_spec_example_report(model_label="")))
    assert data["config"] == {
        "backend": "kiro",
        "agent_model": "claude-sonnet-4.6",
        "judge_model": "claude-sonnet-4.6",
    }


@pytest.mark.parametrize(
    ("judge_backend", "written"), [("", None), ("kiro", None), ("http", "http")]
)
def test_judge_backend_is_written_only_when_it_differs(
    judge_backend: str, written: str | None
) -> None:
    config = ReportConfig(
        backend="kiro", agent_model="a", judge_model="j", judge_backend=judge_backend
    )
    report = build_report(
        skill="s",
        skill_version="",
        timestamp=datetime(2026, 6, 21, 19, 43, 0, tzinfo=UTC),
        config=config,
        threshold=95,
        results=[],
        overall=0.0,
        passed=False,
    )
    data = json.loads(render_report(report))["config"]
    assert data.get("judge_backend") == written
    assert list(data)[:3] == ["backend", "agent_model", "judge_model"]


def test_whole_number_percentages_render_without_fraction() -> None:
    text = render_report(_simple_report())
    assert '"percentage": 100,' in text
    assert '"overall_percentage": 50,' in text


def test_no_scenarios_and_empty_criteria_render_as_null() -> None:
    report = build_report(
        skill="s",
        skill_version="",
        timestamp=NOW,
        config=ReportConfig(backend="kiro", agent_model="m", judge_model="m"),
        threshold=95,
        results=[],
        overall=0.0,
        passed=False,
    )
    assert '"scenarios": null,' in render_report(report)

    with_empty_checklist = build_report(
        skill="s",
        skill_version="",
        timestamp=NOW,
        config=ReportConfig(backend="kiro", agent_model="m", judge_model="m"),
        threshold=95,
        results=[_scenario(criteria=[])],
        overall=0.0,
        passed=False,
    )
    assert '"criteria": null,' in render_report(with_empty_checklist)


def test_timestamp_is_utc_rfc3339_to_the_second() -> None:
    plus_two = timezone(timedelta(hours=2))
    report = build_report(
        skill="s",
        skill_version="",
        timestamp=datetime(2026, 6, 21, 21, 43, 0, 987654, tzinfo=plus_two),
        config=ReportConfig(backend="kiro", agent_model="m", judge_model="m"),
        threshold=95,
        results=[],
        overall=0.0,
        passed=False,
    )
    assert report.timestamp == "2026-06-21T19:43:00Z"


def test_real_reference_report_validates_and_renders_unchanged() -> None:
    text = REAL_REPORT.read_text(encoding="utf-8")
    report = parse_report(text)
    assert isinstance(report.scenarios[0].percentage, float)
    assert render_report(report) == text


def _report_with_trials() -> SkillReport:
    usage = Usage(agent=CallStats(calls=1, input_tokens=12, output_tokens=3, seconds=0.25))
    criteria = [CriterionResult("a <b> & c", True, 10, 10, "line\none \u2028")]
    trials = [
        scored_trial(1, criteria, usage=usage),
        errored_trial(2, "judge said nothing"),
        scored_trial(3, [CriterionResult("a <b> & c", False, 0, 10, "")]),
    ]
    result = combine_trials(
        trials, skill="s", skill_dir="/s", name="scenario-0", description="with trials"
    )
    return build_report(
        skill="s",
        skill_version="",
        timestamp=NOW,
        config=ReportConfig(backend="http", agent_model="m", judge_model="m"),
        threshold=95,
        results=[result, _scenario("scenario-1")],
        overall=16.5,
        passed=False,
    )


def _report_with_baseline() -> SkillReport:
    """Two scenarios, each with a without-skill arm; one of the arms errored."""

    def result(name: str, passed: bool, baseline_error: str | None) -> ScenarioResult:
        own = combine_trials(
            [scored_trial(1, [CriterionResult.judged("a", 10, True, "ok")])],
            skill="s", skill_dir="/s", name=name, description=name,
        )  # fmt: skip
        other = [errored_trial(1, baseline_error)] if baseline_error else [
            scored_trial(1, [CriterionResult.judged("a", 10, passed, "so so")])
        ]  # fmt: skip
        compared = combine_trials(other, skill="s", skill_dir="/s", name=name, description=name)
        return dataclasses.replace(own, baseline=dataclasses.replace(compared, arm="without-skill"))

    results = [result("scenario-0", False, None), result("scenario-1", True, "agent: HTTP 500")]
    return build_report(
        skill="s",
        skill_version="1.0.0",
        timestamp=NOW,
        config=ReportConfig(backend="http", agent_model="m", judge_model="m"),
        threshold=95,
        results=results,
        overall=100.0,
        passed=True,
        comparison=compare_skill(results),
    )


def test_a_baseline_and_its_uplift_are_read_back() -> None:
    report = _report_with_baseline()

    again = parse_report(render_report(report))

    assert again.comparison == report.comparison
    assert again.comparison is not None
    assert again.comparison.left_out == [("scenario-1", "errored in the without-skill arm")]
    [first, second] = again.scenarios
    assert first.baseline is not None
    assert (first.baseline.arm, first.baseline.percentage) == ("without-skill", 0)
    assert second.baseline is not None
    assert second.baseline.error == "agent: HTTP 500"


@pytest.mark.parametrize(
    "make_report",
    [
        _spec_example_report,
        _report_with_trials,
        _report_with_baseline,
        lambda: parse_report(REAL_REPORT.read_text(encoding="utf-8")),
    ],
    ids=["spec-example", "trials", "baseline", "real-report"],
)
def test_a_report_read_back_renders_byte_for_byte(make_report) -> None:  # type: ignore[no-untyped-def]
    text = render_report(make_report())

    assert render_report(parse_report(text)) == text


def test_a_report_read_back_holds_the_records_it_was_made_from() -> None:
    report = _report_with_trials()

    again = parse_report(render_report(report))

    (with_trials, errored) = again.scenarios
    original = report.scenarios[0]
    assert with_trials.trials == original.trials
    assert with_trials.stats == original.stats
    assert with_trials.criteria == original.criteria
    assert errored.error == report.scenarios[1].error
    assert again.config == report.config


def test_a_file_that_is_no_report_is_refused() -> None:
    with pytest.raises(ValidationError):
        parse_report('{"skill": "s"}')


# --- check 31 and 32: writing through the --output rule ----------------------------------


def test_check_31_output_file_decodes_to_report(tmp_path: Path) -> None:
    path = output_report_path(tmp_path / "results.json", NOW)
    write_new_report(path, render_report(_simple_report()))

    files = list(tmp_path.iterdir())
    assert len(files) == 1
    data = json.loads(files[0].read_text(encoding="utf-8"))
    assert data["skill"] == "commit-conventions"
    assert data["config"]["backend"] == "http"
    assert len(data["scenarios"]) == 1
    assert data["scenarios"][0]["score"] == 10
    assert data["pass"] is False
    decoded = parse_report(json.dumps(data))
    assert decoded.config.model_label == ""
    assert decoded.scenarios[0].criteria[0].passed is True


def test_check_32_existing_folder_gets_one_results_file(tmp_path: Path) -> None:
    write_new_report(output_report_path(tmp_path, NOW), render_report(_simple_report()))

    files = list(tmp_path.iterdir())
    assert len(files) == 1
    assert files[0].name.startswith("results-")


# --- check 33: output path resolution ----------------------------------------------------


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("/tmp/nonexistent/results.json", f"/tmp/nonexistent/results-{TS}.json"),
        ("/tmp/nonexistent/output", f"/tmp/nonexistent/output-{TS}.json"),
    ],
)
def test_check_33_output_path_for_missing_paths(output: str, expected: str) -> None:
    assert output_report_path(output, NOW) == Path(expected)
    assert output_report_path(Path(output), NOW) == Path(expected)


def test_check_33_output_path_for_existing_folder(tmp_path: Path) -> None:
    assert output_report_path(tmp_path, NOW) == tmp_path / f"results-{TS}.json"
    assert output_report_path(str(tmp_path), NOW) == tmp_path / f"results-{TS}.json"


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("out/", f"out/results-{TS}.json"),
        ("out.d/x", f"out.d/x-{TS}.json"),
        ("report.txt", f"report-{TS}.txt"),
        ("archive.tar.gz", f"archive.tar-{TS}.gz"),
        (".hidden", f"-{TS}.hidden"),
    ],
)
def test_output_path_edge_cases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, output: str, expected: str
) -> None:
    monkeypatch.chdir(tmp_path)
    assert output_report_path(output, NOW) == Path(expected)


def test_output_path_timestamp_is_utc() -> None:
    local = datetime(2026, 6, 18, 13, 0, 0, tzinfo=timezone(timedelta(hours=2)))
    assert output_report_path("/tmp/x/r.json", local) == Path(f"/tmp/x/r-{TS}.json")


# --- check 34: CHANGELOG version ---------------------------------------------------------


@pytest.mark.parametrize(
    ("changelog", "expected"),
    [
        (
            "# Changelog\n\n## [Unreleased]\n\n## [1.2.3] - 2026-06-01\n\n### Added\n- stuff\n",
            "1.2.3",
        ),
        ("## [0.5.0] - 2026-01-01\n", "0.5.0"),
        ("# Changelog\n\nNo versions yet.\n", ""),
        ("## [unreleased]\n## [1.0.0]\n", "unreleased"),
        ("## []\n## [1.0.0]\n", ""),
        ("## [2.0.0]\r\n## [1.0.0]\r\n", "2.0.0"),
        (" ## [9.9.9]\n### [8.8.8]\n## [1.0.0 - no bracket\n## [1.1.0] x\n", "1.1.0"),
    ],
)
def test_check_34_skill_version(tmp_path: Path, changelog: str, expected: str) -> None:
    (tmp_path / "CHANGELOG.md").write_bytes(changelog.encode("utf-8"))
    assert read_skill_version(tmp_path) == expected


def test_check_34_missing_changelog_gives_empty_version(tmp_path: Path) -> None:
    assert read_skill_version(tmp_path) == ""


def test_unreadable_changelog_gives_empty_version(tmp_path: Path) -> None:
    (tmp_path / "CHANGELOG.md").mkdir()
    assert read_skill_version(tmp_path) == ""


# --- check 35: automatic report path -----------------------------------------------------


def test_check_35_auto_report_path() -> None:
    now = datetime(2026, 6, 21, 19, 43, 0, tzinfo=UTC)
    path = auto_report_path(Path("skills/commit-conventions"), "claude-sonnet-4.6", now)
    assert path == Path(
        "skills/commit-conventions/evals/results/claude-sonnet-4.6/2026-06-21T194300.json"
    )


def test_auto_report_path_keeps_one_folder_per_model() -> None:
    path = auto_report_path(Path("skills/s"), "openai/gpt-4o\\mini", NOW)
    assert path == Path(f"skills/s/evals/results/openai_gpt-4o_mini/{TS}.json")


# --- write_new_report --------------------------------------------------------------------


@pytest.fixture
def no_umask() -> Iterator[None]:
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
@pytest.mark.usefixtures("no_umask")
def test_write_new_report_creates_parents_with_modes(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "report.json"
    written = write_new_report(target, "first\n")

    assert written == target
    assert target.read_text(encoding="utf-8") == "first\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "a" / "b").stat().st_mode) == 0o755


def test_write_new_report_never_overwrites(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    first = write_new_report(target, "one\n")
    second = write_new_report(target, "two\n")
    third = write_new_report(target, "three\n")

    assert first == target
    assert second == tmp_path / "report-2.json"
    assert third == tmp_path / "report-3.json"
    assert [p.read_text(encoding="utf-8") for p in (first, second, third)] == [
        "one\n",
        "two\n",
        "three\n",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "report-2.json",
        "report-3.json",
        "report.json",
    ]


def test_write_new_report_leaves_no_temp_files(tmp_path: Path) -> None:
    write_new_report(tmp_path / "r.json", "x")
    write_new_report(tmp_path / "r.json", "y")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r-2.json", "r.json"]


def test_write_new_report_removes_temp_file_when_linking_fails(tmp_path: Path) -> None:
    too_long = tmp_path / ("x" * 300 + ".json")
    with pytest.raises(OSError, match="too long"):
        write_new_report(too_long, "x")
    assert list(tmp_path.iterdir()) == []


def test_write_new_report_fails_when_parent_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file, not a folder", encoding="utf-8")
    with pytest.raises(NotADirectoryError):
        write_new_report(tmp_path / "blocker" / "r.json", "x")
    assert [p.name for p in tmp_path.iterdir()] == ["blocker"]


def test_write_new_report_writes_utf8_bytes(tmp_path: Path) -> None:
    path = write_new_report(tmp_path / "r.json", "caf\u00e9 \U0001f600\n")
    assert path.read_bytes() == "caf\u00e9 \U0001f600\n".encode()
