"""The Markdown report and the step summary, rendered from run logs and read back with a
CommonMark parser (markdown-it-py, with GitHub's tables) to see what a reader would see."""

from __future__ import annotations

import html
import re
from dataclasses import replace
from pathlib import Path

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.results import (
    FileChange,
    ScenarioResult,
)
from pytest_openkata.contracts.transcripts import SkillLoad, Step, Transcript
from pytest_openkata.core.excerpts import LAST_TOOL_CALLS
from pytest_openkata.core.regression import (
    CriterionFlip,
    ScenarioChange,
    SkillChanges,
)
from pytest_openkata.core.runlog import (
    CHANGES_EXTRA,
    LoggedRun,
    skill_summaries,
)
from pytest_openkata.providers.reporters.markdown import (
    STEP_SUMMARY_ENV,
    STEP_SUMMARY_LIMIT,
    MarkdownReporter,
    append_step_summary,
    cut_note,
    cut_to,
    escape,
    render_markdown,
    score_bar,
    sections,
)
from tests.support.readers import PARSER, html_blocks, inline_text, tables
from tests.support.results import judged, logged, report_of, reported, scenario

NASTY = "a | b\nsecond line <script>alert(1)</script> *not bold* [no](link) `tick` $x$ & ~s~ #1"


def with_baseline(own: ScenarioResult, baseline: ScenarioResult) -> ScenarioResult:
    return replace(own, baseline=replace(baseline, arm="without-skill"))


# --- escaping and the bar ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        NASTY,
        "**strong** __also__ _em_ ***both***",
        "a\r\nb\rc",
        "<br> is not a break here, &lt; is not an entity",
        "back\\slash \\| and \\* kept",
        "- not a list, > not a quote, 1. not a list, # not a heading",
        "![image](x.png) <https://example.com> |||",
        "https://example.com/a?b=c www.example.com WWW.x.y ftp://h mailto:a@b.c a:// x:/y",
    ],
)
def test_escaped_text_reads_back_as_written_in_a_paragraph_and_a_table_cell(text: str) -> None:
    expected = text.replace("\r\n", "\n").replace("\r", "\n")
    [paragraph] = [t for t in PARSER.parse(f"Reason: {escape(text)}\n") if t.type == "inline"]
    assert inline_text(paragraph) == f"Reason: {expected}"
    [table] = tables(f"| a | b |\n| --- | --- |\n| {escape(text)} | after |\n")
    assert table[1] == [expected, "after"]


@pytest.mark.parametrize(
    ("value", "bar"),
    [
        (0, "░░░░░░░░░░"),
        (9.99, "░░░░░░░░░░"),
        (10, "█░░░░░░░░░"),
        (50, "█████░░░░░"),
        (200 / 3, "██████░░░░"),
        (70.00000000000001, "███████░░░"),
        (69.99999999999999, "███████░░░"),  # a sum's last bit does not lose a cell
        (99.9, "█████████░"),
        (100, "██████████"),
    ],
)
def test_the_bar_fills_one_cell_per_whole_tenth(value: float, bar: str) -> None:
    assert score_bar(value) == bar


# --- the document --------------------------------------------------------------------------


def test_each_skill_has_a_heading_and_a_table_row_per_scenario() -> None:
    results = [
        scenario("scenario-a", [judged("x", 10, True), judged("y", 5, True)]),
        scenario("scenario-b", [judged("x", 10, True), judged("y|z", 5, False, NASTY)]),
        scenario("scenario-c", [judged("x", 10, True)], skill="t"),
    ]
    text = render_markdown(logged(results))

    assert text.startswith("# openkata eval: 2 skills, 1 passed, 1 failed\n")
    assert "Run with agent http gpt-4o; judge http gpt-4o; threshold 95%." in text
    assert "## ❌ skills/s: 83.3% FAIL (threshold 95%)" in text
    assert "## ✅ skills/t: 100% PASS (threshold 95%)" in text
    first, second = tables(text)
    assert first == [
        ["Scenario", "Score", "", "Failed criteria"],
        ["scenario-a", "🟢 100%", "██████████", ""],
        ["scenario-b", "🔴 66.7%", "██████░░░░", f"y|z (0/5): {NASTY}"],
    ]
    assert second[1] == ["scenario-c", "🟢 100%", "██████████", ""]
    assert "<script>" not in text  # escaped everywhere, the details included


