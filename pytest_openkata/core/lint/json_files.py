"""The rules of ``criteria.json``, ``scenario.json`` and ``checks.json``, as the run's loader
reads them."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pytest_openkata.core.checks import Check, leaves_workspace, matches
from pytest_openkata.core.jsonfiles import (
    ScenarioLoadError,
    go_keys,
    read_json,
)
from pytest_openkata.core.lint.applicability import TESSL_TILE, folder_format
from pytest_openkata.core.lint.context import (
    ScenarioFiles,
    loader_finding,
    located,
    model_findings,
    with_loader,
)
from pytest_openkata.core.lint.criteria import exact_value
from pytest_openkata.core.lint.findings import CRITERIA_FILE, OPTIONS_FILE, Finding
from pytest_openkata.core.lint.jsonlines import JsonNode, line_at, read_text_or_none
from pytest_openkata.core.scenario import (
    CHECKS_FILE,
    EMPTY_DESCRIPTION,
    CriteriaModel,
    CriterionModel,
    ScenarioModel,
    check_field,
    check_of,
    load_checks,
    load_criteria,
    load_scenario_options,
    read_capability,
    scenario_keys,
    workspace_setup,
)
from pytest_openkata.core.workspace import workspace_files


def criteria_rule(scenario: ScenarioFiles) -> list[Finding]:
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
        first = loader_finding("criteria-json", exc, scenario)
    else:
        return []
    try:
        raw = read_json(path)
    except ScenarioLoadError:
        return [located(first, _json_error_line(path))]
    data = go_keys(raw, CriteriaModel.model_fields)
    if isinstance(data, Mapping) and isinstance(data.get("checklist"), list):
        items = [go_keys(c, CriterionModel.model_fields) for c in data["checklist"]]
        data = {**data, "checklist": items}
    found = model_findings(
        "criteria-json", scenario, path, model=CriteriaModel, data=data, tree=scenario.criteria
    )
    found += _duplicate_criteria(scenario)
    return with_loader(first, found)


def _json_error_line(path: Path) -> int | None:
    text = read_text_or_none(path)
    if text is None:
        return None
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return exc.lineno
    except (ValueError, RecursionError):
        return None
    return None


def _duplicate_criteria(scenario: ScenarioFiles) -> list[Finding]:
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


def options_rule(scenario: ScenarioFiles) -> list[Finding]:
    """scenario.json as the loader reads it: every field of a wrong type or value."""
    path = scenario.path / OPTIONS_FILE
    if not path.exists():
        return []
    try:
        options = load_scenario_options(path)
        workspace_setup(path, scenario.skill_dir, options.sandbox)
    except ScenarioLoadError as exc:
        first = loader_finding("scenario-json", exc, scenario)
    else:
        return []
    try:
        data = scenario_keys(read_json(path))
    except ScenarioLoadError:
        return [located(first, _json_error_line(path))]
    found = model_findings(
        "scenario-json", scenario, path, model=ScenarioModel, data=data, tree=scenario.options
    )
    return with_loader(first, found)


def checks_rule(scenario: ScenarioFiles) -> list[Finding]:
    """checks.json as the loader reads it, every check on its own; names given twice, and a
    check named as a criterion."""
    path = scenario.path / CHECKS_FILE
    if not path.exists():
        return []
    first = None
    try:
        checks = list(load_checks(path, sandboxed=scenario.sandboxed))
    except ScenarioLoadError as exc:
        first = loader_finding("checks-json", exc, scenario)
        checks = []
    found: list[Finding] = []
    if first is not None:
        try:
            data = read_json(path)
        except ScenarioLoadError:
            return [located(first, _json_error_line(path))]
        if not isinstance(data, list):
            return [located(first, 1)]
        checks, found = _each_check(scenario, data)
    found += _clashes(scenario, checks)
    outside, names = _outside_workspace(scenario)
    found += outside
    found += _unmatched_unchanged(scenario, [c for c in checks if c.name not in names])
    return with_loader(first, found)


_PATH_FIELDS = ("path", "changed", "unchanged")


def _check_paths(item: JsonNode) -> Iterator[tuple[str, JsonNode]]:
    """A check's paths and globs by field (``path``, ``changed[0]``...), by exact key."""
    for key in _PATH_FIELDS:
        member = next((m for m in reversed(item.members or ()) if m.key == key), None)
        if member is None:
            continue
        if member.node.items is None:
            yield key, member.node
        else:
            yield from ((f"{key}[{i}]", glob) for i, glob in enumerate(member.node.items))


def _outside_workspace(scenario: ScenarioFiles) -> tuple[list[Finding], set[str]]:
    """Check paths and globs that lead out of ``/workspace`` (``../``, an absolute path
    elsewhere): a check sees only the workspace's files, so such a file check never finds
    its file and such a glob never matches. Also the names of those checks."""
    found: list[Finding] = []
    names: set[str] = set()
    for index, node in enumerate(scenario.check_items):
        name = exact_value(node, "name")
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


def _unmatched_unchanged(scenario: ScenarioFiles, checks: list[Check]) -> list[Finding]:
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


def _each_check(scenario: ScenarioFiles, data: list[Any]) -> tuple[list[Check], list[Finding]]:
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
                located(loader_finding("checks-json", exc, scenario), _check_line(exc, node))
            )
        else:
            checks.append(check)
            if check.reads_workspace and not scenario.sandboxed:
                found.append(_direct_workspace(scenario, index, item, check, node))
        if isinstance(name, str) and name in names:
            where = check_field(index, item, "name")
            line = None if node is None else line_at(node, ["name"])
            message = f"{where}: duplicate check name {name!r}"
            found.append(Finding("checks-json", "error", scenario.rel(path), line, message))
        if isinstance(name, str) and name:
            names.add(name)
    return checks, found


def _check_line(exc: ScenarioLoadError, node: JsonNode | None) -> int | None:
    """The line of the key a check's error names, else of the check."""
    if node is None:
        return None
    for member in node.members or ():
        if exc.field is not None and exc.field.endswith(f".{member.key}"):
            return member.line
    return node.line


def _direct_workspace(
    scenario: ScenarioFiles, index: int, item: Any, check: Check, node: JsonNode | None
) -> Finding:
    is_schema = check.type == "json_schema"
    what = "json_schema check with a path" if is_schema else f"{check.type} check"
    key = "path" if is_schema else "type"
    message = (
        f"{check_field(index, item, key)}: a {what} reads the workspace, which only a "
        'sandboxed scenario has (scenario.json: "sandbox": true)'
    )
    line = None if node is None else line_at(node, [key])
    return Finding("checks-json", "error", scenario.file(CHECKS_FILE), line, message)


def _clashes(scenario: ScenarioFiles, checks: list[Check]) -> list[Finding]:
    """Checks named as a criterion: their scores would be one verdict."""
    criteria = {item.scalar("name") for item in scenario.checklist}
    lines = {item.scalar("name"): line_at(item, ["name"]) for item in scenario.check_items}
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


def scenario_description_rule(scenario: ScenarioFiles) -> list[Finding]:
    """scenario.json has a description: the catalogue shows it. A tile's scenario may have no
    scenario.json at all (Tessl's format leaves it out more often than not): only one that is
    there is asked for a description."""
    path = scenario.path / OPTIONS_FILE
    if not path.exists() and folder_format(scenario.path) == TESSL_TILE:
        return []
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
