"""The terminal output as users read it, run through pytester against a real scripted endpoint,
with and without ``-n 2``: the scenario blocks, the criteria's subtest names, and the run's
last line (the gate's decision and the exit status)."""

from __future__ import annotations

import json

import pytest

from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_scenario, write_skill

TWO_CRITERIA = {"a": 10, "b": 5}
XDIST = pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
SUMMARY = "openkata eval summary"


def _verdicts(**passed: bool) -> str:
    return json.dumps([{"name": n, "pass": p, "reason": f"{n} {p}"} for n, p in passed.items()])


def _block(result: pytest.RunResult) -> list[str]:
    """The lines of the openkata summary section."""
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if SUMMARY in line) + 1
    end = next(i for i, line in enumerate(lines[start:], start) if line.startswith("==="))
    return lines[start:end]


# --- scenario blocks ------------------------------------------------------------------------


@XDIST
def test_a_single_trial_keeps_the_references_score_line(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    workers: tuple[str, ...],
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    script.verdicts["b"] = (False, "b was ignored")

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url), *workers)

    assert _block(result)[:6] == [
        "skills/s",
        "  scenario-0: about scenario-0",
        "    ✓ a (10/10)",
        "    ✗ b (0/5) — b was ignored",
        "    Score: 10/15 (67%) FAIL",
        "",
    ]


@XDIST
def test_with_trials_the_score_line_says_which_figure_is_the_majority_and_which_the_mean(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    workers: tuple[str, ...],
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    # b passes in one trial of two: the majority (a tie fails) scores 10/15, the mean is 83 %.
    script.judge_replies.extend([_verdicts(a=True, b=True), _verdicts(a=True, b=False)])

    result = pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url, "--eval-trials", "2"), *workers
    )

    block = _block(result)
    assert block[:5] == [
        "skills/s",
        "  scenario-0: about scenario-0",
        "    ✓ a (10/10) [2/2 passed]",
        "    ✗ b (0/5) [1/2 passed] — b False",
        "    Score: 10/15 by majority; mean over 2 trials 83% FAIL",
    ]
    assert block[5].startswith("    Trials: 1 of 2 passed; mean 83.3%, ")
    assert "  Overall: 83% FAIL (threshold: 95%)" in block


@XDIST
def test_an_errored_scenario_shows_error_and_its_reason_once_instead_of_a_score(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    workers: tuple[str, ...],
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    write_scenario(skill, "scenario-1", {"c": 4}, description="second")
    failing = Reply(status=500, body="upstream exploded", headers={"Retry-After": "0"})
    script.agent_reply_when["scenario-0."] = failing
    error = "agent: failed after 3 attempts: HTTP 500: upstream exploded"

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url), *workers)

    block = _block(result)
    assert block[:7] == [
        "skills/s",
        "  scenario-0: about scenario-0",
        f"    ERROR: {error}",
        "",
        "  scenario-1: second",
        "    ✓ c (4/4)",
        "    Score: 4/4 (100%) PASS",
    ]
    assert sum(error in line for line in block) == 1
    assert not any("0/0" in line for line in block)
    # pytest's own error section says it too, as it says every setup error.
    result.stdout.fnmatch_lines(["*ERROR at setup of s::scenario-0*", f"scenario error: {error}"])


@XDIST
def test_a_scenario_with_some_errored_trials_shows_its_score_and_its_error(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    workers: tuple[str, ...],
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    # One trial's judge answer does not parse, nor does its retry: that trial errors.
    script.judge_replies.extend([_verdicts(a=True, b=True), "no verdicts", "still none"])

    result = pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url, "--eval-trials", "2"), *workers
    )

    block = _block(result)
    assert block[:5] == [
        "skills/s",
        "  scenario-0: about scenario-0",
        "    ✓ a (10/10)",  # the one trial that ran
        "    ✓ b (5/5)",
        "    Score: 15/15 by majority; mean over 2 trials 50% FAIL",
    ]
    assert block[5].startswith("    Trials: 1 of 2 passed; mean 50.0%, ")
    [error_line] = [line for line in block if "judge parse failed" in line]
    assert error_line.startswith("    ERROR: 1 of 2 trials errored; trial ")
    assert error_line.endswith(
        ": judge: judge parse failed after retry: no JSON found in judge response"
    )
    assert block[block.index(error_line) + 1] == ""


@XDIST
def test_points_are_quoted_the_same_with_and_without_xdist(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    workers: tuple[str, ...],
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    script.verdicts["b"] = (False, "b was ignored")

    result = pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url), "-v", "-o", "verbosity_subtests=1", *workers
    )

    result.stdout.fnmatch_lines(
        [
            "*SUBPASSED[[]a (10/10)[]]*",
            "*SUBFAILED[[]b (0/5)[]]*",
            "_* s::scenario-0 [[]b (0/5)[]] _*",
            "criterion 'b' not met (0/5): b was ignored",
            "SUBFAILED[[]b (0/5)[]] skills/s/evals::scenario-0 - Failed: criterion 'b' not met*",
        ]
    )
    assert not any("points=" in line or "'0/5'" in line for line in result.outlines)


# --- the run's last line --------------------------------------------------------------------


