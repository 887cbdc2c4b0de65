"""Lint rules for skills and their scenarios: what is wrong on disk, found without running.

Each rule is one function that returns its :class:`Finding` s, in the module of its family:
``files`` (what a scenario needs, and files that never reach the agent), ``json_files``
(``criteria.json``, ``scenario.json``, ``checks.json``), ``keys`` (unknown keys),
``criteria`` (descriptions, weights, vague and mechanical criteria), ``task`` (the task's
own rules), ``prompt`` (the prompt's size), ``placeholders`` (the scaffold's), ``skill``
(SKILL.md, CHANGELOG.md, the skill's scenarios and links) and ``triggers`` (the trigger
queries), over what they share: a scenario's files read once (``context``), JSON read with
lines (``jsonlines``), Markdown as the rules read it (``markdown``) and the findings
(``findings``). :func:`lint_scenario` and :func:`lint_skill` run every rule (in the order of
:data:`SCENARIO_RULES` and :data:`SKILL_RULES`) that applies to the format
(``applicability``: each rule declares the formats and the level it applies to) and return
each rule's findings, an empty list when it passed. :func:`lint_format_scenario` does the
same for a published format's scenario, read with its format (``published``). Errors are
what breaks a run or its reports; warnings are what is likely a mistake.

The JSON rules validate with the scenario loader's own models and words (the public
functions of :mod:`pytest_openkata.core.scenario` and
:mod:`pytest_openkata.core.jsonfiles`), so that lint never accepts a file the run rejects
and names each problem as the run would; where the loader stops at the first problem, the
rules go on and report every one. Nothing here raises for bad input.

A team adds a rule of its own as a third party adds a grader: a class implementing
:class:`LintRule` in a distribution of its own, registered under the entry-point group
``pytest_openkata.lint_rules``; its findings follow the built-in rules' under its name.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Literal, Protocol

from pytest_openkata.core.formats import EvalFormat as _EvalFormat
from pytest_openkata.core.formats import ScenarioSource as _ScenarioSource
from pytest_openkata.core.lint import (
    criteria,
    files,
    json_files,
    keys,
    placeholders,
    prompt,
    skill,
    task,
    triggers,
)
from pytest_openkata.core.lint.applicability import BUILT_IN_RULES, BuiltInRule, built_in_rule
from pytest_openkata.core.lint.applicability import folder_format as _folder_format
from pytest_openkata.core.lint.context import ScenarioFiles as _ScenarioFiles
from pytest_openkata.core.lint.criteria import STOP_WORDS, VAGUE_WORDS
from pytest_openkata.core.lint.files import unreached_scenario_files
from pytest_openkata.core.lint.findings import SKILL_FILE as _SKILL_FILE
from pytest_openkata.core.lint.findings import EvalLintWarning, Finding, Severity
from pytest_openkata.core.lint.keys import unknown_keys
from pytest_openkata.core.lint.placeholders import scenario_placeholders, skill_placeholders
from pytest_openkata.core.lint.published import FORMAT_RULE
from pytest_openkata.core.lint.published import written_out as _written_out
from pytest_openkata.core.lint.skill import unreached_skill_files
from pytest_openkata.core.prompt_size import DEFAULT_CONTEXT_BUDGET as _DEFAULT_CONTEXT_BUDGET
from pytest_openkata.core.scenario import SCENARIO_NAMES as _SCENARIO_NAMES
from pytest_openkata.infra import registry

__all__ = [
    "BUILT_IN_RULES",
    "FORMAT_RULE",
    "SCENARIO_RULES",
    "SKILL_RULES",
    "STOP_WORDS",
    "VAGUE_WORDS",
    "BuiltInRule",
    "EvalLintWarning",
    "Finding",
    "LintRule",
    "Severity",
    "built_in_rule",
    "lint_format_scenario",
    "lint_scenario",
    "lint_skill",
    "scenario_placeholders",
    "skill_placeholders",
    "unknown_keys",
    "unreached_scenario_files",
    "unreached_skill_files",
]

_SCENARIO_RULES: dict[str, Callable[[_ScenarioFiles], list[Finding]]] = {
    "files": files.files_rule,
    "criteria-json": json_files.criteria_rule,
    "scenario-json": json_files.options_rule,
    "checks-json": json_files.checks_rule,
    "unknown-keys": keys.unknown_keys_rule,
    "empty-descriptions": criteria.descriptions_rule,
    "placeholders": placeholders.placeholders_rule,
    "weights": criteria.weights_rule,
    "task-names-skill": task.task_names_skill_rule,
    "referenced-inputs": task.referenced_inputs_rule,
    "vague-criteria": criteria.vague_criteria_rule,
    "scenario-description": json_files.scenario_description_rule,
    "unreached-files": files.unreached_scenario_rule,
    "mechanical-criteria": criteria.mechanical_criteria_rule,
    "task-states-answer": task.task_states_answer_rule,
    "prompt-size": prompt.prompt_size_rule,
}


SCENARIO_RULES: tuple[str, ...] = tuple(_SCENARIO_RULES)
"""The scenario rules in the order they run: required files; criteria.json, scenario.json
and checks.json as the loader reads them; unknown keys; empty criterion descriptions; the
scaffold's placeholders; weights
summing to 100; the task naming the skill; code-span paths missing from inputs/; vague
criteria; scenario.json's description; files beside task.md that never reach the agent;
criteria a check would grade exactly; the task stating what a criterion expects; the prompt
within the context budget. Each runs only on the formats it applies to (see
:data:`BUILT_IN_RULES`)."""


def _applying(fmt: str) -> dict[str, Callable[[_ScenarioFiles], list[Finding]]]:
    return {
        name: rule
        for name, rule in _SCENARIO_RULES.items()
        if built_in_rule(name, "scenario").applies_to(fmt)
    }


def lint_scenario(
    scenario_dir: Path,
    *,
    shown_root: Path | None = None,
    settings: Mapping[str, object] | None = None,
    context_budget: int = _DEFAULT_CONTEXT_BUDGET,
) -> dict[str, list[Finding]]:
    """Every scenario rule's findings for ``<skill>/evals/scenario-*`` (the rules that apply
    to its format: a tile's scenario is not held to weights summing to 100). ``shown_root``
    is what the weights message names the folder relative to (the current directory by
    default); ``settings`` are the values of the settings providers declare, for installed
    rules; ``context_budget`` is the run's setting (estimated tokens a prompt may hold; 0:
    any)."""
    scenario = _ScenarioFiles(scenario_dir, shown_root, context_budget)
    rules = _applying(_folder_format(scenario_dir))
    findings = {name: rule(scenario) for name, rule in rules.items()}
    where = scenario.file("")
    for name, rule in _installed_rules("scenario"):
        found = _installed_findings(
            name, rule, scenario_dir, where, SCENARIO_RULES, settings=settings or {}
        )
        findings[name] = findings.get(name, []) + found  # a built-in rule's findings stay
    return findings


def lint_format_scenario(
    fmt: _EvalFormat,
    source: _ScenarioSource,
    skill_dir: Path,
    *,
    context_budget: int = _DEFAULT_CONTEXT_BUDGET,
) -> dict[str, list[Finding]]:
    """The findings for one scenario of a published format's file (``evals/evals.json``,
    ``eval.yaml``, a Harbor ``task.toml``) of the skill (or unit) folder ``skill_dir``: first
    ``format``, what its format cannot read (an error naming the file and the key; then no
    other rule runs), then the scenario rules that apply to the format, each finding at the
    format's file and saying where in it (``evals[1]: ...``)."""
    with _written_out(fmt, source, skill_dir, context_budget) as scenario:
        if isinstance(scenario, Finding):
            return {FORMAT_RULE: [scenario]}
        where = f"{source.key}: " if source.key else ""
        findings: dict[str, list[Finding]] = {FORMAT_RULE: []}
        for name, rule in _applying(source.format).items():
            findings[name] = [
                replace(finding, line=None, message=where + finding.message)
                for finding in rule(scenario)
            ]
        return findings


