"""Helpers for tests of a run in progress: a real pytest run in a subprocess of its own whose
agent call of one scenario the test holds until it has seen what it waits for."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pytest_openkata.core.live_log import is_live_log
from tests.support.endpoint import RecordedRequest, Reply
from tests.support.evals import EvalScript

GUARD_SECONDS = 120  # a run that never reaches the state waited for fails the test here
LOGS = Path(".openkata") / "runs"
T = TypeVar("T")


class HeldScenario:
    """Answers as ``script`` does, but holds the agent's call of ``scenario`` until
    :meth:`release`; :attr:`asked` is set once that call came."""

    def __init__(self, script: EvalScript, scenario: str) -> None:
        self.script = script
        self.scenario = scenario
        self.asked = threading.Event()
        self.released = threading.Event()

    def __call__(self, request: RecordedRequest) -> Reply:
        messages = request.json["messages"]
        if messages[0]["role"] != "system" and self.scenario in messages[-1]["content"]:
            self.asked.set()
            self.released.wait(GUARD_SECONDS)
        return self.script(request)

    def release(self) -> None:
        self.released.set()


def start_run(root: Path, *args: str) -> subprocess.Popen[bytes]:
    """``pytest skills/s ARGS`` in ``root``, in a session of its own."""
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "skills/s", "-p", "no:randomly", *args],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def wait_for(found: Callable[[], T | None], process: subprocess.Popen[bytes], what: str) -> T:
    """What ``found`` returns once it returns something; fails the test when the run ends
    first or never gets there."""
    deadline = time.monotonic() + GUARD_SECONDS
    while (value := found()) is None:
        if process.poll() is not None:
            out = process.stdout.read().decode() if process.stdout else ""
            pytest.fail(f"the run ended before {what}:\n{out[-3000:]}")
        if time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            pytest.fail(f"the run never reached {what}")
        time.sleep(0.05)
    return value


def finish(process: subprocess.Popen[bytes]) -> str:
    """The run's output once it ended."""
    try:
        out, _ = process.communicate(timeout=GUARD_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail("the run did not end")
    return out.decode()


def live_logs(root: Path) -> list[Path]:
    """The live logs in the run log folder of ``root``."""
    folder = root / LOGS
    return sorted(p for p in folder.iterdir() if is_live_log(p.name)) if folder.is_dir() else []


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def live_log_with(root: Path, scenario: str) -> Path | None:
    """The live log that holds a trial of ``scenario``, if any yet."""
    for path in live_logs(root):
        try:
            held = records(path)
        except (OSError, ValueError):  # a line being written, a log just removed
            continue
        if any(record.get("scenario") == scenario for record in held[1:]):
            return path
    return None
