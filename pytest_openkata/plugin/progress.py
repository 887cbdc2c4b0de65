"""A status line while scenarios run: done of total, running, waiting on agent or judge,
elapsed time and tokens so far.

Model calls take seconds to minutes, during which pytest prints nothing. When pytest writes to
a terminal (a tty, output not quiet, not in CI), this plugin keeps a short status at the end of
pytest's current line and redraws it every second (elsewhere, :mod:`.heartbeat` writes a
status line now and then). It never mixes with pytest's own output:

- it is cleared (erase to the end of the line) before every hook in which pytest's terminal
  reporter writes during the run, and drawn again only after the hook;
- pytest captures file descriptor 1 while a test runs, so the line goes to a duplicate of
  the terminal's descriptor taken at start-up, never into a test's captured output;
- the cursor is saved and restored around it, so pytest's next character lands where it
  would have; pytest's own bookkeeping of its line is left as it is.

Without xdist the counts of running scenarios and calls in flight come from this process's
runs (:mod:`pytest_openkata.core.activity`); under xdist the workers' are not seen, and the line
shows scenarios done and tokens only.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from pytest_openkata.core.activity import ACTIVITY, Activity
from pytest_openkata.plugin.tally import ScenarioTally

__all__ = ["ProgressLine", "duration", "wanted"]

REDRAW_SECONDS = 1.0
_SAVE, _RESTORE, _ERASE = "\x1b7", "\x1b8", "\x1b[K"


def wanted(config: pytest.Config, environ: os._Environ[str] | dict[str, str]) -> bool:
    """Whether a run shows the line: its terminal is a tty, output is not quiet, not in CI
    (``CI`` set), not on an xdist worker, the terminal understands cursor control, and
    nothing else writes to the terminal while tests run (live logging, ``-s``)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    live_logging = bool(config.getini("log_cli")) or config.getoption("log_cli_level", None)
    return bool(
        reporter is not None
        and getattr(reporter, "isatty", False)
        and config.get_verbosity() >= 0
        and not environ.get("CI")
        and environ.get("TERM", "") != "dumb"
        and not hasattr(config, "workerinput")
        and not live_logging
        and config.getoption("capture", "fd") != "no"
    )


def duration(seconds: float) -> str:
    """``seconds`` as the progress lines show it: ``42s``, ``4m10s``, ``1h02m``."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class ProgressLine:
    """The status line's state, its redraw thread and the hooks that clear it."""

    def __init__(self, config: pytest.Config, activity: Activity = ACTIVITY) -> None:
        self.config = config
        self.activity = activity
        self.tally = ScenarioTally()
        self._lock = threading.Lock()
        self._shown = False
        self._paused = False
        self._started: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # The terminal itself, whatever pytest's capture does to descriptor 1 later.
        self._fd = os.dup(1)

    # -- what it says ------------------------------------------------------------------------

    def text(self) -> str:
        tally = self.tally
        parts = [f"openkata: {tally.done}/{tally.total} scenarios done"]
        if not tally.xdist:
            now = self.activity.snapshot()
            if now.running:
                parts.append(f"{now.running} running")
            waiting = [
                f"{n} on {role}" for role, n in (("agent", now.agent), ("judge", now.judge)) if n
            ]
            if waiting:
                parts.append("waiting " + ", ".join(waiting))
        if self._started is not None:
            parts.append(duration(time.monotonic() - self._started))
        if tally.tokens:
            parts.append(f"{tally.tokens:,} tokens")
        return " · ".join(parts)

    # -- drawing -----------------------------------------------------------------------------

    def _write(self, text: str) -> None:
        try:
            os.write(self._fd, text.encode("utf-8", errors="replace"))
        except OSError:
            self._stop.set()

    def _draw(self) -> None:
        """Draw the line after the cursor (the lock is held)."""
        if self._paused or self._started is None or self._stop.is_set():
            return
        writer = self.config.get_terminal_writer()
        writer.flush()  # what pytest wrote comes first
        room = writer.fullwidth - writer.width_of_current_line - 3
        if room < 12:
            return
        text = self.text()[:room]
        self._write(f"{_SAVE}  {text}{_ERASE}{_RESTORE}")
        self._shown = True

    def _clear(self) -> None:
        if self._shown:
            self.config.get_terminal_writer().flush()
            self._write(_ERASE)
            self._shown = False

    def _redraw_every_second(self) -> None:
        while not self._stop.wait(REDRAW_SECONDS):
            with self._lock:
                self._draw()

    def _start(self) -> None:
        if self._started is None:
            self._started = time.monotonic()
            self._thread = threading.Thread(
                target=self._redraw_every_second, name="openkata-progress", daemon=True
            )
            self._thread.start()

    @contextmanager
    def _paused_while_pytest_writes(self) -> Iterator[None]:
        """Clear the line and keep it away while a hook in which pytest writes runs."""
        with self._lock:
            self._clear()
            self._paused = True
        try:
            yield
        finally:
            with self._lock:
                self._paused = False
                self._draw()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            self._clear()
            self._paused = True
        os.close(self._fd)

    # -- pytest's side -----------------------------------------------------------------------

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.tally.collected(session)

    @pytest.hookimpl(optionalhook=True)  # xdist's hook: absent under -p no:xdist
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.tally.worker_collected(ids)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logstart(
        self, nodeid: str, location: tuple[str, int | None, str]
    ) -> Generator[None, None, None]:
        with self._paused_while_pytest_writes():
            self.tally.started(nodeid, location)
            self._start()
            yield

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logfinish(self, nodeid: str) -> Generator[None, None, None]:
        with self._paused_while_pytest_writes():
            self.tally.finished(nodeid)
            yield

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        with self._paused_while_pytest_writes():
            self.tally.reported(report)
            yield

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self) -> None:
        self.stop()
