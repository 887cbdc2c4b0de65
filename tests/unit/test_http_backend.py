"""The http backend against a real loopback server (spec section 5b, checks 21-23)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest

from pytest_openkata.contracts.backends import ResponseSchema
from pytest_openkata.contracts.errors import (
    BackendError,
    EndpointStatusError,
    MalformedResponseError,
    TransportError,
)
from pytest_openkata.infra.usage import TokenUsage, recording
from pytest_openkata.providers.backends.http import (
    CUT_OFF_MESSAGE,
    OpenAIChatBackend,
    make_client,
    parse_retry_after,
)
from tests.support.endpoint import RecordedRequest, Reply, ScriptedEndpoint
from tests.support.http import causes, loopback_client

KEY = "test-key"


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
    client: httpx.Client, base_url: str, *, api_key: str = KEY, model: str = "gpt-4o"
) -> OpenAIChatBackend:
    return OpenAIChatBackend(client, base_url=base_url, api_key=api_key, model=model)


@pytest.fixture
def backend(client: httpx.Client, endpoint: ScriptedEndpoint) -> OpenAIChatBackend:
    return backend_for(client, endpoint.base_url)


# -- requests ---------------------------------------------------------------------------------


def test_check_21_post_with_key_and_system_message(
    backend: OpenAIChatBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(Reply.chat("test response"))

    assert backend.complete("You are a judge.", "Grade this.") == "test response"

    [request] = endpoint.requests
    assert request.method == "POST"
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer test-key"
    assert request.headers["content-type"] == "application/json"
    assert request.json["model"] == "gpt-4o"
    assert request.json["messages"] == [
        {"role": "system", "content": "You are a judge."},
        {"role": "user", "content": "Grade this."},
    ]


def test_check_22_empty_system_and_key_send_one_user_message_and_no_auth(
    client: httpx.Client, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(Reply.chat("ok"))
    backend = backend_for(client, endpoint.base_url, api_key="")

    assert backend.complete("", "hello") == "ok"

    [request] = endpoint.requests
    assert request.json["messages"] == [{"role": "user", "content": "hello"}]
    assert "authorization" not in request.headers


def test_body_has_only_model_and_messages(
    backend: OpenAIChatBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(Reply.chat("x"))
    backend.complete("s", "u")
    assert set(endpoint.requests[0].json) == {"model", "messages"}


def test_trailing_slashes_of_base_url_are_dropped(
    client: httpx.Client, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(Reply.chat("x"))
    backend_for(client, endpoint.base_url + "//").complete("", "u")
    assert endpoint.requests[0].path == "/v1/chat/completions"


def test_endpoint_is_the_base_url_as_configured(client: httpx.Client) -> None:
    backend = backend_for(client, "http://models.example/v1/")

    assert backend.endpoint == "http://models.example/v1/"
    assert backend.url == "http://models.example/v1/chat/completions"
    with pytest.raises(AttributeError):
        backend.endpoint = "http://elsewhere.example/v1"  # type: ignore[misc]


def test_content_is_returned_as_is(backend: OpenAIChatBackend, endpoint: ScriptedEndpoint) -> None:
    content = "```python\n> quoted\nprint('é')\n```\n  "
    endpoint.enqueue(Reply.chat(content))
    assert backend.complete("", "u") == content


def test_null_content_gives_empty_text(
    backend: OpenAIChatBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(Reply.chat(None))
    assert backend.complete("", "u") == ""


# -- status errors ----------------------------------------------------------------------------


def test_check_23_rate_limited(backend: OpenAIChatBackend, endpoint: ScriptedEndpoint) -> None:
    endpoint.enqueue(Reply(status=429, body="rate limited"))

    with pytest.raises(EndpointStatusError) as caught:
        backend.complete("", "u")

    assert str(caught.value) == "HTTP 429: rate limited"
    assert caught.value.status == 429
    assert caught.value.throttled
    assert caught.value.retry_after is None


@pytest.mark.parametrize(("header", "expected"), [("7", 7.0), ("1.5", 1.5)])
def test_retry_after_seconds(
    backend: OpenAIChatBackend, endpoint: ScriptedEndpoint, header: str, expected: float
) -> None:
    endpoint.enqueue(Reply(status=429, body="slow down", headers={"Retry-After": header}))
    with pytest.raises(EndpointStatusError) as caught:
        backend.complete("", "u")
    assert caught.value.retry_after == expected


def test_retry_after_http_date(backend: OpenAIChatBackend, endpoint: ScriptedEndpoint) -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    endpoint.enqueue(Reply(status=503, body="busy", headers={"Retry-After": when}))
    with pytest.raises(EndpointStatusError) as caught:
        backend.complete("", "u")
    assert caught.value.retry_after is not None
    assert 25 <= caught.value.retry_after <= 30


NOW = datetime(2026, 6, 20, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", None),
        ("soon", None),
        ("-1", None),
        ("nan", None),
        (" 120 ", 120.0),
        ("Sat, 20 Jun 2026 12:01:30 GMT", 90.0),
        ("Sat, 20 Jun 2026 11:00:00 GMT", 0.0),
    ],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, now=NOW) == expected


def test_server_error_is_a_status_error(
    backend: OpenAIChatBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(Reply(status=500, body="internal error"))
    with pytest.raises(EndpointStatusError) as caught:
        backend.complete("", "u")
    assert str(caught.value) == "HTTP 500: internal error"
    assert caught.value.status == 500
    assert not caught.value.throttled


def test_no_retry_on_error(backend: OpenAIChatBackend, endpoint: ScriptedEndpoint) -> None:
    endpoint.enqueue(Reply(status=500, body="boom"), Reply.chat("late"))
    with pytest.raises(EndpointStatusError):
        backend.complete("", "u")
    assert len(endpoint.requests) == 1
    assert endpoint.pending == 1


def test_api_key_echoed_in_error_body_is_redacted(
    backend: OpenAIChatBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.respond_with(
        lambda request: Reply(status=401, body=f"bad header: {request.headers['authorization']}")
    )
    with pytest.raises(EndpointStatusError) as caught:
        backend.complete("", "u")
    assert str(caught.value) == "HTTP 401: bad header: Bearer ***"
    assert KEY not in caught.value.body
    assert KEY not in repr(backend)


# -- malformed bodies -------------------------------------------------------------------------


def test_non_json_body(backend: OpenAIChatBackend, endpoint: ScriptedEndpoint) -> None:
    endpoint.enqueue(Reply(body="<html>gateway</html>"))
    with pytest.raises(MalformedResponseError, match=r"^parsing response: "):
        backend.complete("", "u")


@pytest.mark.parametrize("body", [{"choices": []}, {"id": "x"}, {"choices": None}])
def test_no_choices(backend: OpenAIChatBackend, endpoint: ScriptedEndpoint, body: object) -> None:
    endpoint.enqueue(Reply(json=body))
    with pytest.raises(MalformedResponseError) as caught:
        backend.complete("", "u")
    assert str(caught.value) == "no choices in response"


@pytest.mark.parametrize(
    ("body", "text"),
    [
        ([1, 2], "parsing response: expected a JSON object, got list"),
        ({"choices": "abc"}, "parsing response: choices is a str, not a list"),
        ({"choices": [{"index": 0}]}, "no message object in choices[0]"),
        ({"choices": ["hi"]}, "no message object in choices[0]"),
        (
            {"choices": [{"message": {"content": ["a"]}}]},
            "choices[0].message.content is a list, not a string",
        ),
    ],
)
def test_unusable_completion(
    backend: OpenAIChatBackend, endpoint: ScriptedEndpoint, body: object, text: str
) -> None:
    endpoint.enqueue(Reply(json=body))
    with pytest.raises(MalformedResponseError) as caught:
        backend.complete("", "u")
    assert str(caught.value) == text


# -- transport errors -------------------------------------------------------------------------


def test_connection_refused(client: httpx.Client) -> None:
    with ScriptedEndpoint() as stopped:
        base_url = stopped.base_url
    backend = backend_for(client, base_url)

    with pytest.raises(TransportError) as caught:
        backend.complete("", "u")

    assert str(caught.value) == f"POST {base_url}/chat/completions: connection refused"
    assert any(isinstance(cause, ConnectionRefusedError) for cause in causes(caught.value))


def test_timeout(endpoint: ScriptedEndpoint) -> None:
    endpoint.enqueue(Reply(json={}, delay=10))
    with loopback_client(0.5) as quick:
        backend = backend_for(quick, endpoint.base_url)
        with pytest.raises(TransportError, match=r"timed out after 0\.5s$"):
            backend.complete("", "u")
    assert len(endpoint.requests) == 1


def test_connection_closed_without_answer(
    backend: OpenAIChatBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(Reply(close=True))
    with pytest.raises(TransportError) as caught:
        backend.complete("", "u")
    assert str(caught.value).startswith(f"POST {backend.url}: connection closed")
    assert isinstance(caught.value.__cause__, httpx.RemoteProtocolError)


def test_empty_base_url_fails_as_transport_error(client: httpx.Client) -> None:
    with pytest.raises(TransportError, match=r"^POST /chat/completions: unsupported URL"):
        backend_for(client, "").complete("", "u")


def test_errors_are_distinct_backend_errors() -> None:
    kinds = [EndpointStatusError, TransportError, MalformedResponseError]
    assert all(issubclass(kind, BackendError) for kind in kinds)
    assert not any(issubclass(a, b) for a in kinds for b in kinds if a is not b)


def test_make_client_timeout() -> None:
    with make_client(2) as http_client:
        assert http_client.timeout == httpx.Timeout(2.0)  # connect, read, write and pool
    with pytest.raises(ValueError, match="positive"):
        make_client(0)


# -- the scripted endpoint itself -------------------------------------------------------------


def test_endpoint_without_script_answers_500(
    backend: OpenAIChatBackend, endpoint: ScriptedEndpoint
) -> None:
    with pytest.raises(EndpointStatusError) as caught:
        backend.complete("", "u")
    assert str(caught.value) == "HTTP 500: no scripted reply left"


def test_endpoint_routes_with_a_responder(
    backend: OpenAIChatBackend, endpoint: ScriptedEndpoint
) -> None:
    def route(request: RecordedRequest) -> Reply:
        first = request.json["messages"][0]
        return Reply.chat("judge" if first["role"] == "system" else "agent")

    endpoint.respond_with(route)
    assert backend.complete("", "task") == "agent"
    assert backend.complete("grade", "answer") == "judge"
    assert len(endpoint.requests) == 2


# --- structured output -------------------------------------------------------------------------

SCHEMA = ResponseSchema(name="judge_verdicts", schema={"type": "object"})


def _refuse_response_format(request: RecordedRequest) -> Reply:
    if "response_format" in request.json:
        return Reply(status=400, body="response_format is not supported")
    return Reply.chat("plain answer")


def test_schema_is_sent_as_a_json_schema_response_format(
    backend: OpenAIChatBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(Reply.chat('{"verdicts": []}'))

    assert backend.complete("sys", "user", schema=SCHEMA) == '{"verdicts": []}'

    assert endpoint.requests[0].json["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "judge_verdicts", "strict": True, "schema": {"type": "object"}},
    }
    assert backend.structured_output is True


def test_a_structured_answer_cut_off_at_the_token_limit_is_malformed(
    backend: OpenAIChatBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(Reply.chat('{"verdicts": [{"name": "a", "pass": tr', finish_reason="length"))

    with pytest.raises(MalformedResponseError) as caught:
        backend.complete("sys", "user", schema=SCHEMA)

    assert str(caught.value) == CUT_OFF_MESSAGE
    assert backend.structured_output is True  # the schema was accepted; the answer was cut


def test_a_plain_answer_cut_off_at_the_token_limit_is_returned(
    backend: OpenAIChatBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(Reply.chat("a long answer that went on and", finish_reason="length"))

    assert backend.complete("sys", "user") == "a long answer that went on and"


def test_refused_schema_falls_back_to_text_and_is_remembered(
    backend: OpenAIChatBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.respond_with(_refuse_response_format)

    assert backend.complete("sys", "user", schema=SCHEMA) == "plain answer"
    assert backend.structured_output is False
    assert backend.complete("sys", "again", schema=SCHEMA) == "plain answer"

    sent = [("response_format" in r.json) for r in endpoint.requests]
    assert sent == [True, False, False]  # the second call does not ask again


def test_an_endpoint_that_fails_anyway_is_not_taken_for_a_refusal(
    backend: OpenAIChatBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(Reply(status=500, body="down"), Reply(status=500, body="still down"))

    with pytest.raises(EndpointStatusError, match="HTTP 500: still down"):
        backend.complete("sys", "user", schema=SCHEMA)

    assert backend.structured_output is None


def test_calls_without_a_schema_keep_the_reference_body(
    backend: OpenAIChatBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(Reply.chat("x"))

    backend.complete("", "user")

    assert set(endpoint.requests[0].json) == {"model", "messages"}


# --- token usage -------------------------------------------------------------------------------

_MISSING = object()


def chat_with_usage(content: str, usage: object = _MISSING) -> Reply:
    """A 200 chat completion answering ``content`` whose ``usage`` is ``usage`` (or absent)."""
    body: dict[str, Any] = {
        "id": "chatcmpl-usage",
        "object": "chat.completion",
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
    }
    if usage is not _MISSING:
        body["usage"] = usage
    return Reply(json=body)


def test_usage_of_a_successful_call_is_recorded(
    backend: OpenAIChatBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(
        chat_with_usage("a", {"prompt_tokens": 123, "completion_tokens": 45, "total_tokens": 168}),
        chat_with_usage("b", {"prompt_tokens": 7, "completion_tokens": 0}),
    )

    with recording() as usage:
        assert backend.complete("sys", "one") == "a"
        assert backend.complete("sys", "two") == "b"

    assert usage == [TokenUsage(123, 45), TokenUsage(7, 0)]


def test_a_body_without_usage_still_counts_the_call(
    backend: OpenAIChatBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(chat_with_usage("a"))
    with recording() as usage:
        assert backend.complete("", "u") == "a"
    assert usage == [TokenUsage(None, None)]


@pytest.mark.parametrize(
    ("body_usage", "expected"),
    [
        (None, TokenUsage(None, None)),
        ("lots", TokenUsage(None, None)),
        ({}, TokenUsage(None, None)),
        ({"prompt_tokens": 12}, TokenUsage(12, None)),
        ({"completion_tokens": 3}, TokenUsage(None, 3)),
        ({"prompt_tokens": True, "completion_tokens": False}, TokenUsage(None, None)),
        ({"prompt_tokens": "12", "completion_tokens": 2.5}, TokenUsage(None, None)),
        ({"prompt_tokens": -1, "completion_tokens": 4}, TokenUsage(None, 4)),
    ],
)
def test_unusable_counts_are_recorded_as_unknown(
    backend: OpenAIChatBackend, endpoint: ScriptedEndpoint, body_usage: object, expected: TokenUsage
) -> None:
    endpoint.enqueue(chat_with_usage("a", body_usage))
    with recording() as usage:
        assert backend.complete("", "u") == "a"
    assert usage == [expected]


@pytest.mark.parametrize(
    "reply",
    [
        Reply(status=500, body="internal error"),
        Reply(status=429, body="rate limited"),
        Reply(body="<html>gateway</html>"),
        Reply(json={"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1}}),
        Reply(
            json={
                "choices": [{"message": {"content": ["a"]}}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 1},
            }
        ),
    ],
)
def test_a_failed_call_records_nothing(
    backend: OpenAIChatBackend, endpoint: ScriptedEndpoint, reply: Reply
) -> None:
    endpoint.enqueue(reply)
    with recording() as usage, pytest.raises(BackendError):
        backend.complete("", "u")
    assert usage == []


def test_a_refused_schema_records_only_the_answered_call(
    backend: OpenAIChatBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(
        Reply(status=400, body="response_format is not supported"),
        chat_with_usage("plain", {"prompt_tokens": 30, "completion_tokens": 4}),
    )
    with recording() as usage:
        assert backend.complete("sys", "user", schema=SCHEMA) == "plain"
    assert len(endpoint.requests) == 2
    assert usage == [TokenUsage(30, 4)]


def test_calls_outside_a_recording_still_answer(
    backend: OpenAIChatBackend, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(
        chat_with_usage("unrecorded", {"prompt_tokens": 9, "completion_tokens": 9}),
        chat_with_usage("recorded", {"prompt_tokens": 2, "completion_tokens": 1}),
    )

    assert backend.complete("", "u") == "unrecorded"
    with recording() as usage:
        assert backend.complete("", "u") == "recorded"

    assert usage == [TokenUsage(2, 1)]


def test_concurrent_calls_are_recorded_by_their_own_thread(
    backend: OpenAIChatBackend, endpoint: ScriptedEndpoint
) -> None:
    def route(request: RecordedRequest) -> Reply:
        n = int(request.json["messages"][0]["content"])
        return chat_with_usage(str(n), {"prompt_tokens": n, "completion_tokens": 10 * n})

    endpoint.respond_with(route)
    calls = 5
    barrier = threading.Barrier(2)
    results: dict[int, tuple[list[str], list[TokenUsage]]] = {}
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            with recording() as usage:
                barrier.wait()
                answers = [backend.complete("", str(n)) for _ in range(calls)]
            results[n] = (answers, usage)
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(n,)) for n in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert results[1] == (["1"] * calls, [TokenUsage(1, 10)] * calls)
    assert results[2] == (["2"] * calls, [TokenUsage(2, 20)] * calls)
    assert len(endpoint.requests) == 2 * calls
