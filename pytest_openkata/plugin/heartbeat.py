"""Status lines in a log: where the run is, every ``eval_status_interval`` seconds, when
pytest's output is no terminal (a file, ``| tee``, CI, a background job).

A scenario's model calls take minutes, during which pytest writes nothing; on a terminal the
status line (:mod:`.progress`) shows that work goes on, but a log would stay silent. Here a
plain line is written instead, at most once per interval while scenarios are left to finish,
so that a run shorter than the interval writes none. One line, here cut in two::

    openkata: 3/12 scenarios done, 2 running (1 on agent, 1 on judge);
    slowest: commit-message::scenario-a (4m10s, on agent); 6m30s so far

The line never lands where it does not belong:

- pytest captures file descriptor 1 while a test runs, and the scenario's test waits for
  its result in its setup: the line goes to a duplicate of the output's descriptor taken at
  the start, never into a test's captured output;
- pytest's own writes during the run happen in its reporting hooks; they hold this plugin's
  lock, so the line waits until pytest has written (and flushed) what it had to say;
- pytest may have left its line open (after a file name and a dot, or a node id waiting for
  its verdict): the status then starts on a fresh line, and pytest's writer is told that its
  line is new, so that what it writes next lines up (as after its own live logging).

Without xdist the counts and the slowest scenario come from this process's runs
(:mod:`pytest_openkata.core.activity`), including scenarios started ahead of their turn.
Under xdist the controller sees only what workers report: scenarios done, and those a worker
has started and not finished, since when the controller heard of it; the line says no more.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from pytest_openkata.core.activity import ACTIVITY, Activity, Snapshot
from pytest_openkata.infra.text import one_line
from pytest_openkata.plugin import compat
from pytest_openkata.plugin.progress import duration
from pytest_openkata.plugin.tally import ScenarioTally

__all__ = ["INTERVAL_INI", "Heartbeat", "add_ini", "configure", "wanted"]

INTERVAL_INI = "eval_status_interval"
DEFAULT_INTERVAL_SECONDS = 30.0
NAME_MAX = 80  # a scenario's name longer than this is cut in the middle

_interval_key = pytest.StashKey[float]()


def add_ini(parser: pytest.Parser) -> None:
    parser.addini(
        INTERVAL_INI,
        "seconds between status lines while scenarios run, when the output is no terminal "
        f"(default {DEFAULT_INTERVAL_SECONDS:g}; 0: none)",
        type="string",
        default=None,
    )


def configure(config: pytest.Config) -> None:
    """Read the interval (a bad one is a usage error before anything runs)."""
    config.stash[_interval_key] = _interval(config)


def _interval(config: pytest.Config) -> float:
    raw = config.getini(INTERVAL_INI)
    if raw is None or not str(raw).strip():
        return DEFAULT_INTERVAL_SECONDS
    try:
        seconds = float(str(raw).strip())
    except ValueError:
        seconds = -1.0
    if not seconds >= 0 or seconds == float("inf"):
        raise pytest.UsageError(
            f"pytest-openkata: ini {INTERVAL_INI}: expected seconds (0 or more), got {raw!r}"
        )
    return seconds


def wanted(config: pytest.Config, environ: os._Environ[str] | dict[str, str]) -> bool:
    """Whether a run writes status lines: pytest's output is no terminal the status line
    can be drawn on (not a tty, ``CI`` set, or ``TERM=dumb``), output is not ``-qq``, this is
    no xdist worker, and the interval is not 0."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    no_line = (
        not getattr(reporter, "isatty", False)
        or bool(environ.get("CI"))
        or environ.get("TERM", "") == "dumb"
    )
    return bool(
        reporter is not None
        and no_line
        and _has_descriptor(sys.stdout)
        and config.get_verbosity() >= -1
        and not hasattr(config, "workerinput")
        and config.stash.get(_interval_key, DEFAULT_INTERVAL_SECONDS) > 0
    )


def _has_descriptor(stream: Any) -> bool:
    """Whether ``stream`` writes to a file descriptor (pytest run in-process by another
    pytest writes to a buffer)."""
    try:
        stream.fileno()
    except (AttributeError, ValueError, OSError):
        return False
    return True


