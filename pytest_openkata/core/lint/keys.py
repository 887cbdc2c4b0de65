"""Keys of ``scenario.json`` and ``criteria.json`` that a run ignores (``unknown-keys``)."""

from __future__ import annotations

import difflib
from pathlib import Path

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
    misspelt_sandbox_key,
)


def unknown_keys_rule(scenario: ScenarioFiles) -> list[Finding]:
    """Keys the run ignores (see :func:`unknown_keys`)."""
    return unknown_keys(scenario.path)


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
    scenario = ScenarioFiles(scenario_dir, None)
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
            findings += _unknown(item, _CRITERION_KEYS, file, f"{criterion_field(index, item)}: ")
    return findings


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
