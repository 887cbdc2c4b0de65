"""A cap on the requests in flight to one model endpoint, shared by threads and processes.

Why: a run asks the model from several threads of one process (scenarios, judge criteria) and,
under pytest-xdist, from several worker processes at once. Any per-process limit multiplies by
the number of workers, so ``-n 8`` with four threads each can send 32 requests to an endpoint
that serves four; a local llama-server then queues or drops them, a hosted one throttles.

How: the cap is a set of ``slots`` lock files, ``<key>-<i>.lock`` in a folder, where ``key`` is
the first 16 hex digits of the SHA-256 of the endpoint's name (its URL, say). A request is in
flight while its caller holds an exclusive :func:`fcntl.flock` on one of them. flock locks
belong to an open file description, so every acquisition opens the file afresh: two threads of
one process then exclude each other just as two processes do. The kernel drops the lock when
its holder closes the file or dies, even by SIGKILL, so no stale lock outlives a crashed
worker. Waiting on flock cannot block on "any of N files", so a waiter polls (2 ms, doubling up
to 50 ms); to keep the threads of one process from polling against each other, they first take
an in-process :class:`threading.BoundedSemaphore` of ``slots`` permits, shared by every
:class:`InFlightLimit` of the same folder, endpoint and slot count in the process.

The lock folder must be one that every worker of the run sees (the plugin uses one in pytest's
cache folder, which the controller and every xdist worker share), and on a file system with
working flock: a local disk or tmpfs, not every network file system. Limits on
one endpoint should agree on ``slots``: each caller counts only the slot files it knows of.

An acquisition belongs to the process that made it: a process forked while holding a slot does
not hold it too (its copy of the file is closed at the fork) and does not release it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_openkata.contracts.backends import SkillAware, Transcribing
from pytest_openkata.contracts.transcripts import Transcript

if TYPE_CHECKING:
    from pytest_openkata.contracts.backends import Completer, ResponseSchema

__all__ = ["InFlightLimit", "LearnedLimit", "LimitedCompleter", "SharedSlots"]

_FIRST_POLL = 0.002
_MAX_POLL = 0.05


class _Registry:
    """This process's semaphore of each (folder, endpoint, slots), made on first use, and the
    descriptors of the slot files it has open; ``lock`` guards both and is held over a fork."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.semaphores: dict[tuple[str, str, int], threading.BoundedSemaphore] = {}
        self.open_fds: set[int] = set()

    def semaphore(self, key: tuple[str, str, int]) -> threading.BoundedSemaphore:
        with self.lock:
            semaphore = self.semaphores.get(key)
            if semaphore is None:
                semaphore = self.semaphores[key] = threading.BoundedSemaphore(key[2])
            return semaphore

    def open(self, path: Path) -> int:
        with self.lock:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
            self.open_fds.add(fd)
            return fd

    def close(self, fd: int) -> None:
        """Close a slot file; the kernel drops its lock with the last descriptor."""
        with self.lock:
            self.open_fds.discard(fd)
            os.close(fd)

    def before_fork(self) -> None:
        self.lock.acquire()

    def after_fork_in_parent(self) -> None:
        self.lock.release()

    def after_fork_in_child(self) -> None:
        # Threads that held a semaphore at the fork do not exist here: start afresh. The
        # child's copies of open slot files share the parent's locks; closing them (without
        # unlocking, which would release the parent's lock) leaves those locks to the parent.
        for fd in self.open_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.open_fds = set()
        self.semaphores = {}
        self.lock = threading.Lock()  # the old one stays held, as it was at the fork


_registry = _Registry()
os.register_at_fork(
    before=_registry.before_fork,
    after_in_parent=_registry.after_fork_in_parent,
    after_in_child=_registry.after_fork_in_child,
)


