"""HTTP plumbing shared by the backends that speak to model endpoints over httpx.

One POST of a JSON body, with failures raised as the backend errors: a transport failure that
names its kind (``timed out after 2s``, ``connection refused``), any status but 200 with the
body and ``Retry-After``. The API key never appears in an error text: endpoints sometimes echo
request headers in their error body, so every occurrence of it becomes ``***``.
"""

from __future__ import annotations

import json
import re
import ssl
import threading
import urllib.request
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Self

import httpx

from pytest_openkata import __version__
from pytest_openkata.backends import EndpointStatusError, MalformedResponseError, TransportError

REDACTED = "***"
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


# httpx's own pool limits, kept as the floor.
POOL_CONNECTIONS = 100
POOL_KEPT_CONNECTIONS = 20
_HEADERS = {"Accept": "application/json", "User-Agent": f"pytest-openkata/{__version__}"}


class ModelClient:
    """The session's connections to model endpoints, shared by every backend and thread.

    Each origin (scheme, host, port) gets its own :class:`httpx.HTTPTransport`: a pool that
    keeps ``connections`` connections open between calls (httpx keeps 20), so that at a higher
    concurrency calls do not open, and for https handshake, a new connection each time. A
    request goes straight to its origin's transport rather than through :class:`httpx.Client`,
    whose cookie, auth, redirect and event-hook handling a model call never uses: that saves
    about 0.3 ms of CPU per call, which at 32 calls in flight is time each answer waits for the
    interpreter. What the client would take from the environment is kept: the proxy from
    ``HTTP(S)_PROXY`` / ``ALL_PROXY`` unless ``NO_PROXY`` names the host, and for https
    ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``.
    """

    def __init__(self, timeout: float, connections: int = 1) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout must be positive seconds, got {timeout!r}")
        self.timeout = httpx.Timeout(timeout)
        self._limits = httpx.Limits(
            max_connections=max(connections, POOL_CONNECTIONS),
            max_keepalive_connections=max(connections, POOL_KEPT_CONNECTIONS),
        )
        self._transports: dict[tuple[bytes, bytes, int | None], httpx.HTTPTransport] = {}
        self._lock = threading.Lock()
        self._closed = False
        # httpx imports its connection layer (httpcore) with the first transport. Importing it
        # here, in the session's setup, keeps that out of the first scenario's call, where it
        # would compete with every other scenario thread starting up.
        import httpcore  # noqa: F401

    def post(self, url: str, content: bytes, headers: dict[str, str]) -> httpx.Response:
        """POST ``content`` and return the response, its body read and the connection freed.

        Raises :class:`httpx.TransportError` (timeouts included) or :class:`httpx.InvalidURL`.
        """
        request = httpx.Request(
            "POST",
            url,
            content=content,
            headers={**_HEADERS, **headers},
            extensions={"timeout": self.timeout.as_dict()},
        )
        response = self._transport_for(request.url).handle_request(request)
        try:
            response.read()
        finally:
            response.close()
        return response

    def close(self) -> None:
        with self._lock:
            self._closed = True
            transports, self._transports = list(self._transports.values()), {}
        for transport in transports:
            transport.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _transport_for(self, url: httpx.URL) -> httpx.HTTPTransport:
        if url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(
                f"Request URL is missing an 'http://' or 'https://' protocol: {url}"
            )
        origin = (url.raw_scheme, url.raw_host, url.port)
        with self._lock:
            if self._closed:
                raise RuntimeError("the model client is closed")
            transport = self._transports.get(origin)
            if transport is None:
                transport = self._transports[origin] = self._new_transport(url)
        return transport

    def _new_transport(self, url: httpx.URL) -> httpx.HTTPTransport:
        # A plain http origin never makes a TLS handshake: a context that trusts no
        # certificate saves loading the CA bundle (about 50 ms) and fails closed if one came.
        verify: ssl.SSLContext | bool = (
            True if url.scheme == "https" else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        )
        return httpx.HTTPTransport(verify=verify, limits=self._limits, proxy=proxy_for(url))


def proxy_for(url: httpx.URL) -> str | None:
    """The proxy the environment names for ``url`` (``HTTP_PROXY``, ``HTTPS_PROXY``,
    ``ALL_PROXY``, upper or lower case), or None when there is none or ``NO_PROXY`` names its
    host."""
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(url.scheme) or proxies.get("all")
    if not proxy:
        return None
    netloc = url.host if url.port is None else f"{url.host}:{url.port}"
    if urllib.request.proxy_bypass_environment(netloc, proxies):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def make_client(timeout: float, connections: int = 1) -> ModelClient:
    """Build the session's shared client; ``timeout`` seconds apply to connect, read, write
    and pool acquisition each; ``connections`` is how many calls it makes at once (the run's
    concurrency)."""
    return ModelClient(timeout, connections)


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
    client: ModelClient, url: str, payload: dict[str, Any], headers: dict[str, str], secret: str
) -> bytes:
    """POST ``payload`` as compact JSON and return the body of a 200 answer."""
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    try:
        response = client.post(url, body, headers)
    except (httpx.TransportError, httpx.InvalidURL) as exc:
        message = f"POST {url}: {describe_transport_error(exc, client.timeout)}"
        raise TransportError(redact_secret(message, secret)) from exc
    if response.status_code != 200:
        raise EndpointStatusError(
            response.status_code,
            redact_secret(response.text, secret),
            parse_retry_after(response.headers.get("Retry-After")),
        )
    return response.content


def json_object(raw: bytes) -> dict[str, Any]:
    """A 200 answer's body, which must be a JSON object."""
    try:
        data: Any = json.loads(raw)
    except ValueError as exc:
        raise MalformedResponseError(f"parsing response: {exc}") from exc
    if not isinstance(data, dict):
        raise MalformedResponseError(
            f"parsing response: expected a JSON object, got {type(data).__name__}"
        )
    return data


def describe_transport_error(exc: Exception, timeout: httpx.Timeout) -> str:
    """Name the kind of transport failure, e.g. ``timed out after 2s``."""
    if isinstance(exc, httpx.TimeoutException):
        return _describe_timeout(exc, timeout)
    if _caused_by(exc, ConnectionRefusedError):
        return "connection refused"
    detail = str(exc) or type(exc).__name__
    for exc_type, kind in _TRANSPORT_KINDS:
        if isinstance(exc, exc_type):
            return f"{kind}: {detail}"
    return detail


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
