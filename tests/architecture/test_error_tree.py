"""One exception tree: every error the package raises on purpose descends from
``OpenkataError``, the tree its kernel module documents is the tree the code has, and the
contracts kernel imports nothing above it."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest_openkata
from pytest_openkata import OpenkataError
from pytest_openkata.contracts import errors

PACKAGE = Path(pytest_openkata.__file__).parent

# Exceptions that are not errors a caller sees, each with why it stays out of the tree.
OUTSIDE_THE_TREE = {
    "pytest_openkata.commands.openkata_eval.HelpRequested": "-h asked for: the help is shown",
    "pytest_openkata.core.slots.SlotsClosed": "the run is over: no further call starts",
    "pytest_openkata.core.schedule._PoolClosed": "private control flow of the scenario pool",
    "pytest_openkata.providers.graders.judge._NotVerdicts": "private: the judge asks again",
    "pytest_openkata.local.model._Stopped": "a stop signal (BaseException)",
    "pytest_openkata.providers.agents.acp_client.AgentProtocolError": (
        "the ACP client process's own: a line on its standard error and exit status 1"
    ),
    "pytest_openkata.providers.agents.command_events._BadLine": (
        "private: raised again as a MalformedResponseError naming the line"
    ),
    "pytest_openkata.local.steps.StopWaiting": "a stop signal while waiting (BaseException)",
    "pytest_openkata.core.expressions.ExpressionError": (
        "raised again as the CheckError, ScenarioLoadError or FormatError naming the check"
    ),
    "pytest_openkata.core.expressions._OutOfTime": (
        "private: raised again as the ExpressionError saying the check's time ran out"
    ),
    "pytest_openkata.core.patterns.PatternTooLarge": (
        "raised again as the ScenarioLoadError naming the check's pattern, or in an expression"
        " as the ExpressionError saying what it raised"
    ),
}


def _exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in a module of the package, by qualified name (warnings
    are not errors: they are left out)."""
    found: dict[str, type[BaseException]] = {}
    for module_info in pkgutil.walk_packages([str(PACKAGE)], prefix="pytest_openkata."):
        if module_info.name.endswith("__main__"):
            continue
        module = importlib.import_module(module_info.name)
        for _, member in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(member, BaseException)
                and not issubclass(member, Warning)
                and member.__module__ == module.__name__
            ):
                found[f"{member.__module__}.{member.__qualname__}"] = member
    return found


def test_every_error_the_package_defines_descends_from_openkata_error() -> None:
    classes = _exception_classes()
    assert set(OUTSIDE_THE_TREE) <= set(classes)  # the exemptions name real classes
    outside = sorted(
        name
        for name, cls in classes.items()
        if not issubclass(cls, OpenkataError) and name not in OUTSIDE_THE_TREE
    )
    assert outside == []
    # An exempt class is exempt because it is not an error a caller sees: none is in the tree.
    assert [n for n in OUTSIDE_THE_TREE if issubclass(classes[n], OpenkataError)] == []


def test_the_documented_tree_is_the_tree_the_code_has() -> None:
    assert errors.__doc__ is not None
    drawn = errors.__doc__[errors.__doc__.index("    OpenkataError") :]
    documented = {}
    stack: list[tuple[int, str]] = []
    for line in drawn.splitlines():
        match = re.match(r"^    ((?:[│ ]   )*[├└]── |)([A-Z]\w+)\b", line)
        if match is None:
            if not line.strip():
                break
            continue
        depth = len(match.group(1)) // 4
        name = match.group(2)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        documented[name] = stack[-1][1] if stack else None
        stack.append((depth, name))
    tree = [cls for cls in _exception_classes().values() if issubclass(cls, OpenkataError)]
    in_tree = {cls.__name__: cls for cls in tree}
    assert len(in_tree) == len(tree)  # the drawing names classes by name: each name once
    assert sorted(documented) == sorted(in_tree)
    # Each class is drawn under one of its own bases (a class with two is drawn under one).
    drawn_under_a_base = {
        name: parent in [base.__name__ for base in in_tree[name].__bases__]
        for name, parent in documented.items()
        if parent is not None
    }
    assert [name for name, ok in drawn_under_a_base.items() if not ok] == []


def _above_the_kernel(module: str) -> bool:
    inside = module.startswith("pytest_openkata.contracts")
    return module.startswith("(") or (module.startswith("pytest_openkata") and not inside)


def test_the_contracts_kernel_imports_nothing_above_it() -> None:
    upward = []
    for path in sorted((PACKAGE / "contracts").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level > 1:
                names = ["(relative import above contracts)"]
            upward += [f"{path.name}: {name}" for name in names if _above_the_kernel(name)]
    assert upward == []
