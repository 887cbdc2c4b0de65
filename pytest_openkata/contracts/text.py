"""How invalid UTF-8 becomes text, as the reference runner (written in Go) decodes it: the
judge reads workspace files this way, so the prompt bytes depend on it."""

from __future__ import annotations

import codecs

__all__ = ["GO_REPLACE", "go_decode"]

GO_REPLACE = "pytest-openkata-go-replace"
"""The codec error handler that decodes invalid UTF-8 as Go turns it into text: one U+FFFD per
invalid byte (Python's ``replace`` gives one per ill-formed sequence, so a truncated
three-byte character is one U+FFFD here and two in Go's JSON, and the prompt bytes differ)."""


def _one_per_byte(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeDecodeError):
        raise error
    return "\ufffd" * (error.end - error.start), error.end


codecs.register_error(GO_REPLACE, _one_per_byte)


def go_decode(data: bytes) -> str:
    """``data`` as UTF-8 text, each invalid byte one U+FFFD (:data:`GO_REPLACE`)."""
    return data.decode("utf-8", GO_REPLACE)
