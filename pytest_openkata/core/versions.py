"""The version a skill's reports carry (``skill_version``): the first of its manifests that
gives one.

A skill folder (``SKILL.md`` beside ``evals/``), in this order:

1. ``CHANGELOG.md``: its first released version heading, ``## [x]`` where ``x`` is not an
   exact ``Unreleased`` (the reference's rule, spec section 10; the catalogue compares a
   report's version with this one, so it comes first wherever it gives one);
2. ``.tessl-plugin/plugin.json``'s ``version``: the skill's own, or that of the plugin whose
   ``skills`` folder holds the skill or names it (Tessl's plugin layout); then the same of
   ``.claude-plugin/plugin.json`` (Claude Code's plugin layout);
3. ``tile.json``'s ``version`` beside ``SKILL.md`` (Tessl's tile layout);
4. ``SKILL.md``'s front matter: ``metadata.version`` (the Agent Skills specification keeps
   free keys under ``metadata``; release tools stamp the version there), else a top-level
   ``version``.

A tile (``tile.json`` and no skill of the reference's kind): its ``tile.json``'s ``version``
as before, then the plugin's, then its CHANGELOG. Nothing found gives ``""``. A manifest that
cannot be read gives no version (lint and the run say what is wrong with it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from pytest_openkata.core.tile import (
    PLUGIN_FILE,
    TILE_FILE,
    plugin_skill_folders,
    read_tile_version,
)

__all__ = [
    "CLAUDE_PLUGIN_FILE",
    "PLUGIN_FILE",
    "PLUGIN_FILES",
    "VERSION_HEADING",
    "changelog_version",
    "front_matter_version",
    "plugin_version",
    "read_skill_version",
    "skill_front_matter",
]

CLAUDE_PLUGIN_FILE = ".claude-plugin/plugin.json"
"""Claude Code's plugin manifest: its ``version`` and ``skills`` read as Tessl's."""

PLUGIN_FILES = (PLUGIN_FILE, CLAUDE_PLUGIN_FILE)
"""The plugin manifests that give a skill its version, in the order they are asked."""

VERSION_HEADING = re.compile(r"## \[([^\]]*)\]")
"""A CHANGELOG line's version heading (``## [1.2.3] - date``): the reference's rule."""


def read_skill_version(skill_dir: Path) -> str:
    """The skill's version by the order of the module docstring, or ``""``."""
    skill_dir = Path(skill_dir)
    tile_version = read_tile_version(skill_dir)
    readers: tuple[Callable[[Path], str], ...]
    if tile_version is not None:  # a tile
        readers = (lambda _dir: tile_version, plugin_version, changelog_version)
    else:
        readers = (changelog_version, plugin_version, _tile_json_version, front_matter_version)
    return next((version for read in readers if (version := read(skill_dir))), "")


def changelog_version(skill_dir: Path) -> str:
    """The first released version heading of ``<skill_dir>/CHANGELOG.md``, or ``""``.

    Only an exact ``Unreleased`` is skipped (spec 13.32), and ``## []`` yields ``""``.
    """
    try:
        raw = (skill_dir / "CHANGELOG.md").read_bytes()
    except OSError:
        return ""
    for line in raw.decode("utf-8", errors="replace").split("\n"):
        match = VERSION_HEADING.match(line)
        if match and match.group(1) != "Unreleased":
            return match.group(1)
    return ""


def plugin_version(skill_dir: Path) -> str:
    """The ``version`` of the plugin the skill belongs to, Tessl's manifest first, then
    Claude Code's (:data:`PLUGIN_FILES`): ``<skill_dir>``'s own, else that of the folder two
    levels up when its ``skills`` (a folder, or a list of them; ``./skills`` when not given)
    holds the skill or names its folder."""
    for manifest in PLUGIN_FILES:
        own = _manifest(skill_dir / manifest)
        if own is not None and _version_of(own):
            return _version_of(own)
    root = skill_dir.parent.parent
    for manifest in PLUGIN_FILES:
        plugin = _manifest(root / manifest)
        if plugin is None:
            continue
        holders = {(root / folder).resolve() for folder in plugin_skill_folders(plugin)}
        if holders & {skill_dir.parent.resolve(), skill_dir.resolve()} and _version_of(plugin):
            return _version_of(plugin)
    return ""


def _tile_json_version(skill_dir: Path) -> str:
    """``tile.json``'s ``version`` beside a skill's ``SKILL.md``."""
    manifest = _manifest(skill_dir / TILE_FILE)
    return "" if manifest is None else _version_of(manifest)


def skill_front_matter(skill_dir: Path) -> Mapping[str, object]:
    """The YAML front matter of ``<skill_dir>/SKILL.md`` as a mapping, or an empty one (no
    such file, no front matter, not YAML, or not a mapping)."""
    try:
        text = (skill_dir / "SKILL.md").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].rstrip() != "---":
        return {}
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    if end is None:
        return {}
    import yaml  # here: the plugin loads this module in every pytest run

    try:
        data = yaml.safe_load("\n".join(lines[1:end]))
    except (yaml.YAMLError, RecursionError):
        return {}
    return data if isinstance(data, Mapping) else {}


def front_matter_version(skill_dir: Path) -> str:
    """``metadata.version``, else ``version``, of the YAML front matter of ``<skill_dir>/SKILL.md``,
    or ``""`` (no front matter, not YAML, no such key, or not a string or number)."""
    data = skill_front_matter(skill_dir)
    metadata = data.get("metadata")
    for holder in (metadata if isinstance(metadata, Mapping) else {}, data):
        version = holder.get("version")
        usable = isinstance(version, (str, int, float)) and not isinstance(version, bool)
        if usable and str(version).strip():
            return str(version).strip()
    return ""


def _manifest(path: Path) -> Mapping[str, object] | None:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, Mapping) else None


def _version_of(manifest: Mapping[str, object]) -> str:
    version = manifest.get("version")
    return version.strip() if isinstance(version, str) else ""
