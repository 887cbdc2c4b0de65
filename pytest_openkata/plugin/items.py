"""The pytest side of a scenario: the ``evals`` collector, the scenario item, criteria as subtests.

A scenario item is a :class:`pytest.Function` built around :func:`evaluate_scenario`, so
that it gets full fixture injection (``subtests``, conftest overrides, autouse fixtures).
The agent and judge run in the ``openkata_result`` fixture: a scenario that cannot be
evaluated is a setup *error*, while an unmet criterion is a failed *subtest*.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_openkata.core.results import ScenarioResult
from pytest_openkata.core.scenario import discover_scenarios, is_scenario_dir

RESULT_PROPERTY = "openkata_result"
PERCENTAGE_PROPERTY = "openkata_percentage"


def is_evals_dir(path: Path) -> bool:
    """An ``evals`` folder that holds at least one ``scenario-*`` folder (stops at the first:
    the collector lists and sorts them)."""
    if path.name != "evals":
        return False
    try:
        return any(is_scenario_dir(entry) for entry in path.iterdir())
    except OSError:
        return False


def sandbox_mode(scenario_dir: Path) -> str | None:
    """``"sandbox"`` or ``"direct"``, for ``-k`` selection; None when scenario.json cannot say
    (the item then errors with the reason when it runs).

    Only the ``sandbox`` key is read here, as Go would match it (any case; the last one wins);
    the whole file is validated when the scenario runs. Collection reads every scenario.json,
    so this stays cheap.
    """
    try:
        data = json.loads((scenario_dir / "scenario.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return "sandbox"  # the reference's default
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    values = [value for key, value in data.items() if key.lower() == "sandbox"]
    value = values[-1] if values else True
    if value is None:
        value = True  # Go leaves the default in place for a null
    if not isinstance(value, bool):
        return None
    return "sandbox" if value else "direct"


class EvalsDir(pytest.Directory):
    """Collects one item per scenario folder and never looks further down.

    Nothing under a scenario folder is imported or collected: scenario ``inputs/`` often hold
    ``test_*.py`` and ``conftest.py`` files of the task's project.
    """

    def collect(self) -> Iterator[pytest.Item]:
        scenarios = discover_scenarios(self.path)
        names = tuple(s.name for s in scenarios)
        # Every scenario of this folder resolves the same fixtures: work them out once (it is
        # most of an item's collection time) and give each item its own copy.
        shared = self.session._fixturemanager.getfixtureinfo(self, evaluate_scenario, None)  # type: ignore[arg-type]
        hook = self.ihook.pytest_ignore_collect
        for entry in scenarios:
            explicit = self.session.isinitpath(entry, with_parents=True)
            if not explicit and hook(collection_path=entry, config=self.config):
                continue
            fixtureinfo = dataclasses.replace(
                shared,
                names_closure=list(shared.names_closure),
                name2fixturedefs=dict(shared.name2fixturedefs),
            )
            yield ScenarioItem.from_parent(
                self,
                name=entry.name,
                scenario_dir=entry,
                skill_scenarios=names,
                fixtureinfo=fixtureinfo,
            )


def evaluate_scenario(openkata_result: ScenarioResult, subtests: pytest.Subtests) -> None:
    """Each criterion is a subtest named after it, passing or failing with its points."""
    for criterion in openkata_result.criteria or ():
        points = f"{criterion.score}/{criterion.max_score}"
        with subtests.test(msg=criterion.name, points=points):
            if not criterion.passed:
                reason = f": {criterion.reason}" if criterion.reason else ""
                message = f"criterion {criterion.name!r} not met ({points}){reason}"
                pytest.fail(message, pytrace=False)


class ScenarioItem(pytest.Function):
    """One ``skills/<skill>/evals/scenario-*`` folder."""

    def __init__(
        self, *, scenario_dir: Path, skill_scenarios: tuple[str, ...], **kwargs: Any
    ) -> None:
        super().__init__(callobj=evaluate_scenario, **kwargs)
        # The scenario folder is the item's path, so `pytest <scenario folder>` selects it.
        self.path = scenario_dir
        self.scenario_dir = scenario_dir
        self.skill_dir = scenario_dir.parent.parent
        self.skill_scenarios = skill_scenarios
        self.extra_keyword_matches.add(f"skill:{self.skill_dir.name}")

    def listextrakeywords(self) -> set[str]:
        # "sandbox" or "direct" is worked out when -k asks for the keywords, not for every
        # scenario at collection: it reads scenario.json.
        keywords = super().listextrakeywords()
        mode = sandbox_mode(self.scenario_dir)
        if mode is not None:
            keywords.add(mode)
        return keywords

    @functools.cached_property
    def ihook(self):  # type: ignore[no-untyped-def]
        # The item's path is a folder no Directory collector loaded; without this, conftest
        # hooks of the skill and above would not fire for the item. Worked out once: every
        # conftest.py of the skill and above is loaded before its scenarios are collected,
        # and pytest asks for the item's hooks about 14 times per item.
        return self.parent.ihook

    def reportinfo(self) -> tuple[Path, None, str]:
        return self.path, None, f"{self.skill_dir.name}::{self.name}"

    @functools.cached_property
    def location(self) -> tuple[str, int | None, str]:
        # pytest works out an item's path relative to the rootdir once per file, and every
        # scenario is a folder of its own: its evals folder's path (worked out once per skill)
        # and its name give it for much less.
        path, _, name = self.reportinfo()
        root = str(self.config.rootpath)
        if root == str(path) or root.startswith(os.path.join(str(path), "")):
            return super().location  # the item's folder is the rootdir or above it
        evals = self.session._node_location_to_relpath(path.parent)
        return (path.name if evals == os.curdir else os.path.join(evals, path.name), None, name)

    def record_result(self, result: ScenarioResult) -> None:
        """Hand the result on to the controller (xdist copies user_properties unchanged).
        Where this process is the one that aggregates (no xdist), the result itself is kept
        for the aggregator too, which then need not decode it."""
        self.user_properties.append((PERCENTAGE_PROPERTY, f"{result.percentage:g}"))
        self.user_properties.append((RESULT_PROPERTY, result.to_json()))
        if not hasattr(self.config, "workerinput"):
            self.config.stash.setdefault(_results_here_key, {})[self.nodeid] = result


_results_here_key = pytest.StashKey[dict[str, ScenarioResult]]()


def result_of_report(report: pytest.TestReport, config: pytest.Config) -> ScenarioResult | None:
    """The result a scenario item's report carries: the one recorded in this process, or
    else (from an xdist worker) decoded from its properties."""
    here = config.stash.get(_results_here_key, {}).pop(report.nodeid, None)
    return here if here is not None else result_from_properties(report.user_properties)


def result_from_properties(properties: list[tuple[str, object]]) -> ScenarioResult | None:
    for name, value in properties:
        if name == RESULT_PROPERTY and isinstance(value, str):
            return ScenarioResult.from_dict(json.loads(value))
    return None
