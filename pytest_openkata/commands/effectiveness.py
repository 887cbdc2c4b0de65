"""``python -m pytest_openkata effectiveness [SKILLS-ROOT] [--json] [--update-versions PATH]
[--check] [--plugin-rule]``: what the skill catalogue will show per skill and model.

The rules are :mod:`pytest_openkata.core.catalogue`'s. By default every figure, the JSON, the
versions file and the check follow the catalogue's rule exactly; ``--plugin-rule`` shows the
plugin's rule instead. Wherever the other rule would show a skill or model differently, the text
view says so in a line under the skill (``by the plugin's rule: …``); with ``--json``,
``--update-versions`` or ``--check`` that line is a note. This module parses the arguments,
prints, and rewrites ``versions.json`` in place (atomically, keeping its mode). Notes (skipped
report files, differences, skills on one side only) go to stderr so that ``--json`` output
stays exact. Exit codes: 0 ok, 1 ``--check`` found dropped models or the versions file could
not be written, 2 bad arguments, a missing skills root or an unreadable versions file.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from pytest_openkata.core.catalogue import (
    Catalogue,
    Rule,
    RuleDifference,
    SkillEntry,
    VersionsFileError,
    VersionsUpdate,
    catalogue_document,
    read_catalogue,
    rule_differences,
    splice_versions,
    stale_models,
)
from pytest_openkata.infra import gojson
from pytest_openkata.infra.tempfiles import REMOVED, new_temp_file, remove_stale
from pytest_openkata.infra.text import visible

__all__ = ["main", "replace_in_place", "text_view"]

_BUMP_ADVICE = "bump the version first and run the evals after the bump"


def main(argv: list[str]) -> int:
    """Print the catalogue of ``SKILLS-ROOT`` (text, or Go-encoded JSON with ``--json``),
    update a versions.json's ``models`` entries, and/or check that no model is dropped.

    The text view is left out when ``--update-versions`` or ``--check`` is given, so that CI
    sees only their result; with ``--json`` their messages go to stderr."""
    parser = argparse.ArgumentParser(
        prog="python -m pytest_openkata effectiveness",
        description="Show what the skill catalogue will show per skill and model.",
    )
    parser.add_argument("root", nargs="?", default="skills", help="the skills (default: skills)")
    parser.add_argument("--json", action="store_true", help="print the catalogue's JSON")
    parser.add_argument(
        "--update-versions",
        metavar="PATH",
        help="rewrite the models entries of this versions.json in place",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 1 when a model with reports is dropped: its newest report is not for its"
        " skill's current version, or cannot be decoded",
    )
    parser.add_argument(
        "--plugin-rule",
        action="store_true",
        help="follow the plugin's rule rather than the catalogue's: the newest report by"
        " timestamp, nested model folders, the CHANGELOG's version when there is no tag, tiles",
    )
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed why
        return 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 2
    root = Path(args.root)
    if not root.is_dir():
        print(f"error: {root} is not a folder of skills", file=sys.stderr)
        return 2
    versions = Path(args.update_versions) if args.update_versions else None
    rule = Rule.PLUGIN if args.plugin_rule else Rule.CATALOGUE
    try:
        catalogue = read_catalogue(root, rule)
        differences = rule_differences(catalogue, read_catalogue(root, rule.other))
        update = _spliced(versions, catalogue) if versions is not None else None
    except (OSError, VersionsFileError) as exc:
        print(f"error: {_reason(exc)}", file=sys.stderr)
        return 2
    for skipped in catalogue.skipped:
        print(f"note: skipped {skipped.path}: {skipped.reason}", file=sys.stderr)
    messages = sys.stderr if args.json else sys.stdout
    if args.json or versions is not None or args.check:
        for difference in differences:
            print(
                visible(f"note: {difference.skill}: {_difference_line(difference, rule)}"),
                file=sys.stderr,
            )
    if args.json:
        sys.stdout.write(gojson.dumps(catalogue_document(catalogue)))
    elif versions is None and not args.check:
        sys.stdout.write(text_view(catalogue, differences))
    status = 0
    if versions is not None and update is not None:  # both or neither
        status = _write_update(versions, update, root, messages)
    if args.check:
        status = max(status, _check(catalogue, messages))
    return status


def text_view(catalogue: Catalogue, differences: Sequence[RuleDifference] = ()) -> str:
    """Per skill its version and the version's source, then per model its label,
    effectiveness and scenarios, or why it is not counted; last, the skill's ``differences``
    (what the other rule would show). A skill only the other rule lists has its differences
    under its name."""
    if not catalogue.skills and not differences:
        return f"no skills under {catalogue.root}\n"
    by_skill: dict[str, list[RuleDifference]] = {}
    for difference in differences:
        by_skill.setdefault(difference.skill, []).append(difference)
    skills = {skill.name: skill for skill in catalogue.skills}
    lines: list[str] = []
    for name in sorted(skills.keys() | by_skill.keys()):
        skill = skills.get(name)
        if skill is None:
            lines.append(f"{name}: not listed")
        else:
            lines.extend(_skill_lines(skill))
        lines.extend(f"  {_difference_line(d, catalogue.rule)}" for d in by_skill.get(name, ()))
    # Reports hold model text (an errored scenario's description holds its error).
    return "\n".join(visible(line) for line in lines) + "\n"


def _skill_lines(skill: SkillEntry) -> list[str]:
    lines = [_skill_title(skill)]
    for model in skill.models:
        facts = model.facts
        if facts is None or not model.counted:
            lines.append(f"  {model.model}: not counted: {model.why_dropped} ({model.path})")
            continue
        label = f' "{facts.label}"' if facts.label else ""
        lines.append(f"  {model.model}{label}: {facts.effectiveness}%")
        for scenario in facts.scenarios:
            verdict = "pass" if scenario.passed else "FAIL"
            description = " ".join(scenario.description.split())
            about = f": {description}" if description else ""
            lines.append(f"    {verdict} {scenario.name}{about}")
    if not skill.counted:
        lines.append(f"  no model counts for {skill.version.version}")
    return lines


def _difference_line(difference: RuleDifference, shown: Rule) -> str:
    return f"by {shown.other.value}: {difference.text}"


def replace_in_place(path: Path, text: str) -> list[Path]:
    """Write ``text`` over ``path`` atomically: a temporary file in the same folder, given the
    file's mode, then ``os.replace``; a symbolic link is followed, not replaced. Returns the
    temporary files of killed writers removed from the folder first."""
    target = Path(os.path.realpath(path))
    mode = stat.S_IMODE(target.stat().st_mode)
    removed = remove_stale(target.parent)
    fd, name = new_temp_file(target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(name, target)
    except BaseException:
        name.unlink(missing_ok=True)
        raise
    return removed


def _spliced(path: Path, catalogue: Catalogue) -> VersionsUpdate:
    # Bytes, not read_text: universal newlines would turn "\r\n" into "\n" on the way.
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise VersionsFileError(f"{path}: not UTF-8: {exc}") from exc
    return splice_versions(text, catalogue, str(path))


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError):
        return f"cannot read {exc.filename}: {exc.strerror or exc}"
    return str(exc)


def _write_update(path: Path, update: VersionsUpdate, root: Path, out: TextIO) -> int:
    if update.not_in_file:
        names = ", ".join(update.not_in_file)
        print(f"note: skills under {root} but not in {path} (not added): {names}", file=sys.stderr)
    if update.not_under_root:
        names = ", ".join(update.not_under_root)
        print(
            f"note: skills in {path} but not under {root} (left as they are): {names}",
            file=sys.stderr,
        )
    if not update.changed:
        print(f"{path} is up to date", file=out)
        return 0
    try:
        removed = replace_in_place(path, update.text)
    except OSError as exc:
        print(f"error: cannot write {path}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    for leftover in removed:
        print(f"note: {REMOVED}: {leftover}", file=sys.stderr)
    changes = [
        f"{what} for {', '.join(names)}"
        for what, names in (
            ("models added", update.added),
            ("models replaced", update.replaced),
            ("models removed", update.removed),
        )
        if names
    ]
    print(f"updated {path}: {'; '.join(changes)}", file=out)
    return 0


def _check(catalogue: Catalogue, out: TextIO) -> int:
    stale = stale_models(catalogue)
    if not stale:
        models = sum(len(skill.counted) for skill in catalogue.skills)
        print(
            f"OK: every model's newest report is for its skill's current version "
            f"(skills: {len(catalogue.skills)}, counted models: {models})",
            file=out,
        )
        return 0
    print(
        f"{len(stale)} models have no counted report for their skill's current version "
        f"({_BUMP_ADVICE}):",
        file=out,
    )
    for skill, model in stale:
        print(visible(f"  {_skill_title(skill)}: {model.model}: {model.why_dropped}"), file=out)
    return 1


def _skill_title(skill: SkillEntry) -> str:
    return f"{skill.name} {skill.version.version} ({skill.version.source})"
