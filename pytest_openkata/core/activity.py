"""What this process's scenario runs are doing right now, for the progress line.

Counters and the scenarios in flight, updated by the runs (a scenario running, a live call
waiting on the agent or the judge) and read by whoever shows progress; nothing here decides
anything. A scenario runs on one thread from start to end, so a call made on that thread is
the scenario's (a context variable ties them).
"""

from __future__ import annotations

import contextvars
import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

__all__ = ["ACTIVITY", "Activity", "InFlight", "Snapshot"]


@dataclass(frozen=True)
class InFlight:
    """A scenario running: its name as the caller gave it, when it started (``time.monotonic``)
    and what it waits on now (``agent``, ``judge``, or ``""`` between calls)."""

    name: str
    started: float
    waiting_on: str = ""


@dataclass(frozen=True)
class Snapshot:
    running: int = 0
    agent: int = 0
    judge: int = 0
    scenarios: tuple[InFlight, ...] = ()
    """The scenarios running under a name (:meth:`Activity.scenario`), oldest first."""


_current: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "openkata_scenario", default=None
)


class Activity:
    """Thread-safe counters of scenarios running and of live calls by role, and the named
    scenarios in flight."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = {"running": 0, "agent": 0, "judge": 0}
        self._scenarios: dict[int, InFlight] = {}
        self._keys = itertools.count()

    @contextmanager
    def counting(self, what: str) -> Iterator[None]:
        """Count ``what`` (``running``, ``agent`` or ``judge``) while the block runs; a call
        made inside :meth:`scenario` also shows as what that scenario waits on."""
        if what not in self._counts:
            raise ValueError(f"{what!r} is not counted; choose one of {', '.join(self._counts)}")
        key = _current.get()
        with self._lock:
            self._counts[what] += 1
            self._waits_on(key, what)
        try:
            yield
        finally:
            with self._lock:
                self._counts[what] -= 1
                self._waits_on(key, "")

    @contextmanager
    def scenario(self, name: str) -> Iterator[None]:
        """Count a running scenario named ``name`` while the block runs, with when it started
        and, through the calls made in the block, what it waits on."""
        with self._lock:
            key = next(self._keys)
            self._scenarios[key] = InFlight(name, time.monotonic())
        token = _current.set(key)
        try:
            with self.counting("running"):
                yield
        finally:
            _current.reset(token)
            with self._lock:
                del self._scenarios[key]

    def _waits_on(self, key: int | None, role: str) -> None:
        if key is not None and role != "running" and key in self._scenarios:
            self._scenarios[key] = replace(self._scenarios[key], waiting_on=role)

    def snapshot(self) -> Snapshot:
        with self._lock:
            # Keys grow with start order, and a dict keeps insertion order: oldest first.
            return Snapshot(**self._counts, scenarios=tuple(self._scenarios.values()))


ACTIVITY = Activity()
"""The process's counters: runs on every thread of the process report here."""
