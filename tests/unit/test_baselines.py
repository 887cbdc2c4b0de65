"""Loading the earlier run of ``--eval-compare`` from real reports and run logs on disk."""

from __future__ import annotations

import dataclasses
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.results import CriterionResult, ScenarioResult, TrialResult
from pytest_openkata.core.earlier import (
    AUTO,
    EarlierRun,
    EarlierRunError,
    compare_with_earlier,
    earlier_runs,
    newest_report,
)
from pytest_openkata.core.regression import IMPROVEMENT, NOT_COMPARABLE, REGRESSION, UNCHANGED
from pytest_openkata.core.report_paths import auto_report_path, output_report_path
from pytest_openkata.core.results_json import render_report, skill_report
from pytest_openkata.core.runlog import RunInfo, log_lines
from pytest_openkata.core.summary import SkillSummary, summarise
from pytest_openkata.core.trials import combine_trials, scored_trial
from pytest_openkata.infra.atomic import write_new_report

MODEL = "m"
DIGESTS = {"prompt": "p", "task": "t", "criteria": "c", "inputs": "i"}


def _trial(index: int, a: bool, b: bool) -> TrialResult:
    return scored_trial(
        index, [CriterionResult.judged("a", 5, a, ""), CriterionResult.judged("b", 5, b, "")]
    )


def _result(
    skill_dir: Path,
    name: str,
    *trials: tuple[bool, bool],
    on_disk: tuple[str, ...] = ("x",),
    digests: dict[str, str] | None = None,
) -> ScenarioResult:
    result = combine_trials(
        [_trial(i, a, b) for i, (a, b) in enumerate(trials, start=1)],
        skill=skill_dir.name,
        skill_dir=str(skill_dir),
        name=name,
        description=f"scenario {name}",
        skill_scenarios=list(on_disk),
    )
    return dataclasses.replace(result, digests=dict(digests or {}))


def _summaries(rootdir: Path, *results: ScenarioResult) -> list[SkillSummary]:
    return summarise(results, 95, rootdir)


def _at(hour: int) -> datetime:
    return datetime(2026, 3, 1, hour, 0, 0, tzinfo=UTC)


def _write_report(
    summary: SkillSummary, when: datetime, model: str = MODEL, path: Path | None = None
) -> Path:
    """The results JSON of ``summary``, written as a run of ``model`` writes it."""
    settings = EvalSettings(model=model)
    text = render_report(skill_report(summary, settings, when))
    target = path or auto_report_path(summary.skill_dir, model, when)
    return write_new_report(target, text)


def _skill(rootdir: Path, name: str = "s") -> Path:
    skill = rootdir / "skills" / name
    (skill / "evals" / "scenario-x").mkdir(parents=True)
    return skill


def _percentages(run: EarlierRun) -> list[float]:
    return [result.percentage for result in run.results]


# --- auto --------------------------------------------------------------------------------------


def test_auto_takes_the_newest_earlier_report_of_the_same_model(tmp_path: Path) -> None:
    skill = _skill(tmp_path)

    def report(a: bool, b: bool, when: datetime, model: str = MODEL) -> Path:
        summary = _summaries(tmp_path, _result(skill, "x", (a, b)))[0]
        return _write_report(summary, when, model)

    oldest = report(True, True, _at(9))
    second = report(True, False, _at(10))
    third = report(False, False, _at(10))  # the same second: written as ...-2.json
    report(True, True, _at(11), model="other")  # newer, of another model
    assert third.name == second.name.replace(".json", "-2.json")

    current = _summaries(tmp_path, _result(skill, "x", (True, True)))
    earlier = earlier_runs(AUTO, current, model=MODEL, rootdir=tmp_path)

    run = earlier[skill]
    assert run.label == third.name
    assert _percentages(run) == [0.0]
    assert run.note == ""
    # Without the -2 one, the report before them; without both, the oldest.
    assert newest_report(third.parent, [third]) == second
    assert newest_report(third.parent, [third, second]) == oldest


def test_auto_reads_the_folder_of_a_model_with_a_slash(tmp_path: Path) -> None:
    skill = _skill(tmp_path)
    summary = _summaries(tmp_path, _result(skill, "x", (True, False)))[0]
    written = _write_report(summary, _at(9), model="openai/gpt-4o")
    assert written.parent.name == "openai_gpt-4o"

    earlier = earlier_runs(AUTO, [summary], model="openai/gpt-4o", rootdir=tmp_path)

    assert earlier[skill].label == written.name
    assert _percentages(earlier[skill]) == [50.0]


def test_auto_leaves_out_files_not_named_as_reports(tmp_path: Path) -> None:
    skill = _skill(tmp_path)
    summary = _summaries(tmp_path, _result(skill, "x", (True, False)))[0]
    report = _write_report(summary, _at(9))
    (report.parent / "results-2026-03-01T230000.json").write_text("{}")
    (report.parent / "notes.txt").write_text("x")

    assert newest_report(report.parent) == report


