"""A run killed outright (SIGKILL) leaves no agent behind for good: the kernel ends the agent CLI
it ran on the host (its parent-death signal), and the next run stops what the CLI had started
and says so; the agents of a run still going are left alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from pytest_openkata.infra.processes import OWNER_VARIABLE
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_skill
from tests.support.subprocesses import run_pytest

GUARD_SECONDS = 120


def _marked(owner: int) -> list[psutil.Process]:
    """The live processes carrying the mark of the run whose process id is ``owner``."""
    found = []
    for process in psutil.process_iter():
        try:
            mark = process.environ().get(OWNER_VARIABLE, "")
            if mark.startswith(f"{owner}:") and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except psutil.Error:
            continue
    return found


def _wait_until(ready: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + GUARD_SECONDS
    while not ready():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)


def _run_with_a_hanging_cli(root: Path, endpoint: ScriptedEndpoint) -> subprocess.Popen[bytes]:
    """A run whose agent CLI (sh) starts a child (sleep) and waits for it, once it has."""
    started = root / "started"
    process = subprocess.Popen(
        [
            sys.executable, "-m", "pytest", "skills/s", *eval_args(endpoint.base_url),
            "--eval-backend", "command",
            "--eval-agent-command", f"touch {started}; sleep 600; echo done",
            "--eval-judge-backend", "http",
        ],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    _wait_until(lambda: len(_marked(process.pid)) >= 2, "the CLI and its child")
    return process


@pytest.fixture
def killed_run_left(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> Iterator[list[psutil.Process]]:
    """The processes a SIGKILLed run left, once the kernel has ended its CLI."""
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    run = _run_with_a_hanging_cli(pytester.path, endpoint)
    cli = [p for p in _marked(run.pid) if p.name() == "sh"]

    os.kill(run.pid, signal.SIGKILL)
    run.wait()

    _wait_until(lambda: not any(p.is_running() for p in cli), "the CLI ended with its run")
    left = _marked(run.pid)
    assert [p.name() for p in left] == ["sleep"]  # what the parent-death signal cannot reach
    yield left
    for process in left:
        if process.is_running():
            process.kill()


def test_the_next_run_stops_what_a_killed_runs_agent_started_and_says_so(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, killed_run_left: list[psutil.Process]
) -> None:
    [sleep] = killed_run_left

    result = run_pytest(pytester.path, "skills/s", *eval_args(endpoint.base_url))

    out = result.stdout.decode()
    assert (
        f"openkata: stopped 1 agent process a killed run left running: pid {sleep.pid} "
        "(sleep 600)" in out
    ), out[-3000:]
    _wait_until(lambda: not sleep.is_running() or sleep.status() == psutil.STATUS_ZOMBIE, "gone")


def test_a_run_leaves_the_agents_of_a_run_still_going_alone(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    running = _run_with_a_hanging_cli(pytester.path, endpoint)
    try:
        agents = _marked(running.pid)

        other = run_pytest(pytester.path, "skills/s", *eval_args(endpoint.base_url))

        assert "a killed run left running" not in other.stdout.decode()
        assert all(agent.is_running() for agent in agents)
    finally:
        os.killpg(running.pid, signal.SIGTERM)
        running.wait(timeout=GUARD_SECONDS)
    _wait_until(lambda: not _marked(running.pid), "the run's agents stopped with it")
