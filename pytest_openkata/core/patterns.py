"""How much a pattern grows when it is compiled, told from its text before it is.

The ``regex`` package, which compiles the patterns of checks and of expression checks, writes
a counted repeat out as that many copies of what it repeats: ``(?:(?:a{1000}){1000}){3}``,
24 characters, takes a gigabyte and seconds to compile, before any search starts and before
the search's time limit can stop anything. A pattern comes from a skill's files, a published
format's eval or an expression that builds it from the agent's output, so a run checks its
size first: :func:`refuse_large_pattern` refuses one whose repeats would write out more than
:data:`MAX_PATTERN_ITEMS` items, and one of more than :data:`MAX_PATTERN_GROUPS` parentheses.

:func:`pattern_items` counts those items from the pattern's text. It reads the package's
syntax as far as a count can depend on it, and leans to more where its reading may differ:

- a repeat ``{m}``, ``{m,n}`` or ``{m,}`` counts ``m + 1`` copies (the package writes out
  the ``m`` it must match and the rest as one loop, and one copy more where repeats nest),
  ``{0}`` and ``{1}`` one; ``+`` two, as ``{1,}``; ``*`` and ``?`` write out no copies;
- every branch of an alternative counts, a group's marks (``?:``, a name) and a call
  (``(?R)``, ``(?1)``) count as characters, a group of flags alone (``(?i)``) counts nothing
  and a count after it repeats what came before it, as in the package; braces that are no
  count (a fuzzy constraint such as ``{e<=1}``) count as characters that a following count
  repeats together with what came before them;
- a set counts one item per two characters of its text, ``\\R`` and ``\\X`` eight, and where
  full case folding may be on (the ``f`` flag, or version 1) a set counts 200 items more and
  a character five;
- a pattern whose structure the scan cannot follow exactly is bounded without it: its length
  times every count's copies and two for every ``+`` after a group or braces. So are a set
  holding a ``[`` (a POSIX class, a nested set of version 1) or a set operation of version
  1, whose ``]`` the scan cannot place, and braces that are no count but hold brackets, a
  bar or a backslash. In verbose mode, where a count may be split by spaces and comments,
  the bound takes ten to the number of the pattern's digits for the counts, which refuses
  verbose patterns with more than a few digits.

Five reviews looked for patterns that write out more than this counts; what they found is
counted, each as a test, and this is a mitigation, not a proof: a construct the scan does not
know still compiles.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "MAX_PATTERN_GROUPS",
    "MAX_PATTERN_ITEMS",
    "PatternTooLarge",
    "pattern_items",
    "refuse_large_pattern",
]

MAX_PATTERN_ITEMS = 100_000
"""The most items a pattern's repeats may write out when compiled."""

MAX_PATTERN_GROUPS = 5_000
"""The most parentheses (groups, and any ``(`` of its text) a pattern may hold: the package
compiles empty groups (``()``, ``(|)``) in time that grows with the square of their number."""

# The regex package's flags that change how a pattern is read or how much it writes out.
_VERBOSE = 64
_VERSION1 = 256
_FULLCASE = 16384
# A count: {m}, {m,}, {,n}, {m,n}; ASCII digits only, as the package reads them.
_COUNT = re.compile(r"\{([0-9]*)(,?)([0-9]*)\}")
# A group of inline flags alone, which adds nothing: (?i), (?-s), (?V1); not a call such as
# (?R), (?1) or (?-1), which a count repeats.
_FLAGS_ONLY = re.compile(r"\(\?(?![0-9R]|-[0-9])[a-zA-Z0-9-]*\)")
# The letters of an inline flag group, scoped or not: (?x), (?fi:...), (?V1x).
# Each match is read on its own and they may overlap, so that no text the package does not
# read as flags (an escaped "\(?", one in a set or a comment) can hide a real group's letters.
_INLINE_FLAGS = re.compile(r"(?=\(\?(?!#)((?:[a-zA-Z0-9\s-]|#[^\n]*(?:\n|\Z))*)[):])")
_SPACE_AND_COMMENTS = re.compile(r"#[^\n]*\n?|\s")
_BRACE_WITH_STRUCTURE = re.compile(r"\{[^}]*[()\[\]|\\{]")
_SET_OPS = ("--", "&&", "||", "~~")
_MAX_DIGITS = 9  # a count of more digits counts as _HUGE_COUNT: past any bound here
_HUGE_COUNT = 1_000_000_000
_SET_CHARS_PER_ITEM = 2
# Escapes that compile to several items each: a line break (\R), a grapheme cluster (\X).
_WIDE_ESCAPE = re.compile(r"\\[RX]")
_WIDE_ESCAPE_ITEMS = 8
# A + that repeats a group or what braces end, spaces and comments of verbose mode between.
_GROUP_PLUS = re.compile(r"[)}](?:\s|#[^\n]*(?:\n|\Z))*\+")


