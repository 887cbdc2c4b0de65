"""End-to-end fixtures: the real local model (llama-server serving SmolLM2-135M).

The first run builds llama-server (cached under ~/.cache/pytest-openkata); ``.ci/run``
builds it before the tests so that its cost shows on its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_openkata.localmodel import LocalModelServer, prepare


@pytest.fixture(scope="session")
def local_model_files() -> tuple[Path, Path]:
    return prepare()


@pytest.fixture(scope="session")
def local_model(local_model_files: tuple[Path, Path]) -> Iterator[LocalModelServer]:
    binary, weights = local_model_files
    with LocalModelServer(binary, weights) as server:
        yield server
