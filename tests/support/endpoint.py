"""A real, scripted HTTP server on loopback, standing in for an OpenAI-compatible endpoint.

Tests talk to it over TCP through its URL, so it works the same for in-process backends, for
pytester subprocess runs and for any other client::

    with ScriptedEndpoint() as endpoint:
        endpoint.enqueue(Reply.chat("hello"), Reply(status=429, body="rate limited"))
        backend = OpenAIChatBackend(client, base_url=endpoint.base_url, api_key="k", model="m")
        ...
        assert endpoint.requests[0].json["model"] == "m"

Replies come from a FIFO queue (:meth:`ScriptedEndpoint.enqueue`) or, for routing on the
request's content, from a function (:meth:`ScriptedEndpoint.respond_with`), such as
:class:`StrictStructuredOutput`, which answers structured requests only when their schema keeps
to the subset that OpenAI's strict mode (and Anthropic's tool schemas) accept. With neither, the
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
import re
import socket
import ssl
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

__all__ = [
    "RecordedRequest",
    "Reply",
    "Responder",
    "ScriptedEndpoint",
    "StrictStructuredOutput",
    "strict_subset_violations",
]

_ids = itertools.count(1)


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it; ``json`` is None when the body is not JSON;
    ``client`` is the IP address the request came from (which host sent it)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any | None = None
    client: str = ""


@dataclass(frozen=True)
class Reply:
    """What the server answers to one request.

    ``json`` (serialised, with ``Content-Type: application/json``) or ``body`` (bytes or text,
    sent as is) give the body; ``delay`` seconds pass before answering; ``close=True`` drops the
    connection without any answer; ``hang_up=True`` answers and then closes the connection
    without saying so, as a server lets a kept connection go when it has idled too long.

    Hostile bodies: ``drip`` sends the body one byte every ``drip`` seconds (its headers at
    once); ``padding`` puts that many spaces after the body's first byte, sent in chunks and
    never built in memory (after a JSON body's ``{`` they keep it valid JSON, of any size);
    ``reset_after`` sends that many bytes of the body and then resets the connection (a TCP
    RST), though the headers announced all of it.
    """

    status: int = 200
    json: Any | None = None
    body: bytes | str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    close: bool = False
    hang_up: bool = False
    drip: float = 0.0
    padding: int = 0
    reset_after: int | None = None

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

    @classmethod
    def message(cls, *blocks: dict[str, Any], stop_reason: str = "end_turn") -> Reply:
        """A 200 Anthropic Messages answer whose ``content`` is ``blocks``."""
        return cls(
            json={
                "id": f"msg_scripted_{next(_ids)}",
                "type": "message",
                "role": "assistant",
                "model": "claude-scripted",
                "content": list(blocks),
                "stop_reason": stop_reason,
                "usage": {"input_tokens": 0, "output_tokens": 0},
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

    def chunks(self, payload: bytes) -> Iterator[bytes]:
        """The body as it goes out: ``payload`` with its ``padding``, one byte at a time for a
        ``drip``, cut at ``reset_after``."""
        pieces = self._pieces(payload)
        if self.drip:
            pieces = (piece[i : i + 1] for piece in pieces for i in range(len(piece)))
        if self.reset_after is None:
            yield from pieces
            return
        left = self.reset_after
        for piece in pieces:
            if len(piece) >= left:
                yield piece[:left]
                return
            yield piece
            left -= len(piece)

    def _pieces(self, payload: bytes) -> Iterator[bytes]:
        if not self.padding:
            yield payload
            return
        yield payload[:1]
        left = self.padding
        while left:
            size = min(left, _PADDING_CHUNK)
            yield _SPACES[:size]
            left -= size
        yield payload[1:]


_PADDING_CHUNK = 1 << 16
_SPACES = b" " * _PADDING_CHUNK

Responder = Callable[[RecordedRequest], Reply]


class ScriptedEndpoint:
    """A ``ThreadingHTTPServer`` on ``127.0.0.1`` (a free port) served from a daemon thread;
    ``host`` names another local address to listen on (one that clients in another network
    namespace reach).

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
        host: str = "127.0.0.1",
    ) -> None:
        if latency < 0:
            raise ValueError(f"latency must be at least 0 seconds, got {latency!r}")
        self.latency = latency
        self.keep_alive = keep_alive
        self.tls = tls
        self.host = host
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
        server = _Server((self.host, 0), _make_handler(self))
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
        """``http://<host>:<port>/v1`` (``https`` with ``tls``), the value to give as the
        backend's base_url."""
        scheme = "http" if self.tls is None else "https"
        return f"{scheme}://{self.host}:{self.port}/v1"

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
                client=str(self.client_address[0]),
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
                self.send_header("Content-Length", str(len(payload) + reply.padding))
                if self.close_connection:
                    self.send_header("Connection", "close")
                self.end_headers()
                for chunk in reply.chunks(payload):
                    self.wfile.write(chunk)
                    if reply.drip and endpoint._stopping.wait(reply.drip):
                        break
                if reply.reset_after is not None:
                    self._reset()
            except OSError:
                pass  # the client gave up (e.g. its timeout fired during a delay)

        def _reset(self) -> None:
            """Reset the connection: a close with no lingering sends RST, not FIN."""
            self.wfile.flush()
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True

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


# --- a structured-output endpoint that keeps to the strict subset ----------------------------

