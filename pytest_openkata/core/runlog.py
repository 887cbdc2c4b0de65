"""The run log: every scenario trial of a run, as JSON Lines, and reading one back.

A run log is the input of every view of a run after the fact (the HTML, Markdown and CSV
reports, a comparison with an earlier run). Its first record describes the run (the schema
version, when it finished, whether it completed, its settings); then comes one record per
scenario trial and arm, holding everything the trial saw and did: the digests of what it ran,
every criterion's verdict, reason, points and votes, the agent's output and workspace changes
(:class:`~pytest_openkata.contracts.results.TrialTrace`), each grader's raw answers, usage, timings,
cache hits and errors. Skill folders are written relative to the run's root folder: a log
holds no machine paths. Secrets were masked before any of it was recorded.

Reading a log gives the scenario results back (:func:`read_run_log`): the trials of a scenario
and arm are combined as the run combined them, so every reader sees what the run saw.
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

from pytest_openkata.contracts.config import DEFAULT_THRESHOLD, EvalSettings
from pytest_openkata.contracts.errors import OpenkataError
from pytest_openkata.contracts.results import (
    AutoTrials,
    CriterionResult,
    ScenarioResult,
    TrialResult,
)
from pytest_openkata.core.manifest import Drift, Manifest, ManifestError
from pytest_openkata.core.summary import SkillSummary, summarise
from pytest_openkata.core.trials import combine_trials
from pytest_openkata.infra.text import valid_unicode

__all__ = [
    "DRIFT_EXTRA",
    "LOG_NAME",
    "SCHEMA_VERSION",
    "LoggedRun",
    "LoggedTrial",
    "RunInfo",
    "RunLogError",
    "ScenarioLines",
    "arm_name",
    "drift_record",
    "json_line",
    "log_folder",
    "log_lines",
    "log_name",
    "logs_newest_first",
    "parse_run_log",
    "prune_logs",
    "read_run_log",
    "relative_skill_dir",
    "run_info",
    "run_record",
    "run_settings",
    "scenario_records",
    "skill_summaries",
]

SCHEMA_VERSION = 1
RUN_RECORD = "run"
TRIAL_RECORD = "trial"
EXTRA_RECORD = "extra"
CHANGES_EXTRA = "changes"  # extra records of a comparison with an earlier run, one per skill
# Extra records of what drifted between the runs or arms compared (their manifests), one per
# skill and comparison; a record of the whole run (a merge's) has the skill folder "".
DRIFT_EXTRA = "drift"

# A trial record's keys that belong to its scenario (the same on every trial of it).
_SCENARIO_KEYS = ("skill", "skill_dir", "scenario", "description", "skill_scenarios", "arm")
# How ``trials = auto`` ran the scenario's arm (on every trial record of it, when it did).
AUTO_KEY = "auto_trials"


_STAMP = "%Y%m%dT%H%M%SZ"
LOG_NAME = re.compile(r"(?P<stamp>[0-9]{8}T[0-9]{6}Z)(?:-(?P<n>[0-9]+))?\.jsonl")
"""The name of a run log: its UTC time, then ``-N`` for the Nth log of the same second."""


class RunLogError(OpenkataError):
    """A run log that cannot be read; the message names the file and the line."""


@dataclass(frozen=True)
class RunInfo:
    """The run a log is of: when it finished (ISO 8601, UTC), whether every selected scenario
    ran, its threshold, the settings it ran with (no secrets) and its reproducibility
    manifest (:mod:`pytest_openkata.core.manifest`; None in a log written before manifests);
    for a run that graded the answers of an earlier one again
    (:mod:`pytest_openkata.core.recorded`), what that run was (``rejudged_from``: its log's
    file name, when it finished, its judge and votes); the file name of the live log the run
    kept while it ran (``live_log``: "" for none, and in a log written before live logs), by
    which a viewer of that live log finds this log once the run ends."""

    finished_at: str
    complete: bool = True
    threshold: int = DEFAULT_THRESHOLD
    settings: Mapping[str, Any] = field(default_factory=dict)
    rejudged_from: Mapping[str, Any] | None = None
    manifest: Manifest | None = None
    live_log: str = ""


@dataclass(frozen=True)
class LoggedTrial:
    """One trial record as the log holds it, with its line, for checks that name the line
    (the merge's): its scenario's fields (``skill_dir``, ``scenario``, ``arm``... with its
    ``digests`` and ``task``) and the trial."""

    line: int
    scenario: Mapping[str, Any]
    trial: TrialResult

    @property
    def arm_key(self) -> tuple[str, str, str]:
        """Its skill folder, scenario and arm: the trials combined into one result."""
        return (self.scenario["skill_dir"], self.scenario["scenario"], self.scenario["arm"])


@dataclass(frozen=True)
class LoggedRun:
    """A run as a log holds it: its description, its scenario results (each own-arm result
    carries its baseline arm's), the extra records other views added (by kind), and its
    trial records in the log's order."""

    info: RunInfo
    results: list[ScenarioResult]
    extras: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)
    source: str = "run log"  # what errors name: the log's file
    trials: Sequence[LoggedTrial] = ()


def run_settings(settings: EvalSettings) -> dict[str, Any]:
    """The settings a run log records: what ran and how, never a secret or a machine path."""
    return {
        "agent": settings.backend,
        "model": settings.model,
        "model_label": settings.model_label,
        "judge": settings.judge_backend or settings.backend,
        "judge_model": settings.judge_model or settings.model,
        "trials": settings.trials,
        "judge_votes": settings.judge_votes,
        "baseline": settings.baseline,
        "judge_pairwise": settings.judge_pairwise,
        "sandbox_agent": settings.sandbox.agent,
        "sandbox_image": settings.sandbox.image,
        "cache": settings.cache,
        "category": settings.category,
        "skill_delivery": settings.skill_delivery,
        # Only when they apply, so that the settings of other runs read as they did.
        **(
            {"trials_max": settings.trials_max, "trials_confidence": settings.trials_confidence}
            if settings.trials == "auto"
            else {}
        ),
        **({"uplift_target": settings.uplift_target} if settings.baseline else {}),
        # The own arm's variant of a variants file (the baseline arm's is the baseline's).
        **({"variant": settings.variant} if settings.variants else {}),
    }


def drift_record(drift: Drift, skill_dir: str) -> dict[str, Any]:
    """The run log's extra record of ``drift`` for the skill of relative folder ``skill_dir``
    ("" for the whole run)."""
    return {**drift.to_dict(), "skill_dir": skill_dir}


def run_info(
    settings: EvalSettings,
    finished_at: datetime,
    *,
    complete: bool,
    rejudged_from: Mapping[str, Any] | None = None,
    manifest: Manifest | None = None,
    live_log: str = "",
) -> RunInfo:
    """The run record of the log of a run with ``settings`` that finished at ``finished_at``,
    with its ``manifest`` (``rejudged_from``: the recorded run it re-judged, if any;
    ``live_log``: the file name of the live log it kept, if any)."""
    return RunInfo(
        finished_at=finished_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        complete=complete,
        threshold=settings.threshold,
        settings=run_settings(settings),
        rejudged_from=None if rejudged_from is None else dict(rejudged_from),
        manifest=manifest,
        live_log=live_log,
    )


def log_folder(settings: EvalSettings, rootdir: Path) -> Path | None:
    """Where run logs go (None: ``log_dir`` is off)."""
    if not settings.log_dir:
        return None
    return rootdir / Path(settings.log_dir).expanduser()


def log_name(finished_at: datetime) -> str:
    """The file name of the log of a run that finished at ``finished_at``, a UTC time (see
    :data:`LOG_NAME`)."""
    return f"{finished_at.strftime(_STAMP)}.jsonl"


def logs_newest_first(folder: Path) -> list[Path]:
    """The run logs of ``folder`` (files named as logs are), the newest first."""
    found = []
    for path in folder.iterdir():
        match = LOG_NAME.fullmatch(path.name)
        if match and path.is_file():
            found.append(((match["stamp"], int(match["n"] or 1)), path))
    return [path for _key, path in sorted(found, reverse=True)]


def prune_logs(folder: Path, keep: int) -> None:
    """Delete all but the newest ``keep`` run logs of ``folder`` (other files are left)."""
    for old in logs_newest_first(folder)[keep:]:
        old.unlink(missing_ok=True)


def relative_skill_dir(skill_dir: str | Path, rootdir: Path) -> str:
    """A skill folder as a log and every committed report name it: relative to the run's
    root folder (with ``..`` for one outside it, as the JUnit file names scenarios), never a
    machine path; a skill that is the root folder itself is ``.``."""
    return Path(os.path.relpath(Path(skill_dir), rootdir)).as_posix()


def _trial_record(result: ScenarioResult, trial: TrialResult, skill_dir: str) -> dict[str, Any]:
    return {
        "record": TRIAL_RECORD,
        "skill": result.skill,
        "skill_dir": skill_dir,
        "scenario": result.name,
        "description": result.plain_description,
        "skill_scenarios": list(result.skill_scenarios),
        "arm": result.arm,
        "task": result.task,
        "digests": dict(result.digests),
        **({} if result.auto_trials is None else {AUTO_KEY: _json_data(result.auto_trials)}),
        **_renamed(_json_data(trial), "index", "trial"),
    }


_ATOMS = (str, int, float, bool, type(None))
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _json_data(value: Any) -> Any:
    """What :func:`dataclasses.asdict` makes of ``value``, for a record written as JSON at
    once: the same keys and values, without the deep copy of every text and number that
    ``asdict`` makes (a run log holds thousands of them, and writing it is at the end of every
    run)."""
    if isinstance(value, _ATOMS):
        return value
    if is_dataclass(value) and not isinstance(value, type):
        kind = type(value)
        names = _FIELD_NAMES.get(kind)
        if names is None:
            names = _FIELD_NAMES[kind] = tuple(f.name for f in fields(value))
        return {name: _json_data(getattr(value, name)) for name in names}
    if isinstance(value, tuple):  # a subclass too (a named tuple): JSON writes it alike
        return tuple(_json_data(item) for item in value)
    if isinstance(value, list):
        return [_json_data(item) for item in value]
    if isinstance(value, dict):  # an OrderedDict or a defaultdict too
        return {_json_data(key): _json_data(item) for key, item in value.items()}
    return copy.deepcopy(value)  # as asdict does


def _renamed(data: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    return {new if key == old else key: value for key, value in data.items()}


def run_record(info: RunInfo) -> dict[str, Any]:
    """The first record of a run log: the run ``info`` describes."""
    head = {
        "record": RUN_RECORD,
        "schema": SCHEMA_VERSION,
        "finished_at": info.finished_at,
        "complete": info.complete,
        "threshold": info.threshold,
        "settings": dict(info.settings),
    }
    if info.rejudged_from is not None:  # the run record of a run of its own has none
        head["rejudged_from"] = dict(info.rejudged_from)
    if info.manifest is not None:
        head["manifest"] = info.manifest.to_dict()
    if info.live_log:  # a run that kept no live log writes none
        head["live_log"] = info.live_log
    return head


def scenario_records(result: ScenarioResult, rootdir: Path) -> Iterator[dict[str, Any]]:
    """The trial records of one scenario's result (its baseline arm's too), interleaved per
    trial as the run ran them; its skill folder relative to ``rootdir``."""
    skill_dir = relative_skill_dir(result.skill_dir, rootdir)
    arms = [result] if result.baseline is None else [result, result.baseline]
    for trial_index in range(max(len(arm.trials) for arm in arms)):
        for arm in arms:
            if trial_index < len(arm.trials):
                yield _trial_record(arm, arm.trials[trial_index], skill_dir)


class ScenarioLines:
    """The run log's lines of each scenario's trials (:func:`scenario_records`, one JSON line
    each), rendered once per result and kept: the live log writes a scenario's lines when it
    finishes, and the run log at the end of the run holds the very same lines, so it takes
    them from here instead of rendering every trial a second time."""

    def __init__(self, rootdir: Path) -> None:
        self.rootdir = rootdir
        # By the result's identity; the result is kept beside its text so that the identity
        # of a result that is gone is never taken for another's.
        self._lines: dict[int, tuple[ScenarioResult, str]] = {}

    def of(self, result: ScenarioResult) -> str:
        """The lines of ``result``'s trials (its baseline arm's too), skill folders relative
        to :attr:`rootdir`; "" when every trial was skipped."""
        kept = self._lines.get(id(result))
        if kept is not None and kept[0] is result:
            return kept[1]
        text = "".join(json_line(record) for record in scenario_records(result, self.rootdir))
        self._lines[id(result)] = (result, text)
        return text


def _lines(
    info: RunInfo,
    results: Iterable[ScenarioResult],
    scenario_lines: ScenarioLines,
    extras: Mapping[str, Sequence[Mapping[str, Any]]],
) -> Iterator[str]:
    yield json_line(run_record(info))
    rootdir = scenario_lines.rootdir
    ordered = sorted(results, key=lambda r: (relative_skill_dir(r.skill_dir, rootdir), r.name))
    for result in ordered:
        yield scenario_lines.of(result)
    for kind, records in sorted(extras.items()):
        for record in records:
            yield json_line({"record": EXTRA_RECORD, "kind": kind, "data": dict(record)})


# JSON leaves these raw inside strings, but many line readers (Python's str.splitlines, editors,
# some log shippers) end a line at them: written escaped, a record stays on its one line.
_LINE_BREAKS_IN_STRINGS = str.maketrans(
    {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def json_line(record: Mapping[str, Any]) -> str:
    """One record of a JSON Lines file: keys sorted, non-ASCII text as it is, and no
    character any reader could take for the end of a line but the final ``\\n``; a lone
    surrogate (a provider's text the boundaries did not clean) is U+FFFD, which UTF-8 can hold."""
    text = json.dumps(record, ensure_ascii=False, sort_keys=True)
    return valid_unicode(text).translate(_LINE_BREAKS_IN_STRINGS) + "\n"


def log_lines(
    info: RunInfo,
    results: Iterable[ScenarioResult],
    rootdir: Path,
    extras: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    *,
    rendered: ScenarioLines | None = None,
) -> str:
    """The run log of a run's results as JSON Lines text (skill folders relative to
    ``rootdir``); ``extras`` are further records by kind, e.g. a comparison with a baseline.
    ``rendered`` holds the lines of scenarios already rendered (the live log's) relative to
    the same ``rootdir``; the others are rendered here."""
    if rendered is None or rendered.rootdir != rootdir:
        rendered = ScenarioLines(rootdir)
    return "".join(_lines(info, results, rendered, extras or {}))


def read_run_log(path: Path, *, traces: bool = True) -> LoggedRun:
    """The run a log file holds; :class:`RunLogError` when it cannot be read. Without
    ``traces`` its trials keep no answer (see :func:`parse_run_log`)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RunLogError(f"{path}: cannot read the run log: {exc}") from exc
    return parse_run_log(text, source=str(path), traces=traces)


# What a trace holds of what the trial saw, beside how it worked: the bulk of a log.
_SEEN_KEYS = ("output", "judged", "changes", "answers", "turns")


def parse_run_log(text: str, *, source: str = "run log", traces: bool = True) -> LoggedRun:
    """The run a log's text holds; :class:`RunLogError` naming ``source`` and the line.

    Without ``traces`` the trials keep their scores, verdicts, errors and how the agent worked
    (the transcript, timings and engine of their traces) but not what the trial saw: the
    agent's output, the workspace diff, the graders' answers, the judge's text. A list of runs
    or a run's overview then holds no answer of any of them."""
    records = []
    # Only "\\n" ends a record: a log written before line separators were escaped, or by
    # another tool, may hold U+2028 and the like raw inside its strings.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RunLogError(f"{source}: line {number}: not JSON: {exc.msg}") from exc
        except RecursionError:  # arrays or objects nested deeper than Python's stack
            raise RunLogError(f"{source}: line {number}: not JSON: nested too deeply") from None
        except ValueError as exc:  # a number of more digits than Python converts
            raise RunLogError(f"{source}: line {number}: not JSON: {exc}") from None
        if not isinstance(record, dict):
            raise RunLogError(f"{source}: line {number}: a record must be a JSON object")
        records.append((number, record))
    if not records or records[0][1].get("record") != RUN_RECORD:
        raise RunLogError(f"{source}: line 1: not a run log (its first record must be the run)")
    info = _run_record(records[0][1], source)
    trials: dict[tuple[str, str, str], tuple[dict[str, Any], list[TrialResult]]] = {}
    logged: list[LoggedTrial] = []
    extras: dict[str, list[dict[str, Any]]] = {}
    for number, record in records[1:]:
        kind = record.get("record")
        if kind == EXTRA_RECORD:
            data = record.get("data")
            if not isinstance(data, dict):
                raise RunLogError(f"{source}: line {number}: an extra record holds no data")
            extras.setdefault(str(record.get("kind")), []).append(data)
            continue
        if kind != TRIAL_RECORD:
            raise RunLogError(f"{source}: line {number}: unknown record {kind!r}")
        try:
            scenario, trial = _trial_of(record, traces=traces)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise RunLogError(f"{source}: line {number}: not a trial record: {exc!r}") from exc
        key = (scenario["skill_dir"], scenario["scenario"], scenario["arm"])
        arm = trials.setdefault(key, (scenario, []))[1]
        where = f"{source}: line {number}: trial {trial.index!r} of {arm_name(*key)}"
        _same_checklist(arm, trial, where)
        arm.append(trial)
        logged.append(LoggedTrial(number, scenario, trial))
    try:
        results = _combined(trials)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise RunLogError(f"{source}: its trial records do not make results: {exc!r}") from exc
    return LoggedRun(info, results, extras, source, logged)


def _trial_of(
    record: Mapping[str, Any], *, traces: bool = True
) -> tuple[dict[str, Any], TrialResult]:
    """A trial record's scenario fields (with its digests, task and how ``trials = auto``
    ran it) and its trial, without what it saw unless ``traces`` (see :func:`parse_run_log`);
    raises as :func:`_scenario_fields` does when it is malformed."""
    scenario = _scenario_fields(record)
    scenario["digests"] = dict(record.get("digests") or {})
    scenario["task"] = str(record.get("task", ""))
    auto = record.get(AUTO_KEY)
    scenario[AUTO_KEY] = None if auto is None else AutoTrials.from_dict(auto)
    fields = {
        k: v
        for k, v in _renamed(dict(record), "trial", "index").items()
        if k not in (*_SCENARIO_KEYS, "record", "digests", "task", AUTO_KEY)
    }
    if not traces:
        fields = _without_what_it_saw(fields)
    return scenario, TrialResult.from_dict(fields)


def _without_what_it_saw(fields: dict[str, Any]) -> dict[str, Any]:
    """A trial record's fields without the agent's output and its trace's record of what the
    trial saw (see :func:`parse_run_log`)."""
    kept = {key: value for key, value in fields.items() if key != "agent_output"}
    trace = kept.get("trace")
    if isinstance(trace, dict):
        kept["trace"] = {key: value for key, value in trace.items() if key not in _SEEN_KEYS}
    return kept


def _rejudged_from(value: object, source: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise RunLogError(f"{source}: line 1: rejudged_from must be an object, not {value!r}")
    return dict(value)


def _threshold(value: object, source: str) -> int:
    """The run record's threshold: a whole percentage from 0 to 100."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 100:
        raise RunLogError(f"{source}: line 1: threshold must be a percentage from 0 to 100")
    return int(value)


def _live_log(value: object, source: str) -> str:
    """The run record's ``live_log``: a file name."""
    if not isinstance(value, str) or "/" in value or "\\" in value:
        raise RunLogError(f"{source}: line 1: live_log must be a file name")
    return value


def _run_record(head: Mapping[str, Any], source: str) -> RunInfo:
    """The run record (line 1) read back; a log written before manifests has none."""
    if head.get("schema") != SCHEMA_VERSION:
        raise RunLogError(
            f"{source}: line 1: schema version {head.get('schema')!r} is not "
            f"{SCHEMA_VERSION}, the one this version of pytest-openkata reads"
        )
    try:
        return RunInfo(
            finished_at=str(head["finished_at"]),
            complete=bool(head.get("complete", True)),
            threshold=_threshold(head.get("threshold", DEFAULT_THRESHOLD), source),
            settings=dict(head.get("settings") or {}),
            rejudged_from=_rejudged_from(head.get("rejudged_from"), source),
            manifest=None
            if head.get("manifest") is None
            else Manifest.from_dict(head["manifest"], source=f"{source}: line 1"),
            live_log=_live_log(head.get("live_log", ""), source),
        )
    except ManifestError as exc:
        raise RunLogError(str(exc)) from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise RunLogError(f"{source}: line 1: the run record lacks {exc}") from exc


def arm_name(skill_dir: str, scenario: str, arm: str) -> str:
    """A scenario's arm as errors name it: ``skills/x::scenario-1 (baseline arm REF)``."""
    return f"{skill_dir}::{scenario}" + (f" (baseline arm {arm})" if arm else "")


def _same_checklist(arm: Sequence[TrialResult], trial: TrialResult, where: str) -> None:
    """The trials of one arm are combined criterion by criterion: each graded one must have
    the same criteria, in the same order and with the same points, as the first."""
    graded = next((other for other in arm if other.criteria is not None), None)
    if graded is None or trial.criteria is None:
        return
    if _checklist(trial.criteria) != _checklist(graded.criteria or []):
        raise RunLogError(
            f"{where} was graded on other criteria than its trial {graded.index!r} (their "
            "names, order or points differ)"
        )


def _checklist(criteria: Sequence[CriterionResult]) -> list[tuple[object, object]]:
    return [(criterion.name, criterion.max_score) for criterion in criteria]


def _scenario_fields(record: Mapping[str, Any]) -> dict[str, Any]:
    """A trial record's scenario fields, checked: a malformed one raises ``TypeError``."""
    fields = {key: record[key] for key in _SCENARIO_KEYS}
    for key in ("skill", "skill_dir", "scenario", "description", "arm"):
        if not isinstance(fields[key], str):
            raise TypeError(f"{key} must be a string, not {fields[key]!r}")
    names = fields["skill_scenarios"]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise TypeError(f"skill_scenarios must be a list of names, not {names!r}")
    return fields


def _combined(
    trials: Mapping[tuple[str, str, str], tuple[dict[str, Any], list[TrialResult]]],
) -> list[ScenarioResult]:
    by_arm: dict[tuple[str, str], dict[str, ScenarioResult]] = {}
    for (skill_dir, name, arm), (scenario, arm_trials) in trials.items():
        result = combine_trials(
            sorted(arm_trials, key=lambda t: t.index),
            skill=scenario["skill"],
            skill_dir=str(PurePosixPath(skill_dir)),
            name=name,
            description=scenario["description"],
            skill_scenarios=scenario["skill_scenarios"],
        )
        by_arm.setdefault((skill_dir, name), {})[arm] = replace(
            result,
            arm=arm,
            digests=scenario["digests"],
            task=scenario["task"],
            auto_trials=scenario.get(AUTO_KEY),
        )
    results = []
    for arms in by_arm.values():
        own = arms.pop("", None)
        if own is None:
            continue  # a baseline arm without its own arm: nothing to compare it with
        baseline = next(iter(arms.values()), None)
        results.append(own if baseline is None else replace(own, baseline=baseline))
    return sorted(results, key=lambda r: (r.skill_dir, r.name))


def skill_summaries(run: LoggedRun) -> list[SkillSummary]:
    """The skills of a logged run, scored as the run scored them, each with its comparison
    with an earlier run when the run made one; skill folders are the log's relative ones."""
    from pytest_openkata.core.regression import SkillChanges

    summaries = summarise(run.results, run.info.threshold, Path())
    changes = {}
    for number, record in enumerate(run.extras.get(CHANGES_EXTRA, ()), start=1):
        try:
            key = str(record.get("skill_dir") or record["skill"])
            changes[key] = SkillChanges.from_dict(record)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise RunLogError(
                f"{run.source}: comparison record {number} cannot be read: {exc!r}"
            ) from exc
    drifts: dict[str, list[Drift]] = {}
    for number, record in enumerate(run.extras.get(DRIFT_EXTRA, ()), start=1):
        try:
            drifts.setdefault(str(record.get("skill_dir", "")), []).append(Drift.from_dict(record))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise RunLogError(
                f"{run.source}: drift record {number} cannot be read: {exc!r}"
            ) from exc
    return [
        replace(
            summary,
            changes=changes.get(summary.skill_dir.as_posix(), changes.get(summary.name)),
            drift=(*drifts.get("", ()), *drifts.get(summary.skill_dir.as_posix(), ())),
        )
        for summary in summaries
    ]
