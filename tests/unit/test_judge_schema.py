"""The judge's structured-output schema against a real loopback endpoint that enforces the
strict subset (OpenAI's strict mode; Anthropic's property keys for tools), on both APIs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_openkata.contracts.backends import Completer
from pytest_openkata.contracts.results import Verdict
from pytest_openkata.core.scenario import Criterion
from pytest_openkata.providers.backends.anthropic import AnthropicMessagesBackend
from pytest_openkata.providers.backends.http import OpenAIChatBackend
from pytest_openkata.providers.graders.judge import run_judge, verdict_schema
from tests.support.endpoint import (
    ANTHROPIC_PROPERTY_KEY,
    ScriptedEndpoint,
    StrictStructuredOutput,
    strict_subset_violations,
)
from tests.support.evals import eval_args, reports_under, write_skill
from tests.support.http import loopback_client

# Names as real checklists have them: spaces, symbols, quotes, markup, non-ASCII, and two
# names that differ only in characters an alias would replace.
NAMES = [
    "header-format",
    "Header ≤ 72 chars — no period",
    'says "done" \\ nothing else',
    "<b>bold</b> & <i>italic</i>",
    "ünïcödé 日本語",
    "a b",
    "a?b",
    "a_b",
    "x" * 80,
]
CRITERIA = [Criterion(name=name, description=f"checks {name}", max_score=1) for name in NAMES]
RESPONSE = "A commit message long enough to be judged on its own merits."
SCRIPTED_REASON = "the reason of a scripted answer"  # what instance_of() gives a "reason"


@pytest.fixture
def strict() -> StrictStructuredOutput:
    return StrictStructuredOutput(plain_answer="[]")


@pytest.fixture
def endpoint(strict: StrictStructuredOutput) -> Iterator[ScriptedEndpoint]:
    with ScriptedEndpoint() as server:
        server.respond_with(strict)
        yield server


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with loopback_client(5.0) as http_client:
        yield http_client


def _former_schema(names: list[str]) -> dict[str, Any]:
    """The schema the judge used to send: positional verdicts with a length cap."""
    verdicts = [
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "enum": [name]},
                "pass": {"type": "boolean"},
                "reason": {"type": "string", "maxLength": 160},
            },
            "required": ["name", "pass", "reason"],
            "additionalProperties": False,
        }
        for name in names
    ]
    return {
        "type": "object",
        "properties": {
            "verdicts": {
                "type": "array",
                "prefixItems": verdicts,
                "minItems": len(names),
                "maxItems": len(names),
            }
        },
        "required": ["verdicts"],
        "additionalProperties": False,
    }


# --- the validator itself --------------------------------------------------------------------


def test_the_validator_refuses_the_former_schema() -> None:
    findings = strict_subset_violations(_former_schema(["a", "b"]))

    assert findings == [
        "$.properties['verdicts']: prefixItems is not supported",
        "$.properties['verdicts']: minItems is not supported",
        "$.properties['verdicts']: maxItems is not supported",
        "$.properties['verdicts'].prefixItems[0].properties['reason']: maxLength is not supported",
        "$.properties['verdicts'].prefixItems[1].properties['reason']: maxLength is not supported",
    ]


@pytest.mark.parametrize(
    ("schema", "finding"),
    [
        (
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            "$: additionalProperties must be false",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                "required": ["a"],
                "additionalProperties": False,
            },
            "$: property 'b' is not in required",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "object", "properties": {}}},
                "required": ["a"],
                "additionalProperties": False,
            },
            "$.properties['a']: additionalProperties must be false",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string", "minLength": 1}},
                "required": ["a"],
                "additionalProperties": False,
            },
            "$.properties['a']: minLength is not supported",
        ),
    ],
)
def test_the_validator_finds_each_kind_of_violation(schema: dict[str, Any], finding: str) -> None:
    assert strict_subset_violations(schema) == [finding]


def test_the_judge_schema_keeps_to_the_strict_subset() -> None:
    schema = verdict_schema(CRITERIA).schema

    assert strict_subset_violations(schema) == []
    # Anthropic's tool schemas also restrict property keys, which criterion names break: the
    # anthropic backend sends those under aliases (see the session test below).
    refused_keys = strict_subset_violations(schema, key_pattern=ANTHROPIC_PROPERTY_KEY)
    assert len(refused_keys) == 7


def test_a_reason_cap_is_added_only_when_asked_and_leaves_the_strict_subset() -> None:
    capped = verdict_schema(CRITERIA, reason_max_chars=160).schema

    reasons = [verdict["properties"]["reason"] for verdict in capped["properties"].values()]
    assert reasons == [{"type": "string", "maxLength": 160}] * len(reasons)
    assert len(strict_subset_violations(capped)) == len(reasons)  # for local servers only


# --- judge sessions against the strict endpoint -----------------------------------------------


def _http(client: httpx.Client, endpoint: ScriptedEndpoint) -> OpenAIChatBackend:
    return OpenAIChatBackend(client, base_url=endpoint.base_url, api_key="k", model="gpt-4o")


def _anthropic(client: httpx.Client, endpoint: ScriptedEndpoint) -> AnthropicMessagesBackend:
    root = f"http://127.0.0.1:{endpoint.port}"
    return AnthropicMessagesBackend(client, base_url=root, api_key="k", model="claude-x")


def _judge_twice(judge: Completer) -> list[list[Verdict]]:
    return [run_judge(judge, RESPONSE, "ctx", CRITERIA, fence=fence) for fence in (True, False)]


def _assert_two_structured_sessions(
    judge: Completer, endpoint: ScriptedEndpoint, strict: StrictStructuredOutput
) -> None:
    """Two judge sessions (fenced and not): both structured, none refused, every verdict read."""
    sessions = _judge_twice(judge)

    assert strict.refused == []
    assert (strict.structured, strict.plain) == (2, 0)
    assert len(endpoint.requests) == 2
    assert getattr(judge, "structured_output", None) is True
    for verdicts in sessions:
        assert verdicts == [Verdict(name, True, SCRIPTED_REASON) for name in NAMES]


def test_an_http_judge_session_makes_no_refused_call(
    client: httpx.Client, endpoint: ScriptedEndpoint, strict: StrictStructuredOutput
) -> None:
    judge = _http(client, endpoint)

    _assert_two_structured_sessions(judge, endpoint, strict)
    sent = endpoint.requests[0].json["response_format"]["json_schema"]["schema"]
    assert list(sent["properties"]) == NAMES  # the names themselves are the keys


def test_an_anthropic_judge_session_makes_no_refused_call(
    client: httpx.Client, endpoint: ScriptedEndpoint, strict: StrictStructuredOutput
) -> None:
    judge = _anthropic(client, endpoint)

    _assert_two_structured_sessions(judge, endpoint, strict)
    [tool] = endpoint.requests[0].json["tools"]
    keys = list(tool["input_schema"]["properties"])
    assert keys == [
        "header-format",
        "Header___72_chars___no_period",
        "says__done____nothing_else",
        "_b_bold__b_____i_italic__i_",
        "unicode____",
        "a_b_2",
        "a_b_3",
        "a_b",
        "x" * 64,
    ]
    assert tool["input_schema"]["required"] == keys
    descriptions = [tool["input_schema"]["properties"][key].get("description") for key in keys]
    assert descriptions[0] is None  # an allowed key goes out as it is
    assert descriptions[1] == 'Stands for the key "Header ≤ 72 chars — no period".'
    assert descriptions[8] == f'Stands for the key "{"x" * 80}".'


def test_the_former_schema_would_have_been_refused_and_judged_in_text(
    client: httpx.Client, endpoint: ScriptedEndpoint, strict: StrictStructuredOutput
) -> None:
    """What this file guards against: the endpoint refuses, the backend falls back."""
    from pytest_openkata.contracts.backends import ResponseSchema

    judge = _http(client, endpoint)
    former = ResponseSchema("judge_verdicts", _former_schema(["a"]))

    assert judge.complete("s", "u", schema=former) == "[]"

    assert judge.structured_output is False
    assert (strict.structured, strict.plain) == (0, 1)
    assert "prefixItems is not supported" in strict.refused[0]


# --- whole runs through the plugin ------------------------------------------------------------


def _run(pytester: pytest.Pytester, endpoint: ScriptedEndpoint, *judge: str) -> dict[str, Any]:
    write_skill(pytester.path, "s", {"scenario-0": {name: 1 for name in NAMES}})
    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url), *judge)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    [report] = reports_under(pytester.path)
    data: dict[str, Any] = json.loads(report.read_text())
    return data


@pytest.mark.parametrize("judge_backend", ["http", "anthropic"])
def test_a_run_judges_with_the_structured_answer(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    strict: StrictStructuredOutput,
    judge_backend: str,
) -> None:
    strict.plain_answer = RESPONSE  # the agent's calls are plain
    options = ["--eval-judge-backend", judge_backend]
    if judge_backend == "anthropic":
        options += ["--eval-anthropic-base-url", f"http://127.0.0.1:{endpoint.port}"]

    report = _run(pytester, endpoint, *options)

    assert strict.refused == []
    assert (strict.structured, strict.plain) == (1, 1)  # the judge, the agent
    [scenario] = report["scenarios"]
    assert [(c["name"], c["pass"], c["reason"]) for c in scenario["criteria"]] == [
        (name, True, SCRIPTED_REASON) for name in NAMES
    ]
    paths = [Path(request.path).name for request in endpoint.requests]
    assert paths == ["completions", "completions" if judge_backend == "http" else "messages"]
