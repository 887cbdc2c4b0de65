"""The CSV rows (``--eval-csv PATH``): every verdict of a run, one row each, for spreadsheets
and data frames.

One row per skill, scenario, trial, arm and criterion, rendered from the run as its log holds
it (:attr:`~pytest_openkata.core.reporting.Run.logged`), so that the rows of a run and those
rendered from its log afterwards are the same bytes. The columns, in order:

- ``skill``: the skill's name (its folder's name, as the results JSON has it);
- ``scenario``: the scenario folder's name;
- ``trial``: the trial's number, from 1;
- ``arm``: ``with-skill`` for the run's own arm (the skill as it is), else the baseline arm's
  name (``without-skill``, ``same``, or the git ref of ``--eval-baseline REF``);
- ``criterion``, ``kind`` (``judge`` or ``check``), ``passed`` (``true`` or ``false``),
  ``points``, ``max_points`` and ``reason``: the criterion's verdict in that trial;
- ``error``: empty on a criterion's row. A trial that errored gets one row of its own with
  the error here and the criterion's columns empty (after its criteria's rows when it was
  scored before it errored);
- ``skill_activation``: whether the trial's agent loaded the skill, ``loaded``, ``not loaded``
  or ``unknown`` (its agent gave no events to tell it from, or a model backend answered), the
  same on each of the trial's rows.

Rows come in a fixed order: skills by folder, scenarios by name, trials by number, the own
arm before the baseline arm, criteria in checklist order (the judge's, then the checks). The
text is written with the standard ``csv`` module as RFC 4180 has it: a field holding a comma,
a quote, a carriage return or a line feed is quoted, quotes doubled, every row ending with
``\\r\\n`` (a row ending with ``\\n`` alone would leave a field holding a lone ``\\r`` unquoted,
which readers take for the end of its row), in UTF-8 and the header row first. It holds no
timing, so the same outcome gives the same bytes.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_openkata.contracts.results import ScenarioResult, TrialResult
from pytest_openkata.core.activation import activation, names_of
from pytest_openkata.core.arms import WITH_SKILL
from pytest_openkata.core.reporting import ReportOutcome, Run
from pytest_openkata.core.runlog import LoggedRun, skill_summaries
from pytest_openkata.core.summary import SkillSummary, skill_labels
from pytest_openkata.infra.atomic import write_new_report

__all__ = ["COLUMNS", "OWN_ARM", "CsvReporter", "render_csv", "rows"]

COLUMNS = (
    "skill",
    "scenario",
    "trial",
    "arm",
    "criterion",
    "kind",
    "passed",
    "points",
    "max_points",
    "reason",
    "error",
    "skill_activation",
)
OWN_ARM = WITH_SKILL
"""The ``arm`` column of the run's own arm (its results carry the arm name ``""``)."""


def _trial_rows(
    skill: str, arm: ScenarioResult, trial: TrialResult, names: Collection[str]
) -> Iterator[list[str]]:
    where = [skill, arm.name, str(trial.index), arm.arm or OWN_ARM]
    loaded = activation(trial.trace.transcript if trial.trace is not None else None, names)
    for criterion in trial.criteria or ():
        yield [
            *where,
            criterion.name,
            criterion.kind,
            "true" if criterion.passed else "false",
            str(criterion.score),
            str(criterion.max_score),
            criterion.reason,
            "",
            loaded,
        ]
    if trial.error is not None:
        yield [*where, "", "", "", "", "", "", trial.error, loaded]


def rows(summaries: Sequence[SkillSummary]) -> Iterator[list[str]]:
    """The rows of the skills' results in the order the module docstring gives, without the
    header; a skill is named as the terminal names it (by its folder where names repeat)."""
    labelled = sorted(zip(summaries, skill_labels(summaries), strict=True), key=_by_folder)
    for summary, label in labelled:
        for result in sorted(summary.results, key=lambda r: r.name):
            arms = [result] if result.baseline is None else [result, result.baseline]
            names = names_of(Path(result.skill_dir))
            for index in sorted({trial.index for arm in arms for trial in arm.trials}):
                for arm in arms:
                    for trial in arm.trials:
                        if trial.index == index:
                            yield from _trial_rows(label, arm, trial, names)


def _by_folder(labelled: tuple[SkillSummary, str]) -> str:
    return labelled[0].skill_dir.as_posix()


def render_csv(run: LoggedRun) -> str:
    """The CSV text of a logged run: the header row, then :func:`rows`."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(COLUMNS)
    writer.writerows(rows(skill_summaries(run)))
    return buffer.getvalue()


class CsvReporter:
    """Writes the CSV rows where ``--eval-csv`` says (relative to the current folder), never
    over an existing file, and records where on the run; a file that cannot be written is
    recorded on every skill's summary, which fails the run."""

    name = "csv"

    def report(self, run: Run) -> ReportOutcome | None:
        if not run.settings.csv:
            return None
        path = Path(run.settings.csv).expanduser()
        removed: list[Path] = []
        try:
            written = write_new_report(path, render_csv(run.logged), removed=removed)
        except OSError as exc:
            problem = f"could not write the CSV rows {path}: {exc.strerror or exc}"
            return ReportOutcome(errors=(problem,), removed=tuple(removed))
        return ReportOutcome(written={"CSV rows": written}, removed=tuple(removed))


if TYPE_CHECKING:  # the protocol this provider implements, checked by mypy
    from pytest_openkata.core.reporting import Reporter

    _implements: type[Reporter] = CsvReporter
