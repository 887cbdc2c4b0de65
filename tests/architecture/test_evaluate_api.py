"""``pytest_openkata.evaluate(paths, **settings)``: a run without pytest, through the same
core, writing the same report a complete pytest run writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.architecture.test_core_without_pytest import run_without_pytest
from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, reports_under, write_skill

SKILL = {"scenario-a": {"good": 6, "bad": 4}, "scenario-b": {"good": 10}}


def _comparable(report: Path) -> dict[str, object]:
    """A report without what differs between two identical runs: the time, and the seconds
    its calls took."""
    data = json.loads(report.read_text())
    data.pop("timestamp")
    data.pop("usage")
    for scenario in data["scenarios"]:
        scenario.pop("usage")
    return data


@pytest.fixture
def verdicts(script: EvalScript) -> EvalScript:
    script.verdicts = {"bad": (False, "not done")}
    return script


def test_evaluate_without_pytest_writes_the_report_a_pytest_run_writes(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, verdicts: EvalScript
) -> None:
    api_root = pytester.path / "api"
    write_skill(api_root, "s", SKILL)
    write_skill(pytester.path, "s", SKILL)

    result = run_without_pytest(
        f"""
        from pytest_openkata import evaluate
        summaries = evaluate(
            "skills", backend="http", http={{"base_url": {endpoint.base_url!r}}}, threshold=80
        )
        (summary,) = summaries
        print(summary.name, summary.complete, summary.passed, round(summary.overall))
        """,
        cwd=api_root,
    )
    pytest_run = pytester.runpytest(
        "skills", *eval_args(endpoint.base_url, "--eval-threshold", "80")
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["s", "True", "True", "80"]
    assert pytest_run.ret == pytest.ExitCode.OK
    (api_report,) = reports_under(api_root)
    (pytest_report,) = reports_under(pytester.path)
    assert (
        api_report.relative_to(api_root).parent == pytest_report.relative_to(pytester.path).parent
    )
    assert _comparable(api_report) == _comparable(pytest_report)
    assert verdicts.agent_calls == 4


def test_settings_resolve_from_the_yaml_file_the_environment_then_the_arguments(
    tmp_path: Path,
    endpoint: ScriptedEndpoint,
    verdicts: EvalScript,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_skill(tmp_path, "s", SKILL)
    (tmp_path / ".openkata-eval.yaml").write_text(
        f"backend: http\nthreshold: 10\nmodel: from-yaml\nhttp:\n  base_url: {endpoint.base_url}\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENKATA_EVAL_THRESHOLD", "90")
    from pytest_openkata import evaluate

    (summary,) = evaluate(tmp_path / "skills" / "s", model="from-argument", cache="off")

    assert not summary.passed  # 80 % < 90 % (the environment's threshold beats the YAML's)
    report = json.loads(summary.report_path.read_text())  # type: ignore[union-attr]
    assert report["threshold"] == 90
    assert report["config"]["agent_model"] == "from-argument"
    assert {request.json["model"] for request in endpoint.requests} == {"from-argument"}


def test_a_scenario_path_is_a_partial_run(
    tmp_path: Path,
    endpoint: ScriptedEndpoint,
    verdicts: EvalScript,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    skill = write_skill(tmp_path, "s", SKILL)
    monkeypatch.chdir(tmp_path)
    from pytest_openkata import evaluate

    (summary,) = evaluate(
        [skill / "evals" / "scenario-b"], backend="http", http={"base_url": endpoint.base_url}
    )

    assert not summary.complete
    assert summary.total_scenarios == 2
    assert summary.report_path is None
    assert reports_under(tmp_path) == []


def test_evaluate_writes_the_run_log_and_a_file_it_cannot_write_fails_the_gate(
    tmp_path: Path,
    endpoint: ScriptedEndpoint,
    verdicts: EvalScript,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    skill = write_skill(tmp_path, "s", SKILL)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "blocker").write_text("a file, not a folder\n")
    from pytest_openkata import evaluate
    from pytest_openkata.core.summary import gate_failed

    summaries = evaluate(
        skill,
        backend="http",
        http={"base_url": endpoint.base_url},
        cache="off",
        html="blocker/page.html",
    )

    assert len(list((tmp_path / ".openkata" / "runs").glob("*.jsonl"))) == 1
    [summary] = summaries
    assert summary.report_error is not None
    assert "could not write the HTML report blocker/page.html" in summary.report_error
    assert gate_failed(summaries)


def test_a_repeat_is_answered_from_the_cache(
    tmp_path: Path,
    endpoint: ScriptedEndpoint,
    verdicts: EvalScript,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_skill(tmp_path, "s", SKILL)
    monkeypatch.chdir(tmp_path)
    from pytest_openkata import evaluate

    settings = {"backend": "http", "http": {"base_url": endpoint.base_url}}
    first = evaluate("skills", **settings)
    calls = len(endpoint.requests)
    second = evaluate("skills", **settings)

    assert len(endpoint.requests) == calls
    assert [r.percentage for r in second[0].results] == [r.percentage for r in first[0].results]
    assert second[0].usage.agent.cached == 2
    assert (tmp_path / ".pytest_cache" / ".gitignore").read_text().endswith("*\n")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"thresold": 5}, "arguments: unknown key 'thresold'"),
        ({"http": {"base_ulr": "x"}}, "arguments: unknown key 'http.base_ulr'"),
        ({"threshold": 101}, "argument threshold: 101 is out of range"),
        ({"backend": "gemini"}, "argument backend: unknown backend 'gemini'"),
    ],
)
def test_a_bad_argument_is_named(
    tmp_path: Path, arguments: dict[str, object], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_skill(tmp_path, "s", SKILL)
    monkeypatch.chdir(tmp_path)
    from pytest_openkata import ConfigError, evaluate

    with pytest.raises(ConfigError) as info:
        evaluate("skills", **arguments)

    assert str(info.value).startswith(message)


def test_a_missing_path_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    from pytest_openkata import ConfigError, evaluate

    with pytest.raises(ConfigError, match=r"^nowhere: no such file or folder$"):
        evaluate("nowhere")


def test_evaluate_with_a_baseline_gives_the_skill_s_comparison(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, verdicts: EvalScript
) -> None:
    verdicts.agent_reply_when = {"Follow the rules.": Reply.chat("A skilled answer, long enough.")}
    verdicts.by_context = {}
    write_skill(pytester.path, "s", SKILL)

    result = run_without_pytest(
        f"""
        from pytest_openkata import evaluate
        (summary,) = evaluate(
            "skills", backend="http", http={{"base_url": {endpoint.base_url!r}}},
            baseline="without-skill",
        )
        comparison = summary.comparison
        print(comparison.arm, comparison.uplift.scenarios, comparison.uplift.test)
        print(sorted(r.baseline.arm for r in summary.results))
        """,
        cwd=pytester.path,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "without-skill 2 sign-flip exact",
        "['without-skill', 'without-skill']",
    ]
    # Two arms of two scenarios: four agent calls, the baseline's without the skill's text.
    assert verdicts.agent_calls == 4
    (report,) = reports_under(pytester.path)
    assert json.loads(report.read_text())["uplift"]["arm"] == "without-skill"


def test_evaluate_takes_its_arms_from_a_variants_file(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, verdicts: EvalScript
) -> None:
    verdicts.agent_reply_when = {"Follow the rules.": Reply.chat("A skilled answer, long enough.")}
    verdicts.by_context = {}
    write_skill(pytester.path, "s", SKILL)
    (pytester.path / "arms.json").write_text(
        json.dumps([{"label": "current"}, {"label": "bare", "includeContext": False}])
    )

    result = run_without_pytest(
        f"""
        from pytest_openkata import evaluate
        (summary,) = evaluate(
            "skills", backend="http", http={{"base_url": {endpoint.base_url!r}}},
            variants="arms.json",
        )
        print(summary.comparison.arm, sorted(r.baseline.arm for r in summary.results))
        """,
        cwd=pytester.path,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["bare ['bare', 'bare']"]
    assert verdicts.agent_calls == 4
    (report,) = reports_under(pytester.path)
    data = json.loads(report.read_text())
    assert (data["config"]["variant"], data["uplift"]["arm"]) == ("current", "bare")
