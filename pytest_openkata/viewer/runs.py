"""The run logs under the viewer's folder, and the skills' results JSON files beside them:
finding them, a row of the runs list for each, and reading one whole.

A log is named to the viewer by its path relative to the folder (``.openkata/runs/X.jsonl``),
and only a log this module found can be asked for: no request names a file outside the folder.
A log is read again only when its size or modification time changed, so a run whose log
grows is seen as it grows, and the list of a hundred runs is not read anew on every request.
The list keeps a row per log, read without the answers; the last few runs read are kept too
(a run's overview without its answers, a run and the one compared with it whole), so that
moving between a run's pages does not read its log again.
A log being written may end in a line not yet finished: that line is left for the next read.
A run in progress is seen through its live log (:mod:`pytest_openkata.core.live_log`), a run
log like the others whose row says whether its run is still ``running`` or was
``interrupted``; once the run ends its live log is gone and its run log takes its place
(:meth:`LogFiles.successor`).
"""

from __future__ import annotations

import contextlib
import gc
import os
import threading
from collections.abc import Collection, Iterator
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from pytest_openkata.core.live_log import LIVE_LOG_NAME, is_live_log, live_state
from pytest_openkata.core.runlog import (
    LOG_NAME,
    LoggedRun,
    RunLogError,
    parse_run_log,
    skill_summaries,
)
from pytest_openkata.core.summary import SkillSummary
from pytest_openkata.viewer.results_files import (
    is_results_file,
    parse_results_file,
    results_order,
)

__all__ = [
    "RESULTS_JSON",
    "RUN_LOG",
    "LogFiles",
    "Matrix",
    "RunRow",
    "finished_lines",
    "is_logged_run",
    "is_run_log",
    "log_order",
    "matrix",
    "run_row",
]

# Runs kept in memory: two read whole (one shown, one compared with it) and two without
# their answers (a run's overview, a list's newest run).
KEPT_RUNS = 4

RUN_LOG, RESULTS_JSON = "run log", "results JSON"  # the kinds of files a row is read from

# Folders never searched for logs: what a project holds that is not its runs.
_SKIPPED = frozenset({".git", "node_modules", ".venv", "venv", "__pycache__", ".tox", "site"})


@dataclass(frozen=True)
class RunRow:
    """One run as the runs list shows it: its log (relative to the folder), when it finished,
    its skills and models, its mean score over its skills, its gate (``pass``, ``fail`` or
    ``partial``), its scenarios and errored ones; ``problem`` says why a log cannot be read
    (the row then shows only that)."""

    log: str
    kind: str = "run log"  # RUN_LOG or RESULTS_JSON
    finished_at: str = ""
    skills: tuple[str, ...] = ()
    agent_model: str = ""
    judge_model: str = ""
    score: float | None = None
    gate: str = ""
    scenarios: int = 0
    errored: int = 0
    trials: int = 0
    complete: bool = True
    problem: str = ""
    # A live log's run: "running" or "interrupted" ("" for a log of a run that ended).
    state: str = ""
    # Each skill's name, overall score and gate, for the matrix of skills by models.
    skill_scores: tuple[tuple[str, float, str], ...] = ()
    # The file name of the live log its run kept ("" for none, or a log that does not say).
    live_log: str = ""


def _gate(summaries: list[SkillSummary]) -> str:
    if not summaries or any(not summary.complete for summary in summaries):
        return "partial"
    return "pass" if all(summary.passed for summary in summaries) else "fail"


def run_row(log: str, run: LoggedRun) -> RunRow:
    """The runs list's row of ``run``, whose log is ``log``."""
    summaries = skill_summaries(run)
    settings = run.info.settings
    scores = [summary.overall for summary in summaries]
    return RunRow(
        log=log,
        kind=_kind(log),
        finished_at=run.info.finished_at,
        skills=tuple(summary.display for summary in summaries),
        agent_model=str(settings.get("model_label") or settings.get("model") or ""),
        judge_model=str(settings.get("judge_model") or ""),
        score=sum(scores) / len(scores) if scores else None,
        gate=_gate(summaries) if run.info.complete else "partial",
        scenarios=len(run.results),
        errored=sum(result.error is not None for result in run.results),
        trials=len(run.trials),
        complete=run.info.complete,
        skill_scores=tuple(
            (summary.display, summary.overall, _gate([summary])) for summary in summaries
        ),
        live_log=run.info.live_log,
    )


