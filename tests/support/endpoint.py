"""A real, scripted HTTP server on loopback, standing in for an OpenAI-compatible endpoint.

Tests talk to it over TCP through its URL, so it works the same for in-process backends, for
pytester subprocess runs and for any other client::

    with ScriptedEndpoint() as endpoint:
        endpoint.enqueue(Reply.chat("hello"), Reply(status=429, body="rate limited"))
        backend = OpenAIChatBackend(client, base_url=endpoint.base_url, api_key="k", model="m")
        ...
        assert endpoint.requests[0].json["model"] == "m"

Replies come from a FIFO queue (:meth:`ScriptedEndpoint.enqueue`) or, for routing on the
request's content, from a function (:meth:`ScriptedEndpoint.respond_with`). With neither, the
server answers 500 ``no scripted reply left``. Header names in :class:`RecordedRequest` are
lower-case.

``ScriptedEndpoint(latency=0.1)`` delays every answer by that many seconds on top of a reply's
own ``delay`` (a slow model, for benchmarks). :attr:`ScriptedEndpoint.in_flight` counts the
requests being handled right now and :attr:`ScriptedEndpoint.max_in_flight` the most at once
since :meth:`~ScriptedEndpoint.start` or :meth:`~ScriptedEndpoint.reset_peak`: a request counts
from the moment its handler starts, through any delay, until its answer starts being sent (or
its connection is dropped), so a client that has its answer is never still counted.
"""

from __future__ import annotations

import itertools
import json as jsonlib
import ssl
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

__all__ = ["RecordedRequest", "Reply", "Responder", "ScriptedEndpoint"]

_ids = itertools.count(1)


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it; ``json`` is None when the body is not JSON."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any | None = None


@dataclass(frozen=True)
class Reply:
    """What the server answers to one request.

    ``json`` (serialised, with ``Content-Type: application/json``) or ``body`` (bytes or text,
    sent as is) give the body; ``delay`` seconds pass before answering; ``close=True`` drops the
    connection without any answer; ``hang_up=True`` answers and then closes the connection
    without saying so, as a server lets a kept connection go when it has idled too long.
    """

    status: int = 200
    json: Any | None = None
    body: bytes | str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    close: bool = False
    hang_up: bool = False

    def __post_init__(self) -> None:
        if self.json is not None and self.body is not None:
            raise ValueError("a Reply takes json or body, not both")

    @classmethod
    def chat(
        cls, content: str | None, *, model: str = "gpt-4o", finish_reason: str = "stop"
    ) -> Reply:
        """A 200 OpenAI chat completion whose ``choices[0].message.content`` is ``content``
        (``finish_reason`` "length": cut off at the token limit)."""
        return cls(
            json={
                "id": f"chatcmpl-scripted-{next(_ids)}",
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": finish_reason,
                    }
                ],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            }
        )

    def encoded(self) -> tuple[bytes, dict[str, str]]:
        """The body bytes and the headers to send, Content-Type included when known."""
        headers = dict(self.headers)
        if self.json is not None:
            headers.setdefault("Content-Type", "application/json")
            return jsonlib.dumps(self.json).encode(), headers
        if isinstance(self.body, str):
            headers.setdefault("Content-Type", "text/plain; charset=utf-8")
            return self.body.encode(), headers
        return self.body or b"", headers


Responder = Callable[[RecordedRequest], Reply]


