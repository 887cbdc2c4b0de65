"""The run viewer over the logs of real runs (pytester, a scripted endpoint on loopback), served
on a free loopback port and driven in a real headless chromium: the runs list filters and
leads to a run, a trial and a comparison; j/k walk the failures; a human verdict is written
beside the logs and read back; a run page follows its growing log; hostile model text stays
text; a viewer beyond loopback answers nothing without its token."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import httpx
import pytest

from pytest_openkata.core.runlog import RunInfo, log_lines
from pytest_openkata.core.verdict_labels import read_labels
from pytest_openkata.infra.processes import host_tag
from pytest_openkata.viewer.app import COMPARE_ROWS, RUN_ROWS
from pytest_openkata.viewer.guard import POLICY, GuardedApp
from tests.browser.test_html_report import png_colours
from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_skill
from tests.support.live_runs import (
    HeldScenario,
    finish,
    live_log_with,
    live_logs,
    start_run,
    wait_for,
)
from tests.support.results import ROOT, SETTINGS, judged, scenario
from tests.support.viewer_server import serving

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

HOSTILE = (
    '</script><script>window.PWNED=1</script><img src=x onerror="window.PWNED=2">'
    '<b id="injected">x</b>\u2028after a line separator\u2029and a paragraph one\x07\x1b[31m'
)
REASON = "no test covers the empty input"
LOGS = ".openkata/runs"


@dataclass(frozen=True)
class Runs:
    """Two real runs of one skill: the first fails ``tested`` and answers hostile text in
    scenario-hostile, the second passes everything."""

    root: Path
    failing: str  # their logs, relative to root
    passing: str


def _run(pytester: pytest.Pytester, url: str) -> str:
    before = set((pytester.path / LOGS).glob("*.jsonl"))
    pytester.runpytest("skills/s", *eval_args(url, "--eval-threshold", "90", "--eval-cache", "off"))
    (log,) = set((pytester.path / LOGS).glob("*.jsonl")) - before
    return log.relative_to(pytester.path).as_posix()


@pytest.fixture
def runs(pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript) -> Runs:
    write_skill(
        pytester.path,
        "s",
        {"scenario-failing": {"clear": 10, "tested": 5}, "scenario-hostile": {"clear": 10}},
    )
    script.verdicts = {"tested": (False, REASON)}
    script.agent_reply_when = {"scenario-hostile": Reply.chat(HOSTILE)}
    failing = _run(pytester, endpoint.base_url)
    script.verdicts = {}
    passing = _run(pytester, endpoint.base_url)
    return Runs(pytester.path, failing, passing)


@contextmanager
def browsing(browser: Browser, base: str) -> Iterator[tuple[Page, list[str]]]:
    """A page of a fresh context, with every URL it requested."""
    context = browser.new_context(viewport={"width": 1280, "height": 1200})
    requested: list[str] = []
    try:
        page = context.new_page()
        page.on("request", lambda request: requested.append(request.url))
        yield page, requested
    finally:
        context.close()
        assert all(url.startswith(base) for url in requested), requested


def test_the_runs_list_filters_and_leads_to_a_run_a_trial_and_a_comparison(
    runs: Runs, browser: Browser
) -> None:
    with serving(runs.root) as base, browsing(browser, base) as (page, _):
        page.goto(base + "/")
        assert page.locator("tr.run-row").count() == 4  # two run logs, two results JSON
        assert page.locator("tr.run-row .kind").all_inner_texts() == ["(results JSON)"] * 2
        cell = page.locator("table.matrix tbody tr", has_text="s").locator("a")
        assert cell.inner_text() == "100.0%"  # the newest run of the skill and model
        assert len(png_colours(page.screenshot(full_page=True))) > 1

        page.select_option("select[name=gate]", "fail")
        page.select_option("select[name=kind]", "run log")
        with page.expect_navigation():
            page.click("form.filters button[type=submit]")
        assert page.locator("tr.run-row").count() == 1
        assert "gate=fail" in page.url  # a deep link to the filtered list
        with page.expect_navigation():
            page.click("a.run-link")
        assert page.url == f"{base}/run/{runs.failing}"
        assert page.locator("tr.scenario-row").count() == 2

        with page.expect_navigation():  # scenario-failing's trial
            page.click("a.trial-link.fail")
        assert page.get_by_text(REASON).is_visible()
        assert page.locator("details.prompt").get_attribute("open") is None  # collapsed
        page.keyboard.press("j")
        assert page.locator("tr.current").inner_text().startswith("tested")
        assert page.url.endswith("#criterion-1")
        page.keyboard.press("x")  # unfold everything
        assert page.locator("details.prompt").get_attribute("open") is not None
        page.reload()  # the deep link leads back to the failure
        assert page.locator("tr.current").inner_text().startswith("tested")

        page.goto(f"{base}/?order=asc&kind=run+log")
        page.locator("input[name=a]").first.check()  # the older run: the failing one
        page.locator("input[name=b]").nth(1).check()
        with page.expect_navigation():
            page.click("text=Compare A with B")
        row = page.locator("tr.pair", has_text="scenario-failing")
        assert row.locator(".flips").inner_text() == "tested: fail → pass"
        assert row.locator(".delta").inner_text() == "+33.3"


def test_a_runs_baseline_arm_is_compared_with_its_own(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript, browser: Browser
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"clear": 10, "tested": 5}})
    script.agent_reply_when = {"Follow the rules": Reply.chat("with the skill")}
    script.agent_answer = "without the skill"
    pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url, "--eval-baseline", "without-skill")
    )
    [log] = (pytester.path / LOGS).glob("*.jsonl")
    with serving(pytester.path) as base, browsing(browser, base) as (page, _):
        page.goto(f"{base}/run/{LOGS}/{log.name}")
        assert page.locator("tr.scenario-row").count() == 2  # both arms
        with page.expect_navigation():
            page.click("#compare-arms")
        assert page.locator("h1").inner_text() == "Compare the arms of a run"
        page.locator("details.answers-pair summary").click()
        assert page.locator("pre.answer-a").text_content() == "without the skill"
        assert page.locator("pre.answer-b").text_content() == "with the skill"


def test_a_skills_results_json_is_a_run_too(runs: Runs, browser: Browser) -> None:
    with serving(runs.root) as base, browsing(browser, base) as (page, _):
        page.goto(f"{base}/?kind=results+JSON&gate=fail")
        with page.expect_navigation():
            page.click("a.run-link")
        assert "/evals/results/" in page.url
        assert page.locator("tr.scenario-row").count() == 2
        with page.expect_navigation():
            page.click("a.trial-link.fail")
        assert page.get_by_text(REASON).is_visible()
        assert page.locator("form.label-form").count() == 0  # verdicts go on run logs


def test_hostile_model_text_is_shown_as_text_on_the_trial_page_and_in_a_comparison(
    runs: Runs, browser: Browser
) -> None:
    with serving(runs.root) as base, browsing(browser, base) as (page, _):
        page.goto(f"{base}/run/{runs.failing}")
        with page.expect_navigation():
            page.locator("tr.scenario-row", has_text="scenario-hostile").locator("a").click()
        shown = page.locator("pre.agent-output")
        assert shown.is_visible()
        assert shown.text_content() == HOSTILE
        assert page.evaluate("typeof window.PWNED") == "undefined"
        assert page.query_selector("#injected") is None
        assert page.locator("img").count() == 0
        assert len(png_colours(page.screenshot())) > 1

        page.goto(f"{base}/compare?a={runs.failing}&b={runs.passing}")
        page.locator("details.answers-pair", has_text="scenario-hostile").locator("summary").click()
        assert page.locator("pre.answer-a").nth(1).text_content() == HOSTILE
        assert page.evaluate("typeof window.PWNED") == "undefined"


def test_a_human_verdict_is_written_beside_the_logs_and_read_back(
    runs: Runs, browser: Browser
) -> None:
    log = runs.root / runs.failing
    logged = log.read_bytes()
    with serving(runs.root) as base, browsing(browser, base) as (page, _):
        page.goto(f"{base}/run/{runs.failing}")
        with page.expect_navigation():
            page.click("a.trial-link.fail")
        row = page.locator("#criterion-1")
        row.locator("input[name=reviewer]").fill("ana")
        row.locator("input[name=note]").fill("a test of the empty input is there </pre>")
        with page.expect_navigation():
            row.locator("button[value=wrong]").click()
        assert page.url.endswith("#criterion-1")
        shown = page.locator("#criterion-1 .label-shown").inner_text()
        assert shown.startswith("Judge was wrong: human verdict pass by ana")

        page.goto(f"{base}/disagreements")
        first = page.locator("table.disagreements tbody tr").first
        assert first.locator("td").all_inner_texts()[:5] == [
            "skills/s",
            "scenario-failing",
            "tested",
            "1",
            "1",
        ]
        assert first.locator(".label-note").inner_text().endswith("</pre>")

    assert log.read_bytes() == logged  # never into the run log
    labels = log.with_name(f"{log.stem}.labels.jsonl")
    assert [json.loads(line) for line in labels.read_text().splitlines()] == [
        {
            "skill_dir": "skills/s",
            "scenario": "scenario-failing",
            "arm": "",
            "trial": 1,
            "criterion_index": 1,
            "criterion": "tested",
            "verdict": "pass",
            "reviewer": "ana",
            "note": "a test of the empty input is there </pre>",
        }
    ]
    [label] = read_labels(labels)  # as judge agreement reads it
    assert (label.criterion, label.passed) == ("tested", True)
    measured = subprocess.run(
        [sys.executable, "-m", "pytest_openkata", "agreement", str(log), "--labels", str(labels)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert measured.returncode == 0, measured.stderr
    assert "tested" in measured.stdout


def test_a_label_posted_without_the_viewers_form_key_is_refused(runs: Runs) -> None:
    with serving(runs.root) as base:
        answer = httpx.post(
            f"{base}/label",
            data={"log": runs.failing, "skill": "skills/s", "scenario": "scenario-failing",
                  "trial": "1", "criterion": "1", "judge": "wrong", "form_key": "guessed"},
        )  # fmt: skip
    assert answer.status_code == 403
    assert list((runs.root / LOGS).glob("*.labels.jsonl")) == []


def test_a_labels_file_that_cannot_be_read_is_named_on_the_trial_page(runs: Runs) -> None:
    log = runs.root / runs.failing
    log.with_name(f"{log.stem}.labels.jsonl").write_text('{"verdict": "maybe"}\n')
    query = "skill=skills/s&scenario=scenario-failing&arm=&trial=1"
    with serving(runs.root) as base:
        page = httpx.get(f"{base}/trial/{runs.failing}?{query}")
    assert page.status_code == 200
    assert REASON in page.text  # the trial is shown
    assert f"{log.stem}.labels.jsonl: line 1: field skill_dir is missing" in page.text


def test_the_run_page_follows_its_log_as_it_grows(runs: Runs, browser: Browser) -> None:
    lines = (runs.root / runs.failing).read_text().splitlines(keepends=True)
    growing = runs.root / LOGS / "20300101T000000Z.jsonl"
    first, rest = lines[:2], lines[2:]
    growing.write_text("".join(first) + rest[0][:10])  # a line not yet finished
    with serving(runs.root) as base, browsing(browser, base) as (page, _):
        page.goto(f"{base}/run/{LOGS}/20300101T000000Z.jsonl")
        assert page.locator("tr.scenario-row").all_inner_texts()[0].startswith("scenario-failing")
        assert page.locator("tr.scenario-row", has_text="scenario-hostile").count() == 0
        with growing.open("a") as more:
            more.write(rest[0][10:] + "".join(rest[1:]))
        page.locator("tr.scenario-row", has_text="scenario-hostile").wait_for()
        assert page.url == f"{base}/run/{LOGS}/20300101T000000Z.jsonl"


def test_a_run_in_progress_is_listed_running_and_its_page_follows_it_to_its_run_log(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript, browser: Browser
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 2}, "scenario-b": {"y": 1}})
    held = HeldScenario(script, "scenario-b")
    endpoint.respond_with(held)
    args = eval_args(endpoint.base_url, "--eval-concurrency", "1", "--eval-cache", "off")
    process = start_run(pytester.path, *args)
    try:
        live = wait_for(
            lambda: live_log_with(pytester.path, "scenario-a"), process, "scenario-a logged"
        )
        with serving(pytester.path) as base, browsing(browser, base) as (page, _):
            page.goto(f"{base}/")
            row = page.locator("tr.run-row", has_text=live.name)
            assert row.locator(".run-state").inner_text() == "running"
            with page.expect_navigation():
                row.locator("a.run-link").click()
            assert page.locator("#run-state").get_attribute("data-state") == "running"
            assert page.locator("tr.scenario-row").all_inner_texts()[0].startswith("scenario-a")
            assert page.locator("tr.scenario-row", has_text="scenario-b").count() == 0
            png = page.screenshot(full_page=True)
            assert len(png_colours(png)) > 1

            held.release()
            page.wait_for_url(re.compile(r".*/run/\.openkata/runs/[0-9TZ-]+\.jsonl$"))
            page.locator("tr.scenario-row", has_text="scenario-b").wait_for()
            assert page.locator("#run-state").count() == 0
            assert page.locator("tr.scenario-row").count() == 2
        assert process.wait(timeout=120) == pytest.ExitCode.OK
        assert live_logs(pytester.path) == []
    finally:
        held.release()
        if process.poll() is None:
            process.kill()
        finish(process)


def test_a_live_log_whose_run_is_gone_reads_interrupted(runs: Runs, browser: Browser) -> None:
    lines = (runs.root / runs.failing).read_text().splitlines(keepends=True)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    name = f"20300101T000000Z.{host_tag()}-{gone}.live.jsonl"
    head = {**json.loads(lines[0]), "complete": False, "in_progress": True}
    (runs.root / LOGS / name).write_text(json.dumps(head) + "\n" + lines[1])
    with serving(runs.root) as base, browsing(browser, base) as (page, _):
        page.goto(f"{base}/")
        row = page.locator("tr.run-row", has_text=name)
        assert row.locator(".run-state").inner_text() == "interrupted"
        with page.expect_navigation():
            row.locator("a.run-link").click()
        assert page.locator("#run-state").get_attribute("data-state") == "interrupted"
        assert page.locator("tr.scenario-row").count() == 1


def test_a_large_comparison_pages_its_scenarios_and_reads_only_the_shown_ones_answers(
    tmp_path: Path, browser: Browser
) -> None:
    folder = tmp_path / LOGS
    folder.mkdir(parents=True)
    count = COMPARE_ROWS + 50
    for name, flips in (("20261201T100000Z.jsonl", False), ("20261201T110000Z.jsonl", True)):
        results = [
            scenario(
                f"scenario-{n:04}",
                [judged("c", 1, not (flips and n == COMPARE_ROWS + 7))],
                output=f"answer {n:04} of {name}",
            )
            for n in range(count)
        ]
        info = RunInfo("2026-12-01T10:00:00Z", threshold=80, settings=SETTINGS)
        (folder / name).write_text(log_lines(info, results, ROOT))
    a, b = f"{LOGS}/20261201T100000Z.jsonl", f"{LOGS}/20261201T110000Z.jsonl"
    made: list[GuardedApp] = []
    with serving(tmp_path, made=made) as base, browsing(browser, base) as (page, _):
        page.goto(f"{base}/compare?a={a}&b={b}")
        assert page.locator("tr.pair").count() == COMPARE_ROWS
        assert (
            page.locator("pre.answer-a").first.text_content()
            == f"answer 0000 of {PurePosixPath(a).name}"
        )
        assert page.locator("pre.answer-b").last.text_content() == (
            f"answer {COMPARE_ROWS - 1:04} of {PurePosixPath(b).name}"
        )
        assert page.locator("tr.pair.failure").count() == 0
        with page.expect_navigation():
            page.click("#compare-pages a[rel=next]")
        assert page.locator("tr.pair").count() == 50
        flipped = page.locator("tr.pair.failure")
        assert flipped.inner_text().startswith(f"skills/s\tscenario-{COMPARE_ROWS + 7:04}")
        assert page.locator("pre.answer-b").first.text_content() == (
            f"answer {COMPARE_ROWS:04} of {PurePosixPath(b).name}"
        )
    # The runs the comparison kept in memory hold no answer: those shown were read alone.
    kept = made[0].app.state.viewer.logs.kept_runs()  # type: ignore[attr-defined]
    assert len(kept) == 2
    assert all(not t.trial.trace.output for run in kept for t in run.trials)  # type: ignore[union-attr]


def test_a_run_of_more_scenarios_than_a_page_holds_shows_them_a_page_at_a_time(
    tmp_path: Path, browser: Browser
) -> None:
    folder = tmp_path / LOGS
    folder.mkdir(parents=True)
    results = [
        scenario(f"scenario-{n:04}", [judged("c", 1, n != RUN_ROWS + 2)], skill=skill)
        for skill, numbers in (("a", range(RUN_ROWS - 3)), ("b", range(RUN_ROWS - 3, RUN_ROWS + 5)))
        for n in numbers
    ]
    info = RunInfo("2026-12-01T10:00:00Z", threshold=80, settings=SETTINGS)
    (folder / "20261201T100000Z.jsonl").write_text(log_lines(info, results, ROOT))
    with serving(tmp_path) as base, browsing(browser, base) as (page, _):
        page.goto(f"{base}/run/{LOGS}/20261201T100000Z.jsonl")
        assert page.locator("tr.scenario-row").count() == RUN_ROWS
        assert page.locator("section.skill h2").all_inner_texts()[1].startswith("skills/b")
        assert page.locator("tr.scenario-row.failure").count() == 0
        with page.expect_navigation():
            page.click("#run-pages a[rel=next]")
        assert page.url.endswith("?page=2")
        rows = page.locator("tr.scenario-row")
        assert rows.count() == 5
        assert rows.first.inner_text().startswith(f"scenario-{RUN_ROWS:04}")
        assert page.locator("section.skill").count() == 1  # b goes on; a is all on page 1
        page.keyboard.press("j")
        current = page.locator("tr.scenario-row.current")
        assert current.inner_text().startswith(f"scenario-{RUN_ROWS + 2:04}")


def test_beyond_loopback_every_request_needs_the_token(runs: Runs, browser: Browser) -> None:
    with serving(runs.root, token="the-printed-token") as base:
        assert httpx.get(f"{base}/").status_code == 403
        assert httpx.get(f"{base}/static/viewer.css").status_code == 403
        assert httpx.get(f"{base}/?token=wrong").status_code == 403
        with browsing(browser, base) as (page, _):
            page.goto(f"{base}/?token=the-printed-token&gate=fail&kind=run+log")
            assert page.url == f"{base}/?gate=fail&kind=run+log"  # the token went to a cookie
            assert page.locator("tr.run-row").count() == 1
            with page.expect_navigation():
                page.click("a.run-link")
            assert page.locator("tr.scenario-row").count() == 2


def test_every_answer_carries_the_policy_and_a_foreign_host_name_is_refused(runs: Runs) -> None:
    with serving(runs.root) as base:
        answer = httpx.get(f"{base}/run/{runs.failing}")
        assert answer.headers["content-security-policy"] == POLICY
        assert "default-src 'none'" in POLICY
        rebound = httpx.get(f"{base}/", headers={"Host": "attacker.example:80"})
        assert rebound.status_code == 421
        outside = httpx.get(f"{base}/run/..%2F..%2Fetc%2F20300101T000000Z.jsonl")
        assert outside.status_code == 404


def test_the_view_command_serves_the_folder_and_stops_on_interrupt(runs: Runs) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_openkata", "view", str(runs.root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        match = re.search(r"(http\S+)", first)
        assert match, first
        assert match.group(1).startswith("http://127.0.0.1:")
        assert "token" not in match.group(1)
        page = httpx.get(match.group(1))
        assert page.status_code == 200
        assert runs.failing in page.text
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