def test_a_percentage_never_rounds_across_the_threshold() -> None:
    below = [scenario("scenario-a", [judged("c", 9499, True), judged("d", 501, False)])]
    text = render_markdown(logged(below))

    assert "## ❌ skills/s: 94.99% FAIL (threshold 95%)" in text  # not "95.0% FAIL"
    near = [scenario("scenario-a", [judged("c", 1999, True), judged("d", 1, False)])]
    [table] = tables(render_markdown(logged(near)))
    assert table[1][1] == "🟢 99.95%"  # not "100.0%", which would read as passed
    whole = [scenario(f"scenario-{n}", [judged("c", 1, n < 93)]) for n in range(100)]
    assert "## ❌ skills/s: 93% FAIL" in render_markdown(logged(whole))


def test_an_errored_scenario_is_shown_as_an_error_not_a_score() -> None:
    results = [
        scenario("scenario-a", "agent: failed after 3 attempts: HTTP 500: upstream | down"),
        scenario("scenario-b", [judged("c", 1, True)], "judge: no JSON"),
    ]
    text = render_markdown(logged(results, threshold=0))

    [table] = tables(text)
    assert table[1] == [
        "scenario-a",
        "⚠️ error",
        "",
        "error: agent: failed after 3 attempts: HTTP 500: upstream | down",
    ]
    assert table[2][1] == "🔴 50% ⚠️"
    assert "2 scenarios: 0 passed, 0 failed, 2 errored." in text
    errors = text.split("**Errors**\n\n")[1].split("\n\n")[0]
    assert errors.splitlines() == [
        "- scenario-a: agent: failed after 3 attempts: HTTP 500: upstream \\| down",
        "- scenario-b: 1 of 2 trials errored; trial 2: judge: no JSON",
    ]
    # The description does not carry the reference's "(error: ...)" suffix.
    assert "Description: about scenario-a\n" in text


def test_a_partial_and_an_unfinished_run_say_so() -> None:
    results = [scenario("scenario-0", [judged("c", 1, True)], total=3)]
    text = render_markdown(logged(results, complete=False))

    assert "## ◐ skills/s: 100% partial run (1 of 3 scenarios; threshold 95% not enforced)" in text
    assert "**This run did not finish:** only the scenarios that ran are shown." in text
    assert text.startswith("# openkata eval: 1 skill, 0 passed, 0 failed, 1 partial\n")


def test_the_uplift_gives_means_difference_interval_p_value_and_verdict() -> None:
    results = [
        with_baseline(
            scenario(f"scenario-{n}", [judged("rule", 50, True), judged("clear", 50, True)]),
            scenario(f"scenario-{n}", [judged("rule", 50, False), judged("clear", 50, True)]),
        )
        for n in range(6)
    ]
    results.append(
        with_baseline(
            scenario("scenario-x", [judged("rule", 50, True)]),
            scenario("scenario-x", "agent: HTTP 400: bad request"),
        )
    )
    text = render_markdown(logged(results))

    assert (
        "**Uplift against without-skill** over 6 scenarios: with the skill 100.0%, "
        "without-skill 50.0%; difference +50.0 points (95% CI +50.0 to +50.0); normalized "
        "gain 1.00; p = 0.0312 (sign-flip exact); criteria: McNemar p = 0.0312 (6 passed with "
        "the skill only, 0 without it only); verdict: **improves**"
    ) in text
    assert "- left out: scenario-x (errored in the without-skill arm)" in text
    assert "- moved most: scenario-0 rule 0% → 100%; " in text
    [table] = tables(text)
    assert table[0] == ["Scenario", "Score", "", "without-skill", "Failed criteria"]
    assert table[1][3] == "50%"
    assert table[7][3] == "⚠️ error"
    assert "- scenario-x (baseline without-skill): agent: HTTP 400: bad request" in text