class PatternTooLarge(ValueError):
    """The pattern's repeats would write out more than :data:`MAX_PATTERN_ITEMS` items."""


def refuse_large_pattern(pattern: str, flags: int = 0) -> None:
    """Raise :class:`PatternTooLarge` for a pattern that would take too much to compile."""
    if pattern.count("(") > MAX_PATTERN_GROUPS:
        raise PatternTooLarge(
            f"the pattern holds more than {MAX_PATTERN_GROUPS:,} parentheses, which take the "
            "package time that grows with their square to compile: write fewer groups"
        )
    if pattern_items(pattern, flags) <= MAX_PATTERN_ITEMS:
        return
    message = (
        f"the pattern's counted repeats would write out more than {MAX_PATTERN_ITEMS:,} items "
        "when it is compiled: repeat less, or use an open repeat (*, +) where the count does "
        "not matter"
    )
    if _verbose(pattern, flags):
        message += " (in verbose mode a count may be split, so every digit counts: write it "
        message += "without verbose mode)"
    raise PatternTooLarge(message)


def pattern_items(pattern: str, flags: int = 0, limit: int = MAX_PATTERN_ITEMS) -> int:
    """The items ``pattern`` writes out when compiled with ``flags``, counted at least as the
    ``regex`` package writes them (see the module docstring); counting stops past ``limit``."""
    weights = _Weights.of(pattern, flags)
    if _verbose(pattern, flags):
        digits = min(sum(char in "0123456789" for char in pattern), _MAX_DIGITS)
        scale: int = 10**digits  # the counts, however split, are at most that
        return _unstructured_base(pattern, weights) * scale
    if _has_nested_set(pattern) or _BRACE_WITH_STRUCTURE.search(pattern):
        return _unstructured(pattern, weights, limit)
    return _structured(pattern, weights, limit)


@dataclass(frozen=True)
class _Weights:
    """Items per character and per set: more where full case folding may be on, since a
    character or a set then stands for all its foldings."""

    character: int = 1
    set_base: int = 1

    @classmethod
    def of(cls, pattern: str, flags: int) -> _Weights:
        groups = (_SPACE_AND_COMMENTS.sub("", found) for found in _INLINE_FLAGS.findall(pattern))
        folding = any("f" in letters or "V1" in letters for letters in groups)
        if flags & (_FULLCASE | _VERSION1) or folding:
            return cls(character=5, set_base=200)
        return cls()

    @property
    def most(self) -> int:
        return max(self.character, self.set_base)

    def of_set(self, text: str) -> int:
        return self.set_base + len(text) // _SET_CHARS_PER_ITEM


def _verbose(pattern: str, flags: int) -> bool:
    return bool(flags & _VERBOSE) or any("x" in found for found in _INLINE_FLAGS.findall(pattern))


def _unstructured_base(pattern: str, weights: _Weights) -> int:
    """Every character at its most, ``\\R`` and ``\\X`` at theirs, times two for every ``+``
    after a group or braces (spaces and comments of verbose mode between), which writes out
    what it repeats twice, as ``{1,}``; a ``+`` after a single item only adds one."""
    wide = len(_WIDE_ESCAPE.findall(pattern)) * (_WIDE_ESCAPE_ITEMS - 2)
    doubled = len(_GROUP_PLUS.findall(pattern))
    return (len(pattern) + wide) * weights.most << doubled


def _has_nested_set(pattern: str) -> bool:
    """Whether a set holds a ``[`` (a POSIX class, or a nested set of version 1): the scan
    cannot then tell where the set ends."""
    index = 0
    while index < len(pattern):
        if pattern[index] == "\\":
            index += 2
        elif pattern[index] == "[":
            end = _set_end(pattern, index)
            text = pattern[index + 1 : end - 1]
            if "[" in text or any(op in text for op in _SET_OPS):
                return True
            index = end
        else:
            index += 1
    return False


def _unstructured(pattern: str, weights: _Weights, limit: int) -> int:
    """Every character, times every count's copies: a bound whatever the structure."""
    total = _unstructured_base(pattern, weights)
    for found in _COUNT.finditer(pattern):
        total *= max(_copies(found), 1)
        if total > limit:
            break
    return total


