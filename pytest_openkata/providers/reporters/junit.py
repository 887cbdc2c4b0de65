"""Per-criterion entries in pytest's ``--junitxml`` file.

pytest writes one ``<testcase>`` per scenario and does not list subtests. After it has
written the file (on the controller only, so ``-n`` gives the same file), each scenario's
criteria are added as testcases of their own, with their points and the judge's reason, and
the scenario testcase gets its score (and error) as properties, and each arm's skill
activation where its agent's events could tell it (``openkata_skill_activation``,
``openkata_baseline_skill_activation``: trials that loaded the skill / trials whose
activation is known / trials). A scenario's testcase is
found by its ``openkata_scenario`` property, the scenario folder relative to the rootdir,
which the pytest adapter records on the item.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_openkata.contracts.junit import SCENARIO_PROPERTY, scenario_key
from pytest_openkata.contracts.results import ScenarioResult
from pytest_openkata.core.activation import ActivationRate, scenario_activation
from pytest_openkata.core.excerpts import scenario_sections
from pytest_openkata.core.reporting import ReportOutcome, Run
from pytest_openkata.core.summary import SkillSummary, skill_labels
from pytest_openkata.infra.tempfiles import new_temp_file, remove_stale

_COUNTED = {"failures": "failure", "errors": "error", "skipped": "skipped"}


_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_text(text: str) -> str:
    """Text XML 1.0 can hold: a character it cannot is shown as ``#xHH``, as pytest does."""
    return _NOT_XML.sub(lambda match: f"#x{ord(match.group()):02X}", text)


def _property(parent: ET.Element, name: str, value: str) -> None:
    ET.SubElement(parent, "property", name=name, value=_xml_text(value))


def _criterion_cases(scenario_case: ET.Element, result: ScenarioResult) -> list[ET.Element]:
    classname = f"{scenario_case.get('classname', '')}.{scenario_case.get('name', '')}"
    cases = []
    for criterion in result.criteria or ():
        case = ET.Element(
            "testcase",
            classname=classname,
            name=_xml_text(criterion.name),
            file=scenario_case.get("file", ""),
            time="0",
        )
        properties = ET.SubElement(case, "properties")
        _property(properties, "points", str(criterion.score))
        _property(properties, "max_points", str(criterion.max_score))
        _property(properties, "reason", criterion.reason)
        _property(properties, "kind", criterion.kind)
        if criterion.category:
            _property(properties, "category", criterion.category)
        if not criterion.passed:
            failure = ET.SubElement(
                case,
                "failure",
                message=_xml_text(
                    f"criterion {criterion.name!r} not met "
                    f"({criterion.score}/{criterion.max_score})"
                ),
                type="CriterionNotMet",
            )
            failure.text = _xml_text(criterion.reason)
        cases.append(case)
    return cases


def _add_system_out(case: ET.Element, result: ScenarioResult) -> None:
    """What the judge judged, for a scenario that failed or errored, in its testcase's
    ``system-out`` (after any pytest wrote), as pytest's report sections show it."""
    sections = scenario_sections(result)
    if not sections:
        return
    text = _xml_text("".join(f"----- {title} -----\n{body.rstrip()}\n" for title, body in sections))
    out = case.find("system-out")
    if out is None:
        out = ET.SubElement(case, "system-out")
        out.text = text
    else:
        out.text = (out.text or "") + "\n" + text


def _add_activation(properties: ET.Element, name: str, rate: ActivationRate | None) -> None:
    """An arm's skill activation as ``loaded/known/trials`` (``2/3/3``), where any trial's
    could be told."""
    if rate is not None:
        _property(properties, name, f"{rate.loaded}/{rate.known}/{rate.trials}")


