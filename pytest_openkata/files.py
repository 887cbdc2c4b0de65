"""Reading a skill's files safely: never through a symlink that leads out of the skill."""

from __future__ import annotations

import os
from pathlib import Path

# Only the top-level acknowledgements file of references/ is left out, as in the reference.
EXCLUDED = {"references": frozenset({"ACKNOWLEDGMENTS.md"})}
SKILL_SOURCES = ("references", "scripts", "assets")


def is_inside(path: Path, root: Path) -> bool:
    """Whether ``path``, with every symlink resolved, lies inside ``root`` (already resolved)."""
    try:
        path.resolve().relative_to(root)
    except (OSError, ValueError):
        return False
    return True


def read_inside(path: Path, root: Path) -> bytes | None:
    """The file's bytes, or None when it is unreadable or resolves outside ``root``
    (through a symlinked file or folder)."""
    if not is_inside(path, root):
        return None
    try:
        return path.read_bytes()
    except OSError:
        return None


def files_under(folder: Path) -> list[tuple[str, Path]]:
    """Files under ``folder`` by ``/``-separated relative path, sorted; symlinked folders are
    not entered."""
    found: list[tuple[str, Path]] = []
    for current, _dirs, names in os.walk(folder, followlinks=False):
        for name in names:
            path = Path(current, name)
            found.append((path.relative_to(folder).as_posix(), path))
    found.sort(key=lambda item: item[0])
    return found


def skill_files(skill_dir: Path) -> list[tuple[str, str, Path]]:
    """``(source, rel, path)`` of the files of references/, scripts/ and assets/, in prompt
    order, without the excluded ones."""
    return [
        (source, rel, path)
        for source in SKILL_SOURCES
        for rel, path in files_under(skill_dir / source)
        if rel not in EXCLUDED.get(source, frozenset())
    ]
