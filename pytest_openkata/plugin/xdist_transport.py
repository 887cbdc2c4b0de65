"""Scenario results from the process that ran them to the one that reports them.

The result rides on the scenario's reports as the attribute ``openkata_result`` (set by the
``pytest_runtest_makereport`` wrapper of :mod:`pytest_openkata.plugin.hooks`). Without xdist
that is the result object itself. Under xdist, a worker's reports cross to the controller
through pytest's documented pair of hooks, ``pytest_report_to_serializable`` and
``pytest_report_from_serializable``: the result goes as its JSON-able dict and comes back as
a :class:`~pytest_openkata.contracts.results.ScenarioResult`, its skill folder relative to the
rootdir on the way (a worker on another host has its checkout elsewhere).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator
from typing import Any

import pytest

from pytest_openkata.contracts.results import ScenarioResult
from pytest_openkata.core.runlog import relative_skill_dir

RESULT_ATTR = "openkata_result"

_Report = pytest.CollectReport | pytest.TestReport


def result_of(report: object) -> ScenarioResult | None:
    """The scenario result a report carries, if any."""
    result = getattr(report, RESULT_ATTR, None)
    return result if isinstance(result, ScenarioResult) else None


def _moved(data: dict[str, Any], move: Callable[[str], str]) -> dict[str, Any]:
    """A result's dict with its skill folder (and its baseline's) moved by ``move``."""
    baseline = data.get("baseline")
    return {
        **data,
        "skill_dir": move(data["skill_dir"]),
        "baseline": None if baseline is None else _moved(baseline, move),
    }


@pytest.hookimpl(wrapper=True)
def pytest_report_to_serializable(
    config: pytest.Config, report: _Report
) -> Generator[None, dict[str, Any] | None, dict[str, Any] | None]:
    data = yield
    result = result_of(report)
    if data is not None and result is not None:
        # Relative to this worker's rootdir: a worker on another host has its checkout at
        # another path, and the controller writes each skill's report in its own checkout.
        data[RESULT_ATTR] = _moved(
            result.to_dict(), lambda path: relative_skill_dir(path, config.rootpath)
        )
    return data


@pytest.hookimpl(wrapper=True)
def pytest_report_from_serializable(
    config: pytest.Config, data: dict[str, Any]
) -> Generator[None, _Report | None, _Report | None]:
    report = yield
    carried = getattr(report, RESULT_ATTR, None)
    if isinstance(carried, dict):
        here = config.rootpath
        moved = _moved(carried, lambda path: os.path.normpath(here / path))
        setattr(report, RESULT_ATTR, ScenarioResult.from_dict(moved))
    return report
