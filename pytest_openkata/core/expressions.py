"""Python expressions over an agent's answer and transcript, evaluated safely on the host.

This is what waza's ``code`` grader asks of its ``assertions``: each is one Python
expression, true or false of a run, read with nothing but a few names. Here they are
``output_expression`` checks (:mod:`pytest_openkata.core.checks`), evaluated with the
``simpleeval`` library, never with Python's ``eval`` nor in a subprocess: an expression from
an eval file must not reach the host's builtins, files or processes.

An expression sees exactly waza's names (:data:`NAMES`): ``output`` (the final answer),
``outcome`` (``{}``: no outcome state here), ``chat_events`` and ``transcript`` (the events),
``tool_calls`` and ``errors`` (events picked as waza picks them), ``duration_ms``; the
functions ``len any all str int float bool list dict``; ``True`` and ``False``; and ``re``,
an object holding only ``search match fullmatch findall sub split`` and the flags
``IGNORECASE MULTILINE DOTALL``. Its patterns are the ``regex`` package's with a time
limit, so that a pattern that backtracks without end on an agent's output is stopped.

Its work is bounded: a whole number of more than :data:`MAX_INT_BITS` bits (``int()`` of a text
that could hold one included), a comprehension past simpleeval's ``MAX_COMPREHENSION_LENGTH``,
the items a comprehension, a call's arguments or a list, tuple, set or dict written out make
past four times what the text of a list may hold (below; a text counted once, a match by the
text it keeps, a container by its whole tree each time it is held), a text or list that a
repetition (a list by its text), ``replace``, ``re.sub``, ``re.findall`` or ``re.split`` would
make more than simpleeval's ``MAX_STRING_LENGTH`` longer than what it was made of, a sum,
``join`` or f-string longer than the inputs and that much (so that a long output stays readable
whole; all measured before they are made), ``list()`` of a text longer than that, the text of a
list or dict longer than the inputs and that much, and the whole evaluation past its time
limit. Format specs and a text's ``%`` formatting, which make texts of any width, are refused.
Only the attributes listed in :data:`ALLOWED_ATTRIBUTES` may be read, none that could make a
text larger on its own (``center``, ``zfill``) or change the events. What cannot be evaluated
raises :class:`ExpressionError`; the check errors, never fails.

The events map the plugin's transcript onto waza's event dicts (``role``, ``type``,
``content``, and ``data`` where waza keeps an event's payload): a message is
``{"role": "assistant"|"user", "type": "message", "content": its text}``, a tool call is
``{"role": "tool", "type": "tool_call", "content": its result, "data": {"name",
"arguments", "result", "status"}}``; each event's ``data`` also names the ``subagent`` that
made it (``""`` for the agent itself).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import itertools
import re as standard_re
import time
import types
from collections.abc import (
    Callable,
    ItemsView,
    Iterable,
    Iterator,
    KeysView,
    Mapping,
    Sequence,
    ValuesView,
)
from dataclasses import dataclass
from typing import Any

import regex
import simpleeval  # type: ignore[import-untyped]

from pytest_openkata.contracts.transcripts import Step, Transcript
from pytest_openkata.core.patterns import refuse_large_pattern

__all__ = [
    "ALLOWED_ATTRIBUTES",
    "EVENT_NAMES",
    "FUNCTIONS",
    "MAX_INT_BITS",
    "NAMES",
    "ExpressionError",
    "ExpressionInputs",
    "evaluate",
    "events_of",
    "names_in",
    "parse",
]

# The names waza's code grader gives an assertion, besides its functions.
NAMES = (
    "output",
    "outcome",
    "chat_events",
    "transcript",
    "tool_calls",
    "errors",
    "duration_ms",
)
# The names that read the agent's events: an expression using one needs an agent that gave them.
EVENT_NAMES = frozenset({"chat_events", "transcript", "tool_calls", "errors"})


def _listed(*values: Any) -> list[Any]:
    """``list``, but not of a text longer than simpleeval's ``MAX_STRING_LENGTH``: a list of a
    text's characters holds an object per character, tens of bytes each."""
    if values and isinstance(values[0], str | bytes):
        _bounded_text(len(values[0]), 0)
    return list(*values)


def _whole_number(*values: Any) -> Any:
    """``int``, but not of a text long enough to hold a number of more than
    :data:`MAX_INT_BITS` bits: Python bounds the digits it reads only in base 10, and
    arithmetic on such a number could hold the host for minutes."""
    if values and isinstance(values[0], str | bytes) and len(values[0]) * 6 > MAX_INT_BITS:
        raise simpleeval.NumberTooHigh("the number that text holds would be too large")
    return int(*values)


