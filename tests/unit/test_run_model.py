"""The one frozen run every reporter reads: made before the reporters, changed by none of them,
and equal to what its log gives back."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.results import FileChange
from pytest_openkata.core.reporting import ReportOutcome, Run
from pytest_openkata.core.runlog import read_run_log
from pytest_openkata.providers.reporters.results_json import ResultsJsonReporter
from pytest_openkata.providers.reporters.runlog import RunLogReporter
from tests.support.results import judged, report_of, reported, scenario

HOSTILE = "\x1b[2J\u2028 </script><b>bold</b> \ud800 \x85 done"


def _run(tmp_path: Path, **settings: object) -> Run:
    results = [
        scenario("scenario-a", [judged("x", 3, False, HOSTILE)], [judged("x", 3, True)]),
        scenario(
            "scenario-b",
            "agent: HTTP 503",
            output=HOSTILE,
            changes=(FileChange("notes.md", "added", "+" + HOSTILE),),
        ),
    ]
    return report_of(results, EvalSettings(model="m", log_dir="logs", **settings), tmp_path)


def test_the_run_is_frozen_and_so_are_its_summaries(tmp_path: Path) -> None:
    run = _run(tmp_path)

    with pytest.raises(dataclasses.FrozenInstanceError):
        run.complete = False  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.summaries[0].report_path = tmp_path  # type: ignore[misc]


def test_decisions_are_made_before_any_reporter_runs(tmp_path: Path) -> None:
    run = _run(tmp_path)

    # scenario-b errored for a reason outside the skill: its report is held back, and every
    # reporter sees so before the results JSON reporter has written anything.
    (summary,) = run.summaries
    assert summary.report_held is not None
    assert summary.report_held.startswith("1 scenario errored for reasons outside the skill")
    assert summary.report_path is None


def test_a_reporter_changes_nothing_of_the_run_it_reads(tmp_path: Path) -> None:
    run = _run(tmp_path)
    before = copy.deepcopy(run)

    outcome = ResultsJsonReporter().report(run)

    assert run == before
    assert outcome is not None
    assert list(outcome.skill_reports) == [run.summaries[0].skill_dir]
    finished = run.finished(outcome)
    assert finished.summaries[0].report_path == outcome.skill_reports[run.summaries[0].skill_dir]
    assert run.summaries[0].report_path is None  # the run it was given is as it was


def test_outcomes_join_without_losing_the_first_error_of_a_skill(tmp_path: Path) -> None:
    skill = tmp_path / "skills" / "s"
    first = ReportOutcome(errors=("a",), skill_errors={skill: "first"}, removed=(tmp_path / "x",))
    second = ReportOutcome(
        written={"run log": tmp_path / "log"}, errors=("b",), skill_errors={skill: "second"}
    )

    joined = first + second

    assert joined.errors == ("a", "b")
    assert joined.skill_errors == {skill: "first"}
    assert joined.written == {"run log": tmp_path / "log"}
    assert joined.removed == (tmp_path / "x",)


def test_reading_the_written_log_back_gives_the_run_the_reporters_rendered(
    tmp_path: Path,
) -> None:
    run = _run(tmp_path)

    done = reported(RunLogReporter(), run)

    read = read_run_log(done.written["run log"])
    assert dataclasses.replace(read, source=run.logged.source) == run.logged
    assert done.written["run log"].read_text() == run.log_text


def test_an_interrupted_run_holds_nothing_back_for_it_writes_no_results_json(
    tmp_path: Path,
) -> None:
    from pytest_openkata.core.reporting import make_run
    from pytest_openkata.core.summary import summarise

    done = _run(tmp_path)
    interrupted = make_run(
        summarise([r for s in done.summaries for r in s.results], 95, tmp_path),
        done.settings,
        done.finished_at,
        tmp_path,
        complete=False,
    )

    assert [s.report_held for s in interrupted.summaries] == [None]
    assert done.summaries[0].report_held is not None


def test_a_processs_own_refs_folder_is_removed_when_it_exits() -> None:
    import subprocess
    import sys

    script = (
        "from pytest_openkata.core.run import _private_refs_folder as f\n"
        "folder = f()\n"
        "(folder / 'skill').mkdir()\n"
        "print(folder)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )

    folder = Path(done.stdout.strip())
    assert folder.name.startswith("openkata-refs-")
    assert not folder.exists()
