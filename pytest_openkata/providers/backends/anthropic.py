"""The anthropic backend: the Anthropic Messages API, ``POST /v1/messages``.

It shares the session's :class:`httpx.Client` (see
:func:`~.make_client`) and follows the http backend in everything
but the wire format: one request per call, no retries, failures raised as
:class:`~.BackendError` subclasses with the same texts.

Every successful call reports the ``usage.input_tokens`` and ``usage.output_tokens`` of the
response to :func:`~.record_tokens` (None for a count the body does not give
as a non-negative integer), and the ``model`` the response says answered to
:func:`~.record_reported_model` (the run manifest records it); a failed call records nothing.

With a ``schema`` (the judge's), the request asks for structured output with one forced tool:
``tools: [{"name", "description", "input_schema"}]`` with the schema as ``input_schema`` and
``tool_choice: {"type": "tool", "name": ...}``; the answer is the tool call's ``input``,
serialised as JSON. A forced tool rather than ``output_config.format`` (JSON outputs, formerly
``output_format``): llama-server's Anthropic-compatible ``/v1/messages`` translates ``tools``
and ``tool_choice`` into its tool-call grammar but drops ``output_config`` and
``output_format`` without a word, and every Claude model takes a forced tool, where JSON
outputs and ``strict`` tools need recent ones (so the tool is not marked ``strict``).

- Anthropic accepts only property keys matching ``^[a-zA-Z0-9_.-]{1,64}$`` in a tool's input
  schema (most criterion names have spaces): every other key goes out under an alias made of
  its allowed characters, with the key itself in the property's ``description``, and the
  ``input`` that comes back gets the original keys again.
- An endpoint that refuses the tool request (HTTP 400, 404, 415, 422, 500 or 501, when the
  same request without it succeeds) is asked in plain text for the rest of the session, as
  the http backend does with ``response_format``.
- A tool call cut off at ``max_tokens`` is a :class:`~.MalformedResponseError`: its input is
  incomplete.
- An endpoint that takes the tool but answers in text (llama-server ignores tools when the
  model's chat template has no tool calls, as SmolLM2's has not) gives that text as the
  answer, as a plain call would.

Anthropic answers 529 when it is overloaded. That is kept as an
:class:`~.EndpointStatusError` with ``status == 529`` (and whatever
``Retry-After`` came with it); :attr:`~.EndpointStatusError.throttled`
stays about 429 alone, and the runner decides from the status whether 529 is worth waiting for.

The API key never appears in an exception text nor in ``repr()``: every occurrence of it is
replaced with ``***``.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

from pytest_openkata.contracts.backends import (
    DEFAULT_ANSWER_MAX_BYTES,
    SCHEMA_REFUSED_STATUSES,
    BackendContext,
    Message,
    ResponseSchema,
)
from pytest_openkata.contracts.errors import EndpointStatusError, MalformedResponseError
from pytest_openkata.contracts.transcripts import Transcript, one_turn
from pytest_openkata.infra.reported_models import record_reported_model
from pytest_openkata.infra.usage import record_tokens, usage_in
from pytest_openkata.providers.backends.client import (
    ask_json,
    redact_secret,
)

__all__ = [
    "ANTHROPIC_VERSION",
    "CUT_OFF_MESSAGE",
    "AnthropicMessagesBackend",
    "from_context",
    "messages_url",
]

ANTHROPIC_VERSION = "2023-06-01"
CUT_OFF_MESSAGE = 'structured answer cut off at the token limit (stop_reason "max_tokens")'
TOOL_DESCRIPTION = "Give your answer as this tool's input, which must follow its input schema."


class AnthropicMessagesBackend:
    """A :class:`~.Completer` for the Anthropic Messages API.

    ``base_url`` is the API root, e.g. ``https://api.anthropic.com``; a base URL that already
    ends with ``/v1`` is accepted as well and gets no second ``/v1``; :attr:`endpoint` keeps it
    as it was given. ``max_tokens`` caps the answer's length, as the Messages API requires;
    ``answer_max_bytes`` bounds the response body (:class:`~.AnswerTooLargeError` beyond it).
    """

    def __init__(
        self,
        client: httpx.Client,
        *,
        base_url: str,
        api_key: str,
        model: str,
        max_tokens: int = 4096,
        answer_max_bytes: int = DEFAULT_ANSWER_MAX_BYTES,
    ) -> None:
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        self.model = model
        self.max_tokens = max_tokens
        self.answer_max_bytes = answer_max_bytes
        self._endpoint = base_url
        self.url = messages_url(base_url)
        self._client = client
        self._api_key = api_key
        # Whether the endpoint accepts the forced tool: unknown until the first request with
        # a schema, then remembered for the session.
        self.structured_output: bool | None = None

    @property
    def endpoint(self) -> str:
        """The base URL as configured."""
        return self._endpoint

    def __repr__(self) -> str:
        return self._redact(f"{type(self).__name__}(url={self.url!r}, model={self.model!r})")

    def complete_transcribed(self, system: str, user: str) -> tuple[str, Transcript]:
        """The answer, and its transcript: one turn."""
        answer = self.complete(system, user)
        return answer, one_turn(answer)

    def converse(self, system: str, messages: Sequence[Message]) -> str:
        """The answer to a conversation, its messages sent as the API's own."""
        payload = self._payload(system, "")
        payload["messages"] = [{"role": role, "content": text} for role, text in messages]
        return self._ask(payload, _plain_answer)[0]

    def complete(self, system: str, user: str, *, schema: ResponseSchema | None = None) -> str:
        """The model's answer: the text blocks of the response, joined in order; with
        ``schema``, the input of the forced tool's call as JSON (see the module docstring).
        The call's token usage goes to :func:`~.record_tokens`."""
        payload = self._payload(system, user)
        if schema is None or self.structured_output is False:
            return self._ask(payload, _plain_answer)[0]
        tool = _ForcedTool.of(schema)
        try:
            answer, cut_off = self._ask({**payload, **tool.request()}, tool.answer)
        except EndpointStatusError as exc:
            if self.structured_output is not None or exc.status not in SCHEMA_REFUSED_STATUSES:
                raise
            answer = self._ask(payload, _plain_answer)[0]  # raises when the endpoint just fails
            self.structured_output = False  # refused: plain text for the rest of the session
            return answer
        self.structured_output = True
        if cut_off:
            raise MalformedResponseError(CUT_OFF_MESSAGE)
        return answer

    def _ask(
        self, payload: dict[str, Any], read: Callable[[dict[str, Any]], tuple[str, bool]]
    ) -> tuple[str, bool]:
        """``read``'s answer from the response body and whether it was cut off; the usage is
        recorded once ``read`` found an answer."""
        headers = {"Content-Type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        data = ask_json(
            self._client,
            self.url,
            payload,
            headers,
            self._api_key,
            max_bytes=self.answer_max_bytes,
        )
        answer = read(data)
        record_tokens(usage_in(data, "input_tokens", "output_tokens"))
        record_reported_model(data)
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
        answer_max_bytes=context.settings.answer_max_bytes,
    )


