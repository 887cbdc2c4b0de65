"""Properties of every text a model may return, on its way into each format: generated texts
that favour the characters that break formats (every line boundary of ``str.splitlines``, NUL,
escape sequences and the other control characters, lone surrogates) read back equal from the
run log, the CSV rows and the results JSON, never drive a terminal, and stay text in the
pages (a pairwise judge's reasons included)."""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_openkata.contracts.results import (
    PAIRWISE_SKILL,
    PAIRWISE_TIE,
    PairwiseTrial,
    PairwiseVerdict,
)
from pytest_openkata.core.runlog import RunInfo, json_line, log_lines, parse_run_log
from pytest_openkata.infra import gojson
from pytest_openkata.infra.text import valid_unicode, visible, visible_lines
from pytest_openkata.providers.reporters.csvfile import render_csv
from pytest_openkata.providers.reporters.html import render_html
from pytest_openkata.providers.reporters.markdown import render_markdown
from tests.support.results import ROOT, judged, logged, scenario

BREAKING = [
    *"\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029",  # str.splitlines' line boundaries
    "\r\n",
    *"\x00\x01\x07\x08\x1b\x7f\x9b\u202e\u2066\ufeff\ufffd",
    "\x1b[2K",
    "\x1b]0;title\x07",
    "\ud800",  # a lone surrogate, what a JSON "\ud800" escape decodes to
    "\udfff",
    '"',
    "\\",
    ",",
]
HOSTILE_TEXT = st.lists(st.one_of(st.sampled_from(BREAKING), st.text(max_size=3)), max_size=12).map(
    "".join
)
# What a terminal acts on: the characters visible() must never let through.
OBEYED = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


@given(HOSTILE_TEXT)
def test_visible_text_holds_nothing_a_terminal_obeys_and_breaks_lines_at_newlines_only(
    text: str,
) -> None:
    shown = visible(text)

    assert OBEYED.search(shown) is None
    shown.encode("utf-8")  # a UTF-8 terminal can take it
    newlines = text.replace("\r\n", "\n").removesuffix("\n").count("\n")
    assert len(visible_lines(text)) == newlines + 1
    assert visible(shown) == shown  # shown once, shown the same again


@given(HOSTILE_TEXT)
def test_a_json_line_is_one_line_for_every_line_reader_and_decodes_to_the_text(text: str) -> None:
    line = json_line({"text": text})

    assert line.splitlines() == [line[:-1]]
    line.encode("utf-8")
    assert json.loads(line) == {"text": valid_unicode(text)}


@given(answer=HOSTILE_TEXT, reason=HOSTILE_TEXT)
def test_the_run_log_reads_back_the_answer_and_the_reason_as_written(
    answer: str, reason: str
) -> None:
    result = scenario("scenario-a", [judged("x", 1, False, reason)], output=answer)

    [back] = logged([result]).results

    assert back.trials[0].trace is not None
    assert back.trials[0].trace.output == valid_unicode(answer)
    assert [c.reason for c in back.criteria or ()] == [valid_unicode(reason)]


@given(HOSTILE_TEXT)
def test_the_csv_rows_read_back_the_reason_as_written(reason: str) -> None:
    text = render_csv(logged([scenario("scenario-a", [judged("x", 1, False, reason)])]))

    header, row = csv.reader(io.StringIO(text, newline=""))
    assert row[header.index("reason")] == valid_unicode(reason)


@given(HOSTILE_TEXT)
def test_the_results_json_encoding_reads_back_the_text_as_go_writes_it(text: str) -> None:
    encoded = gojson.dumps({"reason": text})

    assert json.loads(encoded) == {"reason": valid_unicode(text)}
    # Go escapes U+2028 and U+2029 (and every C0 control), and leaves NEL (U+0085) raw.
    assert not set(encoded) & set("\u2028\u2029\r\x00\x1b")


def test_a_log_with_raw_line_separators_inside_its_strings_still_reads() -> None:
    """A log written before separators were escaped (or by another tool) holds them raw."""
    reason = "a\u2028b\x85c\u2029d"
    info = RunInfo("2026-12-01T10:00:00Z")
    text = log_lines(info, [scenario("scenario-a", [judged("x", 1, False, reason)])], ROOT)
    raw = text.replace("\\u2028", "\u2028").replace("\\u0085", "\x85").replace("\\u2029", "\u2029")
    assert len(raw.splitlines()) > 2  # what str.splitlines makes of it

    [result] = parse_run_log(raw).results

    assert [c.reason for c in result.criteria or ()] == [reason]


@settings(max_examples=50, deadline=None)
@given(
    name=st.one_of(HOSTILE_TEXT, st.just("<script>alert(1)</script>")),
    reason=st.one_of(HOSTILE_TEXT, st.just("<script>alert(1)</script>"), st.just("x" * 300_000)),
)
def test_a_pairwise_verdicts_name_and_reasons_read_back_and_stay_text_in_the_pages(
    name: str, reason: str
) -> None:
    own = scenario("scenario-a", [judged("x", 1, True)])
    verdict = PairwiseVerdict(name or "c", PAIRWISE_SKILL, PAIRWISE_TIE, reason, reason)
    trial = replace(own.trials[0], pairwise=PairwiseTrial((verdict,)))
    baseline = replace(scenario("scenario-a", [judged("x", 1, False)]), arm="without-skill")
    run = logged([replace(own, trials=(trial,), baseline=baseline)])

    [back] = run.results
    pairwise = back.trials[0].pairwise
    assert pairwise is not None
    assert pairwise.verdicts[0].skill_first_reason == valid_unicode(reason)
    page, markdown = render_html(run), render_markdown(run)
    assert "<script>alert" not in page
    assert "<script>alert" not in markdown
    assert "\r" not in markdown  # a reason's line breaks never break the document's lines
