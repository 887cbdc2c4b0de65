"""Runs against the real 135M local model that tolerate its one known judge failure.

Now and then the model writes its structured verdicts until the server's token cap, twice in a
row; the scenario then errors with :data:`JUDGE_CUT_OFF`, as it should. That failure is the
model's, not the plugin's, so :func:`run_until_judged` repeats such a run (agent answers then
come from the result cache and only the judge is asked again), and only for that error.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_openkata.providers.backends.http import CUT_OFF_MESSAGE

JUDGE_ATTEMPTS = 3
JUDGE_CUT_OFF = f"judge parse failed after retry: {CUT_OFF_MESSAGE}"


def run_until_judged(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, Path]:
    """``pytester.runpytest(*args)`` writing its report to a fresh ``out-N/`` folder, again
    while the only scenario errors are the judge's cut-off answers; returns the last run and
    its report. Any other error is returned at once for the test to show."""
    for attempt in range(JUDGE_ATTEMPTS):
        output = f"out-{attempt}"
        result = pytester.runpytest(*args, "--eval-output", f"{output}/")
        [written] = (pytester.path / output).glob("*.json")
        scenarios = json.loads(written.read_text()).get("scenarios") or []
        errors = {entry["error"] for entry in scenarios if entry.get("error")}
        if errors != {f"judge: {JUDGE_CUT_OFF}"}:
            return result, written
    pytest.fail(f"the judge's answer was cut off in all {JUDGE_ATTEMPTS} runs", pytrace=False)
