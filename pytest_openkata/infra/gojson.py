"""A JSON serializer whose output matches Go's ``json.MarshalIndent(v, "", "  ")`` + ``"\\n"``.

The reference runner writes its reports with Go's encoder, and ``generate-versions`` and
people diff them, so our reports have to be byte-identical. Python's ``json`` differs in
float formatting (``100.0`` vs ``100``) and escaping (Go is HTML-safe), hence this module.
"""

from __future__ import annotations

import functools
import math
import re
from decimal import Decimal
from json.encoder import encode_basestring as _python_quote

_INDENT = "  "

_SHORT_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\b": "\\b",
    "\f": "\\f",
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
# What Go's encoder escapes and Python's encode_basestring writes as it is.
_GO_ALSO_ESCAPES = re.compile("[<>&\u2028\u2029\ud800-\udfff]")
_EXACT_INTEGERS = 2.0**53  # below it every integral float is an exact int


def dumps(value: object) -> str:
    """Serialize ``value`` exactly as Go's ``json.MarshalIndent(v, "", "  ")`` plus ``"\\n"``.

    Supports dict (insertion order is kept, keys must be str), list, tuple, str, bool,
    int, float and None. Raises ValueError for NaN or infinity and TypeError otherwise.
    """
    parts: list[str] = []
    _encode(value, 0, parts)
    parts.append("\n")
    return "".join(parts)


def encode_string(text: str) -> str:
    """Quote and escape ``text`` as Go's encoder does with HTML escaping on."""
    # Python's own (C) quoting escapes quotes, backslashes and control characters as Go does;
    # what Go escapes besides is rare, so it is looked for afterwards.
    quoted = _python_quote(text)
    if _GO_ALSO_ESCAPES.search(quoted):
        quoted = _GO_ALSO_ESCAPES.sub(_escape_match, quoted)
    return quoted


def _escape_match(match: re.Match[str]) -> str:
    return _escape_char(match.group())


def format_float(number: float) -> str:
    """Format a finite float as Go's ``encoding/json`` does (float64).

    Shortest round-trip digits, fixed notation for 1e-6 <= |x| < 1e21 (without a trailing
    ``.0``), and exponent notation otherwise with a minimal negative exponent (``1e-7``).
    """
    magnitude = abs(number)
    if magnitude < _EXACT_INTEGERS and (number or math.copysign(1.0, number) > 0):
        # The common cases, where Python's own text is Go's: an integral float as its int,
        # any other in fixed notation with the shortest digits (repr's form from 1e-4 up).
        if number.is_integer():
            return str(int(number))
        if magnitude >= 1e-4:
            return repr(number)
    if not math.isfinite(number):
        raise ValueError(f"unsupported float value: {number!r}")
    shortest = repr(number)
    if magnitude != 0 and (magnitude < 1e-6 or magnitude >= 1e21):
        return _go_exponent_form(shortest)
    return _fixed_form(shortest)


def _encode(value: object, depth: int, parts: list[str]) -> None:
    if value is None:
        parts.append("null")
    elif isinstance(value, bool):
        parts.append("true" if value else "false")
    elif isinstance(value, int):
        parts.append(str(value))
    elif isinstance(value, float):
        parts.append(format_float(value))
    elif isinstance(value, str):
        parts.append(encode_string(value))
    elif isinstance(value, dict):
        _encode_object(value, depth, parts)
    elif isinstance(value, list | tuple):
        _encode_array(value, depth, parts)
    else:
        raise TypeError(f"cannot serialize {type(value).__name__} to Go JSON")


def _encode_object(mapping: dict[object, object], depth: int, parts: list[str]) -> None:
    if not mapping:
        parts.append("{}")
        return
    inner = "\n" + _INDENT * (depth + 1)
    parts.append("{")
    for index, (key, item) in enumerate(mapping.items()):
        if not isinstance(key, str):
            raise TypeError(f"object keys must be str, not {type(key).__name__}")
        parts.append(("," if index else "") + inner + _encode_key(key) + ": ")
        _encode(item, depth + 1, parts)
    parts.append("\n" + _INDENT * depth + "}")


@functools.lru_cache(maxsize=1024)
def _encode_key(key: str) -> str:
    return encode_string(key)  # a report repeats a few dozen keys thousands of times


def _encode_array(items: list[object] | tuple[object, ...], depth: int, parts: list[str]) -> None:
    if not items:
        parts.append("[]")
        return
    inner = "\n" + _INDENT * (depth + 1)
    parts.append("[")
    for index, item in enumerate(items):
        parts.append(("," if index else "") + inner)
        _encode(item, depth + 1, parts)
    parts.append("\n" + _INDENT * depth + "]")


def _escape_char(ch: str) -> str:
    escaped = _SHORT_ESCAPES.get(ch)
    if escaped is not None:
        return escaped
    code = ord(ch)
    if code < 0x20:
        return f"\\u{code:04x}"
    if 0xD800 <= code <= 0xDFFF:
        # A lone surrogate is what invalid UTF-8 turns into on the Python side;
        # Go writes invalid UTF-8 as the replacement character.
        return "\\ufffd"
    return ch


def _fixed_form(shortest: str) -> str:
    text = format(Decimal(shortest), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def _go_exponent_form(shortest: str) -> str:
    """Turn Python's exponent repr (``1e-07``) into Go's (``1e-7``).

    Both print at least two exponent digits; Go then drops the leading zero of a
    two-digit negative exponent only.
    """
    mantissa, _, exponent = shortest.partition("e")
    sign, digits = exponent[0], exponent[1:]
    if sign == "-" and len(digits) == 2 and digits[0] == "0":
        digits = digits[1:]
    return f"{mantissa}e{sign}{digits}"
