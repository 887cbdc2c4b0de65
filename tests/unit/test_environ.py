"""Reading the environment while another thread changes it (pytest's thread sets and removes
PYTEST_CURRENT_TEST for every item while the scenarios run on theirs)."""

from __future__ import annotations

import os
import urllib.request

import pytest

from pytest_openkata.infra.environ import environ_snapshot, proxies_from, proxy_for
from tests.support.churn import CHURNED, environment_churn

READS = 2000


def errors_of(read: object, times: int = READS) -> int:
    errors = 0
    for _ in range(times):
        try:
            read()  # type: ignore[operator]
        except KeyError:
            errors += 1
    return errors


@pytest.fixture(autouse=True)
def no_proxy_from_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.lower().endswith("_proxy") or name == "REQUEST_METHOD":
            monkeypatch.delenv(name)


def test_the_churn_breaks_the_usual_copies_of_the_environment() -> None:
    # The ground the other tests stand on: without it they could not fail.
    with environment_churn():
        assert errors_of(lambda: dict(os.environ)) > 0
        assert errors_of(urllib.request.getproxies_environment) > 0


def test_a_snapshot_survives_a_variable_changing_in_another_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENKATA_TEST_KEPT", "kept")
    snapshots = []
    with environment_churn():
        for _ in range(READS):
            snapshots.append(environ_snapshot())
    steady = {name: value for name, value in os.environ.items() if name != CHURNED}
    for snapshot in snapshots:
        snapshot.pop(CHURNED, None)
        assert snapshot == steady


def test_the_proxy_is_found_while_a_variable_changes_in_another_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "internal.example")
    with environment_churn():
        found = [proxy_for("https://api.example/v1") for _ in range(READS)]
        bypassed = [proxy_for("https://internal.example/v1") for _ in range(READS)]
    assert set(found) == {"http://proxy.example:3128"}
    assert set(bypassed) == {None}


@pytest.mark.parametrize(
    "variables",
    [
        {"HTTP_PROXY": "http://upper:1"},
        {"http_proxy": "http://lower:1"},
        {"HTTP_PROXY": "http://upper:1", "http_proxy": "http://lower:1"},
        {"HTTPS_PROXY": "http://upper:1", "https_proxy": ""},
        {"Ftp_Proxy": "http://mixed:1", "ALL_PROXY": "http://all:1", "no_proxy": "a,b"},
        {"HTTP_PROXY": "http://cgi:1", "REQUEST_METHOD": "GET"},
        {"HTTP_PROXY": "http://cgi:1", "http_proxy": "http://lower:1", "REQUEST_METHOD": "GET"},
        {"HTTP_PROXY": ""},
    ],
)
def test_proxies_are_read_as_urllib_reads_them(
    variables: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert proxies_from(environ_snapshot()) == urllib.request.getproxies_environment()
