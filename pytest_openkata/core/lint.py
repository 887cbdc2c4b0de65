"""Lint rules for skills and their scenarios: what is wrong on disk, found without running.

Each rule is one function that returns its :class:`Finding` s; :func:`lint_scenario` and
:func:`lint_skill` run every rule (in the order of :data:`SCENARIO_RULES` and
:data:`SKILL_RULES`) and return each rule's findings, an empty list when it passed. Errors are
what breaks a run or its reports; warnings are what is likely a mistake.

The JSON rules validate with the scenario loader's own models and words
(:mod:`pytest_openkata.core.scenario`, private parts included), so that lint never accepts a
file the run rejects and names each problem as the run would; where the loader stops at the
first problem, the rules go on and report every one. Nothing here raises for bad input.

A team adds a rule of its own as a third party adds a grader: a class implementing
:class:`LintRule` in a distribution of its own, registered under the entry-point group
``pytest_openkata.lint_rules``; its findings follow the built-in rules' under its name.
"""

from __future__ import annotations

import bisect
import difflib
import json
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import unquote

from pydantic import BaseModel, ValidationError
from pydantic_core import InitErrorDetails

from pytest_openkata.core.checks import Check, leaves_workspace, matches
from pytest_openkata.core.files import EXCLUDED, LEADS_OUT, SKILL_SOURCES, is_inside
from pytest_openkata.core.jsonfiles import (
    ScenarioLoadError,
    go_keys,
    read_json,
    validation_error,
)
from pytest_openkata.core.placeholders import placeholders_in
from pytest_openkata.core.scenario import (
    CHECKS_FILE,
    EMPTY_DESCRIPTION,
    EMPTY_TASK,
    KIND_UNTRUSTED,
    SCENARIO_NAMES,
    CriteriaModel,
    CriterionModel,
    ScenarioModel,
    check_field,
    check_of,
    discover_scenarios,
    load_checks,
    load_criteria,
    load_scenario_options,
    misspelt_sandbox_key,
    read_capability,
    read_skill_version,
    unselected_scenarios,
)
from pytest_openkata.core.tile import TILE_FILE, is_tile_dir, load_tile, tile_files
from pytest_openkata.core.workspace import workspace_files
from pytest_openkata.infra import registry
from pytest_openkata.infra.text import plural

__all__ = [
    "SCENARIO_RULES",
    "SKILL_RULES",
    "STOP_WORDS",
    "VAGUE_WORDS",
    "Finding",
    "LintRule",
    "Severity",
    "lint_scenario",
    "lint_skill",
    "scenario_placeholders",
    "skill_placeholders",
    "unknown_keys",
    "unreached_scenario_files",
    "unreached_skill_files",
]

Severity = Literal["error", "warning"]

CRITERIA_FILE = "criteria.json"
OPTIONS_FILE = "scenario.json"
TASK_FILE = "task.md"
SKILL_FILE = "SKILL.md"
CHANGELOG_FILE = "CHANGELOG.md"
WEIGHTS_TOTAL = 100


class EvalLintWarning(UserWarning):
    """A lint rule's warning, or an unknown key in a scenario's files seen during a run, as
    pytest shows it (``-W error::pytest_openkata.EvalLintWarning`` makes them errors)."""


@dataclass(frozen=True)
class Finding:
    """One problem: the rule that found it, the file relative to the skill folder (posix),
    the 1-based line where it applies (None for the whole file) and what to do."""

    rule: str
    severity: Severity
    file: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.message}"


# --- JSON with lines -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Node:
    """A JSON value and the line it starts on; an object keeps its members (with their keys'
    lines) and an array its items. ``value`` is the plain value of a scalar."""

    line: int
    value: Any = None
    members: tuple[_Member, ...] | None = None
    items: tuple[_Node, ...] | None = None

    def member(self, key: str) -> _Member | None:
        """The member Go's decoder assigns to the field ``key``: matched without regard to
        case, the last one wins, and a null counts as absent (as ``go_keys`` decides)."""
        found = None
        for member in self.members or ():
            if member.key.lower() == key.lower() and not member.node.is_null:
                found = member
        return found

    def scalar(self, key: str) -> Any:
        member = self.member(key)
        return None if member is None else member.node.value

    @property
    def is_null(self) -> bool:
        return self.members is None and self.items is None and self.value is None


@dataclass(frozen=True)
class _Member:
    key: str
    line: int
    node: _Node


_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


_DEEPEST = 6  # levels of objects and lists parsed into nodes; deeper values stay whole


class _LineParser:
    """Parses a JSON text that ``json.loads`` accepted into :class:`_Node` s with lines."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line(self, pos: int) -> int:
        return bisect.bisect_right(self.starts, pos)

    def skip(self, pos: int) -> int:
        match = _SPACE.match(self.text, pos)
        return pos if match is None else match.end()

    def parse(self, pos: int, depth: int = 0) -> tuple[_Node, int]:
        pos = self.skip(pos)
        char = self.text[pos]
        # Below the levels the rules read (a checklist's items and their keys), a value is
        # kept whole, as json reads it: deep nesting then costs no recursion here.
        if char == "{" and depth < _DEEPEST:
            return self._object(pos, depth)
        if char == "[" and depth < _DEEPEST:
            return self._array(pos, depth)
        value, end = _DECODER.raw_decode(self.text, pos)
        return _Node(self.line(pos), value=value), end

    def _object(self, start: int, depth: int) -> tuple[_Node, int]:
        members: list[_Member] = []
        pos = self.skip(start + 1)
        while self.text[pos] != "}":
            key_pos = self.skip(pos)
            key, pos = _DECODER.raw_decode(self.text, key_pos)
            pos = self.skip(pos) + 1  # the colon
            node, pos = self.parse(pos, depth + 1)
            members.append(_Member(str(key), self.line(key_pos), node))
            pos = self.skip(pos)
            if self.text[pos] == ",":
                pos += 1
        return _Node(self.line(start), members=tuple(members)), pos + 1

    def _array(self, start: int, depth: int) -> tuple[_Node, int]:
        items: list[_Node] = []
        pos = self.skip(start + 1)
        while self.text[pos] != "]":
            node, pos = self.parse(pos, depth + 1)
            items.append(node)
            pos = self.skip(pos)
            if self.text[pos] == ",":
                pos = self.skip(pos + 1)
        return _Node(self.line(start), items=tuple(items)), pos + 1


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _json_tree(path: Path) -> _Node | None:
    """The file as :class:`_Node` s, or None when it is missing, unreadable or not JSON."""
    text = _read_text(path)
    if text is None:
        return None
    try:
        json.loads(text)
        return _LineParser(text).parse(0)[0]
    except (ValueError, IndexError, RecursionError):
        return None


def _at(tree: _Node | None, loc: Iterable[int | str]) -> int | None:
    """The line of the deepest part of ``loc`` (a pydantic error location) that is there."""
    if tree is None:
        return None
    line, node = tree.line, tree
    for step in loc:
        if isinstance(step, int):
            items = node.items or ()
            if step >= len(items):
                break
            node = items[step]
            line = node.line
        else:
            member = node.member(step)
            if member is None:
                break
            node, line = member.node, member.line
    return line


# --- a scenario's files, read once ---------------------------------------------------------


class _Scenario:
    """A scenario folder and what the rules read of it, each read at most once."""

    def __init__(self, path: Path, shown_root: Path | None) -> None:
        self.path = path
        self.skill_dir = path.parent.parent
        self.shown_root = shown_root

    def rel(self, path: Path) -> str:
        """``path`` relative to the skill folder, as findings name files."""
        try:
            return path.relative_to(self.skill_dir).as_posix()
        except ValueError:
            return path.as_posix()

    def file(self, name: str) -> str:
        return self.rel(self.path / name)

    @cached_property
    def criteria(self) -> _Node | None:
        return _json_tree(self.path / CRITERIA_FILE)

    @cached_property
    def checks(self) -> _Node | None:
        return _json_tree(self.path / CHECKS_FILE)

    @cached_property
    def options(self) -> _Node | None:
        return _json_tree(self.path / OPTIONS_FILE)

    @cached_property
    def task(self) -> str | None:
        """task.md as the run reads it (bytes that are not UTF-8 replaced); None when it is
        missing, unreadable or leads out of the skill (the run does not read it then)."""
        path = self.path / TASK_FILE
        if not _in_skill(path, self.skill_dir):
            return None
        try:
            return path.read_bytes().decode("utf-8", errors="replace")
        except OSError:
            return None

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
    def checklist(self) -> tuple[_Node, ...]:
        """The items of criteria.json's checklist (objects or not, so that indexes are the
        loader's)."""
        return _checklist(self.criteria)

    @cached_property
    def check_items(self) -> tuple[_Node, ...]:
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
            front = _front_matter(skill_md)
            name = front.data.get("name") if front.data is not None else None
            if isinstance(name, str) and name.strip():
                names.append(name.strip())
        return tuple(dict.fromkeys(n for n in names if n))


