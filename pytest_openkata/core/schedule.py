"""Concurrency without xdist: scenario runs start ahead of their turn, on a pool of threads.

The caller (pytest, or :func:`pytest_openkata.evaluate`) asks for results one after the other
in one thread; pytest runs items that way. A scenario run is mostly waiting (for a
model, a CLI or a container), so when item *i* needs its result, the scheduler also queues the
next scenarios this process will run on a pool of threads, and item *i* waits only for its own.
pytest still sets up, reports and tears down each item in order; only the waiting overlaps, and
a thread that finishes picks up the next queued scenario without waiting for pytest to reach it.

``concurrency`` bounds the work in flight: at most that many agent runs and judge calls at once
(:mod:`pytest_openkata.core.slots`), so an endpoint never sees more requests from this process, nor
the Docker engine more sandboxes. The pool has ``SCENARIOS_PER_SLOT`` times as many threads, so
that while some scenarios wait for their judge, others' agents already run: with one scenario
per slot, the slots would idle in the last round, when fewer scenarios than slots are left
(single calls fill the slots in fewer turns than whole scenarios do). A thread reserves its
scenario's first call in the slots' queue as it picks the scenario up, under the pool's lock,
so that calls start in pytest's order.

Scenarios picked up together are prepared (read, their prompt built: up to their first call)
one at a time, in pick-up order. Preparing is mostly small file reads, and every read hands
the interpreter lock to another thread and then waits to get it back: threads preparing all at
once take more CPU in all, and send their first calls later (the
figures are in the docs' performance page).

Which jobs come next is the caller's to say (``upcoming``): the pytest adapter gives the items
this process will run next that use the same fixtures (:mod:`pytest_openkata.plugin.scheduling`).
A job is any hashable value (a pytest item, a scenario folder). With ``concurrency`` 1 every
scenario runs in the caller's thread, exactly when its result is asked for.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import Future
from typing import Generic, TypeVar

from pytest_openkata.contracts.results import ScenarioResult
from pytest_openkata.core.slots import CallSlot, CallSlots, Reservation, SlotsClosed

J = TypeVar("J", bound=Hashable)

RunFunction = Callable[[J, CallSlot], ScenarioResult]
"""Runs the scenario of a job, holding the given call slot around each of its calls."""

SCENARIOS_PER_SLOT = 4
"""Threads of the pool per call slot (see the module's docstring)."""


class ScenarioScheduler(Generic[J]):
    """Starts scenario runs ahead on a pool of threads and hands out their results; its
    :attr:`slots` hold the calls of every run to ``concurrency`` at once."""

    def __init__(
        self,
        concurrency: int,
        upcoming: Callable[[J], Iterable[J]],
        *,
        upcoming_is_final: bool = True,
    ) -> None:
        """``upcoming`` gives the jobs to run after a job, as far as is known, that may start
        ahead with the same run function; when ``upcoming_is_final``, what it gives is all
        there will be (pytest without xdist), so that once every job it gave has been
        queued, threads left without work end (see :meth:`_next`)."""
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.concurrency = concurrency
        self.slots = CallSlots(concurrency)
        self.threads = SCENARIOS_PER_SLOT * concurrency
        # Twice the pool: as many scenarios wait in the queue, so a thread that finishes
        # starts the next one at once instead of when pytest reaches an item.
        self.lookahead = 2 * self.threads - 1
        self._upcoming = upcoming
        self._futures: dict[J, Future[ScenarioResult]] = {}
        self._queue: deque[tuple[J, RunFunction[J], Future[ScenarioResult]]] = deque()
        self._lock = threading.Condition()
        self._started = 0
        self._live = 0  # threads of the pool not ended
        self._closed = False
        self._upcoming_is_final = upcoming_is_final
        self._all_queued = False  # every item there will be has been queued
        # Turns to prepare: the ticket of the next pick-up, and whose turn it is.
        self._tickets = 0
        self._turn = 0
        self._turns = threading.Lock()
        self._gates: dict[int, threading.Lock] = {}  # ticket -> held until its turn comes

    def _submit(self, item: J, run: RunFunction[J]) -> Future[ScenarioResult]:
        with self._lock:
            if self._closed:  # no thread would ever take it
                closed = Future[ScenarioResult]()
                closed.set_exception(SlotsClosed("the run is over"))
                return closed
            future = self._futures.get(item)
            if future is None:
                future = Future[ScenarioResult]()
                self._futures[item] = future
                self._queue.append((item, run, future))
                self._lock.notify()
                if self._live < self.threads:  # one thread per submission, up to the pool
                    self._started += 1
                    self._live += 1
                    threading.Thread(
                        target=self._work,
                        name=f"openkata-scenario-{self._started}",
                        daemon=True,
                    ).start()
            return future

    def _next(
        self,
    ) -> tuple[J, RunFunction[J], Future[ScenarioResult], Reservation, int]:
        """The next queued scenario, with its first call's place reserved and its turn to
        prepare (both in pick-up order).

        Raises :class:`_PoolClosed`, and the thread ends, when the pool is closed, or when
        there is no work left and none will come: threads then end while pytest still waits
        for the last results, rather than all at once when the pool is closed, where the
        hundred-odd of them competed for the interpreter lock with pytest's own thread
        (tearing down, writing the reports)."""
        with self._lock:
            while True:
                while not self._queue and not self._closed and not self._all_queued:
                    self._lock.wait()
                if self._closed or not self._queue:
                    self._live -= 1
                    raise _PoolClosed
                item, run, future = self._queue.popleft()
                if future.set_running_or_notify_cancel():
                    ticket, self._tickets = self._tickets, self._tickets + 1
                    return item, run, future, self.slots.reserve(), ticket

    def _wait_turn(self, ticket: int) -> None:
        with self._turns:
            if self._turn >= ticket or self._closed:
                return
            gate = self._gates[ticket] = threading.Lock()
            gate.acquire()
        gate.acquire()  # released by the scenario before this one, or by close()

    def _pass_turn(self) -> None:
        with self._turns:
            self._turn += 1
            gate = self._gates.pop(self._turn, None)
        if gate is not None:
            gate.release()

    def _work(self) -> None:
        while True:
            try:
                item, run, future, reservation, ticket = self._next()
            except _PoolClosed:
                return
            slot = _PreparingInTurn(reservation, self._pass_turn)
            try:
                self._wait_turn(ticket)
                future.set_result(run(item, slot))
            except BaseException as exc:  # passed on to the item that waits for it
                future.set_exception(exc)
            finally:
                slot.done()
                reservation.close()

    def result(self, item: J, run: RunFunction[J]) -> ScenarioResult:
        """``item``'s result; starts it (and the next scenarios) if not yet started."""
        if self.concurrency == 1:
            return run(item, self.slots)
        own = self._submit(item, run)
        if not self._all_queued:  # else every job there will be is queued: none to look for
            self._submit_ahead(item, run)
        try:
            return own.result()
        finally:
            with self._lock:
                self._futures.pop(item, None)

    def _submit_ahead(self, item: J, run: RunFunction[J]) -> None:
        """Queue the jobs after ``item``, up to :attr:`lookahead` of them; note when that was
        every job there will be."""
        ahead = 0
        for upcoming in self._upcoming(item):
            if ahead >= self.lookahead:
                return
            ahead += 1
            if upcoming in self._futures:
                continue
            self._submit(upcoming, run)
        if self._upcoming_is_final:
            with self._lock:
                self._all_queued = True
                self._lock.notify_all()

    def close(self) -> None:
        """Drop scenarios started ahead that no item asked for (``-x``, an interrupt): those
        not started are cancelled, and those waiting for a call slot make no call."""
        with self._lock:  # first, so that no thread reserves a place in closed slots
            self._closed = True
            queued, self._queue = self._queue, deque()
            self._futures.clear()
            self._lock.notify_all()
        with self._turns:
            gates, self._gates = list(self._gates.values()), {}
        for gate in gates:
            gate.release()
        self.slots.close()
        for _item, _run, future in queued:
            future.cancel()


class _PreparingInTurn:
    """A scenario's call slot that ends its turn to prepare at its first call (or, with no
    call, when the scenario is done)."""

    def __init__(self, reservation: Reservation, pass_turn: Callable[[], None]) -> None:
        self._reservation = reservation
        self._pass_turn: Callable[[], None] | None = pass_turn

    def done(self) -> None:
        pass_turn, self._pass_turn = self._pass_turn, None
        if pass_turn is not None:
            pass_turn()

    def __enter__(self) -> None:
        self.done()
        self._reservation.__enter__()

    def __exit__(self, *exc_info: object) -> None:
        self._reservation.__exit__(*exc_info)


class _PoolClosed(Exception):
    pass