def test_the_comparison_with_an_earlier_run_gives_tiers_changes_and_flips() -> None:
    changes = SkillChanges(
        skill="s",
        baseline="20261130T090000Z.jsonl",
        tolerance=5.0,
        scenarios=(
            ScenarioChange(
                "scenario-a",
                "regression",
                100.0,
                50.0,
                change=-50.0,
                criteria=(
                    CriterionFlip("x", True, True),
                    CriterionFlip("y|z", True, False),
                ),
            ),
            ScenarioChange("scenario-b", "unchanged", 100.0, 100.0, change=0.0),
            ScenarioChange("scenario-c", "new", None, 100.0, reason="not in the earlier run"),
        ),
    )
    results = [scenario(name, [judged("c", 1, True)]) for name in ("scenario-a", "scenario-b")]
    text = render_markdown(logged(results, extras={CHANGES_EXTRA: [changes.to_dict()]}))

    assert (
        "**Compared with the earlier run 20261130T090000Z.jsonl** (tolerance 5 points): "
        "1 new, 1 regression, 1 unchanged"
    ) in text
    _, table = tables(text)
    assert table == [
        ["Scenario", "Tier", "Before", "After", "Change", "Flipped criteria"],
        ["scenario-a", "regression", "100%", "50%", "-50.0", "y|z pass→fail"],
        ["scenario-b", "unchanged", "100%", "100%", "+0.0", ""],
        ["scenario-c", "new (not in the earlier run)", "—", "100%", "—", ""],
    ]


def test_details_hold_every_reason_and_the_end_of_each_trials_output() -> None:
    long_output = "".join(f"line {n} of the agent\n" for n in range(400)) + "```\nDONE ````"
    result = scenario(
        "scenario-a",
        [judged("x", 10, True, "met it"), judged("y", 5, False, "r" * 500)],
        [judged("x", 10, False, "missed it"), judged("y", 5, False, "again")],
        output=long_output,
        changes=(FileChange("src/app.py", "modified", "--- a\n+++ b\n"),),
    )
    text = render_markdown(logged([result]))

    assert html_blocks(text).count("</details>") == 1
    assert "<summary>scenario-a: 33.3% (2 of 2 criteria failed)</summary>" in text
    assert "95% CI of the overall: " in text  # two trials give the overall an interval
    tokens = PARSER.parse(text)
    fences = [t for t in tokens if t.type == "fence"]
    assert len(fences) == 2  # one per trial, each holding the output's end literally
    for fence in fences:
        assert fence.content.endswith("```\nDONE ````\n")
        assert fence.content.startswith("line ")  # cut at a line's start
        assert long_output.endswith(fence.content.rstrip("\n"))
    said = re.findall(
        r"Agent output \(trial (\d)\), the last ([\d,]+) of ([\d,]+) characters:", text
    )
    total = f"{len(long_output):,}"
    assert [(trial, whole) for trial, _, whole in said] == [("1", total), ("2", total)]
    assert all(int(shown.replace(",", "")) <= 2000 for _, shown, _ in said)
    assert "Changed files (trial 2): src/app.py (modified)" in text
    assert "- ✗ x (0/10) [1/2 passed]: met it" not in text
    assert "- ✗ x (0/10) [1/2 passed]: missed it" in text
    assert f"- ✗ y (0/5) [0/2 passed]: {'r' * 500}" in text
    # The table shortens a long reason; the details give it whole.
    [table] = tables(text)
    assert table[1][3].endswith("…")
    assert len(table[1][3]) < 400


def test_an_address_in_a_models_text_is_shown_but_not_linked_on_github() -> None:
    # GitHub's own renderer (cmark-gfm) links a bare URL or www address found in text.
    lure = (
        "see https://evil.example/login, www.evil.example, _www.evil.example_ or x_www.evil.example"
    )
    result = scenario(
        "scenario-a",
        [judged("c", 1, False, f"reason: {lure}"), judged("d", 1, True)],
        f"judge: {lure}",
        output=f"agent: {lure}\n",
    )
    text = render_markdown(logged([result], threshold=0))

    page = cmarkgfm.github_flavored_markdown_to_html(text, options=Options.CMARK_OPT_UNSAFE)
    assert "evil.example" not in " ".join(re.findall(r"<a [^>]*>", page))
    shown = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert shown.count(lure) >= 4  # the reason in the table and the details, the error, output


