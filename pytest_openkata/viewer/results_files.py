"""Results JSON files shown as runs: a skill's report (``SKILL/evals/results/MODEL/TIME.json``)
read back as a run of that one skill, for the viewer's list, run and trial pages.

A results JSON holds a skill's scores, verdicts and reasons and the agent's output of each
scenario, not the traces of a run log (no transcript, diff or graders' answers); it names no
skill folder, so the folder above its ``evals/results`` is the skill's. Human verdicts are
given on run logs only: judge agreement pairs labels with a run log's trials.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import PurePosixPath

from pydantic import ValidationError

from pytest_openkata.core.manifest import ManifestError
from pytest_openkata.core.report_paths import REPORT_NAME
from pytest_openkata.core.results_json import parse_report
from pytest_openkata.core.runlog import LoggedRun, RunInfo, RunLogError

__all__ = ["is_results_file", "parse_results_file", "results_order"]


def is_results_file(relative: PurePosixPath) -> bool:
    """Whether ``relative`` is named and placed as a skill's results JSON is written."""
    parts = relative.parts
    return (
        REPORT_NAME.fullmatch(relative.name) is not None
        and len(parts) >= 4
        and parts[-4:-2] == ("evals", "results")
    )


def results_order(name: str) -> tuple[str, int] | None:
    """A results JSON's time as a run log's name gives it (``20261201T100000Z``), and its
    ``-N``; None for another name."""
    match = REPORT_NAME.fullmatch(name)
    if match is None:
        return None
    return match["stamp"].replace("-", "") + "Z", int(match["n"] or 1)


def parse_results_file(log: str, text: str) -> LoggedRun:
    """The run a results JSON at ``log`` (relative to the viewer's folder) holds;
    :class:`RunLogError` naming the file, and the field, of one that is not a report."""
    try:
        report = parse_report(text, source=log)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the file"
        raise RunLogError(f"{log}: not a results JSON: {where}: {first['msg']}") from None
    except ManifestError as exc:  # its manifest is read after its fields are checked
        raise RunLogError(str(exc)) from None
    skill_dir = PurePosixPath(log).parents[3].as_posix()
    config = report.config
    info = RunInfo(
        finished_at=report.timestamp,
        threshold=report.threshold,
        settings={
            "agent": config.backend,
            "model": config.agent_model,
            "model_label": config.model_label,
            "judge": config.judge_backend or config.backend,
            "judge_model": config.judge_model,
        },
    )
    results = [
        replace(
            result,
            skill_dir=skill_dir,
            baseline=None
            if result.baseline is None
            else replace(result.baseline, skill_dir=skill_dir),
        )
        for result in report.scenarios
    ]
    return LoggedRun(info, results, source=log)
