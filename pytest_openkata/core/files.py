"""Reading a skill's files safely: never through a symlink that leads out of the skill."""

from __future__ import annotations

import os
import stat
from pathlib import Path

# Only the top-level acknowledgements file of references/ is left out, as in the reference.
EXCLUDED = {"references": frozenset({"ACKNOWLEDGMENTS.md"})}
SKILL_SOURCES = ("references", "scripts", "assets")
LEADS_OUT = (
    "leads out of the skill folder through a symbolic link: it is not read; copy the file "
    "into the skill"
)
"""Why a file of the skill is not read, after its path relative to the skill."""


def is_inside(path: Path, root: Path) -> bool:
    """Whether ``path``, with every symlink resolved, lies inside ``root`` (already resolved)."""
    try:
        path.resolve().relative_to(root)
    except (OSError, ValueError):
        return False
    return True


class SkillReader:
    """Reads files of one skill folder, never through a symlink that leads out of it.

    Resolving a path costs a system call per folder from ``/`` down. A file named below the
    skill folder costs here one ``lstat`` per part below it (folders are remembered), and only
    a path with a symlink among those parts is resolved in full and checked.
    """

    def __init__(self, skill_dir: Path) -> None:
        self.root = skill_dir.resolve()
        self._prefix = os.path.join(os.fspath(skill_dir), "")
        self._plain_folders: set[str] = set()

    def is_inside(self, path: Path) -> bool:
        text = os.fspath(path)
        if not text.startswith(self._prefix):
            return is_inside(path, self.root)
        parts = text[len(self._prefix) :].split(os.sep)
        if any(part in {"", ".", ".."} for part in parts):
            return is_inside(path, self.root)
        current = self._prefix.rstrip(os.sep)
        for index, part in enumerate(parts):
            current = os.path.join(current, part)
            is_folder = index < len(parts) - 1
            if is_folder and current in self._plain_folders:
                continue
            try:
                if stat.S_ISLNK(os.lstat(current).st_mode):
                    return is_inside(path, self.root)
            except OSError:
                return False
            if is_folder:
                self._plain_folders.add(current)
        return True

    def read(self, path: Path) -> bytes | None:
        """The file's bytes, or None when it is unreadable or resolves outside the skill
        (through a symlinked file or folder)."""
        if not self.is_inside(path):
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
