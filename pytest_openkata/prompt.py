"""The agent prompt, byte-compatible with openkata-eval (spec section 4).

Parts joined with a blank line: SKILL.md, then ``references/``, ``scripts/`` and ``assets/``
as ``--- <rel> ---`` sections, then the scenario's ``task.md``, then ``inputs/`` as fenced
blocks. Unlike the reference, no file is read through a symlink that leads out of the skill.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

PART_SEPARATOR = "\n\n"
SKILL_SOURCES = ("references", "scripts", "assets")
# Only the top-level acknowledgements file of references/ is left out, as in the reference.
EXCLUDED = {"references": frozenset({"ACKNOWLEDGMENTS.md"})}


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root)
    except (OSError, ValueError):
        return False
    return True


def _read(path: Path, root: Path) -> str | None:
    """The file's text, or None when it is unreadable or resolves outside ``root``
    (through a symlinked file or folder)."""
    if not _inside(path, root):
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return data.decode("utf-8", errors="replace")


def _files(folder: Path) -> Iterator[tuple[str, Path]]:
    """Regular files under ``folder`` (symlinked folders are not entered), by relative path."""
    found: list[tuple[str, Path]] = []
    for current, _dirs, names in os.walk(folder, followlinks=False):
        for name in names:
            path = Path(current, name)
            found.append((path.relative_to(folder).as_posix(), path))
    found.sort(key=lambda item: item[0])
    yield from found


def _read_error(path: Path) -> str:
    return f"reading {path.name}: open {path}: no such file or directory"


def build_prompt(skill_dir: Path, scenario_dir: Path) -> str:
    """Assemble the prompt for one scenario. Raises ``FileNotFoundError`` for a missing
    SKILL.md or task.md, with the reference's message."""
    root = skill_dir.resolve()
    parts: list[str] = []
    skill_text = _read(skill_dir / "SKILL.md", root)
    if skill_text is None:
        raise FileNotFoundError(_read_error(skill_dir / "SKILL.md"))
    parts.append(skill_text)
    for source in SKILL_SOURCES:
        excluded = EXCLUDED.get(source, frozenset())
        for rel, path in _files(skill_dir / source):
            if rel in excluded:
                continue
            text = _read(path, root)
            if text is not None:
                parts.append(f"--- {rel} ---\n{text}")
    task = _read(scenario_dir / "task.md", root)
    if task is None:
        raise FileNotFoundError(_read_error(scenario_dir / "task.md"))
    parts.append(task)
    for rel, path in _files(scenario_dir / "inputs"):
        text = _read(path, root)
        if text is not None:
            parts.append(f"```{rel}\n{text.rstrip(chr(10))}\n```")
    return PART_SEPARATOR.join(parts)