# Keywords OpenAI's strict mode refuses (and Anthropic's structured outputs do not support).
STRICT_FORBIDDEN = ("prefixItems", "minItems", "maxItems", "minLength", "maxLength")
# The property keys Anthropic accepts in a tool's input schema.
ANTHROPIC_PROPERTY_KEY = re.compile(r"[a-zA-Z0-9_.-]{1,64}")


def strict_subset_violations(
    schema: Any, *, key_pattern: re.Pattern[str] | None = None, path: str = "$"
) -> list[str]:
    """What in ``schema`` a strict structured-output API refuses, one line per finding: a
    forbidden keyword, an object without ``additionalProperties: false``, a property missing
    from ``required``, and with ``key_pattern`` a property key that does not match it."""
    if isinstance(schema, list):
        return [
            finding
            for index, item in enumerate(schema)
            for finding in strict_subset_violations(
                item, key_pattern=key_pattern, path=f"{path}[{index}]"
            )
        ]
    if not isinstance(schema, dict):
        return []
    found = [
        f"{path}: {keyword} is not supported" for keyword in STRICT_FORBIDDEN if keyword in schema
    ]
    properties = schema.get("properties")
    if schema.get("type") == "object" or isinstance(properties, dict):
        if schema.get("additionalProperties") is not False:
            found.append(f"{path}: additionalProperties must be false")
        required = schema.get("required", [])
        for key in properties if isinstance(properties, dict) else {}:
            if key not in required:
                found.append(f"{path}: property {key!r} is not in required")
            if key_pattern is not None and not key_pattern.fullmatch(key):
                found.append(f"{path}: property key {key!r} does not match {key_pattern.pattern}")
    for key, value in schema.items():
        if key == "properties" and isinstance(value, dict):
            for name, sub in value.items():
                found += strict_subset_violations(
                    sub, key_pattern=key_pattern, path=f"{path}.properties[{name!r}]"
                )
        elif isinstance(value, (dict, list)) and key not in ("required", "enum"):
            found += strict_subset_violations(value, key_pattern=key_pattern, path=f"{path}.{key}")
    return found


def instance_of(schema: Any) -> Any:
    """A value that follows ``schema``: every property present, ``true`` for booleans, a
    string that names its property for strings."""
    return _instance(schema, "")


def _instance(schema: Any, key: str) -> Any:
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        return {name: _instance(sub, name) for name, sub in schema.get("properties", {}).items()}
    if kind == "boolean":
        return True
    if kind == "string":
        return f"the {key} of a scripted answer"
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 0
    return None


@dataclass
class StrictStructuredOutput:
    """A responder (for :meth:`ScriptedEndpoint.respond_with`) for both APIs that enforces the
    strict subset on every structured request and answers it with :func:`instance_of` its
    schema: ``/chat/completions`` with a ``response_format`` json_schema, ``/v1/messages`` with
    one tool forced by ``tool_choice`` (whose property keys must also match
    :data:`ANTHROPIC_PROPERTY_KEY`). A request that breaks the subset gets 400 with the
    findings and counts in :attr:`refused`; a plain request gets ``plain_answer``."""

    plain_answer: str = "a plain answer"
    refused: list[str] = field(default_factory=list)
    structured: int = 0
    plain: int = 0

    def __call__(self, request: RecordedRequest) -> Reply:
        body = request.json if isinstance(request.json, dict) else {}
        if request.path.endswith("/chat/completions"):
            return self._chat(body)
        if request.path.endswith("/messages"):
            return self._messages(body)
        return Reply(status=404, body=f"no route {request.path}")

    def _refuse(self, findings: list[str]) -> Reply:
        self.refused.extend(findings)
        return Reply(
            status=400,
            json={"error": {"type": "invalid_request_error", "message": "; ".join(findings)}},
        )

    def _chat(self, body: dict[str, Any]) -> Reply:
        response_format = body.get("response_format")
        if response_format is None:
            self.plain += 1
            return Reply.chat(self.plain_answer)
        wrapper = response_format.get("json_schema", {})
        findings = [] if wrapper.get("strict") is True else ["json_schema.strict must be true"]
        schema = wrapper.get("schema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            findings.append("the root of the schema must be an object")
        findings += strict_subset_violations(schema)
        if findings:
            return self._refuse(findings)
        self.structured += 1
        return Reply.chat(jsonlib.dumps(instance_of(schema)))

    def _messages(self, body: dict[str, Any]) -> Reply:
        tools = body.get("tools")
        if tools is None:
            self.plain += 1
            return Reply.message({"type": "text", "text": self.plain_answer})
        findings = []
        if not (isinstance(tools, list) and len(tools) == 1 and isinstance(tools[0], dict)):
            return self._refuse(["expected exactly one tool"])
        tool = tools[0]
        if body.get("tool_choice") != {"type": "tool", "name": tool.get("name")}:
            findings.append("tool_choice must force the tool")
        schema = tool.get("input_schema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            findings.append("input_schema must be an object schema")
        findings += strict_subset_violations(schema, key_pattern=ANTHROPIC_PROPERTY_KEY)
        if findings:
            return self._refuse(findings)
        self.structured += 1
        call = {
            "type": "tool_use",
            "id": f"toolu_{next(_ids)}",
            "name": tool["name"],
            "input": instance_of(schema),
        }
        return Reply.message(call, stop_reason="tool_use")
