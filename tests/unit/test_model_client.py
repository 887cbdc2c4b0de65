"""The session's model client (httpx) against real loopback servers: kept connections, TLS
verification, and the proxy and authorities the environment names when the client is made."""

from __future__ import annotations

import base64
import gzip
import json
import re
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
import trustme

from pytest_openkata.providers.backends import TransportError
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
