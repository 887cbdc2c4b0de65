"""Counting what a pattern's repeats write out when the ``regex`` package compiles it."""

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
        (r"\d{4}-\d{2}-\d{2}", 10),
        # A set, an escape and a group are one item each, and a group holds its own; its
        # marks ("?:", a name) count as characters, which only counts more.
        (r"[a-z]{3}\.(?:ab){2}", 3 + 1 + 2 * (1 + 2 + 1)),
        # Open repeats and lazy or possessive marks write out no copies.
        (r"a*b+c?d*?e++", 5),
        # Every branch of an alternative counts.
        (r"(?:ab|cde){10}", 10 * 7),
        # A repeat counts its largest count; an open one ({m,}) its least.
        (r"x{2,50}y{7,}z{,9}", 50 + 7 + 9),
        # Nested repeats multiply.
        (r"(?:(?:a{10}){10}){10}", ((1 + (1 + 10 + 1) * 10) + 1) * 10),
        # A "]" first in a set is a member, and an escaped one too.
        (r"[]\]a]{4}", 4),
        # Braces that are no count are characters.
        (r"a{}b{x}\{3}", 3 + 4 + 3),
        # A comment holds nothing, whatever it says; it ends at its first ")".
        (r"(?#a{1000}(((x)b", 1),
    ],
)
def test_a_patterns_items_are_counted_as_they_are_written_out(pattern: str, items: int) -> None:
    assert pattern_items(pattern) == items


@pytest.mark.parametrize(
    "pattern",
    [
        r"(?:(?:a{1000}){1000}){3}",
        r"(?:a{1000,}){1000}",
        r"[a-z]{1000000}",
        r"(?:(?:(?:a{100}){100}){100}){10}",
        r"x{99999999999999999999}",
        # Verbose mode: a bracket in a comment cannot close the group early.
        "(?x)(?: a{1000} # )\n ){1000}",
        "(?V1x)(?:b{400}#)\n){400}",
    ],
)
def test_a_pattern_past_the_bound_is_refused_before_it_compiles(pattern: str) -> None:
    assert pattern_items(pattern) > MAX_PATTERN_ITEMS
    with pytest.raises(PatternTooLarge, match="more than 100,000 items"):
        refuse_large_pattern(pattern)


def test_the_verbose_flag_counts_as_an_inline_verbose_group() -> None:
    pattern = "(?: a{400} # )\n ){400}"
    assert pattern_items(pattern) <= MAX_PATTERN_ITEMS  # read as written, without the flag
    assert pattern_items(pattern, re.VERBOSE) > MAX_PATTERN_ITEMS
    assert int(regex.VERBOSE) == re.VERBOSE  # the flag the regex package is given


@pytest.mark.parametrize(
    "pattern",
    [
        r"^\s*(?:def|class)\s+\w+",
        r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9.-]{1,255}\.[A-Za-z]{2,24}",
        r"(?i)\b(?:TODO|FIXME|XXX)\b",
        r"(?P<year>\d{4})-(?P<month>\d{2})",
        r"\p{L}{3,}",
    ],
)
def test_patterns_of_a_usual_size_are_left_to_compile(pattern: str) -> None:
    refuse_large_pattern(pattern)
    assert regex.compile(pattern).pattern == pattern
