"""The pytest side of trigger evals: one item per trigger query, and their summary.

A skill's ``evals/trigger_queries.json`` or ``evals/trigger_tests.yaml``
(:mod:`pytest_openkata.core.triggers`) gives one :class:`TriggerQueryItem` per query, named
``trigger-01``, ``trigger-02``... in the file's order, with the keyword ``should_trigger`` or
``should_not_trigger`` (``-k`` selects on either, and on ``skill:<name>``). The query's runs
happen in setup (the ``openkata_trigger_outcome`` fixture): a run that cannot tell whether the
skill loaded, or whose agent fails, is a setup *error*; the pass rule's verdict is the item's
pass or *failure*. A query file that cannot be read is one errored item, ``trigger-queries``,
whose error names the file and the entry.

The fixtures are in :mod:`pytest_openkata.plugin.fixtures`, with the scenarios'. Each outcome
travels in the item's report (``user_properties``, which xdist carries to the controller);
:class:`TriggerSummary` gathers them there, shows each skill's precision, recall and F1 in the
terminal summary, and hands them to the run's reports (the run log's ``trigger_query`` and
``trigger_skill`` records, and the trigger JSON report).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_openkata.core.jsonfiles import ScenarioLoadError
from pytest_openkata.core.triggers import (
    QueryOutcome,
    TriggerQuery,
    load_trigger_queries,
    metrics_by_skill,
    metrics_line,
)
from pytest_openkata.infra.text import one_line, visible

__all__ = [
    "OUTCOME_PROPERTY",
    "QUERIES_ITEM",
    "TriggerQueryItem",
    "TriggerSummary",
    "evaluate_trigger_query",
    "trigger_items",
    "trigger_records",
]

OUTCOME_PROPERTY = "openkata_trigger"
QUERIES_ITEM = "trigger-queries"
SUMMARY_TITLE = "openkata trigger summary"


def evaluate_trigger_query(openkata_trigger_outcome: QueryOutcome) -> None:
    """Passes when the query's runs keep the pass rule, and fails saying how they went."""
    outcome = openkata_trigger_outcome
    if not outcome.passed:
        wanted = "should" if outcome.should_trigger else "should not"
        pytest.fail(
            visible(
                f"{outcome.name} {wanted} load the skill, and it loaded in {outcome.loads} "
                f"of {len(outcome.activations)} runs: {', '.join(outcome.activations)}"
            ),
            pytrace=False,
        )


class TriggerQueryItem(pytest.Function):
    """One trigger query of a skill (``query`` None: the query file could not be read, and
    ``load_error`` says why)."""

    def __init__(
        self,
        *,
        skill_dir: Path,
        query: TriggerQuery | None = None,
        load_error: str = "",
        **kwargs: Any,
    ) -> None:
        super().__init__(callobj=evaluate_trigger_query, **kwargs)
        self.skill_dir = skill_dir
        self.query = query
        self.load_error = load_error
        self.extra_keyword_matches.add(f"skill:{skill_dir.name}")
        if query is not None:
            kind = "should_trigger" if query.should_trigger else "should_not_trigger"
            self.extra_keyword_matches.add(kind)

    def reportinfo(self) -> tuple[Path, None, str]:
        return self.path, None, f"{self.skill_dir.name}::{self.name}"


def trigger_items(parent: pytest.Collector, skill_dir: Path) -> Iterator[TriggerQueryItem]:
    """The trigger query items of the skill of ``skill_dir``, or one errored item when its
    query file cannot be read."""
    try:
        queries = load_trigger_queries(skill_dir)
    except ScenarioLoadError as exc:
        yield TriggerQueryItem.from_parent(
            parent, name=QUERIES_ITEM, skill_dir=skill_dir, load_error=str(exc)
        )
        return
    for query in queries:
        yield TriggerQueryItem.from_parent(
            parent, name=query.name, skill_dir=skill_dir, query=query
        )


def trigger_records(outcomes: list[QueryOutcome]) -> dict[str, list[dict[str, Any]]]:
    """The run log's records of trigger evals, by kind: each query's outcome, and each
    skill's metrics."""
    if not outcomes:
        return {}
    return {
        "trigger_query": [outcome.to_dict() for outcome in outcomes],
        "trigger_skill": [metrics.to_dict() for metrics in metrics_by_skill(outcomes)],
    }


class TriggerSummary:
    """Gathers the trigger outcomes of the run's reports (in the controller under xdist) and
    shows each skill's metrics in the terminal summary."""

    def __init__(self) -> None:
        self.outcomes: dict[str, QueryOutcome] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name != OUTCOME_PROPERTY or report.nodeid in self.outcomes:
                continue
            with contextlib.suppress(KeyError, TypeError, ValueError):
                self.outcomes[report.nodeid] = QueryOutcome.from_dict(json.loads(str(value)))

    def records(self) -> dict[str, list[dict[str, Any]]]:
        return trigger_records(list(self.outcomes.values()))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.outcomes:
            return
        terminalreporter.write_sep("=", SUMMARY_TITLE)
        for metrics in metrics_by_skill(self.outcomes.values()):
            terminalreporter.write_line(visible(metrics_line(metrics)))
        for outcome in self.outcomes.values():
            if not outcome.passed:
                wanted = "should" if outcome.should_trigger else "should not"
                terminalreporter.write_line(
                    one_line(
                        f"  FAILED {outcome.skill}::{outcome.name} ({wanted} load): loaded in "
                        f"{outcome.loads} of {len(outcome.activations)} runs; query: "
                        f"{outcome.query[:120]}"
                    ),
                    red=True,
                )
