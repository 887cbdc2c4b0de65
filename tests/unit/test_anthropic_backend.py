"""The anthropic backend (Messages API) against a real loopback server."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest

from pytest_openkata.contracts.backends import ResponseSchema
from pytest_openkata.contracts.errors import (
    AnswerTooLargeError,
    BackendError,
    EndpointStatusError,
    MalformedResponseError,
    TransportError,
)
from pytest_openkata.infra.usage import TokenUsage, recording
from pytest_openkata.providers.backends.anthropic import (
    CUT_OFF_MESSAGE,
    TOOL_DESCRIPTION,
    AnthropicMessagesBackend,
    messages_url,
)
from tests.support.endpoint import ANTHROPIC_PROPERTY_KEY, RecordedRequest, Reply, ScriptedEndpoint
from tests.support.http import causes, loopback_client

KEY = "sk-ant-test-key"


_ids = itertools.count(1)


def message(*blocks: dict[str, Any]) -> Reply:
    """A 200 Messages API answer whose ``content`` is ``blocks``."""
    return Reply(
        json={
            "id": f"msg_{next(_ids)}",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": list(blocks),
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 3, "output_tokens": 1},
        }
    )


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def root_url(endpoint: ScriptedEndpoint) -> str:
    """The server's address without ``/v1``, as ``https://api.anthropic.com`` is given."""
    return f"http://127.0.0.1:{endpoint.port}"


@pytest.fixture
def endpoint() -> Iterator[ScriptedEndpoint]:
    with ScriptedEndpoint() as server:
        yield server


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    """One client for the module, as one client serves a whole pytest session."""
    with loopback_client(5.0) as http_client:
        yield http_client


def backend_for(
    client: httpx.Client,
    base_url: str,
    *,
    api_key: str = KEY,
    model: str = "m",
    max_tokens: int = 4096,
) -> AnthropicMessagesBackend:
    return AnthropicMessagesBackend(
        client, base_url=base_url, api_key=api_key, model=model, max_tokens=max_tokens
    )


@pytest.fixture
def backend(client: httpx.Client, endpoint: ScriptedEndpoint) -> AnthropicMessagesBackend:
    return backend_for(client, root_url(endpoint))


# -- requests ---------------------------------------------------------------------------------


def test_post_with_key_version_and_system(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(message(text("hi")))

    assert backend.complete("You are a judge.", "Grade this.") == "hi"

    [request] = endpoint.requests
    assert request.method == "POST"
    assert request.path == "/v1/messages"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.headers["x-api-key"] == KEY
    assert "authorization" not in request.headers
    assert request.json == {
        "model": "m",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "Grade this."}],
        "system": "You are a judge.",
    }


def test_empty_system_and_key_are_left_out(
    client: httpx.Client, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(message(text("ok")))
    backend = backend_for(client, root_url(endpoint), api_key="")

    assert backend.complete("", "hello") == "ok"

    [request] = endpoint.requests
    assert request.json == {
        "model": "m",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "hello"}],
    }
    assert "x-api-key" not in request.headers
    assert request.headers["anthropic-version"] == "2023-06-01"


def test_custom_model_and_max_tokens(client: httpx.Client, endpoint: ScriptedEndpoint) -> None:
    endpoint.enqueue(message(text("ok")))
    backend = backend_for(client, root_url(endpoint), model="claude-x", max_tokens=256)

    backend.complete("", "u")

    assert endpoint.requests[0].json["model"] == "claude-x"
    assert endpoint.requests[0].json["max_tokens"] == 256
    assert backend.model == "claude-x"


@pytest.mark.parametrize("max_tokens", [0, -1])
def test_max_tokens_must_be_positive(client: httpx.Client, max_tokens: int) -> None:
    with pytest.raises(ValueError, match="positive"):
        backend_for(client, "http://127.0.0.1:1", max_tokens=max_tokens)


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/", "/v1//"])
def test_base_url_with_or_without_v1(
    client: httpx.Client, endpoint: ScriptedEndpoint, suffix: str
) -> None:
    endpoint.enqueue(message(text("x")))
    backend_for(client, root_url(endpoint) + suffix).complete("", "u")
    assert endpoint.requests[0].path == "/v1/messages"


