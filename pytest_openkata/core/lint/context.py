"""A scenario's files, read once for all the scenario rules, and what the loader's errors become."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import InitErrorDetails

from pytest_openkata.core.files import is_inside
from pytest_openkata.core.jsonfiles import (
    ScenarioLoadError,
    validation_error,
)
from pytest_openkata.core.lint.findings import (
    CRITERIA_FILE,
    OPTIONS_FILE,
    SKILL_FILE,
    TASK_FILE,
    Finding,
)
from pytest_openkata.core.lint.jsonlines import JsonNode, json_tree, line_at, read_text_or_none
from pytest_openkata.core.prompt_size import DEFAULT_CONTEXT_BUDGET
from pytest_openkata.core.scenario import (
    CHECKS_FILE,
    load_scenario_options,
    skill_of,
)
from pytest_openkata.core.tile import is_tile_dir, load_tile


@dataclass(frozen=True)
class FormatSource:
    """Where a published format's scenario comes from, for a scenario folder written out from
    it to be linted: its file (relative to the skill folder, posix), which every finding
    names, and how that format names the task, the files the workspace starts with and a
    judged criterion's text, which messages say in place of ``task.md``, ``inputs/`` and a
    criterion's ``description``; and the fields of the keys its reader passed over, as the
    format's own tools do, as the scenario's findings show them (``rubric``)."""

    file: str
    task: str
    inputs: str
    criterion: str
    ignored_keys: tuple[str, ...] = ()


class ScenarioFiles:
    """A scenario folder and what the rules read of it, each file read at most once.

    ``skill_dir`` and ``source`` are given for a folder written out from a published format's
    scenario (outside the skill): its skill's folder, and the file every finding names."""

    def __init__(
        self,
        path: Path,
        shown_root: Path | None,
        context_budget: int = DEFAULT_CONTEXT_BUDGET,
        *,
        skill_dir: Path | None = None,
        source: FormatSource | None = None,
    ) -> None:
        self.path = path
        self.skill_dir = skill_of(path) if skill_dir is None else skill_dir
        self.shown_root = shown_root
        self.context_budget = context_budget
        self.source = source
        self._contents: dict[str, bytes | None] = {}

    @property
    def task_words(self) -> str:
        """How messages name the task: ``task.md``, or the format's key or file for it."""
        return "task.md" if self.source is None else self.source.task

    @property
    def inputs_words(self) -> str:
        """How messages name what the workspace starts with: the scenario's ``inputs/``
        folder, or the format's key for its files."""
        return f"{self.file('inputs')}/" if self.source is None else self.source.inputs

    @property
    def criterion_words(self) -> str:
        """How messages name a judged criterion's text: its ``description``, or the format's
        key for it."""
        return "its description" if self.source is None else self.source.criterion

    def criterion_label(self, index: int, item: JsonNode) -> str:
        """How messages name a criterion: ``checklist[0] ('name')`` in criteria.json; by its
        name alone in a format's file (whose own keys differ)."""
        name = item.scalar("name") if item.members is not None else None
        named = isinstance(name, str) and bool(name)
        if self.source is not None:
            return f"criterion {name!r}" if named else f"criterion {index + 1}"
        return f"checklist[{index}]" + (f" ({name!r})" if named else "")

    def content(self, name: str) -> bytes | None:
        """The bytes of the file ``name`` (a path below the scenario folder), read once;
        None when it is missing or unreadable."""
        if name not in self._contents:
            try:
                with open(os.path.join(self.path, name), "rb") as file:
                    self._contents[name] = file.read()
            except OSError:
                self._contents[name] = None
        return self._contents[name]

    def text(self, name: str) -> str | None:
        """The file ``name`` as :func:`~.jsonlines.read_text_or_none` reads it: UTF-8 with
        universal newlines; None when it is missing, unreadable or not UTF-8."""
        content = self.content(name)
        try:
            text = None if content is None else content.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if text is not None and "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        return text

    def rel(self, path: Path) -> str:
        """``path`` relative to the skill folder, as findings name files (a format's scenario:
        its file)."""
        if self.source is not None:
            return self.source.file
        try:
            return path.relative_to(self.skill_dir).as_posix()
        except ValueError:
            return path.as_posix()

    def file(self, name: str) -> str:
        return self.rel(self.path / name)

    @cached_property
    def criteria(self) -> JsonNode | None:
        return json_tree(self.text(CRITERIA_FILE))

    @cached_property
    def checks(self) -> JsonNode | None:
        return json_tree(self.text(CHECKS_FILE))

    @cached_property
    def options(self) -> JsonNode | None:
        return json_tree(self.text(OPTIONS_FILE))

    @cached_property
    def task(self) -> str | None:
        """task.md as the run reads it (bytes that are not UTF-8 replaced); None when it is
        missing, unreadable or leads out of the skill (the run does not read it then)."""
        if self.source is None and not in_skill(self.path / TASK_FILE, self.skill_dir):
            return None
        content = self.content(TASK_FILE)
        return None if content is None else content.decode("utf-8", errors="replace")

    @cached_property
    def has_checks(self) -> bool:
        """Whether checks.json holds checks, which lets criteria.json have none."""
        return self.checks is not None and bool(self.checks.items)

    @cached_property
    def sandboxed(self) -> bool:
        """As the run decides; a scenario.json that does not load counts as the default
        (its own rule reports it)."""
        try:
            return load_scenario_options(self.path / OPTIONS_FILE).sandbox
        except ScenarioLoadError:
            return True

    @cached_property
    def checklist(self) -> tuple[JsonNode, ...]:
        """The items of criteria.json's checklist (objects or not, so that indexes are the
        loader's)."""
        return checklist_nodes(self.criteria)

    @cached_property
    def check_items(self) -> tuple[JsonNode, ...]:
        """The items of checks.json's list."""
        return () if self.checks is None else self.checks.items or ()

    @cached_property
    def skill_names(self) -> tuple[str, ...]:
        """The names a task could call the skill by: its folder's, and SKILL.md's ``name``
        (a tile's: also its ``name`` and those of its skills)."""
        names = [self.skill_dir.name]
        skill_files = [self.skill_dir / SKILL_FILE]
        if is_tile_dir(self.skill_dir):
            # A tile's: its folder's, its name's last part, each listed skill's and theirs.
            try:
                tile = load_tile(self.skill_dir)
            except ScenarioLoadError:
                tile = None
            if tile is not None:
                names.append(tile.name.rpartition("/")[2])
                names += [name for name, _path in tile.skills]
                skill_files = [path for _name, path in tile.skills]
        for skill_md in skill_files:
            front = front_matter(skill_md)
            name = front.data.get("name") if front.data is not None else None
            if isinstance(name, str) and name.strip():
                names.append(name.strip())
        return tuple(dict.fromkeys(n for n in names if n))


