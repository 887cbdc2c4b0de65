"""Reports the catalogue can trust: a label for every model, errored runs held back from
``evals/results/``, and a second report of the same second that sorts after the first."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.core.trials import errored_trial
from pytest_openkata.providers.reporters.results_json import ResultsJsonReporter
from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, reports_under, write_scenario, write_skill
from tests.support.results import judged, report_of, reported, scenario

FAILING = Reply(status=503, body="engine down", headers={"Retry-After": "0"})


def _report(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_a_run_without_a_label_names_its_model_as_the_label(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"a": 10}})

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url, "--eval-model", "m-1"))

    assert result.ret == pytest.ExitCode.OK
    (report,) = reports_under(pytester.path)
    config = _report(report)["config"]
    assert config["agent_model"] == "m-1"
    assert config["model_label"] == "m-1"


def test_a_broken_scenario_file_is_published_as_the_reference_does(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-0": {"a": 10}})
    broken = write_scenario(skill, "scenario-1", {"b": 10})
    (broken / "criteria.json").write_text('{"checklist": [{"name": "b", "max_score": 0}]}')

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url))

    result.assert_outcomes(passed=1, errors=1)
    (report,) = reports_under(pytester.path)  # the skill's own fault: the catalogue shows it
    errored = _report(report)["scenarios"][1]
    assert errored["error_kind"] == "scenario"
    assert errored["error"].startswith("evals/scenario-1/criteria.json: checklist[0]")
    assert "not published" not in result.stdout.str()
    assert not (pytester.path / ".openkata/runs/unpublished").exists()


def test_an_errored_endpoint_writes_where_output_names_or_with_publish_errors(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"a": 10}, "scenario-1": {"b": 10}})
    script.agent_reply_when["scenario-0."] = FAILING

    named = pytester.runpytest("skills/s", *eval_args(endpoint.base_url, "--eval-output", "out/"))
    published = pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url, "--eval-publish-errors")
    )

    (output,) = (pytester.path / "out").iterdir()
    assert _report(output)["scenarios"][0]["error_kind"] == "infrastructure"
    (report,) = reports_under(pytester.path)
    assert _report(report)["scenarios"][0]["error_kind"] == "infrastructure"
    for run in (named, published):
        assert "Report not published" not in run.stdout.str()
    assert not (pytester.path / ".openkata/runs/unpublished").exists()


def test_with_the_run_log_off_a_held_report_goes_to_the_default_log_folder(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"a": 10}})
    script.agent_reply_when["scenario-0."] = FAILING

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url, "--eval-log-dir", "off"))

    assert reports_under(pytester.path) == []
    assert list((pytester.path / ".openkata/runs").glob("*.jsonl")) == []
    (held,) = (pytester.path / ".openkata/runs/unpublished/s").rglob("*.json")
    result.stdout.fnmatch_lines([f"  Report: .openkata/runs/unpublished/s/*/{held.name}"])


# --- a broken skill ---------------------------------------------------------------------------


def _log_records(root: Path) -> list[dict]:
    (log,) = (root / ".openkata/runs").glob("*.jsonl")
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("where", ["evals/results", "--eval-output"])
def test_a_skill_without_skill_md_publishes_nothing_and_the_others_publish(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript, where: str
) -> None:
    broken = write_skill(pytester.path, "broken", {"scenario-0": {"a": 10}})
    (broken / "SKILL.md").unlink()
    write_skill(pytester.path, "fine", {"scenario-0": {"a": 10}})
    output = ("--eval-output", "out/") if where == "--eval-output" else ()

    result = pytester.runpytest("skills", *eval_args(endpoint.base_url, *output))

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "skills/broken",
            "*ERROR: SKILL.md: file not found in skills/broken (every skill needs one)",
            "*Report not published: the skill's SKILL.md is missing or broken, so no report "
            "of it is written (the catalogue would show 0 % for a skill that did not run)",
            "skills/fine",
        ]
    )
    if output:
        assert [p.name.split("-results-")[0] for p in (pytester.path / "out").iterdir()] == ["fine"]
    else:
        assert [p.relative_to(pytester.path).parts[1] for p in reports_under(pytester.path)] == [
            "fine"
        ]
    assert not (pytester.path / "skills/broken/evals/results").exists()
    assert not (pytester.path / ".openkata/runs/unpublished").exists()
    # The run log still holds the run, the broken skill's error with it.
    trials = [r for r in _log_records(pytester.path) if r["record"] == "trial"]
    assert {r["skill_dir"]: r["error_kind"] for r in trials} == {
        "skills/broken": "skill",
        "skills/fine": "",
    }


def test_a_skill_md_that_leads_out_of_the_skill_publishes_nothing(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-0": {"a": 10}})
    (pytester.path / "elsewhere.md").write_text("# Not the skill's\n")
    (skill / "SKILL.md").unlink()
    (skill / "SKILL.md").symlink_to(pytester.path / "elsewhere.md")

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url))

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["*ERROR: SKILL.md: *", "*Report not published: the skill's SKILL.md*"]
    )
    assert reports_under(pytester.path) == []
    assert script.agent_calls == 0


def test_a_tile_whose_tile_json_is_broken_publishes_nothing(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = write_skill(pytester.path, "t", {"scenario-0": {"a": 10}})
    (skill / "SKILL.md").unlink()
    (skill / "tile.json").write_text("{broken")

    result = pytester.runpytest("skills/t", *eval_args(endpoint.base_url, "--eval-publish-errors"))

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["*ERROR: tile.json: not valid JSON*", "*Report not published: the skill's tile.json*"]
    )
    assert reports_under(pytester.path) == []


# --- the same second ------------------------------------------------------------------------


def test_a_second_report_in_the_same_second_takes_the_next_free_second(tmp_path: Path) -> None:
    settings = EvalSettings(model="m")
    run = report_of([scenario("scenario-0", [judged("c", 1, True)])], settings, rootdir=tmp_path)
    run = replace(
        run, summaries=[replace(s, skill_dir=tmp_path / "skills/s") for s in run.summaries]
    )
    reporter = ResultsJsonReporter()

    written = []
    for _ in range(3):
        done = reported(reporter, replace(run, summaries=[replace(s) for s in run.summaries]))
        written.append(done.summaries[0].report_path)

    folder = tmp_path / "skills/s/evals/results/m"
    assert [p.name for p in written if p] == [
        "2026-12-01T100000.json",
        "2026-12-01T100001.json",
        "2026-12-01T100002.json",
    ]
    # The catalogue's rule, the greatest name, now takes the last report written.
    assert max(p.name for p in folder.iterdir()) == "2026-12-01T100002.json"
    # Every report keeps the run's own time in its timestamp field.
    assert {_report(p)["timestamp"] for p in folder.iterdir()} == {"2026-12-01T10:00:00Z"}


def test_output_names_also_move_to_the_next_free_second(tmp_path: Path) -> None:
    settings = EvalSettings(model="m", output=str(tmp_path / "out" / "results.json"))
    run = report_of([scenario("scenario-0", [judged("c", 1, True)])], settings, rootdir=tmp_path)
    reporter = ResultsJsonReporter()

    for _ in range(2):
        reporter.report(replace(run, summaries=[replace(s) for s in run.summaries]))

    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["results-2026-12-01T100000.json", "results-2026-12-01T100001.json"]


def test_a_held_report_is_laid_out_as_evals_results(tmp_path: Path) -> None:
    settings = EvalSettings(model="org/model")
    failed = scenario("scenario-0", "agent: HTTP 503")
    ok = scenario("scenario-1", [judged("c", 1, True)])
    run = report_of([failed, ok], settings, rootdir=tmp_path)

    run = reported(ResultsJsonReporter(), run)

    (summary,) = run.summaries
    expected = tmp_path / ".openkata/runs/unpublished/s/org_model/2026-12-01T100000.json"
    assert summary.report_path == expected
    assert summary.report_held is not None
    assert summary.report_held.startswith("1 scenario errored for reasons outside the skill")
    assert not (tmp_path / "skills").exists()


def test_an_errored_scenario_of_its_own_files_is_no_reason_to_hold_back(tmp_path: Path) -> None:
    settings = EvalSettings(model="m")
    broken = scenario("scenario-0", [judged("c", 1, True)])
    broken = replace(broken, trials=[errored_trial(1, "criteria.json: bad", kind="scenario")])
    run = report_of([broken], settings, rootdir=tmp_path)
    run = replace(
        run, summaries=[replace(s, skill_dir=tmp_path / "skills/s") for s in run.summaries]
    )

    run = reported(ResultsJsonReporter(), run)

    (summary,) = run.summaries
    assert summary.report_held is None
    assert summary.report_path == tmp_path / "skills/s/evals/results/m/2026-12-01T100000.json"
