"""The public API is exactly ``pytest_openkata.__all__``: nothing public in the package's
namespace is left out of it, everything in it can be taken, and the docs list the same
names."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest_openkata

DOCS = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def test_every_name_in_all_can_be_taken_from_the_package() -> None:
    missing = [name for name in pytest_openkata.__all__ if not hasattr(pytest_openkata, name)]
    assert missing == []
    assert len(set(pytest_openkata.__all__)) == len(pytest_openkata.__all__)


def test_the_namespace_holds_nothing_public_outside_all() -> None:
    # In a fresh interpreter: this one has imported subpackages, which appear as attributes.
    listed = subprocess.run(
        [
            sys.executable, "-c",
            "import inspect, pytest_openkata as p; print('\\n'.join(n for n, v in vars(p).items()"
            " if not n.startswith('_') and not inspect.ismodule(v)))",
        ],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.split()  # fmt: skip
    assert sorted(set(listed) - set(pytest_openkata.__all__)) == []
    assert inspect.isfunction(pytest_openkata.evaluate)  # given on first use


def test_the_docs_list_exactly_the_public_api() -> None:
    text = DOCS.read_text()
    section = text[text.index("## The public API") :]
    section = section[: section.index("\n## ", 1)]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "`" in line]
    documented = re.findall(r"`([A-Za-z_]+)`", "\n".join(row.split("|")[2] for row in rows))
    assert sorted(documented) == sorted(pytest_openkata.__all__)