@dataclass(frozen=True)
class Matrix:
    """Skills by models over the newest runs: for each skill (row) and agent model (column),
    the newest run that scored it, its score and gate."""

    skills: list[str]
    models: list[str]
    cells: dict[tuple[str, str], tuple[RunRow, float, str]]


def matrix(rows: list[RunRow]) -> Matrix:
    """The matrix of ``rows`` (the newest first: the first row of a skill and model wins)."""
    cells: dict[tuple[str, str], tuple[RunRow, float, str]] = {}
    for row in rows:
        for skill, score, gate in row.skill_scores:
            cells.setdefault((skill, row.agent_model), (row, score, gate))
    return Matrix(
        skills=sorted({skill for skill, _ in cells}),
        models=sorted({model for _, model in cells}),
        cells=cells,
    )


def finished_lines(text: str) -> str:
    """``text`` up to its last line break: a line a writer has not finished yet is left out."""
    end = text.rfind("\n")
    return text[: end + 1]


def is_run_log(log: str) -> bool:
    """Whether ``log`` names the run log of a run that ended (else a live log or a results
    JSON)."""
    return LOG_NAME.fullmatch(PurePosixPath(log).name) is not None


def is_logged_run(log: str) -> bool:
    """Whether ``log`` names a run log or a live log: JSON Lines of the run log's format."""
    return is_run_log(log) or is_live_log(log)


def _is_listed(name: str, relative: PurePosixPath) -> bool:
    return LOG_NAME.fullmatch(name) is not None or is_live_log(name) or is_results_file(relative)


def _kind(log: str) -> str:
    return RUN_LOG if is_logged_run(log) else RESULTS_JSON


def log_order(log: str) -> tuple[str, int, str]:
    """A run's place in time: its file name's UTC time, then its ``-N`` (a second file of
    the same second is the newer), then its path."""
    name = PurePosixPath(log).name
    match = LOG_NAME.fullmatch(name) or LIVE_LOG_NAME.fullmatch(name)
    if match is not None:
        return (match["stamp"], int(match.groupdict().get("n") or 1), log)
    stamp, number = results_order(name) or ("", 0)
    return (stamp, number, log)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused while a log is read: reading one makes
    millions of objects, none of them in a cycle, and each collection of the oldest generation
    walks them all again."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


# What reading a malformed file can raise beyond RunLogError: a file that no writer of run
# logs or results JSON makes (too deep, a number too large, a value of the wrong type) is that
# file's problem, shown on its row and its pages, never an error of the viewer.
_MALFORMED = (ValueError, TypeError, KeyError, AttributeError, RecursionError, OverflowError)

# How much of a malformed file's error a row shows: the error may quote the file's text.
_SHOWN_ERROR = 200


def _malformed(log: str, exc: BaseException) -> str:
    """The problem of ``log``, whose reading raised ``exc``: its kind and the start of why."""
    reason = str(exc)
    if len(reason) > _SHOWN_ERROR:
        reason = reason[:_SHOWN_ERROR] + "…"
    return f"{log}: cannot be read: {type(exc).__name__}: {reason}"


@dataclass(frozen=True)
class _Read:
    stamp: tuple[int, int]
    run: LoggedRun | None
    problem: str


