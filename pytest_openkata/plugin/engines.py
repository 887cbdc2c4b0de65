"""The engine pool's check at the start of a run: one line per engine of ``sandbox.hosts``.

Registered on the controller (or the only process) of a run or validation with
``sandbox.hosts`` set. When the session starts, every engine is connected and checked (its
version, CPUs, the image; containers of killed runs swept), and the pool is closed again: the
processes that run scenarios make their own. The lines go in the report header; an engine left
out is said again in the terminal summary, so that ``-q`` shows it too.
"""

from __future__ import annotations

import pytest

from pytest_openkata.plugin.session import settings_of

_lines_key = pytest.StashKey[list[str]]()
_left_out_key = pytest.StashKey[list[str]]()


def check_engines(config: pytest.Config) -> None:
    """Connect and check every engine; keep a line for each, and those of the left out."""
    from pytest_openkata.core.engine_pool import EnginePool
    from pytest_openkata.core.sandboxed import build_provider

    pool = build_provider(settings_of(config))
    assert isinstance(pool, EnginePool)
    try:
        config.stash[_lines_key] = pool.lines()
        config.stash[_left_out_key] = [e.line() for e in pool.engines if e.lost is not None]
    finally:
        pool.close()


@pytest.hookimpl(tryfirst=True)  # before the terminal reporter asks for the header
def pytest_sessionstart(session: pytest.Session) -> None:
    check_engines(session.config)


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [f"openkata: {line}" for line in config.stash.get(_lines_key, [])]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in terminalreporter.config.stash.get(_left_out_key, []):
        terminalreporter.write_line(f"openkata: {line}", yellow=True)
