"""``python -m pytest_openkata init`` and ``new-scenario``: the files a new skill or scenario needs.

- ``init skills/NAME`` writes what the skill folder lacks: ``SKILL.md`` (front matter whose
  ``name`` is the folder name), ``CHANGELOG.md`` (a released ``0.1.0`` heading, which the
  report's ``skill_version`` reads) and one example scenario, ``evals/scenario-example``. The
  example is left out when ``evals/`` already holds another scenario: a placeholder would then
  run, and score, beside the real ones.
- ``new-scenario skills/NAME ID [--sandbox]`` adds ``evals/scenario-ID`` to an existing skill
  (one with a ``SKILL.md``): ``task.md``, ``criteria.json``, ``scenario.json`` and, with
  ``--sandbox``, an ``inputs/`` folder for the files copied into the sandbox's workspace.

Nothing is ever overwritten. Each file is created with exclusive creation, so a file that
exists, or that a concurrent writer has just made, is kept as it is and listed as ``kept``;
new files are listed as ``wrote``. A scenario folder that already holds files is somebody's
scenario: nothing is added to it (a ``scenario.json`` added to a scenario that has none would
change how it runs, since the default is a sandbox), and the command says that nothing was
written. Both exit 0 then.

``init`` takes the skill's name from the folder's (``init .`` inside ``skills/x`` names it
``x``) and refuses one that is not a skill name: lowercase letters and digits in words joined by
single hyphens, at most 64 characters. A scenario ID follows the same rule, which keeps it a
safe folder name. ``new-scenario`` does not check the skill's name: it adds to an existing
skill, whatever it is called.

Exit codes: 0 done (files written or kept); 1 a file or folder could not be written (the files
written before it are listed); 2 bad arguments (argparse's usage), an invalid skill name or
scenario ID, or, for ``new-scenario``, a skill folder without ``SKILL.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path

from pytest_openkata.contracts.errors import OpenkataError
from pytest_openkata.core.scenario import SCENARIO_PREFIX, discover_scenarios
from pytest_openkata.infra.text import plural

__all__ = [
    "EXAMPLE_SCENARIO",
    "Written",
    "changelog_text",
    "criteria_text",
    "init_main",
    "new_scenario_main",
    "scenario_files",
    "scenario_folder_name",
    "skill_files",
    "skill_md_text",
    "skill_name_error",
    "write_missing",
]

EXAMPLE_SCENARIO = "scenario-example"
MAX_NAME_LENGTH = 64
# Skill names as agent skills spell them: lowercase letters and digits in words joined by
# single hyphens. Scenario IDs follow the same rule, which also keeps them safe folder names.
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_NAME_RULE = "lowercase letters, digits and single hyphens, not at the start or end"

PROG = "python -m pytest_openkata"


@dataclass
class Written:
    """What a command did: the files it created and the files it found and kept."""

    wrote: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)


class WriteError(OpenkataError):
    """A file or folder could not be created; the message names it and says why."""


# --- names ---------------------------------------------------------------------------------


def skill_name_error(name: str) -> str | None:
    """Why ``name`` is not a valid skill name, or None when it is."""
    if not name:
        return "the skill folder has no name"
    if len(name) > MAX_NAME_LENGTH:
        return f"skill name {name!r} is longer than {MAX_NAME_LENGTH} characters"
    if not _NAME.fullmatch(name):
        return f"skill name {name!r} is not valid: use {_NAME_RULE} (e.g. commit-message)"
    return None


def scenario_folder_name(scenario_id: str) -> str:
    """``scenario-<ID>`` for an ID given with or without the prefix; raises ValueError when the
    ID is not a safe folder name."""
    bare = scenario_id.removeprefix(SCENARIO_PREFIX)
    if not _NAME.fullmatch(bare) or len(SCENARIO_PREFIX + bare) > MAX_NAME_LENGTH:
        raise ValueError(
            f"scenario ID {scenario_id!r} is not a safe folder name: use {_NAME_RULE}, "
            f"at most {MAX_NAME_LENGTH} characters with the {SCENARIO_PREFIX!r} prefix "
            "(e.g. 0 or empty-input)"
        )
    return SCENARIO_PREFIX + bare


def _folder_name(folder: Path) -> str:
    """The name of the folder as the user means it: ``skills/x/`` and ``.`` inside
    ``skills/x`` both name ``x``."""
    return Path(os.path.abspath(folder)).name


# --- file contents -------------------------------------------------------------------------


def _title(name: str) -> str:
    words = name.replace("-", " ")
    return words[:1].upper() + words[1:]


# One line of YAML (double-quoted, as it holds a colon), as skill loaders read front matter.
_DESCRIPTION_PLACEHOLDER = (
    '"TODO: say in one or two sentences what this skill does and when to use it, e.g. '
    "'Write X that follows Y. Use when asked to write, review or fix X.' Agents read this "
    'line to decide whether to load the skill, so name the requests it is for."'
)


def skill_md_text(name: str) -> str:
    """A SKILL.md skeleton: front matter with ``name`` and a ``description`` placeholder, and
    the outline of a body."""
    return f"""\