class LogFiles:
    """The run logs under ``folder`` and what they hold, read again when they change."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._rows: dict[str, tuple[tuple[int, int], RunRow]] = {}
        # The runs read last, whole or without answers, by log and kind, the newest last.
        self._runs: dict[tuple[str, bool], _Read] = {}

    def _walk(self) -> Iterator[Path]:
        for top, folders, files in os.walk(self.folder):
            folders[:] = sorted(f for f in folders if f not in _SKIPPED)
            for name in files:
                path = Path(top) / name
                if _is_listed(name, PurePosixPath(path.relative_to(self.folder).as_posix())):
                    yield path

    def logs(self) -> list[str]:
        """Every run log under the folder, relative to it, the newest first (by the time in
        its name and its ``-N``, then its path)."""
        found = [path.relative_to(self.folder).as_posix() for path in self._walk()]
        return sorted(found, key=log_order, reverse=True)

    def path_of(self, log: str) -> Path | None:
        """The file of ``log`` when it is a run log under the folder, else None."""
        relative = PurePosixPath(log)
        if relative.is_absolute() or ".." in relative.parts:
            return None
        if not _is_listed(relative.name, relative):
            return None
        path = self.folder.joinpath(*relative.parts)
        if not path.is_file() or not path.resolve().is_relative_to(self.folder.resolve()):
            return None  # a link out of the folder is not one of its logs
        return path

    @staticmethod
    def stamp(path: Path) -> tuple[int, int]:
        """What changes when a log is written to: its size and modification time."""
        status = path.stat()
        return (status.st_size, status.st_mtime_ns)

    def _parse(self, log: str, path: Path, *, traces: bool) -> _Read:
        stamp = (0, 0)  # of a file gone before it was read: read again when it is back
        try:
            stamp = self.stamp(path)
            text = path.read_text(encoding="utf-8", errors="strict")
            with _collector_paused():
                if is_logged_run(log):
                    run = parse_run_log(finished_lines(text), source=log, traces=traces)
                else:
                    run = parse_results_file(log, text)
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            return _Read(stamp, None, f"{log}: cannot read the run log: {reason}")
        except RunLogError as exc:
            return _Read(stamp, None, str(exc))
        except _MALFORMED as exc:  # a file no writer of these logs makes: its own problem
            return _Read(stamp, None, _malformed(log, exc))
        return _Read(stamp, run, "")

    def row(self, log: str) -> RunRow:
        """The runs list's row of ``log`` (from the run read without its answers); a live
        log's says whether its run still runs, asked anew each time."""
        row = self._row(log)
        if is_live_log(log) and not row.problem:
            return replace(row, state=live_state(log))
        return row

    def _row(self, log: str) -> RunRow:
        path = self.path_of(log)
        try:
            if path is None:
                raise FileNotFoundError(log)
            stamp = self.stamp(path)
        except FileNotFoundError:  # gone since it was found: a live log whose run ended
            return RunRow(log=log, problem=f"{log}: no such run log")
        with self._lock:
            known = self._rows.get(log)
        if known is not None and known[0] == stamp:
            return known[1]
        read = self._read(log, path, traces=False)
        if read.run is None:
            row = RunRow(log=log, kind=_kind(log), problem=read.problem)
        else:
            try:
                row = run_row(log, read.run)
            except RunLogError as exc:
                row = RunRow(log=log, kind=_kind(log), problem=str(exc))
            except _MALFORMED as exc:
                row = RunRow(log=log, kind=_kind(log), problem=_malformed(log, exc))
        with self._lock:
            self._rows[log] = (read.stamp, row)
        return row

    def rows(self) -> list[RunRow]:
        """A row for every log, the newest first."""
        return [self.row(log) for log in self.logs()]

    def kept_runs(self) -> list[LoggedRun]:
        """The runs kept in memory."""
        with self._lock:
            return [read.run for read in self._runs.values() if read.run is not None]

    def _read(self, log: str, path: Path, *, traces: bool) -> _Read:
        """``log`` read (whole, or without its answers), or kept from an earlier read of the
        same size and time."""
        try:
            stamp = self.stamp(path)
        except FileNotFoundError:
            return _Read((0, 0), None, f"{log}: no such run log under the viewer's folder")
        with self._lock:
            known = self._runs.get((log, traces))
        if known is not None and known.stamp == stamp:
            return known
        read = self._parse(log, path, traces=traces)
        with self._lock:
            self._runs.pop((log, traces), None)
            self._runs[(log, traces)] = read
            while len(self._runs) > KEPT_RUNS:
                self._runs.pop(next(iter(self._runs)))
        return read

    def scenario_run(self, log: str, skill_dir: str, scenario: str) -> LoggedRun:
        """The run of ``log`` with only the trials of one scenario (both arms), whole: read
        from the lines the run's overview says they are on, not from every answer of the run.
        :class:`RunLogError` when the log cannot be read or has no such scenario."""
        run = self.scenarios_run(log, {(skill_dir, scenario)})
        if is_logged_run(log) and not run.results:
            raise RunLogError(f"{log}: no scenario {skill_dir}::{scenario}")
        return run

    def scenarios_run(self, log: str, scenarios: Collection[tuple[str, str]]) -> LoggedRun:
        """The run of ``log`` with only the trials of ``scenarios`` (skill folder and name;
        both arms), whole, read in one pass over the lines the run's overview says they are
        on; a results JSON is read whole. A scenario the run does not have is left out.
        :class:`RunLogError` when the log cannot be read."""
        path = self.path_of(log)
        if path is None:
            raise RunLogError(f"{log}: no such run log under the viewer's folder")
        if not is_logged_run(log):
            return self.run(log)  # a results JSON: one skill's report, read whole
        overview = self.run(log, traces=False)
        chosen = set(scenarios)
        wanted = {logged.line for logged in overview.trials if logged.arm_key[:2] in chosen}
        last = max(wanted, default=1)
        lines: list[bytes] = []
        try:
            with path.open("rb") as handle:
                for number, line in enumerate(handle, start=1):
                    if number == 1 or number in wanted:
                        lines.append(line)
                    if number >= last:
                        break
            text = b"".join(lines).decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise RunLogError(f"{log}: cannot read the run log: {reason}") from exc
        try:
            return parse_run_log(finished_lines(text), source=log)
        except _MALFORMED as exc:
            raise RunLogError(_malformed(log, exc)) from exc

    def successor(self, live: str) -> str | None:
        """The run log that took the place of the live log ``live`` once its run ended: of
        the run logs of its folder that finished after the run started, the one whose run
        record names ``live`` as its live log. A log that names another live log is another
        run's; of those that name none (written before run records named their live log),
        the first whose agent and judge models are the live run's (the ones last read of it)
        or, when its run was never read, the first. None when there is none yet."""
        match = LIVE_LOG_NAME.fullmatch(PurePosixPath(live).name)
        if match is None:
            return None
        folder = PurePosixPath(live).parent
        later = sorted(
            (
                log
                for log in self.logs()
                if is_run_log(log)
                and PurePosixPath(log).parent == folder
                and log_order(log)[0] >= match["stamp"]
            ),
            key=log_order,
        )
        rows = [self._row(log) for log in later]
        named = [row.log for row in rows if row.live_log == match.string]
        if named:
            return named[0]
        unnamed = [row for row in rows if not row.live_log]
        with self._lock:
            known = self._rows.get(live)
        if known is not None:
            models = (known[1].agent_model, known[1].judge_model)
            for row in unnamed:
                if (row.agent_model, row.judge_model) == models:
                    return row.log
        return unnamed[0].log if unnamed else None

    def run(self, log: str, *, traces: bool = True) -> LoggedRun:
        """The run of ``log``, whole or without its answers (``traces``; see
        :func:`~pytest_openkata.core.runlog.parse_run_log`): :class:`RunLogError` when there is
        none or it cannot be read."""
        path = self.path_of(log)
        if path is None:
            raise RunLogError(f"{log}: no such run log under the viewer's folder")
        read = self._read(log, path, traces=traces)
        if read.run is None:
            raise RunLogError(read.problem)
        return read.run
