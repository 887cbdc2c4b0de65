"""The CSV rows, rendered from run logs and read back with the csv module."""

from __future__ import annotations

import csv
import io
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.providers.reporters.csvfile import COLUMNS, CsvReporter, render_csv
from tests.support.results import judged, logged, report_of, reported, scenario

QUOTED = 'says "no", then, a comma\nand a second line'


def read_back(text: str) -> list[dict[str, str]]:
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader)
    assert header == list(COLUMNS)
    return [dict(zip(header, row, strict=True)) for row in reader]


def test_one_row_per_criterion_and_trial_with_the_reason_quoted() -> None:
    check = replace(judged("is-json", 10, False, QUOTED), kind="check")
    results = [
        scenario("scenario-b", [judged("x", 10, True, "fine")], skill="t"),
        scenario("scenario-a", [judged("x", 10, True, "met"), check]),
    ]
    text = render_csv(logged(results))

    rows = read_back(text)
    assert [(r["skill"], r["scenario"], r["criterion"]) for r in rows] == [
        ("s", "scenario-a", "x"),
        ("s", "scenario-a", "is-json"),
        ("t", "scenario-b", "x"),
    ]
    assert rows[1] == {
        "skill": "s",
        "scenario": "scenario-a",
        "trial": "1",
        "arm": "with-skill",
        "criterion": "is-json",
        "kind": "check",
        "passed": "false",
        "points": "0",
        "max_points": "10",
        "reason": QUOTED,
        "error": "",
        "skill_activation": "unknown",
    }
    assert rows[0]["kind"] == "judge"
    assert rows[0]["passed"] == "true"
    assert rows[0]["points"] == "10"
    # RFC 4180: the field is quoted, its quotes doubled; rows end with \r\n.
    assert '"says ""no"", then, a comma\nand a second line"' in text
    assert text.split("\r\n")[0] == ",".join(COLUMNS)
    assert text.endswith("\r\n")


def test_a_reason_holding_a_lone_carriage_return_is_quoted_and_reads_back() -> None:
    reason = "first\rsecond"
    text = render_csv(logged([scenario("scenario-a", [judged("x", 1, False, reason)])]))

    assert f'"{reason}"' in text
    assert read_back(text)[0]["reason"] == reason


def test_trials_and_arms_interleave_and_an_errored_trial_has_a_row_of_its_own() -> None:
    own = scenario(
        "scenario-a",
        [judged("x", 1, True), judged("y", 1, False, "no")],
        "agent: HTTP 500: upstream exploded",
    )
    baseline = replace(
        scenario(
            "scenario-a",
            [judged("x", 1, False), judged("y", 1, False)],
            [judged("x", 1, True), judged("y", 1, True)],
        ),
        arm="without-skill",
    )
    text = render_csv(logged([replace(own, baseline=baseline)]))

    rows = read_back(text)
    assert [(r["trial"], r["arm"], r["criterion"], r["passed"], r["error"]) for r in rows] == [
        ("1", "with-skill", "x", "true", ""),
        ("1", "with-skill", "y", "false", ""),
        ("1", "without-skill", "x", "false", ""),
        ("1", "without-skill", "y", "false", ""),
        ("2", "with-skill", "", "", "agent: HTTP 500: upstream exploded"),
        ("2", "without-skill", "x", "true", ""),
        ("2", "without-skill", "y", "true", ""),
    ]
    error_row = rows[4]
    assert (error_row["kind"], error_row["points"], error_row["max_points"]) == ("", "", "")
    assert error_row["reason"] == ""


def test_an_errored_scenario_is_one_row_with_its_error() -> None:
    text = render_csv(logged([scenario("scenario-a", "scenario.json: sandbox: not a boolean")]))

    [row] = read_back(text)
    assert row["error"] == "scenario.json: sandbox: not a boolean"
    assert (row["skill"], row["scenario"], row["trial"], row["arm"]) == (
        "s",
        "scenario-a",
        "1",
        "with-skill",
    )
    assert row["criterion"] == row["passed"] == ""


def test_the_same_outcome_gives_the_same_bytes() -> None:
    def run(seconds: float, finished_at: str) -> str:
        results = [scenario("scenario-a", [judged("x", 1, False, QUOTED)], seconds=seconds)]
        return render_csv(logged(results, finished_at=finished_at))

    assert run(1.0, "2026-12-01T10:00:00Z") == run(30.0, "2026-12-03T00:00:00Z")


def test_the_reporter_writes_relative_to_the_current_folder_and_never_overwrites(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    results = [scenario("scenario-a", [judged("x", 1, False, QUOTED)])]
    settings = EvalSettings(csv="out/rows.csv")
    first, second = report_of(results, settings), report_of(results, settings)

    first = reported(CsvReporter(), first)
    second = reported(CsvReporter(), second)

    assert first.written == {"CSV rows": Path("out/rows.csv")}
    assert second.written == {"CSV rows": Path("out/rows-2.csv")}
    text = (tmp_path / "out" / "rows.csv").read_bytes().decode()
    assert text == render_csv(first.logged)
    assert read_back(text)[0]["reason"] == QUOTED


def test_rows_that_cannot_be_written_are_recorded_once_on_the_run(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file, not a folder\n")
    results = [scenario("scenario-a", [judged("x", 1, True)]), scenario("b", "e", skill="t")]
    run = report_of(results, EvalSettings(csv=str(tmp_path / "blocker" / "rows.csv")))

    run = reported(CsvReporter(), run)

    assert run.written == {}
    [error] = run.errors
    assert error.startswith("could not write the CSV rows ")
    assert [summary.report_error for summary in run.summaries] == [None, None]


def test_without_the_setting_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    run = report_of([scenario("scenario-a", [judged("x", 1, True)])], EvalSettings())

    run = reported(CsvReporter(), run)

    assert run.written == {}
    assert list(tmp_path.iterdir()) == []
