"""Scenario results from the process that ran them to the one that reports them.

The result rides on the scenario's reports as the attribute ``openkata_result`` (set by the
``pytest_runtest_makereport`` wrapper of :mod:`pytest_openkata.plugin.hooks`). Without xdist
that is the result object itself. Under xdist, a worker's reports cross to the controller
through pytest's documented pair of hooks, ``pytest_report_to_serializable`` and
``pytest_report_from_serializable``: the result goes as its JSON-able dict and comes back as
a :class:`~pytest_openkata.core.results.ScenarioResult`.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from pytest_openkata.core.results import ScenarioResult

RESULT_ATTR = "openkata_result"

_Report = pytest.CollectReport | pytest.TestReport


def result_of(report: object) -> ScenarioResult | None:
    """The scenario result a report carries, if any."""
    result = getattr(report, RESULT_ATTR, None)
    return result if isinstance(result, ScenarioResult) else None


@pytest.hookimpl(wrapper=True)
def pytest_report_to_serializable(
    config: pytest.Config, report: _Report
) -> Generator[None, dict[str, Any] | None, dict[str, Any] | None]:
    data = yield
    result = result_of(report)
    if data is not None and result is not None:
        data[RESULT_ATTR] = result.to_dict()
    return data


@pytest.hookimpl(wrapper=True)
def pytest_report_from_serializable(
    config: pytest.Config, data: dict[str, Any]
) -> Generator[None, _Report | None, _Report | None]:
    report = yield
    carried = getattr(report, RESULT_ATTR, None)
    if isinstance(carried, dict):
        setattr(report, RESULT_ATTR, ScenarioResult.from_dict(carried))
    return report