def test_auto_without_an_earlier_report_gives_no_comparison_and_says_so(tmp_path: Path) -> None:
    skill = _skill(tmp_path)
    summary = _summaries(tmp_path, _result(skill, "x", (True, True)))[0]
    _write_report(summary, _at(9), model="other")

    changes = compare_with_earlier([summary], EvalSettings(model=MODEL, compare=AUTO), tmp_path)

    assert changes[skill].note == (
        "no earlier run of the whole skill with model m in skills/s/evals/results/m/ or "
        ".openkata/runs/"
    )
    assert changes[skill].scenarios == ()
    assert not changes[skill].failed


def test_auto_names_a_newest_report_that_cannot_be_read(tmp_path: Path) -> None:
    skill = _skill(tmp_path)
    summary = _summaries(tmp_path, _result(skill, "x", (True, True)))[0]
    _write_report(summary, _at(9))
    broken = auto_report_path(skill, MODEL, _at(10))
    broken.write_text('{"skill": "s"}')

    with pytest.raises(EarlierRunError) as caught:
        earlier_runs(AUTO, [summary], model=MODEL, rootdir=tmp_path)

    message = str(caught.value)
    assert message.startswith(
        "skills/s/evals/results/m/2026-03-01T100000.json: neither a results JSON nor a run log ("
    )
    assert "skill_version" in message  # the first field that is wrong


def test_auto_compares_each_skill_with_its_own_earlier_report(tmp_path: Path) -> None:
    first, second = _skill(tmp_path, "first"), _skill(tmp_path, "second")
    earlier = _summaries(
        tmp_path, _result(first, "x", (True, True)), _result(second, "x", (False, False))
    )
    for summary in earlier:
        _write_report(summary, _at(9))
    current = _summaries(
        tmp_path, _result(first, "x", (True, False)), _result(second, "x", (True, False))
    )

    changes = compare_with_earlier(current, EvalSettings(model=MODEL, compare=AUTO), tmp_path)

    assert [s.tier for s in changes[first].scenarios] == [REGRESSION]
    assert [s.tier for s in changes[second].scenarios] == [IMPROVEMENT]
    assert changes[first].baseline == "2026-03-01T090000.json"
    assert changes[first].skill == "first"


def _write_run_log(
    rootdir: Path, when: datetime, *results: ScenarioResult, model: str = MODEL, category: str = ""
) -> Path:
    """A run log in the default log folder, as a run of ``model`` and ``category`` leaves it."""
    info = RunInfo(
        finished_at=when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        settings={"model": model, "category": category},
    )
    path = rootdir / ".openkata" / "runs" / when.strftime("%Y%m%dT%H%M%SZ.jsonl")
    return write_new_report(path, log_lines(info, results, rootdir))


def _auto_label(rootdir: Path, summaries: list[SkillSummary], **settings: str) -> str:
    changes = compare_with_earlier(
        summaries, EvalSettings(model=MODEL, compare=AUTO, **settings), rootdir
    )
    (change,) = changes.values()
    return change.baseline


def test_auto_takes_run_logs_of_the_same_model_and_categories_only(tmp_path: Path) -> None:
    skill = _skill(tmp_path)
    ours = _write_run_log(tmp_path, _at(9), _result(skill, "x", (True, True)))
    _write_run_log(tmp_path, _at(10), _result(skill, "x", (True, True)), model="other")
    intent = _write_run_log(tmp_path, _at(11), _result(skill, "x", (True, True)), category="INTENT")
    current = _summaries(tmp_path, _result(skill, "x", (True, False)))

    assert _auto_label(tmp_path, current) == ours.name
    assert _auto_label(tmp_path, current, category="INTENT") == intent.name


def test_auto_takes_a_report_before_a_log_of_the_same_second(tmp_path: Path) -> None:
    skill = _skill(tmp_path)
    earlier = _summaries(tmp_path, _result(skill, "x", (True, True)))
    report = _write_report(earlier[0], _at(9))
    _write_run_log(tmp_path, _at(9), _result(skill, "x", (True, True)))

    assert _auto_label(tmp_path, _summaries(tmp_path, _result(skill, "x", (True, True)))) == (
        report.name
    )


