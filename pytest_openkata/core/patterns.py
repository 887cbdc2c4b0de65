"""How much a pattern grows when it is compiled, told from its text before it is.

The ``regex`` package, which compiles the patterns of checks and of expression checks, writes
a counted repeat out as that many copies of what it repeats: ``(?:(?:a{1000}){1000}){3}``,
24 characters, takes a gigabyte and seconds to compile, before any search starts and before
the search's time limit can stop anything. A pattern comes from a skill's files, a published
format's eval or an expression that builds it from the agent's output, so a run checks its
size first: :func:`refuse_large_pattern` refuses one whose repeats would write out more than
:data:`MAX_PATTERN_ITEMS` items.

:func:`pattern_items` counts those items from the pattern's text, reading it as the ``regex``
package does, and never counts fewer than the package writes out: every branch of an
alternative counts, a repeat counts its largest count (``{2,50}`` as 50, ``{1000,}`` as
1000), a lookaround as a group; what it reads otherwise than the package (a nested set of
version 1, an escape such as ``\\p{L}``) only counts more. In verbose mode (``(?x)``, or the
flag) a ``#`` starts a comment that may hold brackets, so there every character counts,
times every count of the pattern's repeats.
"""

from __future__ import annotations

import re

__all__ = ["MAX_PATTERN_ITEMS", "PatternTooLarge", "pattern_items", "refuse_large_pattern"]

MAX_PATTERN_ITEMS = 100_000
"""The most items a pattern's repeats may write out when compiled (about 25 MB there)."""

# A counted repeat: {m}, {m,}, {,n}, {m,n} (both empty, "{,}", is no count).
_COUNT = re.compile(r"\{(\d*)(?:,(\d*))?\}")
# An inline flag group naming verbose mode: (?x), (?ix), (?V1x), (?x:...), (?i-x:...).
_VERBOSE_FLAGS = re.compile(r"\(\?[a-zA-Z0-9-]*x[a-zA-Z0-9-]*[):]")
_MAX_DIGITS = 9  # a count of more digits counts as _HUGE_COUNT: past any bound here
_HUGE_COUNT = 1_000_000_000


class PatternTooLarge(ValueError):
    """The pattern's repeats would write out more than :data:`MAX_PATTERN_ITEMS` items."""


def refuse_large_pattern(pattern: str, flags: int = 0) -> None:
    """Raise :class:`PatternTooLarge` for a pattern that would take too much to compile."""
    if pattern_items(pattern, flags) > MAX_PATTERN_ITEMS:
        raise PatternTooLarge(
            f"the pattern's counted repeats would write out more than "
            f"{MAX_PATTERN_ITEMS:,} items when it is compiled: repeat less, or use an open "
            "repeat (*, +) where the count does not matter"
        )


def pattern_items(pattern: str, flags: int = 0, limit: int = MAX_PATTERN_ITEMS) -> int:
    """The items ``pattern`` writes out when compiled, counted at least as the ``regex``
    package writes them (see the module docstring); counting stops once past ``limit``."""
    if flags & re.VERBOSE or _VERBOSE_FLAGS.search(pattern):
        return _unstructured(pattern, limit)
    return _structured(pattern, limit)


def _unstructured(pattern: str, limit: int) -> int:
    """Every character times every count: a bound whatever the pattern's structure."""
    total = len(pattern)
    for found in _COUNT.finditer(pattern):
        total *= max(_count(found), 1)
        if total > limit:
            break
    return total


def _structured(pattern: str, limit: int) -> int:
    # One [total, last] per open group: the items so far, and those of the last item, which
    # a count that follows repeats.
    groups: list[list[int]] = [[0, 0]]
    index, end = 0, len(pattern)
    while index < end:
        char = pattern[index]
        group = groups[-1]
        if char == "(":
            if pattern.startswith("(?#", index):  # a comment: to its first ")"
                close = pattern.find(")", index)
                index = end if close < 0 else close + 1
            else:
                groups.append([0, 0])
                index += 1
            continue
        if char in "*+?":  # an open repeat, or a lazy or possessive mark: no copies
            index += 1
            continue
        if char == "|":
            group[1] = 0
            index += 1
            continue
        found = _COUNT.match(pattern, index) if char == "{" and group[1] else None
        if found is not None and (found.group(1) or found.group(2)):
            count = _count(found)
            group[0] += group[1] * (count - 1)
            group[1] *= count
            index = found.end()
        else:
            if char == ")" and len(groups) > 1:
                items = groups.pop()[0] + 1
                group = groups[-1]
                index += 1
            else:
                items = 1
                if char == "[":
                    index = _set_end(pattern, index)
                elif char == "\\":
                    index += 2
                else:
                    index += 1
            group[0] += items
            group[1] = items
        if group[0] > limit:
            return group[0]
    return sum(total for total, _ in groups)


def _count(found: re.Match[str]) -> int:
    """The largest count of a counted repeat (``{m,}`` writes out ``m``)."""
    digits: list[str] = [text for text in found.groups() if text]
    if any(len(text) > _MAX_DIGITS for text in digits):
        return _HUGE_COUNT
    return max(int(text) for text in digits)


def _set_end(pattern: str, start: int) -> int:
    """Where the set opening at ``start`` ends: after its first ``]`` that is neither escaped
    nor its first member (a nested set of version 1 then ends earlier here than there, which
    only counts more)."""
    index = start + 1
    if pattern.startswith("^", index):
        index += 1
    if pattern.startswith("]", index):
        index += 1
    while index < len(pattern):
        if pattern[index] == "\\":
            index += 2
        elif pattern[index] == "]":
            return index + 1
        else:
            index += 1
    return len(pattern)
