"""The anthropic backend: the Anthropic Messages API, ``POST /v1/messages``.

It shares the session's :class:`httpx.Client` (see
:func:`~.make_client`) and follows the http backend in everything
but the wire format: one request per call, no retries, failures raised as
:class:`~.BackendError` subclasses with the same texts.

Every successful call reports the ``usage.input_tokens`` and ``usage.output_tokens`` of the
response to :func:`~.record_tokens` (None for a count the body does not give
as a non-negative integer); a failed call records nothing.

Anthropic answers 529 when it is overloaded. That is kept as an
:class:`~.EndpointStatusError` with ``status == 529`` (and whatever
``Retry-After`` came with it); :attr:`~.EndpointStatusError.throttled`
stays about 429 alone, and the runner decides from the status whether 529 is worth waiting for.

The API key never appears in an exception text nor in ``repr()``: every occurrence of it is
replaced with ``***``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx

from pytest_openkata.infra.usage import record_tokens, usage_in
from pytest_openkata.providers.backends import (
    BackendContext,
    MalformedResponseError,
    ResponseSchema,
)
from pytest_openkata.providers.backends.client import (
    json_object,
    post_json,
    redact_secret,
)

__all__ = ["ANTHROPIC_VERSION", "AnthropicMessagesBackend", "from_context", "messages_url"]

ANTHROPIC_VERSION = "2023-06-01"


class AnthropicMessagesBackend:
    """A :class:`~.Completer` for the Anthropic Messages API.

    ``base_url`` is the API root, e.g. ``https://api.anthropic.com``; a base URL that already
    ends with ``/v1`` is accepted as well and gets no second ``/v1``; :attr:`endpoint` keeps it
    as it was given. ``max_tokens`` caps the answer's length, as the Messages API requires.
    """

    def __init__(
        self,
        client: httpx.Client,
        *,
        base_url: str,
        api_key: str,
        model: str,
        max_tokens: int = 4096,
    ) -> None:
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        self.model = model
        self.max_tokens = max_tokens
        self._endpoint = base_url
        self.url = messages_url(base_url)
        self._client = client
        self._api_key = api_key

    @property
    def endpoint(self) -> str:
        """The base URL as configured."""
        return self._endpoint

    def __repr__(self) -> str:
        return self._redact(f"{type(self).__name__}(url={self.url!r}, model={self.model!r})")

    def complete(self, system: str, user: str, *, schema: ResponseSchema | None = None) -> str:
        """The model's answer: the text blocks of the response, joined in order.

        ``schema`` is accepted and ignored: the Messages API has no ``response_format``, so the
        model answers in free text and the judge's text parser reads the verdicts from it.
        The call's token usage goes to :func:`~.record_tokens`.
        """
        headers = {"Content-Type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        payload = self._payload(system, user)
        data = json_object(post_json(self._client, self.url, payload, headers, self._api_key))
        answer = _text_of(data)
        record_tokens(usage_in(data, "input_tokens", "output_tokens"))
        return answer

    def _payload(self, system: str, user: str) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": [{"role": "user", "content": user}],
        }
        if system:
            payload["system"] = system
        return payload

    def _redact(self, text: str) -> str:
        return redact_secret(text, self._api_key)


def from_context(context: BackendContext) -> AnthropicMessagesBackend:
    """The ``anthropic`` entry of the ``pytest_openkata.backends`` group: the endpoint of the
    run's ``anthropic`` settings, on the session's client."""
    anthropic = context.settings.anthropic
    return AnthropicMessagesBackend(
        context.client,
        base_url=anthropic.base_url,
        api_key=anthropic.api_key,
        model=context.model,
        max_tokens=anthropic.max_tokens,
    )


def messages_url(base_url: str) -> str:
    """The Messages endpoint under ``base_url``, with or without its trailing ``/v1``."""
    root = base_url.rstrip("/")
    return root + ("/messages" if root.endswith("/v1") else "/v1/messages")


def _text_of(data: dict[str, Any]) -> str:
    """The ``text`` of every ``"type": "text"`` block of ``content``, concatenated in order."""
    content = data.get("content")
    if content is None:
        raise MalformedResponseError("no content in response")
    if not isinstance(content, list):
        raise MalformedResponseError(
            f"parsing response: content is a {type(content).__name__}, not a list"
        )
    texts = [_block_text(index, block) for index, block in enumerate(content)]
    found = [text for text in texts if text is not None]
    if not found:
        raise MalformedResponseError("no text content in response")
    return "".join(found)


def _block_text(index: int, block: Any) -> str | None:
    """The text of one content block; None for a block of another type (``tool_use``, ...)."""
    if not isinstance(block, dict):
        raise MalformedResponseError(f"content[{index}] is a {type(block).__name__}, not an object")
    if block.get("type") != "text":
        return None
    text = block.get("text")
    if not isinstance(text, str):
        raise MalformedResponseError(
            f"content[{index}].text is a {type(text).__name__}, not a string"
        )
    return text


if TYPE_CHECKING:  # the protocol this provider implements, checked by mypy
    from pytest_openkata.providers.backends import Completer

    _implements: type[Completer] = AnthropicMessagesBackend