---
name: {name}
description: {_DESCRIPTION_PLACEHOLDER}
---

# {_title(name)}

TODO: one short paragraph on what the skill is for and the result it aims at.

## Rules

1. TODO: the first rule the agent must follow, stated so that one can see in an answer
   whether it was followed.
2. TODO: the next rule. Put long details and tables in `references/` and name the file here.

## Checklist before you answer

- [ ] TODO: one line per rule above

## Worked example

TODO: a short request, the answer that follows the rules, and why it is right.
"""


def changelog_text(today: date) -> str:
    """A Keep a Changelog file with an Unreleased section and a released ``0.1.0``, the version
    a results report records as ``skill_version``."""
    return f"""\
# Changelog

All notable changes to this skill are documented in this file.
The format follows Keep a Changelog, and the skill uses semantic
versioning.

## [Unreleased]

## [0.1.0] - {today.isoformat()}

### Added

- First version of `SKILL.md` and its evaluation scenarios.
"""


def _task_text(sandbox: bool) -> str:
    where = (
        "The agent works in a sandbox whose workspace holds the files of this scenario's "
        "inputs/ folder: say which files to read and which file to write the answer to."
        if sandbox
        else "The agent answers in text only: put the whole input (a diff, a message, a "
        "snippet) in this file."
    )
    return f"""\
# TODO: the request in a few words

TODO: write the request as a user would make it. Do not name the skill or hint at its
rules: the evaluation measures whether the skill makes the agent do the right thing on
its own.

{where}

