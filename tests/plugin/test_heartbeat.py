"""Status lines in a log: a pytest run whose output is a pipe, read as it goes, against an
endpoint whose agent answers only once a status line has been written (or slowly, where no
line must come). The interval is shortened with ``-o eval_status_interval``."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.endpoint import RecordedRequest, Reply, ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_skill

GUARD_SECONDS = 120  # a run that never writes the line fails here instead of hanging
STATUS = re.compile(r"openkata: \d+/\d+ scenarios done")
SHORT = ("-o", "eval_status_interval=0.05")


class _Log:
    """A pytest run whose stdout and stderr are one pipe, read as it goes."""

    def __init__(self, args: list[str], cwd: Path) -> None:
        environ = {k: v for k, v in os.environ.items() if not k.startswith("OPENKATA_EVAL_")}
        environ.pop("CI", None)
        environ.update(COLUMNS="80")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", *args],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=environ,
        )
        self.output = b""
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        while chunk := self.process.stdout.read1(4096):
            with self._changed:
                self.output += chunk
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, pattern: str) -> bool:
        """Whether ``pattern`` shows up in the output before the run ends."""
        found = re.compile(pattern.encode())
        with self._changed:
            self._changed.wait_for(
                lambda: found.search(self.output) is not None or not self._reader.is_alive(),
                timeout=GUARD_SECONDS,
            )
            return found.search(self.output) is not None

    def finish(self) -> str:
        self.process.wait(timeout=GUARD_SECONDS)
        self._reader.join(timeout=GUARD_SECONDS)
        return self.output.decode("utf-8", errors="replace")


def _is_agent(request: RecordedRequest) -> bool:
    return bool(request.json["messages"][0]["role"] != "system")


def _agent_held(script: EvalScript, gate: threading.Event) -> Callable[[RecordedRequest], Reply]:
    """The script, but agent calls wait until ``gate`` opens."""

    def answer(request: RecordedRequest) -> Reply:
        if _is_agent(request):
            gate.wait(GUARD_SECONDS)
        return script(request)

    return answer


def _held_until(
    args: list[str], cwd: Path, endpoint: ScriptedEndpoint, script: EvalScript, pattern: str
) -> tuple[bool, _Log, str]:
    """Run pytest with agent calls held until ``pattern`` shows in its output."""
    gate = threading.Event()
    endpoint.respond_with(_agent_held(script, gate))
    try:
        log = _Log(args, cwd)
        seen = log.wait_for(pattern)
        gate.set()
        return seen, log, log.finish()
    finally:
        gate.set()


def test_status_lines_in_a_log_say_what_runs_on_lines_of_their_own(
    tmp_path: Path, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(tmp_path, "s", {"scenario-a": {"x": 1}, "scenario-b": {"x": 1}})

    seen, log, text = _held_until(
        ["skills/s", *eval_args(endpoint.base_url), *SHORT, "--eval-concurrency", "1", "-rA"],
        tmp_path,
        endpoint,
        script,
        r"openkata: 0/2 scenarios done, 1 running \(1 on agent\); "
        r"slowest: s::scenario-a \(\d+s, on agent\); \d+s so far\n",
    )

    assert seen, text
    assert log.process.returncode == 0, text
    # pytest had written "skills/s/evals " and waited for the first dot: the status starts
    # on a line of its own, and so does every other.
    assert "skills/s/evals \nopenkata: 0/2 scenarios done" in text
    lines = text.splitlines()
    statuses = [line for line in lines if STATUS.search(line)]
    assert statuses
    assert [line for line in statuses if not STATUS.match(line) or "so far" not in line] == []
    # What pytest writes after a status lines up as on a line of its own: its percentage
    # at the right edge (pytest leaves the last of the 80 columns free).
    assert any(line.startswith(".") and line.endswith("[100%]") for line in lines), text
    assert all(len(line) == 79 for line in lines if line.endswith("[100%]")), text
    # Never in a test's captured output (-rA would show it), never after the run.
    assert "Captured stdout" not in text
    summary = text[text.index("openkata eval summary") :]
    assert STATUS.search(summary) is None
    assert "Overall: 100%" in summary


def test_under_xdist_status_lines_say_what_the_workers_reported(
    tmp_path: Path, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(tmp_path, "s", {"scenario-a": {"x": 1}, "scenario-b": {"x": 1}})

    seen, log, text = _held_until(
        ["skills/s", *eval_args(endpoint.base_url), *SHORT, "-n", "2"],
        tmp_path,
        endpoint,
        script,
        r"openkata: 0/2 scenarios done, [12] under way on workers; "
        r"slowest: s::scenario-[ab] \(\d+s\); \d+s so far\n",
    )

    assert seen, text
    assert log.process.returncode == 0, text
    # The controller sees no worker's calls: the line does not pretend to.
    statuses = [line for line in text.splitlines() if STATUS.search(line)]
    assert not any("running" in line or "on agent" in line for line in statuses), statuses


def _slow_agent(script: EvalScript) -> Callable[[RecordedRequest], Reply]:
    def answer(request: RecordedRequest) -> Reply:
        reply = script(request)
        return dataclasses.replace(reply, delay=1.0) if _is_agent(request) else reply

    return answer


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["-qq", *SHORT], "-qq asks for less than -q"),
        ([], "the run ends before the first interval (30 s by default)"),
        (["-o", "eval_status_interval=0"], "0 turns the lines off"),
    ],
)
def test_no_status_lines(
    tmp_path: Path, endpoint: ScriptedEndpoint, script: EvalScript, args: list[str], why: str
) -> None:
    write_skill(tmp_path, "s", {"scenario-a": {"x": 1}})
    endpoint.respond_with(_slow_agent(script))

    log = _Log(["skills/s", *eval_args(endpoint.base_url), *args], tmp_path)
    text = log.finish()

    assert log.process.returncode == 0, text
    assert STATUS.search(text) is None, why


def test_a_bad_interval_is_a_usage_error_naming_the_key(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})

    result = pytester.runpytest_subprocess(
        "skills/s", *eval_args(endpoint.base_url), "-o", "eval_status_interval=soon"
    )

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*eval_status_interval: expected seconds*'soon'*"])


def test_status_lines_work_without_xdist_loaded(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    # The status line's plugin implements one of xdist's hooks: with xdist not loaded (-p
    # no:xdist, or not installed) that hook is unknown to pytest, which must not refuse it.
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})

    result = pytester.runpytest_subprocess(
        "skills/s", *eval_args(endpoint.base_url), "-p", "no:xdist", "-o", "eval_status_interval=1"
    )

    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(passed=1)
