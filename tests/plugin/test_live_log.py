"""The live log of a run in progress, through real pytest runs in subprocesses against a real
scripted endpoint: the agent's call of one scenario is held until the test has seen the live
log hold the scenario that finished before it. Seen there: the run record marked in
progress, then that scenario's trial records, the very records the run log ends with; once the
run ends the live log is gone (serially and under ``-n 2``); a run killed outright leaves it,
shown as interrupted, and the next run removes it and says so; ``live_log = false`` keeps none.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pytest_openkata.core.live_log import is_live_log, live_state
from tests.support.endpoint import RecordedRequest, Reply, ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_skill

GUARD_SECONDS = 120  # a run that never reaches the state waited for fails the test here
LOGS = Path(".openkata") / "runs"


class HeldScenario:
    """Answers as ``script`` does, but holds the agent's call of ``scenario`` until
    :meth:`release`."""

    def __init__(self, script: EvalScript, scenario: str) -> None:
        self.script = script
        self.scenario = scenario
        self.released = threading.Event()

    def __call__(self, request: RecordedRequest) -> Reply:
        messages = request.json["messages"]
        if messages[0]["role"] != "system" and self.scenario in messages[-1]["content"]:
            self.released.wait(GUARD_SECONDS)
        return self.script(request)

    def release(self) -> None:
        self.released.set()


@pytest.fixture
def held(endpoint: ScriptedEndpoint, script: EvalScript) -> Iterator[HeldScenario]:
    holder = HeldScenario(script, "scenario-b")
    endpoint.respond_with(holder)
    yield holder
    holder.release()  # a test that failed early never leaves a handler waiting


def _start(root: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "skills/s", "-p", "no:randomly", *args],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _live_logs(root: Path) -> list[Path]:
    folder = root / LOGS
    return sorted(p for p in folder.iterdir() if is_live_log(p.name)) if folder.is_dir() else []


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _wait_for(found: Callable[[], Path | None], process: subprocess.Popen[bytes]) -> Path:
    deadline = time.monotonic() + GUARD_SECONDS
    while (path := found()) is None:
        if process.poll() is not None:
            out = process.stdout.read().decode() if process.stdout else ""
            pytest.fail(f"the run ended before its live log held scenario-a:\n{out[-3000:]}")
        if time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            pytest.fail("the live log never held scenario-a")
        time.sleep(0.05)
    return path


def _live_log_with_scenario_a(root: Path) -> Path | None:
    for path in _live_logs(root):
        try:
            records = _records(path)
        except (OSError, ValueError):  # a line being written
            continue
        if any(r.get("scenario") == "scenario-a" for r in records[1:]):
            return path
    return None


def _finish(process: subprocess.Popen[bytes]) -> str:
    try:
        out, _ = process.communicate(timeout=GUARD_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail("the run did not end")
    return out.decode()


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_the_live_log_holds_each_finished_scenario_and_is_gone_when_the_run_ends(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    held: HeldScenario,
    workers: tuple[str, ...],
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 2}, "scenario-b": {"y": 1}})
    args = eval_args(endpoint.base_url, "--eval-concurrency", "1", "--eval-cache", "off")
    process = _start(pytester.path, *args, *workers)

    live = _wait_for(lambda: _live_log_with_scenario_a(pytester.path), process)
    head, *trials = _records(live)
    assert (head["record"], head["complete"], head["in_progress"]) == ("run", False, True)
    assert head["settings"]["agent"] == "http"
    assert [(t["scenario"], t["trial"]) for t in trials] == [("scenario-a", 1)]
    assert str(pytester.path) not in live.read_text(encoding="utf-8")  # no machine path
    assert live_state(live.name) == "running"
    seen_live = trials
    held.release()
    out = _finish(process)

    assert process.returncode == pytest.ExitCode.OK, out[-3000:]
    assert _live_logs(pytester.path) == []
    [log] = (pytester.path / LOGS).glob("*.jsonl")
    final = _records(log)
    assert final[0]["complete"] is True
    assert "in_progress" not in final[0]
    assert [t for t in final[1:] if t["scenario"] == "scenario-a"] == seen_live


def test_a_killed_runs_live_log_reads_interrupted_and_the_next_run_removes_it(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, held: HeldScenario
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 2}, "scenario-b": {"y": 1}})
    args = eval_args(endpoint.base_url, "--eval-concurrency", "1", "--eval-cache", "off")
    process = _start(pytester.path, *args)
    live = _wait_for(lambda: _live_log_with_scenario_a(pytester.path), process)

    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    held.release()

    assert live.is_file()
    assert live_state(live.name) == "interrupted"
    again = pytester.runpytest("skills/s", *args, "-k", "scenario-a")
    assert again.ret == pytest.ExitCode.OK
    again.stdout.fnmatch_lines(
        [f"*removed a temporary file left by a killed run: {LOGS.as_posix()}/{live.name}*"]
    )
    assert _live_logs(pytester.path) == []


def test_live_log_false_keeps_no_live_log(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, held: HeldScenario
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 2}, "scenario-b": {"y": 1}})
    args = eval_args(endpoint.base_url, "--eval-concurrency", "1", "--eval-live-log", "false")
    process = _start(pytester.path, *args)
    deadline = time.monotonic() + GUARD_SECONDS
    while not any(endpoint_held(endpoint)) and time.monotonic() < deadline:
        time.sleep(0.05)

    assert _live_logs(pytester.path) == []  # scenario-a has finished, scenario-b waits
    held.release()
    out = _finish(process)
    assert process.returncode == pytest.ExitCode.OK, out[-3000:]
    assert len(list((pytester.path / LOGS).glob("*.jsonl"))) == 1


def endpoint_held(endpoint: ScriptedEndpoint) -> Iterator[bool]:
    """Whether the agent's call of scenario-b has come (so scenario-a has finished)."""
    for request in endpoint.requests:
        messages = request.json["messages"]
        yield messages[0]["role"] != "system" and "scenario-b" in messages[-1]["content"]