def test_auto_compares_the_whole_skill_with_its_last_whole_run_after_a_scenario_is_added(
    tmp_path: Path,
) -> None:
    skill = _skill(tmp_path)
    whole = _write_run_log(tmp_path, _at(9), _result(skill, "x", (True, True), on_disk=("x",)))
    # Since then y was added, and a run of x alone left its log.
    _write_run_log(tmp_path, _at(10), _result(skill, "x", (True, True), on_disk=("x", "y")))
    current = _summaries(
        tmp_path,
        _result(skill, "x", (True, True), on_disk=("x", "y")),
        _result(skill, "y", (True, True), on_disk=("x", "y")),
    )

    changes = compare_with_earlier(current, EvalSettings(model=MODEL, compare=AUTO), tmp_path)

    assert changes[skill].baseline == whole.name
    assert [(s.name, s.tier) for s in changes[skill].scenarios] == [
        ("x", UNCHANGED),
        ("y", "new"),
    ]


# --- a results JSON ----------------------------------------------------------------------------


def test_a_results_json_is_read_with_its_trials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    skill = _skill(tmp_path)
    earlier = _summaries(tmp_path, _result(skill, "x", *[(True, True)] * 3))[0]
    monkeypatch.chdir(tmp_path)  # a relative path is relative to the current folder
    written = _write_report(earlier, _at(9), path=output_report_path("out/", _at(9)))
    assert written.parent.absolute() == tmp_path / "out"
    current = _summaries(tmp_path, _result(skill, "x", (True, True), (True, False), (True, True)))

    changes = compare_with_earlier(
        current,
        EvalSettings(model=MODEL, compare=f"out/{written.name}", regression_tolerance=50),
        tmp_path,
    )

    (change,) = changes[skill].scenarios
    assert changes[skill].baseline == written.name == "results-2026-03-01T090000.json"
    assert change.tier == UNCHANGED
    assert change.p_value == 1.0  # 6 of 6 verdicts passed before, 5 of 6 now
    assert [c.before_passes for c in change.criteria] == [(3, 3), (3, 3)]
    assert [c.after_passes for c in change.criteria] == [(3, 3), (2, 3)]
    assert change.interval is not None


def test_a_results_json_without_digests_is_compared_by_its_criteria(tmp_path: Path) -> None:
    skill = _skill(tmp_path)
    earlier = _summaries(tmp_path, _result(skill, "x", (True, True)))[0]
    written = _write_report(earlier, _at(9))
    renamed = combine_trials(
        [scored_trial(1, [CriterionResult.judged("a", 10, True, "")])],
        skill="s",
        skill_dir=str(skill),
        name="x",
        description="x",
        skill_scenarios=["x"],
    )
    current = _summaries(tmp_path, dataclasses.replace(renamed, digests=DIGESTS))

    changes = compare_with_earlier(
        current, EvalSettings(model=MODEL, compare=str(written)), tmp_path
    )

    (change,) = changes[skill].scenarios
    assert change.tier == NOT_COMPARABLE
    assert change.reason == "criteria removed: b; points changed: a 5 -> 10"


def test_a_results_json_applies_to_its_skill_only(tmp_path: Path) -> None:
    first, second = _skill(tmp_path, "first"), _skill(tmp_path, "second")
    report = _write_report(_summaries(tmp_path, _result(first, "x", (True, True)))[0], _at(9))
    current = _summaries(
        tmp_path, _result(first, "x", (True, True)), _result(second, "x", (True, True))
    )

    changes = compare_with_earlier(current, EvalSettings(compare=str(report)), tmp_path)

    assert [s.tier for s in changes[first].scenarios] == [UNCHANGED]
    assert changes[second].note == f"not in {report.name}"
    assert changes[second].scenarios == ()


def test_a_results_json_of_a_skill_that_did_not_run_is_an_error(tmp_path: Path) -> None:
    other, skill = _skill(tmp_path, "other"), _skill(tmp_path, "s")
    report = _write_report(_summaries(tmp_path, _result(other, "x", (True, True)))[0], _at(9))
    current = _summaries(tmp_path, _result(skill, "x", (True, True)))

    with pytest.raises(EarlierRunError) as caught:
        earlier_runs(str(report), current, model=MODEL, rootdir=tmp_path)

    assert str(caught.value) == (
        f"{report}: a report of skill 'other', which this run did not run (it ran s)"
    )


# --- a run log -------------------------------------------------------------------------------


def _write_log(rootdir: Path, *results: ScenarioResult) -> Path:
    path = rootdir / "logs" / "20260301T090000Z.jsonl"
    text = log_lines(RunInfo(finished_at="2026-03-01T09:00:00Z"), results, rootdir)
    return write_new_report(path, text)


