"""The status line during a run, read off a real pseudo-terminal that pytest writes to, and
its absence where it does not belong (no tty, ``-q``, CI)."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.endpoint import RecordedRequest, Reply, ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_skill

STATUS = re.compile(r"openkata: (\d+)/(\d+) scenarios done[^\x1b]*")
GUARD_SECONDS = 120  # a run that never shows the line fails here instead of hanging


class _Terminal:
    """A pytest run whose stdout and stderr are a pseudo-terminal, read as it goes."""

    def __init__(self, args: list[str], cwd: Path, environ: dict[str, str]) -> None:
        master, slave = pty.openpty()
        self._master = master
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pytest", *args],
            cwd=cwd,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=environ,
        )
        os.close(slave)
        self.output = b""
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._master, 4096)
            except OSError:  # the run ended and the terminal closed
                chunk = b""
            with self._changed:
                if not chunk:
                    self._changed.notify_all()
                    return
                self.output += chunk
                self._changed.notify_all()

    def wait_for(self, pattern: str) -> bool:
        with self._changed:
            return (
                self._changed.wait_for(
                    lambda: (
                        re.search(pattern.encode(), self.output) is not None
                        or not self._reader.is_alive()
                    ),
                    timeout=GUARD_SECONDS,
                )
                and re.search(pattern.encode(), self.output) is not None
            )

    def finish(self) -> str:
        self.process.wait(timeout=GUARD_SECONDS)
        self._reader.join(timeout=GUARD_SECONDS)
        os.close(self._master)
        return self.output.decode("utf-8", errors="replace")


def _environ(**extra: str) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OPENKATA_EVAL_")}
    environ.pop("CI", None)
    environ.update(TERM="xterm", COLUMNS="160", LINES="40", **extra)
    return environ


def _gated(script: EvalScript, gate: threading.Event) -> Callable[[RecordedRequest], Reply]:
    """The script, but the first agent call waits until ``gate`` opens."""
    first = threading.Lock()

    def answer(request: RecordedRequest) -> Reply:
        is_agent = request.json["messages"][0]["role"] != "system"
        if is_agent and first.acquire(blocking=False):
            gate.wait(GUARD_SECONDS)
        return script(request)

    return answer


def test_the_status_line_shows_what_is_in_flight_and_is_gone_before_pytest_writes(
    tmp_path: Path, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(tmp_path, "s", {"scenario-a": {"x": 1}, "scenario-b": {"x": 1}})
    gate = threading.Event()
    endpoint.respond_with(_gated(script, gate))
    try:
        terminal = _Terminal(
            [
                "skills/s",
                *eval_args(endpoint.base_url),
                "-p",
                "no:randomly",
                "-p",
                "no:cacheprovider",
                "--eval-concurrency",
                "1",
            ],
            tmp_path,
            _environ(),
        )
        seen = terminal.wait_for(r"openkata: 0/2 scenarios done · 1 running · waiting 1 on agent")
        gate.set()
        text = terminal.finish()
    finally:
        gate.set()

    assert seen, text
    assert terminal.process.returncode == 0, text
    # Every status drawn was erased again: after the last one comes an erase, and the final
    # summary pytest and the plugin wrote holds no status text.
    last_status = list(STATUS.finditer(text))[-1]
    assert "\x1b[K" in text[last_status.end() :]
    summary = text[text.index("openkata eval summary") :]
    assert STATUS.search(summary) is None
    assert "Overall: 100%" in summary


@pytest.mark.parametrize(
    ("args", "extra", "why"),
    [
        (["-q"], {}, "quiet"),
        ([], {"CI": "true"}, "in CI"),
        (["-s"], {}, "output not captured: tests may write to the terminal"),
        (["-o", "log_cli=true"], {}, "live logging writes to the terminal"),
    ],
)
def test_no_status_line_when_quiet_in_ci_or_when_something_else_writes(
    tmp_path: Path,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    args: list[str],
    extra: dict[str, str],
    why: str,
) -> None:
    write_skill(tmp_path, "s", {"scenario-a": {"x": 1}})
    terminal = _Terminal(
        ["skills/s", *eval_args(endpoint.base_url), "-p", "no:cacheprovider", *args],
        tmp_path,
        _environ(**extra),
    )
    text = terminal.finish()

    assert terminal.process.returncode == 0, text
    assert "openkata: 0/1 scenarios" not in text, why
    assert "\x1b7" not in text, why


def test_no_status_line_when_the_output_is_not_a_terminal(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})

    result = pytester.runpytest_subprocess("skills/s", *eval_args(endpoint.base_url))

    # No cursor control in a log (what is written there instead: test_heartbeat.py).
    assert result.ret == pytest.ExitCode.OK
    assert "\x1b7" not in result.stdout.str()
    assert "\x1b[K" not in result.stdout.str()
