"""Shards for CI matrices (``--eval-shard I/N``, ``python -m pytest_openkata merge``), run as
users run them against the scripted endpoint: the shards split the selection into balanced
parts, write no results JSON of their own, and merge into the reports an unsharded run writes,
byte for byte apart from the timestamp and timings, with its exit status; shards that are not
the parts of one run are refused, saying why."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_scenario, write_skill
from tests.support.shards import NO_CACHE, clear_reports, merge, reports, timeless


def _project(root: Path, script: EvalScript, *, failing: bool) -> None:
    """Two skills: alpha with five scenarios (one of three trials; one failing a criterion
    when ``failing``), beta with two (one whose agent call is refused: an errored scenario)."""
    alpha = write_skill(root, "alpha", {})
    for index in range(5):
        write_scenario(alpha, f"scenario-{index}", {"a": 10, "b": 5})
    three = alpha / "evals" / "scenario-1" / "scenario.json"
    three.write_text(json.dumps({"description": "three trials", "sandbox": False, "trials": 3}))
    if failing:
        script.by_context["ctx scenario-3"] = {"b": (False, "b was ignored")}
    beta = write_skill(root, "beta", {}, changelog="# Changelog\n\n## [0.3.0] - 2026-10-01\n")
    write_scenario(beta, "scenario-x", {"c": 1})
    errored = write_scenario(beta, "scenario-y", {"c": 1})
    (errored / "task.md").write_text("REFUSE this task.\n")
    script.agent_reply_when["REFUSE"] = Reply(400, {"error": {"message": "refused"}})


@pytest.mark.parametrize("failing", [True, False], ids=["gate-fails", "gate-passes"])
def test_shards_merge_into_the_unsharded_runs_reports_and_exit_status(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript, failing: bool
) -> None:
    _project(pytester.path, script, failing=failing)
    args = (*eval_args(endpoint.base_url), *NO_CACHE)

    whole = pytester.runpytest("skills", *args)
    unsharded = reports(pytester.path)
    assert len(unsharded) == 2  # alpha published; beta held back (its errored scenario)
    clear_reports(pytester.path)

    for index in (1, 2, 3):
        shard = pytester.runpytest(
            "skills", *args, "--eval-shard", f"{index}/3", "--eval-shard-dir", f"out/{index}"
        )
        shard.stdout.fnmatch_lines([f"shard {index}/3: out/{index}/shard-{index}-of-3.jsonl"])
        assert reports(pytester.path) == {}  # a shard publishes nothing
    merged = merge(pytester.path, "out/1", "out/2", "out/3")

    assert whole.ret == pytest.ExitCode.TESTS_FAILED  # beta's errored scenario, at least
    assert merged.returncode == whole.ret, merged.stdout + merged.stderr
    sharded = reports(pytester.path)
    assert sorted(sharded) == sorted(unsharded)
    for name, text in unsharded.items():
        assert timeless(sharded[name]) == timeless(text), name
    assert merged.stdout.startswith("merged 3 shards: 7 scenarios\n")
    # The gate's last line is the unsharded run's.
    assert merged.stdout.splitlines()[-1] == whole.outlines[-1]
    alpha = "alpha 93% < 95%" if failing else "alpha 100% >= 95%"
    assert whole.outlines[-1] == f"{alpha}; beta 50% < 95%; 1 scenario errored: exit 1"


def test_a_run_without_errors_exits_0_merged_as_unsharded(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    alpha = write_skill(pytester.path, "alpha", {})
    for index in range(4):
        write_scenario(alpha, f"scenario-{index}", {"a": 1})
    args = (*eval_args(endpoint.base_url), *NO_CACHE)
    assert pytester.runpytest("skills", *args).ret == pytest.ExitCode.OK
    unsharded = reports(pytester.path)
    clear_reports(pytester.path)
    for index in (1, 2):
        pytester.runpytest("skills", *args, "--eval-shard", f"{index}/2")

    merged = merge(pytester.path, ".openkata/shards")

    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert merged.stdout.splitlines()[-1] == "alpha 100% >= 95%: exit 0"
    assert [timeless(t) for t in reports(pytester.path).values()] == [
        timeless(t) for t in unsharded.values()
    ]


def test_a_broken_skill_merged_from_shards_publishes_nothing(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    broken = write_skill(pytester.path, "broken", {"scenario-0": {"a": 1}})
    (broken / "SKILL.md").unlink()
    write_skill(pytester.path, "fine", {"scenario-0": {"a": 1}})
    args = (*eval_args(endpoint.base_url), *NO_CACHE)
    for index in (1, 2):
        pytester.runpytest("skills", *args, "--eval-shard", f"{index}/2")

    merged = merge(pytester.path, ".openkata/shards")

    assert merged.returncode == 1, merged.stdout + merged.stderr
    assert "Report not published: the skill's SKILL.md is missing or broken" in merged.stdout
    assert list(reports(pytester.path)) == ["skills/fine/evals/results/claude-sonnet-4.6/TIME.json"]


def _collected(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if "::" in line]


def test_shards_are_balanced_parts_spread_within_each_skill(
    pytester: pytest.Pytester,
) -> None:
    alpha = write_skill(pytester.path, "alpha", {})
    for index in range(5):
        write_scenario(alpha, f"scenario-{index}", {"a": 1})
    beta = write_skill(pytester.path, "beta", {})
    for index in range(3):
        write_scenario(beta, f"scenario-{index}", {"a": 1})
    everything = _collected(pytester.runpytest("skills", "--collect-only", "-q"))

    parts = [
        _collected(pytester.runpytest("skills", "--collect-only", "-q", "--eval-shard", f"{i}/3"))
        for i in (1, 2, 3)
    ]

    assert sorted(id for part in parts for id in part) == sorted(everything)
    assert sorted(len(part) for part in parts) == [2, 3, 3]
    for part in parts:  # no shard holds all of alpha's scenarios, nor all of beta's
        assert 1 <= sum("alpha" in id for id in part) <= 2
        assert sum("beta" in id for id in part) == 1
    again = _collected(pytester.runpytest("skills", "--collect-only", "-q", "--eval-shard", "2/3"))
    assert again == parts[1]  # stable
    # -k selects first; the shards split what it left.
    picked = [
        _collected(
            pytester.runpytest(
                "skills", "--collect-only", "-q", "-k", "alpha", "--eval-shard", f"{i}/2"
            )
        )
        for i in (1, 2)
    ]
    assert sorted(id for part in picked for id in part) == sorted(
        id for id in everything if "alpha" in id
    )


def _shard_records(path: Path) -> tuple[dict, dict]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    (shard,) = [line["data"] for line in lines if line.get("kind") == "shard"]
    return lines[0], shard


def test_under_xdist_a_shard_leaves_the_same_file_as_without(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    alpha = write_skill(pytester.path, "alpha", {})
    for index in range(4):
        write_scenario(alpha, f"scenario-{index}", {"a": 1})
    args = ("skills", *eval_args(endpoint.base_url), *NO_CACHE, "--eval-shard", "1/2")

    alone = pytester.runpytest(*args, "--eval-shard-dir", "alone")
    spread = pytester.runpytest(*args, "--eval-shard-dir", "spread", "-n", "2")

    assert alone.ret == spread.ret == pytest.ExitCode.OK
    run_alone, shard_alone = _shard_records(pytester.path / "alone/shard-1-of-2.jsonl")
    run_spread, shard_spread = _shard_records(pytester.path / "spread/shard-1-of-2.jsonl")
    assert shard_alone == shard_spread
    assert [list(pair) for pair in shard_alone["selected"]] == [
        ["skills/alpha", f"scenario-{i}"] for i in range(4)
    ]
    assert shard_alone["settings"]["threshold"] == 95
    assert "api_key" not in shard_alone["settings"]["http"]
    assert shard_alone["skill_versions"] == {"skills/alpha": "2.1.0"}
    assert run_alone["complete"] is run_spread["complete"] is True


def _sharded(pytester: pytest.Pytester, endpoint: ScriptedEndpoint, count: int) -> None:
    alpha = write_skill(pytester.path, "alpha", {})
    for index in range(4):
        write_scenario(alpha, f"scenario-{index}", {"a": 1})
    for index in range(1, count + 1):
        pytester.runpytest(
            "skills",
            *eval_args(endpoint.base_url),
            "--eval-shard",
            f"{index}/{count}",
            "--eval-shard-dir",
            f"out/{index}",
        )


def test_a_missing_shard_is_refused_naming_it(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    _sharded(pytester, endpoint, 3)

    merged = merge(pytester.path, "out/1", "out/3")

    assert merged.returncode == 2
    assert merged.stderr == "merge: shard 2/3 missing: found 2 of 3 (1/3, 3/3)\n"
    assert reports(pytester.path) == {}


def test_a_shard_given_twice_is_refused(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    _sharded(pytester, endpoint, 2)
    shutil.copytree(pytester.path / "out/1", pytester.path / "again")

    merged = merge(pytester.path, "out", "again")

    assert merged.returncode == 2
    assert merged.stderr == (
        "merge: shard 1/2 is there 2 times (out/1/shard-1-of-2.jsonl, "
        "again/shard-1-of-2.jsonl): keep one\n"
    )


def test_shards_run_with_other_settings_are_refused_naming_the_setting(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    _sharded(pytester, endpoint, 2)
    pytester.runpytest(
        "skills",
        *eval_args(endpoint.base_url),
        "--eval-threshold",
        "80",
        "--eval-shard",
        "2/2",
        "--eval-shard-dir",
        "other",
    )

    merged = merge(pytester.path, "out/1", "other")

    assert merged.returncode == 2
    assert merged.stderr == (
        "merge: other/shard-2-of-2.jsonl and out/1/shard-1-of-2.jsonl are not shards of one "
        "run: their settings differ (threshold: 95 and 80)\n"
    )


def test_shards_of_another_skill_version_or_plugin_version_are_refused(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    _sharded(pytester, endpoint, 2)
    changelog = pytester.path / "skills/alpha/CHANGELOG.md"
    changelog.write_text("# Changelog\n\n## [2.2.0] - 2026-11-20\n\n## [2.1.0] - 2026-11-01\n")

    newer_skill = merge(pytester.path, "out")
    assert newer_skill.returncode == 2
    assert newer_skill.stderr == (
        "merge: skills/alpha: the shards ran version '2.1.0', the checkout here has '2.2.0': "
        "merge in the checkout the shards ran\n"
    )
    pytester.runpytest(
        "skills", *eval_args(endpoint.base_url), "--eval-shard", "2/2", "--eval-shard-dir", "new"
    )
    mixed = merge(pytester.path, "out/1", "new")
    assert mixed.returncode == 2
    assert mixed.stderr == (
        "merge: new/shard-2-of-2.jsonl and out/1/shard-1-of-2.jsonl are not shards of one run: "
        "skills/alpha is version '2.2.0' in one and '2.1.0' in the other\n"
    )
    shard = pytester.path / "out/2/shard-2-of-2.jsonl"
    shard.write_text(shard.read_text().replace('"plugin_version": "', '"plugin_version": "9'))
    other_plugin = merge(pytester.path, "out")
    assert other_plugin.returncode == 2
    assert "are not shards of one run: their plugin versions differ" in other_plugin.stderr


def test_a_shard_writes_no_results_json_even_with_eval_output(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "alpha", {"scenario-0": {"a": 1}})

    result = pytester.runpytest(
        "skills", *eval_args(endpoint.base_url), "--eval-output", "out/", "--eval-shard", "1/1"
    )

    assert result.ret == pytest.ExitCode.OK
    assert not (pytester.path / "out").exists()
    assert reports(pytester.path) == {}
    result.stdout.fnmatch_lines(
        ["shard 1/1: .openkata/shards/shard-1-of-1.jsonl", "partial run: threshold not enforced*"]
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (("--eval-shard", "3/2"), "--eval-shard: '3/2': I must be from 1 to N"),
        (("--eval-shard", "half"), "--eval-shard: 'half' is not I/N (e.g. 2/4*"),
        (("--eval-shard-dir", "out"), "--eval-shard-dir needs --eval-shard"),
    ],
)
def test_a_bad_shard_option_is_a_usage_error(
    pytester: pytest.Pytester, options: tuple[str, ...], message: str
) -> None:
    result = pytester.runpytest(*options)

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: pytest-openkata: {message}"])


def test_merge_of_nothing_or_of_a_file_that_is_no_shard_says_so(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "shard-1-of-1.jsonl").write_text('{"record": "run", "schema": 1}\n')

    nothing = merge(tmp_path, "empty")
    no_shard = merge(tmp_path, "shard-1-of-1.jsonl")

    assert (nothing.returncode, nothing.stderr) == (2, "merge: no shard files found\n")
    assert no_shard.returncode == 2
    assert no_shard.stderr.startswith("merge: shard-1-of-1.jsonl: ")


def _edit_head(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Change a shard file's run record (its first line) with ``edit``."""
    head, *rest = path.read_text().splitlines()
    record = json.loads(head)
    edit(record)
    path.write_text("\n".join([json.dumps(record), *rest]) + "\n")


