"""Two private Docker engines that behave like remote ones (``tests/support/engines.py``): one
at ``tcp://`` with mutual TLS, one at ``ssh://root@ADDRESS`` in a network namespace of its own.
Each fixture starts its engine once per session (per xdist worker) and builds the stand-in
image into it. ``ssh_host`` is the same namespace and sshd without the engine: a second host
for xdist workers, whose sessions have an API key of their own (:data:`SSH_HOST_API_KEY`).

The engines need root, dockerd, sshd and iproute2. Without them the tests of this folder are
deselected and the summary says so in one line, as the browser tests are; on CI (``CI`` set)
they run all the same and fail, so that a CI machine without them never passes by skipping
them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.docker_engine import build_standin_image
from tests.support.engines import SshEngine, SshHost, TlsEngine, missing_prerequisites

HERE = Path(__file__).resolve().parent
# The key that the ssh host's sessions have in their environment, as a remote machine's own.
SSH_HOST_API_KEY = "key-of-the-ssh-host"

_note = pytest.StashKey[str]()


def _here(item: pytest.Item) -> bool:
    return item.path.is_relative_to(HERE)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = missing_prerequisites()
    if reason is None or "CI" in os.environ:
        return
    needing = [item for item in items if _here(item)]
    if not needing:
        return
    items[:] = [item for item in items if not _here(item)]
    config.hook.pytest_deselected(items=needing)
    noun = "engine test" if len(needing) == 1 else "engine tests"
    config.stash[_note] = f"deselected {len(needing)} {noun}: {reason}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    note = terminalreporter.config.stash.get(_note, None)
    if note is not None:
        terminalreporter.write_line(note, yellow=True)


def require_engines() -> None:
    """An error saying what is missing (only CI runs the tests without it)."""
    reason = missing_prerequisites()
    if reason is not None:
        pytest.fail(f"{reason}; CI is set, so the engine tests fail rather than being skipped")


def build_image(engine: TlsEngine | SshEngine) -> None:
    """The stand-in image, built into the engine through its own client (TLS or ssh)."""
    with contextlib.closing(engine.client(timeout=120)) as client:
        engine.image = build_standin_image(client)


@pytest.fixture(scope="session")
def tls_engine() -> Iterator[TlsEngine]:
    require_engines()
    with TlsEngine() as engine:
        build_image(engine)
        yield engine


@pytest.fixture(scope="session")
def ssh_engine() -> Iterator[SshEngine]:
    require_engines()
    with SshEngine() as engine:
        build_image(engine)
        yield engine


@pytest.fixture(scope="session")
def ssh_host() -> Iterator[SshHost]:
    """A host in a network namespace reached over ssh only, with no Docker engine; its
    sessions' environment holds ``OPENKATA_EVAL_HTTP_API_KEY`` = :data:`SSH_HOST_API_KEY`
    and nothing of the client's."""
    require_engines()
    with SshHost({"OPENKATA_EVAL_HTTP_API_KEY": SSH_HOST_API_KEY}) as host:
        yield host
