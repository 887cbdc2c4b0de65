"""The HTML report rendered from run logs: what it shows, that data cannot break out of it,
that it holds no URL, that the same log gives the same bytes, the ``html`` command, the
``--eval-html`` reporter of a real run, and how the browser tests behave without chromium."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_openkata.contracts.results import (
    CallStats,
    CriterionResult,
    FileChange,
    ScenarioResult,
    TrialResult,
    TrialTrace,
    Usage,
)
from pytest_openkata.contracts.transcripts import SkillLoad, Step, Transcript
from pytest_openkata.core.regression import (
    REGRESSION,
    UNCHANGED,
    CriterionFlip,
    ScenarioChange,
    SkillChanges,
)
from pytest_openkata.core.runlog import RunInfo, log_lines, parse_run_log, read_run_log
from pytest_openkata.core.trials import combine_trials, errored_trial, scored_trial
from pytest_openkata.providers.reporters.html import main, render_html
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_skill
from tests.support.readers import parse
from tests.support.results import ROOT, checked, judged

HOSTILE = (
    '</script><script>window.PWNED=1</script><img src=x onerror="window.PWNED=2">'
    '<b id="injected">x</b>'
)


# --- constructed results ---------------------------------------------------------------------


USAGE = Usage(
    CallStats(calls=1, input_tokens=1200, output_tokens=300, seconds=2.5, cost_usd=0.0125),
    CallStats(calls=1, cached=1, input_tokens=900, output_tokens=80, seconds=1.0),
)


def trial(
    index: int,
    criteria: Sequence[CriterionResult],
    *,
    output: str = "the agent's answer",
    changes: Sequence[FileChange] = (),
    answers: Mapping[str, list[Any]] | None = None,
) -> TrialResult:
    votes = [
        {
            "vote": 1,
            "cached": False,
            "verdicts": {
                c.name: {"pass": c.passed, "reason": c.reason}
                for c in criteria
                if c.kind == "judge"
            },
        }
    ]
    trace = TrialTrace(
        output=output,
        changes=tuple(changes),
        answers=dict(answers) if answers is not None else {"judge": votes},
        seconds=3.25,
    )
    return scored_trial(index, list(criteria), usage=USAGE, trace=trace)


def scenario(
    name: str,
    trials: Sequence[TrialResult],
    *,
    names: Sequence[str] | None = None,
    baseline: Sequence[TrialResult] | None = None,
) -> ScenarioResult:
    def arm(arm_trials: Sequence[TrialResult]) -> ScenarioResult:
        return combine_trials(
            arm_trials,
            skill="s",
            skill_dir=str(ROOT / "skills" / "s"),
            name=name,
            description=f"about {name}",
            skill_scenarios=list(names or [name]),
        )

    result = arm(trials)
    if baseline is not None:
        other = arm(baseline)
        result = ScenarioResult(
            **{**result.__dict__, "baseline": ScenarioResult(**{**other.__dict__, "arm": "bare"})}
        )
    return result


def log_text(
    results: Sequence[ScenarioResult],
    *,
    complete: bool = True,
    extras: Mapping[str, list[dict[str, Any]]] | None = None,
) -> str:
    info = RunInfo(
        finished_at="2026-03-04T05:06:07Z",
        complete=complete,
        threshold=95,
        settings={"agent": "http", "model": "m-1", "judge": "http", "judge_model": "j-1"},
    )
    return log_lines(info, results, ROOT, extras)


def render(results: Sequence[ScenarioResult], **options: Any) -> str:
    return render_html(parse_run_log(log_text(results, **options)))


def two_scenarios() -> list[ScenarioResult]:
    names = ["scenario-good", "scenario-bad"]
    return [
        scenario("scenario-good", [trial(1, [judged("clear", 10, True)])], names=names),
        scenario(
            "scenario-bad",
            [
                trial(
                    1,
                    [
                        judged("clear", 10, True),
                        judged("tested", 5, False, "no test covers the <empty> input"),
                    ],
                    output=HOSTILE,
                )
            ],
            names=names,
        ),
    ]


# --- what the page shows ---------------------------------------------------------------------


def test_a_hostile_output_is_text_inside_a_pre_and_cannot_break_out() -> None:
    html = render(two_scenarios())
    page = parse(html)

    [output] = [e for e in page.by_class("agent-output") if HOSTILE in e.text]
    assert output.tag == "pre"
    assert len(page.all("script")) == 1  # the page's own, at the end
    assert page.all("img") == []
    assert [e for e in page.elements if e.attrs.get("id") == "injected"] == []
    assert [e for e in page.elements for name in e.attrs if name.startswith("on")] == []
    assert "&lt;/script&gt;&lt;script&gt;window.PWNED=1" in html
    # The one script is the one the policy allows by its digest; nothing else may run.
    [policy] = page.all("meta", **{"http-equiv": "Content-Security-Policy"})
    assert "default-src 'none'" in policy.attrs["content"]
    assert "script-src 'sha256-" in policy.attrs["content"]


def test_the_transcript_is_shown_with_its_tool_calls_collapsed_and_the_skill_load_marked() -> None:
    transcript = Transcript(
        "claude stream-json",
        steps=(
            Step.message("assistant", "Reading the skill."),
            Step.tool_call("Skill", '{"skill": "s"}', result="loaded", status="ok"),
            Step.tool_call("Bash", HOSTILE, result=HOSTILE, status="error", subagent="t9"),
        ),
        skills_loaded=(SkillLoad("s"),),
        turns=2,
    )
    told = trial(1, [judged("clear", 10, False, "no")])
    assert told.trace is not None
    told = replace(told, trace=replace(told.trace, transcript=transcript))

    html = render([scenario("scenario-a", [told])])
    page = parse(html)

    [section] = page.by_class("transcript")
    assert "How the agent worked: 3 steps, 2 tool calls, 2 turns" in section.text
    [loaded] = page.by_class("skill-loaded")
    assert "Skills loaded: s" in loaded.text
    [rate] = page.by_class("activation")
    assert rate.text == "Skill loaded in 1 of 1 trial"
    calls = page.by_class("tool-call")
    assert [("skill-load" in c.attrs["class"]) for c in calls] == [True, False]
    # Each call is collapsed under its summary: a <details> without "open" inside it.
    folded = [e for e in page.all("details") if any(e.within(c) for c in calls)]
    assert len(folded) == 2
    assert all("open" not in e.attrs for e in folded)
    assert "subagent t9" in calls[1].text
    assert [e for e in page.elements if e.attrs.get("id") == "injected"] == []
    assert page.all("img") == []


def test_a_trial_without_a_transcript_shows_none() -> None:
    page = parse(render(two_scenarios()))

    assert page.by_class("transcript") == []
    assert page.by_class("activation") == []  # nothing to tell it from: nothing said


def test_the_page_holds_no_url_yet_shows_the_text_that_had_one() -> None:
    results = [
        scenario(
            "scenario-links",
            [
                trial(
                    1,
                    [judged("cites", 5, False, "see http://example.org/why, not file:///etc")],
                    output="Docs: https://example.com/guide",
                )
            ],
        )
    ]

    html = render(results)

    assert "://" not in html  # no http://, https:// or file:// anywhere in the file
    page = parse(html)
    assert "Docs: https://example.com/guide" in page.text
    assert "see http://example.org/why, not file:///etc" in page.text
    assert all(e.attrs["href"].startswith("#") for e in page.all("a"))
    assert [e for e in page.elements if "src" in e.attrs] == []
    assert page.all("link") == []


def test_every_scenario_and_every_failing_reason_is_in_the_page_and_failures_are_open() -> None:
    page = parse(render(two_scenarios()))

    good, bad = page.scenario("scenario-good"), page.scenario("scenario-bad")
    assert "no test covers the <empty> input" in bad.text
    assert bad.attrs["data-flags"] == "failed"
    assert "open" in bad.attrs
    assert good.attrs["data-flags"] == ""
    assert "open" not in good.attrs
    assert "Overall 83.3% is below the threshold of 95%" in page.text
    # Points, kind and the catalogue's colour of each bar.
    assert "0/5" in bad.text
    assert [e.attrs["class"] for e in page.by_class("fill", within=bad)] == ["fill red"]
    assert [e.attrs["class"] for e in page.by_class("fill", within=good)] == ["fill green"]
    assert "Failed (1)" in page.text


def test_usage_cost_and_the_settings_of_the_run_are_shown() -> None:
    page = parse(render(two_scenarios()))

    [skill] = page.by_class("skill")
    [skill_usage] = page.by_class("usage", within=skill)
    assert "$0.0250" in skill_usage.text  # the agent's cost; the judge's is not known
    assert "2,400" in skill_usage.text  # the agent's input tokens over both scenarios
    assert "not reported" in skill_usage.text  # the judge's cost
    assert "agent http (m-1), judge http (j-1)" in page.text
    [settings] = page.by_class("settings")
    assert "judge model" in settings.text
    assert "j-1" in settings.text


def test_the_same_log_gives_the_same_bytes() -> None:
    text = log_text(two_scenarios())

    first = render_html(parse_run_log(text))
    second = render_html(parse_run_log(text))

    assert first == second
    assert "2026-03-04T05:06:07Z" in first


def test_a_workspace_diff_and_a_checks_command_output_are_shown() -> None:
    diff = "--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-print('old')\n+print('new')\n"
    result = scenario(
        "scenario-sandbox",
        [
            trial(
                1,
                [judged("clear", 10, True), checked("tests-pass", 20, False, "exit status 1")],
                changes=[
                    FileChange("app.py", "modified", diff),
                    FileChange("logo.png", "added", "(binary file, 12 bytes, content not shown)\n"),
                ],
                answers={
                    "checks": [
                        {
                            "check": "tests-pass",
                            "exit_code": 1,
                            "output": "FAILED test_app.py::test_new - AssertionError",
                            "timed_out": False,
                        }
                    ]
                },
            )
        ],
    )

    page = parse(render([result]))

    added = [e.text for e in page.by_class("add")]
    deleted = [e.text for e in page.by_class("del")]
    assert added == ["+print('new')\n"]
    assert deleted == ["-print('old')\n"]
    assert [e.text for e in page.by_class("note")] == [
        "(binary file, 12 bytes, content not shown)\n"
    ]
    [check] = page.by_class("check-output")
    assert "Command output of tests-pass: exit 1" in check.text
    assert "FAILED test_app.py::test_new - AssertionError" in check.text
    assert "open" in check.attrs  # the check failed


def test_errors_are_shown_as_errors() -> None:
    errored = combine_trials(
        [errored_trial(1, "agent: HTTP 500 from the endpoint")],
        skill="s",
        skill_dir=str(ROOT / "skills" / "s"),
        name="scenario-broken",
        description="about scenario-broken",
        skill_scenarios=["scenario-broken", "scenario-half"],
    )
    half = scenario(
        "scenario-half",
        [trial(1, [judged("clear", 10, True)]), errored_trial(2, "judge: no verdict parsed")],
        names=["scenario-broken", "scenario-half"],
    )

    page = parse(render([errored, half]))

    broken = page.scenario("scenario-broken")
    [alert] = page.by_class("error-box", within=broken)
    assert alert.text == "Erroragent: HTTP 500 from the endpoint"
    assert alert.attrs["role"] == "alert"
    assert "about scenario-broken" in broken.text
    assert "(error:" not in broken.text  # the description without the error suffix
    assert broken.attrs["data-flags"] == "failed errored"
    partly = page.scenario("scenario-half")
    assert "1 of 2 trials errored; trial 2: judge: no verdict parsed" in partly.text
    second = page.by_class("trial", within=partly)[1]
    assert page.by_class("error-box", within=second)[0].text == "Errorjudge: no verdict parsed"


def test_trials_are_shown_one_by_one_with_the_interval_and_their_disagreement() -> None:
    trials = [
        trial(1, [judged("clear", 10, True), judged("tested", 10, True)]),
        trial(2, [judged("clear", 10, True), judged("tested", 10, False, "skipped a test")]),
        trial(3, [judged("clear", 10, True), judged("tested", 10, True)]),
    ]
    steady = [trial(n, [judged("clear", 10, True)]) for n in (1, 2, 3)]
    names = ["scenario-steady", "scenario-wobbly"]

    page = parse(
        render(
            [
                scenario("scenario-wobbly", trials, names=names),
                scenario("scenario-steady", steady, names=names),
            ]
        )
    )

    wobbly = page.scenario("scenario-wobbly")
    assert wobbly.attrs["data-flags"] == "failed flaky"
    assert page.scenario("scenario-steady").attrs["data-flags"] == ""
    trials_shown = page.by_class("trial", within=wobbly)
    assert [e.text.split(":")[0] for e in trials_shown] == ["Trial 1", "Trial 2", "Trial 3"]
    assert "skipped a test" in trials_shown[1].text
    assert "open" in trials_shown[1].attrs  # the first trial that failed
    assert "open" not in trials_shown[0].attrs
    assert "mean over 3 trials 83.3%; 2 of 3 trials passed" in wobbly.text
    assert "95% CI" in wobbly.text
    assert "2/3 passed" in wobbly.text  # the criterion's trials
    assert len(page.by_class("ci")) == 2  # each bar draws its interval


def test_the_baseline_arm_the_uplift_and_the_earlier_run_are_shown() -> None:
    names = ["scenario-a", "scenario-b"]
    results = [
        scenario(
            "scenario-a",
            [trial(1, [judged("rule", 10, True)])],
            names=names,
            baseline=[trial(1, [judged("rule", 10, False, "ignored the rule")])],
        ),
        scenario(
            "scenario-b",
            [trial(1, [judged("rule", 10, True)])],
            names=names,
            baseline=[trial(1, [judged("rule", 10, True)])],
        ),
    ]
    changes = SkillChanges(
        skill="s",
        baseline="20260301T000000Z.jsonl",
        tolerance=5.0,
        scenarios=(
            ScenarioChange(
                "scenario-a",
                REGRESSION,
                100.0,
                0.0,
                change=-100.0,
                criteria=(CriterionFlip("rule", True, False),),
            ),
            ScenarioChange("scenario-b", UNCHANGED, 100.0, 100.0, change=0.0),
        ),
    )

    page = parse(render(results, extras={"changes": [changes.to_dict()]}))

    assert "Uplift against bare" in page.text
    assert "With the skill 100.0%, bare 50.0% over 2 scenarios" in page.text
    assert "verdict: inconclusive" in page.text
    a, b = page.scenario("scenario-a"), page.scenario("scenario-b")
    assert a.attrs["data-flags"] == "changed"  # the uplift moved it and the earlier run did
    assert b.attrs["data-flags"] == ""
    assert "ignored the rule" in a.text  # the baseline arm's reason
    assert "Against the earlier run: regression" in a.text
    assert "rule: pass→fail" in a.text
    assert "Compared with 20260301T000000Z.jsonl" in page.text


def test_a_partial_run_says_so() -> None:
    names = ["scenario-a", "scenario-b"]
    results = [scenario("scenario-a", [trial(1, [judged("clear", 10, True)])], names=names)]

    partial = parse(render(results))
    interrupted = parse(render(results, complete=False))

    assert "partial run: 1 of 2 scenarios; threshold 95% not enforced" in partial.text
    assert "PARTIAL" in partial.text
    assert "Partial results: this run did not finish" in interrupted.text


def test_several_judge_votes_are_shown_vote_by_vote() -> None:
    votes = [
        {"vote": 1, "cached": True, "verdicts": {"clear": {"pass": True, "reason": "plain"}}},
        {"vote": 2, "cached": False, "verdicts": {"clear": {"pass": False, "reason": "vague"}}},
        {"vote": 3, "cached": False, "verdicts": {"clear": {"pass": True, "reason": "fine"}}},
    ]
    criterion = CriterionResult("clear", True, 10, 10, "plain", votes=(2, 3))
    result = scenario("scenario-x", [trial(1, [criterion], answers={"judge": votes})])

    page = parse(render([result]))

    [shown] = page.by_class("votes")
    rows = [
        " | ".join(cell.text for cell in page.all("td") if cell.parent is row)
        for row in page.all("tr")
        if row.within(shown)
    ]
    assert rows[1:] == [
        "1 (cached) | clear | ✓ pass | plain",
        "2 | clear | ✗ fail | vague",
        "3 | clear | ✓ pass | fine",
    ]
    assert "2/3 passed" in page.scenario("scenario-x").text


def test_answers_the_page_does_not_know_are_shown_as_json() -> None:
    answers = {"judge": ["not a vote"], "style": [{"score": 3, "note": "<tabs>"}]}
    result = scenario("scenario-x", [trial(1, [judged("clear", 10, True)], answers=answers)])

    page = parse(render([result]))

    shown = [e.text for e in page.by_class("answers")]
    assert len(shown) == 2
    assert "Answers of judge" in shown[0]
    assert '"not a vote"' in shown[0]
    assert '"note": "<tabs>"' in shown[1]


# --- the command: python -m pytest_openkata html LOG [-o PATH] -------------------------------


@pytest.fixture
def log_file(tmp_path: Path) -> Path:
    path = tmp_path / "runs" / "20260304T050607Z.jsonl"
    path.parent.mkdir()
    path.write_text(log_text(two_scenarios()))
    return path


def test_html_renders_a_log_beside_it_and_never_over_a_page(
    log_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(log_file)]) == 0
    assert main([str(log_file)]) == 0

    first, second = log_file.with_suffix(".html"), log_file.with_name(log_file.stem + "-2.html")
    assert capsys.readouterr().out.splitlines() == [str(first), str(second)]
    assert first.read_bytes() == second.read_bytes()
    assert first.read_text() == render_html(read_run_log(log_file))


def test_html_writes_where_o_says(
    log_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "pages" / "run.html"

    assert main([str(log_file), "-o", str(target)]) == 0

    assert capsys.readouterr().out == f"{target}\n"
    assert "scenario-bad" in parse(target.read_text()).text


def test_html_refuses_an_output_that_is_a_folder(
    log_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(log_file), "-o", str(tmp_path)]) == 2

    assert f"{tmp_path} is a folder" in capsys.readouterr().err
    assert list(tmp_path.glob("*.html")) == []


def test_html_with_bad_arguments_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2

    assert "the following arguments are required: log" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json\n", "line 1: not JSON"),
        ('{"record": "trial"}\n', "line 1: not a run log"),
        (None, "cannot read the run log"),
    ],
)
def test_html_of_a_log_it_cannot_read_says_why_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, message: str
) -> None:
    log = tmp_path / "broken.jsonl"
    if content is not None:
        log.write_text(content)

    assert main([str(log)]) == 2

    captured = capsys.readouterr()
    assert captured.out == ""
    assert str(log) in captured.err
    assert message in captured.err
    assert not log.with_suffix(".html").exists()


def test_html_of_a_log_with_a_broken_comparison_record_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "run.jsonl"
    log.write_text(log_text(two_scenarios(), extras={"changes": [{"skill": "s"}]}))

    assert main([str(log)]) == 2

    assert "comparison record 1 cannot be read" in capsys.readouterr().err


def test_python_m_pytest_openkata_html_runs_as_users_run_it(log_file: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest_openkata", "html", str(log_file)],
        capture_output=True,
        text=True,
        check=False,
    )

    written = log_file.with_suffix(".html")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{written}\n", "")


# --- the reporter of a real run (--eval-html) -------------------------------------------------


def _run_log(root: Path) -> Path:
    [log] = (root / ".openkata" / "runs").glob("*.jsonl")
    return log


def test_eval_html_writes_the_page_the_run_log_renders_to_and_never_over_one(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(
        pytester.path, "s", {"scenario-a": {"clear": 10, "tested": 5}, "scenario-b": {"clear": 1}}
    )
    script.verdicts = {"tested": (False, "no tests were added")}
    args = ("skills/s", *eval_args(endpoint.base_url, "--eval-html", "out/report.html"))

    result = pytester.runpytest(*args)

    result.stdout.fnmatch_lines(["HTML report: out/report.html"])
    page = pytester.path / "out" / "report.html"
    # Rendered live, it is byte for byte what its run log renders to afterwards.
    assert page.read_text() == render_html(read_run_log(_run_log(pytester.path)))
    assert "no tests were added" in parse(page.read_text()).text
    assert "Do the task of scenario-a." in parse(page.read_text()).text  # the task, from the log

    for log in (pytester.path / ".openkata" / "runs").iterdir():
        log.unlink()
    again = pytester.runpytest(*args)

    again.stdout.fnmatch_lines(["HTML report: out/report-2.html"])
    assert (pytester.path / "out" / "report-2.html").is_file()


def test_eval_html_is_written_for_a_partial_run_and_says_partial(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"clear": 10}, "scenario-b": {"clear": 10}})

    result = pytester.runpytest(
        "skills/s/evals/scenario-a", *eval_args(endpoint.base_url, "--eval-html", "page.html")
    )

    assert result.ret == pytest.ExitCode.OK
    text = parse((pytester.path / "page.html").read_text()).text
    assert "partial run: 1 of 2 scenarios" in text
    assert "scenario-b" not in text


def test_an_eval_html_that_cannot_be_written_fails_the_run_and_says_why(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"clear": 10}})
    (pytester.path / "taken").mkdir()

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url, "--eval-html", "taken"))

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["Not written: could not write the HTML report taken (--eval-html): *folder*"]
    )
    assert "1 report not written" in result.stdout.lines[-1]
    assert list((pytester.path / "taken").iterdir()) == []


# --- the browser tests without chromium ------------------------------------------------------

BROWSER_CONFTEST = Path(__file__).resolve().parent.parent / "browser" / "conftest.py"


@pytest.fixture
def browser_suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the browser tests' conftest with a test that needs the browser, and one
    outside it that does not, on a machine where chromium is not where it is looked for."""
    folder = pytester.path / "browser"
    folder.mkdir()
    (folder / "conftest.py").write_text(BROWSER_CONFTEST.read_text())
    (folder / "test_page.py").write_text("def test_page(browser):\n    assert browser\n")
    pytester.makepyfile(test_other="def test_other():\n    pass\n")
    monkeypatch.setenv("OPENKATA_CHROMIUM", str(pytester.path / "no-chromium"))
    return folder