FUNCTIONS: Mapping[str, Callable[..., Any]] = {
    "len": len,
    "any": any,
    "all": all,
    "str": str,
    "int": _whole_number,
    "float": float,
    "bool": bool,
    "list": _listed,
    "dict": dict,
}
RE_FUNCTIONS = ("search", "match", "fullmatch", "findall", "sub", "split")
RE_FLAGS = {
    "IGNORECASE": standard_re.IGNORECASE,
    "MULTILINE": standard_re.MULTILINE,
    "DOTALL": standard_re.DOTALL,
}
_READ_ONLY_TEXT = {
    "capitalize",
    "casefold",
    "count",
    "endswith",
    "find",
    "index",
    "isalnum",
    "isalpha",
    "isascii",
    "isdecimal",
    "isdigit",
    "islower",
    "isnumeric",
    "isspace",
    "istitle",
    "isupper",
    "join",  # bounded: see _Evaluator
    "lower",
    "lstrip",
    "partition",
    "removeprefix",
    "removesuffix",
    "replace",  # bounded: see _Evaluator
    "rfind",
    "rindex",
    "rpartition",
    "rsplit",
    "rstrip",
    "split",
    "splitlines",
    "startswith",
    "strip",
    "swapcase",
    "title",
    "upper",
}


@dataclass(frozen=True)
class _Re:
    """The ``re`` an expression sees: the functions and flags waza's assertions use, and
    nothing of the module besides (set up by :func:`_re_for`)."""

    search: Callable[..., Any]
    match: Callable[..., Any]
    fullmatch: Callable[..., Any]
    findall: Callable[..., Any]
    sub: Callable[..., Any]
    split: Callable[..., Any]
    IGNORECASE: int = standard_re.IGNORECASE
    MULTILINE: int = standard_re.MULTILINE
    DOTALL: int = standard_re.DOTALL


_MATCH_TYPE: type[Any] = type(regex.compile("").match(""))
_MATCH_ITSELF = 60  # the characters a match's text takes besides its groups' texts

# The attributes an expression may read, by the type of what it reads them of.
ALLOWED_ATTRIBUTES: Mapping[type, frozenset[str]] = {
    str: frozenset(_READ_ONLY_TEXT),
    dict: frozenset({"get", "keys", "values", "items"}),
    list: frozenset({"count", "index"}),
    tuple: frozenset({"count", "index"}),
    int: frozenset({"bit_length", "real", "imag"}),
    float: frozenset({"is_integer", "real", "imag"}),
    bool: frozenset(),
    type(None): frozenset(),
    _MATCH_TYPE: frozenset({"group", "groups", "groupdict", "start", "end", "span"}),
    _Re: frozenset({*RE_FUNCTIONS, *RE_FLAGS}),
}


class ExpressionError(Exception):
    """The expression cannot give a verdict: it does not parse, names what it may not, raises,
    or goes past a limit. The message says why, without the expression (the caller names it)."""


@dataclass(frozen=True)
class ExpressionInputs:
    """What one trial gives an expression: the final answer, the agent's events as waza's
    event dicts (:func:`events_of`) and the agent's time in milliseconds."""

    output: str
    events: tuple[Mapping[str, Any], ...] = ()
    duration_ms: int = 0


def parse(expression: str) -> ast.Expression:
    """The syntax tree of one expression; :class:`ExpressionError` for a text that is not
    exactly one Python expression (a statement, an assignment, two lines of code)."""
    try:
        return ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"not a Python expression: {exc.msg}") from None
    except ValueError as exc:  # a NUL character
        raise ExpressionError(f"not a Python expression: {exc}") from None


def names_in(tree: ast.AST) -> frozenset[str]:
    """The names an expression reads (those its comprehensions bind included)."""
    return frozenset(node.id for node in ast.walk(tree) if isinstance(node, ast.Name))


def events_of(transcript: Transcript | None) -> tuple[dict[str, Any], ...]:
    """The transcript's steps as waza's event dicts (see the module docstring)."""
    if transcript is None:
        return ()
    return tuple(_event(step) for step in transcript.steps)


