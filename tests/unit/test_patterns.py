"""Counting what a pattern's repeats write out when the ``regex`` package compiles it.

The patterns refused here are never compiled: each would take hundreds of megabytes."""

from __future__ import annotations

import re

import pytest
import regex

from pytest_openkata.core.patterns import (
    MAX_PATTERN_ITEMS,
    PatternTooLarge,
    pattern_items,
    refuse_large_pattern,
)


@pytest.mark.parametrize(
    ("pattern", "items"),
    [
        ("", 0),
        ("abc", 3),
        # {m} counts m + 1 copies (one more where repeats nest), {0} and {1} one.
        (r"\d{4}-\d{2}-\d{2}", 5 + 1 + 3 + 1 + 3),
        # A set, an escape and a group are one item each, and a group holds its own; its
        # marks ("?:", a name) count as characters, which only counts more.
        (r"[a-z]{3}\.(?:ab){2}", (1 + 5 // 2) * 4 + 1 + (1 + 2 + 1) * 3),
        # * and ? write out no copies, + two (as {1,}); lazy or possessive marks none.
        (r"a*b+c?d*?e++f{2}+", 1 + 2 + 1 + 1 + 2 + 3),
        # Every branch of an alternative counts.
        (r"(?:ab|cde){10}", 7 * 11),
        # {m,n}, {m,} and {,n} the m it must match and one loop.
        (r"x{2,50}y{7,}z{,9}w{1}", 3 + 8 + 1 + 1),
        # Nested repeats multiply.
        (r"(?:(?:a{10}){10}){10}", ((1 + (1 + 11 + 1) * 11) + 1) * 11),
        # A "]" first in a set is a member, and an escaped one too.
        (r"[]\]a]{4}", (1 + 6 // 2) * 5),
        # A set counts one item per two characters of its text; \R and \X eight each.
        ("[" + "a" * 64 + "]{10}", (1 + 66 // 2) * 11),
        (r"\R{3}\X", 8 * 4 + 8),
        # {0} still writes out one copy.
        (r"(?:ab){0}c", 4 + 1),
        # A call counts, and a count repeats it.
        (r"a|(?R){3}", 1 + 2 * 4),
        # Braces that are no count are characters.
        (r"a{}b{x}\{3}", 10),
        # A fuzzy constraint counts as characters, and a count after it repeats them together
        # with what came before them.
        (r"(?:ab){e<=1}{3}", (4 + 6) * 4),
        # A group of flags alone adds nothing: a count after it repeats what came before.
        (r"ab(?i){3}", 1 + 4),
        # A comment holds nothing; it ends at its first ")" that is not escaped.
        (r"(?#a{1000}\)((x)b", 1),
    ],
)
def test_a_patterns_items_are_counted_as_they_are_written_out(pattern: str, items: int) -> None:
    assert pattern_items(pattern) == items


CJK_SET = "[" + "".join(chr(0x4E00 + 2 * n) for n in range(5000)) + "]"


@pytest.mark.parametrize(
    ("pattern", "flags"),
    [
        (r"(?:(?:a{1000}){1000}){3}", 0),
        (r"(?:a{1000,}){1000}", 0),
        (r"[a-z]{1000000}", 0),
        (r"(?:(?:(?:a{100}){100}){100}){10}", 0),
        (r"x{99999999999999999999}", 0),
        # A count after a group of flags alone repeats what came before it.
        (r"(?:a{1000})(?i){2000}", 0),
        (r"(?:a{1000})(?V1){1000}", 0),
        # An escaped ")" does not end a comment.
        (r"(?:a{1000}(?#\)x)){2000}", 0),
        # A POSIX class, or a nested set of version 1, inside a set.
        (r"(?:a{1000}[[:alpha:])]){2000}", 0),
        (r"(?V1)(?:a{1000}[[a])]){2000}", 0),
        (r"(?:a{1000}[[a])]){2000}", int(regex.VERSION1)),
        # A fuzzy constraint that matches exactly adds nothing.
        (r"(?:a{1000}){e<=0}{2000}", 0),
        # Verbose mode: a count split by spaces or a comment, a bracket in a comment.
        (r"(?x)(?:a{1 000}){2 000}", 0),
        (r"(?:a{1 000}){2 000}", int(regex.VERBOSE)),
        ("(?x)(?:a{1#\n000}){2#\n000}", 0),
        ("(?x)(?: a{1000} # )\n ){1000}", 0),
        # Full case folding: a set stands for every folding of its members.
        (r"(?fi)[\x00-\U0010ffff]{30000}", 0),
        (r"[\x00-\U0010ffff]{30000}", int(regex.FULLCASE | regex.IGNORECASE)),
        (r"(?V1i)[\x00-\U0010ffff]{10000}", 0),
        ("(?fi)[ßﬃﬄﬀﬁﬂﬅﬆ]{90000}", 0),
        # A set of many members, repeated.
        (CJK_SET + "{30000}", 0),
        ("[" + r"\w" * 4500 + "]{350}", 0),
        (r"\R{100000}", 0),
        (r"\X{100000}", 0),
        # A call is no group of flags: a count repeats it.
        (r"a|(?R){3000000}", 0),
        (r"((?1){3000000})", 0),
        # After a set operation of version 1 a "]" may be a member.
        (r"(?:(?:a{100}[a--])][a--])]){100}){300}", int(regex.VERSION1)),
        (r"(?V1)(?:(?:a{100}[a--])][a--])]){100}){300}", 0),
        # Braces that are no count but hold structure, or a fuzzy test holding a "}".
        (r"a{(?:(?:(?:\}b{100}){100}){100}){3}", 0),
        (r"a{(?:(?:b{1000}){1000}){3}}", 0),
        (r"(?:a{1000}){e<=0:\p{L}}{2000}", 0),
        (r"(?:a{1000}){e<=0:[}]}{2000}", 0),
        # Full case folding turned on by flags split by a space in verbose mode.
        ("(?x)(?i f)(?:" + ("[" + chr(1) + "-" + chr(0x10FFFF) + "]") * 190 + "){99}", 0),
        # Nested {m} write out one copy more each.
        ("(?:" * 13 + "a" + "){2}" * 13, 0),
        ("(" * 12 + "a" + "){2}" * 12, 0),
        # Full case folding hidden behind text that looks like a flag group with a comment.
        (r"\(?i#(?fi)[ß-ﬗ]{33000}", 0),
        (r"\(?a#(?f)[ß-ﬗ]{33000}", int(regex.IGNORECASE)),
        ("[(?a#)]\n(?fi)[ß-ﬗ]{33000}", 0),
        (r"(?#(?a#)(?fi)[ß-ﬗ]{20000}", 0),
        (r"[(?a#](?V1i)[ß-ﬗ]{20000}", 0),
        # Nested + double at each level, as nested {1,}.
        ("(" * 20 + "a" + ")+" * 20, 0),
        ("(?:" * 20 + "a" + ")++" * 20, 0),
        ("(?>" * 18 + "a" + ")+" * 18, 0),
        ("(?:" * 16 + "a" + "){2})+" * 8, 0),
        # Nested + where the structure is not followed: verbose mode, a POSIX class, braces.
        ("(?x)" + "(?:" * 20 + "a" + ") +" * 20, 0),
        ("(?:" * 19 + "a" + ")+" * 19, int(regex.VERBOSE)),
        ("[[:alpha:]]" + "(?:" * 20 + "a" + ")(?#c)+" * 20, 0),
        ("(?V1)[[a]b]" + "(?:" * 19 + "a" + ")+" * 19, 0),
        ("x{[}]" + "(?:" * 20 + "a" + ")+" * 20, 0),
        ("[[:alpha:]]" + "(?:" * 19 + "a" + "){e<=0}+" * 19, 0),
        ("[[:alpha:]]" + "\\X+" * 33000, 0),
        # {0} writes out one copy, which an outer count repeats.
        (r"(?:(?:(?:a{100}){100}){0}){300}", 0),
        (r"(?:(?:a{1000}){0}){1000}", 0),
    ],
)
def test_a_pattern_past_the_bound_is_refused_before_it_compiles(pattern: str, flags: int) -> None:
    assert pattern_items(pattern, flags) > MAX_PATTERN_ITEMS
    with pytest.raises(PatternTooLarge, match="more than 100,000 items"):
        refuse_large_pattern(pattern, flags)


@pytest.mark.parametrize("pattern", ["()" * 5001, "(|)" * 5001, "(?:(?:))" * 2501])
def test_a_pattern_of_too_many_parentheses_is_refused_before_it_compiles(pattern: str) -> None:
    # Few items, but the package compiles empty groups in time that grows with their square.
    assert pattern_items(pattern) <= MAX_PATTERN_ITEMS
    with pytest.raises(PatternTooLarge, match="more than 5,000 parentheses"):
        refuse_large_pattern(pattern)


@pytest.mark.parametrize("pattern", ["(?a" + "#" * 60, "[[])" + "#" * 60])
def test_comment_marks_are_read_in_one_pass(pattern: str) -> None:
    # A verbose comment runs to the line's end: read any other way, each "#" doubled the
    # ways the scan tried to read the run of them.
    assert pattern_items(pattern, regex.VERBOSE) > 0


def test_the_flags_the_scan_reads_are_the_regex_packages() -> None:
    assert int(regex.VERBOSE) == re.VERBOSE == 64
    assert (int(regex.VERSION1), int(regex.FULLCASE)) == (256, 16384)


def test_a_verbose_pattern_refused_is_told_why() -> None:
    with pytest.raises(PatternTooLarge, match="in verbose mode a count may be split"):
        refuse_large_pattern(r"(?x) \d{4} - \d{2} - \d{2} T \d{2} : \d{2} : \d{2} \. \d{3}")


@pytest.mark.parametrize(
    ("pattern", "flags"),
    [
        (r"^\s*(?:def|class)\s+\w+", 0),
        (r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9.-]{1,255}\.[A-Za-z]{2,24}", 0),
        (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", 0),
        (r"(?i)\b(?:TODO|FIXME|XXX)\b", 0),
        (r"(?P<year>\d{4})-(?P<month>\d{2})", 0),
        (r"\p{L}{3,}", 0),
        # Long bounds that match whole texts: the package writes out only what they must.
        (r"^[\s\S]{0,200000}$", 0),
        (r"^.{1,120000}$", 0),
        (r"(?x) ^ \d{4} - \d{2} - \d{2} $", 0),
        (r"TODO:\s+\w+", int(regex.IGNORECASE | regex.MULTILINE)),
    ],
)
def test_patterns_of_a_usual_size_are_left_to_compile(pattern: str, flags: int) -> None:
    refuse_large_pattern(pattern, flags)
    assert regex.compile(pattern, flags).pattern == pattern
