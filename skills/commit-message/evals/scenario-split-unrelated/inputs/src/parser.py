"""Parse simple ``key = value`` configuration files."""

from __future__ import annotations


class ParseError(ValueError):
    """Raised when a line cannot be parsed."""

    def __init__(self, line_no: int, message: str) -> None:
        super().__init__(f"line {line_no}: {message}")
        self.line_no = line_no


def parse_config(text: str) -> dict[str, str]:
    """Return the settings defined in ``text`` as a dictionary.

    Blank lines and lines starting with ``#`` are ignored. Values may
    themselves contain ``=`` characters; only the first ``=`` separates
    the key from the value.
    """
    settings: dict[str, str] = {}
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "=" not in line:
            raise ParseError(line_no, "expected 'key = value'")
        key, value = line.split("=", 1)
        key = key.strip()
        if not key:
            raise ParseError(line_no, "empty key")
        settings[key] = value.strip()
    return settings