class InFlightLimit:
    """At most ``slots`` holders of :meth:`acquire` at a time for ``endpoint``, counted over
    every thread and process that uses the same ``directory``."""

    def __init__(self, directory: Path, endpoint: str, slots: int) -> None:
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
            raise ValueError(f"slots must be an integer of at least 1, got {slots!r}")
        self.directory = Path(directory)
        self.endpoint = endpoint
        self.slots = slots
        self.directory.mkdir(parents=True, exist_ok=True)
        key = hashlib.sha256(endpoint.encode()).hexdigest()[:16]
        self.paths: tuple[Path, ...] = tuple(
            self.directory / f"{key}-{i}.lock" for i in range(slots)
        )
        self._key = (str(self.directory.resolve()), endpoint, slots)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(directory={str(self.directory)!r}, "
            f"endpoint={self.endpoint!r}, slots={self.slots})"
        )

    @contextlib.contextmanager
    def acquire(self, timeout: float | None = None) -> Iterator[None]:
        """Hold one slot for the ``with`` block; wait for one first when all are taken.

        ``timeout`` bounds the wait in seconds (0 makes a single attempt); when it passes,
        :class:`TimeoutError` names the endpoint. None waits as long as it takes.
        """
        if timeout is not None and timeout < 0:
            raise ValueError(f"timeout must be None or at least 0 seconds, got {timeout!r}")
        deadline = None if timeout is None else time.monotonic() + timeout
        owner = os.getpid()
        semaphore = _registry.semaphore(self._key)
        if not semaphore.acquire(timeout=timeout):
            raise self._timed_out(timeout)
        try:
            fd = self._lock_a_slot(deadline, timeout)
        except BaseException:
            semaphore.release()
            raise
        try:
            yield
        finally:
            if os.getpid() == owner:  # a forked child neither holds nor releases the slot
                _registry.close(fd)
                semaphore.release()

    @contextlib.contextmanager
    def acquire_long(self) -> Iterator[None]:
        """Hold one slot for a long ``with`` block (a sandboxed agent's whole run), never the
        last one of two or more: holders of long blocks are themselves capped at one fewer
        than the slots (at least one), so that short calls (direct answers, judges) always
        find one to take in turn rather than waiting for a long block to end. With a single
        slot they wait their turn. The wait for that cap holds no slot."""
        long_holds = InFlightLimit(
            self.directory, f"{self.endpoint} (long holds)", max(1, self.slots - 1)
        )
        with long_holds.acquire(), self.acquire():
            yield

    def try_hold(self) -> Callable[[], None] | None:
        """One slot without waiting, or None when all are taken; the callable gives it back
        (once, and only in the process that took it)."""
        semaphore = _registry.semaphore(self._key)
        if not semaphore.acquire(blocking=False):
            return None
        try:
            fd = self._lock_free_slot()
        except BaseException:
            semaphore.release()
            raise
        if fd is None:
            semaphore.release()
            return None
        owner = os.getpid()
        given_back = threading.Lock()

        def give_back() -> None:
            if os.getpid() != owner or not given_back.acquire(blocking=False):
                return
            _registry.close(fd)
            semaphore.release()

        return give_back

    def in_use(self) -> int:
        """How many slots some thread or process holds now (each slot file tried in turn)."""
        held = 0
        for path in self.paths:
            fd = _try_lock(path)
            if fd is None:
                held += 1
            else:
                _registry.close(fd)
        return held

    def _lock_free_slot(self) -> int | None:
        start = random.randrange(self.slots)
        for i in range(self.slots):
            fd = _try_lock(self.paths[(start + i) % self.slots])
            if fd is not None:
                return fd
        return None

    def _lock_a_slot(self, deadline: float | None, timeout: float | None) -> int:
        pause = _FIRST_POLL
        while True:
            fd = self._lock_free_slot()  # from a random slot on: spread the callers
            if fd is not None:
                return fd
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._timed_out(timeout)
                time.sleep(min(pause, left))
            else:
                time.sleep(pause)
            pause = min(pause * 2, _MAX_POLL)

    def _timed_out(self, timeout: float | None) -> TimeoutError:
        return TimeoutError(
            f"no in-flight slot free for endpoint {self.endpoint!r} within {timeout}s "
            f"(all {self.slots} held; lock folder {self.directory})"
        )