@pytest.mark.parametrize("base_url", ["https://api.anthropic.com", "https://api.anthropic.com/v1/"])
def test_endpoint_is_the_base_url_as_configured(client: httpx.Client, base_url: str) -> None:
    backend = backend_for(client, base_url)

    assert backend.endpoint == base_url
    assert backend.url == "https://api.anthropic.com/v1/messages"
    with pytest.raises(AttributeError):
        backend.endpoint = "https://elsewhere.example"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("base_url", "expected"),
    [
        ("https://api.anthropic.com", "https://api.anthropic.com/v1/messages"),
        ("https://api.anthropic.com/v1", "https://api.anthropic.com/v1/messages"),
        ("https://proxy.example/anthropic/", "https://proxy.example/anthropic/v1/messages"),
        ("https://proxy.example/v10", "https://proxy.example/v10/v1/messages"),
    ],
)
def test_messages_url(base_url: str, expected: str) -> None:
    assert messages_url(base_url) == expected


# -- structured output: a forced tool ---------------------------------------------------------

VERDICT = {
    "type": "object",
    "properties": {"pass": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["pass", "reason"],
    "additionalProperties": False,
}
SCHEMA = ResponseSchema(
    name="judge_verdicts",
    schema={
        "type": "object",
        "properties": {"fix-type": VERDICT, "body-why": VERDICT},
        "required": ["fix-type", "body-why"],
        "additionalProperties": False,
    },
)
ANSWER = {"fix-type": {"pass": True, "reason": "ok"}, "body-why": {"pass": False, "reason": "no"}}


def tool_use(given: object, *, name: str = "judge_verdicts") -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{next(_ids)}", "name": name, "input": given}


def structured(*blocks: dict[str, Any], stop_reason: str = "tool_use") -> Reply:
    return Reply.message(*blocks, stop_reason=stop_reason)


def _refuse_tools(request: RecordedRequest) -> Reply:
    if "tools" in request.json:
        return Reply(status=400, body="tools.0.custom.input_schema: JSON schema is invalid")
    return message(text("plain answer"))


def test_schema_is_sent_as_a_forced_tool_and_its_input_is_the_answer(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(structured(tool_use(ANSWER)))

    answer = backend.complete("s", "u", schema=SCHEMA)

    assert json.loads(answer) == ANSWER
    assert list(json.loads(answer)) == ["fix-type", "body-why"]
    [request] = endpoint.requests
    assert request.json == {
        "model": "m",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "u"}],
        "system": "s",
        "tools": [
            {
                "name": "judge_verdicts",
                "description": TOOL_DESCRIPTION,
                "input_schema": SCHEMA.schema,
            }
        ],
        "tool_choice": {"type": "tool", "name": "judge_verdicts"},
    }
    assert backend.structured_output is True


