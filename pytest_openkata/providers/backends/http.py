"""The http backend: an OpenAI-compatible ``/chat/completions`` endpoint (spec section 5b).

One :class:`httpx.Client` per pytest session is shared by the agent and the judge backends, so
connections are kept between calls; :func:`make_client` builds it.
:class:`OpenAIChatBackend` sends one request per call and never retries: the runner owns the
retry policy and decides from the exception class (and :attr:`EndpointStatusError.throttled`)
what to do.

Every successful call reports the ``usage.prompt_tokens`` and ``usage.completion_tokens`` of
the response to :func:`~.record_tokens` (None for a count the body does not
give as a non-negative integer), and the ``model`` the response says answered to
:func:`~.record_reported_model` (the run manifest records it); a failed call, a refused
``response_format`` included, records nothing.

A structured answer (one asked with a ``schema``) that the endpoint cut off at its token limit
(``finish_reason`` "length") is a :class:`MalformedResponseError`: it is incomplete JSON, and
the judge would otherwise read fewer verdicts from it than criteria. A plain answer cut off
there is returned as it is, as the reference returns it.

The API key never appears in an exception text (see :mod:`.client`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import httpx

from pytest_openkata.contracts.backends import (
    DEFAULT_ANSWER_MAX_BYTES,
    SCHEMA_REFUSED_STATUSES,
    BackendContext,
    Message,
    ResponseSchema,
)
from pytest_openkata.contracts.errors import (
    BackendError,
    EndpointStatusError,
    MalformedResponseError,
)
from pytest_openkata.contracts.transcripts import Transcript, one_turn
from pytest_openkata.infra.reported_models import record_reported_model
from pytest_openkata.infra.usage import record_tokens, usage_in
from pytest_openkata.providers.backends.client import (
    ask_json,
    make_client,
    parse_retry_after,
)

__all__ = [
    "CUT_OFF_MESSAGE",
    "OpenAIChatBackend",
    "from_context",
    "make_client",
    "parse_retry_after",
]

CUT_OFF_MESSAGE = 'structured answer cut off at the token limit (finish_reason "length")'


# How long the question about the server's capacity may take: a server that does not answer
# it at once is taken as one that does not say.
CAPACITY_TIMEOUT = 10.0


def _response_format(schema: ResponseSchema) -> dict[str, Any]:
    return {
        "type": "json_schema",
        "json_schema": {"name": schema.name, "strict": True, "schema": schema.schema},
    }


class OpenAIChatBackend:
    """A :class:`~.Completer` for OpenAI-compatible chat endpoints.

    ``base_url`` is the API root that ``/chat/completions`` goes under, e.g.
    ``https://api.openai.com/v1``; :attr:`endpoint` keeps it as it was given, unless
    ``endpoint_id`` names what answers there (a local server on a new port every run).
    ``answer_max_bytes`` bounds the response body (:class:`~.AnswerTooLargeError` beyond it).
    """

    def __init__(
        self,
        client: httpx.Client,
        *,
        base_url: str,
        api_key: str,
        model: str,
        endpoint_id: str = "",
        answer_max_bytes: int = DEFAULT_ANSWER_MAX_BYTES,
    ) -> None:
        self.model = model
        self.answer_max_bytes = answer_max_bytes
        self._endpoint = endpoint_id or base_url
        self.url = base_url.rstrip("/") + "/chat/completions"
        self._client = client
        self._api_key = api_key
        # Whether the endpoint accepts ``response_format``: unknown until the first request
        # with a schema, then remembered for the session.
        self.structured_output: bool | None = None

    @property
    def endpoint(self) -> str:
        """The endpoint's identity: ``endpoint_id`` when given, else the base URL."""
        return self._endpoint

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={self.url!r}, model={self.model!r})"

    def capacity(self) -> int | None:
        """How many requests the server serves at once, as llama-server says in ``total_slots``
        of ``GET /props`` (beside the API root's ``/v1``); None from any other endpoint, or
        when the question fails."""
        root = self.url.removesuffix("/chat/completions").removesuffix("/v1")
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        try:
            response = self._client.get(f"{root}/props", headers=headers, timeout=CAPACITY_TIMEOUT)
            slots = response.json().get("total_slots") if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
            return None
        return slots

    def complete_transcribed(self, system: str, user: str) -> tuple[str, Transcript]:
        """The answer, and its transcript: one turn."""
        answer = self.complete(system, user)
        return answer, one_turn(answer)

    def converse(self, system: str, messages: Sequence[Message]) -> str:
        """The answer to a conversation, its messages sent as the chat's own."""
        sent = [{"role": "system", "content": system}] if system else []
        sent += [{"role": role, "content": text} for role, text in messages]
        return self._post({"model": self.model, "messages": sent})[0]

    def complete(self, system: str, user: str, *, schema: ResponseSchema | None = None) -> str:
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": user})
        payload: dict[str, Any] = {"model": self.model, "messages": messages}
        if schema is None or self.structured_output is False:
            return self._post(payload)[0]
        structured = {**payload, "response_format": _response_format(schema)}
        try:
            answer, finish_reason = self._post(structured)
        except EndpointStatusError as exc:
            if self.structured_output is not None or exc.status not in SCHEMA_REFUSED_STATUSES:
                raise
            answer = self._post(payload)[0]  # raises on its own when the endpoint just fails
            self.structured_output = False  # refused: plain text for the rest of the session
            return answer
        self.structured_output = True
        if finish_reason == "length":
            raise MalformedResponseError(CUT_OFF_MESSAGE)
        return answer

    def _post(self, payload: dict[str, Any]) -> tuple[str, object]:
        """The answer and ``choices[0].finish_reason`` (None when absent)."""
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        data = ask_json(
            self._client,
            self.url,
            payload,
            headers,
            self._api_key,
            max_bytes=self.answer_max_bytes,
        )
        content = _content_of(data)
        record_tokens(usage_in(data, "prompt_tokens", "completion_tokens"))
        record_reported_model(data)
        return content, data["choices"][0].get("finish_reason")


