"""What every format's reader shares: parsing its YAML, JSON or TOML into plain values, and
refusing keys it does not know or cannot honour, each error naming the file, the key and the
format."""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_openkata.core.formats.model import FormatError, InputFile
from pytest_openkata.infra.text import valid_decoded

__all__ = [
    "check_keys",
    "escaped",
    "files_of",
    "inside",
    "mapping_at",
    "read_json_file",
    "read_toml",
    "read_yaml",
    "relative_inside",
    "unescaped",
    "unit_of",
]

# The characters a pattern gives a meaning to; every other one matches itself.
SPECIAL = frozenset(".^$*+?{}[]|()\\")


def _read_text(fmt: str, path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FormatError(fmt, path, "file not found") from None
    except UnicodeDecodeError:
        raise FormatError(fmt, path, "cannot be read: not UTF-8 text") from None
    except OSError as exc:
        raise FormatError(fmt, path, f"cannot be read: {exc.strerror or 'error'}") from None


def read_yaml(fmt: str, path: Path) -> Any:
    import yaml  # here: a run that reads no YAML never imports it

    text = _read_text(fmt, path)
    try:
        return valid_decoded(text, yaml.safe_load(text))  # as JSON's
    except yaml.YAMLError as exc:
        raise FormatError(fmt, path, f"not valid YAML: {exc}") from None
    except RecursionError:
        raise FormatError(fmt, path, "cannot be read: nested too deeply") from None


def read_json_file(fmt: str, path: Path) -> Any:
    """The JSON file's value, its texts valid Unicode (a ``\\ud800`` escape reads as U+FFFD,
    as in a scenario's own files)."""
    text = _read_text(fmt, path)
    try:
        return valid_decoded(text, json.loads(text))
    except json.JSONDecodeError as exc:
        raise FormatError(fmt, path, f"not valid JSON: {exc.msg} at line {exc.lineno}") from None
    except RecursionError:
        raise FormatError(fmt, path, "cannot be read: nested too deeply") from None


def read_toml(fmt: str, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(_read_text(fmt, path))
    except tomllib.TOMLDecodeError as exc:
        raise FormatError(fmt, path, f"not valid TOML: {exc}") from None


def mapping_at(fmt: str, path: Path, value: Any, where: str) -> Mapping[str, Any]:
    """``value`` when it is a mapping (``None`` reads as an empty one), else an error."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise FormatError(fmt, path, "must be a mapping of keys to values", where or "(top level)")
    return value


def check_keys(
    fmt: str,
    path: Path,
    data: Mapping[str, Any],
    where: str,
    *,
    known: Iterable[str],
    unsupported: Mapping[str, str] | None = None,
    ignored: list[str] | None = None,
) -> None:
    """Refuse a key the format does not have (``known`` lists those it has) and a key it has
    that this plugin cannot honour (``unsupported``: key -> why), naming the first such key.

    With ``ignored`` (for a format whose own tools pass over keys they do not know, as
    skill-creator's and Skillgrade's do), a key the format does not have is added to it as
    its field (``evals[0].rubric``) instead of refused, so that the scenario runs as the
    format's tools would run it and lint can say what was left out."""
    unsupported = unsupported or {}
    known = set(known)
    for key in data:
        field = f"{where}.{key}" if where else str(key)
        if key in unsupported:
            raise FormatError(fmt, path, f"not supported by this plugin: {unsupported[key]}", field)
        if key not in known:
            if ignored is not None:
                ignored.append(field)
                continue
            choices = ", ".join(sorted(known | set(unsupported)))
            raise FormatError(fmt, path, f"unknown key; the format's keys here: {choices}", field)


def relative_inside(fmt: str, path: Path, value: str, field: str) -> str:
    """A workspace path as a format gives it, relative and ``/``-separated; a path that leaves
    the workspace (absolute, or climbing out with ``..``) is an error."""
    text = value.replace("\\", "/").strip()
    while text.startswith("./"):
        text = text[2:]
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if not text or text.startswith("/") or ".." in parts:
        raise FormatError(
            fmt,
            path,
            f"{value!r} is not a path inside the workspace, where inputs are placed",
            field,
        )
    return "/".join(parts)


UNIT_MARKERS = ("SKILL.md", "tile.json")
# How far above a format's file its skill folder may be: a Harbor task in group folders
# (``evals/<groups>/tasks/<task>/task.toml``), as deep as collection looks.
UNIT_LEVELS = 8


def unit_of(path: Path) -> Path:
    """The skill (or tile) folder of a format's file: the nearest folder at or above it
    holding a SKILL.md or a tile.json; a file below an ``evals`` folder belongs to the folder
    holding that ``evals``. Else the file's own folder."""
    folder = path.parent
    ancestors = [folder, *folder.parents][: UNIT_LEVELS + 1]
    for candidate in ancestors:
        if any((candidate / marker).is_file() for marker in UNIT_MARKERS):
            return candidate
    for candidate in ancestors:
        if candidate.name == "evals":
            return candidate.parent
    return folder


def inside(fmt: str, path: Path, source: Path, field: str, *, unit: Path | None = None) -> Path:
    """``source``, a file or folder a format's file names, when it is inside that file's unit
    (``unit``, by default :func:`unit_of` the file), symbolic links followed; one that leads
    out of it (an absolute path, ``..``, a link) is an error: a skill's evals never read the
    machine's other files."""
    root = (unit_of(path) if unit is None else unit).resolve()
    if not source.resolve().is_relative_to(root):
        shown = Path(os.path.relpath(source, path.parent)).as_posix()
        raise FormatError(
            fmt,
            path,
            f"{shown} leads out of the skill's folder: a format's files are read from inside it",
            field,
        )
    return source


def files_of(
    fmt: str, path: Path, source: Path, install: str, field: str, *, unit: Path | None = None
) -> list[InputFile]:
    """The input files of ``source`` (a file, or every file under a folder) placed at
    ``install`` in the workspace; a missing source is an error, and so is one (or a file
    under it) that leads out of the skill's folder (:func:`inside`)."""
    inside(fmt, path, source, field, unit=unit)
    if source.is_file():
        return [InputFile(install, source.read_bytes(), _executable(source))]
    if source.is_dir():
        found = []
        for file in sorted(p for p in source.rglob("*") if p.is_file()):
            inside(fmt, path, file, field, unit=unit)
            rel = file.relative_to(source).as_posix()
            where = rel if install in ("", ".") else f"{install}/{rel}"
            found.append(InputFile(where, file.read_bytes(), _executable(file)))
        return found
    looked = Path(os.path.relpath(source, path.parent)).as_posix()
    raise FormatError(fmt, path, f"file not found: {looked} (from this file's folder)", field)


def _executable(path: Path) -> bool:
    return bool(path.stat().st_mode & 0o111)


def escaped(text: str) -> str:
    """A pattern matching ``text`` itself, with a backslash before each special character
    only (unlike ``re.escape``, which also escapes spaces), so that the text can be read back
    from it unchanged (:func:`unescaped`)."""
    return "".join("\\" + c if c in SPECIAL else c for c in text)


def unescaped(pattern: str) -> str | None:
    """The text a pattern of plain text matches (the inverse of :func:`escaped`); None for a
    pattern that is more than plain text."""
    text, index = [], 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            following = pattern[index + 1 : index + 2]
            if not following or following.isalnum():
                return None
            text.append(following)
            index += 2
            continue
        if char in SPECIAL:
            return None
        text.append(char)
        index += 1
    return "".join(text) or None
