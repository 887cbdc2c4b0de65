"""The http backend: an OpenAI-compatible ``/chat/completions`` endpoint (spec section 5b).

One :class:`httpx.Client` per pytest session is shared by the agent and the judge backends, so
connections are pooled; :func:`make_client` builds it. :class:`OpenAIChatBackend` sends one
request per call and never retries: the runner owns the retry policy and decides from the
exception class (and :attr:`EndpointStatusError.throttled`) what to do.

The API key never appears in an exception text: endpoints sometimes echo request headers back
in their error body, so every occurrence of the key is replaced with ``***``.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from pytest_openkata.backends import (
    EndpointStatusError,
    MalformedResponseError,
    ResponseSchema,
    TransportError,
)

__all__ = ["OpenAIChatBackend", "make_client", "parse_retry_after"]

_REDACTED = "***"
_DELTA_SECONDS = re.compile(r"\d+(?:\.\d+)?")

# The kind of a transport failure, named in the error text. Order matters: subclasses first.
_TRANSPORT_KINDS: tuple[tuple[type[httpx.TransportError], str], ...] = (
    (httpx.RemoteProtocolError, "connection closed or protocol error"),
    (httpx.ConnectError, "connection failed"),
    (httpx.ReadError, "read failed"),
    (httpx.WriteError, "write failed"),
    (httpx.UnsupportedProtocol, "unsupported URL"),
    (httpx.ProxyError, "proxy error"),
)


# Statuses with which endpoints refuse a ``response_format`` they do not support
# (llama-cpp-python's server answers a json_schema request with 500).
_SCHEMA_REFUSED = frozenset({400, 404, 415, 422, 500, 501})


def _response_format(schema: ResponseSchema) -> dict[str, Any]:
    return {
        "type": "json_schema",
        "json_schema": {"name": schema.name, "strict": True, "schema": schema.schema},
    }


def make_client(timeout: float) -> httpx.Client:
    """Build the session's shared client; ``timeout`` seconds apply to connect, read, write
    and pool acquisition each."""
    if timeout <= 0:
        raise ValueError(f"timeout must be positive seconds, got {timeout!r}")
    return httpx.Client(timeout=httpx.Timeout(timeout))


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date.

    Returns None when the header is absent or unreadable; a date in the past gives 0.0.
    """
    if value is None or not (text := value.strip()):
        return None
    if _DELTA_SECONDS.fullmatch(text):
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    delta = (when - (now or datetime.now(UTC))).total_seconds()
    return max(0.0, delta)


class OpenAIChatBackend:
    """A :class:`~pytest_openkata.backends.Completer` for OpenAI-compatible chat endpoints."""

    def __init__(self, client: httpx.Client, *, base_url: str, api_key: str, model: str) -> None:
        self.model = model
        self.url = base_url.rstrip("/") + "/chat/completions"
        self._client = client
        self._api_key = api_key
        # Whether the endpoint accepts ``response_format``: unknown until the first request
        # with a schema, then remembered for the session.
        self.structured_output: bool | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={self.url!r}, model={self.model!r})"

    def complete(self, system: str, user: str, *, schema: ResponseSchema | None = None) -> str:
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": user})
        payload: dict[str, Any] = {"model": self.model, "messages": messages}
        if schema is None or self.structured_output is False:
            return self._post(payload)
        structured = {**payload, "response_format": _response_format(schema)}
        try:
            answer = self._post(structured)
        except EndpointStatusError as exc:
            if self.structured_output is not None or exc.status not in _SCHEMA_REFUSED:
                raise
            answer = self._post(payload)  # raises on its own when the endpoint is just failing
            self.structured_output = False  # refused: plain text for the rest of the session
            return answer
        self.structured_output = True
        return answer

    def _post(self, payload: dict[str, Any]) -> str:
        body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        try:
            response = self._client.post(self.url, content=body, headers=headers)
        except (httpx.TransportError, httpx.InvalidURL) as exc:
            message = self._redact(f"POST {self.url}: {self._describe(exc)}")
            raise TransportError(message) from exc
        if response.status_code != 200:
            raise EndpointStatusError(
                response.status_code,
                self._redact(response.text),
                parse_retry_after(response.headers.get("Retry-After")),
            )
        return _content_of(response.content)

    def _describe(self, exc: Exception) -> str:
        """Name the kind of transport failure, e.g. ``timed out after 2s``."""
        if isinstance(exc, httpx.TimeoutException):
            return _describe_timeout(exc, self._client.timeout)
        if _caused_by(exc, ConnectionRefusedError):
            return "connection refused"
        detail = str(exc) or type(exc).__name__
        for exc_type, kind in _TRANSPORT_KINDS:
            if isinstance(exc, exc_type):
                return f"{kind}: {detail}"
        return detail

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, _REDACTED) if self._api_key else text


def _content_of(raw: bytes) -> str:
    """``choices[0].message.content`` of a chat completion body; null content is ``""``."""
    try:
        data: Any = json.loads(raw)
    except ValueError as exc:
        raise MalformedResponseError(f"parsing response: {exc}") from exc
    if not isinstance(data, dict):
        raise MalformedResponseError(
            f"parsing response: expected a JSON object, got {type(data).__name__}"
        )
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


def _describe_timeout(exc: httpx.TimeoutException, timeout: httpx.Timeout) -> str:
    phase = {
        httpx.ConnectTimeout: timeout.connect,
        httpx.ReadTimeout: timeout.read,
        httpx.WriteTimeout: timeout.write,
        httpx.PoolTimeout: timeout.pool,
    }
    seconds = phase.get(type(exc))
    return "timed out" if seconds is None else f"timed out after {seconds:g}s"


def _caused_by(exc: BaseException, cause_type: type[BaseException]) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, cause_type):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
