"""What pytest has said so far of the run's scenarios: how many, how many done, which are
under way since when, and the tokens their results spent.

The progress views (:mod:`.progress` on a terminal, :mod:`.heartbeat` elsewhere) feed it from
their hooks and read it to say where the run is. It knows only what pytest reports in this
process, which is all an xdist controller knows of its workers: the items they collected,
started (``pytest_runtest_logstart``) and finished, and the results their reports carry.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest

from pytest_openkata.core.summary import usage_of
from pytest_openkata.plugin.items import ScenarioItem, is_scenario_nodeid
from pytest_openkata.plugin.xdist_transport import result_of

__all__ = ["ScenarioTally", "Started"]


@dataclass(frozen=True)
class Started:
    """A scenario pytest has started and not finished: its name as pytest's reports head it
    (``skill::scenario``) and when pytest started it (``time.monotonic``)."""

    name: str
    since: float


@dataclass
class ScenarioTally:
    total: int = 0
    done: int = 0
    tokens: int = 0
    xdist: bool = False
    """Whether the scenarios run on xdist workers, whose own activity this process cannot see."""
    under_way: dict[str, Started] = field(default_factory=dict)
    """Node id -> the scenario started and not finished, oldest first."""

    def collected(self, session: pytest.Session) -> None:
        self.total = sum(isinstance(item, ScenarioItem) for item in session.items)

    def worker_collected(self, nodeids: list[str]) -> None:
        self.xdist = True
        self.total = max(self.total, sum(is_scenario_nodeid(nodeid) for nodeid in nodeids))

    def started(self, nodeid: str, location: tuple[str, int | None, str]) -> bool:
        """Note a scenario pytest starts; False for any other item."""
        if not is_scenario_nodeid(nodeid):
            return False
        self.under_way[nodeid] = Started(location[2], time.monotonic())
        return True

    def finished(self, nodeid: str) -> None:
        if self.under_way.pop(nodeid, None) is not None:
            self.done += 1

    def reported(self, report: pytest.TestReport) -> None:
        if report.when == "setup":
            result = result_of(report)
            if result is not None:
                usage = usage_of([result])
                for stats in (usage.agent, usage.judge):
                    self.tokens += (stats.input_tokens or 0) + (stats.output_tokens or 0)

    @property
    def pending(self) -> bool:
        """Whether scenarios are left to finish."""
        return self.done < self.total