_SKILL_RULES: dict[str, Callable[[Path], list[Finding]]] = {
    "skill-md": skill.skill_md_rule,
    "placeholders": skill_placeholders,
    "changelog": skill.changelog_rule,
    "scenarios": skill.scenarios_rule,
    "unreached-files": unreached_skill_files,
    "trigger-queries": triggers.trigger_queries_rule,
}


SKILL_RULES: tuple[str, ...] = tuple(_SKILL_RULES)
"""The skill rules in the order they run: SKILL.md and its front matter; the scaffold's
placeholders in SKILL.md; CHANGELOG.md's
released version; at least one scenario; files SKILL.md links to that never reach the
prompt; the trigger query files."""


def lint_skill(
    skill_dir: Path,
    scenario_names: str = _SCENARIO_NAMES,
    settings: Mapping[str, object] | None = None,
) -> dict[str, list[Finding]]:
    """Every skill rule's findings for a skill folder (not its scenarios'); ``scenario_names``
    is the run's setting, which says which of its folders are scenarios; ``settings`` as for
    :func:`lint_scenario`."""
    findings = {
        name: skill.scenarios_rule(skill_dir, scenario_names)
        if name == "scenarios"
        else rule(skill_dir)
        for name, rule in _SKILL_RULES.items()
    }
    for name, rule in _installed_rules("skill"):
        found = _installed_findings(
            name, rule, skill_dir, _SKILL_FILE, SKILL_RULES, settings=settings or {}
        )
        findings[name] = findings.get(name, []) + found  # a built-in rule's findings stay
    return findings


