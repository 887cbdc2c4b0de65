"""The earlier run that ``--eval-compare`` compares this run with, loaded for each skill.

The setting is one of:

- the path of a results JSON (:func:`~pytest_openkata.core.results_json.parse_report`): it
  is of one skill, matched by the skill's name;
- the path of a run log (:func:`~pytest_openkata.core.runlog.parse_run_log`): it may hold
  several skills, each matched by its folder relative to the run's root folder
  (:func:`~pytest_openkata.core.runlog.relative_skill_dir`);
- ``auto``: for each skill, the newest earlier run of the same selection (:func:`auto_runs`):
  of the same model, among its results JSONs under ``<skill>/evals/results/<model>/`` (the
  folder :func:`~pytest_openkata.core.report_paths.auto_report_path` writes
  to) and the run logs (``log_dir``), partial runs' included. The comparison is made before
  this run's reports and log are written, so its own are never the newest.

A relative path is relative to the current folder, as pytest's ``--junitxml``. What it names
is told by its content, not its name: a run log's first line is its run record. A file that
cannot be read, or is neither kind, or matches none of the run's skills, is an
:class:`EarlierRunError` naming it (under ``auto``, a results JSON too; a run log that cannot
be read is passed over, and named in ``skipped``). A skill the file does not hold, or that has
no earlier run under ``auto``, is not an error: it gets no comparison, and its
:class:`~pytest_openkata.core.regression.SkillChanges` says why in ``note``. The earlier run
is named by its file name only, never by a machine path.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.errors import OpenkataError
from pytest_openkata.contracts.results import ScenarioResult
from pytest_openkata.core.manifest import (
    COMPARE,
    Drift,
    Manifest,
    ManifestError,
    compare_manifests,
)
from pytest_openkata.core.regression import SkillChanges, compare_skill_runs
from pytest_openkata.core.report_paths import auto_report_path, report_name_order
from pytest_openkata.core.results_json import parse_report
from pytest_openkata.core.runlog import (
    CHANGES_EXTRA,
    DRIFT_EXTRA,
    LOG_NAME,
    RUN_RECORD,
    LoggedRun,
    RunLogError,
    drift_record,
    log_folder,
    logs_newest_first,
    parse_run_log,
    relative_skill_dir,
)
from pytest_openkata.core.summary import SkillSummary

__all__ = [
    "AUTO",
    "EarlierRun",
    "EarlierRunError",
    "auto_runs",
    "compare_and_check_drift",
    "compare_run",
    "compare_with_earlier",
    "earlier_runs",
    "newest_report",
    "results_folder",
]

AUTO = "auto"

# Any time does: only the folder of the path a report of that time would go to is used.
_ANY_TIME = datetime(2000, 1, 1, tzinfo=UTC)


class EarlierRunError(OpenkataError):
    """The earlier run cannot be used; the message names the file and what is wrong."""


@dataclass(frozen=True)
class EarlierRun:
    """A skill's results in the earlier run, and that run's file name (``label``). When there
    is nothing to compare with, ``results`` is empty and ``note`` says why; ``skipped`` names
    the run logs passed over because they cannot be read. ``manifest`` is what the earlier
    run recorded it ran with (None: it recorded none, written before manifests or by the
    reference runner)."""

    label: str
    results: tuple[ScenarioResult, ...]
    note: str = ""
    skipped: tuple[str, ...] = ()
    manifest: Manifest | None = None


def _shown(path: Path, rootdir: Path) -> str:
    """A path as an error names it: relative to the root folder when it lies under it."""
    try:
        return path.resolve().relative_to(rootdir.resolve()).as_posix()
    except (OSError, ValueError):
        return str(path)


def _validation_problem(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {first['msg']}" if where else str(first["msg"])


def _is_run_log(text: str) -> bool:
    """Whether the text's first line is a run log's run record."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    try:
        record = json.loads(first)
    except json.JSONDecodeError:
        return False
    return isinstance(record, dict) and record.get("record") == RUN_RECORD


