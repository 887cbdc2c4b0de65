"""The agent prompt, byte-compatible with openkata-eval (spec section 4).

Parts joined with a blank line: SKILL.md, then ``references/``, ``scripts/`` and ``assets/``
as ``--- <rel> ---`` sections, then the scenario's ``task.md``, then ``inputs/`` as fenced
blocks. Unlike the reference, no file is read through a symlink that leads out of the skill.
"""

from __future__ import annotations

from pathlib import Path

from pytest_openkata.files import SkillReader, files_under, skill_files

PART_SEPARATOR = "\n\n"


def _read(path: Path, reader: SkillReader) -> str | None:
    data = reader.read(path)
    return None if data is None else data.decode("utf-8", errors="replace")


def _read_error(path: Path) -> str:
    return f"reading {path.name}: open {path}: no such file or directory"


def build_prompt(skill_dir: Path, scenario_dir: Path) -> str:
    """Assemble the prompt for one scenario. Raises ``FileNotFoundError`` for a missing
    SKILL.md or task.md, with the reference's message."""
    reader = SkillReader(skill_dir)
    parts: list[str] = []
    skill_text = _read(skill_dir / "SKILL.md", reader)
    if skill_text is None:
        raise FileNotFoundError(_read_error(skill_dir / "SKILL.md"))
    parts.append(skill_text)
    for _source, rel, path in skill_files(skill_dir):
        text = _read(path, reader)
        if text is not None:
            parts.append(f"--- {rel} ---\n{text}")
    task = _read(scenario_dir / "task.md", reader)
    if task is None:
        raise FileNotFoundError(_read_error(scenario_dir / "task.md"))
    parts.append(task)
    for rel, path in files_under(scenario_dir / "inputs"):
        text = _read(path, reader)
        if text is not None:
            parts.append(f"```{rel}\n{text.rstrip(chr(10))}\n```")
    return PART_SEPARATOR.join(parts)
