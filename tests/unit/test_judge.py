"""The judge: cleaning, prompt layout, verdict parsing, the suspicious rule and the retry.

Spec references: section 5a (clean), section 7, section 12 checks 24-30.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from pytest_openkata.contracts.backends import ResponseSchema
from pytest_openkata.contracts.errors import BackendError, EndpointStatusError, TransportError
from pytest_openkata.contracts.results import Verdict
from pytest_openkata.core.scenario import Criterion
from pytest_openkata.core.scoring import NO_VERDICT_REASON, match_verdicts
from pytest_openkata.infra.text import clean_output, strip_ansi
from pytest_openkata.providers.backends.http import OpenAIChatBackend
from pytest_openkata.providers.graders.judge import (
    JUDGE_MAX_ATTEMPTS,
    JUDGE_SYSTEM_PROMPT,
    JudgeError,
    JudgeParseError,
    is_suspicious,
    judge_user_message,
    parse_verdicts,
    run_judge,
    verdict_schema,
)
from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.http import loopback_client

CRITERIA = (
    Criterion(name="criterion-a", description="Does A", max_score=10),
    Criterion(name="criterion-b", description="Does B", max_score=5),
)
LONG_RESPONSE = "This response is long enough to be judged fairly."  # 49 bytes
ONE_VERDICT = '[{"name":"a","pass":true,"reason":"ok"}]'
A_PASSES = [Verdict("a", True, "ok")]


class ScriptedCompleter:
    """A judge backend that gives scripted answers in order and records every call."""

    model = "scripted-judge"

    def __init__(self, *answers: str | Exception) -> None:
        self._answers = list(answers)
        self.calls: list[tuple[str, str]] = []
        self.schemas: list[ResponseSchema | None] = []

    def complete(self, system: str, user: str, *, schema: ResponseSchema | None = None) -> str:
        self.calls.append((system, user))
        self.schemas.append(schema)
        answer = self._answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


# --- check 29: ANSI stripping -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hello world", "hello world"),
        ("\x1b[32mgreen\x1b[0m text", "green text"),
        ("\x1b[1mbold\x1b[0m normal", "bold normal"),
        ("\x1b[31m\x1b[1merror\x1b[0m: something failed", "error: something failed"),
        ("\x1b[2Kmoved\x1b[0m", "moved"),
    ],
)
def test_strip_ansi(text: str, expected: str) -> None:
    assert strip_ansi(text) == expected


# --- check 30: cleaning -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "> Using model claude-sonnet-4.6\n> Session started\n\x1b[32mHello\x1b[0m world",
            "Hello world",
        ),
        ("> Header\nline one\nline two\n", "line one\nline two"),
        ("", ""),
        ("> header1\n> header2\n", ""),
        ("> info\nfirst\n> more info\nsecond", "first\nsecond"),
        ('```json\n[{"name": "a"}]\n```', '[{"name": "a"}]'),
    ],
)
def test_clean_output(text: str, expected: str) -> None:
    assert clean_output(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # "> " is checked on the untrimmed line, after the ANSI step.
        ("  > indented quote\nkept", "> indented quote\nkept"),
        ("\x1b[33m> coloured header\x1b[0m\nkept", "kept"),
        (">no space\nkept", ">no space\nkept"),
        # Fence lines are recognised after trimming, whatever follows the backticks.
        ("text\n   ```python  \ncode\n```", "text\ncode"),
        # Go's TrimSpace keeps \x1c-\x1f, which str.strip() would remove.
        ("\x1chello\x1f", "\x1chello\x1f"),
        ("\u3000\xa0hello\u2028\n", "hello"),
    ],
)
def test_clean_output_details(text: str, expected: str) -> None:
    assert clean_output(text) == expected


# --- check 24: what the reference parser accepts ----------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(ONE_VERDICT, id="clean array"),
        pytest.param(f"Here is my evaluation:\n{ONE_VERDICT}", id="preamble line"),
        pytest.param(f"\x1b[32m{ONE_VERDICT}\x1b[0m", id="ansi-wrapped"),
        pytest.param(f"> Model: claude\n{ONE_VERDICT}", id="model header line"),
        pytest.param(f"{ONE_VERDICT} some extra text", id="trailing text"),
    ],
)
def test_parse_reference_inputs(raw: str) -> None:
    assert parse_verdicts(raw) == A_PASSES


def test_parse_no_structured_data() -> None:
    with pytest.raises(JudgeParseError, match=r"^no JSON found in judge response$"):
        parse_verdicts("This response has no structured data")


def test_parse_two_element_array() -> None:
    raw = (
        '[{"name":"criterion-a","pass":true,"reason":"good"},'
        '{"name":"criterion-b","pass":false,"reason":"missing"}]'
    )
    assert parse_verdicts(raw) == [
        Verdict("criterion-a", True, "good"),
        Verdict("criterion-b", False, "missing"),
    ]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param('[{"name":"a"}]', [Verdict("a", False, "")], id="missing pass"),
        pytest.param('[{"pass":true}]', [Verdict("", True, "")], id="missing name and reason"),
        pytest.param("[null]", [Verdict("", False, "")], id="null element"),
        pytest.param(
            '[{"name":"a","pass":true}, null]',
            [Verdict("a", True, ""), Verdict("", False, "")],
            id="null among verdicts",
        ),
        pytest.param("[]", [], id="empty array"),
        pytest.param("[{}]", [Verdict("", False, "")], id="empty object"),
        pytest.param(
            '[{"Name":"a","PASS":true,"Reason":"r"}]', [Verdict("a", True, "r")], id="key case"
        ),
        pytest.param(
            '[{"name":"a","pass":true,"score":7,"extra":[1,{"x":null}]}]',
            [Verdict("a", True, "")],
            id="unknown keys ignored",
        ),
        pytest.param(
            '[{"name":"a","pass":null,"reason":null}]', [Verdict("a", False, "")], id="nulls"
        ),
        pytest.param(
            '[{"name":"a","name":null,"pass":true,"PASS":false}]',
            [Verdict("a", False, "")],
            id="duplicates: last non-null wins",
        ),
        # Go folds the long s to s, but not sharp s to ss.
        pytest.param('[{"name":"a","PA\u017fS":true}]', [Verdict("a", True, "")], id="long s"),
        pytest.param('[{"name":"a","pa\xdf":true}]', [Verdict("a", False, "")], id="sharp s"),
        pytest.param(
            '[\n  {\n    "name": "a",\n    "pass": true,\n    "reason": "multi\\nline"\n  }\n]',
            [Verdict("a", True, "multi\nline")],
            id="pretty-printed",
        ),
    ],
)
def test_parse_go_decoding_semantics(raw: str, expected: list[Verdict]) -> None:
    assert parse_verdicts(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param('[{"name":"a","pass":1}]', id="number pass"),
        pytest.param('[{"name":"a","pass":"maybe"}]', id="non-boolean string pass"),
        pytest.param('[{"name":5,"pass":true}]', id="number name"),
        pytest.param('[{"name":"a","pass":true,"reason":["r"]}]', id="list reason"),
        pytest.param('[{"name":"a","pass":true}, "b"]', id="string element"),
        pytest.param('[{"name":"a","pass":true}, 5]', id="number element"),
        pytest.param("[1, 2, 3]", id="list of numbers"),
        pytest.param('{"a": [{}], "b": [{}]}', id="ambiguous wrapper"),
        pytest.param('{"error": "cannot judge"}', id="object without verdicts"),
        pytest.param("see [the notes] and {them}", id="brackets in prose"),
    ],
)
def test_parse_rejects(raw: str) -> None:
    with pytest.raises(JudgeParseError, match=r"^failed to parse judge JSON$"):
        parse_verdicts(raw)


def test_parse_only_quote_lines_is_no_json() -> None:
    with pytest.raises(JudgeParseError, match=r"^no JSON found in judge response$"):
        parse_verdicts(f"> {ONE_VERDICT}\n")


# --- extensions beyond the reference (spec 13, item 23) ---------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(f"See [1]: {ONE_VERDICT}", A_PASSES, id="preamble bracket"),
        pytest.param(f"Scores [1, 2]: {ONE_VERDICT}", A_PASSES, id="number list first"),
        pytest.param(f"{ONE_VERDICT}\n\nNote: [see above]", A_PASSES, id="trailing bracket text"),
        pytest.param(
            "Sure! Here are the verdicts:\n\n```json\n"
            '[\n  {"name": "a", "pass": true, "reason": "ok"}\n]\n```\nLet me know.',
            A_PASSES,
            id="fenced after prose",
        ),
        pytest.param(f'{{"verdicts": {ONE_VERDICT}}}', A_PASSES, id="verdicts wrapper"),
        pytest.param(
            f'{{"summary": "fine", "tags": ["x"], "results": {ONE_VERDICT}}}',
            A_PASSES,
            id="results wrapper with other members",
        ),
        pytest.param('{"verdicts": []}', [], id="empty wrapper"),
        pytest.param(
            '{"name": "a", "pass": true, "reason": "ok"}', A_PASSES, id="lone verdict object"
        ),
        pytest.param(
            'Verdict: {"name": "a", "pass": true, "reason": "ok"} done.',
            A_PASSES,
            id="lone verdict in prose",
        ),
        pytest.param(
            '[{"name":"a","pass":"true"},{"name":"b","pass":"FALSE"}]',
            [Verdict("a", True, ""), Verdict("b", False, "")],
            id="string booleans",
        ),
        pytest.param(f"[] then {ONE_VERDICT}", A_PASSES, id="non-empty preferred over empty"),
        pytest.param("[] and [1]", [], id="empty fallback"),
        pytest.param(
            '[{"name":"a","pass":true},{"name":"b","pass":false},]',
            [Verdict("a", True, ""), Verdict("b", False, "")],
            id="trailing comma",
        ),
        pytest.param(
            '{"name":"a","pass":true}\n{"name":"b","pass":false}',
            [Verdict("a", True, ""), Verdict("b", False, "")],
            id="json lines",
        ),
        pytest.param(
            '[{"name":"a","pass":true,"reason":"ok"},{"name":"b","pa',
            A_PASSES,
            id="truncated array keeps its complete objects",
        ),
        pytest.param(
            '{"name":"a","pass":true,"reason":"ok"} then [{"name":"b","pass":true}]',
            A_PASSES,
            id="loose verdict first wins",
        ),
        pytest.param(
            f'[{{"note": [1]}}, 7] {ONE_VERDICT}', A_PASSES, id="skips a whole invalid value"
        ),
    ],
)
def test_parse_extensions(raw: str, expected: list[Verdict]) -> None:
    assert parse_verdicts(raw) == expected


def test_parse_pathological_nesting_is_a_parse_error() -> None:
    with pytest.raises(JudgeParseError, match=r"^failed to parse judge JSON$"):
        parse_verdicts("[" * 100_000 + "]" * 100_000)


# --- judge user message (section 7) -----------------------------------------------------------


def test_user_message_exact_layout() -> None:
    assert judge_user_message("I have completed the task.", "Test context", CRITERIA) == (
        "## Agent Response\n\n"
        "I have completed the task.\n\n"
        "## Evaluation Criteria\n\n"
        "Context: Test context\n\n"
        "- **criterion-a** (max 10 points): Does A\n"
        "- **criterion-b** (max 5 points): Does B\n"
    )


def test_user_message_without_context() -> None:
    message = judge_user_message("I have completed the task.", "", CRITERIA)
    assert "Context:" not in message
    assert message == (
        "## Agent Response\n\n"
        "I have completed the task.\n\n"
        "## Evaluation Criteria\n\n"
        "- **criterion-a** (max 10 points): Does A\n"
        "- **criterion-b** (max 5 points): Does B\n"
    )


def test_system_prompt_content() -> None:
    for needle in ('"name"', '"pass"', '"reason"', "JSON array", "criterion"):
        assert needle in JUDGE_SYSTEM_PROMPT
    example = next(line for line in JUDGE_SYSTEM_PROMPT.splitlines() if line.startswith("[{"))
    verdicts = parse_verdicts(example)
    assert [v.passed for v in verdicts] == [True, False]


# --- check 28: the suspicious rule ------------------------------------------------------------


@pytest.mark.parametrize(
    ("response", "verdicts", "expected"),
    [
        ("ok", [Verdict("a", True)], True),
        (LONG_RESPONSE, [Verdict("a", True)], False),
        ("ok", [Verdict("a", True), Verdict("b", False)], False),
        ("ok", [], False),
        # The length is taken after trimming, in UTF-8 bytes as Go's len() does.
        ("  ok" + " " * 40, [Verdict("a", True)], True),
        ("x" * 19, [Verdict("a", True)], True),
        ("x" * 20, [Verdict("a", True)], False),
        ("\xe9" * 10, [Verdict("a", True)], False),
        ("\xe9" * 9, [Verdict("a", True)], True),
        # Unmatched names count too.
        ("ok", [Verdict("not-a-criterion", True)], True),
    ],
)
def test_is_suspicious(response: str, verdicts: list[Verdict], expected: bool) -> None:
    assert is_suspicious(response, verdicts) is expected


# --- checks 25-27: the judge step -------------------------------------------------------------


TWO_VERDICTS = (
    '[{"name":"criterion-a","pass":true,"reason":"good"},'
    '{"name":"criterion-b","pass":false,"reason":"missing"}]'
)


def test_run_judge_returns_verdicts_in_order() -> None:
    judge = ScriptedCompleter(TWO_VERDICTS)
    verdicts = run_judge(judge, LONG_RESPONSE, "Test context", CRITERIA)
    assert [v.name for v in verdicts] == ["criterion-a", "criterion-b"]
    assert verdicts[0].passed
    assert not verdicts[1].passed
    assert judge.calls == [
        (JUDGE_SYSTEM_PROMPT, judge_user_message(LONG_RESPONSE, "Test context", CRITERIA))
    ]


def test_run_judge_retries_after_unparsable_answer() -> None:
    judge = ScriptedCompleter("This is not JSON at all", ONE_VERDICT)
    assert run_judge(judge, LONG_RESPONSE, "", CRITERIA) == A_PASSES
    assert len(judge.calls) == 2
    assert judge.calls[0] == judge.calls[1]


def test_run_judge_retries_after_backend_error() -> None:
    judge = ScriptedCompleter(TransportError("connection refused"), ONE_VERDICT)
    assert run_judge(judge, LONG_RESPONSE, "", CRITERIA) == A_PASSES
    assert len(judge.calls) == 2
    assert judge.calls[0] == judge.calls[1]


def test_run_judge_gives_up_after_two_parse_failures() -> None:
    judge = ScriptedCompleter("nope", "[1, 2]")
    with pytest.raises(JudgeError) as caught:
        run_judge(judge, LONG_RESPONSE, "", CRITERIA)
    assert str(caught.value) == "judge parse failed after retry: failed to parse judge JSON"
    assert isinstance(caught.value.__cause__, JudgeParseError)
    assert len(judge.calls) == 2 == JUDGE_MAX_ATTEMPTS


def test_run_judge_gives_up_after_two_backend_errors() -> None:
    second = EndpointStatusError(500, "boom")
    judge = ScriptedCompleter(BackendError("first"), second)
    with pytest.raises(JudgeError) as caught:
        run_judge(judge, LONG_RESPONSE, "", CRITERIA)
    assert str(caught.value) == "judge parse failed after retry: HTTP 500: boom"
    assert caught.value.__cause__ is second
    assert len(judge.calls) == 2


def test_a_judge_call_past_its_deadline_is_not_asked_again() -> None:
    # Asked again, it would take the whole deadline again; each byte comes well within it.
    with ScriptedEndpoint() as endpoint, loopback_client(1) as client:
        endpoint.enqueue(replace(Reply.chat(ONE_VERDICT), drip=0.2), Reply.chat(ONE_VERDICT))
        judge = OpenAIChatBackend(client, base_url=endpoint.base_url, api_key="", model="j")

        with pytest.raises(JudgeError) as caught:
            run_judge(judge, LONG_RESPONSE, "", CRITERIA)

        assert str(caught.value) == f"POST {judge.url}: timed out after 1s"
        assert len(endpoint.requests) == 1


def test_a_judge_answer_past_the_bound_is_not_asked_again() -> None:
    with ScriptedEndpoint() as endpoint, loopback_client(30) as client:
        endpoint.enqueue(*[replace(Reply.chat(ONE_VERDICT), padding=2 << 20)] * 2)
        judge = OpenAIChatBackend(
            client, base_url=endpoint.base_url, api_key="", model="j", answer_max_bytes=1 << 20
        )

        with pytest.raises(JudgeError) as caught:
            run_judge(judge, LONG_RESPONSE, "", CRITERIA)

        assert str(caught.value) == (
            f"POST {judge.url}: the answer is larger than 1 MiB, the bound of answer_max_bytes"
        )
        assert len(endpoint.requests) == 1


def test_run_judge_does_not_retry_programming_errors() -> None:
    judge = ScriptedCompleter(RuntimeError("bug"), ONE_VERDICT)
    with pytest.raises(RuntimeError, match="bug"):
        run_judge(judge, LONG_RESPONSE, "", CRITERIA)
    assert len(judge.calls) == 1


def test_run_judge_rejects_trivial_all_pass() -> None:
    judge = ScriptedCompleter(ONE_VERDICT)
    with pytest.raises(JudgeError, match="suspicious") as caught:
        run_judge(judge, "short", "", CRITERIA)
    assert str(caught.value) == (
        "suspicious result: trivial agent response (5 chars) with all criteria passing"
    )
    assert len(judge.calls) == 1


@pytest.mark.parametrize(
    ("response", "length"),
    [("  ok  ", 6), ("h\xe9llo", 6), ("\n\n\u3000ok\t", 8)],
)
def test_suspicious_message_reports_untrimmed_bytes(response: str, length: int) -> None:
    judge = ScriptedCompleter(ONE_VERDICT)
    with pytest.raises(JudgeError, match=rf"\({length} chars\)"):
        run_judge(judge, response, "", CRITERIA)


def test_run_judge_trivial_response_with_a_failure_is_fine() -> None:
    judge = ScriptedCompleter(TWO_VERDICTS)
    verdicts = run_judge(judge, "short", "", CRITERIA)
    assert [v.passed for v in verdicts] == [True, False]


def test_the_judge_asks_for_a_schema_keyed_by_the_criteria() -> None:
    completer = ScriptedCompleter(
        '{"criterion-a": {"pass": true, "reason": "r"}, '
        '"criterion-b": {"pass": false, "reason": "s"}}'
    )

    verdicts = run_judge(completer, LONG_RESPONSE, "ctx", CRITERIA)

    assert verdicts == [Verdict("criterion-a", True, "r"), Verdict("criterion-b", False, "s")]
    [schema] = completer.schemas
    assert schema is not None
    verdict = {
        "type": "object",
        "properties": {"pass": {"type": "boolean"}, "reason": {"type": "string"}},
        "required": ["pass", "reason"],
        "additionalProperties": False,
    }
    assert schema.schema == {
        "type": "object",
        "properties": {"criterion-a": verdict, "criterion-b": verdict},
        "required": ["criterion-a", "criterion-b"],
        "additionalProperties": False,
    }
    assert list(schema.schema["properties"]) == ["criterion-a", "criterion-b"]  # checklist order


def test_a_criterion_listed_twice_is_one_property() -> None:
    criteria = (*CRITERIA, Criterion(name="criterion-a", description="Again", max_score=1))

    schema = verdict_schema(criteria).schema

    assert list(schema["properties"]) == schema["required"] == ["criterion-a", "criterion-b"]


def test_criterion_names_are_property_names_as_they_are() -> None:
    names = ["header ≤ 72 chars — no period", 'says "done"', "<b> & </b>", "ünïcödé 日本"]
    criteria = [Criterion(name=name, description="d", max_score=1) for name in names]

    schema = verdict_schema(criteria).schema

    assert list(schema["properties"]) == schema["required"] == names


# --- the keyed shape of the structured-output schema -----------------------------------------

KEYED = (
    '{"criterion-a": {"pass": true, "reason": "good"}, '
    '"criterion-b": {"pass": false, "reason": "missing"}}'
)
KEYED_VERDICTS = [Verdict("criterion-a", True, "good"), Verdict("criterion-b", False, "missing")]


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(KEYED, id="bare"),
        pytest.param(f'{{"verdicts": {KEYED}}}', id="wrapped"),
        pytest.param(f'{{"note": "two criteria", "results": {KEYED}}}', id="wrapped among others"),
        pytest.param(f"Here you are:\n```json\n{KEYED}\n```", id="fenced after prose"),
        pytest.param(f"{KEYED} [see above]", id="trailing brackets"),
    ],
)
def test_parse_keyed_verdicts(raw: str) -> None:
    assert parse_verdicts(raw) == KEYED_VERDICTS


def test_parse_keyed_verdicts_keeps_the_order_given() -> None:
    raw = '{"z": {"pass": true, "reason": ""}, "a": {"pass": false, "reason": ""}}'
    assert [v.name for v in parse_verdicts(raw)] == ["z", "a"]


def test_parse_keyed_names_are_the_keys_exactly() -> None:
    names = ["header ≤ 72 chars — no period", 'says "done"', "<b> & </b>", "ünïcödé 日本"]
    verdicts = {name: {"pass": True, "reason": "ok"} for name in names}
    assert [v.name for v in parse_verdicts(json.dumps(verdicts, ensure_ascii=False))] == names
    assert [v.name for v in parse_verdicts(json.dumps(verdicts))] == names  # \u escapes


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(
            '{"a": {"PASS": "true", "Reason": "r"}}', [Verdict("a", True, "r")], id="key case"
        ),
        pytest.param('{"a": {"pass": null}}', [Verdict("a", False, "")], id="null pass"),
        pytest.param(
            '{"a": {"pass": true, "reason": "r", "score": 3}}',
            [Verdict("a", True, "r")],
            id="unknown fields ignored",
        ),
        pytest.param(
            '{"name": {"pass": true, "reason": "n"}, "pass": {"pass": false, "reason": "p"}}',
            [Verdict("name", True, "n"), Verdict("pass", False, "p")],
            id="criteria named name and pass",
        ),
        pytest.param(
            '{"verdicts": {"pass": {"pass": true, "reason": "r"}}}',
            [Verdict("pass", True, "r")],
            id="wrapped criterion named pass",
        ),
        pytest.param(
            '{"verdicts": {"pass": true, "reason": "r"}}',
            [Verdict("verdicts", True, "r")],
            id="criterion named verdicts",
        ),
    ],
)
def test_parse_keyed_decoding(raw: str, expected: list[Verdict]) -> None:
    assert parse_verdicts(raw) == expected


def test_parse_keyed_repeated_key_is_one_verdict_the_last() -> None:
    # A constrained decoder cannot repeat a key (additionalProperties is false and every key
    # required once); in a plain-text answer a repeated key is one member, as in JSON.
    raw = (
        '{"a": {"pass": true, "reason": "first"}, "b": {"pass": true, "reason": ""}, '
        '"a": {"pass": false, "reason": "last"}}'
    )
    assert parse_verdicts(raw) == [Verdict("a", False, "last"), Verdict("b", True, "")]


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param("{}", id="empty object"),
        pytest.param('{"verdicts": {}}', id="empty wrapper"),
        pytest.param('{"a": {"reason": "no pass"}}', id="member without pass"),
        pytest.param('{"a": {"pass": 1}}', id="number pass"),
        pytest.param('{"a": {"pass": true, "reason": 5}}', id="number reason"),
        pytest.param('{"a": {"pass": true}, "b": null}', id="null member"),
        pytest.param('{"a": {"pass": true}, "b": true}', id="boolean member"),
        pytest.param('{"x": {"name": "a", "pass": true}}', id="members with names"),
        pytest.param(
            f'{{"one": {KEYED}, "two": {KEYED}}}', id="ambiguous wrapper of keyed verdicts"
        ),
        pytest.param(
            f'{{"one": {KEYED}, "two": {ONE_VERDICT}}}', id="ambiguous wrapper of both shapes"
        ),
    ],
)
def test_parse_keyed_rejects(raw: str) -> None:
    with pytest.raises(JudgeParseError, match=r"^failed to parse judge JSON$"):
        parse_verdicts(raw)


def test_parse_deeply_nested_keyed_objects_is_a_parse_error() -> None:
    raw = '{"a": {"pass": ' * 400 + "true" + "}}" * 400
    with pytest.raises(JudgeParseError, match=r"^failed to parse judge JSON$"):
        parse_verdicts(raw)


def test_keyed_verdicts_with_a_missing_and_an_unknown_criterion() -> None:
    # The parser returns what the judge said; matching fails the missing criterion and ignores
    # the unknown one, as with the array.
    raw = (
        '{"criterion-b": {"pass": true, "reason": "ok"}, '
        '"criterion-z": {"pass": true, "reason": ""}}'
    )

    verdicts = parse_verdicts(raw)
    results = match_verdicts(CRITERIA, verdicts)

    assert [v.name for v in verdicts] == ["criterion-b", "criterion-z"]
    assert [(r.name, r.passed, r.reason) for r in results] == [
        ("criterion-a", False, NO_VERDICT_REASON),
        ("criterion-b", True, "ok"),
    ]


def test_a_keyed_answer_that_fails_to_parse_is_asked_again() -> None:
    judge = ScriptedCompleter('{"criterion-a": {"pass": "maybe"}}', KEYED)

    assert run_judge(judge, LONG_RESPONSE, "", CRITERIA) == KEYED_VERDICTS
    assert len(judge.calls) == 2