def _reported(models: list[str]) -> Callable[[dict[str, Any]], None]:
    def edit(record: dict[str, Any]) -> None:
        record["manifest"]["agent"]["reported_models"] = models

    return edit


def test_drift_between_two_later_shards_is_refused_when_the_first_reports_no_model(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    """Shard 1's answers all came from the cache (it reports no model), shards 2 and 3 were
    answered by two snapshots: shard 3 is compared with what shards 1 and 2 said together."""
    _sharded(pytester, endpoint, 3)
    shard = pytester.path / "out/{0}/shard-{0}-of-3.jsonl"
    _edit_head(Path(str(shard).format(1)), _reported([]))
    _edit_head(Path(str(shard).format(2)), _reported(["gpt-4o-2024-05-13"]))
    _edit_head(Path(str(shard).format(3)), _reported(["gpt-4o-2024-08-06"]))

    merged = merge(pytester.path, "out")

    assert merged.returncode == 2, merged.stdout + merged.stderr
    assert merged.stderr == (
        "merge: out/3/shard-3-of-3.jsonl and out/1/shard-1-of-3.jsonl, "
        "out/2/shard-2-of-3.jsonl are not shards of one run: refused to compare with "
        "out/1/shard-1-of-3.jsonl, out/2/shard-2-of-3.jsonl (merge): it drifted: "
        "agent.reported_models: ['gpt-4o-2024-05-13'] before, ['gpt-4o-2024-08-06'] now. "
        "Set allow_drift (--eval-allow-drift) to compare anyway\n"
    )
    assert reports(pytester.path) == {}


def test_shards_that_rejudged_different_runs_are_refused_naming_both(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    _sharded(pytester, endpoint, 2)

    def rejudged(log: str) -> Callable[[dict[str, Any]], None]:
        def edit(record: dict[str, Any]) -> None:
            record["rejudged_from"] = {
                "log": log,
                "finished_at": "2026-12-01T10:00:00+00:00",
                "judge": "http",
                "judge_model": "judge-a",
                "judge_votes": 1,
            }

        return edit

    _edit_head(pytester.path / "out/1/shard-1-of-2.jsonl", rejudged("20261201T100000Z.jsonl"))
    _edit_head(pytester.path / "out/2/shard-2-of-2.jsonl", rejudged("20261202T100000Z.jsonl"))

    merged = merge(pytester.path, "out")

    assert merged.returncode == 2, merged.stdout + merged.stderr
    assert merged.stderr.startswith(
        "merge: out/2/shard-2-of-2.jsonl and out/1/shard-1-of-2.jsonl are not shards of one "
        "run: they re-judged the run log 20261202T100000Z.jsonl "
    )
    assert "and the run log 20261201T100000Z.jsonl " in merged.stderr
    assert reports(pytester.path) == {}


def test_a_shard_budget_record_that_cannot_be_read_is_refused_naming_file_and_field(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    alpha = write_skill(pytester.path, "alpha", {"scenario-0": {"a": 1}, "scenario-1": {"a": 1}})
    assert alpha.is_dir()
    for index in (1, 2):
        pytester.runpytest(
            "skills", *eval_args(endpoint.base_url), "--eval-budget-tokens", "100000",
            "--eval-shard", f"{index}/2", "--eval-shard-dir", f"out/{index}",
        )  # fmt: skip
    path = pytester.path / "out/2/shard-2-of-2.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    [budget] = [r for r in lines if r.get("kind") == "budget"]
    del budget["data"]["spent_tokens"]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))

    merged = merge(pytester.path, "out")

    assert merged.returncode == 2, merged.stdout + merged.stderr
    assert merged.stderr == (
        "merge: out/2/shard-2-of-2.jsonl: its budget record cannot be read: spent_tokens: missing\n"
    )
