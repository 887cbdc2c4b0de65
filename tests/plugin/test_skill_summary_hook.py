"""The controller's hook ``pytest_openkata_skill_summary``: a conftest.py gets each skill's
summary, after the reporters ran, with or without xdist."""

from __future__ import annotations

import json

import pytest

from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_skill

CONFTEST = """
import json

def pytest_openkata_skill_summary(summary, config):
    seen = config.rootpath / "summaries.jsonl"
    line = {
        "skill": summary.name,
        "overall": summary.overall,
        "complete": summary.complete,
        "passed": summary.passed,
        "report": summary.report_path.name if summary.report_path else None,
        "scenarios": [(r.name, r.percentage, r.error) for r in summary.results],
        "worker": hasattr(config, "workerinput"),
    }
    with seen.open("a") as handle:
        handle.write(json.dumps(line) + "\\n")
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "xdist"])
def test_a_conftest_gets_every_skill_summary_on_the_controller(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript, workers: list[str]
) -> None:
    script.verdicts = {"b": (False, "no")}
    write_skill(pytester.path, "one", {"scenario-x": {"a": 1, "b": 1}, "scenario-y": {"a": 1}})
    write_skill(pytester.path, "two", {"scenario-z": {"a": 1}})
    pytester.makeconftest(CONFTEST)

    result = pytester.runpytest("skills", *workers, *eval_args(endpoint.base_url))

    assert result.ret == pytest.ExitCode.TESTS_FAILED  # skill "one" is at 75 % < 95 %
    lines = [
        json.loads(line) for line in (pytester.path / "summaries.jsonl").read_text().splitlines()
    ]
    assert [line["skill"] for line in lines] == ["one", "two"]
    one, two = lines
    assert one["overall"] == 75.0
    assert (one["complete"], one["passed"], two["passed"]) == (True, False, True)
    assert one["scenarios"] == [["scenario-x", 50.0, None], ["scenario-y", 100.0, None]]
    assert one["report"] is not None
    assert one["report"].endswith(".json")
    assert not any(line["worker"] for line in lines)
