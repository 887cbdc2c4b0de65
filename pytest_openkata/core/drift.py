"""A run's own drift, put on its skill summaries before the reporters run: between a skill's
own arm and its baseline arm, and between the shards a merged run was made of.

The arms of one run share their settings, so only what the trials recorded can differ: the
models the endpoints reported, the agent CLI's version, the image's digest
(:func:`~pytest_openkata.core.run_manifest.arm_manifests`). A difference there makes the
uplift meaningless (it would measure the drift as much as the skill): unless ``allow_drift``
is on, the skill's comparison of its arms is dropped and its drift fails the run's gate.
Every drift found is also a run log record (:data:`~pytest_openkata.core.runlog.DRIFT_EXTRA`),
so that the views rendered from the log show it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.core.manifest import BASELINE, Drift, compare_manifests
from pytest_openkata.core.run_manifest import arm_manifests
from pytest_openkata.core.runlog import DRIFT_EXTRA, drift_record, relative_skill_dir
from pytest_openkata.core.summary import SkillSummary

__all__ = ["with_arm_drift", "with_run_drift"]

Extras = dict[str, list[dict[str, Any]]]


def with_run_drift(
    summaries: Sequence[SkillSummary], drifts: Sequence[Drift]
) -> tuple[list[SkillSummary], Extras]:
    """The summaries with the whole run's ``drifts`` (a merge's) on each, and their records
    (of the skill folder "")."""
    shown = tuple(drift for drift in drifts if not drift.empty)
    if not shown:
        return list(summaries), {}
    return [replace(summary, drift=(*summary.drift, *shown)) for summary in summaries], {
        DRIFT_EXTRA: [drift_record(drift, "") for drift in shown]
    }


def with_arm_drift(
    summaries: Sequence[SkillSummary], settings: EvalSettings, rootdir: Path
) -> tuple[list[SkillSummary], Extras]:
    """The summaries with what drifted between each skill's own arm and its baseline arm (see
    the module docstring), and the run log's records of it."""
    checked = []
    records = []
    for summary in summaries:
        arms = arm_manifests(summary.results)
        if arms is None:
            checked.append(summary)
            continue
        own, baseline = arms
        arm = next(r.baseline.arm for r in summary.results if r.baseline is not None)
        drift = compare_manifests(
            baseline,
            own,
            comparison=BASELINE,
            against=f"the baseline arm {arm}",
            allowed=settings.allow_drift,
        )
        if drift.empty:
            checked.append(summary)
            continue
        refused = drift.refusal() is not None
        checked.append(
            replace(
                summary,
                drift=(*summary.drift, drift),
                comparison=None if refused else summary.comparison,
            )
        )
        records.append(drift_record(drift, relative_skill_dir(summary.skill_dir, rootdir)))
    return checked, ({DRIFT_EXTRA: records} if records else {})
