"""The session's model client (httpx) against real loopback servers: kept connections, TLS
verification, and the proxy and authorities the environment names when the client is made."""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
import trustme

from pytest_openkata.contracts.errors import (
    AnswerTooLargeError,
    BackendError,
    CallTimeoutError,
    EndpointStatusError,
    MalformedResponseError,
    TransportError,
)
from pytest_openkata.providers.backends.http import OpenAIChatBackend, make_client
from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.tunnel import TunnelProxy

# What httpx reads from the environment when a client is made; none of the machine's.
ENVIRONMENT = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
AUTHORITIES = ("SSL_CERT_FILE", "SSL_CERT_DIR")


@pytest.fixture(autouse=True)
def nothing_from_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    for name in AUTHORITIES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def endpoint() -> Iterator[ScriptedEndpoint]:
    with ScriptedEndpoint() as server:
        yield server


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    """A client made with the environment as the test has set it before asking for it."""
    with make_client(5.0, connections=4) as model_client:
        yield model_client


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "the server never did it"
        time.sleep(0.001)


def ask(client: httpx.Client, base_url: str) -> str:
    return OpenAIChatBackend(client, base_url=base_url, api_key="", model="m").complete("", "u")


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def tls_endpoint(authority: trustme.CA) -> Iterator[ScriptedEndpoint]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(context)
    with ScriptedEndpoint(tls=context) as server:
        yield server


@pytest.fixture
def trusted_authority(
    authority: trustme.CA, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> trustme.CA:
    """The test authority, trusted through ``SSL_CERT_FILE``."""
    bundle = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    return authority


# -- kept connections -------------------------------------------------------------------------


def test_sequential_calls_share_one_kept_connection(client: httpx.Client) -> None:
    with ScriptedEndpoint(keep_alive=True) as server:
        server.enqueue(*(Reply.chat(f"answer {n}") for n in range(4)))

        answers = [ask(client, server.base_url) for _ in range(4)]

        assert answers == [f"answer {n}" for n in range(4)]
        assert server.connections == 1


def test_a_kept_connection_the_server_let_go_is_not_used(client: httpx.Client) -> None:
    with ScriptedEndpoint(keep_alive=True) as server:
        server.enqueue(replace(Reply.chat("first"), hang_up=True), Reply.chat("second"))
        assert ask(client, server.base_url) == "first"
        wait_until(lambda: server.hung_up == 1)  # the server closes its side after answering

        assert ask(client, server.base_url) == "second"

        assert server.connections == 2


def test_each_origin_keeps_its_own_connections(client: httpx.Client) -> None:
    with ScriptedEndpoint(keep_alive=True) as first, ScriptedEndpoint(keep_alive=True) as second:
        for server in (first, second):
            server.enqueue(*(Reply.chat(f"{server.port}") for _ in range(3)))
        answers = [ask(client, server.base_url) for server in (first, second) * 3]

        assert answers == [str(server.port) for server in (first, second) * 3]
        assert (first.connections, second.connections) == (1, 1)


def test_calls_from_many_threads_share_the_client(client: httpx.Client) -> None:
    with ScriptedEndpoint(keep_alive=True, latency=0.05) as server:
        server.respond_with(lambda request: Reply.chat("shared"))
        answers: list[str] = []
        errors: list[BaseException] = []

        def work() -> None:
            try:
                answers.extend(ask(client, server.base_url) for _ in range(3))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        assert errors == []
        assert answers == ["shared"] * 24
        assert server.max_in_flight > 1  # the calls did run at once
        assert server.connections <= 8  # and each thread's later calls reused a connection


# -- the request ------------------------------------------------------------------------------


def test_requests_name_the_plugin(client: httpx.Client, endpoint: ScriptedEndpoint) -> None:
    endpoint.enqueue(Reply.chat("ok"))
    ask(client, endpoint.base_url)
    assert endpoint.requests[0].headers["user-agent"].startswith("pytest-openkata/")
    assert endpoint.requests[0].headers["accept"] == "application/json"


def test_a_lone_surrogate_in_a_request_goes_as_the_replacement_character(
    client: httpx.Client, endpoint: ScriptedEndpoint
) -> None:
    # A text that reached a prompt with a lone surrogate (no UTF-8 encoder writes one) is sent,
    # not a crash of the call: as U+FFFD, what Go's decoder would have read it as.
    endpoint.enqueue(Reply.chat("ok"))
    backend = OpenAIChatBackend(client, base_url=endpoint.base_url, api_key="", model="m")

    assert backend.complete("", "before \ud800 after") == "ok"
    assert endpoint.requests[0].json["messages"][-1]["content"] == "before \ufffd after"


def test_a_compressed_answer_is_decompressed(
    client: httpx.Client, endpoint: ScriptedEndpoint
) -> None:
    body = json.dumps(Reply.chat("unzipped").json).encode()
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    endpoint.enqueue(Reply(body=gzip.compress(body), headers=headers))
    assert ask(client, endpoint.base_url) == "unzipped"
    # httpx asks for the codings it decodes (the hand-written client asked for none).
    assert "gzip" in endpoint.requests[0].headers["accept-encoding"]


def test_a_compressed_answer_that_does_not_decompress_is_a_read_failure(
    client: httpx.Client, endpoint: ScriptedEndpoint
) -> None:
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    endpoint.enqueue(Reply(body=b"not gzip at all", headers=headers))
    with pytest.raises(TransportError, match=r"/chat/completions: read failed: "):
        ask(client, endpoint.base_url)


# -- TLS --------------------------------------------------------------------------------------


def test_an_https_endpoint_whose_certificate_no_trusted_authority_signed_is_refused(
    client: httpx.Client, tls_endpoint: ScriptedEndpoint
) -> None:
    tls_endpoint.enqueue(Reply.chat("never read"))
    with pytest.raises(TransportError, match=r": connection failed: .*CERTIFICATE_VERIFY_FAILED"):
        ask(client, tls_endpoint.base_url)
    assert tls_endpoint.requests == []


def test_an_https_endpoint_is_trusted_through_ssl_cert_file(
    trusted_authority: trustme.CA, tls_endpoint: ScriptedEndpoint
) -> None:
    tls_endpoint.enqueue(Reply.chat("over tls"))
    with make_client(5.0) as client:
        assert ask(client, tls_endpoint.base_url) == "over tls"
    assert tls_endpoint.requests[0].path == "/v1/chat/completions"


def test_ssl_cert_file_is_read_when_the_client_is_made(
    client: httpx.Client, trusted_authority: trustme.CA, tls_endpoint: ScriptedEndpoint
) -> None:
    # ``client`` was made before ``trusted_authority`` set SSL_CERT_FILE.
    with pytest.raises(TransportError, match="CERTIFICATE_VERIFY_FAILED"):
        ask(client, tls_endpoint.base_url)


def test_trusted_authorities_that_do_not_load_fail_each_call(
    endpoint: ScriptedEndpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "missing.pem"))
    failure = r"connection failed: cannot load the trusted"
    with make_client(5.0) as client, pytest.raises(TransportError, match=failure):
        ask(client, endpoint.base_url)
    assert endpoint.requests == []