Say what form the answer should take (only the message, a list, a file).
"""


# (name, description, max_score); the scores sum to exactly 100, as the reference's weight
# check requires.
_CRITERIA = (
    (
        "task-done",
        "TODO: what the answer visibly contains when the task is done, e.g. 'The answer "
        "contains exactly one header line of the form type(scope): subject.'",
        50,
    ),
    (
        "rule-followed",
        "TODO: one rule of the skill that the answer visibly follows, e.g. 'The subject "
        "line has at most 72 characters and does not end with a period.'",
        30,
    ),
    (
        "nothing-invented",
        "TODO: something the answer must not contain, e.g. 'The answer contains no issue "
        "number that the task did not give.'",
        20,
    ),
)


def criteria_text() -> str:
    """A weighted checklist whose ``max_score`` values sum to 100, one per line (the layout
    the reference's ``check-eval-weights.sh`` reads)."""
    document = {
        "context": "TODO: one sentence for the judge on what this scenario tests.",
        "type": "weighted_checklist",
        "checklist": [
            {"name": name, "description": description, "max_score": points}
            for name, description, points in _CRITERIA
        ],
    }
    return json.dumps(document, indent=2) + "\n"


def _scenario_json_text(sandbox: bool) -> str:
    document = {"description": "TODO: one line on what this scenario checks", "sandbox": sandbox}
    return json.dumps(document, indent=2) + "\n"


_INPUTS_README = (
    "Files in this folder are copied into the sandbox workspace before the agent runs; "
    "replace this file with the scenario's input files.\n"
)


def scenario_files(sandbox: bool) -> dict[str, str]:
    """A scenario folder's files by path relative to it."""
    files = {
        "task.md": _task_text(sandbox),
        "criteria.json": criteria_text(),
        "scenario.json": _scenario_json_text(sandbox),
    }
    if sandbox:
        files["inputs/README.md"] = _INPUTS_README
    return files


def skill_files(name: str, today: date) -> dict[str, str]:
    """The skill folder's own files by path relative to it (the scenario comes separately)."""
    return {"SKILL.md": skill_md_text(name), "CHANGELOG.md": changelog_text(today)}


# --- writing -------------------------------------------------------------------------------


def _shown(path: Path) -> str:
    """A path as the output names it: relative to the current directory."""
    return os.path.relpath(path)


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WriteError(f"cannot create folder {_shown(folder)}: {exc.strerror or exc}") from None


def _create(path: Path, text: str) -> bool:
    """Create ``path`` holding ``text``; False when it exists already (it is left as it is)."""
    try:
        handle = path.open("x", encoding="utf-8", newline="\n")
    except FileExistsError:
        return False
    except OSError as exc:
        raise WriteError(f"cannot write {_shown(path)}: {exc.strerror or exc}") from None
    try:
        with handle:
            handle.write(text)
    except OSError as exc:
        path.unlink(missing_ok=True)  # ours, and incomplete
        raise WriteError(f"cannot write {_shown(path)}: {exc.strerror or exc}") from None
    return True


def write_missing(folder: Path, files: dict[str, str], written: Written) -> None:
    """Create each of ``files`` (relative to ``folder``) that does not exist yet, printing a
    ``wrote`` or ``kept`` line per file; raises :class:`WriteError`."""
    for rel, text in files.items():
        path = folder / rel
        _make_folder(path.parent)
        if _create(path, text):
            written.wrote.append(path)
            print(f"wrote {_shown(path)}")
        else:
            written.kept.append(path)
            print(f"kept  {_shown(path)}")


def _holds_files(folder: Path) -> bool:
    try:
        return folder.is_dir() and any(folder.iterdir())
    except OSError:
        return False


def _add_scenario(folder: Path, files: dict[str, str], written: Written) -> list[str] | None:
    """Write a new (or empty) scenario folder and return None. A folder that already holds
    files is left alone: its files among ``files`` are listed as kept, and the others are
    returned."""
    if not _holds_files(folder):
        write_missing(folder, files, written)
        return None
    missing = []
    for rel in files:
        if (folder / rel).exists():
            written.kept.append(folder / rel)
            print(f"kept  {_shown(folder / rel)}")
        else:
            missing.append(rel)
    return missing


# --- commands ------------------------------------------------------------------------------


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace | int:
    """The parsed arguments, or the exit code argparse chose (0 for --help, 2 for a usage
    error, whose message it has printed)."""
    try:
        return parser.parse_args(list(argv))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2


def _error(message: str, code: int) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def init_main(argv: list[str]) -> int:
    """``init skills/NAME``: write the missing files of a skill folder."""
    parser = argparse.ArgumentParser(
        prog=f"{PROG} init",
        description="Write what a new skill folder needs: SKILL.md, CHANGELOG.md and an example "
        "scenario. Existing files are never overwritten.",
    )
    parser.add_argument("skill", type=Path, help="the skill folder, e.g. skills/my-skill")
    parsed = _parse(parser, argv)
    if isinstance(parsed, int):
        return parsed
    skill: Path = parsed.skill
    name = _folder_name(skill)
    problem = skill_name_error(name)
    if problem is not None:
        return _error(f"{problem}; the folder name is the skill's name", 2)
    written = Written()
    try:
        _make_folder(skill)
        write_missing(skill, skill_files(name, datetime.now(UTC).date()), written)
        evals = skill / "evals"
        example = evals / EXAMPLE_SCENARIO
        others = [e for e in discover_scenarios(evals) if e.name != EXAMPLE_SCENARIO]
        if others and not example.exists():
            print(
                f"no example scenario: {_shown(evals)} already holds "
                f"{plural(len(others), 'scenario')}"
            )
        elif missing := _add_scenario(example, scenario_files(sandbox=False), written):
            print(f"not written: {', '.join(missing)} ({_shown(example)} already holds files)")
    except WriteError as exc:
        return _error(str(exc), 1)
    _summary(written)
    return 0


def new_scenario_main(argv: list[str]) -> int:
    """``new-scenario skills/NAME ID [--sandbox]``: add ``evals/scenario-ID`` to a skill."""
    parser = argparse.ArgumentParser(
        prog=f"{PROG} new-scenario",
        description="Add evals/scenario-ID to an existing skill: task.md, criteria.json and "
        "scenario.json. Existing files are never overwritten.",
    )
    parser.add_argument("skill", type=Path, help="the skill folder, holding SKILL.md")
    parser.add_argument(
        "scenario_id",
        metavar="ID",
        help="the scenario's ID, with or without the scenario- prefix (e.g. 0 or empty-input)",
    )
    parser.add_argument(
        "--sandbox",
        action="store_true",
        help="a sandboxed scenario, with an inputs/ folder copied into the agent's workspace "
        "(default: a direct, text-only scenario)",
    )
    parsed = _parse(parser, argv)
    if isinstance(parsed, int):
        return parsed
    skill: Path = parsed.skill
    try:
        folder_name = scenario_folder_name(parsed.scenario_id)
    except ValueError as exc:
        return _error(str(exc), 2)
    if not (skill / "SKILL.md").is_file():
        return _error(
            f"{_shown(skill / 'SKILL.md')} not found: new-scenario adds to an existing skill "
            f"(create one with: {PROG} init {_shown(skill)})",
            2,
        )
    folder = skill / "evals" / folder_name
    written = Written()
    try:
        left_out = _add_scenario(folder, scenario_files(parsed.sandbox), written)
    except WriteError as exc:
        return _error(str(exc), 1)
    if left_out is not None:
        print(f"nothing written: {_shown(folder)} already holds files")
        return 0
    _summary(written)
    return 0


def _summary(written: Written) -> None:
    if written.wrote:
        print("next: replace every TODO in the files written above")
    else:
        print("nothing written")