def _augment_suite(suite: ET.Element, results: Mapping[str, ScenarioResult]) -> None:
    for case in list(suite.findall("testcase")):
        properties = case.find("properties")
        if properties is None:
            continue
        key = next(
            (
                p.get("value")
                for p in properties.iter("property")
                if p.get("name") == SCENARIO_PROPERTY
            ),
            None,
        )
        result = None if key is None else results.get(key)
        if result is None:
            continue
        _property(properties, "openkata_score", f"{result.score}/{result.max_score}")
        if result.error is not None:
            _property(properties, "openkata_error", result.error)
        _add_activation(properties, "openkata_skill_activation", scenario_activation(result))
        if result.baseline is not None:
            _property(properties, "openkata_baseline_arm", result.baseline.arm)
            _property(properties, "openkata_baseline_percentage", f"{result.baseline.percentage:g}")
            _add_activation(
                properties,
                "openkata_baseline_skill_activation",
                scenario_activation(result.baseline),
            )
        _add_system_out(case, result)
        position = list(suite).index(case) + 1
        for offset, criterion_case in enumerate(_criterion_cases(case, result)):
            suite.insert(position + offset, criterion_case)
    cases = suite.findall("testcase")
    suite.set("tests", str(len(cases)))
    for attribute, child in _COUNTED.items():
        suite.set(attribute, str(sum(1 for c in cases if c.find(child) is not None)))


def uplift_properties(summary: SkillSummary, label: str | None = None) -> list[tuple[str, str]]:
    """A skill's uplift as suite properties, ``openkata_uplift.<skill>.<figure>``, ``<skill>``
    being ``label`` when given (the skill's folder where two skills have its name: see
    :func:`~pytest_openkata.core.summary.skill_labels`)."""
    comparison = summary.comparison
    if comparison is None:
        return []
    prefix = f"openkata_uplift.{label or summary.name}."
    figures = [("arm", comparison.arm)]
    uplift = comparison.uplift
    if uplift is not None:
        figures += [
            ("with", f"{uplift.with_mean:g}"),
            ("without", f"{uplift.without_mean:g}"),
            ("difference", f"{uplift.difference:g}"),
            ("ci95", f"{uplift.ci95[0]:g} {uplift.ci95[1]:g}"),
            ("normalized_gain", f"{uplift.normalized_gain:g}"),
            ("p_value", f"{uplift.p_value:g}"),
            ("test", uplift.test),
            ("verdict", uplift.verdict),
        ]
    return [(prefix + name, value) for name, value in figures]


def _add_suite_properties(suite: ET.Element, figures: list[tuple[str, str]]) -> None:
    if not figures:
        return
    properties = suite.find("properties")
    if properties is None:
        properties = ET.Element("properties")
        suite.insert(0, properties)
    for name, value in figures:
        _property(properties, name, value)


def add_criteria_to_junit(
    path: Path,
    results: Mapping[str, ScenarioResult],
    suite_properties: list[tuple[str, str]] | None = None,
    removed: list[Path] | None = None,
) -> None:
    """Rewrite the JUnit file in place (atomically) with per-criterion testcases;
    ``results`` are keyed by :func:`scenario_key`; ``suite_properties`` go to the first
    suite. The temporary files of killed writers in its folder are removed and added to
    ``removed``."""
    tree = ET.parse(path)
    root = tree.getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    for suite in suites:
        _augment_suite(suite, results)
    if suites:
        _add_suite_properties(suites[0], suite_properties or [])
    swept = remove_stale(path.parent)
    if removed is not None:
        removed.extend(swept)
    fd, temp = new_temp_file(path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            tree.write(handle, encoding="utf-8", xml_declaration=True)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


class JUnitReporter:
    """Adds every criterion of the run's scenarios to pytest's JUnit file, when there is one."""

    name = "junit"

    def report(self, run: Run) -> ReportOutcome | None:
        if run.junit_xml is None or not run.junit_xml.is_file():
            return None
        results = {
            scenario_key(result.skill_dir, result.name, run.rootdir): result
            for summary in run.summaries
            for result in summary.results
        }
        if not results:
            return None
        labels = skill_labels(run.summaries)
        figures = [
            pair
            for summary, label in zip(run.summaries, labels, strict=True)
            for pair in uplift_properties(summary, label)
        ]
        removed: list[Path] = []
        add_criteria_to_junit(run.junit_xml, results, figures, removed)
        return ReportOutcome(removed=tuple(removed))


if TYPE_CHECKING:  # the protocol this provider implements, checked by mypy
    from pytest_openkata.core.reporting import Reporter

    _implements: type[Reporter] = JUnitReporter
