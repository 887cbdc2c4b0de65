"""The drop-in ``openkata-eval`` command: the Go runner's command line, run by pytest.

``openkata-eval [flags] <skill-path|scenario-path>`` accepts the reference's command line
(spec section 1) as Go's ``flag`` package parses it, and runs pytest in-process on the path
with the plugin:

- ``-name value``, ``--name value``, ``-name=value`` and ``--name=value``; a flag given twice
  takes its last value; ``--`` ends the flags. Parsing stops at the first argument that is not
  a flag, and only that first argument, the path, is used, as in the reference. Unlike the
  reference, which ignores the rest silently (spec 13.2), a one-line warning on stderr names
  what is ignored.
- ``-h``/``--help`` prints the usage (the reference's text, flags as Go's ``PrintDefaults``
  lays them out) to stderr, as Go does, and exits 0. An unknown flag, a flag without its value
  or a ``--threshold`` that Go's ``strconv.ParseInt(s, 0, 64)`` refuses prints Go's message
  and the usage to stderr and exits 2; so does a missing path.
- The flags map to the plugin's options: ``--backend`` -> ``--eval-backend``, ``--model`` ->
  ``--eval-model``, ``--judge-model`` -> ``--eval-judge-model``, ``--output`` ->
  ``--eval-output``, ``--model-label`` -> ``--eval-model-label``, each only when not empty;
  ``--threshold`` -> ``--eval-threshold`` only when above 0. As in the reference, a flag
  overrides the config file and the ``OPENKATA_EVAL_*`` environment only when it is set that
  way. The plugin validates the values the reference does not: an unknown backend or a
  threshold above 100 is a pytest usage error (exit 4) instead of a silent fallback.
- The path is classified as the reference does: a last element starting with ``scenario-`` is
  a scenario, whose skill is two levels up; anything else is a skill. Trailing slashes are
  removed first, so that ``skills/x/evals/scenario-0/`` names skill ``skills/x``, where the
  reference looks for ``skills/x/evals/SKILL.md`` and fails (spec 13.1). Before pytest starts,
  ``<skill>/SKILL.md`` must exist: else ``error: SKILL.md not found in <skill>``, exit 1. Then
  the scenarios are discovered as the reference discovers them (real ``scenario-*`` folders
  of ``<skill>/evals``), with its messages and exit 1: ``error: no eval scenarios found in
  <skill>/evals/`` for a skill without any; for a scenario path, ``error: no evals directory
  found: open <skill>/evals: ...`` or ``error: scenario <name> not found``. The later checks
  (kiro-cli or Docker missing) are the plugin's, with its own messages.

pytest runs in-process with ``-q``: someone whose Makefile called the Go binary gets the
reference's score lines (the plugin's summary, which starts with the skill path as the
reference's header did), pytest's failure details and one result line, without pytest's
session header (platform, rootdir, plugin list). Other pytest options can be given through
``PYTEST_ADDOPTS``. The plugin is named with ``-p openkata``, so the command also works with
``PYTEST_DISABLE_PLUGIN_AUTOLOAD`` set. pytest's cache stays on: the plugin's result cache
lives in it. The report goes where spec section 10 says: in skill mode under
``<skill>/evals/results/<model>/`` unless ``--output`` is given (a ``/`` in the model is a
``_`` there, one folder the catalogue can see), in scenario mode (``--eval-partial``) only
with ``--output``. In skill mode pytest gets ``<skill>/evals``, so that the Python tests a skill
folder may hold are not run.

Exit codes, this command's (pytest's, as the plugin sets them) beside the reference's:

====================================================  ========  =========
case                                                  here      reference
====================================================  ========  =========
skill at or above the threshold                       0         0
skill below the threshold                             1         1
scenario path (a partial run, not gated), scored      0         0
scenario path with a scenario that errored            1         0
bad flag or no path (usage printed)                   2         2
SKILL.md missing                                      1         1
run interrupted (Ctrl-C)                              2         (killed)
internal error                                        3         -
bad setting (unknown backend, threshold above 100)    4         (no check)
a skill without scenarios, an unknown scenario        1         1
nothing collected (e.g. ``-k`` in PYTEST_ADDOPTS)     5         -
====================================================  ========  =========
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pytest_openkata.contracts.config import DEFAULT_THRESHOLD
from pytest_openkata.contracts.errors import OpenkataError
from pytest_openkata.core.scenario import discover_scenarios

__all__ = [
    "FLAGS",
    "Flag",
    "FlagError",
    "HelpRequested",
    "Parsed",
    "Target",
    "classify",
    "go_parse_int",
    "go_quote",
    "main",
    "parse_flags",
    "pytest_args",
    "scenario_error",
    "usage_text",
]

SCENARIO_PREFIX = "scenario-"

USAGE_HEAD = """\
Usage: openkata-eval [flags] <skill-path|scenario-path>

Examples:
  openkata-eval skills/commit-conventions
  openkata-eval skills/commit-conventions/evals/scenario-0

