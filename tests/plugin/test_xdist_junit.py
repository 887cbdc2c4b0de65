"""xdist gives the same result as one process; JUnit lists every criterion."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from unittest.mock import ANY

import pytest

from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, reports_under, write_skill

SCENARIOS = {
    "scenario-0": {"a": 10, "b": 5},
    "scenario-1": {"c": 8},
    "scenario-2": {"d": 3, "e": 3},
    "scenario-3": {"f": 1},
}


def _run(pytester: pytest.Pytester, base_url: str, *extra: str) -> tuple[pytest.RunResult, dict]:
    for old in reports_under(pytester.path):
        old.unlink()
    result = pytester.runpytest("skills", *eval_args(base_url, "--eval-threshold", "60"), *extra)
    [report] = reports_under(pytester.path)
    return result, json.loads(report.read_text())


def _without_usage(report: dict) -> dict:
    """The report without its measured seconds and the time it was written."""
    report = {k: v for k, v in report.items() if k not in ("usage", "timestamp")}
    report["scenarios"] = [
        {k: v for k, v in s.items() if k != "usage"} for s in report["scenarios"]
    ]
    return report


@pytest.fixture
def scripted_skill(pytester: pytest.Pytester, script: EvalScript) -> Path:
    write_skill(pytester.path, "s", SCENARIOS)
    script.verdicts.update({"b": (False, "b is missing"), "d": (False, "d & <e> differ")})
    return pytester.path


def test_xdist_gives_the_same_report_and_exit_status(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, scripted_skill: Path
) -> None:
    serial, serial_report = _run(pytester, endpoint.base_url)
    # Without the cache, so that the workers really call the endpoint.
    parallel, parallel_report = _run(pytester, endpoint.base_url, "-n", "2", "--eval-cache=off")

    assert serial.ret == parallel.ret == pytest.ExitCode.OK  # 79.2 % >= 60 %
    assert parallel_report["usage"]["agent"] == {**serial_report["usage"]["agent"], "seconds": ANY}
    assert parallel_report["usage"]["agent"]["calls"] == len(SCENARIOS)
    assert _without_usage(parallel_report) == _without_usage(serial_report)
    assert [s["name"] for s in parallel_report["scenarios"]] == list(SCENARIOS)
    parallel.stdout.fnmatch_lines(["  Overall: 79% PASS (threshold: 60%)"])


def test_xdist_gate_failure_exits_one(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, scripted_skill: Path
) -> None:
    result = pytester.runpytest("skills", *eval_args(endpoint.base_url), "-n", "2")

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["  Overall: 79% FAIL (threshold: 95%)"])


def _cases(path: Path) -> dict[tuple[str, str], ET.Element]:
    root = ET.parse(path).getroot()
    return {(c.get("classname", ""), c.get("name", "")): c for c in root.iter("testcase")}


def _properties(case: ET.Element) -> dict[str, str]:
    return {p.get("name", ""): p.get("value", "") for p in case.iter("property")}


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_junit_lists_every_criterion(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    scripted_skill: Path,
    script: EvalScript,
    workers: list[str],
) -> None:
    overloaded = Reply(status=503, body="overloaded", headers={"Retry-After": "0"})
    script.agent_reply_when["task of scenario-1."] = overloaded  # errors after its retries
    junit = pytester.path / "junit.xml"

    pytester.runpytest("skills", *eval_args(endpoint.base_url, f"--junitxml={junit}"), *workers)

    cases = _cases(junit)
    scenario_cases = {k: v for k, v in cases.items() if k[0] == "skills.s.evals"}
    criterion_cases = {
        k: v for k, v in cases.items() if k[0].startswith("skills.s.evals.scenario-")
    }
    assert len(scenario_cases) == 4
    errored = [c for c in scenario_cases.values() if c.find("error") is not None]
    assert len(errored) == 1
    assert "HTTP 503: overloaded" in _properties(errored[0])["openkata_error"]
    ran = [name for (_cls, name), c in scenario_cases.items() if c.find("error") is None]
    expected = {
        (f"skills.s.evals.{scenario}", criterion): points
        for scenario in ran
        for criterion, points in SCENARIOS[scenario].items()
    }
    assert set(criterion_cases) == set(expected)
    for key, case in criterion_cases.items():
        props = _properties(case)
        assert props["max_points"] == str(expected[key])
        failed = key[1] in {"b", "d"}
        assert (case.find("failure") is not None) is failed
        assert props["points"] == ("0" if failed else str(expected[key]))
        if key[1] == "d":
            assert props["reason"] == "d & <e> differ"
            assert case.find("failure").text == "d & <e> differ"
    for (_cls, name), case in scenario_cases.items():
        props = _properties(case)
        assert "openkata_result" not in props
        if name in ran:
            assert float(props["openkata_percentage"]) > 0
    root = ET.parse(junit).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert int(suite.get("tests")) == len(cases)
    assert int(suite.get("failures")) == sum(
        1 for c in cases.values() if c.find("failure") is not None
    )
