"""Call slots: at most N agent runs and judge calls at once, first come, first served.

First come, first served matters. With a semaphore, a thread that releases its slot takes it
straight back for its scenario's next call (it never gave up the interpreter in between), so
the threads that waited meanwhile keep waiting and every slot serves one scenario from its
agent call to its judge call. Here a released slot passes to the longest waiter, and a new
caller queues behind the waiters.

A scenario's place in the queue can be taken before its first call, with :meth:`reserve`: the
scheduler reserves it the moment a thread picks the scenario up, so that scenarios picked up
together call in pytest's order whatever their threads do first (reading files lets another
thread run).
"""

from __future__ import annotations

import threading
from collections import deque
from contextlib import AbstractContextManager

__all__ = ["CallSlot", "CallSlots", "Reservation", "SlotsClosed"]

CallSlot = AbstractContextManager[None]
"""What a scenario run holds around each of its calls: :class:`CallSlots` or a
:class:`Reservation` of them."""


class SlotsClosed(Exception):
    """The run is over (``-x``, Ctrl-C, the session's end): no further call may start."""


class _Waiter:
    def __init__(self) -> None:
        self.wake = threading.Lock()
        self.wake.acquire()
        self.granted = False

    def grant(self) -> None:
        self.granted = True
        self.wake.release()


class CallSlots:
    """At most ``size`` holders at once. Use ``with slots:`` around one call.

    :meth:`close` refuses every waiting and later caller with :class:`SlotsClosed`; holders
    still release as usual.
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"call slots must be at least 1, got {size}")
        self.size = size
        self._lock = threading.Lock()
        self._free = size
        self._waiters: deque[_Waiter] = deque()
        self._closed = False

    @property
    def waiting(self) -> int:
        """How many callers (and reservations) are queued for a slot."""
        with self._lock:
            return len(self._waiters)

    def _enqueue(self) -> _Waiter:
        waiter = _Waiter()
        with self._lock:
            if self._closed:
                raise SlotsClosed("the run is over")
            if self._free and not self._waiters:
                self._free -= 1
                waiter.grant()
            else:
                self._waiters.append(waiter)
        return waiter

    @staticmethod
    def _wait(waiter: _Waiter) -> None:
        waiter.wake.acquire()
        if not waiter.granted:
            raise SlotsClosed("the run is over")

    def acquire(self) -> None:
        self._wait(self._enqueue())

    def release(self) -> None:
        with self._lock:
            if self._waiters:
                self._waiters.popleft().grant()  # the slot passes on without becoming free
            else:
                self._free += 1

    def reserve(self) -> Reservation:
        """Queue now for a slot that the returned reservation's first ``with`` will use."""
        return Reservation(self, self._enqueue())

    def _cancel(self, waiter: _Waiter) -> None:
        with self._lock:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
                return
        if waiter.granted:
            self.release()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            waiters, self._waiters = self._waiters, deque()
        for waiter in waiters:
            waiter.wake.release()  # not granted: the waiter raises SlotsClosed

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()


class Reservation:
    """One scenario's calls: the first uses the place reserved in the queue, every later one
    queues afresh. :meth:`close` gives back a place that no call used (a cache hit, a scenario
    that could not be loaded)."""

    def __init__(self, slots: CallSlots, waiter: _Waiter) -> None:
        self._slots = slots
        self._reserved: _Waiter | None = waiter

    def __enter__(self) -> None:
        waiter, self._reserved = self._reserved, None
        if waiter is None:
            self._slots.acquire()
        else:
            self._slots._wait(waiter)

    def __exit__(self, *exc_info: object) -> None:
        self._slots.release()

    def close(self) -> None:
        waiter, self._reserved = self._reserved, None
        if waiter is not None:
            self._slots._cancel(waiter)
