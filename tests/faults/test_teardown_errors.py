"""A fixture of the user's whose teardown raises at the session's end does not take the run's
reports with it.

After Ctrl-C (or SIGTERM), pytest tears the session's fixtures down in its own
``pytest_sessionfinish`` (otherwise the last item's teardown does, ``-x`` too); an exception
there ends pytest with a traceback and exit status 1. The run log is written all the same, the
live log is removed, and the run's last line says why the status is 1.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
from pathlib import Path

import pytest

from tests.faults.test_signals import NEVER, _start, _terminate_as_timeout_does, _wait_until
from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_skill
from tests.support.live_runs import HeldScenario, live_logs, start_run, wait_for
from tests.support.marked import ends

FAILING_TEARDOWN = """
import pytest

@pytest.fixture(scope="session", autouse=True)
def service():
    yield
    raise RuntimeError("the service did not stop")
"""


def _run_logs(pytester: pytest.Pytester) -> list[dict[str, object]]:
    return [
        json.loads(path.read_text().splitlines()[0])
        for path in sorted((pytester.path / ".openkata" / "runs").glob("*.jsonl"))
    ]


def test_after_sigterm_the_reports_are_written_and_the_last_line_says_exit_1(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}, "scenario-b": {"y": 1}})
    pytester.makeconftest(FAILING_TEARDOWN)
    held = HeldScenario(script, "scenario-b")  # scenario-a finishes, scenario-b waits
    endpoint.respond_with(held)
    process = start_run(pytester.path, *eval_args(endpoint.base_url, "--eval-concurrency", "1"))
    try:
        wait_for(lambda: held.asked.is_set() or None, process, "scenario-b's agent call")
        status, out = _terminate_as_timeout_does(process)
    finally:
        held.release()

    assert status == 1, out[-3000:]  # pytest's traceback: the interpreter's status
    assert "RuntimeError: the service did not stop" in out
    # The run's summary, which pytest's own terminal summary would have written, is there.
    summary = out.split("openkata eval summary")[1]
    assert "scenario-a" in summary
    assert (
        "interrupted: threshold not enforced; the session's end raised RuntimeError, exit 1"
    ) in summary
    [head] = _run_logs(pytester)
    assert (head["record"], head["complete"]) == ("run", False)
    assert live_logs(pytester.path) == []


def test_after_sigterm_what_the_agent_left_running_is_stopped_all_the_same(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, tmp_path: Path
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    pytester.makeconftest(FAILING_TEARDOWN)
    pid_file = tmp_path / "server.pid"
    server = f"echo $$ > {shlex.quote(str(pid_file))}; exec sleep 300"
    agent = (
        f"cat > /dev/null; setsid sh -c {shlex.quote(server)} < /dev/null > /dev/null 2>&1 & "
        f"while [ ! -s {shlex.quote(str(pid_file))} ]; do sleep 0.05; done; exec sleep 600"
    )
    process = _start(
        pytester.path,
        "--eval-backend", "command", "--eval-agent-command", agent,
        "--eval-judge-backend", "http", "--eval-base-url", endpoint.base_url,
    )  # fmt: skip
    _wait_until(lambda: pid_file.is_file() and pid_file.read_text().strip() != "", process,
                "the agent's server")  # fmt: skip
    left = int(pid_file.read_text())

    status, out = _terminate_as_timeout_does(process)

    assert status == 1, out[-3000:]
    stopped = ends(left)
    if not stopped:  # the test leaves nothing, whatever the run did
        os.kill(left, signal.SIGKILL)
    assert stopped
    assert f"this run's agents left running: pid {left} (sleep 300)" in out


def test_after_sigterm_a_teardown_that_calls_pytest_exit_sets_the_status_the_line_says(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    pytester.makeconftest(
        FAILING_TEARDOWN.replace(
            'raise RuntimeError("the service did not stop")',
            'pytest.exit("the service asked to stop the run", returncode=3)',
        )
    )
    endpoint.respond_with(lambda request: Reply(json={}, delay=NEVER))
    process = _start(pytester.path, *eval_args(endpoint.base_url))
    _wait_until(lambda: len(endpoint.requests) >= 1, process, "the agent's call")

    status, out = _terminate_as_timeout_does(process)

    assert status == 3, out[-3000:]
    assert "Traceback" not in out
    assert out.rstrip("\n").splitlines()[-1] == "interrupted: threshold not enforced, exit 3"
    [head] = _run_logs(pytester)
    assert (head["record"], head["complete"]) == ("run", False)
