"""The session's HTTP client for model endpoints: one :class:`httpx.Client` that every backend
and scenario thread shares (see :mod:`pytest_openkata.providers.backends.client` for how the
backends call through it)."""

from __future__ import annotations

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
