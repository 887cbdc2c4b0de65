"""Published eval formats collected as they are: a format's file (``evals/evals.json``,
``eval.yaml``, a Harbor task's ``task.toml``) is a collector whose items are its scenarios,
with ids naming the file and the scenario (``skills/x/evals/evals.json::eval-1``).

Collection asks a format about a folder only when it holds one of the format's ``files``,
and reads the format's file to list its scenarios; no openkata scenario file is read. When a
scenario runs, it is read with its format and written as an openkata folder in a private
place of the run (:mod:`pytest_openkata.core.formats.staging`), then run as any scenario
folder; what names that place names the original file instead. A file whose scenarios cannot
be listed is one erroring item naming the file and the key, and the others run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_openkata.contracts.errors import OpenkataError
from pytest_openkata.contracts.results import SCENARIO_ERROR, ScenarioResult
from pytest_openkata.core.formats import EvalFormat, ScenarioSource
from pytest_openkata.core.formats.reading import unit_of
from pytest_openkata.core.formats.staging import Staging, shown_source
from pytest_openkata.core.formats.writers import folder_name, run_notes
from pytest_openkata.core.tile import unit_name
from pytest_openkata.core.trials import combine_trials, errored_trial
from pytest_openkata.infra.text import visible
from pytest_openkata.plugin import compat, validation
from pytest_openkata.plugin.format_files import formats_by_file
from pytest_openkata.plugin.items import ScenarioItem
from pytest_openkata.plugin.scenario_folder import KIND_MARKERS, kind_is_asked
from pytest_openkata.plugin.session import VALIDATE, mode_of

__all__ = [
    "FormatFile",
    "FormatItem",
    "FormatValidationItem",
    "NothingToValidate",
    "UnreadableFormatFile",
    "format_collector",
    "nothing_to_validate",
    "staging_of",
]

_STAGING = pytest.StashKey[Staging]()


def staging_of(config: pytest.Config) -> Staging:
    """The run's staged scenarios, removed when the run ends (``config.add_cleanup`` runs on
    every exit path: passing, failing, interrupted, a SIGTERM turned into an interrupt)."""
    if _STAGING not in config.stash:
        staging = config.stash[_STAGING] = Staging()
        config.add_cleanup(staging.close)
    return config.stash[_STAGING]


def format_collector(file_path: Path, parent: pytest.Collector) -> FormatFile | None:
    """The collector of ``file_path`` when a registered format finds its evals there."""
    candidates = formats_by_file(parent.config).get(file_path.name, [])
    found = [fmt for fmt in candidates if fmt.detect(file_path.parent)]
    if not found:
        return None
    collector: FormatFile = FormatFile.from_parent(parent, path=file_path)
    collector.formats = found
    return collector


def _from_this_file(source: ScenarioSource, path: Path) -> bool:
    return path in (source.path, source.listed_in)


class FormatFile(pytest.File):
    """A format's file: one item per scenario it lists."""

    formats: list[EvalFormat]

    def collect(self) -> Iterator[pytest.Item]:
        skill_dir = unit_of(self.path)
        validating = mode_of(self.config) == VALIDATE
        item_class = FormatValidationItem if validating else FormatItem
        fixture_info = compat.shared_fixture_info(self, item_class.body)
        for fmt in self.formats:
            try:
                sources = [
                    s for s in fmt.scenarios(self.path.parent) if _from_this_file(s, self.path)
                ]
                names = tuple(folder_name(s.name) for s in sources)
            except OpenkataError as exc:  # FormatError, and a name no folder can have
                yield UnreadableFormatFile.from_parent(self, name=fmt.name, error=str(exc))
                continue
            taken = _folder_names(skill_dir / "evals")
            for source in sources:
                if folder_name(source.name) in taken:
                    why = (
                        f"{shown_source(source)}: its results would be named "
                        f"{folder_name(source.name)}, as are those of the scenario folder "
                        f"evals/{folder_name(source.name)}: rename one of them"
                    )
                    yield UnreadableFormatFile.from_parent(self, name=source.name, error=why)
                    continue
                if validating and not _has_solution(fmt, source):
                    yield NothingToValidate.from_parent(self, name=source.name, fmt=fmt)
                    continue
                extra = {} if fixture_info is None else {"fixtureinfo": fixture_info()}
                yield item_class.from_parent(
                    self,
                    name=source.name,
                    fmt=fmt,
                    source=source,
                    skill_dir=skill_dir,
                    skill_scenarios=names,
                    **extra,
                )


def _has_solution(fmt: EvalFormat, source: ScenarioSource) -> bool:
    """Whether the scenario holds a reference solution; True when it cannot be read (its
    validation item then says why)."""
    try:
        return fmt.load(source).solution is not None
    except OpenkataError:
        return True


def _folder_names(evals: Path) -> set[str]:
    """The names of the folders of a skill's ``evals`` (one listing): a format's scenario
    whose results would take one's name cannot run beside it."""
    try:
        return {entry.name for entry in os.scandir(evals) if entry.is_dir()}
    except OSError:
        return set()


