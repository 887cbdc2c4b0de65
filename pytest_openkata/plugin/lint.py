"""``pytest --eval-lint``: scenarios and skills checked as pytest items, before any token is
spent.

In lint mode a skill folder (one with ``SKILL.md``, or with an ``evals`` folder of scenarios)
is collected as one item for the skill and one per scenario, in place of the scenario items;
a published format's file (``evals/evals.json``, ``eval.yaml``, a Harbor ``task.toml``), in a
skill or anywhere else, gives one item per scenario it lists (``<file>::<scenario>``), read with
its format; every other item of the run is deselected. Each rule of
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
from pytest_openkata.plugin.format_files import formats_by_file
from pytest_openkata.plugin.scenario_folder import ScenarioFolderItem, scenario_folders
from pytest_openkata.plugin.session import settings_key

if TYPE_CHECKING:
    # The linter is imported where it is used: the plugin loads this module in every run.
    from pytest_openkata.core.formats import EvalFormat, ScenarioSource
    from pytest_openkata.core.lint import Finding

__all__ = [
    "EvalsLintDir",
    "FormatLintFile",
    "FormatLintItem",
    "ScenarioLintItem",
    "SkillLintDir",
    "SkillLintItem",
    "format_lint_collector",
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
    """A skill or tile in lint mode: its own item, then its scenarios; under a tile also the
    skills below it that have scenarios of their own (a run takes those too); then the
    published formats' files below it outside ``evals`` (a Skillgrade ``eval.yaml`` beside
    SKILL.md), each with its scenarios' items."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        yield SkillLintItem.from_parent(self, name=SKILL_ITEM, skill_dir=self.path)
        ignored = _ignored(self)
        evals = self.path / "evals"
        if evals.is_dir() and not ignored(evals):
            yield EvalsLintDir.from_parent(self, path=evals)
        collected = {evals}  # its own collector says the format files under evals/
        if is_tile_dir(self.path):
            for folder in _skills_with_evals_under(self.path, ignored):
                collected.add(folder)
                yield SkillLintDir.from_parent(self, path=folder)
        yield from _format_collectors(self, frozenset(collected), ignored)


def _format_collectors(
    parent: pytest.Directory, skip: frozenset[Path], ignored: Callable[[Path], bool]
) -> Iterator[FormatLintFile]:
    """The lint collectors of the format files below ``parent``'s folder."""
    names = frozenset(formats_by_file(parent.config))
    for path in _format_files_under(parent.path, names, ignored, skip):
        collector = format_lint_collector(path, parent)
        if collector is not None:
            yield collector


# Folders that hold a scenario's or a run's own files, never a format's file to lint.
_NOT_EVALS = frozenset({"inputs", "results", "solution", "node_modules", "__pycache__"})


def _format_files_under(
    skill: Path, names: frozenset[str], ignored: Callable[[Path], bool], skip: frozenset[Path]
) -> Iterator[Path]:
    """The files below ``skill`` named as a format's files are (``evals.json``,
    ``eval.yaml``, ``task.toml``), never looking into hidden folders, scenario folders (with
    a task.md), the folders of ``skip`` (a tile's skills collected on their own), those of
    :data:`_NOT_EVALS` or what pytest's ignore rules leave out."""
    for current, folders, files in os.walk(skill):
        here = Path(current)
        folders[:] = [
            name
            for name in sorted(folders)
            if not name.startswith(".")
            and name not in _NOT_EVALS
            and here / name not in skip
            and not (here / name / "task.md").is_file()
            and not ignored(here / name)
        ]
        for name in sorted(files):
            if name in names:
                yield here / name


def format_lint_collector(path: Path, parent: pytest.Collector) -> FormatLintFile | None:
    """The lint collector of a format's file when a registered format finds its evals there."""
    found = [
        fmt for fmt in formats_by_file(parent.config).get(path.name, []) if fmt.detect(path.parent)
    ]
    if not found:
        return None
    collector: FormatLintFile = FormatLintFile.from_parent(parent, path=path)
    collector.formats = found
    return collector


class FormatLintFile(pytest.File):
    """A format's file in lint mode: one item per scenario it lists, or one item with the
    error that keeps its scenarios from being listed (naming the file and the key)."""

    formats: list[EvalFormat]

    def collect(self) -> Iterator[pytest.Item]:
        from pytest_openkata.contracts.errors import OpenkataError
        from pytest_openkata.core.formats.reading import unit_of

        skill_dir = unit_of(self.path)
        for fmt in self.formats:
            try:
                sources = [
                    s for s in fmt.scenarios(self.path.parent) if self.path in (s.path, s.listed_in)
                ]
            except OpenkataError as exc:  # FormatError: the file's own problem
                from pytest_openkata.core.formats import ScenarioSource
                from pytest_openkata.core.lint.published import unreadable

                source = ScenarioSource(fmt.name, fmt.name, self.path)
                error = unreadable(exc, source, skill_dir)
                yield FormatLintItem.from_parent(
                    self, name=fmt.name, fmt=fmt, source=source, skill_dir=skill_dir, error=error
                )
                continue
            for source in sources:
                yield FormatLintItem.from_parent(
                    self, name=source.name, fmt=fmt, source=source, skill_dir=skill_dir
                )


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
    """A skill's ``evals`` folder in lint mode: one item per scenario folder, then the
    collectors of the format files below it (``evals/evals.json``...)."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        for entry in scenario_folders(self, self.path)[0]:
            yield ScenarioLintItem.from_parent(self, name=entry.name, scenario_dir=entry)
        yield from _format_collectors(self, frozenset(), _ignored(self))


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


def lint_format_rules(request: pytest.FixtureRequest, subtests: pytest.Subtests) -> None:
    """A format's scenario's rules (those that apply to its format), each a subtest."""
    item = request.node
    assert isinstance(item, FormatLintItem)
    from pytest_openkata.core.lint import FORMAT_RULE, lint_format_scenario

    if item.error is not None:
        findings: dict[str, list[Finding]] = {FORMAT_RULE: [item.error]}
    else:
        settings = item.config.stash[settings_key]
        findings = lint_format_scenario(
            item.fmt, item.source, item.skill_dir, context_budget=settings.context_budget
        )
    _check_rules(findings, subtests, item, item.skill_dir)


class FormatLintItem(pytest.Function):
    """The lint of one scenario of a format's file (``<file>::<scenario>``)."""

    def __init__(
        self,
        *,
        fmt: EvalFormat,
        source: ScenarioSource,
        skill_dir: Path,
        error: Finding | None = None,
        **kwargs: object,
    ) -> None:
        super().__init__(callobj=lint_format_rules, **kwargs)  # type: ignore[arg-type]
        self.fmt = fmt
        self.source = source
        self.skill_dir = skill_dir
        self.error = error
        self.extra_keyword_matches.add(f"skill:{skill_dir.name}")

    def reportinfo(self) -> tuple[Path, None, str]:
        return self.path, None, f"{self.path.name}::{self.name}::lint"


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
