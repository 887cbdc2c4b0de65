"""pytest run as a user runs it: a process of its own, its output kept as the bytes it wrote."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

GUARD_SECONDS = 300  # a run that hangs fails the test here instead of hanging the suite


def run_pytest(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """``python -m pytest ARGS`` in ``cwd``, with standard output and error captured (not a
    terminal: pytest writes no colour)."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=cwd,
        capture_output=True,
        timeout=GUARD_SECONDS,
        check=False,
    )
