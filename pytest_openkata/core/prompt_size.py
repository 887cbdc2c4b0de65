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

__all__ = [
    "CHARS_PER_TOKEN",
    "DEFAULT_CONTEXT_BUDGET",
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


def _skill_part_name(text: str, *, first: bool) -> str:
    """A skill part's file: its ``--- <rel> ---`` header, or SKILL.md for a skill's first."""
    header, _, _ = text.partition("\n")
    if header.startswith("--- ") and header.endswith(" ---"):
        return header[4:-4]
    return "SKILL.md" if first else "the skill"


def _text(path: Path, reader: SkillReader) -> str:
    data = reader.read(path)
    return "" if data is None else go_decode(data)
