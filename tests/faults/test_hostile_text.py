"""Hostile text from a model survives every report: whatever characters an agent's answer or a
judge's reason holds, the run finishes with its gate line, every report is written and reads back
equal, the terminal shows control characters instead of obeying them, and the views that read a
run log afterwards (the ``html`` command, ``--eval-compare``, the shard ``merge``) accept it.

Each scenario of one skill gets one character of the list: the agent's answer and the judge's
reason hold it. The texts come from a real scripted endpoint on loopback, inside the JSON bodies
an OpenAI-compatible endpoint sends, so a lone surrogate arrives as the ``\\ud800`` escape a
hostile endpoint can send (and reads back as U+FFFD, as Go's decoder makes it).
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_openkata.core.runlog import read_run_log
from tests.support.endpoint import RecordedRequest, Reply, ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_scenario, write_skill
from tests.support.readers import PARSER, inline_text, parse
from tests.support.shards import NO_CACHE, merge, reports, timeless
from tests.support.subprocesses import run_pytest

# Every character Python's str.splitlines ends a line at, but "\n" itself.
LINE_BOUNDARIES = ["\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
CONTROLS = ["\x00", "\x01", "\x07", "\x08", "\x1b", "\x7f", "\x9b", "\u202e", "\u2066"]
LONE_SURROGATE = "\ud800"  # sent as the JSON escape \ud800
REPLACEMENT = "\ufffd"
# A reason that would erase the judge's real "✗" line and print a green "✓" in its place, and an
# answer that would clear the screen and retitle the window.
FAKE_PASS = "\r\x1b[2K\x1b[32m    ✓ faked (50/50)\x1b[0m"
CLEAR_AND_RETITLE = "\x1b[2J\x1b[H\x1b]0;pwned\x07"
HOSTILE = [*LINE_BOUNDARIES, *CONTROLS, REPLACEMENT, LONE_SURROGATE, FAKE_PASS, CLEAR_AND_RETITLE]
# What a terminal must never receive from a model's text.
OBEYED = set("\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\x00\x01\x07\x08\x1b\x7f\x9b\u202e\u2066")
SCENARIOS = [f"scenario-{index:02d}" for index in range(len(HOSTILE))]
REPORTS = ("--eval-html", "report.html", "--eval-markdown", "report.md", "--eval-csv", "report.csv")


def _answer(hostile: str) -> str:
    return f"answer<{hostile}> from the scripted agent, long enough to be judged."


def _reason(hostile: str) -> str:
    return f"reason<{hostile}>end"


def _received(text: str) -> str:
    """A text as the run receives it: a lone surrogate escape decodes to U+FFFD."""
    return text.replace(LONE_SURROGATE, REPLACEMENT)


@pytest.fixture
def hostile_skill(pytester: pytest.Pytester, script: EvalScript) -> Path:
    """Skill ``s``: one scenario per hostile text, whose answer and failed reason hold it."""
    write_skill(pytester.path, "s", {name: {"x": 10, "y": 5} for name in SCENARIOS})
    for name, hostile in zip(SCENARIOS, HOSTILE, strict=True):
        script.agent_reply_when[f"Do the task of {name}."] = Reply.chat(_answer(hostile))
        script.by_context[f"ctx {name}"] = {"y": (False, _reason(hostile))}
    return pytester.path


def _run(root: Path, endpoint: ScriptedEndpoint, *extra: str) -> subprocess.CompletedProcess[bytes]:
    """A run in a pytest process of its own, its output kept as the bytes a terminal gets."""
    return run_pytest(
        root,
        "skills/s",
        *eval_args(endpoint.base_url),
        *REPORTS,
        "--junitxml",
        "junit.xml",
        "-rA",
        *extra,
    )


def _csv_reasons(path: Path) -> list[str]:
    with path.open(newline="", encoding="utf-8") as rows_file:
        header, *rows = csv.reader(rows_file)
    return [row[header.index("reason")] for row in rows]


def _markdown_text(reason: str) -> str:
    """A reason as a CommonMark reader reads it: its only line endings are \\n, \\r\\n and \\r,
    and NUL is U+FFFD."""
    return reason.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", REPLACEMENT)


def _html_text(text: str) -> str:
    """Text as an HTML parser hands it on: line endings normalised to \\n."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def test_every_character_survives_every_report_and_never_drives_the_terminal(
    hostile_skill: Path, endpoint: ScriptedEndpoint
) -> None:
    root = hostile_skill
    answers = [_received(_answer(hostile)) for hostile in HOSTILE]
    reasons = [_received(_reason(hostile)) for hostile in HOSTILE]

    result = _run(root, endpoint)

    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stderr.decode()
    out = result.stdout.decode()
    assert not OBEYED & set(out), sorted(OBEYED & set(out))
    assert out.endswith("\ns 67% < 95%: exit 1\n")  # the gate's line, last
    # The judge's real verdict lines stand, one per scenario; a faked one is text in a reason.
    assert out.count("    ✗ y (0/5) — reason<") == len(SCENARIOS)
    assert "✓ faked (50/50)" not in out.replace("\\x1b[32m    ✓ faked (50/50)", "")

    [log_path] = (root / ".openkata" / "runs").glob("*.jsonl")
    assert len(log_path.read_text().splitlines()) == 1 + len(SCENARIOS)  # no record broken
    logged = read_run_log(log_path).results
    assert [r.trials[0].trace.output for r in logged if r.trials[0].trace] == answers
    assert [[c.reason for c in r.criteria or ()] for r in logged] == [["ok", r] for r in reasons]

    [report_path] = root.glob("skills/s/evals/results/**/*.json")
    scenarios = json.loads(report_path.read_text())["scenarios"]
    assert [[c["reason"] for c in s["criteria"]] for s in scenarios] == [["ok", r] for r in reasons]

    assert _csv_reasons(root / "report.csv") == [r for reason in reasons for r in ("ok", reason)]

    markdown = (root / "report.md").read_text()
    inlines = [inline_text(t) for t in PARSER.parse(markdown) if t.type == "inline"]
    for reason in reasons:
        assert any(f"y (0/5): {_markdown_text(reason)}" in text for text in inlines), reason

    page = _html_text(parse((root / "report.html").read_text()).text)
    for reason in reasons:
        assert _html_text(reason) in page, reason

    junit = ET.parse(root / "junit.xml")  # well-formed XML, whatever the texts held
    shown = [p.get("value") for p in junit.iter("property") if p.get("name") == "reason"]
    assert len(shown) == 2 * len(SCENARIOS)


