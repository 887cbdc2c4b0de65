"""The HTML report of a real run (pytester, a scripted endpoint on loopback, ``--eval-html``)
opened in a real headless chromium: it renders, holds every scenario and failing reason,
shows a hostile agent output as text without running it, filters and folds with JavaScript,
reads without it, and makes no request but for its own file."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_openkata.contracts.results import Turn
from pytest_openkata.contracts.transcripts import SkillLoad, Step, Transcript
from pytest_openkata.core.runlog import RunInfo, log_lines, parse_run_log
from pytest_openkata.providers.reporters.html import render_html
from tests.browser.conftest import CHROMIUM
from tests.support.endpoint import RecordedRequest, Reply, ScriptedEndpoint
from tests.support.evals import CONTEXT_LINE, CRITERION_LINE, EvalScript, eval_args, write_skill
from tests.support.results import ROOT, judged, scenario

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

REPO = Path(__file__).resolve().parents[2]
HOSTILE = (
    '</script><script>window.PWNED=1</script><img src=x onerror="window.PWNED=2">'
    '<b id="injected">x</b>'
)
REASON = "no test covers the empty input"
SCENARIOS = ["scenario-failing", "scenario-fine", "scenario-hostile"]
# The catalogue's colours of the bars (the page's CSS), as RGB.
GREEN, RED = (0x1A, 0x7F, 0x37), (0xCF, 0x22, 0x2E)


# --- a PNG's colours, decoded with the standard library ---------------------------------------


def _paeth(left: int, up: int, corner: int) -> int:
    estimate = left + up - corner
    distances = abs(estimate - left), abs(estimate - up), abs(estimate - corner)
    return (left, up, corner)[distances.index(min(distances))]


def png_colours(data: bytes) -> set[tuple[int, ...]]:
    """The distinct RGB colours of an 8-bit, non-interlaced RGB or RGBA PNG (as chromium
    writes screenshots): its scanlines inflated and unfiltered (PNG spec, section 9)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, header, compressed = 8, b"", b""
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            compressed += body
        position += 12 + length
    width, height, depth, colour_type, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert (depth, interlace) == (8, 0), header
    assert colour_type in (2, 6), header
    size = 3 if colour_type == 2 else 4
    raw = zlib.decompress(compressed)
    stride = width * size
    previous = bytearray(stride)
    colours: set[tuple[int, ...]] = set()
    for row in range(height):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - size] if i >= size else 0
            up = previous[i]
            corner = previous[i - size] if i >= size else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                line[i] = (line[i] + _paeth(left, up, corner)) & 0xFF
        colours.update(tuple(line[i : i + 3]) for i in range(0, stride, size))
        previous = line
    return colours


# --- a real run and its page -------------------------------------------------------------------


def run_with_html(pytester: pytest.Pytester, url: str, *extra: str) -> Path:
    result = pytester.runpytest("skills/s", *eval_args(url, "--eval-html", "report.html", *extra))
    result.stdout.fnmatch_lines(["HTML report: report.html"])
    return pytester.path / "report.html"


@pytest.fixture
def report(pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript) -> Path:
    """The page of a run of three scenarios: one fails a criterion with a reason, one has a
    hostile agent output, one passes."""
    write_skill(
        pytester.path,
        "s",
        {
            "scenario-failing": {"clear": 10, "tested": 5},
            "scenario-fine": {"clear": 10},
            "scenario-hostile": {"clear": 10},
        },
    )
    script.verdicts = {"tested": (False, REASON)}
    script.agent_reply_when = {"scenario-hostile": Reply.chat(HOSTILE)}
    return run_with_html(pytester, endpoint.base_url)


@dataclass
class Opened:
    page: Page
    requests: list[str]


@contextmanager
def opened(browser: Browser, path: Path, *, javascript: bool = True) -> Iterator[Opened]:
    """The page opened from its file, with every request it makes recorded."""
    context = browser.new_context(
        java_script_enabled=javascript, viewport={"width": 1280, "height": 1600}
    )
    try:
        page = context.new_page()
        requests: list[str] = []
        page.on("request", lambda request: requests.append(request.url))
        page.goto(path.as_uri())
        page.wait_for_load_state("load")
        yield Opened(page, requests)
    finally:
        context.close()


def visible_scenarios(page: Page) -> list[str]:
    return [
        scenario.locator(".name").inner_text()
        for scenario in page.locator("details.scenario").all()
        if scenario.is_visible()
    ]


# --- the tests ---------------------------------------------------------------------------------


