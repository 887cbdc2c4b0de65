"""The pytest side of a scenario: the ``evals`` collector, the scenario item, criteria as subtests.

A scenario item is a :class:`pytest.Function` built around :func:`evaluate_scenario`, so
that it gets full fixture injection (``subtests``, conftest overrides, autouse fixtures).
The agent and judge run in the ``openkata_result`` fixture: a scenario that cannot be
evaluated is a setup *error*, while an unmet criterion is a failed *subtest*.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_openkata.contracts.errors import OpenkataError
from pytest_openkata.contracts.junit import PERCENTAGE_PROPERTY, SCENARIO_PROPERTY, scenario_key
from pytest_openkata.contracts.results import ScenarioResult
from pytest_openkata.core.scenario import (
    group_folders,
    has_categories,
    scenario_candidates,
    skill_of,
)
from pytest_openkata.core.triggers import has_trigger_queries
from pytest_openkata.infra.text import visible
from pytest_openkata.plugin import compat
from pytest_openkata.plugin.file_warnings import warn_about_skill
from pytest_openkata.plugin.format_files import formats_by_file, marker_files
from pytest_openkata.plugin.scenario_folder import (
    ScenarioFolderItem,
    says_collection_warnings,
    scenario_folders,
)
from pytest_openkata.plugin.session import VALIDATE, mode_of
from pytest_openkata.plugin.triggers import trigger_items

if TYPE_CHECKING:
    from pytest_openkata.core.validate import Validation

# An openkata scenario's node id (its evals folder, or a group folder below it, whose name may
# hold dots: ``evals/v1.2``; never a Python test module there), or a built-in format's (its
# file, then the scenario).
_SCENARIO_NODEID = re.compile(
    r"(?:^|/)(?:evals(?:/[^:/]+)*(?<!\.py)|evals\.json|eval\.yaml|task\.toml)::"
)


def is_scenario_nodeid(nodeid: str) -> bool:
    """Whether a node id (as an xdist worker reports it to the controller) is a scenario's:
    ``skills/s/evals::scenario-a``, or ``evals::scenario-a`` run from the skill's folder, or
    a format's scenario (``skills/s/evals/evals.json::eval-1``)."""
    return _SCENARIO_NODEID.search(nodeid) is not None


def is_evals_dir(path: Path) -> bool:
    """An ``evals`` folder that holds at least one scenario folder (``scenario-*``, or any
    folder with ``task.md`` and ``criteria.json``) or a trigger query file."""
    return evals_candidates(path) is not None


def evals_candidates(path: Path) -> list[Path] | None:
    """The scenario candidates (:func:`scenario_candidates`) of an :func:`is_evals_dir`
    folder, None for any other folder: listed once, for both the question and the
    collector."""
    if path.name != "evals":
        return None
    candidates = scenario_candidates(path)
    return candidates if candidates or has_trigger_queries(path) else None


