"""The session's HTTP client for model endpoints, and the one request the backends make with it.

:func:`make_client` builds one :class:`httpx.Client` per pytest session, shared by every
backend and scenario thread (httpx clients are thread-safe). It keeps connections between
calls, so that calls do not open, and for https handshake, a new connection each time; httpx
drops a kept connection that the server closed meanwhile instead of using it. What the
environment says is read once, when the client is made on pytest's thread, never by the calls
on scenario threads: the proxy (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, unless
``NO_PROXY`` names the host) and the trusted authorities (``SSL_CERT_FILE``, else
``SSL_CERT_DIR``, else certifi's bundle). Certificates are always verified.

:func:`post_json` is one POST of a JSON body, with failures raised as the backend errors: a
request that got no answer names its kind (``timed out after 2s``, ``connection refused``),
any status but 200 carries the body and ``Retry-After``. The API key never appears in an
error text: endpoints sometimes echo request headers in their error body, so every occurrence
of it becomes ``***``.
"""

from __future__ import annotations

import json
import re
import ssl
from collections.abc import Iterator
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from pytest_openkata._version import __version__
from pytest_openkata.infra.text import valid_unicode
from pytest_openkata.providers.backends import (
    EndpointStatusError,
    MalformedResponseError,
    TransportError,
)

__all__ = [
    "REDACTED",
    "json_object",
    "make_client",
    "parse_retry_after",
    "post_json",
    "redact_secret",
]

REDACTED = "***"
_DELTA_SECONDS = re.compile(r"\d+(?:\.\d+)?")
_HEADERS = {"Accept": "application/json", "User-Agent": f"pytest-openkata/{__version__}"}
# Idle connections the client keeps at the least (the run's concurrency when higher).
KEPT_CONNECTIONS = 20
_BROKEN = (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)


def make_client(timeout: float, connections: int = 1) -> httpx.Client:
    """Build the session's shared client; ``timeout`` seconds apply to each phase of a call
    (connecting, every read and write, waiting for a pooled connection); ``connections`` is
    how many calls it makes at once (the run's concurrency), which it keeps connections for.

    An environment httpx cannot work with (a proxy URL of a scheme it does not speak, a
    ``SSL_CERT_FILE`` that does not load) does not fail here but in every call, as a
    :class:`TransportError` naming the problem: a session fixture makes the client, and the
    scenarios report the failure.
    """
    if timeout <= 0:
        raise ValueError(f"timeout must be positive seconds, got {timeout!r}")
    try:
        return _client(timeout, connections)
    except (ImportError, ValueError, httpx.InvalidURL) as exc:  # a proxy variable
        refusal = _Refusal(httpx.ProxyError, str(exc))
    except OSError as exc:  # ssl.SSLError included: the trusted authorities
        refusal = _Refusal(httpx.ConnectError, f"cannot load the trusted authorities: {exc}")
    return _client(timeout, connections, refusal)


def _client(
    timeout: float, connections: int, transport: httpx.BaseTransport | None = None
) -> httpx.Client:
    return httpx.Client(
        headers=_HEADERS,
        timeout=httpx.Timeout(timeout),
        limits=httpx.Limits(
            max_connections=None,  # calls are bounded by the run's concurrency already
            max_keepalive_connections=max(connections, KEPT_CONNECTIONS),
        ),
        verify=True,
        trust_env=True,
        transport=transport,
    )


class _Refusal(httpx.BaseTransport):
    """The transport of a client whose environment httpx refused: every call fails with the
    reason."""

    def __init__(self, error: type[httpx.TransportError], message: str) -> None:
        self._error = error
        self._message = message

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        raise self._error(self._message, request=request)


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
    client: httpx.Client, url: str, payload: dict[str, Any], headers: dict[str, str], secret: str
) -> bytes:
    """POST ``payload`` as compact JSON and return the body of a 200 answer."""
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    try:
        request = client.build_request("POST", url, content=body, headers=headers)
        port = request.url.port
        if port is not None and not 0 < port < 65536:  # httpx would wrap it around
            raise httpx.InvalidURL(f"Invalid port: {port}")
        response = client.send(request)
    # UnicodeError: a host that IDNA cannot encode, which the socket layer raises as it is.
    except (httpx.RequestError, httpx.InvalidURL, UnicodeError) as exc:
        kind = _kind(exc, client.timeout)
        raise TransportError(redact_secret(f"POST {url}: {kind}", secret)) from exc
    if response.status_code != 200:
        raise EndpointStatusError(
            response.status_code,
            redact_secret(response.text, secret),
            parse_retry_after(response.headers.get("Retry-After")),
        )
    return response.content


def json_object(raw: bytes) -> dict[str, Any]:
    """A 200 answer's body, which must be a JSON object; its texts are valid Unicode (a lone
    surrogate escape is U+FFFD, as Go's decoder makes it)."""
    try:
        data: Any = json.loads(raw)
    except ValueError as exc:
        raise MalformedResponseError(f"parsing response: {exc}") from exc
    if not isinstance(data, dict):
        raise MalformedResponseError(
            f"parsing response: expected a JSON object, got {type(data).__name__}"
        )
    return _valid_texts(data)


def _valid_texts(value: Any) -> Any:
    """``value`` (decoded JSON) with every string, keys included, made :func:`valid_unicode`."""
    if isinstance(value, str):
        return valid_unicode(value)
    if isinstance(value, list):
        return [_valid_texts(item) for item in value]
    if isinstance(value, dict):
        return {valid_unicode(key): _valid_texts(item) for key, item in value.items()}
    return value


def _kind(exc: Exception, timeout: httpx.Timeout) -> str:
    """Name the kind of failure of a request that got no answer."""
    if isinstance(exc, httpx.TimeoutException):
        seconds = {
            httpx.ConnectTimeout: timeout.connect,
            httpx.WriteTimeout: timeout.write,
            httpx.PoolTimeout: timeout.pool,
        }.get(type(exc), timeout.read)
        return f"timed out after {seconds:g}s" if seconds is not None else "timed out"
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
