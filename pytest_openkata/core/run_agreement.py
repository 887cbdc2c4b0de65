"""A run's judge measured as it finishes (``agreement_with``): against another judge's run
log of the same answers, or against a labels file of human verdicts; and the gate of a team
that calibrates a cheaper judge (``min_kappa``).

The run is read as its own log would hold it (:func:`~pytest_openkata.core.runlog.log_lines`
read back), so that it pairs exactly as the ``agreement`` command pairs two logs. The report's
JSON goes into the run log as an extra record (kind :data:`AGREEMENT_EXTRA`), and its table to
the terminal. A file that cannot be read or compared is an error of the run, never a passed
or failed gate.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.results import ScenarioResult
from pytest_openkata.core.agreement import (
    AgreementError,
    agreement_report,
    below_min_kappa,
    pair_labels,
    pair_runs,
    self_consistency,
)
from pytest_openkata.core.agreement_view import agreement_document, agreement_text
from pytest_openkata.core.runlog import (
    RunLogError,
    log_lines,
    parse_run_log,
    read_run_log,
    run_info,
)
from pytest_openkata.core.verdict_labels import LabelsError, read_labels
from pytest_openkata.infra.text import visible

__all__ = ["AGREEMENT_EXTRA", "RunAgreement", "is_run_log", "run_agreement"]

AGREEMENT_EXTRA = "agreement"
_THIS_RUN = "this run"


@dataclass(frozen=True)
class RunAgreement:
    """What the run's agreement comes to: the terminal's lines, the run log's record (None
    when it could not be measured), whether the gate failed, and the error that stopped it
    ("" when none did)."""

    lines: tuple[str, ...]
    record: dict[str, Any] | None = None
    failed: bool = False
    error: str = ""
    reason: str = ""  # why it failed the run, for the gate's last line

    @property
    def log_extras(self) -> dict[str, list[dict[str, Any]]]:
        """The run log's extra records of it."""
        return {} if self.record is None else {AGREEMENT_EXTRA: [self.record]}


def is_run_log(path: Path) -> bool:
    """Whether ``path`` starts as a run log does (its first record is the run's), rather than
    as a labels file."""
    try:
        with path.open(encoding="utf-8") as handle:
            first = next((line for line in handle if line.strip()), "")
        record = json.loads(first)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(record, dict) and record.get("record") == "run"


def run_agreement(
    settings: EvalSettings,
    results: Iterable[ScenarioResult],
    rootdir: Path,
    finished_at: datetime,
) -> RunAgreement | None:
    """The agreement of the run of ``results`` with ``settings.agreement_with`` (None when the
    setting is not given), gated by ``settings.min_kappa`` when given."""
    if not settings.agreement_with:
        return None
    other = Path(settings.agreement_with).expanduser()
    info = run_info(settings, finished_at, complete=True)
    this_run = parse_run_log(log_lines(info, results, rootdir), source=_THIS_RUN)
    try:
        if is_run_log(other):
            theirs = read_run_log(other)
            pairing = pair_runs(theirs, this_run)
            consistency = [self_consistency(theirs), self_consistency(this_run)]
        else:
            pairing = pair_labels(this_run, read_labels(other), str(other))
            consistency = [self_consistency(this_run)]
        report = agreement_report(pairing, consistency)
    except (RunLogError, LabelsError, AgreementError) as exc:
        error = visible(f"judge agreement not measured: {exc}")
        return RunAgreement(
            (error,), failed=True, error=error, reason="judge agreement not measured"
        )
    document = agreement_document(report, settings.min_kappa)
    below = [] if settings.min_kappa is None else below_min_kappa(report, settings.min_kappa)
    lines = tuple(agreement_text(report, settings.min_kappa).splitlines())
    if not below:
        return RunAgreement(lines, document)
    criteria = "criterion" if len(below) == 1 else "criteria"
    reason = f"judge κ below {settings.min_kappa:g} on {len(below)} {criteria}"
    return RunAgreement(lines, document, failed=True, reason=reason)
