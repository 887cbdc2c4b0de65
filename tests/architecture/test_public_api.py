"""The public API is exactly ``pytest_openkata.__all__``: nothing public in the package's
namespace is left out of it, everything in it can be taken, and the docs list the same
names."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
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


PACKAGE_ROOT = Path(pytest_openkata.__file__).parent
PACKAGES = sorted(
    ".".join(init.parent.relative_to(PACKAGE_ROOT.parent).parts)
    for init in PACKAGE_ROOT.rglob("__init__.py")
)


def test_every_package_has_an_all_that_is_exactly_its_namespace() -> None:
    # Each package in a fresh interpreter: there, only what the package itself imports is in
    # its namespace (the submodules it imports appear as modules, which do not count).
    script = (
        "import __future__, importlib, inspect, json, sys\n"
        "def counted(name, value):\n"
        "    # Names of its own, not what it took from outside the package (typing, the\n"
        "    # standard library) nor a submodule.\n"
        "    if name.startswith('_') or inspect.ismodule(value):\n"
        "        return False\n"
        "    if isinstance(value, __future__._Feature):\n"
        "        return False\n"
        "    module = getattr(value, '__module__', None)\n"
        "    return module is None or module.startswith('pytest_openkata')\n"
        "found = {}\n"
        "for name in sys.argv[1:]:\n"
        "    package = importlib.import_module(name)\n"
        "    listed = getattr(package, '__all__', None)\n"
        "    public = {n for n, v in vars(package).items() if counted(n, v)}\n"
        "    public |= {n for n in listed or () if hasattr(package, n)}  # made on first use\n"
        "    found[name] = [sorted(public), None if listed is None else sorted(listed)]\n"
        "print(json.dumps(found))\n"
    )
    inexact = {}
    for name in PACKAGES:
        done = subprocess.run(
            [sys.executable, "-c", script, name], capture_output=True, text=True, check=True
        )
        public, listed = json.loads(done.stdout)[name]
        if public != listed:
            inexact[name] = {"public": public, "__all__": listed}
    assert inexact == {}


def _defined_public_names(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {name for name in names if not name.startswith("_")}


def test_every_module_of_the_kernel_lists_exactly_what_it_defines() -> None:
    # The kernel is public for provider authors: each module's __all__ is its contract.
    inexact = {}
    for path in sorted((PACKAGE_ROOT / "contracts").glob("*.py")):
        module = importlib.import_module(_module_of(path))
        listed = set(getattr(module, "__all__", ()))
        defined = _defined_public_names(path)
        # A name may be handed on from another kernel module (the errors an agent raises).
        handed_on = {n for n in listed - defined if inspect.getmodule(getattr(module, n, None))}
        if defined != listed - handed_on:
            inexact[path.name] = {"defined": sorted(defined), "__all__": sorted(listed)}
    assert inexact == {}


def _module_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
