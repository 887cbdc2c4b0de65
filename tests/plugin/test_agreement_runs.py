"""Judge agreement end to end: two real runs against the scripted endpoint, the second with
another judge model whose agent answers come from the cache, measured and gated by the
``agreement`` command; then the first run against human labels."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_skill


def _run(pytester: pytest.Pytester, base_url: str, *extra: str) -> Path:
    """Run the skill and return the run log it wrote."""
    folder = pytester.path / ".openkata" / "runs"
    before = set(folder.glob("*.jsonl")) if folder.is_dir() else set()
    pytester.runpytest("skills/s", *eval_args(base_url, "--eval-trials", "2", *extra))
    [log] = set(folder.glob("*.jsonl")) - before
    return log


def _agreement(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENKATA_EVAL_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest_openkata", "agreement", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
        check=False,
    )


def test_two_judges_on_the_same_cached_answers_are_measured_and_gated(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 2, "y": 1}, "scenario-b": {"z": 1}})
    strong = _run(pytester, endpoint.base_url, "--eval-judge-model", "strong-judge")
    agent_calls = script.agent_calls
    script.verdicts["y"] = (False, "the cheap judge misses \x1b[2J the point")
    cheap = _run(pytester, endpoint.base_url, "--eval-judge-model", "cheap-judge")
    assert script.agent_calls == agent_calls  # the second run's answers came from the cache

    done = _agreement(
        pytester.path, str(strong), str(cheap), "--json", "agreement.json", "--min-kappa", "0.5"
    )

    assert done.returncode == 1, done.stderr
    out = done.stdout
    assert f"judge strong-judge ({strong.name})" in out
    assert f"judge cheap-judge ({cheap.name})" in out
    # y: the strong judge passed both trials, the cheap one failed both: table (0, 2, 0, 0),
    # p_o = 0, p_e = 1 * 0 + 0 * 1 = 0, κ = 0. x and z: passed throughout by both: undefined.
    assert "skills/s::scenario-a [1] y  n=2  agreement 0%  κ 0.00" in out
    assert (
        "skills/s::scenario-a [0] x  n=2  agreement 100%  κ undefined (every verdict pass)" in out
    )
    assert "FAILED: κ below 0.5 on 1 of 3 criteria:" in out
    assert "not gated: κ undefined on 2 criteria" in out
    assert "the cheap judge misses \\x1b[2J the point" in out  # shown, not obeyed
    report = json.loads((pytester.path / "agreement.json").read_text())
    [y] = [c for c in report["criteria"] if c["criterion"] == "y"]
    assert (y["kappa"], y["n"], len(y["disagreements"])) == (0.0, 2, 2)
    assert y["disagreements"][0]["answer"] == script.agent_answer
    assert report["overall"]["table"] == {
        "both_pass": 4,
        "first_pass_second_fail": 2,
        "first_fail_second_pass": 0,
        "both_fail": 0,
    }
    assert str(pytester.path) not in json.dumps(report)  # no machine paths

    passing = _agreement(pytester.path, str(strong), str(cheap), "--min-kappa", "0")
    assert passing.returncode == 0, passing.stderr
    assert "passed: κ at least 0 on every criterion where it is defined" in passing.stdout

    labels = pytester.path / "labels.jsonl"
    base = {"skill_dir": "skills/s", "scenario": "scenario-a", "criterion": "y"}
    lines = [
        {**base, "trial": trial, "criterion_index": 1, "verdict": "pass", "reviewer": "ana"}
        for trial in (1, 2)
    ]
    labels.write_text("".join(json.dumps(line) + "\n" for line in lines))
    human = _agreement(pytester.path, str(strong), "--labels", str(labels), "--min-kappa", "0.5")
    assert human.returncode == 0, human.stderr
    assert "second: human labels (labels.jsonl)" in human.stdout

    labels.write_text(json.dumps({**lines[0], "criterion": "why"}) + "\n")
    wrong = _agreement(pytester.path, str(strong), "--labels", str(labels))
    assert wrong.returncode == 2
    assert f"{labels}: line 1: criterion 1 of trial 1 of skills/s::scenario-a is 'y'" in (
        wrong.stderr
    )


def test_a_run_measures_its_judge_against_another_run_and_gates_on_kappa(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 2, "y": 1}})
    strong = _run(pytester, endpoint.base_url, "--eval-judge-model", "strong-judge")
    script.verdicts["y"] = (False, "missed")

    result = pytester.runpytest(
        "skills/s",
        *eval_args(endpoint.base_url, "--eval-trials", "2", "--eval-judge-model", "cheap-judge"),
        "--eval-agreement-with",
        str(strong),
        "--eval-min-kappa",
        "0.5",
    )

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            f"first:  judge strong-judge ({strong.name})",
            "second: judge cheap-judge (this run)",
            "*skills/s::scenario-a [[]1] y  n=2  agreement 0%  κ 0.00*",
            "FAILED: κ below 0.5 on 1 of 2 criteria:",
            "*judge κ below 0.5 on 1 criterion: exit 1",
        ]
    )
    [log] = sorted(set((pytester.path / ".openkata" / "runs").glob("*.jsonl")) - {strong})
    [record] = [r for r in map(json.loads, log.read_text().splitlines()) if r["record"] == "extra"]
    assert record["kind"] == "agreement"
    assert record["data"]["gate"]["passed"] is False
    assert record["data"]["second"] == "judge cheap-judge (this run)"


def test_a_labels_file_that_does_not_fit_the_run_fails_it_naming_the_line(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    labels = pytester.path / "labels.jsonl"
    label = {"skill_dir": "skills/s", "scenario": "scenario-a", "trial": 1, "verdict": "pass"}
    labels.write_text(json.dumps({**label, "criterion_index": 0, "criterion": "w"}) + "\n")

    result = pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url), "--eval-agreement-with", str(labels)
    )

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            f"judge agreement not measured: {labels}: line 1: criterion 0 of trial 1 of "
            "skills/s::scenario-a is 'x' in this run, not 'w'",
            "*judge agreement not measured: exit 1",
        ]
    )


def test_a_rejudged_log_is_measured_against_the_run_it_graded_again(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    """The documented calibration: run with the strong judge, re-judge its log with the cheap
    one (no agent call), measure the two logs."""
    write_skill(pytester.path, "s", {"scenario-a": {"x": 2, "y": 1}})
    strong = _run(pytester, endpoint.base_url, "--eval-judge-model", "strong-judge")
    agent_calls = script.agent_calls
    script.verdicts["x"] = (False, "the cheap judge disagrees on x")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENKATA_EVAL_")}
    rejudged = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_openkata",
            "rejudge",
            str(strong.relative_to(pytester.path)),
            *eval_args(endpoint.base_url, "--eval-judge-model", "cheap-judge"),
        ],
        capture_output=True,
        text=True,
        cwd=pytester.path,
        env=env,
        timeout=300,
        check=False,
    )
    assert rejudged.returncode == 1, rejudged.stdout  # x now fails: below the threshold
    assert script.agent_calls == agent_calls
    [cheap] = set((pytester.path / ".openkata" / "runs").glob("*.jsonl")) - {strong}

    done = _agreement(pytester.path, str(strong), str(cheap), "--min-kappa", "0.5")

    # x: passed twice by the strong judge, failed twice by the cheap one: agreement 0, κ 0.
    # y: passed throughout by both: κ undefined, not gated.
    assert "skills/s::scenario-a [0] x  n=2  agreement 0%  κ 0.00" in done.stdout
    assert f"second: judge cheap-judge ({cheap.name})" in done.stdout
    assert done.returncode == 1


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (("--eval-min-kappa", "0.6"), "--eval-min-kappa gates the agreement of"),
        (("--eval-agreement-with", "missing.jsonl"), "missing.jsonl is not a file"),
        (
            ("--eval-agreement-with", "other.jsonl", "--eval-shard", "1/2"),
            "--eval-agreement-with measures a whole run, and a shard holds part of it",
        ),
    ],
)
def test_an_agreement_that_could_not_be_measured_is_refused_before_any_call(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    extra: tuple[str, ...],
    said: str,
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    (pytester.path / "other.jsonl").write_text("{}\n")

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url, *extra))

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert said in result.stderr.str()
    assert script.agent_calls == 0
