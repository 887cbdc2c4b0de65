"""The drop-in ``openkata-eval`` console script, run as a user's Makefile runs it.

Spec section 1 (Go ``flag`` parsing, usage text, path classification, start-up checks and exit
codes) and section 10 (where the report goes). Each run is a subprocess of the installed
console script in ``tmp_path``, which has no pytest configuration, against a scripted endpoint
on loopback whose base URL comes through the environment, as the reference reads it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.endpoint import RecordedRequest, ScriptedEndpoint
from tests.support.evals import EvalScript, reports_under, write_skill

# The reference's usage, with Go's flag.PrintDefaults layout: "  -name type", then a new line,
# four spaces and a tab before the help.
USAGE = (
    "Usage: openkata-eval [flags] <skill-path|scenario-path>\n"
    "\n"
    "Examples:\n"
    "  openkata-eval skills/commit-conventions\n"
    "  openkata-eval skills/commit-conventions/evals/scenario-0\n"
    "\n"
    "Flags:\n"
    "  -backend string\n"
    "    \tLLM backend: kiro or http\n"
    "  -judge-model string\n"
    "    \tmodel for judge calls\n"
    "  -model string\n"
    "    \tmodel for agent calls\n"
    "  -model-label string\n"
    "    \thuman-readable label for the model\n"
    "  -output string\n"
    "    \tJSON output file or directory path\n"
    "  -threshold int\n"
    "    \tpass threshold percentage (default 95)\n"
)
# scenario-0 scores 60 of 100 when criterion b fails; scenario-1 100: 80 % overall.
SCENARIOS = {"scenario-0": {"a": 60, "b": 40}, "scenario-1": {"c": 100}}


@pytest.fixture(scope="module")
def command() -> str:
    found = shutil.which("openkata-eval")
    if found is None:
        pytest.fail("the openkata-eval console script is not on PATH: run pip install -e .")
    return found


def run_eval(
    command: str, cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The console script in ``cwd`` with none of this run's pytest or OPENKATA_EVAL_*
    variables (PYTEST_ADDOPTS, xdist's worker variables), plus ``env``."""
    clean = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PYTEST_", "OPENKATA_EVAL_"))
    }
    return subprocess.run(
        [command, *args],
        cwd=cwd,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def via(endpoint: ScriptedEndpoint) -> dict[str, str]:
    return {"OPENKATA_EVAL_HTTP_BASE_URL": endpoint.base_url}


def is_judge_call(request: RecordedRequest) -> bool:
    return request.json["messages"][0]["role"] == "system"


def models_called(endpoint: ScriptedEndpoint) -> tuple[set[str], set[str]]:
    """The models of the agent calls and of the judge calls the endpoint received."""
    agent = {r.json["model"] for r in endpoint.requests if not is_judge_call(r)}
    judge = {r.json["model"] for r in endpoint.requests if is_judge_call(r)}
    return agent, judge


# --- the command line, before any run ------------------------------------------------------


@pytest.mark.parametrize("flag", ["-h", "--help", "-help"])
def test_help_prints_the_reference_usage_and_exits_0(
    command: str, tmp_path: Path, flag: str
) -> None:
    result = run_eval(command, tmp_path, flag, "skills/x")

    assert result.returncode == 0
    assert result.stderr == USAGE
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-x", "skills/s"], "flag provided but not defined: -x"),
        (["--eval-backend", "http", "skills/s"], "flag provided but not defined: -eval-backend"),
        (["--model"], "flag needs an argument: -model"),
        (["---model", "m", "skills/s"], "bad flag syntax: ---model"),
    ],
)
def test_a_bad_flag_prints_gos_message_and_the_usage_and_exits_2(
    command: str, tmp_path: Path, args: list[str], message: str
) -> None:
    result = run_eval(command, tmp_path, *args)

    assert result.returncode == 2
    assert result.stderr == f"{message}\n{USAGE}"
    assert not (tmp_path / ".pytest_cache").exists()  # pytest never started


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--threshold", "abc"], 'invalid value "abc" for flag -threshold: parse error'),
        (["-threshold=9.5"], 'invalid value "9.5" for flag -threshold: parse error'),
        (["--threshold="], 'invalid value "" for flag -threshold: parse error'),
        (["-threshold", "1__0"], 'invalid value "1__0" for flag -threshold: parse error'),
        (
            ["--threshold", "9223372036854775808"],
            'invalid value "9223372036854775808" for flag -threshold: value out of range',
        ),
    ],
)
def test_a_bad_threshold_prints_gos_message_and_exits_2(
    command: str, tmp_path: Path, args: list[str], message: str
) -> None:
    result = run_eval(command, tmp_path, *args, "skills/s")

    assert result.returncode == 2
    assert result.stderr == f"{message}\n{USAGE}"


@pytest.mark.parametrize("args", [[], ["--model", "m"], ["--"]])
def test_no_path_prints_the_usage_and_exits_2(
    command: str, tmp_path: Path, args: list[str]
) -> None:
    result = run_eval(command, tmp_path, *args)

    assert result.returncode == 2
    assert result.stderr == USAGE