def test_a_run_log_is_matched_by_each_skill_s_folder(tmp_path: Path) -> None:
    first, second, third = (_skill(tmp_path, n) for n in ("first", "second", "third"))
    log = _write_log(
        tmp_path,
        _result(first, "x", (True, True), digests=DIGESTS),
        _result(second, "x", (True, False), digests=DIGESTS),
    )
    current = _summaries(
        tmp_path,
        _result(first, "x", (True, False), digests=DIGESTS),
        _result(second, "x", (True, False), digests={**DIGESTS, "task": "t2"}),
        _result(third, "x", (True, True), digests=DIGESTS),
    )

    changes = compare_with_earlier(current, EvalSettings(compare=str(log)), tmp_path)

    assert [s.tier for s in changes[first].scenarios] == [REGRESSION]
    assert changes[first].baseline == "20260301T090000Z.jsonl"
    (moved,) = changes[second].scenarios
    assert (moved.tier, moved.reason) == (NOT_COMPARABLE, "task.md changed")  # a log has digests
    assert changes[third].note == "not in 20260301T090000Z.jsonl"
    machine = str(tmp_path)
    assert all(machine not in json.dumps(c.to_dict()) for c in changes.values())


def test_a_run_log_of_other_skills_is_an_error(tmp_path: Path) -> None:
    other, skill = _skill(tmp_path, "other"), _skill(tmp_path, "s")
    log = _write_log(tmp_path, _result(other, "x", (True, True)))
    current = _summaries(tmp_path, _result(skill, "x", (True, True)))

    with pytest.raises(EarlierRunError) as caught:
        earlier_runs(str(log), current, model=MODEL, rootdir=tmp_path)

    assert str(caught.value) == (
        f"{log}: a run log of skills/other, none of which this run ran (it ran skills/s)"
    )


def test_a_broken_run_log_is_named_with_its_line(tmp_path: Path) -> None:
    skill = _skill(tmp_path)
    log = _write_log(tmp_path, _result(skill, "x", (True, True)))
    log.write_text(log.read_text() + "not json\n")
    current = _summaries(tmp_path, _result(skill, "x", (True, True)))

    with pytest.raises(EarlierRunError, match=rf"^{log}: line 3: not JSON"):
        earlier_runs(str(log), current, model=MODEL, rootdir=tmp_path)


# --- what is not an earlier run ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ("just text\n", "neither a results JSON nor a run log (Invalid JSON"),
        ('{"skill": "s", "scenarios": []}', "neither a results JSON nor a run log (skill_version"),
        ("", "neither a results JSON nor a run log"),
    ],
)
def test_a_file_that_is_no_earlier_run_is_named(
    tmp_path: Path, content: str | None, message: str
) -> None:
    skill = _skill(tmp_path)
    path = tmp_path / "earlier.json"
    if content is not None:
        path.write_text(content)
    current = _summaries(tmp_path, _result(skill, "x", (True, True)))

    with pytest.raises(EarlierRunError) as caught:
        earlier_runs(str(path), current, model=MODEL, rootdir=tmp_path)

    assert str(caught.value).startswith(f"{path}: {message}")


def test_a_folder_is_no_earlier_run(tmp_path: Path) -> None:
    skill = _skill(tmp_path)
    current = _summaries(tmp_path, _result(skill, "x", (True, True)))

    with pytest.raises(EarlierRunError, match="a folder, not a results JSON or a run log"):
        earlier_runs(str(tmp_path), current, model=MODEL, rootdir=tmp_path)


def test_without_the_setting_nothing_is_compared(tmp_path: Path) -> None:
    skill = _skill(tmp_path)
    current = _summaries(tmp_path, _result(skill, "x", (True, True)))

    assert compare_with_earlier(current, EvalSettings(), tmp_path) == {}


def test_within_one_second_a_report_goes_with_its_own_runs_log_and_a_later_log_goes_first(
    tmp_path: Path,
) -> None:
    """Names give seconds only. A run writes its report, then its log; a second run in the
    same second writes only a log (a partial run). The later run is the newest, and the
    report stands for its own run, ahead of that run's log."""
    from pytest_openkata.core.earlier import _LOG, _REPORT, _newest_first

    second = datetime(2026, 12, 3, 20, 58, 7)
    earlier = datetime(2026, 12, 3, 20, 58, 6)
    files = {
        "old.jsonl": (earlier, 1_000),
        "report.json": (second, 2_000),
        "own.jsonl": (second, 2_500),
        "later.jsonl": (second, 3_000),
    }
    for name, (_when, written) in files.items():
        path = tmp_path / name
        path.write_text("")
        os.utime(path, ns=(written, written))

    def entry(name: str, n: int) -> tuple[tuple[datetime, int, int], Path]:
        return (files[name][0], 0, n), tmp_path / name

    ordered = _newest_first(
        [entry("report.json", 1)],
        [entry("old.jsonl", 1), entry("own.jsonl", 1), entry("later.jsonl", 2)],
    )

    assert [(path.name, kind) for path, kind in ordered] == [
        ("later.jsonl", _LOG),
        ("report.json", _REPORT),
        ("own.jsonl", _LOG),
        ("old.jsonl", _LOG),
    ]
