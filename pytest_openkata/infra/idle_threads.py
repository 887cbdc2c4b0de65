"""Daemon threads kept between jobs, so that a short job does not pay for starting a thread.

A model call runs its exchange on a thread of its own, so that the caller can stop waiting at
its deadline (:mod:`pytest_openkata.providers.backends.client`). Starting a thread and waiting
for it to start cost a loopback call about as much CPU as the exchange itself; here a thread
that finished a job waits for the next one and ends after :data:`IDLE_SECONDS` without one.
A job is handed to an idle thread when there is one, else to a new thread: a job never waits
for another (an exchange abandoned at its deadline may keep its thread a while). The threads
are daemons, as the threads they replace were: one left in an exchange never holds the
interpreter's exit.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable

__all__ = ["IDLE_SECONDS", "IdleThreads"]

IDLE_SECONDS = 30.0
"""How long a thread without a job waits for one before it ends."""

Job = Callable[[], None]


class IdleThreads:
    """Runs each job at once on a daemon thread, reusing threads that are idle."""

    def __init__(self, name: str, idle_seconds: float = IDLE_SECONDS) -> None:
        self.name = name
        self.idle_seconds = idle_seconds
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[Job]] = []  # the inbox of each idle thread
        self._started = 0
        os.register_at_fork(after_in_child=self._forget_threads)

    def run(self, job: Job) -> None:
        """Start ``job`` on an idle thread, or on a new one; return without waiting for it."""
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
            if inbox is None:
                self._started += 1
                number = self._started
        if inbox is not None:
            inbox.put(job)
            return
        inbox = queue.SimpleQueue()
        inbox.put(job)
        thread = threading.Thread(
            target=self._serve, args=(inbox,), name=f"{self.name}-{number}", daemon=True
        )
        thread.start()

    def _serve(self, inbox: queue.SimpleQueue[Job]) -> None:
        job: Job | None = inbox.get()
        while job is not None:
            try:
                job()
            finally:
                del job  # nothing of a finished job is kept while the thread waits
            with self._lock:
                self._idle.append(inbox)
            job = self._next(inbox)

    def _next(self, inbox: queue.SimpleQueue[Job]) -> Job | None:
        """The next job for this thread, or None once it waited in vain (it then ends)."""
        try:
            return inbox.get(timeout=self.idle_seconds)
        except queue.Empty:
            pass
        with self._lock:
            if inbox in self._idle:
                self._idle.remove(inbox)
                return None
        return inbox.get()  # taken meanwhile: its job is on its way

    def _forget_threads(self) -> None:
        # A forked child has none of the parent's threads.
        self._lock = threading.Lock()
        self._idle = []