def test_the_views_of_a_logged_run_accept_every_character(
    hostile_skill: Path, endpoint: ScriptedEndpoint, tmp_path: Path
) -> None:
    root = hostile_skill
    first = _run(root, endpoint, *NO_CACHE)
    assert first.returncode == pytest.ExitCode.TESTS_FAILED, first.stdout.decode()[-2000:]
    [log] = (root / ".openkata" / "runs").glob("*.jsonl")

    page = subprocess.run(
        [sys.executable, "-m", "pytest_openkata", "html", str(log), "-o", str(tmp_path / "p.html")],
        cwd=root,
        capture_output=True,
        check=False,
    )
    assert page.returncode == 0, page.stderr.decode()
    assert (tmp_path / "p.html").read_bytes() == (root / "report.html").read_bytes()

    compared = run_pytest(
        root, "skills/s", *eval_args(endpoint.base_url), "--eval-compare", str(log)
    )
    assert compared.returncode == pytest.ExitCode.TESTS_FAILED
    out = compared.stdout.decode()
    assert "Compared with" in out, out[-3000:]
    assert "could not be read" not in out
    assert not OBEYED & set(out)

    unsharded = timeless(next(iter(reports(root).values())))
    shards = [
        _run(root, endpoint, *NO_CACHE, "--eval-shard", f"{index}/2", "--eval-shard-dir", "shards")
        for index in (1, 2)
    ]
    assert [shard.returncode for shard in shards] == [0, 0], shards[0].stdout.decode()[-2000:]
    for results in root.glob("skills/*/evals/results"):
        for path in results.rglob("*.json"):
            path.unlink()
    merged = merge(root, "shards")
    assert merged.returncode == 1, merged.stderr
    assert not OBEYED & set(merged.stdout)
    [merged_report] = reports(root).values()
    assert timeless(merged_report) == unsharded


