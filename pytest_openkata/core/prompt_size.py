"""How big a scenario's prompt is before a model is paid to read it: its size in characters,
an estimate in tokens, and its largest parts.

A tile gives every scenario its whole context, and a skill with many references gives every
scenario all of them: prompts of hundreds of thousands of characters reach or pass an agent's
context window without a word. The ``context_budget`` setting (estimated tokens; 0: no
budget) says how much a prompt may hold; a prompt over it is named in lint and before its
scenario runs, with its largest parts, so that the author sees what to cut.

Tokens are estimated at four characters each, the usual rule of thumb for English text and
code: near enough to tell a prompt of 20,000 tokens from one of 110,000, which is all a
budget needs, and the same on every machine (no tokenizer of one model's vocabulary).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_openkata.contracts.config import DEFAULT_CONTEXT_BUDGET
from pytest_openkata.contracts.text import go_decode
from pytest_openkata.core.files import SkillReader, files_under
from pytest_openkata.core.jsonfiles import ScenarioLoadError
from pytest_openkata.core.prompt import PART_SEPARATOR, SkillTexts
from pytest_openkata.core.scenario import skill_of

__all__ = [
    "CHARS_PER_TOKEN",
    "DEFAULT_CONTEXT_BUDGET",
    "PromptBudget",
    "PromptSize",
    "over_budget",
    "prompt_size",
]

CHARS_PER_TOKEN = 4
_PARTS_NAMED = 3


@dataclass(frozen=True)
class PromptSize:
    """A prompt's length in characters and its parts, largest first, each by name
    (``SKILL.md``, ``references/api.md``, ``task.md``, ``inputs/data.csv``)."""

    characters: int
    parts: tuple[tuple[str, int], ...]

    @property
    def tokens(self) -> int:
        """The estimated tokens (see the module docstring)."""
        return -(-self.characters // CHARS_PER_TOKEN)


def prompt_size(
    skill_dir: Path, scenario_dir: Path, skill_texts: SkillTexts | None = None
) -> PromptSize:
    """The size of the prompt :func:`~pytest_openkata.core.prompt.build_prompt` makes for the
    scenario, part by part. Files that cannot be read count as empty: the run reports them."""
    texts = SkillTexts() if skill_texts is None else skill_texts
    reader = texts.reader(skill_dir)
    try:
        skill_parts = texts.of(skill_dir)
    except (OSError, ScenarioLoadError):
        skill_parts = []
    named = [
        (_skill_part_name(text, first=index == 0), text) for index, text in enumerate(skill_parts)
    ]
    named.append(("task.md", _text(scenario_dir / "task.md", reader)))
    for rel, path in files_under(scenario_dir / "inputs"):
        text = _text(path, reader)
        named.append((f"inputs/{rel}", f"```{rel}\n{text.rstrip(chr(10))}\n```"))
    characters = sum(len(text) for _, text in named) + len(PART_SEPARATOR) * (len(named) - 1)
    parts = sorted(((name, len(text)) for name, text in named), key=lambda part: -part[1])
    return PromptSize(characters, tuple(parts))


def over_budget(size: PromptSize, budget: int) -> str | None:
    """What to say of a prompt over ``budget`` estimated tokens (0: no budget), else None."""
    if budget <= 0 or size.tokens <= budget:
        return None
    largest = ", ".join(
        f"{name} ({-(-chars // CHARS_PER_TOKEN):,})" for name, chars in size.parts[:_PARTS_NAMED]
    )
    return (
        f"the prompt is about {size.tokens:,} tokens ({size.characters:,} characters), over "
        f"the context budget of {budget:,} (context_budget); its largest parts: {largest}"
    )


class PromptBudget:
    """A run's check of its scenarios' prompts against ``budget`` estimated tokens, before
    each scenario runs. A skill's part is measured once; a scenario's own files (task.md,
    inputs/) by their sizes on disk, which are never fewer than their characters, so that
    they are read only for a prompt that may be over the budget."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._skill_chars: dict[Path, int] = {}

    def over(self, skill_dir: Path, scenario_dir: Path, *, with_skill: bool = True) -> str | None:
        """What to say of the scenario's prompt when it is over the budget, else None;
        ``with_skill`` False: the prompt holds no skill (the skill is installed instead)."""
        if self.budget <= 0:
            return None
        skill = self._skill_size(skill_dir) if with_skill else 0
        if skill + _size_on_disk(scenario_dir) <= self.budget * CHARS_PER_TOKEN:
            return None
        size = prompt_size(skill_dir, scenario_dir) if with_skill else _own_size(scenario_dir)
        return over_budget(size, self.budget)

    def _skill_size(self, skill_dir: Path) -> int:
        chars = self._skill_chars.get(skill_dir)
        if chars is None:
            try:
                parts = SkillTexts().of(skill_dir)
            except (OSError, ScenarioLoadError):
                parts = []
            chars = sum(len(part) + len(PART_SEPARATOR) for part in parts)
            self._skill_chars[skill_dir] = chars
        return chars


def _size_on_disk(scenario_dir: Path) -> int:
    """At least the characters task.md and inputs/ give the prompt: their bytes (a character
    is one byte or more, an invalid byte one character), each input's fence and name, and the
    separators."""
    try:
        total = (scenario_dir / "task.md").stat().st_size
    except OSError:
        total = 0
    for rel, path in files_under(scenario_dir / "inputs"):
        try:
            total += path.stat().st_size
        except OSError:
            continue
        total += len(rel) + len("```\n\n```") + len(PART_SEPARATOR)
    return total


def _own_size(scenario_dir: Path) -> PromptSize:
    """The size of a prompt without the skill's part: the task and its inputs."""
    whole = prompt_size(skill_of(scenario_dir), scenario_dir)
    own = {"task.md"} | {name for name, _ in whole.parts if name.startswith("inputs/")}
    parts = tuple(part for part in whole.parts if part[0] in own)
    characters = sum(chars for _, chars in parts) + len(PART_SEPARATOR) * (len(parts) - 1)
    return PromptSize(characters, parts)


def _skill_part_name(text: str, *, first: bool) -> str:
    """A skill part's file: its ``--- <rel> ---`` header, or SKILL.md for a skill's first."""
    header, _, _ = text.partition("\n")
    if header.startswith("--- ") and header.endswith(" ---"):
        return header[4:-4]
    return "SKILL.md" if first else "the skill"


def _text(path: Path, reader: SkillReader) -> str:
    data = reader.read(path)
    return "" if data is None else go_decode(data)