def messages_url(base_url: str) -> str:
    """The Messages endpoint under ``base_url``, with or without its trailing ``/v1``."""
    root = base_url.rstrip("/")
    return root + ("/messages" if root.endswith("/v1") else "/v1/messages")


def _plain_answer(data: dict[str, Any]) -> tuple[str, bool]:
    """A plain call's answer; one cut off at ``max_tokens`` is returned as it is."""
    return _text_of(data), False


def _content_of(data: dict[str, Any]) -> list[Any]:
    content = data.get("content")
    if content is None:
        raise MalformedResponseError("no content in response")
    if not isinstance(content, list):
        raise MalformedResponseError(
            f"parsing response: content is a {type(content).__name__}, not a list"
        )
    return content


def _text_of(data: dict[str, Any]) -> str:
    """The ``text`` of every ``"type": "text"`` block of ``content``, concatenated in order."""
    texts = [_block_text(index, block) for index, block in enumerate(_content_of(data))]
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


# --- structured output: a forced tool ----------------------------------------------------------

# What Anthropic accepts as a property key of a tool's input schema.
_PROPERTY_KEY = re.compile(r"[a-zA-Z0-9_.-]{1,64}")
_KEY_CHARS = re.compile(r"[a-zA-Z0-9_.-]")
_MAX_KEY = 64


@dataclass(frozen=True)
class _Renames:
    """The aliases of one level of a schema: an alias -> (its key, the renames below it), and
    the renames of its array items."""

    properties: Mapping[str, tuple[str, _Renames]] = field(default_factory=dict)
    items: _Renames | None = None


_NO_RENAMES = _Renames()


def _alias_base(key: str) -> str:
    """``key`` in allowed characters: accents dropped, anything else an underscore."""
    chars = []
    for char in unicodedata.normalize("NFKD", key):
        if unicodedata.combining(char):
            continue
        chars.append(char if _KEY_CHARS.fullmatch(char) else "_")
    return "".join(chars)[:_MAX_KEY] or "_"