def from_context(context: BackendContext) -> OpenAIChatBackend:
    """The ``http`` entry of the ``pytest_openkata.backends`` group: the endpoint of the
    run's ``http`` settings, on the session's client."""
    http = context.settings.http
    if not http.base_url:
        raise BackendError(
            "the http backend needs a base URL: set --eval-base-url, the environment "
            "variable OPENKATA_EVAL_HTTP_BASE_URL, http.base_url in .openkata-eval.yaml "
            "or the ini option eval_http_base_url"
        )
    return OpenAIChatBackend(
        context.client,
        base_url=http.base_url,
        api_key=http.api_key,
        model=context.model,
        endpoint_id=http.endpoint_id,
        answer_max_bytes=context.settings.answer_max_bytes,
    )


def _content_of(data: dict[str, Any]) -> str:
    """``choices[0].message.content`` of a chat completion body; null content is ``""``."""
    choices = data.get("choices")
    if not choices:
        raise MalformedResponseError("no choices in response")
    if not isinstance(choices, list):
        raise MalformedResponseError(
            f"parsing response: choices is a {type(choices).__name__}, not a list"
        )
    first = choices[0]
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict):
        raise MalformedResponseError("no message object in choices[0]")
    content = message.get("content")
    if content is None:
        return ""
    if not isinstance(content, str):
        raise MalformedResponseError(
            f"choices[0].message.content is a {type(content).__name__}, not a string"
        )
    return content


if TYPE_CHECKING:  # the protocol this provider implements, checked by mypy
    from pytest_openkata.contracts.backends import Completer, Conversing

    _implements: type[Completer] = OpenAIChatBackend
    _converses: type[Conversing] = OpenAIChatBackend
