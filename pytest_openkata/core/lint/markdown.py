"""Markdown as the task and SKILL.md rules read it: fenced code, code spans, and the
paths a code span may name."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

_EXTENSION = re.compile(r"[\w-]\.[A-Za-z][A-Za-z0-9]{0,7}$")


def is_path_token(token: str) -> bool:
    return "/" in token or "\\" in token or _EXTENSION.search(token) is not None


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def markdown_lines(text: str) -> Iterator[tuple[int, str, bool]]:
    """Each line of a Markdown text with its number and whether it belongs to a fenced code
    block (its fence lines included). Indented code blocks are not told apart from prose."""
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        match = _FENCE.match(line)
        if fence is None and match is not None:
            fence = match.group(1)
            yield number, line, True
        elif fence is not None:
            closing = match is not None and match.group(1)[0] == fence[0]
            if closing and match is not None and len(match.group(1)) >= len(fence):
                fence = None
            yield number, line, True
        else:
            yield number, line, False


def code_spans(line: str) -> list[tuple[int, int, str]]:
    """The code spans of one line: start, end and content. A run of backticks opens a span
    that the next run of as many closes, as in CommonMark (spans across lines are not
    recognised)."""
    runs = [(m.start(), m.end()) for m in re.finditer(r"`+", line)]
    spans = []
    index = 0
    while index < len(runs):
        start, end = runs[index]
        width = end - start
        close = next(
            (k for k in range(index + 1, len(runs)) if runs[k][1] - runs[k][0] == width), None
        )
        if close is None:
            index += 1
            continue
        spans.append((start, runs[close][1], line[end : runs[close][0]].strip()))
        index = close + 1
    return spans


_NOT_IN_PATHS = re.compile(r"[\s*?<>{}\[\]|$=:;,\"'()@#%!&^~+`]")


def input_path(span: str) -> str | None:
    """The relative path a code span shows, normalised, or None when it is no such path: it
    needs a ``/`` or a file extension, and no spaces, URL, absolute or home path, command
    syntax (``=``, ``$``, ``|``, options), placeholders or globs, or ``..``."""
    if not span or span.startswith(("/", "\\", "-")) or _NOT_IN_PATHS.search(span):
        return None
    if "/" not in span and _EXTENSION.search(span) is None:
        return None
    parts = [p for p in span.replace("\\", "/").split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        return None
    return "/".join(parts)


def in_inputs(scenario_dir: Path, path: str) -> bool:
    if path == "inputs" or path.startswith("inputs/"):
        return (scenario_dir / path).exists()
    return (scenario_dir / "inputs" / path).exists()