def shown_name(name: str) -> str:
    """A scenario's name on one line, safe for a terminal, at most ``NAME_MAX`` long."""
    shown = one_line(name)
    if len(shown) <= NAME_MAX:
        return shown
    half = (NAME_MAX - 1) // 2
    return f"{shown[:half]}…{shown[-(NAME_MAX - 1 - half) :]}"


def status(tally: ScenarioTally, now: Snapshot, elapsed: float, at: float) -> str:
    """The status line: done of total, what runs, the slowest scenario under way (``at`` is
    ``time.monotonic()`` now), the time since the first scenario started."""
    text = f"openkata: {tally.done}/{tally.total} scenarios done"
    if tally.xdist:
        if tally.under_way:
            text += f", {len(tally.under_way)} under way on workers"
    elif now.running:
        text += f", {now.running} running"
        waiting = [
            f"{n} on {role}" for role, n in (("agent", now.agent), ("judge", now.judge)) if n
        ]
        if waiting:
            text += f" ({', '.join(waiting)})"
    slowest = _slowest(tally, now, at)
    if slowest:
        text += f"; slowest: {slowest}"
    return f"{text}; {duration(elapsed)} so far"


def _slowest(tally: ScenarioTally, now: Snapshot, at: float) -> str:
    """The scenario under way longest: this process's oldest run, with what it waits on;
    else (under xdist, or for items that run no scenario of their own, as
    ``--eval-validate``'s) the scenario pytest started longest ago."""
    if not tally.xdist and now.scenarios:
        run = now.scenarios[0]
        what = f", on {run.waiting_on}" if run.waiting_on else ""
        return f"{shown_name(run.name)} ({duration(at - run.started)}{what})"
    if tally.under_way:
        oldest = next(iter(tally.under_way.values()))
        return f"{shown_name(oldest.name)} ({duration(at - oldest.since)})"
    return ""


class Heartbeat:
    """The status lines' state, their thread and the hooks pytest writes in."""

    def __init__(self, config: pytest.Config, activity: Activity = ACTIVITY) -> None:
        self.config = config
        self.seconds = config.stash.get(_interval_key, DEFAULT_INTERVAL_SECONDS)
        self.activity = activity
        self.tally = ScenarioTally()
        self._lock = threading.RLock()
        self._started: float | None = None
        self._fresh = False  # nothing written since the last status line
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # pytest's output itself, whatever pytest's capture does to descriptor 1 later.
        self._fd = os.dup(sys.stdout.fileno())

    # -- writing -----------------------------------------------------------------------------

    def _beat(self) -> None:
        """Write the status line if scenarios are left (the lock is held)."""
        if self._started is None or not self.tally.pending:
            return
        at = time.monotonic()
        line = status(self.tally, self.activity.snapshot(), at - self._started, at)
        writer = self.config.get_terminal_writer()
        opened = not self._fresh and writer.width_of_current_line > 0
        try:
            os.write(self._fd, f"{chr(10) if opened else ''}{line}\n".encode())
        except OSError:
            self._stop.set()
            return
        compat.line_written_past(writer)
        self._fresh = True

    def _beat_every_interval(self) -> None:
        while not self._stop.wait(self.seconds):
            with self._lock:
                if not self._stop.is_set():
                    self._beat()

    def _start(self) -> None:
        if self._started is None:
            self._started = time.monotonic()
            self._thread = threading.Thread(
                target=self._beat_every_interval, name="openkata-heartbeat", daemon=True
            )
            self._thread.start()

    @contextmanager
    def _while_pytest_writes(self) -> Iterator[None]:
        """Keep the status line away while a hook in which pytest writes runs."""
        with self._lock:
            try:
                yield
            finally:
                self._fresh = False
                # Flushed here, where pytest's output is not captured.
                self.config.get_terminal_writer().flush()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
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
        with self._while_pytest_writes():
            if self.tally.started(nodeid, location):
                self._start()
            yield

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logfinish(self, nodeid: str) -> Generator[None, None, None]:
        with self._while_pytest_writes():
            self.tally.finished(nodeid)
            yield

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        with self._while_pytest_writes():
            self.tally.reported(report)
            yield

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self) -> None:
        self.stop()
