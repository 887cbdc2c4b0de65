"""A recorded run to re-judge: every trial's agent answer as a run log holds it, graded again
without running the agent (the ``rejudge`` setting; ``python -m pytest_openkata rejudge LOG``).

A re-judge changes the grading only: another judge model, more judge votes, or criteria
edited since the run. The agent's answers, transcripts and workspace changes come from the
log, so the agent is never called, and the new run's reports say where they came from
(:meth:`RecordedRun.rejudged_from`).

What is graded again and what is taken from the record:

- the judge's criteria are judged again; a verdict comes from the cache only under the same
  judge, the same criteria wording and the same answer (the judge's cache key holds all three);
- the checks that read only the agent's output or transcript run again on the recorded ones;
- the checks that read the workspace (commands, files, diffs) keep their recorded verdicts: a
  log keeps the workspace only as diffs to show, not as files a check could read or a sandbox
  could be set up with again. When ``checks.json`` changed since the run, they cannot be taken
  from it, and the trial errors naming the check;
- a trial whose agent errored stays that error: there is no answer to grade;
- a re-judged trial's usage holds only the judge calls of the re-judge: the recorded agent's
  calls are kept apart (its ``recorded_agent``), out of the budget and of what the run spent.

The source run's description (:attr:`RecordedRun.info`, with its settings) is kept, for a
check of what differs between the two runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.errors import ConfigError
from pytest_openkata.contracts.results import AgentResult, CallStats, CriterionResult, TrialResult
from pytest_openkata.core.checks import CHECK_KIND
from pytest_openkata.core.runlog import (
    RunInfo,
    RunLogError,
    arm_name,
    read_run_log,
    relative_skill_dir,
)

__all__ = [
    "RecordedArm",
    "RecordedRun",
    "answered",
    "load_recorded",
    "recorded_agent",
    "recorded_agent_calls",
    "recorded_run",
    "rejudged_text",
    "workspace_verdicts",
]

# The digests that say what was graded (the rest say what the agent ran).
GRADED_DIGESTS = ("criteria", "checks")


@dataclass(frozen=True)
class RecordedArm:
    """One scenario arm of a recorded run: its trials in order, the digests of what it ran
    and its task as the agent got it."""

    trials: tuple[TrialResult, ...]
    digests: Mapping[str, str]
    task: str = ""

    def graded_digests(self, current: Mapping[str, str]) -> dict[str, str]:
        """The digests of a re-judged result: what the agent ran, as recorded, and what it
        was graded on, as it is now (``current``)."""
        kept = {k: v for k, v in self.digests.items() if k not in GRADED_DIGESTS}
        return {**kept, **{k: v for k, v in current.items() if k in GRADED_DIGESTS}}

    def checks_changed(self, current: Mapping[str, str]) -> bool:
        """Whether ``checks.json`` differs from the one the recorded run graded with."""
        return self.digests.get("checks") != current.get("checks")


@dataclass(frozen=True)
class RecordedRun:
    """A run log to re-judge: its file name, the source run's description and settings, and
    each scenario arm's trials by (skill folder relative to ``rootdir``, scenario, arm)."""

    log_name: str
    info: RunInfo
    arms: Mapping[tuple[str, str, str], RecordedArm]
    rootdir: Path

    def arm_of(self, skill_dir: Path | str, scenario: str, arm: str = "") -> RecordedArm | None:
        """The recorded arm of a scenario of this run (None: the log does not hold it)."""
        return self.arms.get((relative_skill_dir(skill_dir, self.rootdir), scenario, arm))

    def missing(self, skill_dir: Path | str, scenario: str, arm: str = "") -> str:
        """Why a scenario (arm) cannot be re-judged from this log: the log does not hold it."""
        where = arm_name(relative_skill_dir(skill_dir, self.rootdir), scenario, arm)
        return (
            f"{where} is not in the run log {self.log_name}: there is no recorded answer to "
            "re-judge (run it, or select only the scenarios the log holds)"
        )

    def rejudged_from(self) -> dict[str, Any]:
        """What the new run's log and reports say it was re-judged from: the source log's
        file name, when that run finished, and the judge and votes it had."""
        settings = self.info.settings
        return {
            "log": self.log_name,
            "finished_at": self.info.finished_at,
            "judge": str(settings.get("judge", "")),
            "judge_model": str(settings.get("judge_model", "")),
            "judge_votes": settings.get("judge_votes", 1),
        }


