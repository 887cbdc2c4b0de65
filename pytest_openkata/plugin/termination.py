"""SIGTERM or SIGHUP during a run of scenarios: the run stops as on Ctrl-C, once, and its
clean-up runs whole.

From the end of collection of a run that selected scenarios (on xdist's controller, which
collects nothing itself, once a worker has collected some) to its end, the first SIGTERM or
SIGHUP is a :class:`KeyboardInterrupt` and later ones are ignored
(:mod:`pytest_openkata.infra.signals`): agents and containers are stopped, the reports of
what finished written, and the exit status is 2. Once the session winds up on its own
(``pytest_sessionfinish``: fixtures torn down, reports written) such a signal is only noted.
A run without scenarios keeps the signals' default actions.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

from pytest_openkata.infra.signals import TerminationAsInterrupt
from pytest_openkata.plugin.items import ScenarioItem, is_scenario_nodeid

_termination_key = pytest.StashKey[TerminationAsInterrupt]()


def _terminate_as_interrupt(config: pytest.Config) -> None:
    if _termination_key not in config.stash:
        handler = TerminationAsInterrupt()
        if handler.install():
            config.stash[_termination_key] = handler


def pytest_collection_finish(session: pytest.Session) -> None:
    if any(isinstance(item, ScenarioItem) for item in session.items):
        _terminate_as_interrupt(session.config)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: object, ids: list[str]) -> None:
    """On xdist's controller, which collects nothing itself: once a worker has collected
    scenarios."""
    config = getattr(node, "config", None)
    if isinstance(config, pytest.Config) and any(is_scenario_nodeid(n) for n in ids):
        _terminate_as_interrupt(config)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> Generator[None, object, object]:
    """While the session winds up (fixtures torn down, so containers removed and agents
    stopped; reports written) a SIGTERM is only noted, so that none of it stops halfway."""
    handler = session.config.stash.get(_termination_key, None)
    if handler is not None:
        handler.defer()
    return (yield)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    handler = config.stash.get(_termination_key, None)
    if handler is not None:
        handler.restore()