class ScriptedEndpoint:
    """A ``ThreadingHTTPServer`` on ``127.0.0.1`` (a free port) served from a daemon thread.

    ``latency`` seconds pass before every answer, on top of the reply's own ``delay``, both
    counted from the moment the request's headers are in. Every connection serves one request
    and is closed, unless ``keep_alive``: then a client may send further requests on it, as real
    model servers allow. With ``tls`` (a server-side context holding the certificate) it serves
    https, and :attr:`base_url` says so.
    """

    def __init__(
        self,
        *,
        latency: float = 0.0,
        keep_alive: bool = False,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        if latency < 0:
            raise ValueError(f"latency must be at least 0 seconds, got {latency!r}")
        self.latency = latency
        self.keep_alive = keep_alive
        self.tls = tls
        self._lock = threading.Lock()
        self._in_flight = 0
        self._max_in_flight = 0
        self._connections = 0
        self._hung_up = 0
        self._queue: deque[Reply] = deque()
        self._responder: Responder | None = None
        self._requests: list[RecordedRequest] = []
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Self:
        if self._server is not None:
            return self
        self._stopping.clear()
        with self._lock:
            self._max_in_flight = self._in_flight
            self._connections = 0
            self._hung_up = 0
        server = _Server(("127.0.0.1", 0), _make_handler(self))
        if self.tls is not None:
            server.socket = self.tls.wrap_socket(server.socket, server_side=True)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.01},
            name=f"ScriptedEndpoint:{server.server_address[1]}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and free the port; delayed replies still waiting are abandoned."""
        server, thread = self._server, self._thread
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addresses ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("ScriptedEndpoint is not started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1`` (``https`` with ``tls``), the value to give as the
        backend's base_url."""
        scheme = "http" if self.tls is None else "https"
        return f"{scheme}://127.0.0.1:{self.port}/v1"

    # -- script ------------------------------------------------------------------------------

    def enqueue(self, *replies: Reply) -> None:
        """Append replies to the FIFO used when no responder function is set."""
        with self._lock:
            self._queue.extend(replies)

    def respond_with(self, func: Responder | None) -> None:
        """Answer every request with ``func(request)`` instead of the queue; None restores it."""
        with self._lock:
            self._responder = func

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of the requests received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def pending(self) -> int:
        """How many queued replies have not been used yet."""
        with self._lock:
            return len(self._queue)

    @property
    def in_flight(self) -> int:
        """How many requests are being handled right now (received, not yet answered)."""
        with self._lock:
            return self._in_flight

    @property
    def max_in_flight(self) -> int:
        """The most requests handled at once since :meth:`start` or :meth:`reset_peak`."""
        with self._lock:
            return self._max_in_flight

    @property
    def connections(self) -> int:
        """How many connections clients have opened since :meth:`start`."""
        with self._lock:
            return self._connections

    @property
    def hung_up(self) -> int:
        """How many connections the server has closed after a ``hang_up`` reply."""
        with self._lock:
            return self._hung_up

    def reset_peak(self) -> None:
        """Restart :attr:`max_in_flight` from the requests in flight now."""
        with self._lock:
            self._max_in_flight = self._in_flight

    # -- used by the handler -----------------------------------------------------------------

    def _connected(self) -> None:
        with self._lock:
            self._connections += 1

    def _hang_up(self) -> None:
        with self._lock:
            self._hung_up += 1

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _answer(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self._requests.append(request)
            responder = self._responder
            queued = self._queue.popleft() if responder is None and self._queue else None
        if responder is not None:
            try:
                return responder(request)
            except Exception as exc:  # a broken responder must show up in the test, not hang
                return Reply(status=500, body=f"responder raised {type(exc).__name__}: {exc}")
        if queued is None:
            return Reply(status=500, body="no scripted reply left")
        return queued


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a handler stuck in a delay never blocks stop()
    request_queue_size = 128  # many concurrent clients connect without SYN retries

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], (ConnectionError, ssl.SSLError)):
            super().handle_error(request, client_address)  # prints the traceback


def _make_handler(endpoint: ScriptedEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes; on a kept connection Nagle's algorithm would
        # hold the body back until the client's delayed acknowledgement (about 40 ms).
        disable_nagle_algorithm = True

        hanging_up = False

        def setup(self) -> None:
            super().setup()
            endpoint._connected()

        def finish(self) -> None:
            super().finish()
            if self.hanging_up:  # closed here rather than by the server, so that it is counted
                self.connection.close()
                endpoint._hang_up()

        def _handle(self) -> None:
            # One request per connection unless keep_alive: by default nothing lingers on stop.
            self.close_connection = not endpoint.keep_alive
            received_at = time.monotonic()
            endpoint._enter()
            counted = True
            try:
                reply = self._receive_and_wait(received_at)
                endpoint._leave()  # before answering: a client holding its answer is not counted
                counted = False
                if reply is None:
                    self.close_connection = True  # no answer: the connection is dropped
                else:
                    self._send(reply)
                    if reply.hang_up:
                        self.close_connection = True
                        self.hanging_up = True
            finally:
                if counted:
                    endpoint._leave()

        def _receive_and_wait(self, received_at: float) -> Reply | None:
            """The reply to send once its delay, counted from ``received_at``, has passed; None
            for no answer at all."""
            body = self._read_body()
            headers: dict[str, str] = {}
            for name, value in self.headers.items():
                key = name.lower()
                headers[key] = f"{headers[key]}, {value}" if key in headers else value
            request = RecordedRequest(
                method=self.command,
                path=self.path,
                headers=headers,
                body=body,
                json=_json_or_none(body),
            )
            reply = endpoint._answer(request)
            delay = endpoint.latency + reply.delay - (time.monotonic() - received_at)
            if delay > 0 and endpoint._stopping.wait(delay):
                return None
            if reply.close:
                return None
            return reply

        def _send(self, reply: Reply) -> None:
            payload, reply_headers = reply.encoded()
            try:
                self.send_response(reply.status)
                for name, value in reply_headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                if self.close_connection:
                    self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(payload)
            except OSError:
                pass  # the client gave up (e.g. its timeout fired during a delay)

        def _read_body(self) -> bytes:
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                chunks = []
                while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(chunks)
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return Handler


def _json_or_none(body: bytes) -> Any | None:
    try:
        return jsonlib.loads(body)
    except ValueError:
        return None
