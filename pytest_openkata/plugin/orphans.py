"""What runs that are over left on this host is stopped when the next run starts, and said.

A run killed outright (SIGKILL, a crash) cannot stop the agent CLIs it ran on the host; the
kernel's parent-death signal ends each CLI, but not the processes a CLI started, nor a process
that left the CLI's process group. Before its scenarios run, the controller of a run of
scenarios stops every process that carries the mark of a run no longer running
(:func:`pytest_openkata.infra.processes.sweep_orphans`) and writes one line saying which; it
removes the working folders such runs left in the system's temporary folder
(:func:`pytest_openkata.infra.tempfiles.remove_stale_run_folders`) and says how many. What
runs still going own (another pytest in the same checkout, other xdist workers) is left alone:
their run is alive.

As a run ends, after its scenarios' fixtures are torn down (which ends each agent's process
group), each process of it stops what still carries its own mark: a process an agent started
in a session of its own (a server left in the background), which no group kill reaches
(:func:`pytest_openkata.infra.processes.stop_strays`), and says so in one line.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

from pytest_openkata.infra.processes import stop_strays, stopped_line, sweep_orphans
from pytest_openkata.infra.tempfiles import remove_stale_run_folders, stale_folders_line
from pytest_openkata.infra.text import one_line
from pytest_openkata.plugin.items import ScenarioItem, is_scenario_nodeid

_swept_key = pytest.StashKey[bool]()


def _sweep(config: pytest.Config) -> None:
    if config.stash.get(_swept_key, False):
        return
    config.stash[_swept_key] = True
    _say(config, stopped_line(sweep_orphans(), "left by a run that is over"))
    _say(config, stale_folders_line(remove_stale_run_folders()))


def _say(config: pytest.Config, line: str | None) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if line is not None and reporter is not None:
        reporter.write_line(one_line(line), yellow=True)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> Generator[None, None, None]:
    """After pytest's own teardown of the session's fixtures (the agents' backends closed),
    also when a fixture's teardown raised there."""
    try:
        return (yield)
    finally:
        _say(session.config, stopped_line(stop_strays(), "this run's agents left running"))


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return  # a run that only lists its items starts nothing and stops nothing
    if any(isinstance(item, ScenarioItem) for item in session.items):
        _sweep(session.config)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: object, ids: list[str]) -> None:
    config = getattr(node, "config", None)
    if isinstance(config, pytest.Config) and any(is_scenario_nodeid(nodeid) for nodeid in ids):
        _sweep(config)