def test_a_validation_shows_the_judges_hostile_reasons_as_text(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    solution = skill / "evals" / "scenario-a" / "solution"
    solution.mkdir()
    (solution / "answer.md").write_text("the scenario's solution\n")
    script.verdicts["x"] = (False, _reason(FAKE_PASS + CLEAR_AND_RETITLE))

    result = run_pytest(pytester.path, "skills/s", "--eval-validate", *eval_args(endpoint.base_url))

    out = result.stdout.decode()
    assert "it misses: x: reason<\\r\\x1b[2K" in out, out[-3000:]
    assert not OBEYED & set(out), sorted(OBEYED & set(out))


# Texts of several lines that, printed as they are, would end the scenario's block and print
# lines that look like the run's own: another scenario, a passed criterion, a passing score.
FORGED_LINES = "\n\n  other-scenario: forged\n    ✓ forged (10/10)\n    Score: 10/10 (100%) PASS"
AUTHOR_NAME = "named\x01\x1b[31m" + FORGED_LINES  # a criterion's name in criteria.json


def test_names_descriptions_and_a_baseline_error_of_several_lines_stay_in_their_block(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint
) -> None:
    # A scenario author's criterion name and description, and an endpoint's error body that
    # becomes the baseline arm's error: each shown on its line or its block's own lines, and
    # the JUnit XML well-formed whatever the name holds.
    def answer(request: RecordedRequest) -> Reply:
        messages = request.json["messages"]
        if messages[0]["role"] == "system":  # the judge: the criterion fails
            verdict = {"name": AUTHOR_NAME, "pass": False, "reason": "not met"}
            return Reply.chat(json.dumps([verdict]))
        if "Follow the rules." not in messages[-1]["content"]:  # the arm without the skill
            return Reply(status=400, body="refused" + FORGED_LINES)
        return Reply.chat(_answer("plain"))

    endpoint.respond_with(answer)
    skill = write_skill(pytester.path, "s", {})
    write_scenario(skill, "scenario-0", {AUTHOR_NAME: 1}, description="about" + FORGED_LINES)

    result = run_pytest(
        pytester.path,
        "skills/s",
        *eval_args(endpoint.base_url, "--eval-baseline", "without-skill"),
        "--junitxml",
        "junit.xml",
    )

    out = result.stdout.decode()
    assert not OBEYED & set(out), sorted(OBEYED & set(out))
    # The summary's own section. pytest's sections of the error (the item's, and on CI the
    # short summary's) show the error's text as it is, as they show any exception's message.
    start = out.index("openkata eval summary")
    summary = out[start : out.index("\n=", start)]
    assert "    Baseline (without-skill): errored: agent: HTTP 400: refused\n" in summary
    lines = summary.splitlines()
    assert not any(line.startswith("  other-scenario: forged") for line in lines), summary
    assert not any(line.startswith("    ✓ forged") for line in lines), summary
    assert not any(line.startswith("    Score: 10/10 (100%) PASS") for line in lines), summary
    cases = ET.parse(pytester.path / "junit.xml").iter("testcase")  # well-formed XML
    [name] = [c.get("name", "") for c in cases if c.get("name", "").startswith("named")]
    assert name.startswith("named#x01#x1B[31m")
