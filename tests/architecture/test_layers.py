"""The layers' "never" rules, read from the imports of every module of the package (those
inside functions too).

The layers, lowest first: ``contracts`` (the kernel), ``infra``, ``core``, then
``providers``, which implement the contracts, then ``plugin`` and ``commands``, which adapt the
run to pytest and to the command line. ``viewer`` (the run viewer) sits beside the reporters,
whose templates it shares, and nothing imports it. ``core``, ``plugin`` and ``commands`` reach the
providers only through the registry (``infra.registry``), by their registered names, never by
importing them. ``local`` (the built-in local model) is tooling beside them. No module imports
itself back through others (no cycle), counting the imports inside functions too.
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
        {"infra", "core", "providers", "plugin", "commands", "local", "localmodel", "viewer"},
        "the kernel is what every layer agrees on: it depends on none of them",
    ),
    (
        "infra",
        {"core", "providers", "plugin", "commands", "local", "localmodel", "viewer"},
        "settings, cache, retry and caps serve the layers above without knowing them",
    ),
    (
        "core",
        {"providers", "plugin", "commands", "local", "localmodel", "viewer"},
        "the evaluation runs without pytest and the command line, and finds its providers "
        "through the registry",
    ),
    (
        "providers",
        {"plugin", "commands", "local", "localmodel", "viewer"},
        "a provider is used by the run, never the other way round",
    ),
    (
        "plugin",
        {"providers", "commands", "local", "localmodel", "viewer"},
        "the pytest adapter is not a command, and finds providers through the registry",
    ),
    (
        "commands",
        {"providers", "plugin", "local", "localmodel", "viewer"},
        "commands run without the pytest adapter, and find providers through the registry",
    ),
    (
        "viewer",
        {"plugin", "commands", "local", "localmodel"},
        "the viewer reads logged runs as the reporters do; nothing of a run imports it",
    ),
    (
        "local",
        {"core", "providers", "plugin", "commands", "viewer"},
        "the local model is started before a run, as a user would, and hands it settings",
    ),
]


def _imported_modules(path: Path) -> list[str]:
    """The package's modules that ``path`` imports: ``import pytest_openkata.x``, ``from
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
            modules += [f"{module}.{alias.name}" for alias in node.names]
    return [m for m in modules if m.startswith("pytest_openkata.")]


def _imported_layers(path: Path) -> set[str]:
    return {module.split(".")[1] for module in _imported_modules(path)}


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


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while (member := stack.pop()) != module:
                group.append(member)
            if group:
                found.append(sorted([module, *group]))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_module_imports_itself_back_through_others() -> None:
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = {
        name: {m for m in _imported_modules(path) if m in paths and m != name}
        for name, path in paths.items()
    }
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
