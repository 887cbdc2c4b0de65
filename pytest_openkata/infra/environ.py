"""Reading the process environment from scenario threads.

pytest sets and removes ``PYTEST_CURRENT_TEST`` in its own thread for every item while the
scenarios run on theirs. Copying ``os.environ`` the usual ways (``dict(os.environ)``,
``{**os.environ}``, ``os.environ.items()``, and so ``urllib.request.getproxies()`` and
requests' proxy lookup) lists the names first and then looks each one up, and raises
``KeyError`` when a name goes away in between. Everything here lists the names once and skips
the ones gone by the time it reads them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import urlsplit

__all__ = ["environ_snapshot", "proxies_from", "proxy_for"]


def environ_snapshot() -> dict[str, str]:
    """A copy of ``os.environ`` that a change made by another thread cannot break."""
    snapshot = {}
    for name in list(os.environ):  # iterating os.environ lists its names first
        value = os.environ.get(name)
        if value is not None:
            snapshot[name] = value
    return snapshot


def proxies_from(environ: Mapping[str, str]) -> dict[str, str]:
    """The proxies that ``*_proxy`` variables name, by scheme (``"no"`` for ``NO_PROXY``), as
    :func:`urllib.request.getproxies_environment` reads them: the lower-case name wins, and
    ``HTTP_PROXY`` is ignored under CGI (``REQUEST_METHOD`` set)."""
    proxies: dict[str, str] = {}
    for name, value in environ.items():
        if value and name[-6:].lower() == "_proxy":
            proxies[name[:-6].lower()] = value
    if "REQUEST_METHOD" in environ:
        proxies.pop("http", None)
    for name, value in environ.items():
        if name[-6:] == "_proxy":
            scheme = name[:-6].lower()
            if value:
                proxies[scheme] = value
            else:
                proxies.pop(scheme, None)
    return proxies


def proxy_for(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``HTTP_PROXY``, ``HTTPS_PROXY``,
    ``ALL_PROXY``, upper or lower case), or None when there is none or ``NO_PROXY`` names its
    host."""
    if not any(name[-6:].lower() == "_proxy" for name in os.environ):
        return None  # most runs: no need to import urllib.request to learn that
    import urllib.request

    proxies = proxies_from(environ_snapshot())
    parts = urlsplit(url)
    proxy = proxies.get(parts.scheme.lower()) or proxies.get("all")
    # proxy_bypass_environment is urllib's own NO_PROXY rule; typeshed does not list it.
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    if not proxy or bypass(parts.netloc, proxies):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"
