"""The session's model client against real loopback servers: pools per origin, TLS
verification, and the proxy the environment names."""

from __future__ import annotations

import base64
import gzip
import json
import re
import ssl
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import trustme

from pytest_openkata.providers.backends import TransportError
from pytest_openkata.providers.backends.http import ModelClient, OpenAIChatBackend, make_client
from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.tunnel import TunnelProxy

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture(autouse=True)
def no_proxy_from_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


@pytest.fixture
def endpoint() -> Iterator[ScriptedEndpoint]:
    with ScriptedEndpoint() as server:
        yield server


@pytest.fixture
def client() -> Iterator[ModelClient]:
    with make_client(5.0, connections=4) as model_client:
        yield model_client


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "the server never did it"
        time.sleep(0.001)


def ask(client: ModelClient, base_url: str) -> str:
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


def test_an_https_endpoint_whose_certificate_no_trusted_authority_signed_is_refused(
    client: ModelClient, tls_endpoint: ScriptedEndpoint
) -> None:
    tls_endpoint.enqueue(Reply.chat("never read"))
    with pytest.raises(TransportError, match="CERTIFICATE_VERIFY_FAILED"):
        ask(client, tls_endpoint.base_url)
    assert tls_endpoint.requests == []


def test_an_https_endpoint_is_trusted_through_ssl_cert_file(
    client: ModelClient, tls_endpoint: ScriptedEndpoint, trusted_authority: trustme.CA
) -> None:
    tls_endpoint.enqueue(Reply.chat("over tls"))

    assert ask(client, tls_endpoint.base_url) == "over tls"
    assert tls_endpoint.requests[0].path == "/v1/chat/completions"


def test_the_proxy_named_by_the_environment_carries_the_call(
    client: ModelClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ScriptedEndpoint() as target, ScriptedEndpoint() as proxy:
        proxy.enqueue(Reply.chat("through the proxy"))
        monkeypatch.setenv("HTTP_PROXY", f"127.0.0.1:{proxy.port}")

        assert ask(client, target.base_url) == "through the proxy"

        assert target.requests == []
        assert proxy.requests[0].path == f"{target.base_url}/chat/completions"


def test_no_proxy_naming_the_host_goes_direct(
    client: ModelClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ScriptedEndpoint() as target, ScriptedEndpoint() as proxy:
        target.enqueue(Reply.chat("direct"))
        monkeypatch.setenv("http_proxy", proxy.base_url)
        monkeypatch.setenv("no_proxy", "localhost,127.0.0.1")

        assert ask(client, target.base_url) == "direct"

        assert proxy.requests == []


def test_an_https_endpoint_is_reached_through_an_http_proxy_tunnel(
    client: ModelClient,
    tls_endpoint: ScriptedEndpoint,
    trusted_authority: trustme.CA,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tls_endpoint.enqueue(Reply.chat("through the tunnel"))
    with TunnelProxy() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)

        assert ask(client, tls_endpoint.base_url) == "through the tunnel"

        assert [target for target, _ in proxy.tunnels] == [f"127.0.0.1:{tls_endpoint.port}"]
    assert tls_endpoint.requests[0].path == "/v1/chat/completions"


def test_proxy_credentials_in_the_proxy_url_are_sent(
    client: ModelClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = "Basic " + base64.b64encode(b"ann:s3cr@t").decode()
    with ScriptedEndpoint() as target, ScriptedEndpoint() as proxy:
        proxy.enqueue(Reply.chat("through the proxy"))
        monkeypatch.setenv("HTTP_PROXY", f"http://ann:s3cr%40t@127.0.0.1:{proxy.port}")

        assert ask(client, target.base_url) == "through the proxy"

        assert proxy.requests[0].headers["proxy-authorization"] == expected


def test_a_tunnel_the_proxy_refuses_is_a_proxy_error(
    client: ModelClient, tls_endpoint: ScriptedEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    with TunnelProxy(require="Basic bm9ib2R5Og==") as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        with pytest.raises(TransportError, match=r": proxy error: Tunnel connection failed: 407"):
            ask(client, tls_endpoint.base_url)
    assert tls_endpoint.requests == []


def test_only_http_proxies_are_supported(
    client: ModelClient, endpoint: ScriptedEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "socks5://127.0.0.1:1080")
    with pytest.raises(TransportError, match=r"proxy error: only http:// proxies .* socks5://"):
        ask(client, endpoint.base_url)
    assert endpoint.requests == []


def test_a_kept_connection_the_server_let_go_is_not_used(client: ModelClient) -> None:
    with ScriptedEndpoint(keep_alive=True) as server:
        server.enqueue(replace(Reply.chat("first"), hang_up=True), Reply.chat("second"))
        assert ask(client, server.base_url) == "first"
        wait_until(lambda: server.hung_up == 1)  # the server closes its side after answering

        assert ask(client, server.base_url) == "second"

        assert server.connections == 2


def test_a_compressed_answer_is_decompressed(
    client: ModelClient, endpoint: ScriptedEndpoint
) -> None:
    body = json.dumps(Reply.chat("unzipped").json).encode()
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    endpoint.enqueue(Reply(body=gzip.compress(body), headers=headers))
    assert ask(client, endpoint.base_url) == "unzipped"
    assert endpoint.requests[0].headers["accept-encoding"] == "identity"


def test_each_origin_keeps_its_own_connections(client: ModelClient) -> None:
    with ScriptedEndpoint(keep_alive=True) as first, ScriptedEndpoint(keep_alive=True) as second:
        for server in (first, second):
            server.enqueue(*(Reply.chat(f"{server.port}") for _ in range(3)))
        answers = [ask(client, server.base_url) for server in (first, second) * 3]

        assert answers == [str(server.port) for server in (first, second) * 3]
        assert (first.connections, second.connections) == (1, 1)


def test_requests_name_the_plugin(client: ModelClient, endpoint: ScriptedEndpoint) -> None:
    endpoint.enqueue(Reply.chat("ok"))
    ask(client, endpoint.base_url)
    assert endpoint.requests[0].headers["user-agent"].startswith("pytest-openkata/")
    assert endpoint.requests[0].headers["accept"] == "application/json"


@pytest.mark.parametrize(
    ("base_url", "failure"),
    [
        ("ftp://127.0.0.1", "unsupported URL"),
        ("http://:8080", "unsupported URL"),
        ("http://127.0.0.1:99999", "unsupported URL"),
        ("http://ä..b", "unsupported URL"),
        ("http://a..b", "connection failed"),
    ],
)
def test_a_url_that_cannot_be_reached_is_a_transport_error(
    client: ModelClient, base_url: str, failure: str
) -> None:
    url = re.escape(f"{base_url}/chat/completions")
    with pytest.raises(TransportError, match=f"^POST {url}: {failure}"):
        ask(client, base_url)


def test_a_closed_client_refuses_calls(endpoint: ScriptedEndpoint) -> None:
    closed = make_client(5.0)
    closed.close()
    with pytest.raises(RuntimeError, match="closed"):
        closed.post(f"{endpoint.base_url}/chat/completions", b"{}", {})
    assert endpoint.requests == []
