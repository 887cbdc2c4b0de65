"""``pytest --eval-lint``: scenarios and skills checked as pytest items, before any token is
spent.

In lint mode a skill folder (one with ``SKILL.md``, or with an ``evals`` folder of scenarios)
is collected as one item for the skill and one per scenario, in place of the scenario items;
every other item of the run is deselected. Each rule of
:mod:`pytest_openkata.core.lint` is a subtest of its item: its errors fail it, its warnings
are pytest warnings of the class :class:`EvalLintWarning` (``--eval-lint-strict`` makes them
errors). No model, sandbox or network is used.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_openkata.core.scenario import scenario_candidates, skill_of
from pytest_openkata.core.tile import is_tile_dir, unit_name
from pytest_openkata.plugin import compat
from pytest_openkata.plugin.scenario_folder import ScenarioFolderItem, scenario_folders
from pytest_openkata.plugin.session import settings_key

if TYPE_CHECKING:
    # The linter is imported where it is used: the plugin loads this module in every run.
    from pytest_openkata.core.lint import Finding

__all__ = [
    "EvalsLintDir",
    "ScenarioLintItem",
    "SkillLintDir",
    "SkillLintItem",
    "is_skill_dir",
    "warn_findings",
]

SKILL_ITEM = "skill"


def is_skill_dir(path: Path) -> bool:
    """A folder with ``SKILL.md``, or one whose ``evals`` folder holds scenarios (a skill
    whose SKILL.md is missing, which its lint item then reports)."""
    if (path / "SKILL.md").is_file() or is_tile_dir(path):
        return True
    return bool(scenario_candidates(path / "evals"))


def _ignored(collector: pytest.Collector) -> Callable[[Path], bool]:
    """Whether a folder under ``collector`` is left out by pytest's ignore rules, as a run
    leaves it out (a folder named on the command line never is)."""
    ignored = compat.ignore_check(collector)
    session = collector.session
    return lambda path: not session.isinitpath(path, with_parents=True) and ignored(path)


class SkillLintDir(pytest.Directory):
    """A skill or tile in lint mode: its own item, then its scenarios; under a skill nothing
    else, under a tile also the skills below it that have scenarios of their own (a run takes
    those too)."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        yield SkillLintItem.from_parent(self, name=SKILL_ITEM, skill_dir=self.path)
        ignored = _ignored(self)
        evals = self.path / "evals"
        if evals.is_dir() and not ignored(evals):
            yield EvalsLintDir.from_parent(self, path=evals)
        if is_tile_dir(self.path):
            for folder in _skills_with_evals_under(self.path, ignored):
                yield SkillLintDir.from_parent(self, path=folder)


def _skills_with_evals_under(tile: Path, ignored: Callable[[Path], bool]) -> Iterator[Path]:
    """The folders below ``tile`` whose ``evals`` holds scenarios, never looking into one, into
    the tile's own ``evals``, hidden folders or what pytest's ignore rules leave out."""
    for current, folders, _files in os.walk(tile):
        here = Path(current)
        kept = []
        for name in sorted(folders):
            path = here / name
            if name.startswith(".") or ignored(path) or (here == tile and name == "evals"):
                continue
            if scenario_candidates(path / "evals"):
                yield path
            else:
                kept.append(name)
        folders[:] = kept


class EvalsLintDir(pytest.Directory):
    """A skill's ``evals`` folder in lint mode: one item per scenario folder."""

    def collect(self) -> Iterator[pytest.Item]:
        for entry in scenario_folders(self, self.path)[0]:
            yield ScenarioLintItem.from_parent(self, name=entry.name, scenario_dir=entry)


def warn_findings(findings: Sequence[Finding], skill_dir: Path, rootdir: Path) -> None:
    """Each finding as a pytest warning (:class:`EvalLintWarning`) located at its file and
    line (relative to the rootdir), so pytest's warnings summary shows where it is."""
    from pytest_openkata.core.lint import EvalLintWarning

    for finding in findings:
        where = os.path.relpath(skill_dir / finding.file, rootdir)
        warnings.warn_explicit(
            EvalLintWarning(f"[{finding.rule}] {finding.message}"),
            EvalLintWarning,
            filename=Path(where).as_posix(),
            lineno=finding.line or 0,
        )


def _check_rules(
    findings: Mapping[str, list[Finding]],
    subtests: pytest.Subtests,
    item: pytest.Item,
    skill_dir: Path,
) -> None:
    strict = bool(item.config.getoption("eval_lint_strict"))
    for rule, found in findings.items():
        with subtests.test(msg=rule):
            errors = [f for f in found if strict or f.severity == "error"]
            warn_findings([f for f in found if f not in errors], skill_dir, item.config.rootpath)
            if errors:
                pytest.fail("\n".join(str(f) for f in errors), pytrace=False)


def lint_skill_rules(request: pytest.FixtureRequest, subtests: pytest.Subtests) -> None:
    """The skill's rules (SKILL.md, CHANGELOG.md, its scenarios), each a subtest."""
    item = request.node
    assert isinstance(item, SkillLintItem)
    from pytest_openkata.core.lint import lint_skill

    settings = item.config.stash[settings_key]
    findings = lint_skill(item.skill_dir, settings.scenario_names, settings.provider_settings)
    _check_rules(findings, subtests, item, item.skill_dir)


def lint_scenario_rules(request: pytest.FixtureRequest, subtests: pytest.Subtests) -> None:
    """The scenario's rules, each a subtest."""
    item = request.node
    assert isinstance(item, ScenarioLintItem)
    from pytest_openkata.core.lint import lint_scenario

    settings = item.config.stash[settings_key]
    findings = lint_scenario(
        item.path,
        shown_root=item.config.rootpath,
        settings=settings.provider_settings,
        context_budget=settings.context_budget,
    )
    _check_rules(findings, subtests, item, skill_of(item.path))


class SkillLintItem(pytest.Function):
    """The lint of one skill folder (``<skill>::skill``)."""

    def __init__(self, *, skill_dir: Path, **kwargs: object) -> None:
        super().__init__(callobj=lint_skill_rules, **kwargs)  # type: ignore[arg-type]
        self.skill_dir = skill_dir
        self.path = skill_dir / "SKILL.md"
        self.extra_keyword_matches.add(f"skill:{skill_dir.name}")
        self.extra_keyword_matches.add(f"skill:{unit_name(skill_dir)}")  # a tile's name

    def reportinfo(self) -> tuple[Path, None, str]:
        return self.path, None, f"{self.skill_dir.name}::lint"


class ScenarioLintItem(ScenarioFolderItem):
    """The lint of one scenario folder."""

    def __init__(self, *, scenario_dir: Path, **kwargs: object) -> None:
        super().__init__(callobj=lint_scenario_rules, **kwargs)  # type: ignore[arg-type]
        # The scenario folder is the item's path, so `pytest --eval-lint <scenario>` selects it.
        self.path = scenario_dir
        self.mark_scenario()

    def reportinfo(self) -> tuple[Path, None, str]:
        return self.path, None, f"{skill_of(self.path).name}::{self.name}::lint"