def test_the_same_outcome_gives_the_same_bytes() -> None:
    def run(seconds: float, finished_at: str) -> str:
        results = [
            scenario("scenario-a", [judged("x", 10, False, "no")], seconds=seconds),
            scenario("scenario-b", "agent: timed out", seconds=seconds),
        ]
        return render_markdown(logged(results, finished_at=finished_at))

    assert run(1.5, "2026-12-01T10:00:00Z") == run(42.0, "2026-12-02T11:11:11Z")


# --- cutting the step summary ------------------------------------------------------------------


def large_run(scenarios: int, output_chars: int = 1500) -> LoggedRun:
    output = "".join(f"output line {n}: {'x' * 60}\n" for n in range(output_chars // 76 + 1))
    return logged(
        [
            scenario(
                f"scenario-{n:05}",
                [judged("x", 10, n % 3 != 0, f"reason {n} | with a pipe\nand a line")],
                output=output,
            )
            for n in range(scenarios)
        ]
    )


def test_a_large_run_is_cut_under_the_limit_with_a_note_naming_the_full_report() -> None:
    run = large_run(1200)
    full = render_markdown(run)
    assert len(full.encode()) > STEP_SUMMARY_LIMIT

    cut = cut_to(sections(run, skill_summaries(run)), STEP_SUMMARY_LIMIT, "reports/run.md")

    assert len(cut.encode()) <= STEP_SUMMARY_LIMIT
    assert cut.endswith(cut_note("reports/run.md"))
    assert "the full report is reports/run.md." in cut
    kept = cut.removesuffix(cut_note("reports/run.md"))
    assert full.startswith(kept)  # whole sections of the full report, in order
    [table] = tables(cut)
    assert len(table) == 1 + 1200  # the overview came first: its table is whole
    assert kept.count("<details>") == kept.count("</details>") > 0
    assert all(len(row) == 4 for row in table)


def test_a_table_too_large_for_the_budget_keeps_its_header_and_whole_rows() -> None:
    run = large_run(400)
    parts = sections(run, skill_summaries(run))
    budget = 20_000

    cut = cut_to(parts, budget, None)

    assert len(cut.encode()) <= budget
    assert cut.endswith(cut_note(None))
    assert "write the full report with --eval-markdown PATH" in cut
    [table] = tables(cut)
    assert table[0] == ["Scenario", "Score", "", "Failed criteria"]
    assert 10 < len(table) < 401
    assert all(len(row) == 4 for row in table)
    assert table[-1][0] == f"scenario-{len(table) - 2:05}"
    assert "## Details" not in cut


def test_a_run_that_fits_is_not_cut_and_nothing_is_written_when_not_even_the_note_fits() -> None:
    run = large_run(3)
    parts = sections(run, skill_summaries(run))
    assert cut_to(parts, STEP_SUMMARY_LIMIT, "x.md") == render_markdown(run)
    assert cut_to(parts, len(cut_note("x.md")) - 1, "x.md") == ""


def test_the_step_summary_is_appended_after_what_the_file_holds_and_within_the_limit(
    tmp_path: Path,
) -> None:
    path = tmp_path / "step_summary.md"
    earlier = "## An earlier step\n\nno trailing newline"
    path.write_text(earlier)
    run = large_run(3)
    parts = sections(run, skill_summaries(run))

    append_step_summary(path, parts, "run.md")

    assert path.read_text() == earlier + "\n\n" + render_markdown(run)

    # A file that already holds most of the limit gets a cut summary that keeps it under.
    crowded = tmp_path / "crowded.md"
    crowded.write_text("x" * 900 + "\n")
    append_step_summary(crowded, parts, "run.md", limit=4000)
    text = crowded.read_text()
    assert text.startswith("x" * 900 + "\n\n# openkata eval:")
    assert len(text.encode()) <= 4000
    assert text.endswith(cut_note("run.md"))


# --- the reporter ----------------------------------------------------------------------------


def test_the_reporter_writes_the_markdown_report_relative_to_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(STEP_SUMMARY_ENV, raising=False)
    results = [scenario("scenario-a", [judged("x", 10, False, "missed")])]
    settings = EvalSettings(markdown="out/report.md")

    first, second = report_of(results, settings), report_of(results, settings)
    first = reported(MarkdownReporter(), first)
    second = reported(MarkdownReporter(), second)

    assert first.written == {"Markdown report": Path("out/report.md")}
    assert second.written == {"Markdown report": Path("out/report-2.md")}  # never overwritten
    text = (tmp_path / "out" / "report.md").read_text()
    assert text == render_markdown(first.logged)
    assert text == (tmp_path / "out" / "report-2.md").read_text()
    assert "x (0/10): missed" in text


def test_a_report_that_cannot_be_written_is_recorded_once_on_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "blocker").write_text("a file, not a folder\n")
    monkeypatch.setenv(STEP_SUMMARY_ENV, str(tmp_path / "no-such-folder" / "summary.md"))
    results = [scenario("scenario-a"), scenario("scenario-b", skill="t")]
    run = report_of(results, EvalSettings(markdown=str(tmp_path / "blocker" / "report.md")))

    run = reported(MarkdownReporter(), run)

    assert run.written == {}
    [markdown, step_summary] = run.errors
    assert markdown.startswith("could not write the Markdown report ")
    assert "blocker" in markdown
    assert step_summary.startswith("could not append to the step summary ")
    assert [summary.report_error for summary in run.summaries] == [None, None]


def test_a_step_summary_that_cannot_be_appended_is_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STEP_SUMMARY_ENV, str(tmp_path / "no-such-folder" / "summary.md"))
    run = report_of([scenario("scenario-a")], EvalSettings())

    run = reported(MarkdownReporter(), run)

    [error] = run.errors
    assert error.startswith("could not append to the step summary ")
    assert STEP_SUMMARY_ENV in error