class EvalsDir(pytest.Directory):
    """Collects one item per scenario folder, then one per trigger query
    (:mod:`pytest_openkata.plugin.triggers`), and never looks further down a scenario folder.

    Nothing under a scenario folder is imported or collected: scenario ``inputs/`` often hold
    ``test_*.py`` and ``conftest.py`` files of the task's project. Scenarios in group folders
    (``evals/<group>/<scenario>``) are collected under a :class:`ScenarioGroup` per group, so
    that a group or a scenario in it named on the command line is found as pytest finds paths;
    published formats' files here and in groups (``evals/evals.json``) are collected too.
    """

    def __init__(self, *, candidates: list[Path] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.candidates = candidates  # the folder's scenario candidates, when already listed

    def collect(self) -> Iterator[pytest.Collector | pytest.Item]:
        scenarios, skill_scenarios = scenario_folders(self, self.path, self.candidates)
        # Said before -k, -m or --deselect leave any scenario out, once per skill; a
        # scenario's own are said when it runs (plugin/file_warnings.py).
        if says_collection_warnings(self.config):
            warn_about_skill(self.config, self.path.parent)
        item_class = ValidationItem if mode_of(self.config) == VALIDATE else ScenarioItem
        formats: list[Path] = []
        wanted = sorted(marker_files(self.config))
        for folder in [self.path, *group_folders(self.path)]:
            formats += [folder / name for name in wanted if (folder / name).is_file()]
        formats = self._detected(formats)
        plan = _Plan(item_class, scenarios, tuple(skill_scenarios), formats)
        yield from plan.children(self)
        if has_trigger_queries(self.path):
            yield from trigger_items(self, self.path.parent)

    def _detected(self, paths: list[Path]) -> list[Path]:
        """The files of ``paths`` that a format finds its evals beside; the others are named
        in one collection warning (a file of a format's name that no format reads)."""
        by_file = formats_by_file(self.config)
        found = [p for p in paths if any(fmt.detect(p.parent) for fmt in by_file[p.name])]
        unread = [p.relative_to(self.path).as_posix() for p in paths if p not in found]
        if unread and says_collection_warnings(self.config):
            names = ", ".join(sorted({fmt.name for p in paths for fmt in by_file[p.name]}))
            self.warn(
                pytest.PytestCollectionWarning(
                    f"{len(unread)} file(s) not collected, since no eval format ({names}) "
                    f"reads them as they are: {', '.join(unread)}; see the formats' pages "
                    "for the layout each expects"
                )
            )
        return found


class ScenarioGroup(pytest.Directory):
    """A group folder under ``evals`` holding scenarios or formats' files."""

    plan: _Plan

    def collect(self) -> Iterator[pytest.Collector | pytest.Item]:
        return self.plan.children(self)


class _Plan:
    """What an ``evals`` folder's collectors yield, folder by folder."""

    def __init__(
        self,
        item_class: type[ScenarioItem],
        scenarios: list[Path],
        names: tuple[str, ...],
        formats: list[Path],
    ) -> None:
        self.item_class = item_class
        self.scenarios = scenarios
        self.names = names
        self.formats = formats

    def children(self, node: pytest.Directory) -> Iterator[pytest.Collector | pytest.Item]:
        folder = node.path
        fixture_info = compat.shared_fixture_info(node, self.item_class.body)
        groups: dict[Path, None] = {}
        for entry in self.scenarios:
            if entry.parent == folder:
                extra = {} if fixture_info is None else {"fixtureinfo": fixture_info()}
                yield self.item_class.from_parent(
                    node, name=entry.name, scenario_dir=entry, skill_scenarios=self.names, **extra
                )
            elif folder in entry.parents:
                groups[folder / entry.relative_to(folder).parts[0]] = None
        for path in self.formats:
            if path.parent == folder:  # the plugin's pytest_collect_file makes its collector
                yield from node.ihook.pytest_collect_file(file_path=path, parent=node)
            elif folder in path.parents:
                groups[folder / path.relative_to(folder).parts[0]] = None
        for group in sorted(groups):
            made: ScenarioGroup = ScenarioGroup.from_parent(node, path=group)
            made.plan = self
            yield made


def evaluate_scenario(openkata_result: ScenarioResult, subtests: pytest.Subtests) -> None:
    """Each criterion is a subtest named after it and its points, ``[bang-marker (0/20)]``,
    passing or failing.

    The points are in the subtest's message, not a keyword argument: pytest shows keyword
    arguments with ``repr``, and pytest 9.1 applies that ``repr`` again to a report that comes
    back from an xdist worker (``points="'0/20'"`` under ``-n``, ``points='0/20'`` without).
    The message is shown as it is, the same with and without ``-n``, on every pytest 9. What
    pytest prints of a criterion is :func:`~pytest_openkata.infra.text.visible`: a reason
    cannot rewrite the terminal.
    """
    for criterion in openkata_result.criteria or ():
        points = f"{criterion.score}/{criterion.max_score}"
        with subtests.test(msg=visible(f"{criterion.name} ({points})")):
            if not criterion.passed:
                reason = f": {criterion.reason}" if criterion.reason else ""
                message = f"criterion {criterion.name!r} not met ({points}){reason}"
                pytest.fail(visible(message), pytrace=False)


class ScenarioItem(ScenarioFolderItem):
    """One ``skills/<skill>/evals/scenario-*`` folder."""

    # What the item runs: a subclass runs something else on the same folder.
    body: Callable[..., None] = staticmethod(evaluate_scenario)

    def __init__(
        self,
        *,
        scenario_dir: Path,
        skill_scenarios: tuple[str, ...],
        **kwargs: Any,
    ) -> None:
        super().__init__(callobj=self.body, **kwargs)
        # The scenario folder is the item's path, so `pytest <scenario folder>` selects it.
        self.path = scenario_dir
        self.scenario_dir = scenario_dir
        self.skill_dir = skill_of(scenario_dir)
        self.skill_scenarios = skill_scenarios
        self.mark_scenario(self.skill_dir)

    def warn_before_run(self) -> None:
        """Say what is likely wrong with the scenario's files, as the item's warnings, before
        it runs: typo'd keys, placeholders, a file beside task.md that never reaches the
        agent, a prompt over the context budget."""
        from pytest_openkata.plugin.file_warnings import warn_about_scenario

        warn_about_scenario(self.config, self.scenario_dir)

    def runnable(self) -> tuple[Path, Callable[[str], str]]:
        """The folder to run, and how texts naming it are shown (as they are, here)."""
        return self.scenario_dir, _as_it_is

    def unrunnable(self, exc: OpenkataError, redact: Callable[[str], str]) -> ScenarioResult:
        """The result of a scenario that :meth:`runnable` could not prepare."""
        raise exc  # an openkata folder is always runnable: its errors come from the run

    def has_categories(self, categories: tuple[str, ...]) -> bool:
        """Whether a criterion of the scenario is of one of ``categories``
        (``--eval-category``); True when its criteria cannot be read (it errors when it runs)."""
        return has_categories(self.scenario_dir, categories)

    # How pytest's report headers name the skill (``ERROR at setup of <skill>::<scenario>``):
    # its folder's name, or its path where another skill of the run has that name.
    shown_skill: str = ""

    def reportinfo(self) -> tuple[Path, None, str]:
        return self.path, None, f"{self.shown_skill or self.skill_dir.name}::{self.name}"

    def record_result(self, result: ScenarioResult) -> None:
        """Keep the result for this item's reports (:mod:`.xdist_transport` carries it to
        the controller) and name the scenario and its percentage in the JUnit file."""
        self.stash[result_key] = result
        # The result's name: a format's scenario runs as its scenario-<name> folder.
        key = scenario_key(self.skill_dir, result.name, self.config.rootpath)
        self.user_properties.append((SCENARIO_PROPERTY, key))
        self.user_properties.append((PERCENTAGE_PROPERTY, f"{result.percentage:g}"))


def check_validation(openkata_validation: Validation, subtests: pytest.Subtests) -> None:
    """A validation item's body, :func:`pytest_openkata.plugin.validation.check_validation`:
    imported in validate mode only, as a validation runs scenarios (``core.run``), which
    collecting does not need."""
    from pytest_openkata.plugin.validation import check_validation as check

    check(openkata_validation, subtests)


class ValidationItem(ScenarioItem):
    """One scenario folder in validate mode (:mod:`pytest_openkata.plugin.validation`)."""

    body = staticmethod(check_validation)


result_key = pytest.StashKey[ScenarioResult]()


def _as_it_is(text: str) -> str:
    return text


_SKILL_SCENARIOS = pytest.StashKey[dict[Path, "_SkillNames"]]()


def note_skill_scenarios(item: pytest.Item) -> None:
    """Remember the scenario names ``item`` gives for its skill (called for each item as it is
    collected, before ``-k``, ``-m`` or ``--deselect`` leave any out). The items of one source
    share one tuple of names, which is added once, not once per item (a skill of n scenarios
    would otherwise cost n x n)."""
    if isinstance(item, ScenarioItem):
        known = item.config.stash.setdefault(_SKILL_SCENARIOS, {})
        names = known.setdefault(item.skill_dir, _SkillNames())
        if item.skill_scenarios is not names.last_added:
            names.names.update(dict.fromkeys(item.skill_scenarios))
            names.last_added = item.skill_scenarios


def unite_skill_scenarios(config: pytest.Config, items: Sequence[pytest.Item]) -> None:
    """Give each scenario item every scenario name of its skill, from all its sources (its
    openkata folders and each format's file): the gate's completeness counts them all. The
    items of a skill share one tuple."""
    known = config.stash.get(_SKILL_SCENARIOS, {})
    united = {skill_dir: tuple(names.names) for skill_dir, names in known.items()}
    for item in items:
        if isinstance(item, ScenarioItem) and item.skill_dir in united:
            item.skill_scenarios = united[item.skill_dir]


class _SkillNames:
    """A skill's scenario names in the order first given, and the tuple added last."""

    def __init__(self) -> None:
        self.names: dict[str, None] = {}
        self.last_added: tuple[str, ...] = ()


def tell_skills_apart(items: Sequence[pytest.Item], rootdir: Path) -> None:
    """Name a scenario item's skill by its folder relative to the rootdir where two skills of
    the run share a folder name, so that their report headers differ."""
    scenario_items = [item for item in items if isinstance(item, ScenarioItem)]
    folders: dict[str, set[Path]] = {}
    for item in scenario_items:
        folders.setdefault(item.skill_dir.name, set()).add(item.skill_dir)
    for item in scenario_items:
        if len(folders[item.skill_dir.name]) > 1:
            item.shown_skill = Path(os.path.relpath(item.skill_dir, rootdir)).as_posix()
