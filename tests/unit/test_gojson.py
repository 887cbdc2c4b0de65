from __future__ import annotations

import json
import math
import random
from decimal import Decimal
from pathlib import Path

import pytest

from pytest_openkata.infra.gojson import dumps

REAL_REPORT = Path(
    "/work/shared/corpus/openkata/skills/critical-thinking/evals/results/"
    "claude-sonnet-4.6/2026-06-22T075103.json"
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (100.0, "100"),
        (0.0, "0"),
        (-0.0, "-0"),
        (87.25, "87.25"),
        (66.66666666666666, "66.66666666666666"),
        (33.33333333333333, "33.33333333333333"),
        (0.1, "0.1"),
        (-2.5, "-2.5"),
        (1e-6, "0.000001"),
        (1e-5, "0.00001"),
        (1e-7, "1e-7"),
        (2.5e-10, "2.5e-10"),
        (5e-324, "5e-324"),
        (1e20, "100000000000000000000"),
        (123456789012345678.0, "123456789012345680"),
        (1e21, "1e+21"),
        (-1.5e300, "-1.5e+300"),
    ],
)
def test_floats_use_go_formatting(value: float, expected: str) -> None:
    assert dumps(value) == expected + "\n"


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_floats_are_rejected(value: float) -> None:
    with pytest.raises(ValueError, match="unsupported float"):
        dumps({"x": value})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, "true"),
        (False, "false"),
        (None, "null"),
        (0, "0"),
        (-42, "-42"),
        (12345678901234567890, "12345678901234567890"),
    ],
)
def test_scalars(value: object, expected: str) -> None:
    assert dumps(value) == expected + "\n"


def test_bool_is_not_a_number() -> None:
    assert dumps([True, 1, 1.0]) == "[\n  true,\n  1,\n  1\n]\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain", '"plain"'),
        ("<a href>&", '"\\u003ca href\\u003e\\u0026"'),
        ("\u2028\u2029", '"\\u2028\\u2029"'),
        ('say "hi" \\ there', '"say \\"hi\\" \\\\ there"'),
        ("\n\r\t\b\f", '"\\n\\r\\t\\b\\f"'),
        ("\x00\x01\x0b\x1b\x1f", '"\\u0000\\u0001\\u000b\\u001b\\u001f"'),
        ("\x7f", '"\x7f"'),
        ("caf\u00e9 \u2014 \u65e5\u672c \U0001f600", '"caf\u00e9 \u2014 \u65e5\u672c \U0001f600"'),
        ("bad \ud800 and \udfff", '"bad \\ufffd and \\ufffd"'),
        ("", '""'),
    ],
)
def test_strings_are_escaped_like_go(text: str, expected: str) -> None:
    assert dumps(text) == expected + "\n"


def test_keys_are_escaped_too() -> None:
    assert dumps({"a<b": 1}) == '{\n  "a\\u003cb": 1\n}\n'


def test_empty_containers() -> None:
    assert dumps([]) == "[]\n"
    assert dumps(()) == "[]\n"
    assert dumps({}) == "{}\n"
    assert dumps({"a": [], "b": {}}) == '{\n  "a": [],\n  "b": {}\n}\n'


def test_nested_indentation_and_key_order() -> None:
    value = {"z": 1, "a": [{"k": "v", "n": None}, [1, 2]], "m": (True,)}
    expected = (
        "{\n"
        '  "z": 1,\n'
        '  "a": [\n'
        "    {\n"
        '      "k": "v",\n'
        '      "n": null\n'
        "    },\n"
        "    [\n"
        "      1,\n"
        "      2\n"
        "    ]\n"
        "  ],\n"
        '  "m": [\n'
        "    true\n"
        "  ]\n"
        "}\n"
    )
    assert dumps(value) == expected


@pytest.mark.parametrize("value", [{1: "x"}, {"a": object()}, {"a": {1, 2}}, b"bytes"])
def test_unsupported_values_raise_type_error(value: object) -> None:
    with pytest.raises(TypeError):
        dumps(value)


def test_real_reference_report_round_trips_byte_for_byte() -> None:
    text = REAL_REPORT.read_text(encoding="utf-8")
    assert dumps(json.loads(text)) == text


def go_fixed(number: float) -> str:
    """Go's text of a float between 1e-6 and 1e21: its shortest digits in fixed notation."""
    text = format(Decimal(repr(number)), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


@pytest.mark.parametrize("seed", range(20))
def test_floats_of_every_magnitude_in_fixed_notation(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(200):
        number = rng.choice([-1, 1]) * 10 ** rng.uniform(-6, 20.9)
        if rng.random() < 0.3:
            number = float(round(number))
        assert dumps(number) == go_fixed(number) + "\n", repr(number)


CHARACTERS = 'ab <>&"\\\n\t\x00\x1f\x7f\u00e9\u2028\u2029\U0001f600'


def random_document(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(7 if depth < 4 else 4)
    if kind == 0:
        return rng.choice([None, True, False, 0, -7, 2**70, 0.5, 100.0, -2.25, 1e-7, 1e22])
    if kind in (1, 2, 3):
        return "".join(rng.choice(CHARACTERS) for _ in range(rng.randrange(6)))
    if kind in (4, 5):
        keys = ("".join(rng.choice(CHARACTERS) for _ in range(3)) for _ in range(rng.randrange(4)))
        return {key: random_document(rng, depth + 1) for key in keys}
    return [random_document(rng, depth + 1) for _ in range(rng.randrange(4))]


@pytest.mark.parametrize("seed", range(100))
def test_documents_round_trip_with_html_characters_escaped(seed: int) -> None:
    document = random_document(random.Random(seed))
    text = dumps(document)
    assert json.loads(text) == document
    assert not any(character in text for character in "<>&\u2028\u2029")
