"""Graders: turn what an agent produced into criterion results.

Every registered grader grades every trial, each the criteria it owns, under the contract of
:mod:`pytest_openkata.core.grading`, whose names are given here too for graders written
against this package.

Graders are registered under the entry-point group ``pytest_openkata.graders``; each entry
point names a class whose instances take no arguments. The built-ins are ``judge``
(:mod:`pytest_openkata.providers.graders.judge`) and ``checks``, the deterministic checks of
``checks.json`` (:mod:`pytest_openkata.providers.graders.checks`).
"""

from __future__ import annotations

from pytest_openkata.core.grading import (
    DEFAULT_ORDER,
    GradeError,
    Grader,
    Grading,
    GradingContext,
    GradingTask,
)

__all__ = ["DEFAULT_ORDER", "GradeError", "Grader", "Grading", "GradingContext", "GradingTask"]
