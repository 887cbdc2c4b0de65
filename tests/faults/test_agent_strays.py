"""What an agent leaves running outside its process group is stopped when the run ends.

A run ends each agent CLI's process group when the CLI exits, but a process the agent started
in a session of its own (a server left in the background, ``setsid``) is in no group of the
CLI's. It still carries the run's mark, so the run stops it as it ends and says so, rather than
leave it until another run sweeps what runs that are over left.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.architecture.test_core_without_pytest import run_without_pytest
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, evaluate_skill_s, write_skill

ANSWER = "The change is named and kept short."


def _leaves_a_server(pid_file: Path) -> str:
    """A command agent that starts ``sleep`` in a session of its own, notes its pid, answers."""
    server = f"echo $$ > {shlex.quote(str(pid_file))}; exec sleep 300"
    return (
        f"cat > /dev/null; setsid sh -c {shlex.quote(server)} < /dev/null > /dev/null 2>&1 & "
        f"while [ ! -s {shlex.quote(str(pid_file))} ]; do sleep 0.05; done; "
        f"echo {shlex.quote(ANSWER)}"
    )


@pytest.fixture
def pid_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "server.pid"
    yield path
    if path.is_file():  # whatever the run left, the test does not leave
        try:
            left = psutil.Process(int(path.read_text()))
            if "sleep" in left.name():
                left.kill()
        except (psutil.Error, ValueError):
            pass


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_process_an_agent_left_in_a_session_of_its_own_is_stopped_as_the_run_ends(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript, pid_file: Path
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})

    result = pytester.runpytest_subprocess(
        "skills/s",
        "--eval-backend", "command",
        "--eval-agent-command", _leaves_a_server(pid_file),
        "--eval-judge-backend", "http",
        "--eval-base-url", endpoint.base_url,
    )  # fmt: skip

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    server = int(pid_file.read_text())
    assert not _alive(server)
    result.stdout.fnmatch_lines(
        [
            "openkata: stopped 1 agent process this run's agents left running: "
            f"pid {server} (sleep 300)"
        ]
    )


def test_evaluate_stops_what_its_agents_left_running_as_a_pytest_run_does(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript, pid_file: Path
) -> None:
    # A caller that lives on (a notebook, a service) would keep such a process for good: the
    # mark's owner is alive, so no later run's sweep takes it.
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    code = evaluate_skill_s(endpoint.base_url, _leaves_a_server(pid_file))

    result = run_without_pytest(code, cwd=pytester.path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"
    server = int(pid_file.read_text())
    assert not _alive(server)
    assert (
        f"openkata: stopped 1 agent process this run's agents left running: pid {server} "
        "(sleep 300)"
    ) in result.stderr


def test_an_evaluate_call_that_ends_leaves_another_calls_agent_running(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    # Two calls on two threads of one process (a service): their agents carry the same mark,
    # and the first call to end must not stop the agent of the one still running.
    write_skill(pytester.path, "a", {"scenario-a": {"x": 1}})
    write_skill(pytester.path, "b", {"scenario-b": {"x": 1}})
    waits = (
        "cat > /dev/null; touch b-started; "
        f"while [ ! -e go ]; do sleep 0.05; done; echo {shlex.quote(ANSWER)}"
    )
    answers = f"cat > /dev/null; echo {shlex.quote(ANSWER)}"
    code = f"""
        import pathlib, threading, time
        from pytest_openkata import evaluate

        def call(skill, command):
            return evaluate(
                skill,
                backend="command",
                agent_command=command,
                judge_backend="http",
                http={{"base_url": {endpoint.base_url!r}}},
            )

        found = {{}}
        later = threading.Thread(target=lambda: found.update(b=call("skills/b", {waits!r})))
        later.start()
        while not pathlib.Path("b-started").exists():
            time.sleep(0.05)
        found["a"] = call("skills/a", {answers!r})  # ends while b's agent waits
        pathlib.Path("go").touch()
        later.join()
        print(found["a"][0].passed, found["b"][0].passed, found["b"][0].results[0].error)
    """

    result = run_without_pytest(code, cwd=pytester.path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True True None"
    assert "openkata: stopped" not in result.stderr
