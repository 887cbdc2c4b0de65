"""The session's HTTP client for model endpoints, and the one request the backends make with it.

:func:`~pytest_openkata.infra.http.make_client` builds one :class:`httpx.Client` per pytest
session, shared by every backend and scenario thread (httpx clients are thread-safe). It keeps
connections between calls, so that calls do not open, and for https handshake, a new connection
each time; httpx drops a kept connection that the server closed meanwhile instead of using it.
What the environment says is read once, when the client is made on pytest's thread, never by
the calls on scenario threads: the proxy (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``,
unless ``NO_PROXY`` names the host) and the trusted authorities (``SSL_CERT_FILE``, else
``SSL_CERT_DIR``, else certifi's bundle). Certificates are always verified.

:func:`post_json` is one POST of a JSON body, with failures raised as the backend errors: a
request that got no answer names its kind (``timed out after 2s``, ``connection refused``),
any status but 200 carries the body and ``Retry-After``; :func:`ask_json` reads the 200 answer
as a JSON object, and one that is not JSON says its status, content type and first
characters. The API key never appears in an error text: endpoints sometimes echo request
headers in their error body, so every occurrence of it becomes ``***``.

Two limits hold every call, whatever the endpoint does:

- The client's timeout is a deadline for the whole call: connecting, sending, waiting for the
  answer and reading all of it. httpx's own timeouts bound each read (an endpoint that sends
  one byte a second never trips them), so the exchange runs on a thread of its own and the
  caller waits for it until the deadline, then raises :class:`CallTimeoutError`. The exchange
  left behind is cut off: its connection is shut down when it is known (a new connection, or
  once the answer's headers are in), and it stops reading at its next chunk; one reusing a
  kept connection that is still waiting for the headers ends at httpx's own timeout or when
  the endpoint stops. Time spent before the call (waiting for an in-flight slot, the run's
  concurrency) is not counted: the deadline starts when the request does.
- An answer is read as it arrives and no further than ``max_bytes``
  (:data:`~.DEFAULT_ANSWER_MAX_BYTES` unless the backend says otherwise): a larger 200 answer
  is an :class:`AnswerTooLargeError`; a larger error body is cut there.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from pytest_openkata.contracts.backends import DEFAULT_ANSWER_MAX_BYTES, answer_bound, byte_size
from pytest_openkata.contracts.errors import (
    AnswerTooLargeError,
    BackendError,
    CallTimeoutError,
    EndpointStatusError,
    MalformedResponseError,
    TransportError,
)
from pytest_openkata.contracts.text import go_decode
from pytest_openkata.infra.bounded import BoundedBuffer
from pytest_openkata.infra.http import make_client
from pytest_openkata.infra.idle_threads import IdleThreads
from pytest_openkata.infra.text import one_line, utf8, valid_texts, visible

__all__ = [
    "REDACTED",
    "ask_json",
    "json_object",
    "make_client",
    "parse_retry_after",
    "post_json",
    "redact_secret",
]

REDACTED = "***"
_DELTA_SECONDS = re.compile(r"\d+(?:\.\d+)?")
_BROKEN = (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)
# What a header value may hold: visible ASCII, space and tab.
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")
# How much of a body that is not JSON an error text shows.
BODY_START_CHARS = 200


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


def redact_secret(text: str, secret: str) -> str:
    return text.replace(secret, REDACTED) if secret else text


def post_json(
    client: httpx.Client,
    url: str,
    payload: dict[str, Any],
    headers: dict[str, str],
    secret: str,
    *,
    max_bytes: int = DEFAULT_ANSWER_MAX_BYTES,
) -> bytes:
    """POST ``payload`` as compact JSON and return the body of a 200 answer."""
    return _post(client, url, payload, headers, secret, max_bytes=max_bytes).body


def ask_json(
    client: httpx.Client,
    url: str,
    payload: dict[str, Any],
    headers: dict[str, str],
    secret: str,
    *,
    max_bytes: int = DEFAULT_ANSWER_MAX_BYTES,
) -> dict[str, Any]:
    """POST ``payload`` as :func:`post_json` does and read the 200 answer with
    :func:`json_object`; an answer that is not JSON says what it is instead."""
    answer = _post(client, url, payload, headers, secret, max_bytes=max_bytes)
    return json_object(answer.body, content_type=answer.content_type or "", secret=secret)


@dataclass(frozen=True)
class _Answer:
    """What a call received: the status, the ``Content-Type`` (None without one), the body up
    to the bound, and whether the body went on past it."""

    status: int
    content_type: str | None
    body: bytes
    cut: bool
    retry_after: str | None = None


def _post(
    client: httpx.Client,
    url: str,
    payload: dict[str, Any],
    headers: dict[str, str],
    secret: str,
    *,
    max_bytes: int,
) -> _Answer:
    body = utf8(json.dumps(payload, ensure_ascii=False, separators=(",", ":")))
    for name, value in headers.items():
        if not _HEADER_VALUE.fullmatch(value):
            what = "the API key" if secret and secret in value else f"the {name} header"
            raise BackendError(
                f"POST {redact_secret(url, secret)}: {what} holds a character an HTTP header "
                "cannot carry (only printable ASCII can go in a header)"
            )
    seconds = client.timeout.read
    call = _Call(client, max_bytes)
    try:
        request = client.build_request(
            "POST", url, content=body, headers=headers, extensions={"trace": call.trace}
        )
        port = request.url.port
        if port is not None and not 0 < port < 65536:  # httpx would wrap it around
            raise httpx.InvalidURL(f"Invalid port: {port}")
        answer = call.within(request, seconds)
    except httpx.TimeoutException as exc:
        raise _timed_out(url, seconds, secret) from exc
    # UnicodeError: a host that IDNA cannot encode, which the socket layer raises as it is.
    except (httpx.RequestError, httpx.InvalidURL, UnicodeError) as exc:
        raise TransportError(redact_secret(f"POST {url}: {_kind(exc)}", secret)) from exc
    if answer is None:
        raise _timed_out(url, seconds, secret)
    if answer.status != 200:
        text = redact_secret(go_decode(answer.body), secret)
        if answer.cut:
            text += f" ... (cut at {byte_size(max_bytes)})"
        raise EndpointStatusError(answer.status, text, parse_retry_after(answer.retry_after))
    if answer.cut:
        too_large = f"POST {url}: the answer is larger than {answer_bound(max_bytes)}"
        raise AnswerTooLargeError(redact_secret(too_large, secret))
    return answer


def _timed_out(url: str, seconds: float | None, secret: str) -> CallTimeoutError:
    limit = f" after {seconds:g}s" if seconds is not None else ""
    return CallTimeoutError(redact_secret(f"POST {url}: timed out{limit}", secret))


_EXCHANGE_THREADS = IdleThreads("openkata-model-call")  # kept between calls


class _Call:
    """One exchange, made on a thread of its own so that its caller waits no longer than the
    deadline (see the module docstring)."""

    def __init__(self, client: httpx.Client, max_bytes: int) -> None:
        self._client = client
        self._max_bytes = max_bytes
        self._done = threading.Event()
        self._abandoned = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._released = False  # the connection may be back in the pool: never shut it down
        self._answer: _Answer | None = None
        self._error: BaseException | None = None

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpx's ``trace`` extension: keeps the socket of a connection opened for the call,
        and notes when the answer is closed (its connection then goes back to the pool, where
        another call may take it)."""
        if event.endswith((".connect_tcp.complete", ".connect_unix_socket.complete")):
            self._hold(info.get("return_value"))
        elif event.endswith(".response_closed.started"):
            with self._lock:
                self._released = True

    def within(self, request: httpx.Request, seconds: float | None) -> _Answer | None:
        """The answer, or None when ``seconds`` passed first; httpx's errors are raised."""
        _EXCHANGE_THREADS.run(lambda: self._exchange(request))
        if not self._done.wait(seconds):
            self._abandon()
            return None
        if self._error is not None:
            raise self._error
        return self._answer

    def _exchange(self, request: httpx.Request) -> None:
        try:
            response = self._client.send(request, stream=True)
            try:
                self._hold(response.extensions.get("network_stream"))
                self._answer = self._read(response)
            finally:
                response.close()
        except BaseException as exc:  # handed to the caller, or dropped once it gave up
            self._error = exc
        finally:
            self._done.set()

    def _read(self, response: httpx.Response) -> _Answer:
        """The body as it arrives, up to the bound; an abandoned call stops at its next chunk."""
        body = BoundedBuffer(self._max_bytes)
        for chunk in response.iter_bytes():
            if self._abandoned.is_set() or not body.add(chunk):
                break
        return _Answer(
            response.status_code,
            response.headers.get("Content-Type"),
            body.data(),
            body.over.is_set(),
            response.headers.get("Retry-After"),
        )

    def _hold(self, stream: Any) -> None:
        sock = stream.get_extra_info("socket") if stream is not None else None
        if not isinstance(sock, socket.socket):
            return
        with self._lock:
            self._sockets.append(sock)
            if self._abandoned.is_set() and not self._released:
                _shut_down(sock)

    def _abandon(self) -> None:
        with self._lock:
            self._abandoned.set()
            if not self._released:
                for sock in self._sockets:
                    _shut_down(sock)


