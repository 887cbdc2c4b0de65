"""Tessl tiles: a folder with ``tile.json`` whose skills, docs and rules are one unit's context.

A tile lists its skills (``"skills": {"<name>": {"path": "…/SKILL.md"}}``), an entry file of
its docs (``"docs": "docs/index.md"``) and steering rules (``"steering": {"<name>": {"rules":
"rules.md"}}``). Its scenarios sit in ``<tile>/evals/`` under any name and are aggregated,
gated and reported as one unit named by the tile's ``name``, at its ``version``.

A folder that is a skill as the reference knows it (``SKILL.md`` beside ``evals/``) stays a
skill even with a ``tile.json`` beside it: most published skills carry one that lists only
themselves, and their prompts and reports must not change.

The context of a tile is a list of its files, each named by its path in the tile, in this
order: every listed skill in ``tile.json`` order (its SKILL.md, then the files of its
``references/``, ``scripts/`` and ``assets/``, as the reference orders a skill's files), then
the docs (the entry file, then the other files of its folder, when that folder is neither the
tile's root nor in its ``evals``), then each steering rules file. A file already listed is
not listed again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pytest_openkata.core.files import files_under, is_inside, skill_files
from pytest_openkata.core.jsonfiles import (
    ScenarioLoadError,
    go_keys,
    read_json,
    validation_error,
)

TILE_FILE = "tile.json"
PLUGIN_FILE = ".tessl-plugin/plugin.json"


class _SkillEntry(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    path: str = Field(min_length=1)


class _SteeringEntry(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    rules: str = Field(min_length=1)


class _TileModel(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    name: str = ""
    version: str = ""
    docs: str = ""
    skills: dict[str, _SkillEntry] = {}
    steering: dict[str, _SteeringEntry] = {}


@dataclass(frozen=True)
class Tile:
    """A loaded ``tile.json``: every path checked to be a file inside the tile."""

    root: Path
    name: str
    version: str
    skills: tuple[tuple[str, Path], ...]  # (name, SKILL.md) in tile.json order
    docs: Path | None
    steering: tuple[tuple[str, Path], ...]  # (name, rules file) in tile.json order


def is_tile_dir(folder: Path) -> bool:
    """Whether ``folder`` is a tile: it holds ``tile.json`` and is not a skill folder as the
    reference knows it (``SKILL.md`` beside ``evals/``); or it is a unit without a SKILL.md of
    its own whose ``evals/`` covers the skills below it (:func:`unlisted_skills`)."""
    if not (folder / TILE_FILE).is_file():
        return (
            not (folder / "SKILL.md").is_file()
            and (folder / "evals").is_dir()
            and bool(unlisted_skills(folder))
        )
    return not ((folder / "SKILL.md").is_file() and (folder / "evals").is_dir())


def plugin_manifest(folder: Path) -> Mapping[str, object] | None:
    """``<folder>/.tessl-plugin/plugin.json`` as a JSON object, or None (missing or not one)."""
    try:
        data = json.loads((folder / PLUGIN_FILE).read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, Mapping) else None


def plugin_skill_folders(plugin: Mapping[str, object]) -> list[str]:
    """The folders a plugin's ``skills`` names (one, or a list; ``./skills`` when absent)."""
    skills = plugin.get("skills", "./skills")
    if isinstance(skills, str):
        return [skills]
    if isinstance(skills, list):
        return [entry for entry in skills if isinstance(entry, str)]
    return []


def unlisted_skills(folder: Path) -> tuple[tuple[str, Path], ...]:
    """The skills of a unit with no SKILL.md and no tile.json of its own, as ``(name,
    SKILL.md)``: those its Tessl plugin's ``skills`` names (each a skill folder or a folder of
    skills), else those one level below it (a repository whose root holds its skill folder
    beside ``evals/``)."""
    plugin = plugin_manifest(folder)
    found: list[Path] = []
    if plugin is not None:
        for rel in plugin_skill_folders(plugin):
            place = Path(os.path.normpath(folder / rel))
            if not is_inside(place, folder.resolve()):
                continue
            if (place / "SKILL.md").is_file():
                found.append(place / "SKILL.md")
            else:
                found += sorted(place.glob("*/SKILL.md"))
    else:
        found = sorted(folder.glob("*/SKILL.md"))
    return tuple((path.parent.name, path) for path in found if path.parent.name != "evals")


def has_context(folder: Path) -> bool:
    """Whether ``folder`` holds a skill or a tile (what a baseline arm's copy must hold)."""
    return (folder / "SKILL.md").is_file() or is_tile_dir(folder)


def _error(tile_json: Path, message: str, field: str | None = None) -> ScenarioLoadError:
    # Named as the tile's own file, never by a machine path.
    return ScenarioLoadError(tile_json, message, field, shown=TILE_FILE)