@dataclass
class _Group:
    """An open group of the scan: its items so far, those a count that follows repeats, and
    whether they were just repeated (a ``+`` after a repeat only makes it possessive)."""

    total: int = 0
    last: int = 0
    repeated: bool = False

    def add(self, items: int) -> None:
        self.total += items
        self.last = items
        self.repeated = False

    def repeat(self, copies: int) -> None:
        self.total += self.last * (copies - 1)
        self.last *= copies
        self.repeated = True


def _structured(pattern: str, weights: _Weights, limit: int) -> int:
    groups = [_Group()]
    index = 0
    while index < len(pattern):
        index = _step(pattern, index, groups, weights)
        if groups[-1].total > limit:
            return groups[-1].total
    return sum(group.total for group in groups)


def _step(pattern: str, index: int, groups: list[_Group], weights: _Weights) -> int:
    """Count the item at ``index`` into ``groups``; where the next one starts."""
    char = pattern[index]
    group = groups[-1]
    if char == "(":
        return _open(pattern, index, groups)
    if char == "+" and not group.repeated:  # written out as {1,}: two copies
        group.repeat(2)
        return index + 1
    if char in "*+?":  # an open repeat of no more copies, or a lazy or possessive mark
        group.repeated = True
        return index + 1
    if char == "|":
        group.last = 0
        return index + 1
    if char == "{" and group.last:
        return _repeat(pattern, index, group, weights)
    if char == ")" and len(groups) > 1:
        closed = groups.pop()
        groups[-1].add(closed.total + 1)
        return index + 1
    if char == "[":
        stop = _set_end(pattern, index)
        group.add(weights.of_set(pattern[index:stop]))
        return stop
    if char == "\\":
        wide = _WIDE_ESCAPE.match(pattern, index) is not None
        group.add(weights.character * (_WIDE_ESCAPE_ITEMS if wide else 1))
        return index + 2
    group.add(weights.character)
    return index + 1


def _open(pattern: str, index: int, groups: list[_Group]) -> int:
    if pattern.startswith("(?#", index):
        return _comment_end(pattern, index)
    flags_only = _FLAGS_ONLY.match(pattern, index)
    if flags_only is not None:  # adds nothing: a count after it repeats what came before
        return flags_only.end()
    groups.append(_Group())
    return index + 1


def _repeat(pattern: str, index: int, group: _Group, weights: _Weights) -> int:
    found = _COUNT.match(pattern, index)
    if found is not None and (found.group(1) or found.group(3)):
        group.repeat(_copies(found))
        return found.end()
    # A fuzzy constraint, or braces as characters: a count after them repeats them together
    # with what came before them.
    close = pattern.find("}", index)
    stop = len(pattern) if close < 0 else close + 1
    items = (stop - index) * weights.character
    group.total += items
    group.last += items
    return stop


def _copies(found: re.Match[str]) -> int:
    """The copies a count writes out, at most: ``m + 1`` for ``{m}`` (the package writes one
    more where repeats nest), ``{m,n}`` and ``{m,}`` (the ``m`` it must match, then the rest
    as one loop); one for ``{0}`` and ``{1}``."""
    low, comma, _most = found.groups()  # the most a count matches writes out no copy
    if len(low) > _MAX_DIGITS:
        return _HUGE_COUNT
    least = int(low or 0)
    return least + 1 if comma or not low or least > 1 else 1


def _comment_end(pattern: str, start: int) -> int:
    """Where the comment group opening at ``start`` ends: after its first ``)`` that is not
    escaped (the package reads escapes in comments)."""
    return _after_unescaped(pattern, start + 3, ")")


def _set_end(pattern: str, start: int) -> int:
    """Where the set opening at ``start`` ends: after its first ``]`` that is neither escaped
    nor its first member (a set holding a ``[`` or a set operation of version 1, after which
    a ``]`` may be a member, is left to :func:`_unstructured`)."""
    index = start + 1
    if pattern.startswith("^", index):
        index += 1
    if pattern.startswith("]", index):
        index += 1
    return _after_unescaped(pattern, index, "]")


def _after_unescaped(pattern: str, index: int, closing: str) -> int:
    """Just after the first ``closing`` from ``index`` on that no backslash escapes; the
    pattern's end when there is none."""
    while index < len(pattern):
        if pattern[index] == "\\":
            index += 2
        elif pattern[index] == closing:
            return index + 1
        else:
            index += 1
    return len(pattern)