@pytest.mark.parametrize(
    ("path", "skill"),
    [
        ("skills/nope", "skills/nope"),
        ("skills/nope/", "skills/nope"),
        ("skills/nope/evals/scenario-0", "skills/nope"),
        # The reference reads skills/nope/evals here (spec 13.1); the slash is dropped first.
        ("skills/nope/evals/scenario-0/", "skills/nope"),
    ],
)
def test_a_missing_skill_md_exits_1_naming_the_skill_folder(
    command: str, tmp_path: Path, path: str, skill: str
) -> None:
    result = run_eval(command, tmp_path, "--backend", "http", path)

    assert result.returncode == 1
    assert result.stderr == f"error: SKILL.md not found in {skill}\n"
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("layout", "path", "message"),
    [
        ([], "skills/e", "error: no eval scenarios found in skills/e/evals/"),
        (["evals/notes.md"], "skills/e/", "error: no eval scenarios found in skills/e/evals/"),
        (
            [],
            "skills/e/evals/scenario-0",
            "error: no evals directory found: open skills/e/evals: no such file or directory",
        ),
        (
            ["evals/scenario-0/"],
            "skills/e/evals/scenario-9",
            "error: scenario scenario-9 not found",
        ),
    ],
)
def test_nothing_to_run_exits_1_with_the_references_message(
    command: str, tmp_path: Path, layout: list[str], path: str, message: str
) -> None:
    skill = tmp_path / "skills" / "e"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("# e\n")
    for rel in layout:
        target = skill / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith("/"):
            target.mkdir()
        else:
            target.write_text("not a scenario\n")

    result = run_eval(command, tmp_path, "--backend", "http", path)

    assert result.returncode == 1
    assert result.stderr == f"{message}\n"
    assert not (tmp_path / ".pytest_cache").exists()  # pytest never started


# --- runs against the scripted endpoint ----------------------------------------------------