Flags:
"""


@dataclass(frozen=True)
class Flag:
    """One flag of the reference, its Go type and help, and the plugin option it sets."""

    name: str
    kind: Literal["string", "int"]
    usage: str
    option: str


FLAGS = (
    Flag("backend", "string", "LLM backend: kiro or http", "--eval-backend"),
    Flag("judge-model", "string", "model for judge calls", "--eval-judge-model"),
    Flag("model", "string", "model for agent calls", "--eval-model"),
    Flag("model-label", "string", "human-readable label for the model", "--eval-model-label"),
    Flag("output", "string", "JSON output file or directory path", "--eval-output"),
    Flag(
        "threshold",
        "int",
        f"pass threshold percentage (default {DEFAULT_THRESHOLD})",
        "--eval-threshold",
    ),
)
_BY_NAME = {flag.name: flag for flag in FLAGS}


def usage_text() -> str:
    """The reference's usage, ending with Go's ``flag.PrintDefaults`` lines: flags sorted by
    name, ``  -name type``, then the help on the next line after four spaces and a tab (on the
    same line after a tab for a one-letter flag without a type). No flag has a non-zero
    default, so none shows ``(default ...)``; the threshold's help says it itself."""
    lines = [USAGE_HEAD]
    for flag in sorted(FLAGS, key=lambda f: f.name):
        head = f"  -{flag.name} {flag.kind}"
        gap = "\t" if len(head) <= 4 else "\n    \t"
        lines.append(head + gap + flag.usage.replace("\n", "\n    \t") + "\n")
    return "".join(lines)


# --- Go's flag parsing ---------------------------------------------------------------------


class FlagError(OpenkataError):
    """The command line is refused; the message is Go's (``flag provided but not defined:
    -x``)."""


class HelpRequested(Exception):
    """``-h``, ``-help`` or ``--help``."""


@dataclass(frozen=True)
class Parsed:
    """The flags given (last value of each) and the arguments after them."""

    values: dict[str, str | int] = field(default_factory=dict)
    args: tuple[str, ...] = ()


_INT64_MAX = (1 << 63) - 1
_UINT64_MAX = (1 << 64) - 1


def go_parse_int(text: str) -> int:
    """``strconv.ParseInt(text, 0, 64)``, the parser of Go's int flags: a sign, then decimal,
    ``0x`` hex, ``0o`` or leading-``0`` octal or ``0b`` binary, with ``_`` between digits.
    Raises ValueError ``parse error`` or ``value out of range`` (the flag package's words)."""
    if not text:
        raise ValueError("parse error")
    digits, negative = text, False
    if digits[0] in "+-":
        negative, digits = digits[0] == "-", digits[1:]
    if not digits:
        raise ValueError("parse error")
    base, body = 10, digits
    if digits[0] == "0":
        prefix = digits[1:2].lower()
        if len(digits) >= 3 and prefix in {"b", "o", "x"}:
            base, body = {"b": 2, "o": 8, "x": 16}[prefix], digits[2:]
        else:
            base, body = 8, digits[1:]
    value, underscores = 0, False
    for char in body:
        if char == "_":
            underscores = True
            continue
        digit = int(char, 36) if char.isascii() and char.isalnum() else 99
        if digit >= base:
            raise ValueError("parse error")
        value = value * base + digit
        if value > _UINT64_MAX:  # ParseUint stops at the overflow, before later characters
            raise ValueError("value out of range")
    if underscores and not _underscores_ok(digits):
        raise ValueError("parse error")
    if value > _INT64_MAX + (1 if negative else 0):
        raise ValueError("value out of range")
    return -value if negative else value


def _underscores_ok(digits: str) -> bool:
    """Go's ``underscoreOK``: each ``_`` sits between digits (a base prefix counts as one)."""
    saw, start = "^", 0
    hexadecimal = False
    if len(digits) >= 2 and digits[0] == "0" and digits[1].lower() in "box":
        saw, start, hexadecimal = "0", 2, digits[1].lower() == "x"
    for char in digits[start:]:
        if (char.isascii() and char.isdigit()) or (hexadecimal and char.lower() in "abcdef"):
            saw = "0"
        elif char == "_":
            if saw != "0":
                return False
            saw = "_"
        elif saw == "_":
            return False
        else:
            saw = "!"
    return saw != "_"


_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


