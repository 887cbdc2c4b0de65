"""The merge refuses a shard whose trial records do not hold together, naming the shard's file
and the record's line: each test edits a real shard file, as a hand or a mangled artifact
might, and merges (``python -m pytest_openkata merge``) as users do.

The shards: skill alpha with scenario-0 (one trial, criteria a: 10 and b: 5, both pass),
scenario-1 (three trials, by its scenario.json), scenario-2 (both criteria fail: 0 of 15) and
scenario-3 (its agent call is refused: an errored trial), three judge votes a trial. Shard 1
of 2 runs scenario-0 and scenario-2, shard 2 scenario-1 and scenario-3."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_scenario, write_skill
from tests.support.shards import NO_CACHE, merge, reports

FIRST = "out/1/shard-1-of-2.jsonl"
SECOND = "out/2/shard-2-of-2.jsonl"
Record = dict[str, Any]


@pytest.fixture
def shards(pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript) -> Path:
    """The project of the module docstring, run as two shards into ``out/1`` and ``out/2``."""
    alpha = write_skill(pytester.path, "alpha", {})
    for index in range(4):
        write_scenario(alpha, f"scenario-{index}", {"a": 10, "b": 5})
    three = alpha / "evals" / "scenario-1" / "scenario.json"
    three.write_text(json.dumps({"sandbox": False, "trials": 3}))
    script.by_context["ctx scenario-2"] = {"a": (False, "no a"), "b": (False, "no b")}
    (alpha / "evals" / "scenario-3" / "task.md").write_text("REFUSE this task.\n")
    script.agent_reply_when["REFUSE"] = Reply(400, {"error": {"message": "refused"}})
    args = ("skills", *eval_args(endpoint.base_url, "--eval-judge-votes", "3"), *NO_CACHE)
    for index in (1, 2):
        pytester.runpytest(*args, "--eval-shard", f"{index}/2", "--eval-shard-dir", f"out/{index}")
    return pytester.path


def _records(path: Path) -> list[Record]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write(path: Path, records: list[Record]) -> None:
    path.write_text("".join(json.dumps(record, sort_keys=True) + "\n" for record in records))


def _line(path: Path, scenario: str, trial: int) -> int:
    """The line of a scenario's trial record (own arm)."""
    for number, record in enumerate(_records(path), start=1):
        if record.get("scenario") == scenario and record.get("trial") == trial:
            return number
    raise AssertionError(f"no trial {trial} of {scenario} in {path}")


def _edit(path: Path, scenario: str, trial: int, change: Callable[[Record], None]) -> int:
    """Change a trial record in place; its line."""
    records = _records(path)
    line = _line(path, scenario, trial)
    change(records[line - 1])
    _write(path, records)
    return line


def _refused(root: Path, message: str) -> None:
    merged = merge(root, "out")
    assert merged.returncode == 2, merged.stdout + merged.stderr
    assert merged.stderr == f"merge: {message}\n"
    assert reports(root) == {}


def test_the_unedited_shards_merge(shards: Path) -> None:
    merged = merge(shards, "out")

    assert merged.returncode == 1, merged.stdout + merged.stderr  # scenario-2 and scenario-3
    assert merged.stdout.startswith("merged 2 shards: 4 scenarios\n")


