"""A labels file: human verdicts on the criteria of a recorded run, to measure a judge against.

A labels file is JSON Lines, one verdict per line (blank lines are skipped)::

    {"skill_dir": "skills/release-notes", "scenario": "scenario-1", "arm": "", "trial": 1,
     "criterion_index": 0, "criterion": "Names the breaking change", "verdict": "pass",
     "reviewer": "ana", "note": "says it in the first line"}

``skill_dir`` is the skill folder relative to the run's root folder, as the run log writes it;
``scenario`` the scenario's name; ``arm`` the arm (``""``, the default, for the run's own, else
the baseline arm's name); ``trial`` the 1-based trial; ``criterion_index`` the 0-based position
of the criterion among the trial's criteria in the run log (criteria.json's order) and
``criterion`` its text (its name), which must match, so that a label never silently lands on a
reworded criterion; ``verdict`` is ``pass`` or ``fail``. ``reviewer`` and ``note`` are
optional text. Any other key is an error (a misspelt ``verdict`` must not go unnoticed), and
so is a second verdict on the same criterion of the same trial.

This module reads and checks the file; every error names the file and the line
(:class:`LabelsError`). Matching the labels to a run log's trials is
:mod:`pytest_openkata.core.agreement`'s.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pytest_openkata.contracts.errors import INVALID_INPUT, OpenkataError

__all__ = [
    "LABEL_KEYS",
    "LabelsError",
    "VerdictLabel",
    "parse_labels",
    "read_labels",
]

_PASS = "pass"
_FAIL = "fail"
_REQUIRED = ("skill_dir", "scenario", "trial", "criterion_index", "criterion", "verdict")
_OPTIONAL = ("arm", "reviewer", "note")
LABEL_KEYS = (*_REQUIRED, *_OPTIONAL)
"""Every key a line of a labels file may hold; the first six are required."""


class LabelsError(OpenkataError):
    """A labels file that cannot be read or does not fit the run it labels; the message names
    the file and the line."""

    cause = INVALID_INPUT


@dataclass(frozen=True)
class VerdictLabel:
    """One human verdict: on criterion ``criterion_index`` (text ``criterion``) of trial
    ``trial`` of a scenario's arm, with the line of the file it is on."""

    line: int
    skill_dir: str
    scenario: str
    arm: str
    trial: int
    criterion_index: int
    criterion: str
    passed: bool
    reviewer: str = ""
    note: str = ""

    @property
    def key(self) -> tuple[str, str, str, int, int]:
        """The criterion of a trial this label is on."""
        return (self.skill_dir, self.scenario, self.arm, self.trial, self.criterion_index)


def read_labels(path: Path) -> list[VerdictLabel]:
    """The labels of the file at ``path``; :class:`LabelsError` when it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LabelsError(f"{path}: cannot read the labels file: {exc}") from exc
    return parse_labels(text, source=str(path))


def parse_labels(text: str, *, source: str = "labels file") -> list[VerdictLabel]:
    """The labels of a labels file's text; :class:`LabelsError` naming ``source`` and the
    line of the first one that is not a label, or that labels a criterion a second time."""
    labels: list[VerdictLabel] = []
    first_line: dict[tuple[str, str, str, int, int], int] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{source}: line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise LabelsError(f"{where}: not JSON: {exc.msg}") from None
        if not isinstance(record, dict):
            raise LabelsError(f"{where}: a label must be a JSON object")
        label = _label(record, number, where)
        earlier = first_line.setdefault(label.key, number)
        if earlier != number:
            raise LabelsError(
                f"{where}: criterion {label.criterion_index} of trial {label.trial} of "
                f"{label.skill_dir}::{label.scenario} is labelled a second time (first on "
                f"line {earlier}); one verdict per criterion and trial"
            )
        labels.append(label)
    if not labels:
        raise LabelsError(f"{source}: holds no labels")
    return labels


def _label(record: Mapping[str, Any], number: int, where: str) -> VerdictLabel:
    unknown = sorted(set(record) - set(LABEL_KEYS))
    if unknown:
        raise LabelsError(
            f"{where}: unknown key {unknown[0]!r}; a label's keys are {', '.join(LABEL_KEYS)}"
        )
    missing = [key for key in _REQUIRED if key not in record]
    if missing:
        raise LabelsError(f"{where}: field {missing[0]} is missing")
    verdict = record["verdict"]
    if verdict not in (_PASS, _FAIL):
        raise LabelsError(f'{where}: field verdict: {verdict!r} is not "pass" or "fail"')
    return VerdictLabel(
        line=number,
        skill_dir=_skill_dir(record["skill_dir"], where),
        scenario=_text(record, "scenario", where, required=True),
        arm=_text(record, "arm", where),
        trial=_whole(record, "trial", 1, where),
        criterion_index=_whole(record, "criterion_index", 0, where),
        criterion=_text(record, "criterion", where, required=True),
        passed=verdict == _PASS,
        reviewer=_text(record, "reviewer", where),
        note=_text(record, "note", where),
    )


def _text(record: Mapping[str, Any], key: str, where: str, *, required: bool = False) -> str:
    value = record.get(key, "")
    if not isinstance(value, str):
        raise LabelsError(f"{where}: field {key}: {value!r} is not text")
    if required and not value:
        raise LabelsError(f"{where}: field {key} is empty")
    return value


def _whole(record: Mapping[str, Any], key: str, low: int, where: str) -> int:
    value = record[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise LabelsError(f"{where}: field {key}: {value!r} is not a whole number from {low}")
    return value


def _skill_dir(value: object, where: str) -> str:
    """A skill folder relative to the run's root, as the run log writes it (``skills/x``)."""
    if not isinstance(value, str) or not value:
        raise LabelsError(f"{where}: field skill_dir: {value!r} is not a folder")
    path = PurePosixPath(value.replace("\\", "/"))
    if path.is_absolute() or (len(value) > 1 and value[1] == ":"):
        raise LabelsError(
            f"{where}: field skill_dir: {value!r} is not relative to the run's root folder "
            "(as the run log names skills, e.g. skills/NAME)"
        )
    return path.as_posix()
