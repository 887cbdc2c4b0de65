"""Hooks that pytest-openkata calls, for other plugins and conftest files to implement."""

from __future__ import annotations

import pytest

from pytest_openkata.contracts.results import ScenarioResult
from pytest_openkata.core.summary import SkillSummary


@pytest.hookspec
def pytest_openkata_scenario_result(result: ScenarioResult, item: pytest.Item) -> None:
    """A scenario has been evaluated: judged and scored, or errored (``result.error``).

    Called in the process that ran it (an xdist worker, or the only process), before its
    criteria are reported as subtests.
    """


@pytest.hookspec
def pytest_openkata_skill_summary(summary: SkillSummary, config: pytest.Config) -> None:
    """A skill's summary at the end of the run: its results, overall percentage, gate and
    where its report went (``summary.report_path``, ``summary.report_error``).

    Called once per skill, on the process that reports (the xdist controller, or the only
    process), after every reporter has run and the exit status is set. The summary is frozen,
    as every reporter saw it.
    """
