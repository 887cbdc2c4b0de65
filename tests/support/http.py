"""Helpers for tests of the model backends over a real loopback server."""

from __future__ import annotations

import httpx
import pytest

from pytest_openkata.providers.backends.client import make_client

# What the client would take from the machine: proxies that loopback calls must not go to.
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


def loopback_client(timeout: float) -> httpx.Client:
    """A client made without the machine's proxies (httpx reads them when it is made)."""
    with pytest.MonkeyPatch.context() as environment:
        for name in PROXY_VARIABLES:
            environment.delenv(name, raising=False)
            environment.delenv(name.lower(), raising=False)
        return make_client(timeout)


def causes(exc: BaseException) -> list[BaseException]:
    """``exc``'s chain of causes, outermost first."""
    chain = []
    current: BaseException | None = exc
    while current is not None:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain
