"""The run's hard budget in pytest: one spend ledger for the controller and its xdist workers,
scenarios that the budget left unrun, and what the run spent.

The controller (or the one process without xdist) makes the ledger, a file of its own in the
folder the run's processes share (``.pytest_cache/d/openkata-budget``), named as the plugin's
temporary files are (:mod:`~pytest_openkata.infra.tempfiles`) so that a run killed outright
leaves it to the next run to remove, and hands its path to every worker through xdist's
documented ``pytest_configure_node`` hook (``workerinput``).
A scenario whose first trial the budget stopped raises
:class:`~pytest_openkata.core.budget.BudgetReached` in setup; its report is made a skip with
the reason (not an error: it was not run), and a user property marks it, so that the
controller lists it among those not run. A worker on
another host sees another folder: its group counts its own spend against the whole budget.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.core.budget import BudgetGuard, BudgetReached, unpriced_budget
from pytest_openkata.infra.ledger import SpendLedger, Spent
from pytest_openkata.infra.tempfiles import new_temp_file, remove_stale
from pytest_openkata.infra.text import visible

LEDGER_INPUT = "openkata_budget_ledger"
LEDGER_FOLDER = "openkata-budget"
NOT_RUN_PROPERTY = "openkata_not_run"  # a scenario the budget left unrun, on its setup report

_guard_key = pytest.StashKey[BudgetGuard]()


def check_prices(settings: EvalSettings) -> None:
    """A budget in US dollars needs a price for every model of the run."""
    problem = unpriced_budget(settings)
    if problem is not None:
        raise pytest.UsageError(f"pytest-openkata: {problem}")


def configure(
    config: pytest.Config, settings: EvalSettings, shared_folder: Callable[[str], Path]
) -> None:
    """Open the run's ledger: made by the controller in ``shared_folder(name)`` (the folder
    the run's processes share), read from ``workerinput`` by a worker."""
    if not settings.budget.limited:
        return
    check_prices(settings)
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is not None and LEDGER_INPUT in workerinput:
        ledger = SpendLedger(Path(workerinput[LEDGER_INPUT]))
    else:
        folder = shared_folder(LEDGER_FOLDER)
        remove_stale(folder)  # the ledgers of runs killed outright
        descriptor, path = new_temp_file(folder)
        os.close(descriptor)
        ledger = SpendLedger.create(path)
        config.pluginmanager.register(_Controller(ledger), "openkata-budget")
    config.stash[_guard_key] = BudgetGuard(settings.budget, ledger)
    config.pluginmanager.register(_NotRun(), "openkata-budget-not-run")


def guard_of(config: pytest.Config) -> BudgetGuard | None:
    return config.stash.get(_guard_key, None)


def spent_of(config: pytest.Config) -> Spent | None:
    """What the run spent so far (None: no budget)."""
    guard = guard_of(config)
    return None if guard is None else guard.ledger.read()


class _NotRun:
    """Makes the setup error of a scenario the budget left unrun a skip."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if call.excinfo is not None and call.excinfo.errisinstance(BudgetReached):
            report.outcome = "skipped"
            reason = visible(str(call.excinfo.value))
            report.longrepr = (str(item.path), 0, f"Skipped: {reason}")
        return report


class _Controller:
    """Hands the ledger to the workers and removes it when the run is over."""

    def __init__(self, ledger: SpendLedger) -> None:
        self.ledger = ledger

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[LEDGER_INPUT] = str(self.ledger.path)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.ledger.path.unlink(missing_ok=True)


def budget_record(
    config: pytest.Config, settings: EvalSettings, not_run: list[str]
) -> dict[str, Any] | None:
    """The run's budget record for its log (None: no budget)."""
    from pytest_openkata.core.spending import spending_record

    spent = spent_of(config)
    if spent is None:
        return None
    return spending_record(settings.budget, spent, not_run)
