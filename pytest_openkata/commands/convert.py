"""``python -m pytest_openkata convert SRC --to DEST``: evals of any supported format
written as openkata scenario folders, or back as skill-creator's ``evals.json``.

``SRC`` is a folder holding evals of one format (found by the formats' own detection, or named
with ``--from``). With ``--to-format openkata`` (the default) each scenario becomes
``DEST/scenario-<name>/`` (DEST is an ``evals`` folder); with ``--to-format skill-creator``
DEST is a skill folder and gets ``evals/evals.json`` and ``evals/files/``. Nothing is
overwritten; what the target cannot hold is listed, one line each. Exit 0 when written, 2 when
the source cannot be read or a target exists (nothing written then).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_openkata.contracts.errors import OpenkataError
from pytest_openkata.core.formats import EvalScenario, detect_formats, load_format
from pytest_openkata.core.formats.writers import ConvertError, write_evals_json, write_openkata
from pytest_openkata.infra.registry import FORMATS
from pytest_openkata.infra.text import visible

USAGE_ERROR = 2
TARGETS = ("openkata", "skill-creator")


def read(source: Path, name: str | None) -> list[EvalScenario]:
    """Every scenario of ``source`` in the format named ``name`` (or the one it holds)."""
    if name is None:
        found = detect_formats(source)
        if not found:
            raise ConvertError(
                f"{source}: holds no evals of a known format ({', '.join(FORMATS.names())})"
            )
        if len(found) > 1:
            names = ", ".join(f.name for f in found)
            raise ConvertError(
                f"{source}: holds evals of several formats ({names}); choose one with --from"
            )
        fmt = found[0]
    else:
        fmt = load_format(name)
        if not fmt.detect(source):
            raise ConvertError(f"{source}: holds no evals of the {name} format")
    return [fmt.load(s) for s in fmt.scenarios(source)]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_openkata convert",
        description="Write evals of a supported format (" + ", ".join(FORMATS.names()) + ") as "
        "openkata scenario folders, or as skill-creator's evals.json. Never overwrites; lists "
        "what the target cannot hold.",
    )
    parser.add_argument("source", type=Path, metavar="SRC", help="a folder holding evals")
    parser.add_argument(
        "--to",
        required=True,
        type=Path,
        metavar="DEST",
        help="an evals folder (openkata) or a skill folder (skill-creator)",
    )
    parser.add_argument(
        "--from",
        dest="source_format",
        choices=FORMATS.names(),
        help="the source's format (default: detected)",
    )
    parser.add_argument(
        "--to-format",
        choices=TARGETS,
        default="openkata",
        help="the target format (default: openkata)",
    )
    args = parser.parse_args(argv)
    try:
        scenarios = read(args.source, args.source_format)
        if args.to_format == "openkata":
            notes = write_openkata(scenarios, args.to)
        else:
            notes = write_evals_json(scenarios, args.to)
    except OpenkataError as exc:  # ConvertError and FormatError among them
        print(visible(f"convert: {exc}"), file=sys.stderr)
        return USAGE_ERROR
    except OSError as exc:  # a target that cannot be written, a file that cannot be read
        where = f"{exc.filename}: " if exc.filename else ""
        print(visible(f"convert: {where}{exc.strerror or exc}; nothing written"), file=sys.stderr)
        return USAGE_ERROR
    print(f"wrote {len(scenarios)} scenario(s) to {args.to} as {args.to_format}")
    if notes:
        print("not carried over:")
        for note in notes:
            print(visible(f"  {note}"))
    return 0