def recorded_run(settings: EvalSettings, rootdir: Path) -> RecordedRun | None:
    """The recorded run the ``rejudge`` setting names (a path relative to the current
    folder), None without one; :class:`~pytest_openkata.contracts.errors.ConfigError`
    naming the file (and the line) when it cannot be read."""
    if not settings.rejudge:
        return None
    try:
        return load_recorded(Path(settings.rejudge), rootdir)
    except RunLogError as exc:
        raise ConfigError(f"rejudge: {exc}") from None


def load_recorded(path: Path, rootdir: Path) -> RecordedRun:
    """The recorded run of the log at ``path``, whose skill folders are relative to
    ``rootdir``; :class:`~pytest_openkata.core.runlog.RunLogError` names the file and line
    when it cannot be read. Read once per process for each file and root folder."""
    return _load(path.expanduser().absolute(), rootdir)


@lru_cache(maxsize=4)
def _load(path: Path, rootdir: Path) -> RecordedRun:
    logged = read_run_log(path)
    trials: dict[tuple[str, str, str], list[TrialResult]] = {}
    scenarios: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for record in logged.trials:
        trials.setdefault(record.arm_key, []).append(record.trial)
        scenarios.setdefault(record.arm_key, record.scenario)
    arms = {
        key: RecordedArm(
            trials=tuple(sorted(found, key=lambda t: t.index)),
            digests=dict(scenarios[key].get("digests") or {}),
            task=str(scenarios[key].get("task", "")),
        )
        for key, found in trials.items()
    }
    return RecordedRun(path.name, logged.info, arms, rootdir)


def rejudged_text(rejudged_from: Mapping[str, Any]) -> str:
    """What every report of a re-judged run says of it, from its run record's
    ``rejudged_from`` (plain text: each report escapes it as it must)."""
    judge = "/".join(
        str(rejudged_from.get(key) or "")
        for key in ("judge", "judge_model")
        if rejudged_from.get(key)
    )
    votes = rejudged_from.get("judge_votes")
    had = f"; its judge {judge or 'unknown'}" + (f", {votes} vote(s)" if votes else "")
    return (
        f"Re-judged from run log {rejudged_from.get('log', '?')} (finished "
        f"{rejudged_from.get('finished_at', '?')}{had}): the agent's answers are that run's, "
        "graded again; no agent ran"
    )


def answered(trial: TrialResult) -> bool:
    """Whether the agent of a recorded trial gave an answer: its usage counts the agent's
    call (live or from the cache), or, for a trial that was itself re-judged, the recorded
    run's did. A trial whose agent errored counts none."""
    return not recorded_agent_calls(trial).empty


def recorded_agent_calls(trial: TrialResult) -> CallStats:
    """The agent calls that gave a recorded trial's answer: its own run's, or for a trial
    that was itself re-judged, those of the run it was re-judged from. A re-judge keeps them
    as where its answer came from; they are not its spend."""
    return trial.usage.agent if trial.recorded_agent is None else trial.recorded_agent


def recorded_agent(trial: TrialResult) -> AgentResult:
    """The agent's result of a recorded trial, as graders see it: what the judge read (its
    output, for a sandboxed run followed by the workspace changes), what it printed, how it
    worked and its conversation. The workspace's files are not recorded (``changes`` None)."""
    trace = trial.trace
    if trace is None:
        return AgentResult("", "", cached=trial.agent_cached, environment=trial.environment)
    return AgentResult(
        trace.judged if trace.judged is not None else trace.output,
        trace.output,
        cached=trial.agent_cached,
        engine=trace.engine,
        lost_engines=trace.lost_engines,
        transcript=trace.transcript,
        environment=trial.environment,
        turns=trace.turns,
    )


def workspace_verdicts(
    trial: TrialResult, *, checks_changed: bool
) -> Mapping[str, CriterionResult]:
    """The recorded verdicts of a trial's checks, by name, for the checks that need the
    workspace; none when ``checks.json`` changed since (they would be another check's)."""
    if checks_changed:
        return {}
    criteria: Sequence[CriterionResult] = trial.criteria or ()
    return {c.name: c for c in criteria if c.kind == CHECK_KIND}