def _in_skill(path: Path, skill_dir: Path) -> bool:
    """Whether the run reads ``path``: it does not through a symlink out of the skill."""
    return not os.path.lexists(path) or is_inside(path, skill_dir.resolve())


def _loader_finding(rule: str, exc: ScenarioLoadError, scenario: _Scenario) -> Finding:
    """The loader's error as a finding: its file, field and message."""
    message = f"{exc.field}: {exc.message}" if exc.field else exc.message
    return Finding(rule, "error", scenario.rel(exc.path), None, message)


def _with_loader(first: Finding | None, found: list[Finding]) -> list[Finding]:
    """Every problem found, and the loader's own first one whenever the others lack it."""
    if first is None or any(f.file == first.file and f.message == first.message for f in found):
        return found
    return [first, *found]


def _model_findings(
    rule: str,
    scenario: _Scenario,
    path: Path,
    *,
    model: type[BaseModel],
    data: Any,
    tree: _Node | None,
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
            finding = _loader_finding(rule, worded, scenario)
            findings.append(_located(finding, _at(tree, error["loc"])))
        return findings
    return []


def _located(finding: Finding, line: int | None) -> Finding:
    return Finding(finding.rule, finding.severity, finding.file, line, finding.message)


# --- scenario rules ------------------------------------------------------------------------


def _files_rule(scenario: _Scenario) -> list[Finding]:
    """The skill's SKILL.md (a tile needs none), task.md and criteria.json are there, and no
    Python file pytest would import."""
    findings = []
    tile = is_tile_dir(scenario.skill_dir)  # a tile's own lint item checks its tile.json
    if not tile and not (scenario.skill_dir / SKILL_FILE).is_file():
        message = "file not found (every skill needs one): the scenario cannot run without it"
        findings.append(Finding("files", "error", SKILL_FILE, None, message))
    elif not tile and not _in_skill(scenario.skill_dir / SKILL_FILE, scenario.skill_dir):
        findings.append(Finding("files", "error", SKILL_FILE, None, LEADS_OUT))
    if not (scenario.path / TASK_FILE).is_file():
        message = (
            "file not found (every scenario needs a task.md): write there the prompt the "
            "agent is given"
        )
        findings.append(Finding("files", "error", scenario.file(TASK_FILE), None, message))
    elif not _in_skill(scenario.path / TASK_FILE, scenario.skill_dir):
        findings.append(Finding("files", "error", scenario.file(TASK_FILE), None, LEADS_OUT))
    if not (scenario.path / CRITERIA_FILE).exists():
        message = (
            "file not found (every scenario needs a criteria.json): write there the judge's "
            "weighted checklist (it may be empty when checks.json holds checks)"
        )
        findings.append(Finding("files", "error", scenario.file(CRITERIA_FILE), None, message))
    if scenario.task is not None:  # else missing or not read: reported above
        try:
            (scenario.path / TASK_FILE).read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            message = (
                f"not UTF-8 (byte {exc.start}): the agent gets a replacement character there; "
                "save the file as UTF-8"
            )
            findings.append(Finding("files", "error", scenario.file(TASK_FILE), None, message))
        except OSError:
            pass  # gone meanwhile
        if not scenario.task.strip():
            findings.append(Finding("files", "error", scenario.file(TASK_FILE), None, EMPTY_TASK))
    for trap in _traps(scenario.path):
        findings.append(
            Finding(
                "files",
                "error",
                scenario.rel(trap),
                None,
                "Python files directly in a scenario folder can be imported by pytest; "
                "move scenario files under inputs/",
            )
        )
    return findings


def _traps(folder: Path) -> list[Path]:
    """The files the loader refuses: conftest.py and __init__.py in the scenario folder, and
    conftest.py in a ``test*`` folder of it."""
    traps = [folder / name for name in ("conftest.py", "__init__.py") if (folder / name).exists()]
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return traps
    for entry in entries:
        if entry.name.startswith("test") and entry.is_dir() and (entry / "conftest.py").exists():
            traps.append(entry / "conftest.py")
    return traps


def _criteria_rule(scenario: _Scenario) -> list[Finding]:
    """criteria.json as the loader reads it: every type and value problem of its checklist,
    an empty checklist, and criterion names given twice."""
    path = scenario.path / CRITERIA_FILE
    if not path.exists():
        return []  # the files rule reports it
    try:
        load_criteria(path, allow_empty=scenario.has_checks)
    except ScenarioLoadError as exc:
        if exc.message == EMPTY_DESCRIPTION:
            return []  # the loader's last check: the descriptions rule reports every one
        first = _loader_finding("criteria-json", exc, scenario)
    else:
        return []
    try:
        raw = read_json(path)
    except ScenarioLoadError:
        return [_located(first, _json_error_line(path))]
    data = go_keys(raw, CriteriaModel.model_fields)
    if isinstance(data, Mapping) and isinstance(data.get("checklist"), list):
        items = [go_keys(c, CriterionModel.model_fields) for c in data["checklist"]]
        data = {**data, "checklist": items}
    found = _model_findings(
        "criteria-json", scenario, path, model=CriteriaModel, data=data, tree=scenario.criteria
    )
    found += _duplicate_criteria(scenario)
    return _with_loader(first, found)


def _json_error_line(path: Path) -> int | None:
    text = _read_text(path)
    if text is None:
        return None
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return exc.lineno
    except (ValueError, RecursionError):
        return None
    return None


def _duplicate_criteria(scenario: _Scenario) -> list[Finding]:
    findings = []
    seen: set[str] = set()
    for index, item in enumerate(scenario.checklist):
        name = item.scalar("name")
        if not isinstance(name, str) or not name:
            continue
        if name in seen:
            member = item.member("name")
            findings.append(
                Finding(
                    "criteria-json",
                    "error",
                    scenario.file(CRITERIA_FILE),
                    None if member is None else member.line,
                    f"checklist[{index}].name: duplicate criterion name {name!r}",
                )
            )
        seen.add(name)
    return findings


def _options_rule(scenario: _Scenario) -> list[Finding]:
    """scenario.json as the loader reads it: every field of a wrong type or value."""
    path = scenario.path / OPTIONS_FILE
    if not path.exists():
        return []
    try:
        load_scenario_options(path)
    except ScenarioLoadError as exc:
        first = _loader_finding("scenario-json", exc, scenario)
    else:
        return []
    try:
        data = go_keys(read_json(path), ScenarioModel.model_fields)
    except ScenarioLoadError:
        return [_located(first, _json_error_line(path))]
    found = _model_findings(
        "scenario-json", scenario, path, model=ScenarioModel, data=data, tree=scenario.options
    )
    return _with_loader(first, found)


def _checks_rule(scenario: _Scenario) -> list[Finding]:
    """checks.json as the loader reads it, every check on its own; names given twice, and a
    check named as a criterion."""
    path = scenario.path / CHECKS_FILE
    if not path.exists():
        return []
    first = None
    try:
        checks = list(load_checks(path, sandboxed=scenario.sandboxed))
    except ScenarioLoadError as exc:
        first = _loader_finding("checks-json", exc, scenario)
        checks = []
    found: list[Finding] = []
    if first is not None:
        try:
            data = read_json(path)
        except ScenarioLoadError:
            return [_located(first, _json_error_line(path))]
        if not isinstance(data, list):
            return [_located(first, 1)]
        checks, found = _each_check(scenario, data)
    found += _clashes(scenario, checks)
    outside, names = _outside_workspace(scenario)
    found += outside
    found += _unmatched_unchanged(scenario, [c for c in checks if c.name not in names])
    return _with_loader(first, found)


_PATH_FIELDS = ("path", "changed", "unchanged")


def _check_paths(item: _Node) -> Iterator[tuple[str, _Node]]:
    """A check's paths and globs by field (``path``, ``changed[0]``...), by exact key."""
    for key in _PATH_FIELDS:
        member = next((m for m in reversed(item.members or ()) if m.key == key), None)
        if member is None:
            continue
        if member.node.items is None:
            yield key, member.node
        else:
            yield from ((f"{key}[{i}]", glob) for i, glob in enumerate(member.node.items))


def _outside_workspace(scenario: _Scenario) -> tuple[list[Finding], set[str]]:
    """Check paths and globs that lead out of ``/workspace`` (``../``, an absolute path
    elsewhere): a check sees only the workspace's files, so such a file check never finds
    its file and such a glob never matches. Also the names of those checks."""
    found: list[Finding] = []
    names: set[str] = set()
    for index, node in enumerate(scenario.check_items):
        name = _exact(node, "name")
        for field, path in _check_paths(node):
            if not isinstance(path.value, str) or not leaves_workspace(path.value):
                continue
            message = (
                f"{check_field(index, {'name': name}, field)}: {path.value!r} leads out of "
                "/workspace, and a check sees only the workspace's files: name a path relative "
                "to it (or under /workspace/)"
            )
            found.append(
                Finding("checks-json", "error", scenario.file(CHECKS_FILE), path.line, message)
            )
            names.add(name)
    return found, names


def _unmatched_unchanged(scenario: _Scenario, checks: list[Check]) -> list[Finding]:
    """A diff check's ``unchanged`` glob that matches no file of the workspace the agent
    starts from (task.md and inputs/): every run of the scenario errors on it."""
    if not scenario.sandboxed or not any(c.type == "diff" and c.unchanged for c in checks):
        return []
    before = [name for name, _ in workspace_files(scenario.skill_dir, scenario.path, skill=False)]
    found = []
    for check in checks:
        for glob in check.unchanged if check.type == "diff" else ():
            if not any(matches(path, glob) for path in before):
                message = (
                    f"check {check.name!r}: unchanged: {glob!r} matches no file of the "
                    "workspace (task.md and inputs/): every run errors on it; fix the glob or "
                    "add the file to inputs/"
                )
                found.append(
                    Finding("checks-json", "error", scenario.file(CHECKS_FILE), None, message)
                )
    return found


def _each_check(scenario: _Scenario, data: list[Any]) -> tuple[list[Check], list[Finding]]:
    """The checks that load, and the problems of every check as load_checks words them (it
    stops at the first): its own, a name given before, a workspace check in a direct
    scenario."""
    path = scenario.path / CHECKS_FILE
    nodes = scenario.check_items
    checks: list[Check] = []
    found: list[Finding] = []
    names: set[str] = set()
    for index, item in enumerate(data):
        node = nodes[index] if index < len(nodes) else None
        name = item.get("name") if isinstance(item, Mapping) else None
        try:
            check = check_of(path, index, item)
        except ScenarioLoadError as exc:
            found.append(
                _located(_loader_finding("checks-json", exc, scenario), _check_line(exc, node))
            )
        else:
            checks.append(check)
            if check.reads_workspace and not scenario.sandboxed:
                found.append(_direct_workspace(scenario, index, item, check, node))
        if isinstance(name, str) and name in names:
            where = check_field(index, item, "name")
            line = None if node is None else _at(node, ["name"])
            message = f"{where}: duplicate check name {name!r}"
            found.append(Finding("checks-json", "error", scenario.rel(path), line, message))
        if isinstance(name, str) and name:
            names.add(name)
    return checks, found


def _check_line(exc: ScenarioLoadError, node: _Node | None) -> int | None:
    """The line of the key a check's error names, else of the check."""
    if node is None:
        return None
    for member in node.members or ():
        if exc.field is not None and exc.field.endswith(f".{member.key}"):
            return member.line
    return node.line


def _direct_workspace(
    scenario: _Scenario, index: int, item: Any, check: Check, node: _Node | None
) -> Finding:
    is_schema = check.type == "json_schema"
    what = "json_schema check with a path" if is_schema else f"{check.type} check"
    key = "path" if is_schema else "type"
    message = (
        f"{check_field(index, item, key)}: a {what} reads the workspace, which only a "
        'sandboxed scenario has (scenario.json: "sandbox": true)'
    )
    line = None if node is None else _at(node, [key])
    return Finding("checks-json", "error", scenario.file(CHECKS_FILE), line, message)


def _clashes(scenario: _Scenario, checks: list[Check]) -> list[Finding]:
    """Checks named as a criterion: their scores would be one verdict."""
    criteria = {item.scalar("name") for item in scenario.checklist}
    lines = {item.scalar("name"): _at(item, ["name"]) for item in scenario.check_items}
    return [
        Finding(
            "checks-json",
            "error",
            scenario.file(CHECKS_FILE),
            lines.get(check.name),
            f"check name {check.name!r} is also a criterion of criteria.json",
        )
        for check in checks
        if check.name in criteria
    ]


def _unknown_keys_rule(scenario: _Scenario) -> list[Finding]:
    """Keys the run ignores (see :func:`unknown_keys`)."""
    return unknown_keys(scenario.path)


def _descriptions_rule(scenario: _Scenario) -> list[Finding]:
    """Every criterion says what the judge looks for: an empty description (or none) is an
    error, as in a run."""
    findings = []
    for index, item in enumerate(scenario.checklist):
        if item.members is None:
            continue
        member = item.member("description")
        text = None if member is None else member.node.value
        if member is not None and not isinstance(text, str):
            continue  # the criteria rule reports its type
        if text is None or not text.strip():
            findings.append(
                Finding(
                    "empty-descriptions",
                    "error",
                    scenario.file(CRITERIA_FILE),
                    item.line if member is None else member.line,
                    f"{_criterion_field(index, item)}.description: {EMPTY_DESCRIPTION}",
                )
            )
    return findings


def _checklist(criteria: _Node | None) -> tuple[_Node, ...]:
    member = None if criteria is None else criteria.member("checklist")
    return () if member is None else member.node.items or ()


def _criterion_field(index: int, item: _Node) -> str:
    name = item.scalar("name")
    return f"checklist[{index}]" + (f" ({name!r})" if isinstance(name, str) and name else "")


def _weights_rule(scenario: _Scenario) -> list[Finding]:
    """The scores of criteria.json sum to 100, as ``scripts/check-eval-weights.sh`` of the
    reference requires (its runner does not). A scenario graded by checks only (an empty
    checklist) needs its checks.json scores to sum to 100 instead. The points of checks beside
    a checklist come on top, so that a repository's existing weights script still passes."""
    if scenario.criteria is None:
        return []  # missing or not JSON: other rules report it
    if scenario.checklist or not scenario.check_items:
        items, file = list(scenario.checklist), CRITERIA_FILE
        total = sum(_number(item.scalar("max_score")) for item in items)
    else:
        file = CHECKS_FILE
        total = sum(_number(_exact(item, "max_score")) for item in scenario.check_items)
    if total == WEIGHTS_TOTAL:
        return []
    shown = _shown(scenario.path, scenario.shown_root)
    message = f"FAIL: {shown} — sum={_text(total)} (expected {WEIGHTS_TOTAL})"
    return [Finding("weights", "error", scenario.file(file), None, message)]


def _exact(item: _Node, key: str) -> Any:
    """A check's member by its exact key (checks.json keys are not matched by case)."""
    return next((m.node.value for m in reversed(item.members or ()) if m.key == key), None)


def _number(value: Any) -> float:
    """A score as the reference script's awk adds it: numbers count, anything else is 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return value if math.isfinite(value) else 0


def _text(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else repr(float(number))


def _shown(path: Path, root: Path | None) -> str:
    try:
        return Path(os.path.relpath(path, root if root is not None else Path.cwd())).as_posix()
    except ValueError:  # another drive
        return path.as_posix()


def _task_names_skill_rule(scenario: _Scenario) -> list[Finding]:
    """The task does not name the skill: a user states a problem, and a task that says which
    skill to use tests obedience, not whether the skill helps. Prose is an error; code and
    file names are a warning (they may be meant)."""
    if scenario.task is None:
        return []
    findings = []
    for mention in _mentions(scenario.task, scenario.skill_names):
        if mention.in_code:
            severity: Severity = "warning"
            message = (
                f"the task names the skill {mention.name!r} in code or a file name "
                f"({mention.token!r}): rename it unless the name is what the task is about"
            )
        elif not (mention.beside_skill or "-" in mention.name):
            # A one-word name ("git", "docker") is also a word a task about its tool needs.
            severity = "warning"
            message = (
                f"the task uses the word {mention.name!r}, the skill's name: keep it only if "
                "the task is about that thing, not a pointer to the skill"
            )
        else:
            severity = "error"
            message = (
                f"the task names the skill {mention.name!r}: describe the user's problem "
                "instead, so that the eval shows whether the skill is found and helps"
            )
        findings.append(
            Finding("task-names-skill", severity, scenario.file(TASK_FILE), mention.line, message)
        )
    return findings


@dataclass(frozen=True)
class _Mention:
    name: str
    line: int
    token: str
    in_code: bool
    beside_skill: bool = False  # "the git skill", "skill `git`"


_SKILL_AFTER = re.compile(r"[`'\"*_]*\s+skills?\b", re.I)
_SKILL_BEFORE = re.compile(r"\bskills?\s+[`'\"*_]*$", re.I)


def _mentions(text: str, names: Iterable[str]) -> Iterator[_Mention]:
    """Whole-word, case-insensitive mentions of any of ``names`` (not inside a longer word
    such as ``github-create-pr`` for ``create-pr``); in code when inside a code span or a
    fenced block, or when part of a path or file name."""
    patterns = [(n, re.compile(rf"(?<![\w-]){re.escape(n)}(?![\w-])", re.I)) for n in names]
    for number, line, fenced in _markdown_lines(text):
        spans = [] if fenced else _code_spans(line)
        taken: list[tuple[int, int]] = []
        for name, pattern in patterns:
            for match in pattern.finditer(line):
                if any(s < match.end() and match.start() < e for s, e in taken):
                    continue
                taken.append((match.start(), match.end()))
                token = _token_at(line, match.start(), match.end())
                in_span = any(s <= match.start() < e for s, e, _ in spans)
                in_code = fenced or in_span or _is_path_token(token)
                beside = bool(
                    _SKILL_AFTER.match(line, match.end())
                    or _SKILL_BEFORE.search(line[: match.start()])
                )
                yield _Mention(name, number, token, in_code, beside)


def _token_at(line: str, start: int, end: int) -> str:
    """The whitespace-delimited word around ``line[start:end]``, without enclosing
    punctuation or a sentence's final full stop."""
    left = start
    while left > 0 and not line[left - 1].isspace():
        left -= 1
    right = end
    while right < len(line) and not line[right].isspace():
        right += 1
    punctuation = "`\"'()[]<>{},;:!?*"
    return line[left:right].lstrip(punctuation).rstrip(punctuation + ".")


def _is_path_token(token: str) -> bool:
    return "/" in token or "\\" in token or _EXTENSION.search(token) is not None


_EXTENSION = re.compile(r"[\w-]\.[A-Za-z][A-Za-z0-9]{0,7}$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _markdown_lines(text: str) -> Iterator[tuple[int, str, bool]]:
    """Each line of a Markdown text with its number and whether it belongs to a fenced code
    block (its fence lines included). Indented code blocks are not told apart from prose."""
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        match = _FENCE.match(line)
        if fence is None and match is not None:
            fence = match.group(1)
            yield number, line, True
        elif fence is not None:
            closing = match is not None and match.group(1)[0] == fence[0]
            if closing and match is not None and len(match.group(1)) >= len(fence):
                fence = None
            yield number, line, True
        else:
            yield number, line, False


def _code_spans(line: str) -> list[tuple[int, int, str]]:
    """The code spans of one line: start, end and content. A run of backticks opens a span
    that the next run of as many closes, as in CommonMark (spans across lines are not
    recognised)."""
    runs = [(m.start(), m.end()) for m in re.finditer(r"`+", line)]
    spans = []
    index = 0
    while index < len(runs):
        start, end = runs[index]
        width = end - start
        close = next(
            (k for k in range(index + 1, len(runs)) if runs[k][1] - runs[k][0] == width), None
        )
        if close is None:
            index += 1
            continue
        spans.append((start, runs[close][1], line[end : runs[close][0]].strip()))
        index = close + 1
    return spans


def _referenced_inputs_rule(scenario: _Scenario) -> list[Finding]:
    """Paths the task shows in code spans are in inputs/ (a leading ``inputs/`` names that
    folder itself). A warning only: the task may ask the agent to create the file."""
    if scenario.task is None:
        return []
    findings = []
    seen: set[str] = set()
    for number, line, fenced in _markdown_lines(scenario.task):
        if fenced:
            continue
        for _, _, content in _code_spans(line):
            path = _input_path(content)
            if path is None or path in seen:
                continue
            seen.add(path)
            if not _in_inputs(scenario.path, path):
                findings.append(_missing_input(scenario, number, content))
    return findings


_NOT_IN_PATHS = re.compile(r"[\s*?<>{}\[\]|$=:;,\"'()@#%!&^~+`]")


def _input_path(span: str) -> str | None:
    """The relative path a code span shows, normalised, or None when it is no such path: it
    needs a ``/`` or a file extension, and no spaces, URL, absolute or home path, command
    syntax (``=``, ``$``, ``|``, options), placeholders or globs, or ``..``."""
    if not span or span.startswith(("/", "\\", "-")) or _NOT_IN_PATHS.search(span):
        return None
    if "/" not in span and _EXTENSION.search(span) is None:
        return None
    parts = [p for p in span.replace("\\", "/").split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        return None
    return "/".join(parts)


def _in_inputs(scenario_dir: Path, path: str) -> bool:
    if path == "inputs" or path.startswith("inputs/"):
        return (scenario_dir / path).exists()
    return (scenario_dir / "inputs" / path).exists()


def _missing_input(scenario: _Scenario, line: int, span: str) -> Finding:
    inputs = scenario.file("inputs")
    message = (
        f"the task refers to `{span}`, which is not in {inputs}/: add it there if the agent "
        "should find it (ignore this if the task asks the agent to create it)"
    )
    return Finding("referenced-inputs", "warning", scenario.file(TASK_FILE), line, message)


VAGUE_WORDS: tuple[str, ...] = (
    "good",
    "nice",
    "clean",
    "clear",
    "clearly",
    "proper",
    "properly",
    "appropriate",
    "appropriately",
    "reasonable",
    "sensible",
    "adequate",
    "correct",
    "correctly",
    "well-written",
    "well written",
    "well-structured",
    "well structured",
    "high quality",
    "high-quality",
    "quality",
)
"""Verdict words that say a judge should like the work without saying what to look for."""

STOP_WORDS: frozenset[str] = frozenset(
    """a an the and or but of in on to for with by as at from is are be been being was were
    it its it's this that these those there has have had does do very really overall
    generally looks look seems seem should must will would is's all any some enough
    response output answer result results code work solution agent content text""".split()  # noqa: SIM905
)
"""Words that name nothing to observe: articles, linking words, and the generic nouns for the
agent's work as a whole ("the output is good")."""

_CONCRETE = re.compile(
    r"`|\"[^\"]+\"|“[^”]+”|‘[^’]+’|(?<!\w)'[^']+'(?!\w)|\d|[\w-]/|/[\w-]|[\w-]\.[A-Za-z]"
)
_VAGUE = re.compile(
    r"(?<![\w-])(" + "|".join(re.escape(w) for w in VAGUE_WORDS) + r")(?![\w-])", re.I
)
_MAX_OBJECT_WORDS = 2


def _vague_criteria_rule(scenario: _Scenario) -> list[Finding]:
    """Criteria a judge cannot check. A description is vague when it uses a word of
    :data:`VAGUE_WORDS`, shows nothing concrete (no code span, quoted text, number, path or
    file name) and, without its vague and :data:`STOP_WORDS`, keeps at most two words: "The
    code is clean and well-written" is vague, "Response presents a clear counterargument
    against the user's stated position" is not. Conservative on purpose: a false warning on
    a good criterion costs more than a missed vague one."""
    findings = []
    for index, item in enumerate(scenario.checklist):
        text = item.scalar("description") if item.members is not None else None
        if isinstance(text, str) and _is_vague(text):
            member = item.member("description")
            message = (
                f"{_criterion_field(index, item)}: vague criterion {text.strip()!r}: say what "
                "the judge should see in the work (a file, a section, a command, a value)"
            )
            line = item.line if member is None else member.line
            findings.append(
                Finding("vague-criteria", "warning", scenario.file(CRITERIA_FILE), line, message)
            )
    return findings


def _is_vague(text: str) -> bool:
    if _VAGUE.search(text) is None or _CONCRETE.search(text) is not None:
        return False
    rest = re.findall(r"[a-z][a-z'-]*", _VAGUE.sub(" ", text.lower()))
    return len([w for w in rest if w not in STOP_WORDS]) <= _MAX_OBJECT_WORDS


def _scenario_description_rule(scenario: _Scenario) -> list[Finding]:
    """scenario.json has a description: the catalogue shows it."""
    path = scenario.path / OPTIONS_FILE
    try:
        description = load_scenario_options(path).description
    except ScenarioLoadError:
        return []  # the scenario.json rule reports it
    if description.strip() or read_capability(scenario.path):
        return []  # capability.txt is the description when scenario.json has none
    where = "no scenario.json" if not path.exists() else "scenario.json has no description"
    message = (
        f'{where}: add {{"description": "..."}} saying what the scenario tests, for the catalogue'
    )
    member = scenario.options.member("description") if scenario.options is not None else None
    line = None if member is None else member.line
    return [Finding("scenario-description", "warning", scenario.file(OPTIONS_FILE), line, message)]


SCENARIO_ENTRIES: frozenset[str] = frozenset(
    {
        TASK_FILE,
        CRITERIA_FILE,
        OPTIONS_FILE,
        CHECKS_FILE,
        "capability.txt",
        "capability.text",
        "inputs",
        "solution",
        "results",
    }
)
"""What a scenario folder holds directly: its files, inputs/ (what the agent is given beside
task.md), solution/ (for validation) and results/."""


def unreached_scenario_files(scenario_dir: Path) -> list[Finding]:
    """Files and folders directly in a scenario folder that are none of
    :data:`SCENARIO_ENTRIES`, as warnings (paths relative to the skill folder): the agent is
    given task.md and inputs/ only, so a file left beside them never reaches it. Dotfiles,
    ``__pycache__`` and the Python files the ``files`` rule reports are left out."""
    scenario = _Scenario(scenario_dir, None)
    traps = set(_traps(scenario_dir))
    try:
        entries = sorted(scenario_dir.iterdir())
    except OSError:
        return []
    findings = []
    for entry in entries:
        name = entry.name
        if name in SCENARIO_ENTRIES or name.startswith(".") or name == "__pycache__":
            continue
        if entry in traps or entry / "conftest.py" in traps:
            continue  # the files rule reports it
        shown = scenario.rel(entry) + ("/" if entry.is_dir() else "")
        message = (
            f"{shown} never reaches the agent (it is given task.md and the files under "
            "inputs/): move it under inputs/ if the agent needs it"
        )
        findings.append(Finding("unreached-files", "warning", scenario.rel(entry), None, message))
    return findings


def _unreached_scenario_rule(scenario: _Scenario) -> list[Finding]:
    """Files beside task.md that the agent never sees (see :func:`unreached_scenario_files`)."""
    return unreached_scenario_files(scenario.path)


@dataclass(frozen=True)
class _Mechanical:
    """A criterion a check can grade: the text it expects (``contains``) or the pattern it
    names (``regex``), whether case is ignored, and the words before its verb (which may
    name a file)."""

    kind: Literal["contains", "regex"]
    value: str
    ignore_case: bool
    subject: str

    @property
    def pattern(self) -> str:
        pattern = re.escape(self.value) if self.kind == "contains" else self.value
        if self.ignore_case and not pattern.startswith("(?i)"):
            return "(?i)" + pattern
        return pattern


_SUBJECT = r"(?P<subject>(?:\S+\s+){0,5}?)"
_CASE_NOTE = r"\((?P<{}>case-(?:in)?sensitive)\)"
_CONTAINS = re.compile(
    rf"^\s*{_SUBJECT}(?:contains|includes)\s+(?:{_CASE_NOTE.format('before')}\s+)?"
    r"(?:the\s+(?:text|string|word|phrase|line|substring)\s+)?"
    r"(?P<q>[\"'`])(?P<value>(?:(?!(?P=q)).)+)(?P=q)"
    rf"(?:\s*{_CASE_NOTE.format('after')})?\s*\.?\s*$",
    re.I,
)
_MATCHES = re.compile(
    rf"^\s*{_SUBJECT}matches\s+(?:/(?P<slashed>(?:\\.|[^/\\])+)/(?P<flags>[a-z]*)\.?"
    r"|(?:the\s+)?(?:pattern|regexp?|regular\s+expression)\s*(?P<colon>:)?\s*(?P<bare>.+?))"
    rf"(?:\s*{_CASE_NOTE.format('after')})?\s*$",
    re.I,
)
_NEGATION = re.compile(r"\b(?:not|never|no|without)\b|n't\b", re.I)


def _mechanical(text: str) -> _Mechanical | None:
    """What a criterion's text asks when it is a check in words: ``<subject> contains "X"``
    (or 'X', `X`, with an optional ``(case-sensitive)`` or ``(case-insensitive)``), or
    ``<subject> matches the pattern: R``, ``matches the regex R`` (R quoted, or one word
    when no colon comes before it), ``matches /R/``. The subject is a few words that deny
    nothing ("The output never contains" is no such criterion); a pattern Python cannot
    compile makes none either."""
    found = _contains(text) or _matches(text)
    if found is None or _NEGATION.search(found.subject):
        return None
    try:
        re.compile(found.pattern, re.MULTILINE)
    except re.error:
        return None
    return found


def _contains(text: str) -> _Mechanical | None:
    match = _CONTAINS.match(text)
    if match is None:
        return None
    case = (match.group("before") or match.group("after") or "").lower()
    return _Mechanical(
        "contains", match.group("value"), case == "case-insensitive", match.group("subject")
    )


def _matches(text: str) -> _Mechanical | None:
    match = _MATCHES.match(text)
    if match is None:
        return None
    ignore_case = (match.group("after") or "").lower() == "case-insensitive"
    if match.group("slashed") is not None:
        pattern = match.group("slashed")
        ignore_case = ignore_case or "i" in match.group("flags").lower()
    else:
        pattern = match.group("bare").strip()
        quoted = re.fullmatch(r"([`\"'])((?:(?!\1).)+)\1\.?", pattern)
        if quoted is not None:
            pattern = quoted.group(2)
        elif match.group("colon") is None and re.search(r"\s", pattern):
            return None  # "matches the pattern of the examples": words, not a pattern
        elif pattern.endswith(".") and not pattern.endswith("\\."):
            pattern = pattern[:-1]  # the sentence's full stop
    if not pattern:
        return None
    return _Mechanical("regex", pattern, ignore_case, match.group("subject"))


def _subject_path(subject: str, scenario_dir: Path) -> str | None:
    """The workspace file a criterion's subject names: one in backticks ("The file
    `CHANGELOG.md`"), or a bare word with a ``/`` or that ``inputs/`` holds ("notes/out.txt",
    "app.py"), not a dotted name such as "Node.js". A leading ``inputs/`` is left out: the
    files of inputs/ sit at the workspace's root."""
    candidates = [content for _, _, content in _code_spans(subject)]
    for word in subject.split():
        token = word.strip("`\"'()[]<>{},;:!?*")
        if "/" in token or (_is_path_token(token) and _in_inputs(scenario_dir, token)):
            candidates.append(token)
    for candidate in candidates:
        path = _input_path(candidate)
        if path is not None:
            return path.removeprefix("inputs/") or None
    return None


def _criterion_check(scenario: _Scenario, item: _Node) -> tuple[dict[str, Any], str] | None:
    """The checks.json entry that grades a mechanical criterion exactly, and the expected
    text of a ``contains`` one (else ""); None when the criterion is not mechanical or has
    no usable name or score. A sandboxed scenario's criterion that names a file gets a
    ``file_regex`` check on it; any other an ``output_regex`` check on the agent's output."""
    if item.members is None:
        return None
    name, score = item.scalar("name"), item.scalar("max_score")
    if isinstance(score, float) and score.is_integer():
        score = int(score)
    if not isinstance(name, str) or not name or isinstance(score, bool):
        return None
    if not isinstance(score, int) or score <= 0:
        return None
    texts = [t for t in (item.scalar("description"), name) if isinstance(t, str)]
    found = next((m for m in map(_mechanical, texts) if m is not None), None)
    if found is None:
        return None
    path = _subject_path(found.subject, scenario.path) if scenario.sandboxed else None
    entry: dict[str, Any] = {"name": name, "type": "file_regex" if path else "output_regex"}
    if path:
        entry["path"] = path
    entry.update(pattern=found.pattern, max_score=score)
    return entry, found.value if found.kind == "contains" else ""


def _mechanical_criteria_rule(scenario: _Scenario) -> list[Finding]:
    """Criteria that are checks in words (see :func:`_mechanical`): a judge grades them by
    reading, and may miss or forgive what a regular expression decides exactly and for
    free. The warning gives the checks.json entry to use instead."""
    findings = []
    for index, item in enumerate(scenario.checklist):
        check = _criterion_check(scenario, item)
        if check is None:
            continue
        entry = json.dumps(check[0], ensure_ascii=False)
        message = (
            f"{_criterion_field(index, item)}: mechanical criterion: a check grades it "
            f"exactly; replace it with this checks.json entry, and give its points to the "
            f"other criteria (criteria.json's scores still sum to 100, as the reference's "
            f"weights script checks; the check's come on top): {entry}"
        )
        findings.append(
            Finding(
                "mechanical-criteria", "warning", scenario.file(CRITERIA_FILE), item.line, message
            )
        )
    return findings


_PLAIN_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")
_MIN_QUOTED = 4
_HEADING = re.compile(r"^ {0,3}#{1,6}(?:\s|$)")


def _expected_values(scenario: _Scenario, item: _Node) -> list[str]:
    """The values a criterion expects: the text of a mechanical ``contains`` criterion, and
    the quoted strings (double quotes or backticks) of its description of at least four
    characters that are neither a plain word (as "main" or "build": a word the task and the
    criterion share is mostly the thing both talk about) nor a file's path (a file the task
    names is where to work, not the answer)."""
    values = []
    check = _criterion_check(scenario, item)
    if check is not None and check[1].strip():
        values.append(" ".join(check[1].split()))
    description = item.scalar("description") if item.members is not None else None
    # A value the criterion forbids ("does not recommend `git push --force`") is no answer.
    if isinstance(description, str) and not _NEGATION.search(description):
        quoted = [c for _, _, c in _code_spans(description)]
        quoted += re.findall(r"\"([^\"]+)\"|“([^”]+)”", description)
        for value in quoted:
            text = value if isinstance(value, str) else "".join(value)
            text = " ".join(text.split())
            if len(text) < _MIN_QUOTED or _PLAIN_WORD.fullmatch(text):
                continue
            if _is_path_token(text) or _input_path(text) is not None:
                continue
            values.append(text)
    return list(dict.fromkeys(values))


def _task_prose(task: str) -> tuple[str, list[int], list[int]]:
    """task.md without its headings (a task's title names its topic), lowercased with its
    whitespace made single spaces, and where each kept line starts in it, with its number."""
    parts: list[str] = []
    starts: list[int] = []
    numbers: list[int] = []
    offset = 0
    for number, line, fenced in _markdown_lines(task):
        if not fenced and _HEADING.match(line):
            continue
        words = " ".join(line.split()).lower()
        if not words:
            continue
        starts.append(offset)
        numbers.append(number)
        parts.append(words)
        offset += len(words) + 1
    return " ".join(parts), starts, numbers


def _task_states_answer_rule(scenario: _Scenario) -> list[Finding]:
    """The task does not state, word for word, a value a criterion expects (see
    :func:`_expected_values`): then the agent copies it, and the criterion measures reading,
    not the skill. Matched without regard to case or line breaks, as a whole word."""
    if scenario.task is None:
        return []
    prose, starts, numbers = _task_prose(scenario.task)
    findings = []
    for index, item in enumerate(scenario.checklist):
        name = item.scalar("name") if item.members is not None else None
        label = repr(name) if isinstance(name, str) and name else f"checklist[{index}]"
        for value in _expected_values(scenario, item):
            wanted = " ".join(value.split()).lower()
            before = r"(?<!\w)" if wanted[:1].isalnum() or wanted[:1] == "_" else ""
            after = r"(?!\w)" if wanted[-1:].isalnum() or wanted[-1:] == "_" else ""
            match = re.search(before + re.escape(wanted) + after, prose)
            if match is None:
                continue
            line = numbers[bisect.bisect_right(starts, match.start()) - 1]
            message = (
                f"the task gives away what criterion {label} checks: it states {value!r}; "
                "leave it out of the task so that the agent has to find it (or let the "
                "criterion check something the agent must work out)"
            )
            findings.append(
                Finding("task-states-answer", "warning", scenario.file(TASK_FILE), line, message)
            )
    return findings


# --- the scaffold's placeholders -----------------------------------------------------------

_INPUTS_README = "inputs/README.md"  # a sandboxed scenario's, as new-scenario writes it


def _placeholder_finding(file: str, text: str | None, whose: str) -> list[Finding]:
    """One warning for a file that still holds placeholders of the scaffold (see
    :mod:`pytest_openkata.core.placeholders`), at the first one's line."""
    found = placeholders_in(text or "")
    if not found:
        return []
    (line, first), lines = found[0], ", ".join(str(number) for number, _ in found)
    left = f"{plural(len(found), 'placeholder')} left, on line{'s' if len(found) > 1 else ''}"
    message = (
        f'the scaffold\'s placeholder "{first} ..." is still there ({left} {lines}): '
        f"replace each with the {whose}'s own text"
    )
    return [Finding("placeholders", "warning", file, line, message)]


def scenario_placeholders(scenario_dir: Path) -> list[Finding]:
    """The scaffold's placeholders left in a scenario's files: task.md, criteria.json,
    scenario.json, checks.json and a sandboxed scenario's inputs/README.md."""
    scenario = _Scenario(scenario_dir, None)
    findings = _placeholder_finding(scenario.file(TASK_FILE), scenario.task, "scenario")
    for name in (CRITERIA_FILE, OPTIONS_FILE, CHECKS_FILE, _INPUTS_README):
        text = _read_text(scenario_dir / name)
        findings += _placeholder_finding(scenario.file(name), text, "scenario")
    return findings


def _placeholders_rule(scenario: _Scenario) -> list[Finding]:
    """Placeholders of ``new-scenario`` left in the scenario (see :func:`scenario_placeholders`)."""
    return scenario_placeholders(scenario.path)


def skill_placeholders(skill_dir: Path) -> list[Finding]:
    """The placeholders of ``init`` left in the skill's SKILL.md (in a tile, in each listed
    skill's)."""
    skill_files = [skill_dir / SKILL_FILE]
    if is_tile_dir(skill_dir):
        try:
            skill_files = [path for _name, path in load_tile(skill_dir).skills]
        except ScenarioLoadError:
            return []  # the skill-md rule reports it
    findings = []
    for path in skill_files:
        if not _in_skill(path, skill_dir):
            continue  # the skill-md rule reports it
        shown = path.relative_to(skill_dir).as_posix()
        findings += _placeholder_finding(shown, _read_text(path), "skill")
    return findings


_SCENARIO_RULES: dict[str, Callable[[_Scenario], list[Finding]]] = {
    "files": _files_rule,
    "criteria-json": _criteria_rule,
    "scenario-json": _options_rule,
    "checks-json": _checks_rule,
    "unknown-keys": _unknown_keys_rule,
    "empty-descriptions": _descriptions_rule,
    "placeholders": _placeholders_rule,
    "weights": _weights_rule,
    "task-names-skill": _task_names_skill_rule,
    "referenced-inputs": _referenced_inputs_rule,
    "vague-criteria": _vague_criteria_rule,
    "scenario-description": _scenario_description_rule,
    "unreached-files": _unreached_scenario_rule,
    "mechanical-criteria": _mechanical_criteria_rule,
    "task-states-answer": _task_states_answer_rule,
}
SCENARIO_RULES: tuple[str, ...] = tuple(_SCENARIO_RULES)
"""The scenario rules in the order they run: required files; criteria.json, scenario.json
and checks.json as the loader reads them; unknown keys; empty criterion descriptions; the
scaffold's placeholders; weights
summing to 100; the task naming the skill; code-span paths missing from inputs/; vague
criteria; scenario.json's description; files beside task.md that never reach the agent;
criteria a check would grade exactly; the task stating what a criterion expects."""


def lint_scenario(
    scenario_dir: Path, *, shown_root: Path | None = None
) -> dict[str, list[Finding]]:
    """Every scenario rule's findings for ``<skill>/evals/scenario-*``. ``shown_root`` is what
    the weights message names the folder relative to (the current directory by default)."""
    scenario = _Scenario(scenario_dir, shown_root)
    findings = {name: rule(scenario) for name, rule in _SCENARIO_RULES.items()}
    where = scenario.file("")
    for name, rule in _installed_rules("scenario"):
        found = _installed_findings(name, rule, scenario_dir, where, SCENARIO_RULES)
        findings[name] = findings.get(name, []) + found  # a built-in rule's findings stay
    return findings


# --- unknown keys --------------------------------------------------------------------------


_OPTION_KEYS = tuple(ScenarioModel.model_fields)
_CRITERIA_KEYS = tuple(CriteriaModel.model_fields)
_CRITERION_KEYS = tuple(CriterionModel.model_fields)


def unknown_keys(scenario_dir: Path) -> list[Finding]:
    """The keys of scenario.json and criteria.json (top level and checklist items) that the
    run ignores, as warnings with the closest known key. Keys match without regard to case,
    as for Go's decoder (``"Sandbox"`` is known). A key that misspells ``sandbox`` (with no
    ``sandbox`` beside it) is an error, as in a run. A file that is missing or not JSON gives
    none (other rules report it); checks.json's unknown keys are errors of its own rule."""
    findings = []
    scenario = _Scenario(scenario_dir, None)
    if scenario.options is not None:
        file = scenario.file(OPTIONS_FILE)
        findings += [
            _untrusted_kind(finding, scenario.options)
            for finding in _unknown(scenario.options, _OPTION_KEYS, file, "")
        ]
    if scenario.criteria is not None:
        file = scenario.file(CRITERIA_FILE)
        findings += _unknown(scenario.criteria, _CRITERIA_KEYS, file, "")
        for index, item in enumerate(scenario.checklist):
            findings += _unknown(item, _CRITERION_KEYS, file, f"{_criterion_field(index, item)}: ")
    return findings


def _untrusted_kind(finding: Finding, options: _Node) -> Finding:
    """The unknown key of scenario.json that misspells ``sandbox`` as the error it is in a
    run (see :data:`~pytest_openkata.core.scenario.KIND_UNTRUSTED`)."""
    present = {member.key: True for member in options.members or () if not member.node.is_null}
    key = misspelt_sandbox_key(go_keys(present, _OPTION_KEYS))
    if key is None or finding.message != f'unknown key "{key}"; did you mean "sandbox"?':
        return finding
    message = f"{finding.message} {KIND_UNTRUSTED}"
    return Finding(finding.rule, "error", finding.file, finding.line, message)


def _unknown(node: _Node, known: tuple[str, ...], file: str, where: str) -> list[Finding]:
    lowered = {k.lower() for k in known}
    findings = []
    for member in node.members or ():
        if member.key.lower() in lowered:
            continue
        close = difflib.get_close_matches(member.key.lower(), known, n=1)
        if close:
            hint = f'; did you mean "{close[0]}"?'
        else:
            hint = f" (the run ignores it; the known keys are {', '.join(known)})"
        message = f'{where}unknown key "{member.key}"{hint}'
        findings.append(Finding("unknown-keys", "warning", file, member.line, message))
    return findings


# --- skill rules ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _FrontMatter:
    """SKILL.md's YAML front matter: its mapping and the lines of its top-level keys, or the
    problem (with its line) that keeps it from being read."""

    data: dict[str, Any] | None
    lines: Mapping[str, int]
    problem: str | None = None
    problem_line: int | None = None


def _front_matter(path: Path) -> _FrontMatter:
    text = _read_text(path)
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


def _skill_md_rule(skill_dir: Path) -> list[Finding]:
    """SKILL.md is there, with front matter whose ``name`` is the folder's name and whose
    ``description`` is not empty."""
    if is_tile_dir(skill_dir):
        return _tile_json_rule(skill_dir)
    if not (skill_dir / SKILL_FILE).is_file():
        message = "missing: every skill needs a SKILL.md, the instructions the agent is given"
        return [Finding("skill-md", "error", SKILL_FILE, None, message)]
    if not _in_skill(skill_dir / SKILL_FILE, skill_dir):
        return [Finding("skill-md", "error", SKILL_FILE, None, LEADS_OUT)]
    front = _front_matter(skill_dir / SKILL_FILE)
    if front.data is None:
        return [Finding("skill-md", "error", SKILL_FILE, front.problem_line, str(front.problem))]
    findings = []
    name = front.data.get("name")
    if not isinstance(name, str) or not name.strip():
        message = f"the front matter has no name: add `name: {skill_dir.name}`"
        if name is not None and not isinstance(name, str):
            message = (
                f"the front matter's name must be text (got {name!r}): `name: {skill_dir.name}`"
            )
        findings.append(
            Finding("skill-md", "error", SKILL_FILE, front.lines.get("name", 1), message)
        )
    elif name.strip() != skill_dir.name:
        message = (
            f"the front matter's name {name.strip()!r} differs from the folder's name "
            f"{skill_dir.name!r}: make them the same"
        )
        findings.append(Finding("skill-md", "error", SKILL_FILE, front.lines.get("name"), message))
    description = front.data.get("description")
    if not isinstance(description, str) or not description.strip():
        message = (
            "the front matter has no description: add `description:` saying what the skill "
            "does and when to use it (agents choose skills by it)"
        )
        line = front.lines.get("description", 1)
        findings.append(Finding("skill-md", "error", SKILL_FILE, line, message))
    return findings


_VERSION_HEADING = re.compile(r"## \[([^\]]*)\]")
_WHY_VERSION = (
    "without one, reports carry an empty skill_version and the catalogue never counts them"
)


def _tile_json_rule(tile_dir: Path) -> list[Finding]:
    """A tile's ``tile.json`` loads as a run loads it: every listed path a file inside the
    tile (each scenario of the tile errors otherwise)."""
    try:
        load_tile(tile_dir)
    except ScenarioLoadError as exc:
        where = f"{exc.field}: " if exc.field else ""
        return [Finding("skill-md", "error", TILE_FILE, None, f"{where}{exc.message}")]
    return []


def _changelog_rule(skill_dir: Path) -> list[Finding]:
    """CHANGELOG.md has a released version heading, by the reference's rule (the first
    ``## [x]`` that is not ``## [Unreleased]``, read by ``read_skill_version``); a tile's
    version is tile.json's ``version``."""
    if is_tile_dir(skill_dir):
        if read_skill_version(skill_dir) or _tile_json_rule(skill_dir):
            return []
        message = f'tile.json has no "version": {_WHY_VERSION}'
        return [Finding("changelog", "warning", TILE_FILE, None, message)]
    path = skill_dir / CHANGELOG_FILE
    if read_skill_version(skill_dir):
        return []
    if not path.is_file():
        message = (
            "missing: add a CHANGELOG.md with a released version heading such as "
            f"`## [1.0.0] - 2026-01-01`; {_WHY_VERSION}"
        )
        return [Finding("changelog", "error", CHANGELOG_FILE, None, message)]
    text = _read_text(path) or ""
    empty = next(
        (
            number
            for number, line in enumerate(text.split("\n"), start=1)
            if (match := _VERSION_HEADING.match(line)) and match.group(1) != "Unreleased"
        ),
        None,
    )
    if empty is not None:
        message = (
            f"the version heading `## []` is empty: put the released version in it; {_WHY_VERSION}"
        )
        return [Finding("changelog", "error", CHANGELOG_FILE, empty, message)]
    message = (
        "no released version heading (a `## [x]` line other than `## [Unreleased]`, e.g. "
        f"`## [1.0.0] - 2026-01-01`): add one when the skill is released; {_WHY_VERSION}"
    )
    return [Finding("changelog", "error", CHANGELOG_FILE, None, message)]


def _scenarios_rule(skill_dir: Path, scenario_names: str = SCENARIO_NAMES) -> list[Finding]:
    """The skill has scenarios (those the ``scenario_names`` setting takes): without any,
    nothing evaluates it."""
    if discover_scenarios(skill_dir / "evals", scenario_names):
        return []
    others = unselected_scenarios(skill_dir / "evals", scenario_names)
    if others:
        names = ", ".join(entry.name for entry in others)
        message = (
            f"no evals/scenario-* folder, and a run leaves out {names} unless the "
            "scenario_names setting (eval_scenario_names) matches them, e.g. *"
        )
    else:
        message = (
            "no evals/scenario-* folder: nothing evaluates this skill; add one with a task.md "
            "and a criteria.json"
        )
    return [Finding("scenarios", "warning", "evals", None, message)]


# A link's text may hold one level of brackets (an image: ``[![alt](a.png)](doc.md)``) and
# may wrap onto the next lines.
_LINK_TEXT = r"\[(?:[^\[\]\\]|\\.|\[(?:[^\[\]\\]|\\.)*\])*\]"
_LINK_DESTINATION = r"\(\s*(?P<dest><[^>]*>|[^\s()]+)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)"
_INLINE_LINK = re.compile(f"(?P<text>{_LINK_TEXT}){_LINK_DESTINATION}")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
_LINK_DEFINITION = re.compile(r"^ {0,3}\[(?!\^)(?:[^\]\\]|\\.)+\]:\s*(?P<dest><[^>]*>|\S+)")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _links(text: str) -> Iterator[tuple[int, str]]:
    """The destinations of a Markdown text's links (inline ones, images included, and the
    definitions of reference-style ones, not footnotes), each with its line; not in code or
    in HTML comments."""
    lines = []
    for _number, line, fenced in _markdown_lines(text):
        kept = "" if fenced else line
        for start, end, _content in reversed(_code_spans(kept)):
            kept = kept[:start] + " " * (end - start) + kept[end:]
        lines.append(kept)
    prose = _HTML_COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), "\n".join(lines))
    starts = [0]
    for line in prose.split("\n")[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    found: list[tuple[int, int, str]] = []
    for number, line in enumerate(prose.split("\n"), start=1):
        definition = _LINK_DEFINITION.match(line)
        if definition is not None:
            found.append((starts[number - 1], number, definition.group("dest").strip("<>")))
    for match in _inline_links(prose):
        number = bisect.bisect_right(starts, match.start("dest"))
        found.append((match.start("dest"), number, match.group("dest").strip("<>")))
    for _position, number, destination in sorted(found):
        yield number, destination


def _inline_links(text: str, offset: int = 0) -> Iterator[re.Match[str]]:
    """The inline links of ``text`` and those inside their texts (an image in a link)."""
    for match in _INLINE_LINK.finditer(text, offset):
        yield match
        yield from _inline_links(text[: match.end("text") - 1], match.start("text") + 1)


def _link_path(destination: str) -> str | None:
    """The path inside the skill folder (posix, ``""`` for the folder) that a link
    destination leads to, or None for a URL, ``mailto:``, an anchor, an absolute path or a
    path leading out of the skill. Its ``#fragment`` and ``?query`` are left out."""
    if not destination or destination.startswith(("#", "/", "\\")):
        return None
    if _SCHEME.match(destination):
        return None
    path = unquote(re.split(r"[#?]", destination, maxsplit=1)[0])
    parts: list[str] = []
    for part in path.replace("\\", "/").split("/"):
        if part == "..":
            if not parts:
                return None
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)


def _in_prompt(rel: str) -> bool:
    """Whether the prompt holds the skill's file or folder ``rel``: SKILL.md, and what lies
    under references/, scripts/ or assets/ (but the files the prompt leaves out)."""
    top, _, rest = rel.partition("/")
    if rel == SKILL_FILE:
        return True
    return top in SKILL_SOURCES and rest not in EXCLUDED.get(top, frozenset())


def unreached_skill_files(skill_dir: Path) -> list[Finding]:
    """Files and folders of the skill that SKILL.md links to and the prompt never holds, as
    warnings at the line of the first link to each: the agent is given SKILL.md and the files
    under references/, scripts/ and assets/ only, so it cannot follow such a link. Links to
    files that are not there, or that lead out of the skill, are left out."""
    if is_tile_dir(skill_dir):
        return _unreached_tile_files(skill_dir)
    text = _read_text(skill_dir / SKILL_FILE)
    if text is None:
        return []
    root = skill_dir.resolve()
    findings = []
    seen: set[str] = set()
    for number, destination in _links(text):
        rel = _link_path(destination)
        if not rel or rel in seen or _in_prompt(rel):
            continue
        seen.add(rel)
        path = skill_dir / rel
        if not path.exists() or not is_inside(path, root):
            continue
        shown = rel + ("/" if path.is_dir() else "")
        if rel.partition("/")[0] in SKILL_SOURCES:
            fix = "the prompt leaves it out: rename it (and update the link)"
        else:
            fix = "move it under references/ (and update the link)"
        message = f"SKILL.md links to {shown}, which never reaches the agent's prompt: {fix}"
        findings.append(Finding("unreached-files", "warning", SKILL_FILE, number, message))
    return findings


def _unreached_tile_files(tile_dir: Path) -> list[Finding]:
    """In a tile, the files each listed SKILL.md links to that are not in the tile's context
    (:func:`~pytest_openkata.core.tile.tile_files`), at the line of the first link to each."""
    try:
        tile = load_tile(tile_dir)
    except ScenarioLoadError:
        return []  # the skill-md rule reports it
    reached = {rel for rel, _path in tile_files(tile)}
    findings = []
    for _name, skill_md in tile.skills:
        shown = skill_md.relative_to(tile_dir).as_posix()
        folder = skill_md.parent.relative_to(tile_dir).as_posix()
        prefix = "" if folder == "." else f"{folder}/"
        seen: set[str] = set()
        for number, destination in _links(_read_text(skill_md) or ""):
            if destination.startswith(("#", "/", "\\")) or _SCHEME.match(destination):
                continue
            rel = _link_path(prefix + destination)
            if not rel or rel in seen:
                continue
            seen.add(rel)
            path = tile_dir / rel
            if not path.exists() or not is_inside(path, tile_dir.resolve()):
                continue
            inside = path.is_dir() and any(r.startswith(f"{rel}/") for r in reached)
            if rel in reached or inside:
                continue
            message = (
                f"{shown} links to {rel}{'/' if path.is_dir() else ''}, which never reaches "
                "the agent's prompt: move it under the skill's references/, or name it in "
                'tile.json\'s "docs" or "steering" (and update the link)'
            )
            findings.append(Finding("unreached-files", "warning", shown, number, message))
    return findings


_SKILL_RULES: dict[str, Callable[[Path], list[Finding]]] = {
    "skill-md": _skill_md_rule,
    "placeholders": skill_placeholders,
    "changelog": _changelog_rule,
    "scenarios": _scenarios_rule,
    "unreached-files": unreached_skill_files,
}
SKILL_RULES: tuple[str, ...] = tuple(_SKILL_RULES)
"""The skill rules in the order they run: SKILL.md and its front matter; the scaffold's
placeholders in SKILL.md; CHANGELOG.md's
released version; at least one scenario; files SKILL.md links to that never reach the
prompt."""


def lint_skill(skill_dir: Path, scenario_names: str = SCENARIO_NAMES) -> dict[str, list[Finding]]:
    """Every skill rule's findings for a skill folder (not its scenarios'); ``scenario_names``
    is the run's setting, which says which of its folders are scenarios."""
    findings = {
        name: _scenarios_rule(skill_dir, scenario_names) if name == "scenarios" else rule(skill_dir)
        for name, rule in _SKILL_RULES.items()
    }
    for name, rule in _installed_rules("skill"):
        found = _installed_findings(name, rule, skill_dir, SKILL_FILE, SKILL_RULES)
        findings[name] = findings.get(name, []) + found  # a built-in rule's findings stay
    return findings


# --- rules of other distributions ------------------------------------------------------------

Scope = Literal["scenario", "skill"]


class LintRule(Protocol):
    """A lint rule of a distribution of its own: a class made without arguments, registered
    under the entry-point group ``pytest_openkata.lint_rules``; the entry point's name is the
    rule's. ``scope`` says what :meth:`lint` is given: ``"scenario"``, a scenario folder
    (``<skill>/evals/<scenario>``), or ``"skill"``, a skill folder. Each :class:`Finding`
    names its file relative to the skill folder (posix); its ``rule`` becomes the registered
    name. Its findings run after the built-in rules', rules in the order of their names."""

    scope: Scope

    def lint(self, folder: Path) -> Iterable[Finding]: ...


def _installed_rules(scope: Scope) -> list[tuple[str, LintRule | str]]:
    """The installed rules of ``scope`` by name, sorted. A rule that cannot be loaded, or
    says no known scope, is the text of its error instead, listed with the skill's rules."""
    rules: list[tuple[str, LintRule | str]] = []
    for name in registry.LINT_RULES.names():
        try:
            rule = registry.LINT_RULES.load(name)()
            rule_scope = rule.scope
        except Exception as exc:  # another distribution's code: its failure is a finding
            if scope == "skill":
                rules.append((name, f"cannot be loaded: {type(exc).__name__}: {exc}"))
            continue
        if rule_scope == scope:
            rules.append((name, rule))
        elif rule_scope not in ("scenario", "skill") and scope == "skill":
            rules.append((name, f"has the scope {rule_scope!r}; it must be scenario or skill"))
    return rules


def _installed_findings(
    name: str, rule: LintRule | str, folder: Path, where: str, built_in: tuple[str, ...]
) -> list[Finding]:
    """What an installed rule found in ``folder``; its own failure, or a name taken by a
    built-in rule, as an error finding at ``where`` that names it."""

    def failed(why: str) -> list[Finding]:
        return [Finding(name, "error", where, None, f"the lint rule {name!r} {why}")]

    if name in built_in:
        return failed("has the name of a built-in rule: register it under another name")
    if isinstance(rule, str):
        return failed(rule)
    try:
        found = list(rule.lint(folder))
    except Exception as exc:  # another distribution's code: its failure is a finding
        return failed(f"failed: {type(exc).__name__}: {exc}")
    if not all(isinstance(finding, Finding) for finding in found):
        return failed("returned something other than Finding objects")
    return [replace(finding, rule=name) for finding in found]
