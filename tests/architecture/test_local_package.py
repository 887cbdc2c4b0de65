"""The local model's package: its imports run one way (model → sandbox → steps), no module
takes another's private names, and the plugin imports none of it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest_openkata

PACKAGE = Path(pytest_openkata.__file__).parent
LOCAL = PACKAGE / "local"
# Each module of the package, and the modules of the package it may import.
ALLOWED = {
    "model": {"sandbox", "steps"},
    "sandbox": {"steps"},
    "steps": set(),
}


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def _imports_from(path: Path, package: str) -> list[tuple[str, list[str]]]:
    """(module, names) of every import of ``package`` or its modules in ``path``: ``from
    <package>.<module> import names``, ``import <package>.<module>`` (no names), and ``from
    pytest_openkata import local`` (the package itself)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names if _inside(alias.name, package)]
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            names = [alias.name for alias in node.names]
            if _inside(node.module, package):
                found.append((node.module, names))
            elif f"{node.module}.{package.rpartition('.')[2]}" == package and any(
                name == package.rpartition(".")[2] for name in names
            ):
                found.append((package, []))
    return found


def test_the_local_package_has_exactly_the_modules_the_table_names() -> None:
    assert {p.stem for p in LOCAL.glob("*.py")} - {"__init__"} == set(ALLOWED)


def test_imports_inside_the_local_package_run_one_way_and_take_no_private_name() -> None:
    wrong = []
    for name, allowed in ALLOWED.items():
        for module, names in _imports_from(LOCAL / f"{name}.py", "pytest_openkata.local"):
            target = module.removeprefix("pytest_openkata.local.")
            if target not in allowed:
                wrong.append(f"{name} imports {module}")
            wrong += [f"{name} imports {module}.{n}" for n in names if n.startswith("_")]
    assert wrong == []


def test_no_layer_of_the_run_imports_the_local_package() -> None:
    importers = [
        str(path.relative_to(PACKAGE))
        for layer in ("plugin", "commands", "core", "infra", "providers", "contracts")
        for path in (PACKAGE / layer).rglob("*.py")
        if _imports_from(path, "pytest_openkata.local")
    ]
    assert importers == []
