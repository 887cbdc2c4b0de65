"""A signal ends a run at every phase, cleanly: SIGTERM sent as GNU ``timeout`` sends it (once to
pytest, once more to its process group) while the agent's call waits, while the judge's call
waits, while an agent CLI runs on the host, and while a check's pattern backtracks, with and
without xdist; SIGHUP to the run's process group (a closed terminal) as SIGTERM. Each time the
run exits with pytest's status for an interrupted run (2) and no traceback, says so on its last
line, leaves its run log (no scenario had finished) and leaves no agent process behind.

Each run is a pytest process of its own in a session of its own; the test waits until the run
is in the phase (the endpoint received the call, the CLI started, the process spins on the
pattern), then signals it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from pytest_openkata.infra.processes import OWNER_VARIABLE
from tests.support.endpoint import RecordedRequest, Reply, ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_skill

GUARD_SECONDS = 120  # a phase never reached, or a run that does not end, fails the test here
STOPPED_LINE = "interrupted: threshold not enforced, exit 2"
NEVER = 3600.0  # an answer delayed past the test


def _start(root: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "skills/s", *args],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, as a job under `timeout` has
    )


def _wait_until(ready: Callable[[], bool], process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + GUARD_SECONDS
    while not ready():
        if process.poll() is not None:
            out = process.stdout.read().decode() if process.stdout else ""
            pytest.fail(f"the run ended before {what}:\n{out[-3000:]}")
        if time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            pytest.fail(f"the run never reached {what}")
        time.sleep(0.05)


def _terminate_as_timeout_does(process: subprocess.Popen[bytes]) -> tuple[int, str]:
    """SIGTERM to the run, then to its process group, as GNU timeout sends them; the exit
    status and the output."""
    os.kill(process.pid, signal.SIGTERM)
    os.killpg(process.pid, signal.SIGTERM)
    return _ended(process, "SIGTERM")


def _hang_up(process: subprocess.Popen[bytes]) -> tuple[int, str]:
    """SIGHUP to the run's process group, as a closed terminal or a dropped SSH session
    sends it to every process of the job; the exit status and the output."""
    os.killpg(process.pid, signal.SIGHUP)
    return _ended(process, "SIGHUP")


def _ended(process: subprocess.Popen[bytes], signalled: str) -> tuple[int, str]:
    try:
        out, _ = process.communicate(timeout=GUARD_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"the run did not end after {signalled}")
    return process.returncode, out.decode()


def _agents_of(pid: int) -> list[psutil.Process]:
    """The live processes that carry the run's mark (its agent CLIs and what they started)."""
    found = []
    for process in psutil.process_iter():
        try:
            mark = process.environ().get(OWNER_VARIABLE, "")
        except psutil.Error:
            continue
        if f":{pid}:" in mark:
            found.append(process)
    return found


def _assert_stopped_cleanly(root: Path, status: int, out: str) -> None:
    assert status == pytest.ExitCode.INTERRUPTED, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert out.rstrip("\n").splitlines()[-1] == STOPPED_LINE, out[-3000:]
    [log] = (root / ".openkata" / "runs").glob("*.jsonl")
    head = json.loads(log.read_text().splitlines()[0])
    assert (head["record"], head["complete"]) == ("run", False)


def _judge_hangs(script: EvalScript) -> Callable[[RecordedRequest], Reply]:
    def respond(request: RecordedRequest) -> Reply:
        if request.json and request.json["messages"][0]["role"] == "system":
            return Reply(json={}, delay=NEVER)
        return script(request)

    return respond


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
@pytest.mark.parametrize("stop", [_terminate_as_timeout_does, _hang_up], ids=["sigterm", "sighup"])
def test_a_stop_signal_while_the_agents_call_waits(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    workers: tuple[str, ...],
    stop: Callable[[subprocess.Popen[bytes]], tuple[int, str]],
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}, "scenario-b": {"y": 1}})
    endpoint.respond_with(lambda request: Reply(json={}, delay=NEVER))
    process = _start(pytester.path, *eval_args(endpoint.base_url), *workers)

    _wait_until(lambda: len(endpoint.requests) >= 1, process, "the agent's call")
    status, out = stop(process)

    _assert_stopped_cleanly(pytester.path, status, out)


