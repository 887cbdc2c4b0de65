"""Text rules of the reference runner shared by the judge and the kiro agent (Go's trimming and
``cleanKiroOutput``), the wording the reporters share, and the two rules every text a model
wrote follows on its way out: valid Unicode everywhere (:func:`valid_unicode`), and on a
terminal, control characters shown rather than obeyed (:func:`visible`)."""

from __future__ import annotations

import re
from typing import Any

_ANSI_RE = re.compile(r"\x1b\[[0-9;]*[a-zA-Z]")

# Go's strings.TrimSpace set (unicode.White_Space). str.strip() would also remove \x1c-\x1f.
_GO_WHITESPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000"
)


# What a JSON "\\ud800" escape decodes to in Python: a code point no UTF-8 encoder writes.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# The escape itself, in JSON text (and YAML's, which also has an eight-digit one).
_SURROGATE_ESCAPE = re.compile(r"\\(?:u|U0000)[dD][89a-fA-F]")

# What a terminal acts on instead of showing: C0 controls but tab and newline (escape sequences
# begin with ESC; a carriage return overwrites the line), DEL, C1 controls (CSI alone starts a
# sequence on some terminals, NEL ends a line), the Unicode line and paragraph separators, and
# the bidirectional embeddings, overrides and isolates that reorder what is shown.
_NOT_SHOWN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def valid_unicode(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD, as Go's JSON decoder does: a
    model's answer may hold ``\\ud800`` escapes, which no report could then be written with."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def utf8(text: str) -> bytes:
    """``text`` as UTF-8 to send (a request's body, an agent's prompt); a lone surrogate that
    reached it goes as U+FFFD, never a crash of the call. Only a text that holds one pays for
    the replacement."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return valid_unicode(text).encode()


def valid_decoded(raw: str, value: Any) -> Any:
    """``value``, decoded from the JSON or YAML text ``raw``, made :func:`valid_texts` when
    ``raw`` escapes a surrogate (else it is returned as it is, unwalked). Raises
    :class:`RecursionError` for a value nested too deeply to walk."""
    return valid_texts(value) if holds_surrogate_escape(raw) else value


def holds_surrogate_escape(raw: str) -> bool:
    """Whether the JSON or YAML text ``raw`` escapes a surrogate (``\\ud800``, half of a pair
    or alone): only then can a text decoded from it hold a lone one, and need
    :func:`valid_texts`."""
    return _SURROGATE_ESCAPE.search(raw) is not None


def valid_texts(value: Any) -> Any:
    """Decoded JSON ``value`` with every string in it, keys included, made
    :func:`valid_unicode`: what a model or an agent sent, as Go's decoder would have read it.
    It recurses: a value nested too deeply raises :class:`RecursionError`."""
    if isinstance(value, str):
        return valid_unicode(value)
    if isinstance(value, list):
        return [valid_texts(item) for item in value]
    if isinstance(value, dict):
        return {
            valid_unicode(key) if isinstance(key, str) else key: valid_texts(item)
            for key, item in value.items()
        }
    return value


def _shown_as_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code == 0x0D:
        return "\\r"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` safe to print on a terminal: lines end at ``\\n`` (or ``\\r\\n``) only, and
    every other control character appears as its escape (``\\x1b``, ``\\r``, ``\\u2028``), so
    that a model's text can neither move the cursor, erase or recolour what was printed, retitle
    the window, break a line where a reader would not, nor reorder the characters shown; and it
    is :func:`valid_unicode`, so that a UTF-8 terminal can take it."""
    return _NOT_SHOWN.sub(_shown_as_escape, valid_unicode(text).replace("\r\n", "\n"))


def one_line(text: str) -> str:
    """``text`` :func:`visible` and on one line, its line breaks shown as ``\\n``: for a name, a
    description or a query printed inside a line of its own, which a text of several lines
    must not end early (and so print lines that look like the run's own)."""
    return visible(text).replace("\n", "\\n")


def visible_lines(text: str) -> list[str]:
    """The lines of ``text`` as a terminal shows them (:func:`visible`), at least one; a final
    newline ends the last line rather than starting another, as in ``str.splitlines``."""
    shown = visible(text)
    return shown.removesuffix("\n").split("\n")


def strip_ansi(text: str) -> str:
    return _ANSI_RE.sub("", text)


def go_trim(text: str) -> str:
    """Go's ``strings.TrimSpace``."""
    return text.strip(_GO_WHITESPACE)


def clean_output(text: str) -> str:
    """The reference's ``cleanKiroOutput``: remove ANSI codes, ``> `` lines and code-fence
    lines, then trim."""
    kept = [
        line
        for line in strip_ansi(text).split("\n")
        if not line.startswith("> ") and not go_trim(line).startswith("```")
    ]
    return go_trim("\n".join(kept))


def plural(count: int, noun: str) -> str:
    """``1 scenario``, ``2 scenarios``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def signed_points(value: float) -> str:
    """A difference in percentage points as the reports show it: ``+12.5``, ``-3.0``."""
    return f"{value:+.1f}"