def test_a_run_with_every_flag_writes_the_report_at_the_output(
    command: str, tmp_path: Path, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(tmp_path, "x", SCENARIOS)
    script.verdicts["b"] = (False, "b is missing")

    result = run_eval(
        command,
        tmp_path,
        "--backend",
        "http",
        "--model",
        "agent-m",
        "--judge-model",
        "judge-j",
        "--threshold",
        "50",
        "--output",
        "out/results.json",
        "--model-label",
        "Agent M",
        "skills/x",
        env=via(endpoint),
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "  Overall: 80% PASS (threshold: 50%)" in result.stdout.splitlines()
    [report_path] = (tmp_path / "out").iterdir()  # spec 10: results-<timestamp>.json
    assert report_path.name.startswith("results-")
    assert report_path.suffix == ".json"
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert report["config"] == {
        "backend": "http",
        "agent_model": "agent-m",
        "judge_model": "judge-j",
        "model_label": "Agent M",
    }
    assert report["threshold"] == 50
    assert report["skill"] == "x"
    assert report["skill_version"] == "2.1.0"
    assert [s["name"] for s in report["scenarios"]] == ["scenario-0", "scenario-1"]
    assert report["pass"] is True
    assert reports_under(tmp_path) == []  # with --output, nothing under the skill
    assert models_called(endpoint) == ({"agent-m"}, {"judge-j"})
    assert (script.agent_calls, script.judge_calls) == (2, 2)


@pytest.mark.parametrize(
    "spelling",
    [
        ["-backend", "http", "-model", "spelled"],
        ["--backend", "http", "--model", "spelled"],
        ["-backend=http", "-model=spelled"],
        ["--backend=http", "--model=spelled"],
    ],
)
def test_the_four_flag_spellings_set_the_same_settings(
    command: str,
    tmp_path: Path,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    spelling: list[str],
) -> None:
    write_skill(tmp_path, "x", {"scenario-0": {"a": 100}})

    result = run_eval(command, tmp_path, *spelling, "skills/x", env=via(endpoint))

    assert result.returncode == 0, result.stdout + result.stderr
    assert models_called(endpoint) == ({"spelled"}, {"spelled"})  # the judge falls back
    [report_path] = reports_under(tmp_path)
    assert report_path.parent.name == "spelled"  # spec 10: evals/results/<model>/
    assert json.loads(report_path.read_text())["config"]["backend"] == "http"


def test_flags_after_the_path_are_ignored_with_a_warning(
    command: str, tmp_path: Path, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(tmp_path, "x", {"scenario-0": {"a": 100}})

    result = run_eval(
        command,
        tmp_path,
        "--backend",
        "http",
        "skills/x",
        "--model",
        "ignored-model",
        "--threshold=1",
        env=via(endpoint),
    )

    assert result.returncode == 0, result.stdout + result.stderr
    warning = result.stderr.splitlines()[0]
    assert warning.startswith("warning: ignoring the arguments after skills/x: ")
    assert "--model ignored-model --threshold=1" in warning
    assert models_called(endpoint) == ({"claude-sonnet-4.6"}, {"claude-sonnet-4.6"})
    assert "  Overall: 100% PASS (threshold: 95%)" in result.stdout.splitlines()


def test_a_scenario_path_runs_only_that_scenario_and_writes_no_report(
    command: str, tmp_path: Path, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(tmp_path, "x", SCENARIOS)

    # With the trailing slash the reference would look for skills/x/evals/SKILL.md.
    result = run_eval(
        command, tmp_path, "--backend", "http", "skills/x/evals/scenario-1/", env=via(endpoint)
    )

    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "  scenario-1: about scenario-1" in lines
    assert not any(line.startswith("  scenario-0") for line in lines)
    prompts = [r.json["messages"][-1]["content"] for r in endpoint.requests if not is_judge_call(r)]
    assert len(prompts) == 1
    assert "Do the task of scenario-1." in prompts[0]
    assert reports_under(tmp_path) == []  # spec 10: scenario mode writes no report by itself


def test_a_scenario_path_below_the_threshold_still_exits_0(
    command: str, tmp_path: Path, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(tmp_path, "x", SCENARIOS)
    script.verdicts["b"] = (False, "no")

    result = run_eval(
        command, tmp_path, "--backend", "http", "skills/x/evals/scenario-0", env=via(endpoint)
    )

    # Spec 1, exit codes: scenario mode is never gated (the plugin: a partial run).
    assert result.returncode == 0, result.stdout + result.stderr
    assert "    Score: 60/100 (60%) FAIL" in result.stdout.splitlines()


def test_a_scenario_path_of_a_skill_with_one_scenario_is_still_the_scenario_mode(
    command: str, tmp_path: Path, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    # Every scenario of the skill runs, which pytest alone would count as a complete skill.
    write_skill(tmp_path, "x", {"scenario-0": {"a": 60, "b": 40}})
    script.verdicts["b"] = (False, "no")

    result = run_eval(
        command, tmp_path, "--backend", "http", "skills/x/evals/scenario-0", env=via(endpoint)
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert reports_under(tmp_path) == []
    assert result.stdout.splitlines()[-1] == "partial run: threshold not enforced, exit 0"


def test_a_skill_path_runs_its_scenarios_and_not_the_python_tests_of_its_folder(
    command: str, tmp_path: Path, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = write_skill(tmp_path, "x", {"scenario-0": {"a": 100}})
    (skill / "examples").mkdir()
    (skill / "examples" / "test_bad_example.py").write_text("def test_no():\n    assert 1 == 2\n")

    result = run_eval(command, tmp_path, "--backend", "http", "skills/x", env=via(endpoint))

    assert result.returncode == 0, result.stdout + result.stderr
    assert "  Overall: 100% PASS (threshold: 95%)" in result.stdout.splitlines()
    assert "test_bad_example" not in result.stdout
    assert len(reports_under(tmp_path)) == 1


def test_a_skill_below_the_threshold_exits_1(
    command: str, tmp_path: Path, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(tmp_path, "x", SCENARIOS)
    script.verdicts["b"] = (False, "b is missing")

    result = run_eval(command, tmp_path, "--backend", "http", "skills/x", env=via(endpoint))

    assert result.returncode == 1, result.stdout + result.stderr
    assert "  Overall: 80% FAIL (threshold: 95%)" in result.stdout.splitlines()
    [report_path] = reports_under(tmp_path)  # spec 10: skill mode writes under the skill
    assert report_path.parent.name == "claude-sonnet-4.6"
    assert json.loads(report_path.read_text())["pass"] is False


def test_empty_flags_and_a_zero_threshold_leave_the_environment_in_force(
    command: str, tmp_path: Path, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    """Spec 1: a flag overrides only when non-empty (strings) or above 0 (threshold)."""
    write_skill(tmp_path, "x", SCENARIOS)
    script.verdicts["b"] = (False, "b is missing")
    env = {**via(endpoint), "OPENKATA_EVAL_MODEL": "env-model", "OPENKATA_EVAL_THRESHOLD": "70"}

    result = run_eval(
        command, tmp_path, "--backend=http", "--model=", "--threshold", "0", "skills/x", env=env
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "  Overall: 80% PASS (threshold: 70%)" in result.stdout.splitlines()
    assert models_called(endpoint) == ({"env-model"}, {"env-model"})


@pytest.mark.parametrize("spelled", ["50", "+50", "0x32", "062", "0o62", "5_0"])
def test_the_threshold_is_read_as_gos_int_flags_read_it(
    command: str, tmp_path: Path, endpoint: ScriptedEndpoint, script: EvalScript, spelled: str
) -> None:
    """Go's ParseInt with base 0: hex, octal (a leading 0 or 0o) and _ between digits."""
    write_skill(tmp_path, "x", SCENARIOS)
    script.verdicts["b"] = (False, "b is missing")

    result = run_eval(
        command,
        tmp_path,
        "--backend",
        "http",
        "--threshold",
        spelled,
        "skills/x",
        env=via(endpoint),
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "  Overall: 80% PASS (threshold: 50%)" in result.stdout.splitlines()
