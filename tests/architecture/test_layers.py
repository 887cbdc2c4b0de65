"""The layers' "never" rules, read from the imports of every module of the package (those
inside functions too).

The layers, lowest first: ``contracts`` (the kernel), ``infra``, then ``core`` and
``providers``, then ``plugin`` and ``commands``, which adapt the run to pytest and to the
command line. ``local`` (the built-in local model) is tooling beside them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pytest_openkata

PACKAGE = Path(pytest_openkata.__file__).parent

# (layer, the layers it never imports, why)
NEVER = [
    (
        "contracts",
        {"infra", "core", "providers", "plugin", "commands", "local", "localmodel"},
        "the kernel is what every layer agrees on: it depends on none of them",
    ),
    (
        "infra",
        {"core", "providers", "plugin", "commands", "local", "localmodel"},
        "settings, cache, retry and caps serve the layers above without knowing them",
    ),
    (
        "core",
        {"plugin", "commands", "local", "localmodel"},
        "the evaluation runs without pytest and without the command line",
    ),
    (
        "providers",
        {"plugin", "commands", "local", "localmodel"},
        "a provider is used by the run, never the other way round",
    ),
    ("plugin", {"commands", "local", "localmodel"}, "the pytest adapter is not a command"),
    ("commands", {"plugin", "local", "localmodel"}, "commands run without the pytest adapter"),
    (
        "local",
        {"core", "providers", "plugin", "commands"},
        "the local model is started before a run, as a user would, and hands it settings",
    ),
]


def _imported_layers(path: Path) -> set[str]:
    """The package's layers that ``path`` imports: ``import pytest_openkata.x``, ``from
    pytest_openkata.x import …``, ``from pytest_openkata import x`` and relative imports."""
    here = path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1]  # its package
    modules: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(here[: len(here) - node.level + 1]) if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            modules.append(module)
            if module == "pytest_openkata":
                modules += [f"pytest_openkata.{alias.name}" for alias in node.names]
    return {m.split(".")[1] for m in modules if m.startswith("pytest_openkata.")}


@pytest.mark.parametrize(("layer", "never", "why"), NEVER, ids=[rule[0] for rule in NEVER])
def test_a_layer_never_imports_what_its_rule_forbids(layer: str, never: set[str], why: str) -> None:
    modules = sorted((PACKAGE / layer).rglob("*.py"))
    assert modules, f"no module in {layer}/"
    broken = [
        f"{path.relative_to(PACKAGE)} imports {sorted(_imported_layers(path) & never)} ({why})"
        for path in modules
        if _imported_layers(path) & never
    ]
    assert broken == []


def test_every_layer_of_the_package_has_a_rule() -> None:
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert folders == {layer for layer, _, _ in NEVER}


def test_no_module_takes_another_modules_private_names() -> None:
    taken = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "pytest_openkata."
            ):
                taken += [
                    f"{path.relative_to(PACKAGE)}: {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and not alias.name.startswith("__")
                ]
    assert taken == []