def test_the_page_of_a_run_renders_and_nothing_in_it_runs_or_loads(
    report: Path, browser: Browser
) -> None:
    with opened(browser, report) as view:
        page = view.page
        colours = png_colours(page.screenshot(full_page=True))

        assert len(colours) > 1
        assert {GREEN, RED} <= colours  # a failing bar and a passing one, in the catalogue's
        assert page.locator("details.scenario .name").all_inner_texts() == SCENARIOS
        assert page.get_by_text(REASON).is_visible()  # the failing scenario is open
        assert page.evaluate("typeof window.PWNED") == "undefined"
        assert page.query_selector("#injected") is None
        assert page.locator("img").count() == 0
        page.click("#expand-all")
        hostile = page.locator("details.scenario", has_text="scenario-hostile")
        output = hostile.locator("pre.agent-output")
        assert output.is_visible()
        assert output.inner_text() == HOSTILE
        assert page.evaluate("typeof window.PWNED") == "undefined"
        assert view.requests == [report.as_uri()]


def test_the_failed_filter_hides_passing_scenarios_and_all_folds_and_unfolds(
    report: Path, browser: Browser
) -> None:
    with opened(browser, report) as view:
        page = view.page
        assert page.locator("#controls").is_visible()
        assert visible_scenarios(page) == SCENARIOS

        page.click("button[data-filter=failed]")

        assert visible_scenarios(page) == ["scenario-failing"]
        assert page.locator("#shown-count").inner_text() == "1 of 3 scenarios shown"
        assert page.get_attribute("button[data-filter=failed]", "aria-pressed") == "true"
        page.click("button[data-filter=errored]")
        assert visible_scenarios(page) == []
        assert page.get_by_text("No scenario of this skill matches the filter.").is_visible()
        page.click("button[data-filter=all]")
        assert visible_scenarios(page) == SCENARIOS

        open_count = "els => els.filter(e => e.open).length"
        total = page.locator("main details").count()
        page.click("#collapse-all")
        assert page.eval_on_selector_all("main details", open_count) == 0
        assert not page.get_by_text(REASON).is_visible()
        page.click("#expand-all")
        assert page.eval_on_selector_all("main details", open_count) == total
        assert page.get_by_text(REASON).is_visible()
        assert view.requests == [report.as_uri()]


def test_without_javascript_the_page_holds_everything(report: Path, browser: Browser) -> None:
    with opened(browser, report, javascript=False) as view:
        page = view.page
        colours = png_colours(page.screenshot())

        assert {GREEN, RED} <= colours
        assert not page.locator("#controls").is_visible()  # no filter that cannot work
        assert visible_scenarios(page) == SCENARIOS
        assert page.get_by_text(REASON).is_visible()
        hostile = page.locator("details.scenario", has_text="scenario-hostile")
        assert hostile.locator("pre.agent-output").text_content() == HOSTILE
        assert page.query_selector("#injected") is None
        hostile.locator(":scope > summary").click()  # <details> unfold without any script
        assert hostile.locator("pre.agent-output").is_visible()
        assert view.requests == [report.as_uri()]


SKILL_RULE = "Follow the rules."  # what write_skill puts into every SKILL.md
SKILLED, UNSKILLED = "SKILLED: follows the rules.", "A plain answer."


@dataclass
class WobblyJudge:
    """Agents answer :data:`SKILLED` with the skill in the prompt, else :data:`UNSKILLED`;
    the judge passes ``applies-rule`` for a skilled answer only, and ``wobbly`` on every
    other call per scenario and arm (its trials disagree)."""

    calls: dict[tuple[str, bool], int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: RecordedRequest) -> Reply:
        messages = request.json["messages"]
        user = messages[-1]["content"]
        if messages[0]["role"] != "system":
            return Reply.chat(SKILLED if SKILL_RULE in user else UNSKILLED)
        skilled = "SKILLED" in user.split("## Evaluation Criteria")[0]
        context = CONTEXT_LINE.search(user)
        key = (context.group(1) if context else "", skilled)
        with self._lock:
            self.calls[key] = count = self.calls.get(key, 0) + 1
        verdicts = [
            {
                "name": name,
                "pass": skilled if name == "applies-rule" else count % 2 == 1,
                "reason": f"{name} on call {count}",
            }
            for name, _ in CRITERION_LINE.findall(user)
        ]
        return Reply.chat(json.dumps(verdicts))


