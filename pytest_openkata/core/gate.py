"""The run's last line: the gate's decision and why the exit status is what it is.

Every way a run ends shows it: a pytest run, a shard, and the merge of shards.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pytest_openkata.core.reporting import Segment
from pytest_openkata.core.scoring import percent_against
from pytest_openkata.core.summary import SkillSummary, skill_labels
from pytest_openkata.infra.text import plural, visible

if TYPE_CHECKING:
    from pytest_openkata.core.regression import SkillChanges

__all__ = ["gate_line"]


def _skill_gate(summary: SkillSummary, label: str, threshold: int) -> str:
    if not summary.complete:
        return f"{label} partial, threshold not enforced"
    relation = ">=" if summary.passed else "<"
    overall = percent_against(summary.overall, threshold, passed=summary.passed, max_digits=3)
    return f"{label} {overall} {relation} {threshold}%"


def gate_line(
    summaries: Sequence[SkillSummary],
    threshold: int,
    exit_status: int,
    *,
    stopped: str | None = None,
    errored: int = 0,
    failed: int = 0,
    require_uplift: bool = False,
    fail_on_regression: bool = False,
    run_errors: int = 0,
    agreement: str = "",
    crashed: str = "",
) -> list[Segment]:
    """The run's last line: the gate's decision and why the exit status is what it is.

    Per complete skill ``name 88% < 95%`` or ``name 100% >= 95%`` (a skill that ran in part:
    ``name partial, threshold not enforced``), then what else failed the run: ``errored``
    scenarios, ``failed`` ordinary tests, reports not written; then the status:
    ``commit-message 88% < 95%: exit 1``. When no skill ran completely the threshold is not
    enforced (``partial run: threshold not enforced, exit 0``); ``stopped`` names what ended
    a run that did not finish (``interrupted``), whose status is pytest's own. ``crashed``
    says what ended pytest with a traceback after the run (a fixture's teardown that raised),
    which ``exit_status`` is then the interpreter's for.
    """
    if stopped is not None:
        why = f"; {crashed}" if crashed else ""
        text = f"{stopped}: threshold not enforced{why}, exit {exit_status}"
        return [(visible(text), "green" if exit_status == 0 else "red")]
    enforced = any(summary.complete for summary in summaries)
    labels = skill_labels(summaries)
    reasons = [
        "; ".join(
            _skill_gate(summary, label, threshold)
            for summary, label in zip(summaries, labels, strict=True)
        )
        if enforced
        else "partial run: threshold not enforced"
    ]
    if errored:
        reasons.append(f"{plural(errored, 'scenario')} errored")
    if failed:
        reasons.append(f"{plural(failed, 'ordinary test')} failed")
    labelled = list(zip(summaries, labels, strict=True))
    regressed = [label for s, label in labelled if require_uplift and s.regresses]
    if regressed:
        verb = "regresses" if len(regressed) == 1 else "regress"
        reasons.append(f"{', '.join(regressed)} {verb} against the baseline")
    if fail_on_regression:
        reasons += [
            _regressions(s.changes, label)
            for s, label in labelled
            if s.changes is not None and s.changes.failed
        ]
    unwritten = run_errors + sum(1 for summary in summaries if summary.report_error is not None)
    if unwritten:
        reasons.append(f"{plural(unwritten, 'report')} not written")
    if any(summary.compare_error is not None for summary in summaries):
        reasons.append("the earlier run to compare with could not be read")
    if agreement:  # the judge agreement gate's failure (agreement_with, min_kappa)
        reasons.append(agreement)
    if any(summary.refused_drift is not None for summary in summaries):
        reasons.append("a comparison was refused: the runs drifted")
    if crashed:
        reasons.append(crashed)
    separator = ": " if enforced else ", "
    text = f"{'; '.join(reasons)}{separator}exit {exit_status}"
    return [(visible(text), "green" if exit_status == 0 else "red")]


def _regressions(changes: SkillChanges, label: str) -> str:
    """``commit-message: 1 regression (scenario-a), 1 missing (scenario-b) against <label>``."""
    parts = []
    for what, found in (("regression", changes.regressions), ("missing", changes.missing)):
        if found:
            noun = plural(len(found), what) if what == "regression" else f"{len(found)} missing"
            parts.append(f"{noun} ({', '.join(change.name for change in found)})")
    return f"{label}: {', '.join(parts)} against {changes.baseline}"