def _aliases(keys: list[str]) -> dict[str, str]:
    """Each key's name on the wire: itself when Anthropic allows it, else an alias that no
    other key of the level has (a counter added when needed)."""
    taken = {key for key in keys if _PROPERTY_KEY.fullmatch(key)}
    aliases = {}
    for key in keys:
        if _PROPERTY_KEY.fullmatch(key):
            aliases[key] = key
            continue
        base = alias = _alias_base(key)
        counter = 1
        while alias in taken:
            counter += 1
            suffix = f"_{counter}"
            alias = base[: _MAX_KEY - len(suffix)] + suffix
        taken.add(alias)
        aliases[key] = alias
    return aliases


def _with_allowed_keys(schema: Any) -> tuple[Any, _Renames]:
    """``schema`` with every property key Anthropic refuses replaced by an alias (in
    ``properties`` and ``required``, at every level of ``properties`` and ``items``), and the
    renames made."""
    if not isinstance(schema, dict):
        return schema, _NO_RENAMES
    allowed = dict(schema)
    renamed: dict[str, tuple[str, _Renames]] = {}
    properties = schema.get("properties")
    if isinstance(properties, dict):
        aliases = _aliases(list(properties))
        allowed_properties = {}
        for key, sub_schema in properties.items():
            allowed_sub, below = _with_allowed_keys(sub_schema)
            alias = aliases[key]
            if alias != key and isinstance(allowed_sub, dict):
                note = f"Stands for the key {json.dumps(key, ensure_ascii=False)}."
                described = allowed_sub.get("description")
                if isinstance(described, str) and described:
                    note = f"{note} {described}"
                allowed_sub = {**allowed_sub, "description": note}
            allowed_properties[alias] = allowed_sub
            renamed[alias] = (key, below)
        allowed["properties"] = allowed_properties
        required = schema.get("required")
        if isinstance(required, list):
            allowed["required"] = [
                aliases.get(key, key) if isinstance(key, str) else key for key in required
            ]
    items_renames = None
    if isinstance(schema.get("items"), dict):
        allowed["items"], items_renames = _with_allowed_keys(schema["items"])
    return allowed, _Renames(renamed, items_renames)


def _with_original_keys(value: Any, renames: _Renames) -> Any:
    """A tool input with the keys its schema had before :func:`_with_allowed_keys`."""
    if isinstance(value, dict):
        restored = {}
        for key, member in value.items():
            original, below = renames.properties.get(key, (key, _NO_RENAMES))
            restored[original] = _with_original_keys(member, below)
        return restored
    if isinstance(value, list) and renames.items is not None:
        return [_with_original_keys(item, renames.items) for item in value]
    return value


@dataclass(frozen=True)
class _ForcedTool:
    """One structured request: the tool that carries the schema, and how to read its call."""

    name: str
    input_schema: Any
    renames: _Renames

    @classmethod
    def of(cls, schema: ResponseSchema) -> _ForcedTool:
        input_schema, renames = _with_allowed_keys(schema.schema)
        return cls(schema.name, input_schema, renames)

    def request(self) -> dict[str, Any]:
        """The members a request adds to force the tool."""
        tool = {
            "name": self.name,
            "description": TOOL_DESCRIPTION,
            "input_schema": self.input_schema,
        }
        return {"tools": [tool], "tool_choice": {"type": "tool", "name": self.name}}

    def answer(self, data: dict[str, Any]) -> tuple[str, bool]:
        """The tool call's input as JSON, and whether it was cut off at ``max_tokens``; the
        text blocks when the response holds no call of the tool (an endpoint that ignores
        tools)."""
        for index, block in enumerate(_content_of(data)):
            if not (isinstance(block, dict) and block.get("type") == "tool_use"):
                continue
            if block.get("name") != self.name:
                continue
            given = block.get("input")
            if not isinstance(given, dict):
                raise MalformedResponseError(
                    f"content[{index}].input is a {type(given).__name__}, not an object"
                )
            restored = _with_original_keys(given, self.renames)
            return json.dumps(restored, ensure_ascii=False), data.get("stop_reason") == "max_tokens"
        return _plain_answer(data)


if TYPE_CHECKING:  # the protocol this provider implements, checked by mypy
    from pytest_openkata.contracts.backends import Completer, Conversing

    _implements: type[Completer] = AnthropicMessagesBackend
    _converses: type[Conversing] = AnthropicMessagesBackend
