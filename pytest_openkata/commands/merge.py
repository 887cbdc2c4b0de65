"""``python -m pytest_openkata merge DIR...``: the shards of a CI matrix made into one run.

Each ``DIR`` is a shard folder (``--eval-shard-dir`` of a job, as an artifact brings it back)
or a shard's file. The shards are checked (:func:`pytest_openkata.core.shards.merge_shards`),
then every reporter writes what the unsharded run writes, with the settings the shards ran
with, in the checkout of the current folder (or ``--rootdir``): each skill's results JSON at
the same path and with the same bytes (its timestamp is the last shard's), the run log, and
the HTML, Markdown and CSV views the settings ask for. The terminal shows each skill's block
and the gate's line, and the exit status is the unsharded run's: 1 when a complete skill is
below its threshold, a scenario errored, an ordinary test failed or a report could not be
written; else 0. Shards that cannot be merged exit 2 with the reason: not the parts of one run,
a trial record that does not hold together (named by its shard file and line), or shards whose
manifests drifted (another agent CLI version, reported model, image...: named by field with
both values) unless ``--allow-drift``, whose use the reports then record.

Shards run with a budget each record what they spent; the merge sums them and says so. A
shard that stopped for its budget may lack the scenarios and trials it never started: the
merged run is then "budget reached", partial as the unsharded run would be (no gate, no
results JSON), and its exit status is 1 only for errors.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from pytest_openkata import __version__
from pytest_openkata.contracts.results import ScenarioResult
from pytest_openkata.core.gate import gate_line
from pytest_openkata.core.jsonfiles import ScenarioLoadError
from pytest_openkata.core.reporting import Segment, make_run, report_run
from pytest_openkata.core.runlog import RunLogError, read_run_log
from pytest_openkata.core.scenario import load_scenario_options
from pytest_openkata.core.shards import MergedRun, ShardError, merge_shards, shard_files
from pytest_openkata.core.spending import BUDGET_EXTRA, budget_line, budget_summary
from pytest_openkata.core.summary import gate_failed, summarise
from pytest_openkata.core.versions import read_skill_version
from pytest_openkata.infra.text import visible

USAGE_ERROR = 2


class _Stdout:
    """The reporters' terminal lines, as plain text on standard output."""

    def write_lines(self, lines: Sequence[Sequence[Segment]]) -> None:
        for line in lines:
            print("".join(text for text, _colour in line))


def _rooted(result: ScenarioResult, rootdir: Path) -> ScenarioResult:
    """A logged result (its skill folder relative to the rootdir) in this checkout."""
    skill_dir = os.path.normpath(rootdir / result.skill_dir)
    baseline = None if result.baseline is None else _rooted(result.baseline, rootdir)
    return replace(result, skill_dir=skill_dir, baseline=baseline)


def merge(paths: Sequence[Path], rootdir: Path, *, allow_drift: bool = False) -> MergedRun:
    """The run of the shard files under ``paths`` (:class:`ShardError` when they are not the
    parts of one run, or drifted and ``allow_drift`` is off)."""
    files = shard_files(paths)
    missing = [path for path in paths if not path.exists()]
    if missing:
        raise ShardError(f"{missing[0]}: no such file or folder")
    runs = []
    for path in files:
        try:
            runs.append((str(path), read_run_log(path)))
        except RunLogError as exc:
            raise ShardError(str(exc)) from None
    return merge_shards(
        runs,
        __version__,
        lambda skill: read_skill_version(rootdir / skill),
        lambda skill, name: _scenario_trials(rootdir / skill / "evals" / name),
        allow_drift=allow_drift,
    )


def _scenario_trials(scenario_dir: Path) -> int | None:
    """The scenario's own trial count (scenario.json's ``trials``); None without one, or when
    scenario.json cannot be read (the scenario then errored before its trials ran)."""
    try:
        return load_scenario_options(scenario_dir / "scenario.json").trials
    except ScenarioLoadError:
        return None


def report(merged: MergedRun, rootdir: Path) -> int:
    """Write the merged run's reports and show it; the unsharded run's exit status."""
    settings = merged.settings
    results = [_rooted(result, rootdir) for result in merged.results]
    # A shard stopped for its budget: the merged run is partial (no gate, no results JSON).
    reached = merged.budget_reached
    partial = merged.partial or reached
    summaries = summarise(results, settings.threshold, rootdir, partial=partial)
    spending = {} if merged.spending is None else {BUDGET_EXTRA: [dict(merged.spending)]}
    run = report_run(
        make_run(
            summaries,
            settings,
            merged.finished_at,
            rootdir,
            drifts=merged.drifts,
            rejudged_from=merged.rejudged_from,
            terminal=_Stdout(),
            complete=not reached,
            log_extras=spending,
        )
    )
    if merged.spending is not None:
        print(visible(budget_summary(merged.spending)))
    # As the run errors a scenario in setup: its own arm's error, or its baseline arm's.
    errored = sum(
        1
        for result in results
        if result.error is not None
        or (result.baseline is not None and result.baseline.error is not None)
    )
    failed = (
        not reached
        and gate_failed(
            run.summaries,
            require_uplift=settings.require_uplift,
            fail_on_regression=settings.fail_on_regression,
        )
    ) or bool(errored or merged.failed or run.errors)
    status = 1 if failed else 0
    line = gate_line(
        run.summaries,
        settings.threshold,
        status,
        stopped=budget_line(merged.spending) if reached and merged.spending else None,
        errored=errored,
        failed=merged.failed,
        require_uplift=settings.require_uplift,
        fail_on_regression=settings.fail_on_regression,
        run_errors=len(run.errors),
    )
    print("".join(text for text, _colour in line))
    return status


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_openkata merge",
        description="Merge the shards of a run (--eval-shard I/N) into the reports the "
        "unsharded run writes, apply its gate and exit with its status.",
    )
    parser.add_argument(
        "shards", nargs="+", type=Path, metavar="DIR", help="shard folders or shard files"
    )
    parser.add_argument(
        "--rootdir",
        type=Path,
        default=Path.cwd(),
        help="the checkout the shards ran in (default: the current folder)",
    )
    parser.add_argument(
        "--allow-drift",
        action="store_true",
        help="merge shards whose manifests differ (another agent CLI version, model, image...); "
        "the reports say that it was allowed",
    )
    args = parser.parse_args(argv)
    rootdir = args.rootdir.absolute()
    try:
        merged = merge(args.shards, rootdir, allow_drift=args.allow_drift)
    except ShardError as exc:
        print(visible(f"merge: {exc}"), file=sys.stderr)  # names from the shard files
        return USAGE_ERROR
    print(f"merged {merged.count} shards: {len(merged.results)} scenarios")
    return report(merged, rootdir)
