"""What every response of the viewer carries and every request must show.

- Every response: a Content-Security-Policy that allows the viewer's own style, script and
  JSON and nothing else (no other site, no inline script, no frame), no caching, no referrer to
  another site.
- Every request names the viewer by the address it listens on (the ``Host`` header): a page
  of another site that resolves its own name to 127.0.0.1 (DNS rebinding) is refused.
- When the viewer listens beyond loopback, every request shows the token printed at start:
  ``?token=`` once (the viewer then sets it as a same-site cookie and sends the browser to the
  same page of its own origin without it), the cookie afterwards. The cookie's name holds the
  viewer's port: cookies are kept per host, not per port, and two viewers on one machine each
  keep their own token.
- A form posted (a label) carries the viewer's form key, which only its own pages hold, and
  comes from its own origin when the browser says where it comes from.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

__all__ = ["COOKIE", "POLICY", "Guard", "GuardedApp"]

COOKIE = "openkata_view_token"
POLICY = (
    "default-src 'none'; style-src 'self' 'unsafe-inline'; script-src 'self'; "
    "connect-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
_HEADERS = {
    "content-security-policy": POLICY,
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",  # no-referrer would make a form's Origin "null"
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class Guard:
    """The rules of one viewer: the ``Host`` values it answers to (empty: any, when it
    listens beyond loopback and the token guards it), its token ("" on loopback), its form
    key and the port it listens on (which names its token's cookie)."""

    hosts: frozenset[str]
    token: str
    form_key: str
    port: int = 0

    @property
    def cookie(self) -> str:
        """The name of the cookie that holds this viewer's token."""
        return f"{COOKIE}_{self.port}"

    def host_allowed(self, request: Request) -> bool:
        return not self.hosts or request.headers.get("host", "") in self.hosts

    def token_shown(self, request: Request) -> bool:
        if not self.token:
            return True
        shown = request.cookies.get(self.cookie, "")
        return hmac.compare_digest(shown.encode(), self.token.encode())

    def form_allowed(self, request: Request, form: dict[str, str]) -> bool:
        """A posted form carries the form key and, when the browser names its origin, comes
        from the viewer's own."""
        key = form.get("form_key", "")
        if not hmac.compare_digest(key.encode(), self.form_key.encode()):
            return False
        origin = request.headers.get("origin")
        return origin is None or origin == f"http://{request.headers.get('host', '')}"


class GuardedApp:
    """``app`` behind a :class:`Guard`, with the headers of every response."""

    def __init__(self, app: App, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                ours = {name.encode() for name in _HEADERS}
                headers = [(k, v) for k, v in message.get("headers", ()) if k.lower() not in ours]
                headers += [(k.encode(), v.encode()) for k, v in _HEADERS.items()]
                message["headers"] = headers
            await send(message)

        refused = self._refusal(Request(scope))
        if refused is not None:
            await refused(scope, receive, with_headers)
            return
        await self.app(scope, receive, with_headers)

    def _refusal(self, request: Request) -> Response | None:
        guard = self.guard
        if not guard.host_allowed(request):
            return PlainTextResponse("This viewer does not answer to that host name.", 421)
        shown = request.query_params.get("token")
        if guard.token and shown is not None:
            if not hmac.compare_digest(shown.encode(), guard.token.encode()):
                return PlainTextResponse("Wrong token: use the address the viewer printed.", 403)
            rest = urlencode([(k, v) for k, v in parse_qsl(request.url.query) if k != "token"])
            # One leading slash only: "//host" (or "/\\host") is another site to a browser.
            target = "/" + request.url.path.lstrip("/\\") + (f"?{rest}" if rest else "")
            answer = RedirectResponse(target, status_code=303)
            answer.set_cookie(guard.cookie, guard.token, httponly=True, samesite="strict")
            return answer
        if not guard.token_shown(request):
            return PlainTextResponse(
                "This viewer needs its token: open the address it printed at start.", 403
            )
        return None
