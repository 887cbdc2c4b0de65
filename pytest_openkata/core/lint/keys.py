"""Keys of ``scenario.json`` and ``criteria.json`` that a run ignores (``unknown-keys``)."""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

from pytest_openkata.core.jsonfiles import (
    go_keys,
)
from pytest_openkata.core.lint.context import ScenarioFiles
from pytest_openkata.core.lint.criteria import criterion_field
from pytest_openkata.core.lint.findings import CRITERIA_FILE, OPTIONS_FILE, Finding
from pytest_openkata.core.lint.jsonlines import JsonNode
from pytest_openkata.core.scenario import (
    KIND_UNTRUSTED,
    CriteriaModel,
    CriterionModel,
    ScenarioModel,
    SimulatedUserModel,
    misspelt_sandbox_key,
)
from pytest_openkata.core.scenario_setup import SETUP_KEYS

# The loader's keys, and Tessl's fixtures and setup (read beside them, for the sandbox).
_OPTION_KEYS = (*ScenarioModel.model_fields, *SETUP_KEYS)

_SIMULATED_USER_KEYS = tuple(SimulatedUserModel.model_fields)


_CRITERIA_KEYS = tuple(CriteriaModel.model_fields)


_CRITERION_KEYS = tuple(CriterionModel.model_fields)


def unknown_keys_rule(scenario: ScenarioFiles) -> list[Finding]:
    """The keys of scenario.json and criteria.json (top level and checklist items) that the
    run ignores, as warnings with the closest known key. Keys match without regard to case,
    as for Go's decoder (``"Sandbox"`` is known). A key that misspells ``sandbox`` (with no
    ``sandbox`` beside it) is an error, as in a run. A file that is missing or not JSON gives
    none (other rules report it); checks.json's unknown keys are errors of its own rule.

    For a published format's scenario, the keys its reader passed over (as the format's own
    tools pass over them) are the warnings, naming the format's file and the key."""
    if scenario.source is not None:
        return [
            Finding(
                "unknown-keys",
                "warning",
                scenario.source.file,
                None,
                f"{field} is not a key of the format: the run ignores it, as the format's own "
                "tools do",
            )
            for field in scenario.source.ignored_keys
        ]
    if _only_known_keys(scenario):
        return []  # the usual scenario, said at every collection: no need to find lines
    findings = []
    if scenario.options is not None:
        file = scenario.file(OPTIONS_FILE)
        findings += [
            _untrusted_kind(finding, scenario.options)
            for finding in _unknown(scenario.options, _OPTION_KEYS, file, "")
        ]
        user = scenario.options.member("simulated_user")
        if user is not None:
            findings += _unknown(user.node, _SIMULATED_USER_KEYS, file, "simulated_user: ")
    if scenario.criteria is not None:
        file = scenario.file(CRITERIA_FILE)
        findings += _unknown(scenario.criteria, _CRITERIA_KEYS, file, "")
        for index, item in enumerate(scenario.checklist):
            findings += _unknown(item, _CRITERION_KEYS, file, f"{criterion_field(index, item)}: ")
    return findings


def unknown_keys(scenario_dir: Path) -> list[Finding]:
    """Keys the run ignores (see :func:`unknown_keys_rule`)."""
    return unknown_keys_rule(ScenarioFiles(scenario_dir, None))


def _only_known_keys(scenario: ScenarioFiles) -> bool:
    """Whether scenario.json and criteria.json, read as plain JSON, hold known keys only (a
    file that is missing or not JSON holds none). Where this cannot tell at a glance (a key
    the run ignores, the checklist named twice) the files are read with their lines."""
    options = _plain_json(scenario.text(OPTIONS_FILE))
    criteria = _plain_json(scenario.text(CRITERIA_FILE))
    if not (_known(options, _OPTION_KEYS) and _known(criteria, _CRITERIA_KEYS)):
        return False
    if isinstance(options, dict) and not all(
        _known(value, _SIMULATED_USER_KEYS)
        for key, value in options.items()
        if key.lower() == "simulated_user"
    ):
        return False
    if not isinstance(criteria, dict):
        return True
    named = [key for key in criteria if key.lower() == "checklist"]
    if len(named) > 1:
        return False  # which one the run takes (the last not null) needs the lines' reading
    checklist = criteria[named[0]] if named else None
    items = checklist if isinstance(checklist, list) else ()
    return all(_known(item, _CRITERION_KEYS) for item in items)


def _plain_json(text: str | None) -> Any:
    try:
        return None if text is None else json.loads(text)
    except (ValueError, RecursionError):
        return None


_LOWERED: dict[tuple[str, ...], frozenset[str]] = {}


def _known(data: Any, known: tuple[str, ...]) -> bool:
    """Whether ``data`` is no object, or an object whose keys are all ``known``."""
    if not isinstance(data, dict):
        return True
    lowered = _LOWERED.get(known)
    if lowered is None:
        lowered = _LOWERED[known] = frozenset(key.lower() for key in known)
    return all(key.lower() in lowered for key in data)


def _untrusted_kind(finding: Finding, options: JsonNode) -> Finding:
    """The unknown key of scenario.json that misspells ``sandbox`` as the error it is in a
    run (see :data:`~pytest_openkata.core.scenario.KIND_UNTRUSTED`)."""
    present = {member.key: True for member in options.members or () if not member.node.is_null}
    key = misspelt_sandbox_key(go_keys(present, _OPTION_KEYS))
    if key is None or finding.message != f'unknown key "{key}"; did you mean "sandbox"?':
        return finding
    message = f"{finding.message} {KIND_UNTRUSTED}"
    return Finding(finding.rule, "error", finding.file, finding.line, message)


def _unknown(node: JsonNode, known: tuple[str, ...], file: str, where: str) -> list[Finding]:
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