def test_sigterm_twice_while_the_judges_call_waits(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    endpoint.respond_with(_judge_hangs(script))
    process = _start(pytester.path, *eval_args(endpoint.base_url))

    def judge_asked() -> bool:
        return any(
            request.json and request.json["messages"][0]["role"] == "system"
            for request in endpoint.requests
        )

    _wait_until(judge_asked, process, "the judge's call")
    status, out = _terminate_as_timeout_does(process)

    _assert_stopped_cleanly(pytester.path, status, out)


def test_sigterm_twice_while_an_agent_cli_runs_stops_the_cli_and_what_it_started(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    started = pytester.path / "started"
    process = _start(
        pytester.path,
        *eval_args(endpoint.base_url),
        "--eval-backend",
        "command",
        "--eval-agent-command",
        f"touch {started}; sleep 600; echo done",
        "--eval-judge-backend",
        "http",
    )

    _wait_until(started.exists, process, "the agent CLI")
    _wait_until(lambda: len(_agents_of(process.pid)) >= 2, process, "the CLI's sleep")
    status, out = _terminate_as_timeout_does(process)

    _assert_stopped_cleanly(pytester.path, status, out)
    assert _agents_of(process.pid) == []


def test_sigterm_twice_while_a_pattern_backtracks(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    """A pattern search holds no lock the main thread needs: the signal is taken at once, even
    at concurrency 1, where the scenario runs on pytest's own thread."""
    skill = write_skill(pytester.path, "s", {"scenario-a": {}})
    check = {
        "name": "ends-with-a",
        "description": "the answer is a's only",
        "max_score": 1,
        "type": "output_regex",
        "pattern": "^(a|aa)+$",
        "timeout": 3600,
    }
    (skill / "evals" / "scenario-a" / "checks.json").write_text(json.dumps([check]))
    script.agent_answer = "a" * 80 + "b"
    process = _start(pytester.path, *eval_args(endpoint.base_url), "--eval-concurrency", "1")

    _wait_until(lambda: len(endpoint.requests) >= 1, process, "the agent's answer")
    spinning = psutil.Process(process.pid)
    before = sum(spinning.cpu_times()[:2])
    _wait_until(lambda: sum(spinning.cpu_times()[:2]) > before + 2, process, "the search")
    status, out = _terminate_as_timeout_does(process)

    _assert_stopped_cleanly(pytester.path, status, out)


def test_sigterm_twice_while_the_run_winds_up_lets_it_finish_its_clean_up_and_reports(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    """Once every scenario is done, the session winds up (fixtures torn down, reports
    written): a SIGTERM then is noted, not raised, and the run ends with its own status."""
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    pytester.makeconftest(
        """
        import time
        from pathlib import Path

        import pytest

        @pytest.hookimpl(tryfirst=True)
        def pytest_sessionfinish(session):
            Path("winding-up").touch()
            deadline = time.monotonic() + 120
            while not Path("signalled").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        """
    )
    process = _start(pytester.path, *eval_args(endpoint.base_url))
    _wait_until((pytester.path / "winding-up").exists, process, "the session's end")

    os.kill(process.pid, signal.SIGTERM)
    os.killpg(process.pid, signal.SIGTERM)
    (pytester.path / "signalled").touch()
    out, _ = process.communicate(timeout=GUARD_SECONDS)

    text = out.decode()
    assert process.returncode == pytest.ExitCode.OK, text[-3000:]
    assert "Traceback" not in text
    assert text.rstrip("\n").splitlines()[-1] == "s 100% >= 95%: exit 0"
    assert list(pytester.path.glob("skills/s/evals/results/**/*.json"))
    [log] = (pytester.path / ".openkata" / "runs").glob("*.jsonl")
    assert json.loads(log.read_text().splitlines()[0])["complete"] is True