def in_skill(path: Path, skill_dir: Path) -> bool:
    """Whether the run reads ``path``: it does not through a symlink out of the skill."""
    return not os.path.lexists(path) or is_inside(path, skill_dir.resolve())


def loader_finding(rule: str, exc: ScenarioLoadError, scenario: ScenarioFiles) -> Finding:
    """The loader's error as a finding: its file, field and message."""
    message = f"{exc.field}: {exc.message}" if exc.field else exc.message
    return Finding(rule, "error", scenario.rel(exc.path), None, message)


def with_loader(first: Finding | None, found: list[Finding]) -> list[Finding]:
    """Every problem found, and the loader's own first one whenever the others lack it."""
    if first is None or any(f.file == first.file and f.message == first.message for f in found):
        return found
    return [first, *found]


def model_findings(
    rule: str,
    scenario: ScenarioFiles,
    path: Path,
    *,
    model: type[BaseModel],
    data: Any,
    tree: JsonNode | None,
) -> list[Finding]:
    """Every error of validating ``data`` with the loader's ``model``, each worded by the
    loader (which words only the first), with its line."""
    try:
        model.model_validate(data)
    except ValidationError as exc:
        findings = []
        for error in exc.errors():
            detail: InitErrorDetails = {
                "type": error["type"],
                "loc": error["loc"],
                "input": error["input"],
            }
            if "ctx" in error:
                detail["ctx"] = error["ctx"]
            alone = ValidationError.from_exception_data(exc.title, [detail])
            worded = validation_error(path, alone, data)
            finding = loader_finding(rule, worded, scenario)
            findings.append(located(finding, line_at(tree, error["loc"])))
        return findings
    return []


def located(finding: Finding, line: int | None) -> Finding:
    return Finding(finding.rule, finding.severity, finding.file, line, finding.message)


@dataclass(frozen=True)
class _FrontMatter:
    """SKILL.md's YAML front matter: its mapping and the lines of its top-level keys, or the
    problem (with its line) that keeps it from being read."""

    data: dict[str, Any] | None
    lines: Mapping[str, int]
    problem: str | None = None
    problem_line: int | None = None


def front_matter(path: Path) -> _FrontMatter:
    text = read_text_or_none(path)
    if text is None:
        return _FrontMatter(None, {}, "cannot be read as UTF-8 text", None)
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].rstrip() != "---":
        return _FrontMatter(
            None,
            {},
            "no YAML front matter: start SKILL.md with a `---` line, then `name:` and "
            "`description:`, then a closing `---` line",
            1,
        )
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    if end is None:
        return _FrontMatter(
            None, {}, "the front matter is not closed: add a `---` line after its last key", 1
        )
    import yaml  # here: the plugin loads this module in every pytest run

    try:
        data = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = None if mark is None else mark.line + 2
        problem = getattr(exc, "problem", None) or str(exc)
        return _FrontMatter(None, {}, f"the front matter is not valid YAML: {problem}", line)
    if not isinstance(data, dict):
        return _FrontMatter(
            None, {}, "the front matter must be YAML keys (`name:`, `description:`)", 2
        )
    keys: dict[str, int] = {}
    for number, line_text in enumerate(lines[1:end], start=2):
        match = re.match(r"([A-Za-z_][\w-]*)\s*:", line_text)
        if match is not None:
            keys.setdefault(match.group(1), number)
    return _FrontMatter({str(k): v for k, v in data.items()}, keys)


def checklist_nodes(criteria: JsonNode | None) -> tuple[JsonNode, ...]:
    member = None if criteria is None else criteria.member("checklist")
    return () if member is None else member.node.items or ()
