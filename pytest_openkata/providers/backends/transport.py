"""HTTP plumbing shared by the backends that speak to model endpoints.

One POST of a JSON body, with failures raised as the backend errors: a request that got no
answer names its kind (``timed out after 2s``, ``connection refused``), any status but 200
carries the body and ``Retry-After``. The API key never appears in an error text: endpoints
sometimes echo request headers in their error body, so every occurrence of it becomes ``***``.

The calls go through :class:`ModelClient`, the standard library's :mod:`http.client` with a
pool of kept connections per origin. A model call is one POST of a JSON body on a kept
connection, and it runs on scenario threads that share one interpreter lock: every bit of CPU
a call spends delays the answers of the calls in flight beside it. ``http.client`` spends
about a third of what httpx's transport does per call (0.3 ms against 0.9-1.0 ms here, see
``benchmarks/README.md``), and it is imported already, where httpx costs a run about 60 ms
to import.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import select
import socket
import ssl
import threading
import urllib.parse
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import Message
from email.utils import parsedate_to_datetime
from typing import Any, Self

from pytest_openkata import __version__
from pytest_openkata.infra.environ import proxy_for
from pytest_openkata.providers.backends import (
    EndpointStatusError,
    MalformedResponseError,
    TransportError,
)

__all__ = [
    "ModelClient",
    "ModelResponse",
    "NoAnswer",
    "json_object",
    "make_client",
    "parse_retry_after",
    "post_json",
    "proxy_for",
]

REDACTED = "***"
_DELTA_SECONDS = re.compile(r"\d+(?:\.\d+)?")
_HEADERS = {"Accept": "application/json", "User-Agent": f"pytest-openkata/{__version__}"}
# Idle connections an origin keeps at the least (the run's concurrency when higher).
KEPT_CONNECTIONS = 20


class NoAnswer(Exception):
    """A request that got no HTTP answer; the message names what happened
    (``connection refused``, ``timed out after 2s``, ``read failed: ...``)."""


@dataclass(frozen=True)
class ModelResponse:
    """An endpoint's answer, its body read in full."""

    status_code: int
    headers: Message  # names are matched in any case
    content: bytes

    @property
    def text(self) -> str:
        charset = self.headers.get_content_charset() or "utf-8"
        try:
            return self.content.decode(charset, errors="replace")
        except LookupError:  # a charset Python does not know
            return self.content.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class _Origin:
    """Where connections go: the endpoint, and the proxy that carries them when there is one."""

    scheme: str
    host: str
    port: int
    proxy: urllib.parse.SplitResult | None

    @property
    def netloc(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@dataclass(frozen=True)
class _Route:
    """A URL's origin, the request target sent for it and the headers every request takes."""

    origin: _Origin
    target: str
    headers: dict[str, str]


class ModelClient:
    """The session's connections to model endpoints, shared by every backend and thread.

    Each origin (scheme, host, port) keeps up to ``connections`` idle connections (at least
    20) between calls, so that calls do not open, and for https handshake, a new connection
    each time; a kept connection that the server closed meanwhile is dropped, not used.
    ``timeout`` seconds apply to connecting and to every read and write. From the
    environment come the proxy (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, unless
    ``NO_PROXY`` names the host; an http proxy, carrying https through ``CONNECT``) and, for
    https, the trusted authorities (``SSL_CERT_FILE`` / ``SSL_CERT_DIR``, else the system's).
    Certificates are always verified.
    """

    def __init__(self, timeout: float, connections: int = 1) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout must be positive seconds, got {timeout!r}")
        self.timeout = float(timeout)
        self._kept = max(connections, KEPT_CONNECTIONS)
        self._idle: dict[_Origin, list[http.client.HTTPConnection]] = {}
        self._routes: dict[str, _Route] = {}
        self._tls: ssl.SSLContext | None = None
        self._lock = threading.Lock()
        self._closed = False

    def post(self, url: str, content: bytes, headers: dict[str, str]) -> ModelResponse:
        """POST ``content`` and return the answer. Raises :class:`NoAnswer`."""
        route = self._routes.get(url) or self._route(url)
        connection = self._take(route.origin)
        phase = "connect"
        try:
            if connection.sock is None:
                connection.connect()
                # http.client sends the headers and the body in two writes; without this,
                # Nagle's algorithm may hold the body back until the headers are acknowledged.
                connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            phase = "write"
            connection.request("POST", route.target, content, {**route.headers, **headers})
            phase = "read"
            response = connection.getresponse()
            body = response.read()
        except (OSError, http.client.HTTPException, UnicodeError) as exc:  # Unicode: a bad host
            connection.close()
            raise NoAnswer(_describe(exc, phase, self.timeout)) from exc
        if response.will_close:
            connection.close()
        else:
            self._give_back(route.origin, connection)
        return ModelResponse(response.status, response.headers, _decoded(body, response.headers))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _route(self, url: str) -> _Route:
        """Where a request to ``url`` goes (worked out once per URL: the proxy settings are
        read from the environment on the first call)."""
        try:
            parts = urllib.parse.urlsplit(url)
            scheme = parts.scheme.lower()
            if scheme not in ("http", "https") or not parts.hostname:
                raise ValueError("the URL needs http:// or https:// and a host")
            port = parts.port or (443 if scheme == "https" else 80)
            host = parts.hostname
            if not host.isascii():
                host = host.encode("idna").decode("ascii")
        except ValueError as exc:  # UnicodeError (a host IDNA cannot encode) included
            raise NoAnswer(f"unsupported URL: {url!r}: {exc}") from None
        origin = _Origin(scheme, host, port, _proxy_parts(proxy_for(url)))
        target = parts.path or "/"
        if parts.query:
            target += f"?{parts.query}"
        headers = dict(_HEADERS)
        if origin.proxy is not None and scheme == "http":  # a proxy takes the whole URL
            target = f"http://{origin.netloc}{target}"
            headers.update(_proxy_headers(origin.proxy))
        route = _Route(origin, target, headers)
        with self._lock:
            self._routes[url] = route
        return route

    def _take(self, origin: _Origin) -> http.client.HTTPConnection:
        """A kept connection of ``origin`` that is still open, or a new one (not connected)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the model client is closed")
            idle = self._idle.get(origin)
            while idle:
                connection = idle.pop()
                if _still_open(connection):
                    return connection
                connection.close()
        return self._new_connection(origin)

    def _give_back(self, origin: _Origin, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            idle = self._idle.setdefault(origin, [])
            if not self._closed and len(idle) < self._kept:
                idle.append(connection)
                return
        connection.close()

    def _new_connection(self, origin: _Origin) -> http.client.HTTPConnection:
        proxy = origin.proxy
        host, port = (origin.host, origin.port) if proxy is None else _proxy_address(proxy)
        if origin.scheme == "http":
            return http.client.HTTPConnection(host, port, timeout=self.timeout)
        connection = http.client.HTTPSConnection(
            host, port, timeout=self.timeout, context=self._tls_context()
        )
        if proxy is not None:
            connection.set_tunnel(origin.host, origin.port, headers=_proxy_headers(proxy))
        return connection

    def _tls_context(self) -> ssl.SSLContext:
        with self._lock:
            if self._tls is None:
                cafile = os.environ.get("SSL_CERT_FILE") or None
                capath = os.environ.get("SSL_CERT_DIR") or None
                self._tls = ssl.create_default_context(cafile=cafile, capath=capath)
            return self._tls


def _still_open(connection: http.client.HTTPConnection) -> bool:
    """Whether a kept connection can carry a request: an idle socket with something to read
    has been closed by the server (or holds bytes no request asked for)."""
    sock = connection.sock
    if sock is None:
        return False
    try:
        if hasattr(select, "poll"):  # no limit on descriptor numbers, unlike select()
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            return not poller.poll(0)
        return not select.select([sock], [], [], 0)[0]
    except (OSError, ValueError):
        return False


def _decoded(body: bytes, headers: Message) -> bytes:
    """The body without a ``gzip`` or ``deflate`` content coding (requests ask for none, but
    a server may apply one anyway)."""
    coding = (headers.get("Content-Encoding") or "").strip().lower()
    if coding in ("", "identity"):
        return body
    try:
        if coding in ("gzip", "x-gzip"):
            return zlib.decompress(body, 16 + zlib.MAX_WBITS)
        if coding == "deflate":
            try:
                return zlib.decompress(body)
            except zlib.error:  # raw deflate, as some servers send it
                return zlib.decompress(body, -zlib.MAX_WBITS)
    except zlib.error as exc:
        raise NoAnswer(f"read failed: the {coding} body does not decompress: {exc}") from exc
    raise NoAnswer(f"read failed: unsupported Content-Encoding {coding!r}")


def _describe(exc: BaseException, phase: str, timeout: float) -> str:
    """Name the kind of failure of a request that got no answer."""
    if isinstance(exc, TimeoutError):  # socket.timeout is TimeoutError
        return f"timed out after {timeout:g}s"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, ssl.SSLError):
        return f"connection failed: {detail}"
    if phase == "connect" and str(exc).startswith("Tunnel connection failed"):
        return f"proxy error: {detail}"
    if isinstance(
        exc,
        http.client.HTTPException | ConnectionResetError | ConnectionAbortedError | BrokenPipeError,
    ):
        return f"connection closed or protocol error: {detail}"
    kind = {"connect": "connection failed", "write": "write failed"}.get(phase, "read failed")
    return f"{kind}: {detail}"


def _proxy_parts(proxy: str | None) -> urllib.parse.SplitResult | None:
    if proxy is None:
        return None
    parts = urllib.parse.urlsplit(proxy)
    if parts.scheme.lower() != "http" or not parts.hostname:
        raise NoAnswer(f"proxy error: only http:// proxies are supported, got {parts.scheme}://")
    return parts


def _proxy_address(proxy: urllib.parse.SplitResult) -> tuple[str, int]:
    return proxy.hostname or "", proxy.port or 80


def _proxy_headers(proxy: urllib.parse.SplitResult) -> dict[str, str]:
    """``Proxy-Authorization`` for a proxy URL that holds a user name (and password)."""
    if proxy.username is None:
        return {}
    user = urllib.parse.unquote(proxy.username)
    password = urllib.parse.unquote(proxy.password or "")
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return {"Proxy-Authorization": f"Basic {token}"}


def make_client(timeout: float, connections: int = 1) -> ModelClient:
    """Build the session's shared client; ``timeout`` seconds apply to connecting and to each
    read and write; ``connections`` is how many calls it makes at once (the run's
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
    except NoAnswer as exc:
        raise TransportError(redact_secret(f"POST {url}: {exc}", secret)) from exc
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