def test_without_chromium_the_browser_tests_are_deselected_with_a_line_saying_so(
    pytester: pytest.Pytester, browser_suite: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)

    result = pytester.runpytest_subprocess("-p", "no:randomly")

    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(
        [f"deselected 1 browser test: chromium not found at {pytester.path / 'no-chromium'}*"]
    )


def test_without_chromium_on_ci_the_browser_tests_fail(
    pytester: pytest.Pytester, browser_suite: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")

    result = pytester.runpytest_subprocess("-p", "no:randomly")

    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines([f"*chromium not found at {pytester.path / 'no-chromium'}*CI*"])


def test_the_engine_of_a_pool_that_ran_a_trial_and_the_engines_lost_under_it_are_shown() -> None:
    moved = trial(1, [judged("clear", 10, True)])
    trace = moved.trace
    assert trace is not None
    moved = TrialResult(
        **{
            **moved.__dict__,
            "trace": TrialTrace(
                **{**trace.__dict__, "engine": "b", "lost_engines": ("engine a: it died",)}
            ),
        }
    )
    page = parse(render([scenario("scenario-0", [moved]), scenario("scenario-1", [trial(1, [])])]))

    [shown] = page.by_class("engine", within=page.scenario("scenario-0"))
    assert shown.text == "Engine: b; ran again after engine a: it died"
    assert page.by_class("engine", within=page.scenario("scenario-1")) == []


def test_a_hostile_trigger_query_shows_as_text_on_the_page_and_in_markdown() -> None:
    from pytest_openkata.providers.reporters.markdown import render_markdown
    from tests.support.results import logged

    hostile = "<script>alert(1)</script> | `code` \x1b[2J"
    query = {
        "skill": "skills/s",
        "name": "trigger-01",
        "query": hostile,
        "should_trigger": True,
        "activations": ["not loaded", "not loaded", "loaded"],
        "loads": 1,
        "runs": 3,
        "passed": False,
    }
    run = logged([], extras={"trigger_query": [query], "trigger_skill": []})

    page = render_html(run)
    markdown = render_markdown(run)

    assert "<script>alert" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "skills/s: 0 of 1 trigger queries passed" in page
    assert "<script>" not in markdown
    assert "| skills/s: trigger-01 | yes | 1 of 3 runs | &lt;script&gt;" in markdown
