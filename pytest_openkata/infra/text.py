"""Text rules of the reference runner shared by the judge and the kiro agent (Go's trimming and
``cleanKiroOutput``), and the wording the reporters share."""

from __future__ import annotations

import re

_ANSI_RE = re.compile(r"\x1b\[[0-9;]*[a-zA-Z]")

# Go's strings.TrimSpace set (unicode.White_Space). str.strip() would also remove \x1c-\x1f.
_GO_WHITESPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000"
)


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
