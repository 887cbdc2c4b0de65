"""The session's HTTP client for model endpoints: one :class:`httpx.Client` that every backend
and scenario thread shares (see :mod:`pytest_openkata.providers.backends.client` for how the
backends call through it).

The trusted authorities are chosen when the client is made, as httpx chooses them
(``SSL_CERT_FILE``, else ``SSL_CERT_DIR``, else certifi's bundle), but loaded at the client's
first TLS connection: loading a bundle costs a run tens of milliseconds of CPU before its first
call, and a run whose endpoints are all plain ``http://`` (a local model server) never needs
it. A chosen file or folder that does not exist fails every call at once, as before; one that
exists but does not load fails every TLS connection, naming the trusted authorities.
"""

from __future__ import annotations

import os
import ssl
import sys
import threading
from typing import Any

import certifi
import httpx

from pytest_openkata._version import __version__

__all__ = ["KEPT_CONNECTIONS", "make_client"]

_HEADERS = {"Accept": "application/json", "User-Agent": f"pytest-openkata/{__version__}"}
# Idle connections the client keeps at the least (the run's concurrency when higher).
KEPT_CONNECTIONS = 20


def make_client(timeout: float, connections: int = 1) -> httpx.Client:
    """Build the session's shared client; ``timeout`` seconds are each call's deadline (see
    the module docstring; httpx applies them to each phase too); ``connections`` is how many
    calls it makes at once (the run's concurrency), which it keeps connections for.

    An environment httpx cannot work with (a proxy URL of a scheme it does not speak, a
    ``SSL_CERT_FILE`` that does not exist) does not fail here but in every call, as a
    :class:`TransportError` naming the problem: a session fixture makes the client, and the
    scenarios report the failure. Trusted authorities that exist but do not load fail every
    TLS connection instead (see the module docstring).
    """
    if timeout <= 0:
        raise ValueError(f"timeout must be positive seconds, got {timeout!r}")
    try:
        return _client(timeout, connections, verify=_TrustOnFirstUse(_chosen_authorities()))
    except (ImportError, ValueError, httpx.InvalidURL) as exc:  # a proxy variable
        refusal = _Refusal(httpx.ProxyError, str(exc))
    except OSError as exc:  # ssl.SSLError included: the trusted authorities
        refusal = _Refusal(httpx.ConnectError, f"cannot load the trusted authorities: {exc}")
    return _client(timeout, connections, transport=refusal)


def _client(
    timeout: float,
    connections: int,
    *,
    verify: ssl.SSLContext | bool = True,
    transport: httpx.BaseTransport | None = None,
) -> httpx.Client:
    return httpx.Client(
        headers=_HEADERS,
        timeout=httpx.Timeout(timeout),
        limits=httpx.Limits(
            max_connections=None,  # calls are bounded by the run's concurrency already
            max_keepalive_connections=max(connections, KEPT_CONNECTIONS),
        ),
        verify=verify,
        trust_env=True,
        transport=transport,
    )


def _chosen_authorities() -> tuple[str | None, str | None]:
    """The bundle file and the folder of trusted authorities, chosen as httpx chooses them;
    an :class:`OSError` when the chosen one does not exist."""
    if cafile := os.environ.get("SSL_CERT_FILE"):
        chosen: tuple[str | None, str | None] = (cafile, None)
    elif capath := os.environ.get("SSL_CERT_DIR"):
        chosen = (None, capath)
    else:
        chosen = (certifi.where(), None)
    os.stat(chosen[0] or chosen[1] or "")
    return chosen


class _TrustOnFirstUse(ssl.SSLContext):
    """A verifying client context (what :func:`ssl.create_default_context` makes) that loads
    its trusted authorities when it first wraps a connection, once, whichever thread that is
    on; when they do not load, every connection it wraps fails with the reason."""

    def __new__(cls, authorities: tuple[str | None, str | None]) -> _TrustOnFirstUse:
        return super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)

    def __init__(self, authorities: tuple[str | None, str | None]) -> None:
        self._authorities = authorities
        self._loading = threading.Lock()
        self._loaded = False
        self._failure: str | None = None
        keylog = os.environ.get("SSLKEYLOGFILE")
        if keylog and not sys.flags.ignore_environment:  # as create_default_context does
            self.keylog_filename = keylog

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        self._trust()
        return super().wrap_socket(*args, **kwargs)

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        self._trust()
        return super().wrap_bio(*args, **kwargs)

    def _trust(self) -> None:
        with self._loading:
            if not self._loaded:
                self._loaded = True
                cafile, capath = self._authorities
                try:
                    self.load_verify_locations(cafile, capath)
                except OSError as exc:  # ssl.SSLError included
                    self._failure = f"cannot load the trusted authorities: {exc}"
        if self._failure is not None:
            raise OSError(self._failure)


class _Refusal(httpx.BaseTransport):
    """The transport of a client whose environment httpx refused: every call fails with the
    reason."""

    def __init__(self, error: type[httpx.TransportError], message: str) -> None:
        self._error = error
        self._message = message

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        raise self._error(self._message, request=request)