# -- proxies ----------------------------------------------------------------------------------


def test_the_proxy_named_by_the_environment_carries_the_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with ScriptedEndpoint() as target, ScriptedEndpoint() as proxy:
        proxy.enqueue(Reply.chat("through the proxy"))
        monkeypatch.setenv("HTTP_PROXY", f"127.0.0.1:{proxy.port}")

        with make_client(5.0) as client:
            assert ask(client, target.base_url) == "through the proxy"

        assert target.requests == []
        assert proxy.requests[0].path == f"{target.base_url}/chat/completions"


def test_the_proxy_environment_is_read_when_the_client_is_made(
    client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ScriptedEndpoint() as target, ScriptedEndpoint() as proxy:
        target.enqueue(Reply.chat("direct"))
        monkeypatch.setenv("HTTP_PROXY", proxy.base_url)  # after ``client`` was made

        assert ask(client, target.base_url) == "direct"

        assert proxy.requests == []


def test_no_proxy_naming_the_host_goes_direct(monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedEndpoint() as target, ScriptedEndpoint() as proxy:
        target.enqueue(Reply.chat("direct"))
        monkeypatch.setenv("http_proxy", proxy.base_url)
        monkeypatch.setenv("no_proxy", "localhost,127.0.0.1")

        with make_client(5.0) as client:
            assert ask(client, target.base_url) == "direct"

        assert proxy.requests == []


def test_proxy_credentials_in_the_proxy_url_are_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = "Basic " + base64.b64encode(b"ann:s3cr@t").decode()
    with ScriptedEndpoint() as target, ScriptedEndpoint() as proxy:
        proxy.enqueue(Reply.chat("through the proxy"))
        monkeypatch.setenv("HTTP_PROXY", f"http://ann:s3cr%40t@127.0.0.1:{proxy.port}")

        with make_client(5.0) as client:
            assert ask(client, target.base_url) == "through the proxy"

        assert proxy.requests[0].headers["proxy-authorization"] == expected


def test_an_https_endpoint_is_reached_through_an_http_proxy_tunnel(
    tls_endpoint: ScriptedEndpoint,
    trusted_authority: trustme.CA,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tls_endpoint.enqueue(Reply.chat("through the tunnel"))
    with TunnelProxy() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)

        with make_client(5.0) as client:
            assert ask(client, tls_endpoint.base_url) == "through the tunnel"

        assert [target for target, _ in proxy.tunnels] == [f"127.0.0.1:{tls_endpoint.port}"]
    assert tls_endpoint.requests[0].path == "/v1/chat/completions"


def test_proxy_credentials_open_the_tunnel(
    tls_endpoint: ScriptedEndpoint,
    trusted_authority: trustme.CA,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tls_endpoint.enqueue(Reply.chat("through the tunnel"))
    expected = "Basic " + base64.b64encode(b"ann:pw").decode()
    with TunnelProxy(require=expected) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url.replace("http://", "http://ann:pw@"))

        with make_client(5.0) as client:
            assert ask(client, tls_endpoint.base_url) == "through the tunnel"

        [(_, headers)] = proxy.tunnels
        assert headers["proxy-authorization"] == expected


def test_a_tunnel_the_proxy_refuses_is_a_proxy_error(
    tls_endpoint: ScriptedEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    with TunnelProxy(require="Basic bm9ib2R5Og==") as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        with make_client(5.0) as client, pytest.raises(TransportError) as caught:
            ask(client, tls_endpoint.base_url)
    url = f"{tls_endpoint.base_url}/chat/completions"
    assert str(caught.value) == f"POST {url}: proxy error: 407 Proxy Authentication Required"
    assert tls_endpoint.requests == []


def test_a_proxy_of_a_scheme_httpx_does_not_speak_fails_each_call(
    endpoint: ScriptedEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "ftp://127.0.0.1:2121")
    with make_client(5.0) as client, pytest.raises(TransportError, match=r": proxy error: .*ftp"):
        ask(client, endpoint.base_url)
    assert endpoint.requests == []


# -- URLs and the client's life ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("base_url", "failure"),
    [
        ("ftp://127.0.0.1", "unsupported URL"),
        ("http://:8080", "unsupported URL"),
        ("http://127.0.0.1:99999", "unsupported URL"),
        ("http://[::1", "unsupported URL"),
        ("http://ä..b", "unsupported URL"),
        # The hand-written client tried to connect and failed there; httpx's socket layer
        # refuses to encode the empty label, which is as much a bad URL.
        ("http://a..b", "unsupported URL"),
        ("http://no-such-host.invalid", "connection failed"),
    ],
)
def test_a_url_that_cannot_be_reached_is_a_transport_error(
    client: httpx.Client, base_url: str, failure: str
) -> None:
    url = re.escape(f"{base_url}/chat/completions")
    with pytest.raises(TransportError, match=f"^POST {url}: {failure}"):
        ask(client, base_url)


def test_make_client_applies_the_timeout_to_every_phase() -> None:
    with make_client(2) as client:
        assert client.timeout == httpx.Timeout(2.0)
        assert (client.timeout.connect, client.timeout.read) == (2.0, 2.0)
        assert (client.timeout.write, client.timeout.pool) == (2.0, 2.0)
    with pytest.raises(ValueError, match="positive"):
        make_client(0)


def test_a_closed_client_refuses_calls(endpoint: ScriptedEndpoint) -> None:
    closed = make_client(5.0)
    closed.close()
    with pytest.raises(RuntimeError, match="closed"):
        ask(closed, endpoint.base_url)
    assert endpoint.requests == []


# -- limits on a call: the deadline ----------------------------------------------------------

# How long a call may take before a test fails for it rather than hang the suite; far above
# every deadline below, far below what a dripping endpoint would take to finish.
GUARD = 60.0


def outcome_of(call: Callable[[], object]) -> object:
    """What ``call`` returned or raised, taken on a thread; a call that outlives the guard
    fails the test instead of hanging the suite."""
    result: list[object] = []

    def run() -> None:
        try:
            result.append(call())
        except BaseException as exc:
            result.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(GUARD)
    assert not worker.is_alive(), f"the call was still running after {GUARD:g}s"
    return result[0]


class DripServer:
    """A raw HTTP server on loopback that reads one request and then sends ``answer`` one byte
    every ``interval`` seconds, headers included; :attr:`hung_up` is set once the client has
    gone (a send failed or the connection ended)."""

    def __init__(self, answer: bytes, interval: float = 0.2) -> None:
        self.answer = answer
        self.interval = interval
        self.hung_up = threading.Event()
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/v1"

    def __enter__(self) -> DripServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._listener.close()
        self._thread.join(10)

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            connection, _ = self._listener.accept()
            with connection:
                request = b""
                while b"\r\n\r\n" not in request:
                    request += connection.recv(65536)
                try:
                    for byte in self.answer:
                        connection.sendall(bytes([byte]))
                        if self._stop.wait(self.interval):
                            return
                except OSError:
                    pass
                self.hung_up.set()


def chat_answer(content: str) -> bytes:
    body = json.dumps(Reply.chat(content).json).encode()
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
    return head.encode() + b"\r\n\r\n" + body


def test_an_answer_sent_one_byte_at_a_time_ends_at_the_deadline(
    endpoint: ScriptedEndpoint,
) -> None:
    # Each byte comes well within the timeout: only a deadline for the whole call ends it.
    endpoint.enqueue(replace(Reply.chat("a slow answer " * 20), drip=0.2))
    with make_client(1) as client:
        outcome = outcome_of(lambda: ask(client, endpoint.base_url))

    assert isinstance(outcome, CallTimeoutError), outcome
    assert str(outcome) == f"POST {endpoint.base_url}/chat/completions: timed out after 1s"


def test_headers_sent_one_byte_at_a_time_end_at_the_deadline_and_the_connection() -> None:
    padding = "x" * 400  # a long header: its bytes would come for 80 s
    answer = chat_answer("never read").replace(
        b"\r\n\r\n", f"\r\nX-Pad: {padding}\r\n\r\n".encode()
    )
    with DripServer(answer) as server, make_client(1) as client:
        outcome = outcome_of(lambda: ask(client, server.base_url))

        assert isinstance(outcome, CallTimeoutError), outcome
        assert str(outcome).endswith(": timed out after 1s")
        # The exchange left behind does not go on: its connection was shut down.
        assert server.hung_up.wait(GUARD)


def test_a_body_sent_one_byte_at_a_time_is_cut_off_with_its_connection() -> None:
    answer = chat_answer("a slow answer " * 80)  # 100 s of bytes
    with DripServer(answer, interval=0.1) as server, make_client(1) as client:
        outcome = outcome_of(lambda: ask(client, server.base_url))
        assert isinstance(outcome, CallTimeoutError), outcome
        assert server.hung_up.wait(GUARD)


def test_an_answer_within_the_deadline_is_read_whole(endpoint: ScriptedEndpoint) -> None:
    endpoint.enqueue(replace(Reply.chat("quick"), padding=3_000_000))
    with make_client(30) as client:
        assert ask(client, endpoint.base_url) == "quick"


# -- limits on a call: the size of the answer ---------------------------------------------------

MIB = 1 << 20


def ask_bounded(client: httpx.Client, base_url: str, max_bytes: int) -> object:
    backend = OpenAIChatBackend(
        client, base_url=base_url, api_key="", model="m", answer_max_bytes=max_bytes
    )
    return outcome_of(lambda: backend.complete("", "u"))


def test_an_answer_larger_than_the_bound_is_refused_without_being_read_whole(
    client: httpx.Client, endpoint: ScriptedEndpoint
) -> None:
    # Valid JSON of 200 MB, sent in chunks: never built whole by the server, nor read by us.
    endpoint.enqueue(replace(Reply.chat("hidden at the end"), padding=200 * MIB))

    outcome = ask_bounded(client, endpoint.base_url, MIB)

    assert isinstance(outcome, AnswerTooLargeError), outcome
    assert isinstance(outcome, MalformedResponseError)
    assert str(outcome) == (
        f"POST {endpoint.base_url}/chat/completions: the answer is larger than 1 MiB, "
        "the bound of answer_max_bytes"
    )


def test_an_answer_of_exactly_the_bound_is_taken(
    client: httpx.Client, endpoint: ScriptedEndpoint
) -> None:
    reply = Reply.chat("just fits")
    size = len(reply.encoded()[0])
    endpoint.enqueue(replace(reply, padding=MIB - size), replace(reply, padding=MIB - size + 1))

    assert ask_bounded(client, endpoint.base_url, MIB) == "just fits"
    assert isinstance(ask_bounded(client, endpoint.base_url, MIB), AnswerTooLargeError)


def test_the_bound_holds_for_the_decompressed_answer(
    client: httpx.Client, endpoint: ScriptedEndpoint
) -> None:
    body = json.dumps(Reply.chat("a" * 8 * MIB).json).encode()
    compressed = gzip.compress(body)
    assert len(compressed) < MIB
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    endpoint.enqueue(Reply(body=compressed, headers=headers))

    assert isinstance(ask_bounded(client, endpoint.base_url, MIB), AnswerTooLargeError)


def test_an_error_body_larger_than_the_bound_is_cut(
    client: httpx.Client, endpoint: ScriptedEndpoint
) -> None:
    text = "overloaded " * 200_000
    endpoint.enqueue(Reply(status=503, body=text))

    outcome = ask_bounded(client, endpoint.base_url, MIB)

    assert isinstance(outcome, EndpointStatusError), outcome
    assert outcome.status == 503
    assert outcome.body == text[:MIB] + " ... (cut at 1 MiB)"


# -- answers that are not what they say, keys a header cannot carry ---------------------------


def test_a_200_answer_that_is_not_json_says_what_it_is(
    client: httpx.Client, endpoint: ScriptedEndpoint
) -> None:
    start = "<html>\n<title>502 Bad Gateway</title>\x1b[2J"
    page = start + "x" * 300 + "</html>"
    endpoint.enqueue(Reply(body=page, headers={"Content-Type": "text/html"}))

    with pytest.raises(MalformedResponseError) as caught:
        ask(client, endpoint.base_url)

    shown = "<html>\\n<title>502 Bad Gateway</title>\\x1b[2J" + "x" * (200 - len(start))
    assert str(caught.value) == (
        "parsing response: HTTP 200 with Content-Type text/html, not JSON (Expecting value: "
        f"line 1 column 1 (char 0)): {shown}..."
    )


@pytest.mark.parametrize(
    ("reply", "described"),
    [
        (
            Reply(body=b"", headers={"Content-Type": "application/json"}),
            "HTTP 200 with "
            "Content-Type application/json, not JSON (Expecting value: line 1 column 1 (char 0)): "
            "the body is empty",
        ),
        (
            Reply(body=b'{"choices": ['),
            "HTTP 200 with no Content-Type, not JSON (Expecting "
            'value: line 1 column 14 (char 13)): {"choices": [',
        ),
    ],
)
def test_a_200_answer_that_is_not_json_names_its_content_type_or_its_lack(
    client: httpx.Client, endpoint: ScriptedEndpoint, reply: Reply, described: str
) -> None:
    endpoint.enqueue(reply)
    with pytest.raises(MalformedResponseError) as caught:
        ask(client, endpoint.base_url)
    assert str(caught.value) == f"parsing response: {described}"


def test_the_api_key_an_answer_that_is_not_json_echoes_is_masked(
    client: httpx.Client, endpoint: ScriptedEndpoint
) -> None:
    endpoint.enqueue(Reply(body="denied for key sk-secret-1"))
    backend = OpenAIChatBackend(
        client, base_url=endpoint.base_url, api_key="sk-secret-1", model="m"
    )
    with pytest.raises(MalformedResponseError) as caught:
        backend.complete("", "u")
    assert str(caught.value).endswith("): denied for key ***")


@pytest.mark.parametrize("key", ["sk-clé", "sk-key\n", "sk-\u2028key"])
def test_an_api_key_a_header_cannot_carry_is_named_and_never_shown(
    client: httpx.Client, endpoint: ScriptedEndpoint, key: str
) -> None:
    backend = OpenAIChatBackend(client, base_url=endpoint.base_url, api_key=key, model="m")

    with pytest.raises(BackendError) as caught:
        backend.complete("", "u")

    assert str(caught.value) == (
        f"POST {endpoint.base_url}/chat/completions: the API key holds a character an HTTP "
        "header cannot carry (only printable ASCII can go in a header)"
    )
    assert endpoint.requests == []
