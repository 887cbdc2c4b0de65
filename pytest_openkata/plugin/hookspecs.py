"""Hooks that pytest-openkata calls, for other plugins and conftest files to implement."""

from __future__ import annotations

import pytest

from pytest_openkata.core.results import ScenarioResult


@pytest.hookspec
def pytest_openkata_scenario_result(result: ScenarioResult, item: pytest.Item) -> None:
    """A scenario has been evaluated: judged and scored, or errored (``result.error``).

    Called in the process that ran it (an xdist worker, or the only process), before its
    criteria are reported as subtests.
    """
