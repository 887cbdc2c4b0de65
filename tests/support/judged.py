"""One run of pytest against the real local model, with its report in a fresh folder.

The local model decodes greedily with a fixed seed, so a run's verdicts are the same every
time: a test that fails on the model's answer fails again, and is never retried.
"""

from __future__ import annotations

from pathlib import Path

import pytest


def run_judged(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, Path]:
    """``pytester.runpytest(*args)`` writing its report to ``out/``; the run and its report."""
    result = pytester.runpytest(*args, "--eval-output", "out/")
    [written] = (pytester.path / "out").glob("*.json")
    return result, written
