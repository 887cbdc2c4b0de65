"""Human verdicts given in the viewer, written as the labels file judge agreement reads.

The format is :mod:`pytest_openkata.core.verdict_labels`'s: JSON Lines, one verdict per
criterion of a trial, labelling one run log. The viewer keeps one labels file per run log,
beside it: ``20261201T100000Z.labels.jsonl`` for ``20261201T100000Z.jsonl`` (a name run logs
never take, so the logs' pruning and listing leave it alone), and never writes into a log.

A reviewer who changes their mind labels the criterion again: its line is replaced, since the
format holds one verdict per criterion and trial. The file is written whole to a temporary
file and renamed over the old one, so that a reader sees the old labels or the new ones,
never half of them; a viewer killed in between leaves a temporary file that the next
write removes.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from pytest_openkata.core.runlog import json_line
from pytest_openkata.core.verdict_labels import (
    LabelsError,
    VerdictLabel,
    parse_labels,
)
from pytest_openkata.infra.tempfiles import new_temp_file, remove_stale

__all__ = ["labels_file", "read_run_labels", "write_label"]

_WRITING = threading.Lock()  # one labels file written at a time by the viewer's threads


def labels_file(log: Path) -> Path:
    """The labels file of the run log ``log``: beside it, ``STEM.labels.jsonl``."""
    return log.with_name(f"{log.stem}.labels.jsonl")


def read_run_labels(log: Path) -> list[VerdictLabel]:
    """The labels of run log ``log`` ([] when it has none yet); :class:`LabelsError` naming
    the file and the line of one that cannot be read."""
    path = labels_file(log)
    if path.is_symlink() and not path.resolve().is_relative_to(log.parent.resolve()):
        raise LabelsError(f"{path.name}: a link out of its run log's folder is not read")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise LabelsError(f"{path.name}: cannot read the labels file: {reason}") from exc
    if not text.strip():
        return []
    return parse_labels(text, source=path.name)


def _record(label: VerdictLabel) -> dict[str, object]:
    values: dict[str, object] = {
        "skill_dir": label.skill_dir,
        "scenario": label.scenario,
        "arm": label.arm,
        "trial": label.trial,
        "criterion_index": label.criterion_index,
        "criterion": label.criterion,
        "verdict": "pass" if label.passed else "fail",
        "reviewer": label.reviewer,
        "note": label.note,
    }
    return values


def write_label(log: Path, label: VerdictLabel) -> None:
    """Record ``label`` in the labels file of run log ``log``: in place of an earlier verdict
    of the same criterion of the same trial, else as the last line."""
    path = labels_file(log)
    with _WRITING:
        labels = [old for old in read_run_labels(log) if old.key != label.key]
        text = "".join(json_line(_record(old)) for old in [*labels, label])
        parse_labels(text, source=path.name)  # what judge agreement will read, checked
        try:
            remove_stale(path.parent)  # what a killed viewer left
            descriptor, temporary = new_temp_file(path.parent)
        except OSError as exc:
            raise LabelsError(f"{path.name}: cannot write a label: {exc.strerror}") from exc
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(temporary, 0o644)
            os.replace(temporary, path)
        except OSError as exc:
            temporary.unlink(missing_ok=True)
            raise LabelsError(f"{path.name}: cannot write a label: {exc.strerror}") from exc
