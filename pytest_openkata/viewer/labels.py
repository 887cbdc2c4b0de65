"""Human verdicts on the judge's: the labels file beside the run logs.

A reviewer who reads a trial says, criterion by criterion, whether the judge was right; the
viewer records the reviewer's own verdict of the criterion. Labels go to ``labels.jsonl`` in
the folder of the run log they are about, never into the log itself (a log is the run's
record and is never written after the run). The file is JSON Lines, one label a line, with
the keys ``skill`` (the skill folder relative to the run's root, as the run log names it),
``scenario``, ``arm`` (``""`` for the run's own arm), ``trial`` (1-based), ``criterion``
(its index in the trial's criteria, from 0), ``criterion_text`` (its name), ``verdict``
(``"pass"`` or ``"fail"``: the human's verdict of the criterion), ``reviewer``, ``note``,
``run`` (the log's file name) and ``at`` (UTC, ISO 8601). A label is only ever appended; the
last line for a run, skill, scenario, arm, trial and criterion is the one that holds.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytest_openkata.contracts.errors import OpenkataError
from pytest_openkata.core.runlog import json_line

__all__ = [
    "LABELS_NAME",
    "VERDICTS",
    "Label",
    "LabelsError",
    "append_label",
    "now_utc",
    "read_labels",
]

LABELS_NAME = "labels.jsonl"
VERDICTS = ("pass", "fail")

_WRITING = threading.Lock()  # one label line at a time from the viewer's threads


class LabelsError(OpenkataError):
    """A labels file that cannot be read or a label that cannot be written; the message
    names the file, the line and the field."""


@dataclass(frozen=True)
class Label:
    """One human verdict of one criterion of one trial (see the module docstring)."""

    skill: str
    scenario: str
    arm: str
    trial: int
    criterion: int
    criterion_text: str
    verdict: str
    reviewer: str
    note: str
    run: str
    at: str

    @property
    def key(self) -> tuple[str, str, str, str, int, int]:
        """What a later label of the same criterion replaces."""
        return (self.run, self.skill, self.scenario, self.arm, self.trial, self.criterion)

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"


_TYPES = {f.name: (int if f.name in ("trial", "criterion") else str) for f in fields(Label)}


def now_utc() -> str:
    """The time of a label: UTC, to the second."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _label(record: Mapping[str, Any], where: str) -> Label:
    values: dict[str, Any] = {}
    for name, kind in _TYPES.items():
        value = record.get(name)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise LabelsError(f"{where}: {name} must be a {kind.__name__}, not {value!r}")
        values[name] = value
    if values["verdict"] not in VERDICTS:
        raise LabelsError(f"{where}: verdict must be 'pass' or 'fail', not {values['verdict']!r}")
    return Label(**values)


def read_labels(folder: Path) -> dict[tuple[str, str, str, str, int, int], Label]:
    """The labels of ``folder``'s labels file by key, the last line of a key winning ({} when
    there is no file); :class:`LabelsError` naming the file, line and field of a bad one."""
    path = folder / LABELS_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise LabelsError(f"{path.name}: cannot read the labels file: {exc}") from exc
    labels: dict[tuple[str, str, str, str, int, int], Label] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{path.name}: line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise LabelsError(f"{where}: not JSON: {exc.msg}") from exc
        if not isinstance(record, dict):
            raise LabelsError(f"{where}: a label must be a JSON object")
        label = _label(record, where)
        labels[label.key] = label
    return labels


def append_label(folder: Path, label: Label) -> None:
    """Add ``label`` as the last line of ``folder``'s labels file, flushed to the disk
    before this returns: a crash leaves every earlier label as it was."""
    _label(asdict(label), "label")  # the same checks as reading it back
    line = json_line(asdict(label)).encode("utf-8")
    with _WRITING:
        try:
            descriptor = os.open(
                folder / LABELS_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644
            )
        except OSError as exc:
            raise LabelsError(f"{LABELS_NAME}: cannot write a label: {exc.strerror}") from exc
        try:
            os.write(descriptor, line)
            os.fsync(descriptor)
        except OSError as exc:
            raise LabelsError(f"{LABELS_NAME}: cannot write a label: {exc.strerror}") from exc
        finally:
            os.close(descriptor)