def go_quote(text: str) -> str:
    """Go's ``%q`` of a string (``strconv.Quote``): double quotes, backslash escapes, printable
    characters as they are, others as ``\\x``, ``\\u`` or ``\\U`` escapes. A byte that was
    not UTF-8 (a surrogate escape in ``sys.argv``) is written ``\\xNN``, as Go writes it."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char in {'"', "\\"}:
            out.append("\\" + char)
        elif char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif char.isprintable():
            out.append(char)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def parse_flags(argv: Sequence[str]) -> Parsed:
    """Parse as Go's ``flag.FlagSet.Parse``; raises :class:`HelpRequested` or
    :class:`FlagError`."""
    values: dict[str, str | int] = {}
    rest = list(argv)
    while rest:
        arg = rest[0]
        if len(arg) < 2 or arg[0] != "-":
            break
        if arg == "--":
            rest.pop(0)
            break
        name = arg[2:] if arg[1] == "-" else arg[1:]
        if not name or name[0] in "-=":
            raise FlagError(f"bad flag syntax: {arg}")
        rest.pop(0)
        name, has_value, value = name.partition("=")
        flag = _BY_NAME.get(name)
        if flag is None:
            if name in {"help", "h"}:
                raise HelpRequested
            raise FlagError(f"flag provided but not defined: -{name}")
        if not has_value:
            if not rest:
                raise FlagError(f"flag needs an argument: -{name}")
            value = rest.pop(0)  # the next argument, even one that starts with "-"
        if flag.kind == "int":
            try:
                values[name] = go_parse_int(value)
            except ValueError as exc:
                shown = go_quote(value)
                raise FlagError(f"invalid value {shown} for flag -{name}: {exc}") from None
        else:
            values[name] = value
    return Parsed(values, tuple(rest))


# --- the path ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """What the path names: the path pytest gets, the skill folder and, in scenario mode, the
    scenario's name."""

    path: str
    skill_path: str
    scenario: str | None


def _go_clean_dir(path: str) -> str:
    """Go's ``filepath.Dir``: all but the last element, cleaned; ``.`` when nothing is left."""
    head = path[: path.rfind("/") + 1]
    cleaned = os.path.normpath(head) if head else "."
    return "/" if cleaned.startswith("//") else cleaned


def classify(path: str) -> Target:
    """Classify ``path`` as the reference does, after dropping trailing slashes (the fix of
    spec 13.1): ``.../scenario-*`` is a scenario of the skill two levels up, anything else a
    skill, used as written."""
    trimmed = path.rstrip("/") or ("/" if path else "")
    last = trimmed.rsplit("/", 1)[-1]
    if last.startswith(SCENARIO_PREFIX):
        return Target(trimmed, _go_clean_dir(_go_clean_dir(trimmed)), last)
    return Target(trimmed, trimmed, None)


def scenario_error(target: Target) -> str | None:
    """The reference's error when ``target`` has no scenario to run (spec section 1, step 4),
    or None."""
    evals = Path(target.skill_path, "evals")
    found = {entry.name for entry in discover_scenarios(evals)}
    if target.scenario is None:
        return None if found else f"no eval scenarios found in {target.skill_path}/evals/"
    try:
        os.listdir(evals)
    except OSError as exc:
        reason = (exc.strerror or str(exc)).lower()
        return f"no evals directory found: open {evals}: {reason}"
    return None if target.scenario in found else f"scenario {target.scenario} not found"


def pytest_args(parsed: Parsed, target: Target) -> list[str]:
    """pytest's command line for a run of ``target`` with the flags of ``parsed``."""
    args = ["-q", "-p", "openkata"]
    for name, value in parsed.values.items():
        flag = _BY_NAME[name]
        if flag.kind == "int":
            if isinstance(value, int) and value > 0:
                args += [flag.option, str(value)]
        elif value:
            args += [flag.option, str(value)]
    path = target.path
    if target.scenario is None:
        # The skill's scenarios only, as the reference runs them: not the Python tests a skill
        # folder may hold (its scripts' own, say).
        path = f"{path}/evals"
    else:
        # The reference's scenario mode: not gated, and no report unless --output names one,
        # even when the skill has no other scenario.
        args.append("--eval-partial")
    # A path starting with "-" would read as an option.
    args.append(f"./{path}" if path.startswith("-") else path)
    return args


# --- the command ---------------------------------------------------------------------------


def _usage_error(message: str | None) -> int:
    if message is not None:
        print(message, file=sys.stderr)
    sys.stderr.write(usage_text())
    return 2


def main(argv: list[str] | None = None) -> int:
    """Run ``openkata-eval`` with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    try:
        parsed = parse_flags(sys.argv[1:] if argv is None else argv)
    except HelpRequested:
        sys.stderr.write(usage_text())
        return 0
    except FlagError as exc:
        return _usage_error(str(exc))
    if not parsed.args:
        return _usage_error(None)
    path, *ignored = parsed.args
    if ignored:
        print(
            f"warning: ignoring the arguments after {path}: {' '.join(ignored)} "
            "(flags must come before the path, as with the Go openkata-eval)",
            file=sys.stderr,
        )
    target = classify(path)
    if not os.path.exists(os.path.join(target.skill_path, "SKILL.md")):
        print(f"error: SKILL.md not found in {target.skill_path}", file=sys.stderr)
        return 1
    problem = scenario_error(target)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    sys.stdout.flush()
    sys.stderr.flush()
    # Imported here: the parsing above is plain Python, testable without a pytest session.
    import pytest

    return int(pytest.main(pytest_args(parsed, target)))
