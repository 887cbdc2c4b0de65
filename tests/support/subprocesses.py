"""pytest run as a user runs it: a process of its own, its output kept as the bytes it wrote."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

GUARD_SECONDS = 300  # a run that hangs fails the test here instead of hanging the suite


def run_pytest(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """``python -m pytest ARGS`` in ``cwd``, with standard output and error captured (not a
    terminal: pytest writes no colour). A run that outlives the guard is killed with all it
    started (its process group), and the test fails."""
    command = [sys.executable, "-m", "pytest", *args]
    process = subprocess.Popen(
        command,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=GUARD_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise
    return subprocess.CompletedProcess(command, process.returncode, out, err)