def _read(path: Path, shown: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise EarlierRunError(f"{shown}: no such file") from None
    except IsADirectoryError:
        raise EarlierRunError(f"{shown}: a folder, not a results JSON or a run log") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise EarlierRunError(f"{shown}: cannot be read: {exc}") from exc


def _report_results(text: str, shown: str) -> tuple[str, list[ScenarioResult], Manifest | None]:
    """The skill's name, scenario results and manifest of a results JSON."""
    try:
        report = parse_report(text, source=shown)
    except ValidationError as exc:
        raise EarlierRunError(
            f"{shown}: neither a results JSON nor a run log ({_validation_problem(exc)})"
        ) from exc
    except ManifestError as exc:
        raise EarlierRunError(str(exc)) from exc
    return report.skill, list(report.scenarios), report.manifest


def _from_report(
    text: str, path: Path, shown: str, summaries: Sequence[SkillSummary]
) -> dict[Path, EarlierRun]:
    skill, results, manifest = _report_results(text, shown)
    names = [summary.name for summary in summaries]
    if skill not in names:
        raise EarlierRunError(
            f"{shown}: a report of skill {skill!r}, which this run did not run "
            f"(it ran {', '.join(names) or 'no skill'})"
        )
    label = path.name
    return {
        summary.skill_dir: EarlierRun(label, tuple(results), manifest=manifest)
        if summary.name == skill
        else EarlierRun(label, (), note=f"not in {label}")
        for summary in summaries
    }


def _from_log(
    text: str, path: Path, shown: str, summaries: Sequence[SkillSummary], rootdir: Path
) -> dict[Path, EarlierRun]:
    try:
        logged = parse_run_log(text, source=shown)
    except RunLogError as exc:
        raise EarlierRunError(str(exc)) from exc
    by_skill: dict[str, list[ScenarioResult]] = {}
    for result in logged.results:
        by_skill.setdefault(result.skill_dir, []).append(result)
    wanted = {
        summary.skill_dir: relative_skill_dir(summary.skill_dir, rootdir) for summary in summaries
    }
    if not set(wanted.values()) & by_skill.keys():
        raise EarlierRunError(
            f"{shown}: a run log of {', '.join(sorted(by_skill)) or 'no skill'}, none of "
            f"which this run ran (it ran {', '.join(wanted.values()) or 'no skill'})"
        )
    label = path.name
    return {
        skill_dir: EarlierRun(label, tuple(by_skill[relative]), manifest=logged.info.manifest)
        if relative in by_skill
        else EarlierRun(label, (), note=f"not in {label}")
        for skill_dir, relative in wanted.items()
    }


def results_folder(skill_dir: Path, model: str) -> Path:
    """The folder of a skill's reports of ``model``: where this run's report goes when no
    ``--eval-output`` is given."""
    return auto_report_path(skill_dir, model, _ANY_TIME).parent


def newest_report(folder: Path, exclude: Collection[Path] = ()) -> Path | None:
    """The newest report of a results folder: of the files named as reports are written
    there (``<UTC time>.json``, ``<UTC time>-N.json`` for the Nth of a second), the one of the
    latest time and then the highest N, leaving out ``exclude``; None when there is none.

    The order is :func:`~pytest_openkata.core.report_paths.report_name_order`'s, as the
    catalogue's plugin rule takes it. Other names (``results-*.json``: ``--eval-output``
    files) are not reports of this folder's runs and are left out.
    """
    left_out = {path.resolve() for path in exclude}
    try:
        entries = list(folder.iterdir())
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise EarlierRunError(f"{folder}: cannot be listed: {exc.strerror or exc}") from exc
    found = []
    for path in entries:
        order = report_name_order(path.name)
        if order is not None and path.is_file() and path.resolve() not in left_out:
            found.append((order, path))
    return max(found)[1] if found else None


@dataclass(frozen=True)
class _Selection:
    """The scenarios of a skill a run ran (``names``), and whether they were every scenario
    the skill had on disk then (``whole``)."""

    names: frozenset[str]
    whole: bool

    @classmethod
    def of(cls, results: Iterable[ScenarioResult]) -> _Selection:
        ran = list(results)
        names = frozenset(result.name for result in ran)
        on_disk = {name for result in ran for name in result.skill_scenarios}
        return cls(names, names >= on_disk)

    def covered_by(self, earlier: _Selection) -> bool:
        """Whether an earlier run of ``earlier`` is one of this selection: a run of the whole
        skill takes an earlier run of the whole skill (as it was then: a scenario added since
        is ``new``, one removed ``missing``); a run of some scenarios takes an earlier run
        that ran at least those."""
        return earlier.whole if self.whole else self.names <= earlier.names

    def described(self) -> str:
        if self.whole:
            return "the whole skill"
        names = sorted(self.names)
        shown = ", ".join(names[:3])
        return shown if len(names) <= 3 else f"{shown} and {len(names) - 3} more"


_REPORT, _LOG = 1, 0


def _written_ns(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def _newest_first(
    reports: list[tuple[tuple[datetime, int, int], Path]],
    logs: list[tuple[tuple[datetime, int, int], Path]],
) -> list[tuple[Path, int]]:
    """Reports and run logs, newest first, each with its kind. Their names give the second;
    within one second, when they were written decides: a run writes its report just before
    its log, so a report is placed with the first log written after it (its own run's, which
    it comes before, as the name the run published), and a later run's log of the same second
    before both."""
    entries: list[tuple[datetime, int, int, Path, int]] = []
    log_times = [(key[0], _written_ns(path)) for key, path in logs]
    for key, path in logs:
        entries.append((key[0], _written_ns(path), 0, path, _LOG))
    for key, path in reports:
        written = _written_ns(path)
        own_log = [ns for second, ns in log_times if second == key[0] and ns >= written]
        entries.append((key[0], min(own_log, default=written), 1, path, _REPORT))
    entries.sort(key=lambda entry: entry[:3], reverse=True)
    return [(path, kind) for *_key, path, kind in entries]


def _report_candidates(folder: Path) -> list[tuple[tuple[datetime, int, int], Path]]:
    """The reports of a results folder, each with its time (as :func:`newest_report` takes
    them)."""
    try:
        entries = list(folder.iterdir())
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise EarlierRunError(f"{folder}: cannot be listed: {exc.strerror or exc}") from exc
    found = []
    for path in entries:
        order = report_name_order(path.name)
        if order is not None and path.is_file():
            stamp, number = order
            when = datetime.strptime(stamp, "%Y-%m-%dT%H%M%S")
            found.append(((when, _REPORT, number), path))
    return found


class _RunLogs:
    """The run logs of the log folder, each read once (for every skill that looks at it):
    the run it holds, or why it cannot be read."""

    def __init__(self, folder: Path | None, rootdir: Path) -> None:
        self.folder = folder
        self.rootdir = rootdir
        self.problem = ""  # why the folder cannot be listed
        self.candidates: list[tuple[tuple[datetime, int, int], Path]] = []
        self._read: dict[Path, LoggedRun | str] = {}
        if folder is None or not folder.is_dir():
            return
        try:
            paths = logs_newest_first(folder)
        except OSError as exc:
            self.problem = f"{self.shown(folder)}: cannot be listed: {exc.strerror or exc}"
            return
        for path in paths:
            match = LOG_NAME.fullmatch(path.name)
            assert match is not None
            when = datetime.strptime(match["stamp"], "%Y%m%dT%H%M%SZ")
            self.candidates.append(((when, _LOG, int(match["n"] or 1)), path))

    def shown(self, path: Path) -> str:
        """A path as notes name it: relative to the rootdir (``..`` for one outside it),
        since a comparison is recorded in the run log, which holds no machine paths."""
        return relative_skill_dir(path, self.rootdir)

    def read(self, path: Path) -> LoggedRun | str:
        """The run a log holds, or why it cannot be read (naming it)."""
        if path not in self._read:
            shown = self.shown(path)
            try:
                self._read[path] = parse_run_log(path.read_text(encoding="utf-8"), source=shown)
            except OSError as exc:
                self._read[path] = f"{shown}: cannot be read: {exc.strerror or exc}"
            except UnicodeDecodeError as exc:
                self._read[path] = f"{shown}: cannot be read: not UTF-8 ({exc.reason})"
            except RunLogError as exc:
                self._read[path] = str(exc)
        return self._read[path]


def _logged_results(
    run: LoggedRun, skill_dir: str, model: str, category: str
) -> list[ScenarioResult] | None:
    """A skill's results in a logged run that can be compared with (None: it cannot): of the
    same model and criterion categories, with none of the skill's scenarios errored for
    reasons outside it or the skill itself broken. Such a run was not published (its report
    was held back), and comparing with its 0 % would hide regressions."""
    settings = run.info.settings
    if settings.get("model") != model or (settings.get("category") or "") != category:
        return None
    results = [result for result in run.results if result.skill_dir == skill_dir]
    if not results or any(r.infrastructure_errors or r.skill_errors for r in results):
        return None
    return results


def auto_runs(
    summaries: Sequence[SkillSummary],
    *,
    model: str,
    rootdir: Path,
    logs: Path | None = None,
    category: str = "",
) -> dict[Path, EarlierRun]:
    """Each summary's skill folder and its newest earlier run of the same selection
    (``auto``): of the same ``model`` (and ``category`` setting), whose scenarios of the skill
    cover this run's (see :meth:`_Selection.covered_by`), among the skill's results JSONs
    (runs of the whole skill, without categories) and the run logs under ``logs``. Of a
    report and a log of the same second, the report is taken. A run log that cannot be read is
    passed over and named in ``skipped``; a results JSON that cannot be read is an
    :class:`EarlierRunError`, as one named by the setting is. With none, ``note`` says what was
    looked for and where."""
    history = _RunLogs(logs, rootdir)
    return {
        summary.skill_dir: _newest_of_selection(summary, history, model, category)
        for summary in summaries
    }


def _newest_of_selection(
    summary: SkillSummary, history: _RunLogs, model: str, category: str
) -> EarlierRun:
    selection = _Selection.of(summary.results)
    folder = results_folder(summary.skill_dir, model)
    reports = [] if category else _report_candidates(folder)
    candidates = _newest_first(reports, history.candidates)
    skipped = [history.problem] if history.problem else []
    skill_dir = history.shown(summary.skill_dir)
    for path, kind in candidates:
        if kind == _REPORT:
            shown = history.shown(path)
            _skill, results, manifest = _report_results(_read(path, shown), shown)
            ran = _Selection(frozenset(result.name for result in results), whole=True)
        else:
            logged = history.read(path)
            if isinstance(logged, str):
                skipped.append(logged)
                continue
            found = _logged_results(logged, skill_dir, model, category)
            if found is None:
                continue
            results, ran, manifest = found, _Selection.of(found), logged.info.manifest
        if selection.covered_by(ran):
            return EarlierRun(path.name, tuple(results), skipped=tuple(skipped), manifest=manifest)
    places = [] if category else [f"{history.shown(folder)}/"]
    if history.folder is not None:
        places.append(f"{history.shown(history.folder)}/")
    of = f"model {model}" + (f" and category {category}" if category else "")
    note = f"no earlier run of {selection.described()} with {of} in {' or '.join(places)}"
    return EarlierRun("", (), note=note, skipped=tuple(skipped))


def earlier_runs(
    spec: str,
    summaries: Sequence[SkillSummary],
    *,
    model: str,
    rootdir: Path,
    logs: Path | None = None,
    category: str = "",
) -> dict[Path, EarlierRun]:
    """Each summary's skill folder and its results in the earlier run ``spec`` names (see the
    module docstring); ``model`` is the run's agent model, ``logs`` the run log folder and
    ``category`` the run's setting (``auto`` looks for runs of them: :func:`auto_runs`).
    Raises :class:`EarlierRunError`."""
    if spec == AUTO:
        return auto_runs(summaries, model=model, rootdir=rootdir, logs=logs, category=category)
    path = Path(spec).expanduser()
    text = _read(path, spec)
    if _is_run_log(text):
        return _from_log(text, path, spec, summaries, rootdir)
    return _from_report(text, path, spec, summaries)


def compare_with_earlier(
    summaries: Sequence[SkillSummary],
    settings: EvalSettings,
    rootdir: Path,
) -> dict[Path, SkillChanges]:
    """Each summary's skill folder and its comparison with the earlier run the ``compare``
    setting names, with the ``regression_tolerance`` setting; empty without the setting.
    A skill with nothing to compare with gets a :class:`SkillChanges` without scenarios whose
    ``note`` says why. Raises :class:`EarlierRunError`."""
    return compare_and_check_drift(summaries, settings, rootdir, None)[0]


def compare_and_check_drift(
    summaries: Sequence[SkillSummary],
    settings: EvalSettings,
    rootdir: Path,
    manifest: Manifest | None,
) -> tuple[dict[Path, SkillChanges], dict[Path, Drift]]:
    """:func:`compare_with_earlier`, and beside it what drifted from the earlier run's
    manifest to this run's (``manifest``; None: not checked), for each skill where something
    did or the earlier run recorded none. A skill whose drift refuses the comparison (and
    ``allow_drift`` is off) gets no comparison: its drift says why."""
    if not settings.compare:
        return {}, {}
    earlier = earlier_runs(
        settings.compare,
        summaries,
        model=settings.model,
        rootdir=rootdir,
        logs=log_folder(settings, rootdir),
        category=settings.category,
    )
    changes = {}
    drifts = {}
    for summary in summaries:
        run = earlier[summary.skill_dir]
        if not run.note and manifest is not None:
            relative = relative_skill_dir(summary.skill_dir, rootdir)
            drift = compare_manifests(
                None if run.manifest is None else run.manifest.for_skill(relative),
                manifest.for_skill(relative),
                comparison=COMPARE,
                against=run.label,
                allowed=settings.allow_drift,
            )
            if not drift.empty:
                drifts[summary.skill_dir] = drift
            if drift.refusal() is not None:
                continue
        if run.note:
            changes[summary.skill_dir] = SkillChanges(
                skill=summary.name,
                baseline=run.label,
                tolerance=float(settings.regression_tolerance),
                scenarios=(),
                note=run.note,
                skipped=run.skipped,
            )
            continue
        compared = compare_skill_runs(
            summary.results,
            run.results,
            skill=summary.name,
            baseline=run.label,
            tolerance=settings.regression_tolerance,
        )
        changes[summary.skill_dir] = replace(compared, skipped=run.skipped)
    return changes, drifts


def compare_run(
    summaries: Sequence[SkillSummary],
    settings: EvalSettings,
    rootdir: Path,
    manifest: Manifest | None = None,
) -> tuple[list[SkillSummary], dict[str, list[dict[str, Any]]]]:
    """Each skill compared with the earlier run (``compare`` setting), before the reporters
    run: the summaries with their ``changes`` and ``drift`` (from the earlier run's manifest to
    this run's ``manifest``), and the run log's extra records of them. An earlier run that
    cannot be read is every summary's ``compare_error`` (which fails the run and says why),
    not raised: the run's own reports are still written; so is a refused drift."""
    try:
        changes, drifts = compare_and_check_drift(summaries, settings, rootdir, manifest)
    except EarlierRunError as exc:
        return [replace(summary, compare_error=str(exc)) for summary in summaries], {}
    compared = [
        replace(
            summary,
            changes=changes.get(summary.skill_dir),
            drift=(*summary.drift, drifts[summary.skill_dir])
            if summary.skill_dir in drifts
            else summary.drift,
        )
        for summary in summaries
    ]
    extras: dict[str, list[dict[str, Any]]] = {}
    if changes:
        extras[CHANGES_EXTRA] = [
            {**change.to_dict(), "skill_dir": relative_skill_dir(skill_dir, rootdir)}
            for skill_dir, change in changes.items()
        ]
    if drifts:
        extras[DRIFT_EXTRA] = [
            drift_record(drift, relative_skill_dir(skill_dir, rootdir))
            for skill_dir, drift in drifts.items()
        ]
    return compared, extras