@XDIST
@pytest.mark.parametrize(
    ("failing", "threshold", "last", "status"),
    [
        ((), "95", "s 100% >= 95%: exit 0", pytest.ExitCode.OK),
        (("b",), "95", "s 67% < 95%: exit 1", pytest.ExitCode.TESTS_FAILED),
        (("b",), "60", "s 67% >= 60%: exit 0", pytest.ExitCode.OK),
        # Rounded, 66.67 would read "67% < 67%": the figure gets the decimals it needs.
        (("b",), "67", "s 66.7% < 67%: exit 1", pytest.ExitCode.TESTS_FAILED),
    ],
)
def test_the_last_line_states_the_gates_decision_and_the_exit_status(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    workers: tuple[str, ...],
    failing: tuple[str, ...],
    threshold: str,
    last: str,
    status: pytest.ExitCode,
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    for name in failing:
        script.verdicts[name] = (False, "no")

    result = pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url, "--eval-threshold", threshold), *workers
    )

    assert result.outlines[-1] == last
    assert result.outlines[-2].startswith("=")  # pytest's own final line
    assert " in " in result.outlines[-2]
    assert result.ret == status


@XDIST
def test_the_last_line_of_a_partial_run_says_the_threshold_is_not_enforced(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    workers: tuple[str, ...],
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA, "scenario-1": {"c": 4}})
    script.verdicts["b"] = (False, "no")

    result = pytester.runpytest(
        "skills/s/evals/scenario-0", *eval_args(endpoint.base_url), *workers
    )

    assert result.outlines[-1] == "partial run: threshold not enforced, exit 0"
    assert result.ret == pytest.ExitCode.OK


def test_the_last_line_names_each_complete_skill_and_each_partial_one(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "one", {"scenario-0": TWO_CRITERIA})
    write_skill(pytester.path, "two", {"scenario-0": {"c": 4}, "scenario-1": {"d": 4}})
    script.verdicts["b"] = (False, "no")

    result = pytester.runpytest(
        "skills/one", "skills/two/evals/scenario-0", *eval_args(endpoint.base_url)
    )

    assert result.outlines[-1] == "one 67% < 95%; two partial, threshold not enforced: exit 1"
    assert result.ret == pytest.ExitCode.TESTS_FAILED


@XDIST
def test_the_last_line_says_an_errored_scenario_fails_the_run(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    workers: tuple[str, ...],
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    write_scenario(skill, "scenario-1", {"c": 4})
    script.agent_reply_when["scenario-0."] = Reply(status=500, headers={"Retry-After": "0"})

    result = pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url, "--eval-threshold", "40"), *workers
    )

    assert result.outlines[-1] == "s 50% >= 40%; 1 scenario errored: exit 1"
    assert result.ret == pytest.ExitCode.TESTS_FAILED


@XDIST
def test_the_last_line_says_an_ordinary_failing_test_fails_the_run(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    workers: tuple[str, ...],
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    pytester.makepyfile(
        test_plain="def test_one():\n    assert False\n\ndef test_two():\n    pass\n"
    )

    result = pytester.runpytest(
        "skills/s", "test_plain.py", *eval_args(endpoint.base_url), *workers
    )

    assert result.outlines[-1] == "s 100% >= 95%; 1 ordinary test failed: exit 1"
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_the_last_line_of_a_partial_run_says_an_ordinary_failing_test_fails_it(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA, "scenario-1": {"c": 4}})
    pytester.makepyfile(test_plain="def test_one():\n    assert False\n")

    result = pytester.runpytest(
        "skills/s/evals/scenario-0", "test_plain.py", *eval_args(endpoint.base_url)
    )

    expected = "partial run: threshold not enforced; 1 ordinary test failed, exit 1"
    assert result.outlines[-1] == expected
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_the_last_line_says_a_report_that_could_not_be_written_fails_the_run(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    pytester.path.joinpath("blocker").write_text("a file, not a folder\n")

    result = pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url, "--eval-output", "blocker/report.json")
    )

    assert result.outlines[-1] == "s 100% >= 95%; 1 report not written: exit 1"
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_the_last_line_of_an_interrupted_run_keeps_pytests_exit_status(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})
    pytester.makepyfile(test_stop="def test_stop():\n    raise KeyboardInterrupt\n")

    result = pytester.runpytest_inprocess(
        "skills/s", "test_stop.py", *eval_args(endpoint.base_url), no_reraise_ctrlc=True
    )

    assert result.outlines[-1] == "interrupted: threshold not enforced, exit 2"
    assert result.ret == pytest.ExitCode.INTERRUPTED


def test_a_run_without_scenarios_has_no_gate_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_one():\n    pass\n")

    result = pytester.runpytest("test_plain.py")

    assert result.outlines[-1].startswith("=")
    assert "1 passed" in result.outlines[-1]


def test_the_last_line_is_green_when_the_run_passes_and_red_when_it_fails(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": TWO_CRITERIA})

    args = ("skills/s", *eval_args(endpoint.base_url, "--eval-cache", "off"), "--color=yes")
    passing = pytester.runpytest(*args)
    script.verdicts["b"] = (False, "no")
    failing = pytester.runpytest(*args)

    assert passing.outlines[-1] == "\x1b[32ms 100% >= 95%: exit 0\x1b[0m"
    assert failing.outlines[-1] == "\x1b[31ms 67% < 95%: exit 1\x1b[0m"
