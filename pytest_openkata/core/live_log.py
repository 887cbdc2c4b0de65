"""The live log: a run in progress, as a run log that grows while the run runs.

A run log (:mod:`pytest_openkata.core.runlog`) is written once the run ends, atomically. So
that a run can be followed while it runs (the viewer's run page redraws as the file grows),
the controller also keeps a live log beside the run logs from the end of collection: its
first record is the run record (``complete: false``, ``in_progress: true``, ``finished_at``
the time the run started), then the trial records of each scenario as it finishes, appended
and flushed at once, in the order the scenarios finished. Its records are the run log's own,
made by the same functions from the same masked results, so it holds no secret and no machine
path, and it reads as a partial run log. The lines it wrote are kept (:attr:`LiveLog.rendered`)
and the run log at the end takes them instead of rendering those trials again.

When the run ends, on every path (finished, ``-x``, Ctrl-C, SIGTERM), the run log is written
as always and the live log removed. A run killed outright cannot remove it: its name holds
the host tag and process id of the run (``<started>.<host>-<pid>.live.jsonl``, the tag of
:func:`~pytest_openkata.infra.processes.host_tag`), so that the next run writing logs to the
folder removes the live logs whose run is gone, and a reader tells a running run from an
interrupted one (:func:`live_state`). A live log of another host (a shared network folder)
is never removed: its process id means nothing here.
"""

from __future__ import annotations

import contextlib
import os
import re
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import IO, Literal

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.results import ScenarioResult
from pytest_openkata.core.runlog import ScenarioLines, json_line, run_info, run_record
from pytest_openkata.infra.processes import host_tag, process_gone

__all__ = [
    "IN_PROGRESS_KEY",
    "LIVE_LOG_NAME",
    "LiveLog",
    "is_live_log",
    "live_log_name",
    "live_state",
    "remove_stale_live_logs",
]

IN_PROGRESS_KEY = "in_progress"
"""The run record's marker of a live log (true); a run log never has it."""

LIVE_LOG_NAME = re.compile(
    r"(?P<stamp>[0-9]{8}T[0-9]{6}Z)\.(?P<host>[0-9a-f]{8})-(?P<pid>[0-9]+)\.live\.jsonl"
)
"""The name of a live log: the run's start (UTC), its host tag and its process id."""

_STAMP = "%Y%m%dT%H%M%SZ"


def live_log_name(started_at: datetime) -> str:
    """The file name of the live log of this process's run, which started at ``started_at``
    (a UTC time)."""
    return f"{started_at.strftime(_STAMP)}.{host_tag()}-{os.getpid()}.live.jsonl"


def is_live_log(name: str) -> bool:
    """Whether the file ``name`` (or a path ending in it) is named as a live log."""
    return LIVE_LOG_NAME.fullmatch(PurePosixPath(name).name) is not None


def live_state(name: str) -> Literal["running", "interrupted"]:
    """Whether the run of the live log ``name`` still runs: ``interrupted`` when its process
    is gone from this host, ``running`` when it is not, or when it ran on another host (its
    process id means nothing here)."""
    found = LIVE_LOG_NAME.fullmatch(PurePosixPath(name).name)
    if found is None:
        raise ValueError(f"{name!r} is not the name of a live log")
    if found["host"] == host_tag() and process_gone(int(found["pid"])):
        return "interrupted"
    return "running"


def remove_stale_live_logs(folder: Path) -> list[Path]:
    """Remove the live logs of ``folder`` left by runs of this host that are gone, and return
    their paths. Never raises: a missing folder has none, a file another run removed first
    is left out."""
    removed: list[Path] = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return removed
    for name in names:
        if is_live_log(name) and live_state(name) == "interrupted":
            try:
                os.unlink(folder / name)
            except OSError:
                continue
            removed.append(folder / name)
    return removed


class LiveLog:
    """The live log of one run (see the module docstring): started with its run record,
    grown by :meth:`add`, removed by :meth:`close`."""

    def __init__(self, path: Path, handle: IO[str], rootdir: Path) -> None:
        self.path = path
        self._handle: IO[str] | None = handle
        # The lines written, kept for the run log, which holds the same (log_lines(rendered=)).
        self.rendered = ScenarioLines(rootdir)

    @classmethod
    def start(
        cls, folder: Path, settings: EvalSettings, rootdir: Path, started_at: datetime
    ) -> LiveLog:
        """A new live log in ``folder`` (made when missing) holding the run record of a run
        with ``settings`` that started at ``started_at``; ``OSError`` when it cannot be made."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / live_log_name(started_at)
        handle = path.open("x", encoding="utf-8", newline="\n")
        log = cls(path, handle, rootdir)
        head = run_record(run_info(settings, started_at, complete=False))
        log._write(json_line({**head, IN_PROGRESS_KEY: True}))
        return log

    def add(self, result: ScenarioResult) -> None:
        """Append the trial records of a scenario that finished, flushed to the file at once
        (a scenario whose every trial was skipped has none)."""
        if self._handle is None:  # closed: nothing more is written
            return
        text = self.rendered.of(result)
        if text:
            self._write(text)

    def _write(self, text: str) -> None:
        if self._handle is None:
            return
        try:
            self._handle.write(text)
            self._handle.flush()
        except OSError:  # a full disk: the run goes on, and its run log says what ran
            self.close()

    def close(self) -> None:
        """Stop writing and remove the file (once; never raises)."""
        handle, self._handle = self._handle, None
        if handle is None:
            return
        with contextlib.suppress(OSError):
            handle.close()
        self.path.unlink(missing_ok=True)
