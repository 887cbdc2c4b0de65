"""JSON read with the line of every value, so that findings point at the line to fix."""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class JsonNode:
    """A JSON value and the line it starts on; an object keeps its members (with their keys'
    lines) and an array its items. ``value`` is the plain value of a scalar."""

    line: int
    value: Any = None
    members: tuple[_Member, ...] | None = None
    items: tuple[JsonNode, ...] | None = None

    def member(self, key: str) -> _Member | None:
        """The member Go's decoder assigns to the field ``key``: matched without regard to
        case, the last one wins, and a null counts as absent (as ``go_keys`` decides)."""
        found = None
        for member in self.members or ():
            if member.key.lower() == key.lower() and not member.node.is_null:
                found = member
        return found

    def scalar(self, key: str) -> Any:
        member = self.member(key)
        return None if member is None else member.node.value

    @property
    def is_null(self) -> bool:
        return self.members is None and self.items is None and self.value is None


@dataclass(frozen=True)
class _Member:
    key: str
    line: int
    node: JsonNode


_SPACE = re.compile(r"[ \t\n\r]*")


_DECODER = json.JSONDecoder()


_DEEPEST = 6  # levels of objects and lists parsed into nodes; deeper values stay whole


class _LineParser:
    """Parses a JSON text that ``json.loads`` accepted into :class:`JsonNode` s with lines."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line(self, pos: int) -> int:
        return bisect.bisect_right(self.starts, pos)

    def skip(self, pos: int) -> int:
        match = _SPACE.match(self.text, pos)
        return pos if match is None else match.end()

    def parse(self, pos: int, depth: int = 0) -> tuple[JsonNode, int]:
        pos = self.skip(pos)
        char = self.text[pos]
        # Below the levels the rules read (a checklist's items and their keys), a value is
        # kept whole, as json reads it: deep nesting then costs no recursion here.
        if char == "{" and depth < _DEEPEST:
            return self._object(pos, depth)
        if char == "[" and depth < _DEEPEST:
            return self._array(pos, depth)
        value, end = _DECODER.raw_decode(self.text, pos)
        return JsonNode(self.line(pos), value=value), end

    def _object(self, start: int, depth: int) -> tuple[JsonNode, int]:
        members: list[_Member] = []
        pos = self.skip(start + 1)
        while self.text[pos] != "}":
            key_pos = self.skip(pos)
            key, pos = _DECODER.raw_decode(self.text, key_pos)
            pos = self.skip(pos) + 1  # the colon
            node, pos = self.parse(pos, depth + 1)
            members.append(_Member(str(key), self.line(key_pos), node))
            pos = self.skip(pos)
            if self.text[pos] == ",":
                pos += 1
        return JsonNode(self.line(start), members=tuple(members)), pos + 1

    def _array(self, start: int, depth: int) -> tuple[JsonNode, int]:
        items: list[JsonNode] = []
        pos = self.skip(start + 1)
        while self.text[pos] != "]":
            node, pos = self.parse(pos, depth + 1)
            items.append(node)
            pos = self.skip(pos)
            if self.text[pos] == ",":
                pos = self.skip(pos + 1)
        return JsonNode(self.line(start), items=tuple(items)), pos + 1


def read_text_or_none(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def json_tree(text: str | None) -> JsonNode | None:
    """A file's text (None: it could not be read) as :class:`JsonNode` s, or None when it
    is not JSON."""
    if text is None:
        return None
    try:
        json.loads(text)
        return _LineParser(text).parse(0)[0]
    except (ValueError, IndexError, RecursionError):
        return None


def line_at(tree: JsonNode | None, loc: Iterable[int | str]) -> int | None:
    """The line of the deepest part of ``loc`` (a pydantic error location) that is there."""
    if tree is None:
        return None
    line, node = tree.line, tree
    for step in loc:
        if isinstance(step, int):
            items = node.items or ()
            if step >= len(items):
                break
            node = items[step]
            line = node.line
        else:
            member = node.member(step)
            if member is None:
                break
            node, line = member.node, member.line
    return line
