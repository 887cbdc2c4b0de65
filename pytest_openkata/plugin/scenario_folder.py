"""What every item of one scenario folder shares, in a run and in lint mode: its ``-k``
keywords, its ``direct`` or ``sandbox`` marker, its conftest hooks, and which folders of an
``evals`` folder are scenarios."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pluggy
import pytest

from pytest_openkata.core.scenario import (
    discover_scenarios,
    sandbox_mode,
    scenario_candidates,
    skill_of,
)
from pytest_openkata.core.tile import unit_name
from pytest_openkata.plugin import compat
from pytest_openkata.plugin.session import settings_key

_UNIT_NAME = pytest.StashKey[str]()
_KIND_ASKED = pytest.StashKey[bool]()

KIND_MARKERS = {
    "direct": 'a scenario whose agent answers directly (scenario.json: "sandbox": false)',
    "sandbox": "a scenario whose agent runs in a sandbox (the default)",
}


class ScenarioFolderItem(pytest.Function):
    """An item whose path is a scenario folder (``self.path``), with its skill's keyword and
    its kind's marker."""

    def mark_scenario(self, skill_dir: Path | None = None) -> None:
        """``-k skill:<name>`` selects the item (the folder's name, and a tile's ``name``);
        ``-m direct`` or ``-m sandbox`` selects it by how it runs. The kind's marker is given
        only when the run's ``-m`` or ``-k`` may ask for it (:func:`kind_is_asked`): it reads
        the scenario's scenario.json, and collection otherwise reads no scenario file.
        ``skill_dir`` is the scenario's skill folder when the caller knows it already."""
        if skill_dir is None:
            skill_dir = skill_of(self.path)
        self.extra_keyword_matches.add(f"skill:{skill_dir.name}")
        name = self._unit_name(skill_dir)
        if name != skill_dir.name:
            self.extra_keyword_matches.add(f"skill:{name}")
        if not kind_is_asked(self.config):
            return
        kind = sandbox_mode(self.path)
        # A scenario.json that cannot be read gets both: either selection shows its error.
        for marker in KIND_MARKERS if kind is None else (kind,):
            self.add_marker(marker)

    def _unit_name(self, skill_dir: Path) -> str:
        """The unit's name, read once per ``evals`` folder (a tile's from its tile.json), not
        once per scenario."""
        assert self.parent is not None  # an item always has its evals folder as parent
        stash = self.parent.stash
        if _UNIT_NAME not in stash:
            stash[_UNIT_NAME] = unit_name(skill_dir)
        return stash[_UNIT_NAME]

    @functools.cached_property
    def ihook(self) -> pluggy.HookRelay:
        # The item's path is a folder no Directory collector loaded; without this, conftest
        # hooks of the skill and above would not fire for the item. Worked out once: every
        # conftest.py of the skill and above is loaded before its scenarios are collected,
        # and pytest asks for the item's hooks about 14 times per item.
        assert self.parent is not None  # an item always has its evals folder as parent
        return self.parent.ihook


# A name in a -m or -k expression, as pytest's expression scanner reads one.
_EXPRESSION_NAME = re.compile(r"(?:\w|:|\+|-|\.|\[|\]|\\|/)+")
_OPERATORS = frozenset({"and", "or", "not"})


def kind_is_asked(config: pytest.Config) -> bool:
    """Whether the run's ``-m`` or ``-k`` expression may select by a scenario's kind: ``-m``
    names ``direct`` or ``sandbox``, or a name of ``-k`` is part of one of them (``-k``
    matches a part of a name without regard to case, and marker names are among an item's
    keywords). Worked out once per run."""
    if _KIND_ASKED not in config.stash:
        marks = _expression_names(config.getoption("markexpr", None))
        keywords = _expression_names(config.getoption("keyword", None))
        config.stash[_KIND_ASKED] = any(name in KIND_MARKERS for name in marks) or any(
            name.lower() in kind for name in keywords for kind in KIND_MARKERS
        )
    return config.stash[_KIND_ASKED]


def _expression_names(expression: object) -> set[str]:
    if not isinstance(expression, str):
        return set()
    return set(_EXPRESSION_NAME.findall(expression)) - _OPERATORS


def says_collection_warnings(config: pytest.Config) -> bool:
    """Whether this process says the warnings of collection: with xdist every worker collects
    every folder, so only the first worker does (its ``workerinput``, which xdist gives each
    worker's config, names it), and a run without workers always does."""
    workerinput = getattr(config, "workerinput", None)
    return workerinput is None or workerinput.get("workerid") == "gw0"


def scenario_folders(
    collector: pytest.Directory, evals: Path, candidates: list[Path] | None = None
) -> tuple[list[Path], list[str]]:
    """The scenario folders of ``evals`` a run takes, in order: those the ``scenario_names``
    setting selects (every one in a tile) and those named on the command line; and the names
    of the skill's scenarios for the gate's completeness (with a folder taken only because it
    was named, the folders the setting leaves out too, so that the run is partial). Pytest's
    ignore rules apply, except to a folder named on the command line. The folders the setting
    leaves out are named in one collection warning. ``candidates`` are the folder's
    :func:`scenario_candidates` when the caller listed them already."""
    config = collector.config
    names = config.stash[settings_key].scenario_names
    session = collector.session
    ignored = compat.ignore_check(collector)
    if candidates is None:
        candidates = scenario_candidates(evals)
    selected = set(discover_scenarios(evals, names, candidates))
    left_out: list[str] = []
    taken: list[Path] = []
    named_only = False
    for entry in candidates:
        explicit = session.isinitpath(entry, with_parents=True)
        if not explicit and ignored(entry):
            continue
        if entry in selected:
            taken.append(entry)
        elif explicit:
            taken.append(entry)
            named_only = True
        else:
            left_out.append(entry.relative_to(evals).as_posix())
    if left_out and says_collection_warnings(config):
        collector.warn(
            pytest.PytestCollectionWarning(
                f"{len(left_out)} folder(s) with task.md and criteria.json not collected, "
                f"since their names do not match scenario_names ({names}): "
                f"{', '.join(left_out)}; set eval_scenario_names (ini) or scenario_names "
                "(YAML), e.g. to *, or name a folder on the command line"
            )
        )
    skill_scenarios = [entry.name for entry in taken]
    if named_only:
        skill_scenarios = sorted([*skill_scenarios, *(Path(name).name for name in left_out)])
    return taken, skill_scenarios
