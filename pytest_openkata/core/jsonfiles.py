"""The scenario's JSON files read as Go's ``encoding/json`` reads them, and the one error of
loading: :class:`ScenarioLoadError`, whose message names the file and the field.

Shared by the scenario files (:mod:`.scenario`) and ``tile.json`` (:mod:`.tile`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pytest_openkata.contracts.errors import OpenkataError
from pytest_openkata.infra.text import holds_surrogate_escape, valid_unicode


def skill_relative(path: Path) -> str:
    """``path`` as error texts name it: relative to its skill folder (the folder above the
    nearest ``evals``), so that reports hold no machine paths; else as it is."""
    for level, parent in enumerate(path.parents):
        if parent.name == "evals" and level >= 1:
            return path.relative_to(parent.parent).as_posix()
    return str(path)


class ScenarioLoadError(OpenkataError):
    """A scenario's files are missing or invalid; the message names the file (relative to
    its skill folder) and the field."""

    def __init__(
        self, path: Path, message: str, field: str | None = None, *, shown: str | None = None
    ) -> None:
        self.path = path
        self.field = field
        self.message = message
        shown = skill_relative(path) if shown is None else shown
        where = f"{shown}: {field}" if field else shown
        super().__init__(f"{where}: {message}")


class _Members(dict[str, Any]):
    """A JSON object as ``json.loads`` makes it, which also keeps its members in document
    order, repeated keys included: Go's decoder assigns them in that order."""

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        super().__init__(pairs)
        self.pairs = pairs


def go_keys(data: Any, known: Iterable[str]) -> Any:
    """Object keys as Go's ``encoding/json`` decodes them into a struct: a key matches a field
    without regard to case, the last key for a field wins, and a null leaves it unchanged."""
    if not isinstance(data, Mapping):
        return data
    lowered = {k.lower(): k for k in known}
    result: dict[str, Any] = {}
    members = data.pairs if isinstance(data, _Members) else data.items()
    for key, value in members:
        if value is None:
            continue
        name = str(key)
        result[lowered.get(name.lower(), name)] = value
    return result


def read_file(path: Path) -> bytes:
    """The bytes of a scenario's file; :class:`ScenarioLoadError` when it is missing or cannot
    be read."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ScenarioLoadError(path, "file not found") from None
    except OSError as exc:
        raise ScenarioLoadError(path, f"cannot be read: {exc.strerror or exc}") from None


def read_json(path: Path, content: bytes | None = None) -> Any:
    """The JSON file at ``path``, as objects that keep their members in order (see
    :func:`go_keys`); ``content`` is its bytes when the caller has read them already. The
    bytes are read as ``Path.read_text`` reads a file: UTF-8, universal newlines."""
    if content is None:
        content = read_file(path)
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioLoadError(path, f"cannot be read: {exc}") from None
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    try:
        data = json.loads(text, object_pairs_hook=_Members)
    except json.JSONDecodeError as exc:
        raise ScenarioLoadError(
            path, f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except (ValueError, RecursionError) as exc:  # a number of thousands of digits, deep nesting
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise ScenarioLoadError(path, f"cannot be read as JSON: {reason}") from None
    if not holds_surrogate_escape(text):
        return data
    try:
        return _valid_texts(data)
    except RecursionError:
        raise ScenarioLoadError(path, "cannot be read as JSON: nested too deeply") from None


def _valid_texts(value: Any) -> Any:
    """``value`` with every lone surrogate of its texts made U+FFFD, as Go's decoder reads a
    ``\\ud800`` escape: no prompt, request or report could carry it."""
    if isinstance(value, str):
        return valid_unicode(value)
    if isinstance(value, list):
        return [_valid_texts(item) for item in value]
    if isinstance(value, _Members):
        return _Members([(valid_unicode(key), _valid_texts(item)) for key, item in value.pairs])
    return value


def _location(loc: tuple[int | str, ...], data: Any) -> str:
    parts: list[str] = []
    node = data
    for step in loc:
        if isinstance(step, int):
            parts.append(f"[{step}]")
            node = node[step] if isinstance(node, list) and step < len(node) else None
            if isinstance(node, Mapping) and isinstance(node.get("name"), str) and node["name"]:
                parts.append(f" ({node['name']!r})")
        else:
            parts.append(f".{step}" if parts else step)
            node = node.get(step) if isinstance(node, Mapping) else None
    return "".join(parts)


VALIDATION_MESSAGES = {
    "greater_than": "must be a positive integer",
    "int_type": "must be a positive integer",
    "string_type": "must be a string",
    "bool_type": "must be true or false",
    "list_type": "must be a list",
    "model_type": "must be an object",
    "dict_type": "must be an object",
    "missing": "is required",
}
# What a field's value must be, where the kind of error alone would word it wrongly.
FIELD_MESSAGES = {
    "cpus": "must be a positive number of CPUs, e.g. 0.5 or 2",
    "memory_mb": "must be a whole number of MiB, at least 6 (Docker's least)",
    "build_timeout_sec": "must be a positive number of seconds, e.g. 600",
}


def validation_error(path: Path, exc: ValidationError, data: Any) -> ScenarioLoadError:
    first = exc.errors()[0]
    field = _location(tuple(first["loc"]), data) or "(top level)"
    kind = first["type"]
    if kind == "too_short" and field == "checklist":
        message = "must hold at least one criterion"
    elif kind in {"too_short", "string_too_short"}:
        message = "must not be empty"
    elif field in FIELD_MESSAGES:
        message = FIELD_MESSAGES[field]
    else:
        message = VALIDATION_MESSAGES.get(kind, first["msg"])
    if kind != "missing":
        message += f" (got {json.dumps(first.get('input'))})"
    return ScenarioLoadError(path, message, field)