def _shut_down(sock: socket.socket) -> None:
    """End the connection under ``sock`` (under its TLS too): a read waiting on it returns."""
    with contextlib.suppress(OSError):  # already closed
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def json_object(raw: bytes, *, content_type: str | None = None, secret: str = "") -> dict[str, Any]:
    """A 200 answer's body, which must be a JSON object; its texts are valid Unicode (a lone
    surrogate escape is U+FFFD, as Go's decoder makes it). Given the answer's
    ``content_type`` (``""``: it had none), a body that is not JSON is described: its content
    type and its first characters, shown printable, with ``secret`` masked."""
    try:
        data: Any = json.loads(raw)
    except ValueError as exc:
        detail = str(exc) if content_type is None else _not_json(raw, content_type, exc, secret)
        raise MalformedResponseError(f"parsing response: {detail}") from exc
    except RecursionError as exc:
        raise MalformedResponseError("parsing response: JSON nested too deeply") from exc
    if not isinstance(data, dict):
        raise MalformedResponseError(
            f"parsing response: expected a JSON object, got {type(data).__name__}"
        )
    try:
        return valid_texts(data)
    except RecursionError as exc:
        raise MalformedResponseError("parsing response: JSON nested too deeply") from exc


def _not_json(raw: bytes, content_type: str, exc: ValueError, secret: str) -> str:
    """``HTTP 200 with Content-Type text/html, not JSON (<error>): <the body's start>``."""
    kind = f"Content-Type {visible(content_type)}" if content_type else "no Content-Type"
    text = redact_secret(go_decode(raw[: BODY_START_CHARS * 4]), secret)
    start = one_line(text[:BODY_START_CHARS])
    if len(text) > BODY_START_CHARS or len(raw) > BODY_START_CHARS * 4:
        start += "..."
    shown = f": {start}" if raw else ": the body is empty"
    return f"HTTP 200 with {kind}, not JSON ({exc}){shown}"


def _kind(exc: Exception) -> str:
    """Name the kind of failure of a request that got no answer."""
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL | UnicodeError):
        return f"unsupported URL: {detail}"
    if isinstance(exc, httpx.ProxyError):
        return f"proxy error: {detail}"
    causes = list(_causes(exc))
    if any(isinstance(cause, ConnectionRefusedError) for cause in causes):
        return "connection refused"
    if isinstance(exc, httpx.ConnectError) or any(isinstance(c, ssl.SSLError) for c in causes):
        return f"connection failed: {detail}"
    if isinstance(exc, httpx.ProtocolError) or any(isinstance(c, _BROKEN) for c in causes):
        return f"connection closed or protocol error: {detail}"
    if isinstance(exc, httpx.WriteError):
        return f"write failed: {detail}"
    return f"read failed: {detail}"  # a read that broke off, a body that does not decode


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what caused it, innermost last (httpx wraps httpcore, which wraps OSError)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__
