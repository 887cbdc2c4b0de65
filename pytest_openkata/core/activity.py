"""What this process's scenario runs are doing right now, for the progress line.

Counters only, updated by the runs (a scenario running, a live call waiting on the agent or
the judge) and read by whoever shows progress; nothing here decides anything.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["ACTIVITY", "Activity", "Snapshot"]


@dataclass(frozen=True)
class Snapshot:
    running: int = 0
    agent: int = 0
    judge: int = 0


class Activity:
    """Thread-safe counters of scenarios running and of live calls by role."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = {"running": 0, "agent": 0, "judge": 0}

    @contextmanager
    def counting(self, what: str) -> Iterator[None]:
        """Count ``what`` (``running``, ``agent`` or ``judge``) while the block runs."""
        if what not in self._counts:
            raise ValueError(f"{what!r} is not counted; choose one of {', '.join(self._counts)}")
        with self._lock:
            self._counts[what] += 1
        try:
            yield
        finally:
            with self._lock:
                self._counts[what] -= 1

    def snapshot(self) -> Snapshot:
        with self._lock:
            return Snapshot(**self._counts)


ACTIVITY = Activity()
"""The process's counters: runs on every thread of the process report here."""