def _event(step: Step) -> dict[str, Any]:
    if step.kind == "tool_call":
        return {
            "role": "tool",
            "type": "tool_call",
            "content": step.result,
            "data": {
                "name": step.tool,
                "arguments": step.arguments,
                "result": step.result,
                "status": step.status,
                "subagent": step.subagent,
            },
        }
    return {
        "role": step.role,
        "type": "message",
        "content": step.text,
        "data": {"subagent": step.subagent},
    }


def _tool_calls(events: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """waza's pick: the events of the tool role or of the type ``tool_call``."""
    return [e for e in events if e.get("role") == "tool" or e.get("type") == "tool_call"]


def _errors(events: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """waza's pick (an ``error`` event, or one whose content says ``error``), and the tool
    calls that the agent reported as failed."""
    return [
        e
        for e in events
        if e.get("type") == "error"
        or "error" in str(e.get("content", ""))
        or e.get("data", {}).get("status") == "error"
    ]


def _bounded_text(size: int, given: int) -> None:
    """Refuse a text or list an expression would make more than simpleeval's
    ``MAX_STRING_LENGTH`` longer than the longest it was made of (``given``): an agent's long
    output stays readable whole, and no expression makes one without bound."""
    if size > given + simpleeval.MAX_STRING_LENGTH:
        raise simpleeval.IterableTooLong(
            f"the result would have a length of {size}, more than {simpleeval.MAX_STRING_LENGTH} "
            f"beyond the {given} it was made of"
        )


def _length(value: Any) -> int | None:
    return len(value) if isinstance(value, str | bytes | list | tuple | dict) else None


def _bounded_add(given: int, left: Any, right: Any) -> Any:
    """``+``, bounded as :func:`_bounded_text` bounds texts from ``given`` (the inputs'
    size): a long output gets its prefix and suffix, and a chain of sums does not grow past
    that bound (in place of simpleeval's, which refuses adding to an output longer than its
    limit)."""
    sizes = (_length(left), _length(right))
    if sizes[0] is not None and sizes[1] is not None:
        _bounded_text(sizes[0] + sizes[1], given)
    return left + right


# The most bits a whole number an expression makes may have: far more than any count or
# length of a run, and few enough that every operation on such numbers is quick.
MAX_INT_BITS = 100_000


def _bounded_int(bits: int, what: str) -> None:
    if bits > MAX_INT_BITS:
        raise simpleeval.NumberTooHigh(f"{what} would be too large a number")


def _bounded_multiply(left: Any, right: Any) -> Any:
    """``*``, a repetition bounded as :func:`_bounded_text` bounds texts, and a product of
    whole numbers as :data:`MAX_INT_BITS` bounds them."""
    if isinstance(left, int) and isinstance(right, int):
        _bounded_int(abs(left).bit_length() + abs(right).bit_length(), "the product")
    for sequence, times in ((left, right), (right, left)):
        if _length(sequence) is not None and isinstance(times, int):
            # A list as long as its text: [[0] * 1000] * 1000 holds a million items to
            # compare or count, though its length is a thousand. Counted as far as it matters.
            size = _size(sequence, simpleeval.MAX_STRING_LENGTH // max(times - 1, 1) + 1)
            _bounded_text(size * max(times, 0), size)
    return left * right


def _modulo(left: Any, right: Any) -> Any:
    """``%`` of numbers only: a text's ``%`` formatting could make a text of any width."""
    if isinstance(left, str | bytes):
        raise simpleeval.FeatureNotAvailable("formatting a text with % is not available")
    return left % right


def _size(value: Any, budget: int) -> int:
    """About how long ``str(value)`` is, counted only until it passes ``budget``; a match as
    what its groups span, a dict's view as the dict."""
    if isinstance(value, str | bytes):
        return len(value)
    if isinstance(value, _MATCH_TYPE):
        regs: tuple[tuple[int, int], ...] = getattr(value, "regs", ())
        spans = [span for span in regs if span[0] >= 0]
        return max(end for _, end in spans) - min(start for start, _ in spans) + _MATCH_ITSELF
    if isinstance(value, dict):
        value = [item for pair in value.items() for item in pair]
    if isinstance(value, list | tuple | set | frozenset | KeysView | ValuesView | ItemsView):
        total = 2
        for item in value:
            total += _size(item, budget - total) + 2
            if total > budget:
                break
        return total
    return 24  # a number, a bool, None: short


def _bounded_power(base: Any, exponent: Any) -> Any:
    """simpleeval's power, also refused when a whole-number result would have more bits than
    ``MAX_POWER``: within simpleeval's bounds alone, one power can hold the host far longer
    than any check should take."""
    if (
        isinstance(base, int)
        and isinstance(exponent, int)
        and exponent > 0
        and abs(base) > 1
        and exponent * abs(base).bit_length() > min(simpleeval.MAX_POWER, MAX_INT_BITS)
    ):
        raise simpleeval.NumberTooHigh(f"{base} ** {exponent} would be too large a number")
    return simpleeval.safe_power(base, exponent)


def _compiled(pattern: str, flags: int) -> regex.Pattern[str]:
    """``pattern`` compiled, unless its repeats would write out too much to compile (a
    pattern may be made of the agent's output): see :mod:`pytest_openkata.core.patterns`.
    Not kept in the package's cache, which would hold hundreds of such patterns at once."""
    refuse_large_pattern(pattern, flags)
    return regex.compile(pattern, flags, cache_pattern=False)


def _span_length(matched: Any, group: int) -> int:
    """The length of what ``group`` matched (0 when it took no part), read without copying
    it out of the searched text."""
    start, end = matched.span(group)
    return max(int(end) - int(start), 0)


def _bounded_found(
    matches: Iterable[Any], groups: Sequence[int], given: int, *, split: bool
) -> None:
    """Refuse, as :func:`_bounded_text` does, the list that ``findall`` (or with ``split``,
    ``split``) would make of ``matches``: what ``groups`` of each matched, and one for each
    item it adds (a tuple of groups has one item per group), and for ``split`` the searched
    text, ``given`` long, less what the matches take out of it. Measured from the matches'
    spans before the list is made: a group inside a lookahead, ``(?=(\\w+))``, matches at
    every place a text all the way to its end, so that ``findall`` over a long output would
    make its square."""
    size = given if split else 0
    for matched in matches:
        size += sum(_span_length(matched, group) for group in groups) + len(groups)
        if split:
            size += 1 - _span_length(matched, 0)  # a piece more, and the match taken out
        _bounded_text(size, given)


# A replacement of up to this many characters is measured group by group (see _Template).
_TEMPLATE_TOLD_APART = 1000
_GROUPS_TOLD_APART = 30


@dataclass(frozen=True)
class _Template:
    """What one expansion of a ``re.sub`` replacement is made of: its own text's length, how
    many times it names any group (``total``), and, for a short replacement over at most
    :data:`_GROUPS_TOLD_APART` groups, how many times it names each (``each``)."""

    literal: int
    total: int
    groups: int
    each: Mapping[int, int] | None

    def size(self, matched: Any) -> int:
        """The length of the expansion for ``matched``, measured from its spans: exactly when
        the references are told apart, else at most that (each reference as long as the
        longest group)."""
        if self.each is not None:
            return self.literal + sum(
                times * _span_length(matched, group) for group, times in self.each.items()
            )
        longest = max(_span_length(matched, group) for group in range(self.groups + 1))
        return self.literal + self.total * longest


def _template(compiled: regex.Pattern[str], template: str) -> _Template | None:
    """``template`` measured for matches of ``compiled`` from its expansions for stand-in
    matches of the same groups, each group one character long or taking no part (the
    package parses the template, as it will for the replacement): so that each match's
    replacement is measured from its spans before it is made. A template that names a long
    group thousands of times would otherwise take all the host's memory to expand once.
    None when the template cannot be expanded (it names a group the pattern has not): the
    package then refuses it at the first match, as it would."""
    if "\\" not in template:
        return _Template(len(template), 0, compiled.groups, {})
    if len(template) > simpleeval.MAX_STRING_LENGTH:
        raise simpleeval.IterableTooLong(
            f"a replacement of more than {simpleeval.MAX_STRING_LENGTH} characters that holds "
            "a backslash is not available"
        )
    names = {index: name for name, index in compiled.groupindex.items()}
    groups = range(1, compiled.groups + 1)

    def group(number: int, body: str) -> str:
        name = names.get(number)
        return f"(?P<{name}>{body})" if name is not None else f"({body})"

    def expanded(stand_in: str, text: str) -> int:
        matched = regex.compile(stand_in, cache_pattern=False).match(text)
        assert matched is not None  # every stand-in matches its text
        return len(matched.expand(template))

    def only(long_group: int) -> int:
        """The expansion where only ``long_group`` takes part, one character long (0: no
        group, the whole match alone)."""
        bodies = [group(g, "x") if g == long_group else f"(?:{group(g, 'y')})?" for g in groups]
        return expanded("".join(bodies) + ("" if long_group else "x"), "x")

    try:
        literal = expanded(f"(?:{''.join(group(g, 'x') for g in groups)})?", "")
        # Every group one character, and the whole match one more than they together.
        every = "".join(group(g, "x") for g in groups) + "x"
        total = expanded(every, "x" * (len(groups) + 1)) - literal
        if len(template) > _TEMPLATE_TOLD_APART or len(groups) > _GROUPS_TOLD_APART:
            return _Template(literal, total, compiled.groups, None)  # not told apart
        whole = only(0) - literal
        each = {0: whole, **{g: only(g) - literal - whole for g in groups}}
    except (regex.error, IndexError):
        return None
    return _Template(literal, total, compiled.groups, {g: n for g, n in each.items() if n})


def _re_for(timeout: float) -> _Re:
    """``re``'s functions on the ``regex`` package, each search stopped after ``timeout``;
    what ``findall``, ``split`` and ``sub`` would make is measured first, and the package's
    own function then makes it."""

    def search(pattern: str, string: str, flags: int = 0) -> Any:
        return _compiled(pattern, flags).search(string, timeout=timeout)

    def match(pattern: str, string: str, flags: int = 0) -> Any:
        return _compiled(pattern, flags).match(string, timeout=timeout)

    def fullmatch(pattern: str, string: str, flags: int = 0) -> Any:
        return _compiled(pattern, flags).fullmatch(string, timeout=timeout)

    def findall(pattern: str, string: str, flags: int = 0) -> Any:
        compiled = _compiled(pattern, flags)
        groups = range(1, compiled.groups + 1) if compiled.groups else range(1)
        matches = compiled.finditer(string, timeout=timeout)
        _bounded_found(matches, groups, len(string), split=False)
        return compiled.findall(string, timeout=timeout)

    def split(pattern: str, string: str, maxsplit: int = 0, flags: int = 0) -> Any:
        compiled = _compiled(pattern, flags)
        matches: Iterable[Any] = compiled.finditer(string, timeout=timeout)
        if maxsplit > 0:
            matches = itertools.islice(matches, maxsplit)
        _bounded_found(matches, range(1, compiled.groups + 1), len(string), split=True)
        return compiled.split(string, maxsplit, timeout=timeout)

    def sub(pattern: str, repl: str, string: str, count: int = 0, flags: int = 0) -> str:
        if not isinstance(repl, str):
            raise TypeError("re.sub takes a replacement text here")
        compiled = _compiled(pattern, flags)
        measured = _template(compiled, repl)
        if measured is not None:
            matches: Iterable[Any] = compiled.finditer(string, timeout=timeout)
            if count > 0:
                matches = itertools.islice(matches, count)
            size = len(string)
            for matched in matches:  # in any order: a reversed pattern's from the end
                size += measured.size(matched) - _span_length(matched, 0)
                _bounded_text(size, max(len(string), len(repl)))
        return compiled.sub(repl, string, count, timeout=timeout)

    return _Re(search, match, fullmatch, findall, sub, split)


def _guarded_replace(text: str) -> Callable[..., str]:
    def replace(old: str, new: str, count: int = -1) -> str:
        if isinstance(old, str) and isinstance(new, str):
            places = text.count(old) if old else len(text) + 1
            if count >= 0:
                places = min(places, count)
            _bounded_text(len(text) + places * (len(new) - len(old)), len(text))
        return text.replace(old, new, count)

    return replace


def _guarded_join(separator: str, given: int) -> Callable[..., str]:
    """``separator.join``, bounded as :func:`_bounded_text` bounds texts from the longer of
    its longest part and ``given`` (the inputs' size): the parts of a join are mostly pieces of
    the output, so a join as long as the output is always made, and a join never doubles a
    text. A text joined character by character is a list of its characters first, so it
    is bounded as ``list()`` of it is."""

    def join(items: Any) -> str:
        if isinstance(items, str):
            _listed(items)  # refused past the bound, before the characters are listed
        parts = list(items)
        if all(isinstance(part, str) for part in parts):
            size = sum(map(len, parts)) + len(separator) * max(len(parts) - 1, 0)
            _bounded_text(size, max(max(map(len, parts), default=0), given))
        return separator.join(parts)

    return join


class _OutOfTime(Exception):
    """The expression took longer than its check's time limit."""


_COPIES_HELD = 4
"""How many times what the text of a list may hold the items made together may hold: the
inputs a few times over, as in ``(output, output.lower(), output.upper())``."""


class _Made:
    """What a comprehension, a call's arguments, or a list, tuple, set or dict written out
    have made so far, refused past ``limit`` as the text of a list is. A text counts once
    however often it is held, and a match counts the text it was found in once, so that
    ``all(re.search(p, output) for p in patterns)`` keeps the one output; a container counts
    its whole tree each time it is held (what hashing or comparing it walks); a method counts
    what it belongs to. simpleeval bounds how many items a comprehension makes, not what they
    hold: ``[output + "x" for c in text]`` made as many copies of a long output as the text
    has characters."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self._texts: dict[int, Any] = {}  # the texts counted, by id (kept alive here)
        self._trees: dict[int, tuple[int, Any]] = {}  # a container's tree size, by id

    def add(self, value: Any) -> None:
        self.size += 1 + self._weight(value)
        if self.size > self.limit:
            raise simpleeval.IterableTooLong(
                f"the items made would come to more than {self.limit} characters"
            )

    def _weight(self, item: Any) -> int:
        if isinstance(item, str | bytes | _MATCH_TYPE):
            text = item.string if isinstance(item, _MATCH_TYPE) else item
            extra = _MATCH_ITSELF if isinstance(item, _MATCH_TYPE) else 0
            if id(text) in self._texts:
                return extra
            self._texts[id(text)] = text
            return extra + len(text)
        if _is_container(item):
            return self._tree(item)
        held = _held_by(item)  # a method's owner, what a function made here closes over
        return _own_size(item) + sum(self._weight(part) for part in held)

    def _tree(self, container: Any) -> int:
        """The size of ``container``'s whole tree, worked out once per container (a shared
        part counted each time it is held), and no further than past the limit."""
        known = self._trees.get(id(container))
        if known is not None:
            return known[0]
        size = 2
        for part in _held_by(container):
            size += 1 + self._part(part)
            if size > self.limit:
                break
        self._trees[id(container)] = (size, container)
        return size

    def _part(self, item: Any) -> int:
        """What a part of a container takes, all of it: a text its length, a match its text,
        a container its tree, a method what it belongs to."""
        if _is_container(item):
            return self._tree(item)
        if isinstance(item, _MATCH_TYPE):
            return _MATCH_ITSELF + len(item.string)
        return _own_size(item) + sum(self._part(part) for part in _held_by(item))


def _is_container(item: Any) -> bool:
    return isinstance(
        item, list | tuple | set | frozenset | dict | KeysView | ValuesView | ItemsView
    )


def _own_size(item: Any) -> int:
    """What ``item`` takes by itself, in characters, besides the objects it holds."""
    if isinstance(item, str | bytes):
        return len(item)
    if isinstance(item, int):
        return item.bit_length() // 8
    if isinstance(item, _MATCH_TYPE):
        return _MATCH_ITSELF
    return 2


def _held_by(item: Any) -> Iterable[Any]:
    """The objects ``item`` holds that could be large: a container's items, a dict's keys and
    values, the dict of a dict's view, the text a match was found in, the object a method
    belongs to, what a function made here closes over."""
    if isinstance(item, str | bytes | int | float):
        return ()
    if isinstance(item, list | tuple | set | frozenset):
        return item
    if isinstance(item, dict):
        return [*item.keys(), *item.values()]
    if isinstance(item, KeysView | ValuesView | ItemsView):
        mapping = getattr(item, "mapping", {})  # a read-only view of the dict
        return [*mapping.keys(), *mapping.values()]
    if isinstance(item, _MATCH_TYPE):
        return (item.string,)
    owner = getattr(item, "__self__", None)
    if owner is not None and not isinstance(owner, types.ModuleType):
        return (owner,)
    closure = getattr(item, "__closure__", None) or ()
    return [cell.cell_contents for cell in closure]


class _Evaluator(simpleeval.EvalWithCompoundTypes):
    """simpleeval's evaluator with lists, dicts and comprehensions, where the text methods
    that could make a text without bound (``replace``, ``join``) are bounded first, a text
    made of a list or a dict (``str``, an f-string) is bounded by ``text_limit``, what
    comprehensions, calls' arguments and items written out make is counted as it is made
    (:class:`_Made`), a format spec is refused, and the whole evaluation stops at
    ``deadline`` (``time.monotonic``)."""

    def __init__(self, *, deadline: float, text_limit: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.deadline = deadline
        self.text_limit = text_limit
        self.functions["str"] = self._str
        self.functions["list"] = _listed  # simpleeval sets its own list over the one given
        # The nodes whose values are being counted (a comprehension's items, a call's
        # arguments, the items written out of a list, tuple, set or dict), by id.
        self._elements: dict[int, _Made] = {}

    def _eval(self, node: ast.AST) -> Any:
        if time.monotonic() > self.deadline:
            raise _OutOfTime
        value = super()._eval(node)
        made = self._elements.get(id(node))
        if made is not None:
            made.add(value)
        return value

    def _check_disallowed_items(self, item: Any) -> None:
        """simpleeval's look for modules and forbidden functions in each result, without
        looking into containers again: every value a node evaluates to is looked at as it is
        made, and a container holds only such values and what the functions and methods an
        expression may call make (texts, numbers, matches, and containers of them). Looking
        into each result's containers, simpleeval looked into one list as often as a result
        held it (``[x] * 1000``) and into a list as often as a name read it."""
        if not isinstance(item, list | tuple | set | frozenset | dict):
            super()._check_disallowed_items(item)

    @contextlib.contextmanager
    def _counted(self, elements: Sequence[ast.AST]) -> Iterator[_Made]:
        """While in it, what ``elements`` evaluate to is counted by one :class:`_Made`, up to
        :data:`_COPIES_HELD` times what the text of a list may hold."""
        made = _Made(self.text_limit * _COPIES_HELD)
        before = {id(element): self._elements.get(id(element)) for element in elements}
        self._elements.update({id(element): made for element in elements})
        try:
            yield made
        finally:
            for key, earlier in before.items():
                if earlier is None:
                    self._elements.pop(key, None)
                else:
                    self._elements[key] = earlier

    def _eval_comprehension(self, node: ast.AST) -> Any:
        """simpleeval's comprehension, its items counted as they are made (see :class:`_Made`)."""
        if isinstance(node, ast.DictComp):
            elements: tuple[ast.AST, ...] = (node.key, node.value)
        elif isinstance(node, ast.ListComp | ast.GeneratorExp | ast.SetComp):
            elements = (node.elt,)
        else:  # what simpleeval may come to hand over: counted by its length alone
            elements = ()
        with self._counted(elements):
            return super()._eval_comprehension(node)

    def _eval_list(self, node: ast.List) -> list[Any]:
        """A list written out, its items counted as they are made; a starred text is listed
        as ``list()`` lists one (``[*output]``), and what a star adds is counted too."""
        result: list[Any] = []
        plain = [item for item in node.elts if not isinstance(item, ast.Starred)]
        with self._counted(plain) as made:
            for item in node.elts:
                if isinstance(item, ast.Starred):
                    starred = self._eval(item.value)
                    if isinstance(starred, str | bytes):
                        _listed(starred)  # refused past the bound, before it is listed
                    made.add(starred)
                    result.extend(starred)
                else:
                    result.append(self._eval(item))
        return result

    def _eval_call(self, node: ast.Call) -> Any:
        """simpleeval's call, its arguments counted as they are made (forty copies of the
        output's words are made before ``len`` refuses to take them)."""
        arguments = [arg.value if isinstance(arg, ast.Starred) else arg for arg in node.args]
        with self._counted([*arguments, *(keyword.value for keyword in node.keywords)]):
            return super()._eval_call(node)

    def _eval_tuple(self, node: ast.Tuple) -> tuple[Any, ...]:
        with self._counted(node.elts):
            made: tuple[Any, ...] = super()._eval_tuple(node)
        return made

    def _eval_set(self, node: ast.Set) -> set[Any]:
        with self._counted(node.elts):
            made: set[Any] = super()._eval_set(node)
        return made

    def _eval_dict(self, node: ast.Dict) -> dict[Any, Any]:
        keys = [key for key in node.keys if key is not None]
        with self._counted([*keys, *node.values]):
            made: dict[Any, Any] = super()._eval_dict(node)
        return made

    def _eval_joinedstr(self, node: ast.JoinedStr) -> str:
        """An f-string, bounded as a join is (see :func:`_guarded_join`): simpleeval bounds
        each piece, not the whole, and refuses a piece longer than its limit (the output)."""
        pieces: list[str] = []
        size, longest = 0, 0
        for value in node.values:  # bounded as they are made, not once all are
            piece = str(self._eval(value))
            size, longest = size + len(piece), max(longest, len(piece))
            _bounded_text(size, max(longest, self.text_limit - simpleeval.MAX_STRING_LENGTH))
            pieces.append(piece)
        return "".join(pieces)

    def _str(self, *value: Any) -> str:
        if value and _size(value[0], self.text_limit) > self.text_limit:
            raise simpleeval.IterableTooLong("the text of that value would be too long")
        return str(*value)

    def _eval_formattedvalue(self, node: ast.FormattedValue) -> Any:
        if node.format_spec is not None:  # a width makes a text of any length
            raise simpleeval.FeatureNotAvailable("a format spec in an f-string is not available")
        value = self._eval(node.value)
        if node.conversion in (ord("r"), ord("a")):  # !r, !a: up to ten characters each
            if _size(value, self.text_limit) * 10 > self.text_limit:
                raise simpleeval.IterableTooLong("the text of that value would be too long")
            return repr(value) if node.conversion == ord("r") else ascii(value)
        if not isinstance(value, str) and _size(value, self.text_limit) > self.text_limit:
            raise simpleeval.IterableTooLong("the text of that value would be too long")
        return value

    def _eval_attribute(self, node: ast.Attribute) -> Any:
        item = super()._eval_attribute(node)
        owner = getattr(item, "__self__", None)
        if isinstance(owner, str) and node.attr == "replace":
            return _guarded_replace(owner)
        if isinstance(owner, str) and node.attr == "join":
            return _guarded_join(owner, self.text_limit - simpleeval.MAX_STRING_LENGTH)
        return item


def evaluate(tree: ast.Expression, inputs: ExpressionInputs, *, timeout: float) -> bool:
    """Whether the expression holds of the inputs (a result that is not a bool counts by its
    truth, as waza counts it); ``timeout`` bounds each of its pattern searches. Raises
    :class:`ExpressionError` for whatever keeps it from a verdict."""
    events = [dict(event) for event in inputs.events]
    names: dict[str, Any] = {
        "output": inputs.output,
        "outcome": {},
        "chat_events": events,
        "transcript": events,
        "tool_calls": _tool_calls(events),
        "errors": _errors(events),
        "duration_ms": inputs.duration_ms,
        "re": _re_for(timeout),
        "True": True,
        "False": False,
    }
    given = len(inputs.output) + _size(events, 1 << 62)
    evaluator = _Evaluator(
        deadline=time.monotonic() + timeout,
        text_limit=given + simpleeval.MAX_STRING_LENGTH,
        operators={
            **simpleeval.DEFAULT_OPERATORS,
            ast.Add: functools.partial(_bounded_add, given),
            ast.Mult: _bounded_multiply,
            ast.Pow: _bounded_power,
            ast.Mod: _modulo,
        },
        functions=dict(FUNCTIONS),
        names=names,
        allowed_attrs={kind: set(attrs) for kind, attrs in ALLOWED_ATTRIBUTES.items()},
    )
    for extra in set(evaluator.functions) - set(FUNCTIONS):  # simpleeval's tuple, set
        del evaluator.functions[extra]
    try:
        return bool(evaluator.eval("", previously_parsed=tree.body))
    except _OutOfTime:
        raise ExpressionError(f"it did not finish within {timeout:g} s") from None
    except TimeoutError:
        raise ExpressionError(
            f"a pattern did not finish searching within {timeout:g} s (it backtracks without "
            "end on this text)"
        ) from None
    except simpleeval.NameNotDefined as exc:
        raise ExpressionError(
            f"{exc.name!r} is not a name it may use (it may use {', '.join(NAMES)}, re, "
            f"{', '.join(FUNCTIONS)})"
        ) from None
    except simpleeval.FunctionNotDefined as exc:
        raise ExpressionError(
            f"{exc.func_name!r} is not a function it may call (it may call "
            f"{', '.join(FUNCTIONS)} and re's {', '.join(RE_FUNCTIONS)})"
        ) from None
    except (simpleeval.InvalidExpression, regex.error) as exc:
        raise ExpressionError(f"{type(exc).__name__}: {exc}") from None
    except RecursionError:
        raise ExpressionError("it nests too deeply to be evaluated") from None
    except MemoryError:
        raise ExpressionError("it needs more memory than the host has") from None
    except Exception as exc:  # what the expression itself raised: KeyError, TypeError, ...
        raise ExpressionError(f"it raised {type(exc).__name__}: {exc}") from None
