"""Edge cases of the run log (skills of one name, a skill at the rootdir, extra records,
malformed records), of the workspace diff (line separators, a missing last newline) and of
the comparison's terminal lines (a small fall that must not read as none)."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest

from pytest_openkata.contracts.results import (
    CallStats,
    CriterionResult,
    FileChange,
    FileContent,
    ScenarioResult,
    TrialTrace,
    Usage,
    WorkspaceDiff,
)
from pytest_openkata.core.regression import REGRESSION, ScenarioChange, SkillChanges
from pytest_openkata.core.runlog import (
    CHANGES_EXTRA,
    RunInfo,
    RunLogError,
    ScenarioLines,
    log_lines,
    parse_run_log,
    skill_summaries,
)
from pytest_openkata.core.trials import combine_trials, scored_trial
from pytest_openkata.core.workspace import file_changes
from pytest_openkata.providers.reporters.changes import changes_lines
from pytest_openkata.providers.reporters.csvfile import render_csv


def _result(skill_dir: str, *, passed: bool = True, name: str = "scenario-a") -> ScenarioResult:
    criteria = [CriterionResult("x", passed, 1 if passed else 0, 1, "ok" if passed else "no")]
    return combine_trials(
        [scored_trial(1, criteria)],
        skill=Path(skill_dir).name,
        skill_dir=skill_dir,
        name=name,
        description="a scenario",
        skill_scenarios=[name],
    )


# --- the run log -------------------------------------------------------------------------------


def test_the_run_log_takes_the_lines_the_live_log_rendered_and_reads_the_same() -> None:
    root = Path("/r")
    info = RunInfo("2026-01-01T00:00:00Z")
    results = [_result("/r/skills/b", name="z"), _result("/r/skills/a", passed=False)]
    fresh = log_lines(info, results, root)
    live = ScenarioLines(root)
    written = [live.of(result) for result in reversed(results)]  # in the order they finished

    assert log_lines(info, results, root, rendered=live) == fresh
    assert [live.of(result) for result in reversed(results)] == written
    assert all(live.of(result) is text for result, text in zip(results[::-1], written, strict=True))
    assert fresh.endswith(written[0] + written[1])  # the log sorts them by skill
    # Lines relative to another rootdir are not this log's: its own are rendered instead.
    elsewhere = log_lines(info, results, Path("/r/skills"))
    assert elsewhere != fresh
    assert log_lines(info, results, Path("/r/skills"), rendered=live) == elsewhere


def test_two_skills_of_one_name_keep_their_own_comparison_read_back_from_the_log() -> None:
    root = Path("/r")
    first, second = _result("/r/team-a/skills/review"), _result("/r/team-b/skills/review")
    extras = {
        CHANGES_EXTRA: [
            {
                **SkillChanges("review", "a.json", 0.0, (), note="compared with team a").to_dict(),
                "skill_dir": "team-a/skills/review",
            },
            {
                **SkillChanges("review", "b.json", 0.0, (), note="compared with team b").to_dict(),
                "skill_dir": "team-b/skills/review",
            },
        ]
    }

    run = parse_run_log(log_lines(RunInfo("2026-01-01T00:00:00Z"), [first, second], root, extras))

    notes = {
        summary.skill_dir.as_posix(): summary.changes and summary.changes.note
        for summary in skill_summaries(run)
    }
    assert notes == {
        "team-a/skills/review": "compared with team a",
        "team-b/skills/review": "compared with team b",
    }


def test_two_skills_of_one_name_outside_the_rootdir_stay_apart_in_the_log() -> None:
    passing = _result("/a/skills/review", passed=True)
    failing = _result("/b/skills/review", passed=False)

    run = parse_run_log(
        log_lines(RunInfo("2026-01-01T00:00:00Z"), [passing, failing], Path("/elsewhere"))
    )

    assert sorted(result.percentage for result in run.results) == [0.0, 100.0]
    assert [len(result.trials) for result in run.results] == [1, 1]


def test_a_skill_at_the_rootdir_keeps_its_name_read_back_from_the_log() -> None:
    result = _result("/r/skills/review")

    run = parse_run_log(
        log_lines(RunInfo("2026-01-01T00:00:00Z"), [result], Path("/r/skills/review"))
    )

    [summary] = skill_summaries(run)
    assert summary.name == "review"
    [_header, row] = render_csv(run).splitlines()
    assert row.startswith("review,scenario-a,")


def test_an_extra_record_with_a_kind_field_reads_back_as_it_was_written() -> None:
    extras = {"notes": [{"kind": "warning", "text": "judge was slow"}]}

    run = parse_run_log(log_lines(RunInfo("2026-01-01T00:00:00Z"), [], Path("/r"), extras))

    assert dict(run.extras) == extras


def test_a_trial_record_holds_what_dataclasses_asdict_makes_of_the_trial() -> None:
    # The log converts a trial without asdict's deep copy: every field, nested dataclasses,
    # tuples, dicts and None must come out as asdict gives them.
    trace = TrialTrace(
        output="out",
        judged="judged text",
        changes=(FileChange("a.txt", "added", "+a"),),
        answers={"judge": [{"verdicts": [1, "x", None]}], "checks": []},
        seconds=1.5,
        engine="e1",
        lost_engines=("engine e0: gone",),
    )
    usage = Usage(CallStats(1, 0, 10, None, 0.5, None), CallStats(2, 1, None, 3, 0.25, 0.01))
    criteria = [CriterionResult("x", True, 2, 2, "ok", votes=(2, 3), category="INTENT")]
    trial = replace(scored_trial(1, criteria, trace=trace, usage=usage), judge_errors=1)
    result = replace(_result("/r/skills/s"), trials=[trial])

    text = log_lines(RunInfo("2026-01-01T00:00:00Z"), [result], Path("/r"))

    record = json.loads(text.splitlines()[1])
    expected = json.loads(json.dumps(asdict(trial)))
    expected["trial"] = expected.pop("index")
    assert {key: record[key] for key in expected} == expected


def _trial_line(**changes: object) -> str:
    text = log_lines(RunInfo("2026-01-01T00:00:00Z"), [_result("/r/skills/s")], Path("/r"))
    head, trial = text.splitlines()
    return head + "\n" + json.dumps({**json.loads(trial), **changes}) + "\n"


@pytest.mark.parametrize(
    "changes",
    [{"trace": []}, {"skill_dir": ["skills", "s"]}, {"skill_scenarios": 3}],
    ids=["trace-is-a-list", "skill-dir-is-a-list", "skill-scenarios-is-a-number"],
)
def test_a_malformed_trial_record_is_a_run_log_error_naming_the_line(
    changes: dict[str, object],
) -> None:
    with pytest.raises(RunLogError, match="line 2"):
        parse_run_log(_trial_line(**changes), source="old.jsonl")


@pytest.mark.parametrize("edit", ["fewer", "more"])
def test_trials_of_one_scenario_graded_on_other_criteria_are_a_run_log_error(edit: str) -> None:
    # Combined criterion by criterion, they crashed the reader (fewer) or lost one (more).
    criteria = [CriterionResult(name, True, 1, 1, "ok") for name in ("x", "y")]
    result = combine_trials(
        [scored_trial(1, criteria), scored_trial(2, criteria)],
        skill="s",
        skill_dir="/r/skills/s",
        name="scenario-a",
        description="a scenario",
    )
    lines = log_lines(RunInfo("2026-01-01T00:00:00Z"), [result], Path("/r")).splitlines()
    record = json.loads(lines[2])
    first = record["criteria"][0]
    record["criteria"] = (
        [first] if edit == "fewer" else [*record["criteria"], {**first, "name": "z"}]
    )
    lines[2] = json.dumps(record)

    with pytest.raises(RunLogError) as raised:
        parse_run_log("\n".join(lines) + "\n", source="old.jsonl")

    assert str(raised.value) == (
        "old.jsonl: line 3: trial 2 of skills/s::scenario-a was graded on other criteria than "
        "its trial 1 (their names, order or points differ)"
    )


# --- the workspace diff ------------------------------------------------------------------------


def test_a_line_holding_a_form_feed_or_a_line_separator_is_one_line_of_the_diff() -> None:
    before = {"notes.txt": "title\x0cold\nsee \u2028 here\n".encode()}
    after = FileContent("title\x0cnew\nsee \u2028 there\n".encode())

    [change] = file_changes(before, WorkspaceDiff(modified=[("notes.txt", after)]))

    assert change.diff.split("\n")[2:] == [
        "@@ -1,2 +1,2 @@",
        "-title\x0cold",
        "-see \u2028 here",
        "+title\x0cnew",
        "+see \u2028 there",
        "",
    ]


def test_a_last_line_without_a_newline_is_marked_in_the_diff() -> None:
    before = {"out.txt": b"done\n"}
    after = FileContent(b"done")

    [change] = file_changes(before, WorkspaceDiff(modified=[("out.txt", after)]))

    assert "\\ No newline at end of file" in change.diff


# --- the comparison's terminal lines -----------------------------------------------------------


def test_a_small_regression_does_not_read_as_no_change_in_the_terminal() -> None:
    change = ScenarioChange("scenario-a", REGRESSION, 100.0, 99.96, -0.04)
    changes = SkillChanges("s", "earlier.json", 0.0, (change,))

    lines = ["".join(text for text, _colour in line) for line in changes_lines(changes)]

    [regression] = [line for line in lines if "regression:" in line]
    assert "100% -> 100%" not in regression


def test_a_graders_answers_in_mapping_and_sequence_subclasses_are_logged_as_json() -> None:
    from collections import OrderedDict, defaultdict, namedtuple

    from tests.support.results import judged

    Pair = namedtuple("Pair", "left right")
    answers: dict[str, list[Any]] = {
        "mine": [OrderedDict(a=1), defaultdict(list, b=[Pair(1, 2)]), Pair("x", "y")]
    }
    trial = scored_trial(1, [judged("x", 1, True)], trace=TrialTrace(answers=answers))
    result = combine_trials([trial], skill="s", skill_dir="/r/s", name="scenario-a",
                            description="d", skill_scenarios=["scenario-a"])  # fmt: skip

    text = log_lines(RunInfo("2026-01-01T00:00:00Z"), [result], Path("/r"))

    [_, record] = [json.loads(line) for line in text.splitlines()]
    assert record["trace"]["answers"] == {"mine": [{"a": 1}, {"b": [[1, 2]]}, ["x", "y"]]}
