"""The agent prompt, byte-compatible with openkata-eval (spec section 4).

Parts joined with a blank line: SKILL.md, then ``references/``, ``scripts/`` and ``assets/``
as ``--- <rel> ---`` sections, then the scenario's ``task.md``, then ``inputs/`` as fenced
blocks. A tile's part is every file of its context as a ``--- <path in the tile> ---``
section (:mod:`pytest_openkata.core.tile`). Unlike the reference, no file is read through a
symlink that leads out of the skill. Invalid UTF-8 is one U+FFFD per invalid byte, the text
Go's JSON encoding sends for it.
"""

from __future__ import annotations

from pathlib import Path

from pytest_openkata.contracts.errors import OpenkataError
from pytest_openkata.contracts.text import go_decode
from pytest_openkata.core.files import LEADS_OUT, SkillReader, files_under, skill_files
from pytest_openkata.core.jsonfiles import skill_relative
from pytest_openkata.core.tile import is_tile_dir, load_tile, tile_files

PART_SEPARATOR = "\n\n"


class SkillFileError(OpenkataError, FileNotFoundError):
    """The skill's own SKILL.md cannot be read: no scenario of the skill can run."""


def _read(path: Path, reader: SkillReader) -> str | None:
    data = reader.read(path)
    return None if data is None else go_decode(data)


def _read_error(path: Path, reader: SkillReader) -> str:
    if path.exists() and not reader.is_inside(path):  # there, but never read
        return f"reading {path.name}: {LEADS_OUT}"
    # The reference's text, with the file relative to the skill folder: no machine path.
    return f"reading {path.name}: open {skill_relative(path)}: no such file or directory"


class SkillTexts:
    """The skill's part of the prompts of a run (SKILL.md and the files of ``references/``,
    ``scripts/`` and ``assets/``), read once per skill.

    Every scenario of a skill starts its prompt with the same text; reading it once saves
    most of the file reads of each scenario (which, on scenario threads, also means fewer
    hand-overs of the interpreter lock), and every scenario of the run sees one version of
    the skill even if it is edited meanwhile. A skill without SKILL.md is not remembered.
    """

    def __init__(self) -> None:
        self._texts: dict[Path, list[str]] = {}
        self._readers: dict[Path, SkillReader] = {}

    def of(self, skill_dir: Path, *, tile: bool | None = None) -> list[str]:
        texts = self._texts.get(skill_dir)
        if texts is None:
            texts = skill_part(skill_dir, self.reader(skill_dir), tile=tile)
            self._texts[skill_dir] = texts
        return texts

    def reader(self, skill_dir: Path) -> SkillReader:
        """The skill's reader, made once: it resolves the skill folder, a system call per
        folder from ``/`` down, and remembers the plain folders it has checked."""
        reader = self._readers.get(skill_dir)
        if reader is None:
            reader = self._readers[skill_dir] = SkillReader(skill_dir)
        return reader


def skill_part(
    skill_dir: Path, reader: SkillReader | None = None, *, tile: bool | None = None
) -> list[str]:
    """SKILL.md, then the ``--- <rel> ---`` sections of the skill's files (a tile's context
    when ``tile``, by default when ``skill_dir`` is a tile). Raises :class:`SkillFileError`
    (a ``FileNotFoundError``) for a missing SKILL.md, with the reference's message.

    ``tile`` is the scenario's own folder's kind when ``skill_dir`` is a copy at a git ref,
    which has no ``evals/`` and so cannot tell a skill from a tile by itself."""
    reader = SkillReader(skill_dir) if reader is None else reader
    if is_tile_dir(skill_dir) if tile is None else tile:
        return tile_part(skill_dir, reader)
    skill_text = _read(skill_dir / "SKILL.md", reader)
    if skill_text is None:
        raise SkillFileError(_read_error(skill_dir / "SKILL.md", reader))
    parts = [skill_text]
    for _source, rel, path in skill_files(skill_dir):
        text = _read(path, reader)
        if text is not None:
            parts.append(f"--- {rel} ---\n{text}")
    return parts


def tile_part(tile_dir: Path, reader: SkillReader) -> list[str]:
    """A tile's context: every file of :func:`~pytest_openkata.core.tile.tile_files` as a
    ``--- <path in the tile> ---`` section, SKILL.md files included (a tile may hold several)."""
    parts = []
    for rel, path in tile_files(load_tile(tile_dir)):
        text = _read(path, reader)
        if text is not None:
            parts.append(f"--- {rel} ---\n{text}")
    return parts


def build_prompt(
    skill_dir: Path,
    scenario_dir: Path,
    skill_texts: SkillTexts | None = None,
    *,
    skill: Path | bool = True,
) -> str:
    """Assemble the prompt for one scenario (the skill's part from ``skill_texts`` when
    given). Raises ``FileNotFoundError`` for a missing SKILL.md or task.md, with the
    reference's message.

    ``skill`` says where the skill's part comes from: the skill folder (True), another copy
    of the skill (a folder: the skill at an earlier version), or nowhere (False: the prompt
    of a baseline arm without the skill holds the task and the inputs only)."""
    source = skill_dir if skill is True else skill
    texts = SkillTexts() if skill_texts is None else skill_texts
    reader = texts.reader(skill_dir)
    parts = [] if source is False else list(texts.of(source, tile=is_tile_dir(skill_dir)))
    task = _read(scenario_dir / "task.md", reader)
    if task is None:
        raise FileNotFoundError(_read_error(scenario_dir / "task.md", reader))
    parts.append(task)
    for rel, path in files_under(scenario_dir / "inputs"):
        text = _read(path, reader)
        if text is not None:
            parts.append(f"```{rel}\n{text.rstrip(chr(10))}\n```")
    return PART_SEPARATOR.join(parts)
