"""``sandbox.agent_version`` pins the Codex the local model's sandbox image installs: the
image's tag and its cached npm install are named after it."""

from __future__ import annotations

import pytest

from pytest_openkata.local import sandbox as localsandbox
from pytest_openkata.local.sandbox import (
    AGENT_VERSION_VARIABLE,
    CODEX_VERSION,
    codex_version,
    image_tag,
)
from pytest_openkata.local.steps import LocalModelError


def test_without_the_setting_the_pinned_version_is_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(AGENT_VERSION_VARIABLE, raising=False)

    assert codex_version() == CODEX_VERSION
    assert f"-codex-{CODEX_VERSION}-" in image_tag()


def test_a_pinned_version_names_its_own_image_and_npm_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(AGENT_VERSION_VARIABLE, raising=False)
    default_tag = image_tag()
    monkeypatch.setenv(AGENT_VERSION_VARIABLE, " 0.170.0 ")

    assert codex_version() == "0.170.0"
    tag = image_tag()
    assert tag.startswith("openkata-local-sandbox:bookworm-codex-0.170.0-")
    assert tag != default_tag.replace(CODEX_VERSION, "0.170.0")  # the recipe's digest too
    assert localsandbox._codex_prefix().name == "codex-0.170.0"


@pytest.mark.parametrize("value", ["1.0; rm -rf /", "../0.1", "-1"])
def test_a_version_npm_could_not_take_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(AGENT_VERSION_VARIABLE, value)

    with pytest.raises(LocalModelError, match=rf"^{AGENT_VERSION_VARIABLE}: .* is not an npm"):
        image_tag()
