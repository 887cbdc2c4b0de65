"""What a sandboxed scenario's workspace is given before the agent starts: Tessl's
``scenario.json`` keys ``fixtures`` (folders copied into the workspace) and ``setup`` (shell
commands run there, in order).

One reader for the scenario loader and the formats library alike, so that a run, lint and
``convert`` agree on what these keys may hold; each error names the file and the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_openkata.core.files import is_inside
from pytest_openkata.core.jsonfiles import ScenarioLoadError

__all__ = [
    "FIXTURE_KEYS",
    "SETUP_KEYS",
    "DirectoryFixture",
    "read_fixtures",
    "read_setup",
]

FIXTURE_KEYS = ("type", "path", "installPath")
SETUP_KEYS = ("fixtures", "setup")  # the scenario.json keys read here


@dataclass(frozen=True)
class DirectoryFixture:
    """A folder copied into the workspace before the agent runs (Tessl's directory fixtures,
    waza's context fixture): ``source`` on disk, ``install_path`` relative to the workspace."""

    name: str
    source: Path
    install_path: str = "."


def _mapping(path: Path, value: Any, field: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ScenarioLoadError(path, "must be a mapping of keys to values", field)
    return value


def _install_path(path: Path, value: Any, field: str) -> str:
    """``installPath`` relative and ``/``-separated (``.`` for the workspace itself); one that
    leaves the workspace is an error."""
    if value is None or value == "":
        return "."
    if not isinstance(value, str):
        raise ScenarioLoadError(path, "must be a path inside the workspace", field)
    text = value.replace("\\", "/").strip()
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if text.startswith("/") or ".." in parts:
        raise ScenarioLoadError(
            path, f"{value!r} is not a path inside the workspace, where fixtures are placed", field
        )
    return "/".join(parts) or "."


def read_fixtures(
    path: Path, folder: Path, value: Any, *, root: Path | None = None
) -> tuple[DirectoryFixture, ...]:
    """The directory fixtures of ``scenario.json`` at ``path`` (``value``: its ``fixtures``),
    each folder relative to the scenario ``folder``; with ``root`` (the skill or tile folder),
    a folder that is not inside it is an error, as the skill's own files are all a run reads."""
    found = []
    for name, raw in _mapping(path, value, "fixtures").items():
        field = f"fixtures.{name}"
        spec = _mapping(path, raw, field)
        unknown = next((k for k in spec if k not in FIXTURE_KEYS), None)
        if unknown is not None:
            keys = ", ".join(sorted(FIXTURE_KEYS))
            message = f"unknown key; the keys here: {keys}"
            raise ScenarioLoadError(path, message, f"{field}.{unknown}")
        if spec.get("type", "directory") != "directory":
            raise ScenarioLoadError(path, "only directory fixtures are supported", f"{field}.type")
        relative = spec.get("path")
        source = folder / relative if isinstance(relative, str) and relative.strip() else None
        if source is None or not source.is_dir():
            raise ScenarioLoadError(path, f"folder not found: {relative!r}", f"{field}.path")
        if root is not None and not is_inside(source, root.resolve()):
            raise ScenarioLoadError(
                path,
                f"{relative!r} leads out of the skill folder: a fixture must be inside it",
                f"{field}.path",
            )
        install = _install_path(path, spec.get("installPath"), f"{field}.installPath")
        found.append(DirectoryFixture(str(name), source, install))
    return tuple(found)


def read_setup(path: Path, value: Any) -> tuple[str, ...]:
    """The ``setup`` commands of ``scenario.json`` at ``path``, in order (one string reads
    as a list of one)."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ScenarioLoadError(path, "must be a list of non-empty shell commands", "setup")
    return tuple(value)
