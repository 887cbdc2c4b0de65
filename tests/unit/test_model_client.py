"""The session's model client against real loopback servers: pools per origin, TLS
verification, and the proxy the environment names."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from pytest_openkata.backends import TransportError
from pytest_openkata.backends.http import ModelClient, OpenAIChatBackend, make_client
from tests.support.endpoint import Reply, ScriptedEndpoint

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


def test_an_https_endpoint_whose_certificate_no_trusted_authority_signed_is_refused(
    client: ModelClient, tls_endpoint: ScriptedEndpoint
) -> None:
    tls_endpoint.enqueue(Reply.chat("never read"))
    with pytest.raises(TransportError, match="CERTIFICATE_VERIFY_FAILED"):
        ask(client, tls_endpoint.base_url)
    assert tls_endpoint.requests == []


def test_an_https_endpoint_is_trusted_through_ssl_cert_file(
    client: ModelClient,
    tls_endpoint: ScriptedEndpoint,
    authority: trustme.CA,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bundle = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
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


def test_a_closed_client_refuses_calls(endpoint: ScriptedEndpoint) -> None:
    closed = make_client(5.0)
    closed.close()
    with pytest.raises(RuntimeError, match="closed"):
        closed.post(f"{endpoint.base_url}/chat/completions", b"{}", {})
    assert endpoint.requests == []