def test_trials_flakiness_and_the_baseline_arm_in_the_page(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, browser: Browser
) -> None:
    endpoint.respond_with(WobblyJudge())
    write_skill(
        pytester.path,
        "s",
        {
            "scenario-steady": {"applies-rule": 10},
            "scenario-wobbly": {"applies-rule": 10, "wobbly": 5},
        },
    )
    path = run_with_html(
        pytester, endpoint.base_url, "--eval-trials", "3", "--eval-baseline", "without-skill"
    )

    with opened(browser, path) as view:
        page = view.page
        page.click("button[data-filter=flaky]")
        assert visible_scenarios(page) == ["scenario-wobbly"]
        page.click("button[data-filter=changed]")  # the skill moves applies-rule in both
        assert visible_scenarios(page) == ["scenario-steady", "scenario-wobbly"]
        page.click("#expand-all")
        wobbly = page.locator("details.scenario", has_text="scenario-wobbly")
        own_trials = wobbly.locator(":scope > .body > details.trial")
        assert own_trials.count() == 3
        assert "wobbly on call 2" in wobbly.inner_text()
        baseline = wobbly.locator("details.baseline")
        heading = baseline.locator(":scope > summary").inner_text()
        assert heading.startswith("Baseline arm without-skill")
        assert baseline.locator(":scope > details.trial").count() == 3
        uplift = page.locator("section.uplift")
        assert uplift.inner_text().startswith("Uplift against without-skill")
        assert "With the skill" in uplift.inner_text()
        assert page.locator("details.scenario .bar .ci").count() >= 1
        assert view.requests == [path.as_uri()]


def test_the_screenshot_script_takes_a_picture_of_a_run_log(
    report: Path, browser: Browser, tmp_path: Path
) -> None:
    [log] = (report.parent / ".openkata" / "runs").glob("*.jsonl")
    target = tmp_path / "images" / "html-report.png"
    command = [
        sys.executable,
        str(REPO / "scripts" / "html_screenshot.py"),
        str(log),
        "-o",
        str(target),
        "--chromium",
        str(CHROMIUM),
    ]

    done = subprocess.run(command, capture_output=True, text=True, check=False)
    again = subprocess.run(command, capture_output=True, text=True, check=False)

    assert (done.returncode, done.stdout, done.stderr) == (0, f"{target}\n", "")
    assert again.stdout == f"{target.with_name('html-report-2.png')}\n"  # never over one
    assert {GREEN, RED} <= png_colours(target.read_bytes())


def test_a_transcript_shows_its_tool_calls_folded_and_a_hostile_result_as_text(
    tmp_path: Path, browser: Browser
) -> None:
    transcript = Transcript(
        "claude stream-json",
        steps=(
            Step.tool_call("Skill", '{"skill": "s"}', result="loaded", status="ok"),
            Step.tool_call("Bash", '{"command": "ls"}', result=HOSTILE, status="error"),
        ),
        skills_loaded=(SkillLoad("s"),),
        turns=2,
    )
    result = scenario("scenario-a", [judged("clear", 10, False, REASON)])
    [trial] = result.trials
    assert trial.trace is not None
    result = replace(
        result, trials=[replace(trial, trace=replace(trial.trace, transcript=transcript))]
    )
    info = RunInfo("2026-03-04T05:06:07Z", settings={"agent": "claude", "model": "m"})
    page_file = tmp_path / "report.html"
    page_file.write_text(render_html(parse_run_log(log_lines(info, [result], ROOT))))

    with opened(browser, page_file) as view:
        page = view.page
        summary = page.locator("details.transcript > summary")
        summary.click()
        assert page.get_by_text("Skills loaded:").is_visible()
        calls = page.locator("li.tool-call > details")
        assert calls.count() == 2
        assert (
            page.eval_on_selector_all("li.tool-call > details", "els => els.some(e => e.open)")
            is False
        )
        assert "skill-load" in (page.locator("li.tool-call").first.get_attribute("class") or "")
        calls.nth(1).locator("summary").click()
        shown = calls.nth(1).locator("pre").nth(1)
        assert shown.inner_text() == HOSTILE
        assert page.evaluate("typeof window.PWNED") == "undefined"
        assert page.query_selector("#injected") is None
        assert view.requests == [page_file.as_uri()]


def test_a_conversations_turns_show_as_text_however_hostile(
    tmp_path: Path, browser: Browser
) -> None:
    turns = (
        Turn("Do the task.", "A first answer."),
        Turn(HOSTILE, f"An answer quoting {HOSTILE}"),
    )
    result = scenario("scenario-a", [judged("clear", 10, False, REASON)])
    [trial] = result.trials
    assert trial.trace is not None
    result = replace(result, trials=[replace(trial, trace=replace(trial.trace, turns=turns))])
    info = RunInfo("2026-03-04T05:06:07Z", settings={"agent": "claude", "model": "m"})
    page_file = tmp_path / "report.html"
    page_file.write_text(render_html(parse_run_log(log_lines(info, [result], ROOT))))

    with opened(browser, page_file) as view:
        page = view.page
        conversation = page.locator("details.conversation")
        assert conversation.locator("summary").text_content() == "Conversation: 2 turns"
        users = conversation.locator("pre.turn-user").all_text_contents()
        assert users == ["Do the task.", HOSTILE]
        answer = conversation.locator("pre.turn-agent").nth(1).text_content()
        assert answer == f"An answer quoting {HOSTILE}"
        assert page.evaluate("typeof window.PWNED") == "undefined"
        assert page.query_selector("#injected") is None
        assert view.requests == [page_file.as_uri()]