def test_calls_without_a_schema_send_no_tool(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(message(text("a")))

    assert backend.complete("s", "u") == "a"

    assert set(endpoint.requests[0].json) == {"model", "max_tokens", "messages", "system"}
    assert backend.structured_output is None


def test_text_before_the_tool_call_is_not_the_answer(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(
        structured(text("Let me record that."), tool_use({"x": 1}, name="other"), tool_use(ANSWER))
    )
    assert json.loads(backend.complete("s", "u", schema=SCHEMA)) == ANSWER


def test_an_endpoint_that_ignores_the_tool_answers_in_text(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint
) -> None:
    # llama-server does so when the model's chat template has no tool calls.
    endpoint.enqueue(message(text('[{"name": "fix-type", "pass": true}]')))

    assert backend.complete("s", "u", schema=SCHEMA) == '[{"name": "fix-type", "pass": true}]'

    assert backend.structured_output is True  # accepted, not refused: it is asked again
    assert "tools" in endpoint.requests[0].json


def test_a_tool_call_cut_off_at_max_tokens_is_malformed(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(structured(tool_use({"fix-type": {}}), stop_reason="max_tokens"))

    with pytest.raises(MalformedResponseError) as caught:
        backend.complete("s", "u", schema=SCHEMA)

    assert str(caught.value) == CUT_OFF_MESSAGE
    assert backend.structured_output is True  # the tool was accepted; the answer was cut


def test_a_text_answer_cut_off_at_max_tokens_is_returned(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(structured(text("went on and"), stop_reason="max_tokens"))
    assert backend.complete("s", "u", schema=SCHEMA) == "went on and"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, "content[0].input is a NoneType, not an object"),
        ([1], "content[0].input is a list, not an object"),
    ],
)
def test_a_tool_input_that_is_no_object_is_malformed(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint, given: object, expected: str
) -> None:
    endpoint.enqueue(structured(tool_use(given)))

    with pytest.raises(MalformedResponseError) as caught:
        backend.complete("s", "u", schema=SCHEMA)

    assert str(caught.value) == expected
    assert backend.structured_output is None


def test_refused_tool_falls_back_to_text_and_is_remembered(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.respond_with(_refuse_tools)

    assert backend.complete("s", "u", schema=SCHEMA) == "plain answer"
    assert backend.structured_output is False
    assert backend.complete("s", "again", schema=SCHEMA) == "plain answer"

    sent = [("tools" in r.json, "tool_choice" in r.json) for r in endpoint.requests]
    assert sent == [(True, True), (False, False), (False, False)]  # asked once, not again


@pytest.mark.parametrize("status", [400, 404, 415, 422, 500, 501])
def test_each_refusal_status_falls_back(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint, status: int
) -> None:
    endpoint.enqueue(Reply(status=status, body="no tools here"), message(text("plain")))

    assert backend.complete("s", "u", schema=SCHEMA) == "plain"
    assert backend.structured_output is False


@pytest.mark.parametrize("status", [401, 429, 503, 529])
def test_other_statuses_are_not_taken_for_a_refusal(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint, status: int
) -> None:
    endpoint.enqueue(Reply(status=status, body="nope"), message(text("late")))

    with pytest.raises(EndpointStatusError) as caught:
        backend.complete("s", "u", schema=SCHEMA)

    assert caught.value.status == status
    assert len(endpoint.requests) == 1
    assert backend.structured_output is None


def test_an_endpoint_that_fails_anyway_is_not_taken_for_a_refusal(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(Reply(status=500, body="down"), Reply(status=500, body="still down"))

    with pytest.raises(EndpointStatusError, match="HTTP 500: still down"):
        backend.complete("s", "u", schema=SCHEMA)

    assert backend.structured_output is None


def test_a_refusal_after_an_accepted_tool_is_an_error(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(structured(tool_use(ANSWER)), Reply(status=500, body="boom"))
    backend.complete("s", "u", schema=SCHEMA)

    with pytest.raises(EndpointStatusError, match="HTTP 500: boom"):
        backend.complete("s", "u", schema=SCHEMA)

    assert len(endpoint.requests) == 2
    assert backend.structured_output is True


def test_a_refused_tool_records_only_the_answered_call(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(
        Reply(status=400, body="tools are not supported"),
        message_with_usage("plain", {"input_tokens": 30, "output_tokens": 4}),
    )
    with recording() as usage:
        assert backend.complete("s", "u", schema=SCHEMA) == "plain"
    assert usage == [TokenUsage(30, 4)]


def test_a_cut_off_tool_call_records_its_usage(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(
        Reply(
            json={
                "content": [tool_use({})],
                "stop_reason": "max_tokens",
                "usage": {"input_tokens": 9, "output_tokens": 4096},
            }
        )
    )
    with recording() as usage, pytest.raises(MalformedResponseError):
        backend.complete("s", "u", schema=SCHEMA)
    assert usage == [TokenUsage(9, 4096)]


# -- property keys Anthropic refuses in a tool's input schema -----------------------------------

ODD = ["fix type", "Header ≤ 72 — “no period”", "Ünïcode", "fix_type", "y" * 70]


def _odd_schema() -> ResponseSchema:
    return ResponseSchema(
        name="judge_verdicts",
        schema={
            "type": "object",
            "properties": {name: VERDICT for name in ODD},
            "required": ODD,
            "additionalProperties": False,
        },
    )


def test_refused_keys_go_out_as_aliases_and_come_back_as_they_were(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint
) -> None:
    aliases = ["fix_type_2", "Header___72____no_period_", "Unicode", "fix_type", "y" * 64]

    def answer(request: RecordedRequest) -> Reply:
        [tool] = request.json["tools"]
        keys = list(tool["input_schema"]["properties"])
        return structured(tool_use({key: {"pass": True, "reason": key} for key in keys}))

    endpoint.respond_with(answer)

    restored = json.loads(backend.complete("s", "u", schema=_odd_schema()))

    assert list(restored) == ODD
    assert [verdict["reason"] for verdict in restored.values()] == aliases
    [tool] = endpoint.requests[0].json["tools"]
    sent = tool["input_schema"]
    assert list(sent["properties"]) == sent["required"] == aliases
    assert sent["properties"]["fix_type"] == VERDICT  # an allowed key is left as it is
    assert sent["properties"]["fix_type_2"] == {
        **VERDICT,
        "description": 'Stands for the key "fix type".',
    }
    assert all(ANTHROPIC_PROPERTY_KEY.fullmatch(key) for key in sent["properties"])
    assert _odd_schema().schema["properties"]["fix type"] == VERDICT  # the schema is not changed


def test_aliases_reach_nested_properties_and_array_items(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint
) -> None:
    inner = {
        "type": "object",
        "properties": {"a b": {"type": "string", "description": "the a and b"}},
        "required": ["a b"],
        "additionalProperties": False,
    }
    schema = ResponseSchema(
        name="nested",
        schema={
            "type": "object",
            "properties": {"list of": {"type": "array", "items": inner}, "one": inner},
            "required": ["list of", "one"],
            "additionalProperties": False,
        },
    )
    given = {"list_of": [{"a_b": "x"}, {"a_b": "y"}], "one": {"a_b": "z"}, "extra key": 1}
    endpoint.enqueue(structured(tool_use(given, name="nested")))

    restored = json.loads(backend.complete("s", "u", schema=schema))

    assert restored == {
        "list of": [{"a b": "x"}, {"a b": "y"}],
        "one": {"a b": "z"},
        "extra key": 1,
    }
    sent = endpoint.requests[0].json["tools"][0]["input_schema"]
    assert sent["properties"]["one"]["properties"]["a_b"]["description"] == (
        'Stands for the key "a b". the a and b'
    )
    assert sent["properties"]["list_of"]["items"]["required"] == ["a_b"]


# -- answers ----------------------------------------------------------------------------------


def test_text_blocks_are_joined_in_order_and_others_skipped(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(
        message(
            text("first, "),
            {"type": "tool_use", "id": "toolu_1", "name": "grade", "input": {"x": 1}},
            text("second"),
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            text("\n```\n> é\n```  "),
        )
    )
    assert backend.complete("", "u") == "first, second\n```\n> é\n```  "


def test_empty_text_block_gives_empty_answer(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(message(text("")))
    assert backend.complete("", "u") == ""


# -- status errors ----------------------------------------------------------------------------


def test_rate_limited_with_retry_after(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(Reply(status=429, body="rate limited", headers={"Retry-After": "7"}))

    with pytest.raises(EndpointStatusError) as caught:
        backend.complete("", "u")

    assert str(caught.value) == "HTTP 429: rate limited"
    assert caught.value.status == 429
    assert caught.value.throttled
    assert caught.value.retry_after == 7.0


def test_overloaded_529_keeps_its_status(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint
) -> None:
    body = '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    endpoint.enqueue(Reply(status=529, body=body, headers={"Retry-After": when}))

    with pytest.raises(EndpointStatusError) as caught:
        backend.complete("", "u")

    assert caught.value.status == 529
    assert caught.value.body == body
    assert caught.value.retry_after is not None
    assert 25 <= caught.value.retry_after <= 30


def test_no_retry_on_error(backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint) -> None:
    endpoint.enqueue(Reply(status=500, body="boom"), message(text("late")))
    with pytest.raises(EndpointStatusError):
        backend.complete("", "u")
    assert len(endpoint.requests) == 1
    assert endpoint.pending == 1


def test_api_key_echoed_in_error_body_is_redacted(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.respond_with(
        lambda request: Reply(status=401, body=f"bad key: {request.headers['x-api-key']}")
    )
    with pytest.raises(EndpointStatusError) as caught:
        backend.complete("", "u")
    assert str(caught.value) == "HTTP 401: bad key: ***"
    assert KEY not in caught.value.body
    assert KEY not in repr(backend)
    assert repr(backend) == f"AnthropicMessagesBackend(url={backend.url!r}, model='m')"


# -- malformed bodies -------------------------------------------------------------------------


def test_non_json_body(backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint) -> None:
    endpoint.enqueue(Reply(body="<html>gateway</html>"))
    with pytest.raises(MalformedResponseError) as caught:
        backend.complete("", "u")
    assert str(caught.value) == (
        "parsing response: HTTP 200 with Content-Type text/plain; charset=utf-8, not JSON "
        "(Expecting value: line 1 column 1 (char 0)): <html>gateway</html>"
    )


def test_an_answer_larger_than_the_bound_is_refused(
    client: httpx.Client, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(replace(message(text("hidden")), padding=5 << 20))
    backend = AnthropicMessagesBackend(
        client, base_url=root_url(endpoint), api_key=KEY, model="m", answer_max_bytes=1 << 20
    )
    with pytest.raises(AnswerTooLargeError) as caught:
        backend.complete("", "u")
    assert str(caught.value) == (
        f"POST {backend.url}: the answer is larger than 1 MiB, the bound of answer_max_bytes"
    )


def test_an_api_key_a_header_cannot_carry_is_named_and_never_shown(
    client: httpx.Client, endpoint: ScriptedEndpoint
) -> None:
    backend = backend_for(client, root_url(endpoint), api_key="sk-ant-ключ")
    with pytest.raises(BackendError) as caught:
        backend.complete("", "u")
    assert str(caught.value) == (
        f"POST {backend.url}: the API key holds a character an HTTP header cannot carry "
        "(only printable ASCII can go in a header)"
    )
    assert endpoint.requests == []


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"id": "msg_1", "type": "message"}, "no content in response"),
        ({"content": None}, "no content in response"),
        ([1, 2], "parsing response: expected a JSON object, got list"),
        ({"content": "hi"}, "parsing response: content is a str, not a list"),
        ({"content": []}, "no text content in response"),
        ({"content": [{"type": "tool_use", "id": "t"}]}, "no text content in response"),
        ({"content": ["hi"]}, "content[0] is a str, not an object"),
        ({"content": [text("a"), {"type": "text"}]}, "content[1].text is a NoneType, not a string"),
    ],
)
def test_unusable_message(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint, body: object, expected: str
) -> None:
    endpoint.enqueue(Reply(json=body))
    with pytest.raises(MalformedResponseError) as caught:
        backend.complete("", "u")
    assert str(caught.value) == expected


# -- transport errors -------------------------------------------------------------------------


def test_connection_refused(client: httpx.Client) -> None:
    with ScriptedEndpoint() as stopped:
        base_url = root_url(stopped)
    backend = backend_for(client, base_url)

    with pytest.raises(TransportError) as caught:
        backend.complete("", "u")

    assert str(caught.value) == f"POST {base_url}/v1/messages: connection refused"
    assert any(isinstance(cause, ConnectionRefusedError) for cause in causes(caught.value))


def test_timeout(endpoint: ScriptedEndpoint) -> None:
    endpoint.enqueue(Reply(json={}, delay=10))
    with loopback_client(0.5) as quick:
        backend = backend_for(quick, root_url(endpoint))
        with pytest.raises(TransportError, match=r"^POST .*/v1/messages: timed out after 0\.5s$"):
            backend.complete("", "u")
    assert len(endpoint.requests) == 1


def test_connection_closed_without_answer(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(Reply(close=True))
    with pytest.raises(TransportError) as caught:
        backend.complete("", "u")
    assert str(caught.value).startswith(f"POST {backend.url}: connection closed")
    assert isinstance(caught.value.__cause__, httpx.RemoteProtocolError)


def test_empty_base_url_fails_as_transport_error(client: httpx.Client) -> None:
    with pytest.raises(TransportError, match=r"^POST /v1/messages: unsupported URL"):
        backend_for(client, "").complete("", "u")


def test_api_key_never_in_transport_error(client: httpx.Client) -> None:
    with ScriptedEndpoint() as stopped:
        root = root_url(stopped)
    backend = backend_for(client, f"{root}/{KEY}")

    with pytest.raises(TransportError) as caught:
        backend.complete("", "u")

    assert KEY not in str(caught.value)
    assert str(caught.value) == f"POST {root}/***/v1/messages: connection refused"
    assert KEY not in repr(backend)


# -- token usage ------------------------------------------------------------------------------

_MISSING = object()


def message_with_usage(answer: str, usage: object = _MISSING) -> Reply:
    """A 200 Messages API answer with one text block whose ``usage`` is ``usage`` (or absent)."""
    body: dict[str, Any] = {
        "id": f"msg_{next(_ids)}",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [text(answer)],
        "stop_reason": "end_turn",
    }
    if usage is not _MISSING:
        body["usage"] = usage
    return Reply(json=body)


def test_usage_of_a_successful_call_is_recorded(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(
        message_with_usage(
            "a",
            {
                "input_tokens": 2095,
                "output_tokens": 503,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        ),
        message_with_usage("b", {"input_tokens": 11, "output_tokens": 0}),
    )

    with recording() as usage:
        assert backend.complete("sys", "one") == "a"
        assert backend.complete("sys", "two") == "b"

    assert usage == [TokenUsage(2095, 503), TokenUsage(11, 0)]


def test_a_body_without_usage_still_counts_the_call(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(message_with_usage("a"))
    with recording() as usage:
        assert backend.complete("", "u") == "a"
    assert usage == [TokenUsage(None, None)]


@pytest.mark.parametrize(
    ("body_usage", "expected"),
    [
        (None, TokenUsage(None, None)),
        ([1, 2], TokenUsage(None, None)),
        ({"input_tokens": 40}, TokenUsage(40, None)),
        ({"output_tokens": 6}, TokenUsage(None, 6)),
        ({"input_tokens": True, "output_tokens": False}, TokenUsage(None, None)),
        ({"input_tokens": "40", "output_tokens": 6.0}, TokenUsage(None, None)),
        ({"prompt_tokens": 40, "completion_tokens": 6}, TokenUsage(None, None)),
    ],
)
def test_unusable_counts_are_recorded_as_unknown(
    backend: AnthropicMessagesBackend,
    endpoint: ScriptedEndpoint,
    body_usage: object,
    expected: TokenUsage,
) -> None:
    endpoint.enqueue(message_with_usage("a", body_usage))
    with recording() as usage:
        assert backend.complete("", "u") == "a"
    assert usage == [expected]


@pytest.mark.parametrize(
    "reply",
    [
        Reply(status=500, body="internal error"),
        Reply(status=529, body="overloaded"),
        Reply(body="<html>gateway</html>"),
        Reply(json={"content": [], "usage": {"input_tokens": 5, "output_tokens": 1}}),
        Reply(
            json={
                "content": [{"type": "text", "text": 7}],
                "usage": {"input_tokens": 5, "output_tokens": 1},
            }
        ),
    ],
)
def test_a_failed_call_records_nothing(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint, reply: Reply
) -> None:
    endpoint.enqueue(reply)
    with recording() as usage, pytest.raises(BackendError):
        backend.complete("", "u")
    assert usage == []


def test_calls_outside_a_recording_still_answer(
    backend: AnthropicMessagesBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(
        message_with_usage("unrecorded", {"input_tokens": 9, "output_tokens": 9}),
        message_with_usage("recorded", {"input_tokens": 2, "output_tokens": 1}),
    )

    assert backend.complete("", "u") == "unrecorded"
    with recording() as usage:
        assert backend.complete("", "u") == "recorded"

    assert usage == [TokenUsage(2, 1)]