class UnreadableFormatFile(pytest.Item):
    """A format's file whose scenarios cannot be listed: an error of its own, naming the file
    and the key, while the run's other scenarios run."""

    def __init__(self, *, error: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error = error

    def setup(self) -> None:
        pytest.fail(visible(f"cannot be collected: {self.error}"), pytrace=False)

    def runtest(self) -> None:  # never reached: setup fails
        raise AssertionError(self.error)

    def reportinfo(self) -> tuple[Path, None, str]:
        return self.path, None, f"{self.path.name}::{self.name}"


class FormatItem(ScenarioItem):
    """One scenario of a format's file, run through its staged openkata folder."""

    def __init__(
        self,
        *,
        fmt: EvalFormat,
        source: ScenarioSource,
        skill_dir: Path,
        skill_scenarios: tuple[str, ...],
        **kwargs: Any,
    ) -> None:
        super(ScenarioItem, self).__init__(callobj=self.body, **kwargs)
        self.fmt = fmt
        self.source = source
        self.skill_dir = skill_dir
        self.skill_scenarios = skill_scenarios
        self.mark_scenario(skill_dir)

    @property
    def scenario_dir(self) -> Path:  # type: ignore[override]
        return self.runnable()[0]

    def mark_scenario(self, skill_dir: Path | None = None) -> None:
        """As an openkata scenario's (:meth:`ScenarioFolderItem.mark_scenario`): the skill's
        keyword, and the kind's marker when ``-m`` or ``-k`` may ask for it (then the
        scenario is read with its format at collection)."""
        if skill_dir is None:
            skill_dir = self.skill_dir
        self.extra_keyword_matches.add(f"skill:{skill_dir.name}")
        name = self._unit_name(skill_dir)
        if name != skill_dir.name:
            self.extra_keyword_matches.add(f"skill:{name}")
        if not kind_is_asked(self.config):
            return
        try:
            kind: str | None = "sandbox" if self.fmt.load(self.source).sandbox.sandbox else "direct"
        except OpenkataError:
            kind = None  # either selection shows its error
        for marker in KIND_MARKERS if kind is None else (kind,):
            self.add_marker(marker)

    def warn_before_run(self) -> None:
        """What the scenario's format asks and a run does not apply (a threshold of its own,
        the executable bit of inputs), each as
        the item's warning at its file: a run goes on without it, never silently. Its file's
        own problems are its format reader's errors, said when it runs."""
        from pytest_openkata.core.lint import Finding
        from pytest_openkata.plugin.lint import warn_findings

        try:
            scenario = self.fmt.load(self.source)
        except OpenkataError:
            return
        where = shown_source(self.source)
        file = Path(os.path.relpath(self.source.path, self.skill_dir)).as_posix()
        findings = [
            Finding("format", "warning", file, None, f"{where}: a run does not apply {note.what}")
            for note in run_notes(scenario)
        ]
        warn_findings(findings, self.skill_dir, self.config.rootpath)

    def has_categories(self, categories: tuple[str, ...]) -> bool:
        """Never: the published formats have no criterion categories (Tessl's are openkata
        folders), so ``--eval-category`` leaves a format's scenarios out, unread."""
        return False

    def runnable(self) -> tuple[Path, Callable[[str], str]]:
        staged = staging_of(self.config).stage(self.fmt, self.source, self.skill_dir)
        return staged.folder, staged.shown

    def unrunnable(self, exc: OpenkataError, redact: Callable[[str], str]) -> ScenarioResult:
        trial = errored_trial(1, redact(str(exc)), kind=SCENARIO_ERROR)
        return combine_trials(
            [trial],
            skill=unit_name(self.skill_dir),
            skill_dir=str(self.skill_dir),
            name=folder_name(self.source.name),
            description="",
            skill_scenarios=self.skill_scenarios,
        )


class FormatValidationItem(FormatItem):
    """One scenario of a format's file in validate mode: its reference solution (a Harbor
    task's ``solution/solve.sh``) and an empty agent run through its staged folder, as an
    openkata scenario's are (:mod:`pytest_openkata.plugin.validation`)."""

    body = staticmethod(validation.check_validation)


class NothingToValidate(pytest.Item):
    """A format's scenario in validate mode that holds no reference solution: reported as
    skipped with the reason, and listed in the validation summary, never left out silently."""

    def __init__(self, *, fmt: EvalFormat, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fmt = fmt

    def runtest(self) -> None:
        reason = nothing_to_validate(self.fmt.name)
        self.user_properties.append((validation.NOTHING_PROPERTY, reason))
        pytest.skip(reason)

    def reportinfo(self) -> tuple[Path, None, str]:
        return self.path, None, f"{self.path.name}::{self.name}"


def nothing_to_validate(format_name: str) -> str:
    return (
        f"nothing to validate: this {format_name} scenario holds no reference solution "
        "(validation runs a solution and an empty agent through the graders)"
    )