def test_a_cut_step_summary_points_at_the_markdown_report_written_in_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    summary_file = tmp_path / "step-summary.md"
    summary_file.write_text("earlier step\n")
    monkeypatch.setenv(STEP_SUMMARY_ENV, str(summary_file))
    output = "".join(f"output line {n}: {'y' * 60}\n" for n in range(25))
    results = [
        scenario(f"scenario-{n:04}", [judged("x", 1, n % 2 == 0, "why not")], output=output)
        for n in range(800)
    ]
    run = report_of(results, EvalSettings(markdown="reports/run.md"), rootdir=tmp_path)

    run = reported(MarkdownReporter(), run)

    full = (tmp_path / "reports" / "run.md").read_text()
    assert len(full.encode()) > STEP_SUMMARY_LIMIT  # the file is whole
    assert full.count("<details>") == 800
    appended = summary_file.read_text()
    assert appended.startswith("earlier step\n\n# openkata eval: 1 skill")
    assert len(appended.encode()) <= STEP_SUMMARY_LIMIT
    assert appended.endswith(cut_note("reports/run.md"))
    assert all(summary.report_error is None for summary in run.summaries)


def test_a_failed_trials_details_name_the_skills_loaded_and_the_last_tool_calls() -> None:
    failed = scenario("scenario-a", [judged("x", 10, False, "missed")])
    [trial] = failed.trials
    assert trial.trace is not None
    transcript = Transcript(
        "codex exec --json",
        steps=tuple(
            Step.tool_call("shell", f"echo {n}", status="ok") for n in range(LAST_TOOL_CALLS + 2)
        ),
        skills_loaded=(SkillLoad("review", "t2"),),
    )
    told = replace(trial, trace=replace(trial.trace, transcript=transcript))
    failed = replace(failed, trials=[told])

    text = render_markdown(logged([failed]))

    assert "Skills loaded: review (subagent t2)" in text
    assert "Skill: loaded in 0 of 1 trial" in text  # the skill is s; it loaded another
    assert f"Last tool calls, of {LAST_TOOL_CALLS + 2}:" in text
    assert "shell echo 1 ->" not in text  # only the last ones
    assert f"shell echo {LAST_TOOL_CALLS + 1} -> ok" in text