def test_a_scenario_that_could_not_load_merges_with_its_one_errored_trial(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    # However many trials the settings ask for, such a scenario has one: none of them ran.
    alpha = write_skill(pytester.path, "alpha", {})
    for index in range(2):
        write_scenario(alpha, f"scenario-{index}", {"a": 1})
    (alpha / "evals" / "scenario-1" / "criteria.json").write_text("{")
    args = ("skills", *eval_args(endpoint.base_url, "--eval-trials", "2"), *NO_CACHE)
    for index in (1, 2):
        pytester.runpytest(*args, "--eval-shard", f"{index}/2", "--eval-shard-dir", f"out/{index}")

    merged = merge(pytester.path, "out")

    assert merged.returncode == 1, merged.stdout + merged.stderr
    assert merged.stderr == ""
    assert merged.stdout.splitlines()[-1] == "alpha 50% < 95%; 1 scenario errored: exit 1"


def test_a_trial_given_twice_in_one_shard_is_refused(shards: Path) -> None:
    path = shards / FIRST
    records = _records(path)
    line = _line(path, "scenario-0", 1)
    records.insert(line, dict(records[line - 1]))  # today: "mean over 2 trials", trials 1
    _write(path, records)

    _refused(
        shards,
        f"{FIRST}: line {line + 1}: trial 1 of skills/alpha::scenario-0 is there twice "
        f"(also line {line})",
    )


def test_a_trial_given_in_two_shards_is_refused(shards: Path) -> None:
    first = _records(shards / FIRST)
    copied = first[_line(shards / FIRST, "scenario-0", 1) - 1]
    second = _records(shards / SECOND)
    _write(shards / SECOND, [*second, copied])

    _refused(
        shards,
        f"{SECOND}: line {len(second) + 1}: trial 1 of skills/alpha::scenario-0 is there "
        f"twice (also {FIRST}, line {_line(shards / FIRST, 'scenario-0', 1)})",
    )


def test_a_missing_trial_is_refused(shards: Path) -> None:
    path = shards / SECOND
    records = _records(path)
    del records[_line(path, "scenario-1", 3) - 1]
    _write(path, records)

    _refused(
        shards,
        f"{SECOND}: line {_line(path, 'scenario-1', 2)}: skills/alpha::scenario-1 has "
        "2 trials, but its scenario.json says trials: 3",
    )


def test_trials_not_numbered_from_1_without_gaps_are_refused(shards: Path) -> None:
    _edit(shards / SECOND, "scenario-1", 2, lambda record: record.update(trial=4))

    _refused(
        shards,
        f"{SECOND}: line {_line(shards / SECOND, 'scenario-1', 3)}: skills/alpha::scenario-1 "
        "has trial 3 but no trial 2",
    )


def test_more_trials_than_the_settings_ran_are_refused(shards: Path) -> None:
    path = shards / FIRST
    records = _records(path)
    line = _line(path, "scenario-0", 1)
    records.insert(line, {**records[line - 1], "trial": 2})
    _write(path, records)

    _refused(
        shards,
        f"{FIRST}: line {line + 1}: trial 2 of skills/alpha::scenario-0, but the shards ran "
        "with trials: 1",
    )


def test_a_criterion_whose_points_contradict_its_verdict_is_refused(shards: Path) -> None:
    def pass_b(record: Record) -> None:
        record["criteria"][1]["passed"] = True  # still 0 of 5 points

    line = _edit(shards / FIRST, "scenario-2", 1, pass_b)

    _refused(
        shards,
        f"{FIRST}: line {line}: trial 1 of skills/alpha::scenario-2: criterion 'b' passed "
        "with 0 of 5 points: a criterion scores all its points when it passes and none when "
        "it fails",
    )


def test_a_criterion_whose_verdict_contradicts_its_votes_is_refused(shards: Path) -> None:
    def one_vote(record: Record) -> None:
        record["criteria"][1]["votes"] = [1, 3]  # still passed, with 5 of 5 points

    line = _edit(shards / FIRST, "scenario-0", 1, one_vote)

    _refused(
        shards,
        f"{FIRST}: line {line}: trial 1 of skills/alpha::scenario-0: criterion 'b' passed "
        "with 1 of 3 votes: a criterion passes by more than half of its votes",
    )


def test_a_trial_that_passed_with_no_points_is_refused(shards: Path) -> None:
    # Today the merge shows "Score: 0/15 (0%) PASS".
    line = _edit(shards / FIRST, "scenario-2", 1, lambda record: record.update(passed=True))

    _refused(
        shards,
        f"{FIRST}: line {line}: trial 1 of skills/alpha::scenario-2: it passed with 0 of 15 "
        "points (0%): a trial passes at 100% only",
    )


def test_a_trial_whose_score_is_not_its_criterias_is_refused(shards: Path) -> None:
    line = _edit(shards / FIRST, "scenario-2", 1, lambda record: record.update(score=15))

    _refused(
        shards,
        f"{FIRST}: line {line}: trial 1 of skills/alpha::scenario-2: it scores 15 of 15 "
        "points, its criteria 0 of 15",
    )


def test_a_trial_whose_percentage_is_not_its_scores_is_refused(shards: Path) -> None:
    line = _edit(shards / FIRST, "scenario-0", 1, lambda record: record.update(percentage=50))

    _refused(
        shards,
        f"{FIRST}: line {line}: trial 1 of skills/alpha::scenario-0: its percentage 50 is "
        "not that of 15 of 15 points",
    )


def test_an_errored_trial_that_claims_points_is_refused(shards: Path) -> None:
    def claim(record: Record) -> None:
        record.update(score=10, max_score=10, percentage=100.0)

    line = _edit(shards / SECOND, "scenario-3", 1, claim)

    _refused(
        shards,
        f"{SECOND}: line {line}: trial 1 of skills/alpha::scenario-3: it errored, yet claims "
        "10 of 10 points (100.0%)",
    )


def test_an_arm_the_shards_did_not_run_is_refused(shards: Path) -> None:
    line = _edit(shards / FIRST, "scenario-0", 1, lambda record: record.update(arm="without-skill"))

    _refused(
        shards,
        f"{FIRST}: line {line}: trial 1 of skills/alpha::scenario-0 (baseline arm "
        "without-skill): the shards ran no baseline arm (baseline setting)",
    )


def test_trials_of_one_scenario_that_describe_it_differently_are_refused(shards: Path) -> None:
    line = _edit(
        shards / SECOND, "scenario-1", 2, lambda record: record.update(description="edited")
    )

    _refused(
        shards,
        f"{SECOND}: line {line}: trial 2 of skills/alpha::scenario-1: its description differs "
        f"from that of trial 1 (line {_line(shards / SECOND, 'scenario-1', 1)})",
    )


def test_trials_of_one_scenario_graded_on_other_criteria_are_refused(shards: Path) -> None:
    # Today the merge fails with a traceback (the trials cannot be combined).
    line = _edit(shards / SECOND, "scenario-1", 2, lambda record: record["criteria"].pop())

    _refused(
        shards,
        f"{SECOND}: line {line}: trial 2 of skills/alpha::scenario-1 was graded on other "
        "criteria than its trial 1 (their names, order or points differ)",
    )