def _try_lock(path: Path) -> int | None:
    """An open descriptor of ``path`` holding its exclusive lock, or None when it is taken."""
    fd = _registry.open(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        _registry.close(fd)
        return None
    except BaseException:
        _registry.close(fd)
        raise
    return fd


class SharedSlots:
    """The room of one engine of a sandbox pool, counted by every thread and process that uses
    ``directory`` (an xdist worker's sandboxes and its neighbours'), as the in-flight cap counts
    requests: ``capacity`` lock files named after the engine."""

    def __init__(self, directory: Path, engine: str, capacity: int) -> None:
        self.capacity = capacity
        self._limit = (
            InFlightLimit(directory, f"sandbox engine {engine}", capacity) if capacity else None
        )

    def try_hold(self) -> Callable[[], None] | None:
        return None if self._limit is None else self._limit.try_hold()

    def in_use(self) -> int:
        return 0 if self._limit is None else self._limit.in_use()


class LearnedLimit:
    """An in-flight cap whose size the endpoint says: ``learn`` is asked once, on the first
    :meth:`acquire` (so a run that makes no call asks nothing), and ``part`` turns the number
    of requests the endpoint serves at once into this host's part of them. An endpoint that
    does not say is not capped. The cap is then an :class:`InFlightLimit` like any other,
    shared through ``directory`` with every process that learns the same number."""

    def __init__(
        self,
        directory: Path,
        endpoint: str,
        learn: Callable[[], int | None],
        part: Callable[[int], int],
    ) -> None:
        self.directory = Path(directory)
        self.endpoint = endpoint
        self._learn = learn
        self._part = part
        self._lock = threading.Lock()
        self._learned = False
        self._limit: InFlightLimit | None = None

    def __repr__(self) -> str:
        slots = self._limit.slots if self._limit else ("unknown" if not self._learned else "none")
        return f"{type(self).__name__}(endpoint={self.endpoint!r}, slots={slots})"

    @property
    def limit(self) -> InFlightLimit | None:
        """The cap, once learned; None while unknown or when the endpoint does not say."""
        with self._lock:
            if not self._learned:
                served = self._learn()
                if served is not None:
                    self._limit = InFlightLimit(self.directory, self.endpoint, self._part(served))
                self._learned = True
            return self._limit

    @contextlib.contextmanager
    def acquire(self) -> Iterator[None]:
        limit = self.limit
        if limit is None:
            yield
            return
        with limit.acquire():
            yield

    @contextlib.contextmanager
    def acquire_long(self) -> Iterator[None]:
        """:meth:`InFlightLimit.acquire_long` of the learned cap."""
        limit = self.limit
        if limit is None:
            yield
            return
        with limit.acquire_long():
            yield


class LimitedCompleter:
    """A :class:`~.Completer` whose calls each hold a slot of ``limit`` while they run."""

    def __init__(self, inner: Completer, limit: InFlightLimit | LearnedLimit) -> None:
        self.inner = inner
        self.limit = limit
        self.model = inner.model

    @property
    def endpoint(self) -> str:
        return self.inner.endpoint

    def for_skill(self, skill_dir: Path, *, source: Path | bool = True) -> Completer:
        """The inner backend's view for ``skill_dir`` (an agent CLI's folder), still limited."""
        if not isinstance(self.inner, SkillAware):
            return self
        return LimitedCompleter(self.inner.for_skill(skill_dir, source=source), self.limit)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r}, {self.limit!r})"

    def complete(self, system: str, user: str, *, schema: ResponseSchema | None = None) -> str:
        with self.limit.acquire():
            return self.inner.complete(system, user, schema=schema)

    def complete_transcribed(self, system: str, user: str) -> tuple[str, Transcript | None]:
        """The inner backend's answer and transcript (None when it gives none), in a slot."""
        with self.limit.acquire():
            if isinstance(self.inner, Transcribing):
                return self.inner.complete_transcribed(system, user)
            return self.inner.complete(system, user), None
