"""The critical-thinking skill of the corpus, judged with the verdicts of its real report,
reproduces that report: same scores, same overall, same bytes but timestamp and backend."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args

REAL_REPORT = "evals/results/claude-sonnet-4.6/2026-06-22T075103.json"
# A "usage" member: always the last of its object, so it follows a comma and its closing
# brace is the first one back at its own indentation.
USAGE_BLOCK = re.compile(r',\n( +)"usage": \{\n.*?\n\1\}', re.DOTALL)


@pytest.fixture
def critical_thinking(corpus: Path, pytester: pytest.Pytester) -> Path:
    skill = pytester.path / "skills" / "critical-thinking"
    shutil.copytree(corpus / "skills" / "critical-thinking", skill)
    (skill / REAL_REPORT).unlink()  # the run must write its own
    return skill


def _script_from_report(report: dict, skill: Path) -> EvalScript:
    script = EvalScript()
    for scenario in report["scenarios"]:
        criteria = json.loads((skill / "evals" / scenario["name"] / "criteria.json").read_text())
        script.by_context[criteria["context"]] = {
            c["name"]: (c["pass"], c["reason"]) for c in scenario["criteria"]
        }
    return script


def test_real_report_is_reproduced(
    corpus: Path, critical_thinking: Path, pytester: pytest.Pytester, endpoint: ScriptedEndpoint
) -> None:
    original_text = (corpus / "skills/critical-thinking" / REAL_REPORT).read_text("utf-8")
    original = json.loads(original_text)
    endpoint.respond_with(_script_from_report(original, critical_thinking))

    result = pytester.runpytest(
        "skills/critical-thinking",
        *eval_args(endpoint.base_url),
        "--eval-model",
        "claude-sonnet-4.6",
        "--eval-model-label",
        "Sonnet 4.6",
    )

    assert result.ret == pytest.ExitCode.TESTS_FAILED  # 87.25 < 95
    result.stdout.fnmatch_lines(
        [
            "  scenario-challenge-architecture-decision: *",
            "    Score: 85/100 (85%) FAIL",
            "  scenario-hold-ground-no-evidence: *",
            "    Score: 88/100 (88%) FAIL",
            "    Score: 100/100 (100%) PASS",
            "    Score: 76/100 (76%) FAIL",
            "  Overall: 87% FAIL (threshold: 95%)",
        ]
    )
    written = list((critical_thinking / "evals/results/claude-sonnet-4.6").glob("*.json"))
    assert len(written) == 1
    ours_text = written[0].read_text("utf-8")
    ours = json.loads(ours_text)
    assert ours["overall_percentage"] == 87.25
    assert ours["config"]["backend"] == "http"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", ours["timestamp"])
    # Byte for byte, once the two fields that must differ are set to the original's values
    # and our additions are taken out: the usage blocks (with measured seconds) and the
    # reproducibility manifest, the last key (the catalogue reads neither).
    assert ours["usage"]["agent"]["calls"] == ours["usage"]["judge"]["calls"] == 4
    assert list(ours)[-1] == "manifest"
    assert ours["manifest"]["agent"]["model"] == "claude-sonnet-4.6"
    without_manifest = ours_text[: ours_text.index(',\n  "manifest": {')] + "\n}\n"
    aligned = USAGE_BLOCK.sub("", without_manifest)
    aligned = aligned.replace(
        f'"timestamp": "{ours["timestamp"]}"', f'"timestamp": "{original["timestamp"]}"', 1
    )
    aligned = aligned.replace('"backend": "http"', '"backend": "kiro"', 1)
    assert aligned == original_text