_Scope = Literal["scenario", "skill"]


class LintRule(Protocol):
    """A lint rule of a distribution of its own: a class made without arguments, registered
    under the entry-point group ``pytest_openkata.lint_rules``; the entry point's name is the
    rule's. ``scope`` says what :meth:`lint` is given: ``"scenario"``, a scenario folder
    (``<skill>/evals/<scenario>``), or ``"skill"``, a skill folder, with the run's values of
    the settings providers declare (a rule that declares ``settings`` of its own reads them
    with :meth:`~pytest_openkata.ProviderSetting.value_in`, as ``lint_rules.<name>``). Each
    :class:`Finding` names its file relative to the skill folder (posix); its ``rule``
    becomes the registered name. Its findings run after the built-in rules', rules in the
    order of their names."""

    scope: _Scope

    def lint(self, folder: Path, settings: Mapping[str, object]) -> Iterable[Finding]: ...


@functools.cache
def _loaded_rules() -> tuple[tuple[str, _Scope | None, LintRule | str], ...]:
    """Every installed rule by name, sorted, with its scope, made once per process (the
    entry points are read once too). A rule that cannot be loaded, or says no known scope,
    has no scope and the text of its error in its place."""
    loaded: list[tuple[str, _Scope | None, LintRule | str]] = []
    for name in registry.LINT_RULES.names():
        try:
            rule = registry.LINT_RULES.load(name)()
            scope = rule.scope
        except Exception as exc:  # another distribution's code: its failure is a finding
            loaded.append((name, None, f"cannot be loaded: {type(exc).__name__}: {exc}"))
            continue
        if scope in ("scenario", "skill"):
            loaded.append((name, scope, rule))
        else:
            loaded.append((name, None, f"has the scope {scope!r}; it must be scenario or skill"))
    return tuple(loaded)


def _installed_rules(scope: _Scope) -> list[tuple[str, LintRule | str]]:
    """The installed rules of ``scope``; those that are errors go with the skill's rules."""
    wanted = (scope, None) if scope == "skill" else (scope,)
    return [(name, rule) for name, of, rule in _loaded_rules() if of in wanted]


def _installed_findings(
    name: str,
    rule: LintRule | str,
    folder: Path,
    where: str,
    built_in: tuple[str, ...],
    *,
    settings: Mapping[str, object],
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
        found = list(rule.lint(folder, settings))
    except Exception as exc:  # another distribution's code: its failure is a finding
        return failed(f"failed: {type(exc).__name__}: {exc}")
    if not all(isinstance(finding, Finding) for finding in found):
        return failed("returned something other than Finding objects")
    return [replace(finding, rule=name) for finding in found]