def _listed_file(tile_json: Path, root: Path, rel: str, field: str) -> Path:
    if Path(rel).is_absolute():
        raise _error(tile_json, f"{rel!r} must be a path inside the tile", field)
    # Normalised, so that ``docs/../rules.md`` is the rules file, not a way into the tile.
    path = Path(os.path.normpath(root / rel))
    if not is_inside(path, root.resolve()):
        raise _error(tile_json, f"{rel!r} leads out of the tile", field)
    if not path.is_file():
        raise _error(tile_json, f"{rel!r}: no such file in the tile", field)
    return path


def _one_segment(name: str) -> bool:
    """Whether ``name`` can name a folder of its own: installed skills go to a folder named
    after theirs (:mod:`pytest_openkata.core.skill_delivery`), which must stay where it is put."""
    return bool(name.strip()) and name not in (".", "..") and not any(c in name for c in "/\\\0")


def load_tile(folder: Path) -> Tile:
    """Read and check ``<folder>/tile.json``; a problem is a :class:`ScenarioLoadError`
    naming the file and the key."""
    folder = Path(os.path.normpath(folder))  # the listed paths are normalised against it
    tile_json = folder / TILE_FILE
    if not tile_json.is_file() and (skills := unlisted_skills(folder)):
        plugin = plugin_manifest(folder) or {}
        name, version = plugin.get("name"), plugin.get("version")
        return Tile(
            folder,
            name if isinstance(name, str) and name.strip() else folder.name,
            version.strip() if isinstance(version, str) else "",
            skills,
            None,
            (),
        )
    try:
        raw = read_json(tile_json)
    except ScenarioLoadError as exc:
        raise _error(tile_json, exc.message, exc.field) from None
    if not isinstance(raw, Mapping):
        raise _error(tile_json, "must be a JSON object")
    data = go_keys(raw, _TileModel.model_fields)
    entries: dict[str, type[BaseModel]] = {"skills": _SkillEntry, "steering": _SteeringEntry}
    for key, entry_model in entries.items():
        if isinstance(data.get(key), Mapping):
            data[key] = {
                name: go_keys(entry, entry_model.model_fields) for name, entry in data[key].items()
            }
    try:
        model = _TileModel.model_validate(data)
    except ValidationError as exc:
        error = validation_error(tile_json, exc, data)
        raise _error(tile_json, error.message, error.field) from None
    for name in model.skills:
        if not _one_segment(name):
            message = "a skill's name must be one folder name (no /, \\, . or ..)"
            raise _error(tile_json, message, f"skills.{name}")
    skills = tuple(
        (name, _listed_file(tile_json, folder, entry.path, f"skills.{name}.path"))
        for name, entry in model.skills.items()
    )
    docs = _listed_file(tile_json, folder, model.docs, "docs") if model.docs else None
    steering = tuple(
        (name, _listed_file(tile_json, folder, entry.rules, f"steering.{name}.rules"))
        for name, entry in model.steering.items()
    )
    if not (skills or docs or steering):
        raise _error(tile_json, "lists no skills, docs or steering rules: the tile has no context")
    return Tile(folder, model.name or folder.name, model.version, skills, docs, steering)


def tile_files(tile: Tile) -> list[tuple[str, Path]]:
    """The tile's context: ``(path in the tile, file)`` in the documented order."""
    listed: list[tuple[str, Path]] = []
    seen: set[str] = set()

    def add(path: Path) -> None:
        rel = path.relative_to(tile.root).as_posix()
        if rel not in seen:
            seen.add(rel)
            listed.append((rel, path))

    for _name, skill_md in tile.skills:
        add(skill_md)
        for _source, _rel, path in skill_files(skill_md.parent):
            add(path)
    if tile.docs is not None:
        add(tile.docs)
        evals = tile.root / "evals"
        if tile.docs.parent != tile.root and not tile.docs.is_relative_to(evals):
            for _rel, path in files_under(tile.docs.parent):
                add(path)
    for _name, rules in tile.steering:
        add(rules)
    return listed


def read_tile_version(folder: Path) -> str | None:
    """The tile's ``version`` when ``folder`` is a tile with a readable ``tile.json``, else
    None (the caller falls back to the skill's CHANGELOG)."""
    if not is_tile_dir(folder):
        return None
    try:
        return load_tile(folder).version
    except ScenarioLoadError:
        return ""


def unit_name(folder: Path) -> str:
    """What reports call the unit of ``folder``: a tile's ``name``, else the folder's name."""
    if is_tile_dir(folder):
        try:
            return load_tile(folder).name
        except ScenarioLoadError:
            pass
    return folder.name


def skill_names(folder: Path) -> tuple[str, ...]:
    """The names the skill of ``folder`` goes by, as an agent loads it: the folder's name and,
    for a tile, its name and the names of its skills and of their folders."""
    names = [folder.name]
    if is_tile_dir(folder):
        try:
            tile = load_tile(folder)
        except ScenarioLoadError:
            return (folder.name,)
        names += [tile.name, tile.name.rsplit("/", 1)[-1]]
        for name, skill_md in tile.skills:
            names += [name, skill_md.parent.name]
    return tuple(dict.fromkeys(names))
