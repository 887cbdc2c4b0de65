"""A distribution of another party, installed for a test: a ``pyproject.toml`` whose entry
points register providers, and one module, installed into a folder of its own that a test
puts on ``PYTHONPATH`` (the child pytest then finds its entry points)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PYPROJECT = """\
[build-system]
requires = ["setuptools>=69"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "1.0"

{entry_points}
"""


def install_distribution(
    tmp: pytest.TempPathFactory, name: str, module: str, entry_points: dict[str, dict[str, str]]
) -> Path:
    """``name`` (its module ``name`` with ``_`` for ``-``), with ``entry_points`` by group
    (``{"pytest_openkata.agents": {"echo": "openkata_echo:EchoAgent"}}``), installed without
    the network; the folder it is installed into."""
    groups = "\n".join(
        f'[project.entry-points."{group}"]\n'
        + "".join(f'{point} = "{target}"\n' for point, target in points.items())
        for group, points in entry_points.items()
    )
    source = tmp.mktemp(name)
    (source / "pyproject.toml").write_text(PYPROJECT.format(name=name, entry_points=groups))
    (source / f"{name.replace('-', '_')}.py").write_text(module)
    site = tmp.mktemp("site")
    subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
            "--no-build-isolation", "--target", str(site), str(source),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )  # fmt: skip
    assert any(site.glob(f"{name.replace('-', '_')}-1.0.dist-info/entry_points.txt"))
    return site
