"""Settings as users give them: options, ini, .openkata-eval.yaml and environment variables."""

from __future__ import annotations

import pytest

from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, write_skill


def test_help_lists_the_option_group(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")

    result.stdout.fnmatch_lines(["skill evals (pytest-openkata):"])
    result.stdout.fnmatch_lines_random(
        [
            "*--eval-backend*",
            "*--eval-model*",
            "*--eval-judge-model*",
            "*--eval-threshold*",
            "*--eval-output*",
            "*--eval-model-label*",
            "*--eval-concurrency*",
            "*--eval-direct-timeout*",
            "*--eval-base-url*",
            "*--eval-sandbox-image*",
            "*--eval-sandbox-timeout*",
            "*--eval-sandbox-network*",
            "*--eval-config*",
        ]
    )
    assert "api-key" not in result.stdout.str()


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        ({}, ["--eval-backend", "foo"], "option --eval-backend: unknown backend 'foo'*"),
        ({}, ["--eval-threshold", "high"], "option --eval-threshold: 'high' is not a whole number"),
        (
            {"env": ("OPENKATA_EVAL_THRESHOLD", "high")},
            [],
            "environment OPENKATA_EVAL_THRESHOLD: 'high' is not a whole number",
        ),
        (
            {"env": ("OPENKATA_EVAL_MODLE", "x")},
            [],
            "unknown environment variable OPENKATA_EVAL_MODLE*",
        ),
        ({"yaml": "threshold: [unclosed\n"}, [], "*.openkata-eval.yaml: not valid YAML*"),
        ({"yaml": "treshold: 90\n"}, [], "*.openkata-eval.yaml: unknown key 'treshold'*"),
        (
            {"yaml": "concurrency: 0\n"},
            [],
            "*.openkata-eval.yaml: key concurrency: 0 is out of range: must be at least 1",
        ),
        ({"ini": "eval_threshold = 101"}, [], "ini option eval_threshold: 101 is out of range*"),
        (
            {},
            ["--eval-config", "missing.yaml"],
            "option --eval-config: missing.yaml does not exist",
        ),
    ],
)
def test_bad_settings_are_usage_errors_naming_source_and_key(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    setup: dict[str, object],
    args: list[str],
    message: str,
) -> None:
    if "env" in setup:
        name, value = setup["env"]  # type: ignore[misc]
        monkeypatch.setenv(name, value)
    if "yaml" in setup:
        pytester.path.joinpath(".openkata-eval.yaml").write_text(str(setup["yaml"]))
    if "ini" in setup:
        pytester.makeini(f"[pytest]\n{setup['ini']}\n")

    result = pytester.runpytest_subprocess(*args)

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: pytest-openkata: {message}"])


def test_layers_apply_in_reference_order(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"x": 1}})
    pytester.makeini(
        "[pytest]\neval_backend = http\neval_model = from-ini\neval_judge_model = judge-ini\n"
        "eval_model_label = ini label\neval_threshold = 10\n"
    )
    pytester.path.joinpath(".openkata-eval.yaml").write_text(
        f"model: from-yaml\njudge_model: judge-yaml\nhttp:\n  base_url: {endpoint.base_url}\n"
    )
    monkeypatch.setenv("OPENKATA_EVAL_MODEL", "from-env")
    monkeypatch.setenv("OPENKATA_EVAL_THRESHOLD", "20")

    result = pytester.runpytest("skills", "--eval-threshold", "30")

    assert [r.json["model"] for r in endpoint.requests] == ["from-env", "judge-yaml"]
    result.stdout.fnmatch_lines(
        [
            "openkata: backend=http model=from-env judge=judge-yaml threshold=30",
            "  Overall: 100% PASS (threshold: 30%)",
        ]
    )


def test_the_header_names_the_run_settings_that_differ_from_the_defaults(
    pytester: pytest.Pytester,
) -> None:
    plain = pytester.runpytest("--collect-only")
    changed = pytester.runpytest(
        "--collect-only", "--eval-trials", "3", "--eval-judge-votes", "5",
        "--eval-concurrency", "8", "-p", "no:cacheprovider",
    )  # fmt: skip

    plain.stdout.fnmatch_lines(["openkata: backend=kiro * threshold=95"])
    plain.stdout.no_fnmatch_line("*trials=*")
    changed.stdout.fnmatch_lines(
        [
            "openkata: backend=kiro model=claude-sonnet-4.6 judge=claude-sonnet-4.6 threshold=95 "
            "trials=3 judge_votes=5 concurrency=8 cache=off (no cacheprovider)"
        ]
    )
