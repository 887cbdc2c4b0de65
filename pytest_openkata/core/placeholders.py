"""The placeholders that ``python -m pytest_openkata init`` and ``new-scenario`` write, found
where they are still left.

Every placeholder of the scaffold is ``TODO:`` followed by a guide of its own (``TODO: the
request in a few words``). A placeholder is found by that guide's opening words, never by the
word ``TODO`` alone: a skill about TODO comments writes ``TODO:`` for reasons of its own, and
is not an untouched scaffold. The scaffold's tests hold every placeholder it writes to
:data:`SCAFFOLD_PLACEHOLDERS`.
"""

from __future__ import annotations

import functools
import re

__all__ = ["SCAFFOLD_PLACEHOLDERS", "placeholders_in"]

# The opening words of each placeholder, as the scaffold writes them; enough words that no
# skill's own text holds them, few enough that a placeholder edited at its end is still found.
SCAFFOLD_PLACEHOLDERS: tuple[str, ...] = (
    # SKILL.md
    "TODO: say in one or two sentences what this skill does",
    "TODO: one short paragraph on what the skill is for",
    "TODO: the first rule the agent must follow",
    "TODO: the next rule. Put long details and tables in",
    "TODO: one line per rule above",
    "TODO: a short request, the answer that follows the rules",
    # task.md
    "TODO: the request in a few words",
    "TODO: write the request as a user would make it",
    # criteria.json
    "TODO: one sentence for the judge on what this scenario tests",
    "TODO: what the answer visibly contains when the task is done",
    "TODO: one rule of the skill that the answer visibly follows",
    "TODO: something the answer must not contain",
    # scenario.json
    "TODO: one line on what this scenario checks",
    # inputs/README.md of a sandboxed scenario
    "replace this file with the scenario's input files",
)


@functools.cache
def _pattern() -> re.Pattern[str]:
    """Any placeholder's opening words; words may be wrapped onto the next line, or indented,
    where it stands. Compiled on first use: most runs meet no text that could hold one."""
    return re.compile(
        "|".join(r"\s+".join(map(re.escape, opening.split())) for opening in SCAFFOLD_PLACEHOLDERS)
    )


# Every placeholder starts with one of these words, as it is: a text without any holds none,
# which is most texts, and saying so needs no search of the pattern.
_FIRST_WORDS = tuple({opening.split()[0]: None for opening in SCAFFOLD_PLACEHOLDERS})


def placeholders_in(text: str) -> list[tuple[int, str]]:
    """The scaffold's placeholders ``text`` still holds, in order: the line (1-based) where
    each starts and its opening words."""
    if not any(word in text for word in _FIRST_WORDS):
        return []
    return [
        (text.count("\n", 0, match.start()) + 1, " ".join(match.group().split()))
        for match in _pattern().finditer(text)
    ]
