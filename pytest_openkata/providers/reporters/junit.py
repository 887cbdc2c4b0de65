"""Per-criterion entries in pytest's ``--junitxml`` file.

pytest writes one ``<testcase>`` per scenario and does not list subtests. After it has
written the file (on the controller only, so ``-n`` gives the same file), each scenario's
criteria are added as testcases of their own, with their points and the judge's reason, and
the scenario testcase gets its score (and error) as properties. A scenario's testcase is
found by its ``openkata_scenario`` property, the scenario folder relative to the rootdir,
which the pytest adapter records on the item.
"""

from __future__ import annotations

import os
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_openkata.core.results import ScenarioResult
from pytest_openkata.providers.reporters import RunReport

SCENARIO_PROPERTY = "openkata_scenario"
PERCENTAGE_PROPERTY = "openkata_percentage"


def scenario_key(skill_dir: str | Path, name: str, rootdir: Path) -> str:
    """A scenario folder relative to the rootdir, ``/``-separated: how the JUnit file names it."""
    return Path(os.path.relpath(Path(skill_dir, "evals", name), rootdir)).as_posix()


_COUNTED = {"failures": "failure", "errors": "error", "skipped": "skipped"}


def _property(parent: ET.Element, name: str, value: str) -> None:
    ET.SubElement(parent, "property", name=name, value=value)


def _criterion_cases(scenario_case: ET.Element, result: ScenarioResult) -> list[ET.Element]:
    classname = f"{scenario_case.get('classname', '')}.{scenario_case.get('name', '')}"
    cases = []
    for criterion in result.criteria or ():
        case = ET.Element(
            "testcase",
            classname=classname,
            name=criterion.name,
            file=scenario_case.get("file", ""),
            time="0",
        )
        properties = ET.SubElement(case, "properties")
        _property(properties, "points", str(criterion.score))
        _property(properties, "max_points", str(criterion.max_score))
        _property(properties, "reason", criterion.reason)
        if not criterion.passed:
            failure = ET.SubElement(
                case,
                "failure",
                message=f"criterion {criterion.name!r} not met "
                f"({criterion.score}/{criterion.max_score})",
                type="CriterionNotMet",
            )
            failure.text = criterion.reason
        cases.append(case)
    return cases


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
        position = list(suite).index(case) + 1
        for offset, criterion_case in enumerate(_criterion_cases(case, result)):
            suite.insert(position + offset, criterion_case)
    cases = suite.findall("testcase")
    suite.set("tests", str(len(cases)))
    for attribute, child in _COUNTED.items():
        suite.set(attribute, str(sum(1 for c in cases if c.find(child) is not None)))


def add_criteria_to_junit(path: Path, results: Mapping[str, ScenarioResult]) -> None:
    """Rewrite the JUnit file in place (atomically) with per-criterion testcases;
    ``results`` are keyed by :func:`scenario_key`."""
    tree = ET.parse(path)
    root = tree.getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    for suite in suites:
        _augment_suite(suite, results)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            tree.write(handle, encoding="utf-8", xml_declaration=True)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


class JUnitReporter:
    """Adds every criterion of the run's scenarios to pytest's JUnit file, when there is one."""

    name = "junit"
    order = 10

    def report(self, run: RunReport) -> None:
        if run.junit_xml is None or not run.junit_xml.is_file():
            return
        results = {
            scenario_key(result.skill_dir, result.name, run.rootdir): result
            for summary in run.summaries
            for result in summary.results
        }
        if results:
            add_criteria_to_junit(run.junit_xml, results)


if TYPE_CHECKING:  # the protocol this provider implements, checked by mypy
    from pytest_openkata.providers.reporters import Reporter

    _implements: type[Reporter] = JUnitReporter
