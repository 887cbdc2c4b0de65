"""The live log of a run in progress, through real pytest runs in subprocesses against a real
scripted endpoint: the agent's call of one scenario is held until the test has seen the live
log hold the scenario that finished before it. Seen there: the run record marked in
progress, then that scenario's trial records, the very records the run log ends with; once the
run ends the live log is gone (serially and under ``-n 2``); a run killed outright leaves it,
shown as interrupted, and the next run removes it and says so; ``live_log = false`` keeps none,
and neither does a ``--collect-only`` run.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from pytest_openkata.core.live_log import live_state
from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_skill
from tests.support.live_runs import (
    LOGS,
    HeldScenario,
    finish,
    live_log_with,
    live_logs,
    records,
    start_run,
    wait_for,
)


@pytest.fixture
def held(endpoint: ScriptedEndpoint, script: EvalScript) -> Iterator[HeldScenario]:
    holder = HeldScenario(script, "scenario-b")
    endpoint.respond_with(holder)
    yield holder
    holder.release()  # a test that failed early never leaves a handler waiting


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_the_live_log_holds_each_finished_scenario_and_is_gone_when_the_run_ends(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    held: HeldScenario,
    workers: tuple[str, ...],
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 2}, "scenario-b": {"y": 1}})
    args = eval_args(endpoint.base_url, "--eval-concurrency", "1", "--eval-cache", "off")
    process = start_run(pytester.path, *args, *workers)

    live = wait_for(
        lambda: live_log_with(pytester.path, "scenario-a"), process, "scenario-a in the live log"
    )
    head, *trials = records(live)
    assert (head["record"], head["complete"], head["in_progress"]) == ("run", False, True)
    assert head["settings"]["agent"] == "http"
    assert [(t["scenario"], t["trial"]) for t in trials] == [("scenario-a", 1)]
    assert str(pytester.path) not in live.read_text(encoding="utf-8")  # no machine path
    assert live_state(live.name) == "running"
    seen_live = trials
    held.release()
    out = finish(process)

    assert process.returncode == pytest.ExitCode.OK, out[-3000:]
    assert live_logs(pytester.path) == []
    [log] = (pytester.path / LOGS).glob("*.jsonl")
    final = records(log)
    assert final[0]["complete"] is True
    assert "in_progress" not in final[0]
    assert final[0]["live_log"] == live.name  # how a viewer of the live log finds this log
    assert [t for t in final[1:] if t["scenario"] == "scenario-a"] == seen_live


@pytest.mark.parametrize("next_run", [(), ("--eval-live-log", "false")], ids=["live", "no-live"])
def test_a_killed_runs_live_log_reads_interrupted_and_the_next_run_removes_it(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    held: HeldScenario,
    next_run: tuple[str, ...],
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 2}, "scenario-b": {"y": 1}})
    args = eval_args(endpoint.base_url, "--eval-concurrency", "1", "--eval-cache", "off")
    process = start_run(pytester.path, *args)
    live = wait_for(
        lambda: live_log_with(pytester.path, "scenario-a"), process, "scenario-a in the live log"
    )

    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    held.release()

    assert live.is_file()
    assert live_state(live.name) == "interrupted"
    again = pytester.runpytest("skills/s", *args, *next_run, "-k", "scenario-a")
    assert again.ret == pytest.ExitCode.OK
    again.stdout.fnmatch_lines(
        [f"*removed a temporary file left by a killed run: {LOGS.as_posix()}/{live.name}*"]
    )
    assert live_logs(pytester.path) == []


def test_live_log_false_keeps_no_live_log(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, held: HeldScenario
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 2}, "scenario-b": {"y": 1}})
    args = eval_args(endpoint.base_url, "--eval-concurrency", "1", "--eval-live-log", "false")
    process = start_run(pytester.path, *args)
    wait_for(lambda: True if held.asked.is_set() else None, process, "scenario-b's call")

    assert live_logs(pytester.path) == []  # scenario-a has finished, scenario-b waits
    held.release()
    out = finish(process)
    assert process.returncode == pytest.ExitCode.OK, out[-3000:]
    [log] = (pytester.path / LOGS).glob("*.jsonl")
    assert "live_log" not in records(log)[0]


def test_a_run_stopped_by_x_leaves_its_run_log_and_no_live_log(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 2}, "scenario-b": {"y": 1}})
    script.agent_replies = [Reply(status=500, json={"error": "down"})] * 20

    result = pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url, "--eval-cache", "off"), "-x", "-p", "no:randomly"
    )

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*stopping after 1 failures*"])
    assert live_logs(pytester.path) == []
    [log] = (pytester.path / LOGS).glob("*.jsonl")
    assert records(log)[0]["record"] == "run"


def test_collect_only_runs_nothing_so_it_keeps_no_live_log(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 2}})

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url), "--collect-only", "-q")

    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*1 test collected*"])
    assert not (pytester.path / LOGS).exists()  # not even its folder is made
