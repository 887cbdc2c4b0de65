"""The layout's boundary: everything outside ``pytest_openkata.plugin`` works without pytest."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest_openkata

PACKAGE = Path(pytest_openkata.__file__).parent

# Run in a fresh interpreter: a finder placed first refuses pytest, _pytest and xdist.
BLOCK_PYTEST = textwrap.dedent(
    """
    import importlib.abc, sys

    class NoPytest(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in {"pytest", "_pytest", "xdist"}:
                raise ImportError(f"{name} is not importable here")
            return None

    sys.meta_path.insert(0, NoPytest())
    """
)


def run_without_pytest(code: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCK_PYTEST + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def modules_outside_the_plugin() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(relative.parts)
        if parts[-1] == "__init__":
            parts.pop()
        if parts[1:2] != ["plugin"]:
            names.append(".".join(parts))
    return names


def test_the_blocker_does_block_pytest() -> None:
    # Without this, the test below could pass whatever the package imports.
    result = run_without_pytest("import pytest")

    assert result.returncode != 0
    assert "pytest is not importable here" in result.stderr


def test_every_module_outside_the_plugin_imports_without_pytest() -> None:
    names = modules_outside_the_plugin()
    assert "pytest_openkata.core.run" in names
    assert "pytest_openkata.providers.sandboxes.docker" in names
    assert not any(name.startswith("pytest_openkata.plugin") for name in names)

    result = run_without_pytest(
        f"""
        import importlib
        for name in {names!r}:
            importlib.import_module(name)
        print("imported", len({names!r}))
        """
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"imported {len(names)}"


def test_the_plugin_is_what_needs_pytest() -> None:
    result = run_without_pytest("import pytest_openkata.plugin.hooks")

    assert result.returncode != 0
    assert "is not importable here" in result.stderr
