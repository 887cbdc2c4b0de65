"""Reporters: write what a run did somewhere.

Every registered reporter reads the same frozen :class:`~pytest_openkata.core.reporting.Run`
and returns what it wrote (:class:`~pytest_openkata.core.reporting.ReportOutcome`); the
contract is :mod:`pytest_openkata.core.reporting`, whose names are given here too for
reporters written against this package.

Reporters are registered under the entry-point group ``pytest_openkata.reporters``; each entry
point names a class whose instances take no arguments. The built-ins are ``results_json``,
``junit``, ``run_log``, ``html``, ``markdown``, ``csv`` and ``terminal``.
"""

from __future__ import annotations

from pytest_openkata.core.reporting import (
    TERMINAL_REPORTER,
    Reporter,
    ReportOutcome,
    Run,
    Segment,
    TerminalOutput,
)

__all__ = ["TERMINAL_REPORTER", "ReportOutcome", "Reporter", "Run", "Segment", "TerminalOutput"]
