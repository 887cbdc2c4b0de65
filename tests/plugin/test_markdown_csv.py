"""The Markdown report, the GitHub step summary and the CSV rows of runs made as users make
them (pytester, a real scripted endpoint on loopback)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from pytest_openkata.core.runlog import read_run_log
from pytest_openkata.providers.reporters.csvfile import COLUMNS, render_csv
from pytest_openkata.providers.reporters.markdown import STEP_SUMMARY_ENV, render_markdown
from tests.support.endpoint import RecordedRequest, Reply, ScriptedEndpoint
from tests.support.evals import CRITERION_LINE, EvalScript, eval_args, write_skill

REASON = 'b was | ignored, "quoted"\nand <b>bold</b>'
BAD_REQUEST = Reply(status=400, json={"error": {"message": "bad request"}})


def _rows(path: Path) -> list[dict[str, str]]:
    reader = csv.reader(io.StringIO(path.read_bytes().decode(), newline=""))
    header = next(reader)
    assert header == list(COLUMNS)
    return [dict(zip(header, row, strict=True)) for row in reader]


def _run_log(root: Path) -> Path:
    [log] = sorted((root / ".openkata" / "runs").glob("*.jsonl"))
    return log


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """No step summary of a CI the suite itself runs in reaches these runs."""
    monkeypatch.delenv(STEP_SUMMARY_ENV, raising=False)


def test_markdown_csv_and_step_summary_show_a_failed_criterion_and_an_errored_scenario(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_skill(
        pytester.path,
        "s",
        {"scenario-0": {"a": 10, "b": 5}, "scenario-1": {"c": 4}, "scenario-2": {"d": 1}},
    )
    script.verdicts["b"] = (False, REASON)
    script.agent_reply_when["scenario-2."] = BAD_REQUEST  # 400 is not retried
    step_summary = pytester.path / "step-summary.md"
    step_summary.write_text("## Build\n\nThe build step's own summary.\n")
    monkeypatch.setenv(STEP_SUMMARY_ENV, str(step_summary))

    result = pytester.runpytest(
        "skills/s",
        *eval_args(endpoint.base_url, "--eval-markdown", "report.md", "--eval-csv", "rows.csv"),
    )

    result.assert_outcomes(passed=1, failed=2, errors=1)  # the subtest and its scenario
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines_random(["Markdown report: report.md", "CSV rows: rows.csv"])
    markdown = (pytester.path / "report.md").read_text()
    # The same bytes as the report rendered afterwards from the run's log.
    log = read_run_log(_run_log(pytester.path))
    assert markdown == render_markdown(log)
    assert "## ❌ skills/s: 55.6% FAIL (threshold 95%)" in markdown
    assert (
        '| scenario-0 | 🔴 66.7% | ██████░░░░ | **b** (0/5): b was \\| ignored, "quoted"<br>'
        "and &lt;b&gt;bold&lt;/b&gt; |"
    ) in markdown
    assert "| scenario-1 | 🟢 100% | ██████████ |  |" in markdown
    [error_row] = [line for line in markdown.splitlines() if line.startswith("| scenario-2 ")]
    assert error_row.startswith("| scenario-2 | ⚠️ error |  | **error**: agent: ")
    assert "400" in error_row
    assert "- scenario-2: agent: " in markdown.split("**Errors**")[1]
    assert str(pytester.path) not in markdown  # no machine path

    # Appended after what the file held, whole (it is far from GitHub's limit).
    assert step_summary.read_text() == (
        "## Build\n\nThe build step's own summary.\n\n" + render_markdown(log)
    )

    rows = _rows(pytester.path / "rows.csv")
    assert (pytester.path / "rows.csv").read_bytes().decode() == render_csv(log)
    assert [(r["scenario"], r["criterion"], r["passed"], r["arm"]) for r in rows] == [
        ("scenario-0", "a", "true", "with-skill"),
        ("scenario-0", "b", "false", "with-skill"),
        ("scenario-1", "c", "true", "with-skill"),
        ("scenario-2", "", "", "with-skill"),
    ]
    assert rows[1]["reason"] == REASON
    assert (rows[1]["points"], rows[1]["max_points"]) == ("0", "5")
    assert rows[3]["error"].startswith("agent: ")
    assert "400" in rows[3]["error"]


def test_without_the_options_or_a_step_summary_nothing_is_written(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"a": 1}})

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url))

    assert result.ret == pytest.ExitCode.OK
    assert "Markdown report:" not in result.stdout.str()
    assert list(pytester.path.glob("*.md")) == []
    assert list(pytester.path.glob("*.csv")) == []


def test_reports_are_never_overwritten_and_an_unwritable_one_fails_the_run(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"a": 1}})
    # The cache off: an answer from the cache reports no model, which the manifest line shows.
    args = eval_args(
        endpoint.base_url, "--eval-markdown", "out/r.md", "--eval-csv", "out/r.csv",
        "--eval-cache", "off",
    )  # fmt: skip

    pytester.runpytest("skills/s", *args)
    again = pytester.runpytest("skills/s", *args)

    again.stdout.fnmatch_lines_random(["Markdown report: out/r-2.md", "CSV rows: out/r-2.csv"])
    assert (pytester.path / "out" / "r.md").read_text() == (
        pytester.path / "out" / "r-2.md"
    ).read_text()
    assert again.ret == pytest.ExitCode.OK

    pytester.path.joinpath("blocker").write_text("a file, not a folder\n")
    blocked = pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url, "--eval-markdown", "blocker/r.md")
    )

    blocked.stdout.fnmatch_lines(["Not written: could not write the Markdown report *"])
    assert blocked.ret == pytest.ExitCode.TESTS_FAILED


SKILL_RULE = "Follow the rules."  # what write_skill puts into every SKILL.md


def _skill_aware(request: RecordedRequest) -> Reply:
    """The agent applies the rule only when the skill is in its prompt; the judge passes
    ``applies-rule`` only for an answer that applied it (every other criterion passes)."""
    messages = request.json["messages"]
    if messages[0]["role"] == "system":
        user = messages[-1]["content"]
        applied = "APPLIED" in user.split("## Evaluation Criteria")[0]
        verdicts = [
            {"name": name, "pass": applied or name != "applies-rule", "reason": "seen"}
            for name, _ in CRITERION_LINE.findall(user)
        ]
        return Reply.chat(json.dumps(verdicts))
    prompt = messages[-1]["content"]
    return Reply.chat(
        "APPLIED the rule of the skill, as its answer shows in full."
        if SKILL_RULE in prompt
        else "A plain answer from a model that knows nothing of the skill."
    )


def test_the_uplift_against_the_baseline_arm_is_in_the_markdown_and_the_rows(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint
) -> None:
    endpoint.respond_with(_skill_aware)
    write_skill(
        pytester.path, "s", {f"scenario-{n}": {"applies-rule": 50, "clear": 50} for n in range(6)}
    )

    result = pytester.runpytest(
        "skills/s",
        *eval_args(
            endpoint.base_url,
            "--eval-baseline",
            "without-skill",
            "--eval-markdown",
            "report.md",
            "--eval-csv",
            "rows.csv",
        ),
    )

    assert result.ret == pytest.ExitCode.OK
    markdown = (pytester.path / "report.md").read_text()
    assert (
        "**Uplift against without-skill** over 6 scenarios: with the skill 100.0%, "
        "without-skill 50.0%; difference +50.0 points (95% CI +50.0 to +50.0); normalized "
        "gain 1.00; p = 0.0312 (sign-flip exact)"
    ) in markdown
    assert "verdict: **improves**" in markdown
    assert "| Scenario | Score |  | without-skill | Failed criteria |" in markdown
    assert "| scenario-0 | 🟢 100% | ██████████ | 50% |  |" in markdown
    assert "baseline without-skill" in markdown  # the run's settings line
    rows = _rows(pytester.path / "rows.csv")
    assert len(rows) == 6 * 2 * 2  # scenarios × arms × criteria
    assert [(r["arm"], r["criterion"], r["passed"]) for r in rows[:4]] == [
        ("with-skill", "applies-rule", "true"),
        ("with-skill", "clear", "true"),
        ("without-skill", "applies-rule", "false"),
        ("without-skill", "clear", "true"),
    ]
