"""Concurrency without xdist: scenario runs start ahead of pytest, on a pool of threads.

pytest runs items one after the other in one thread. A scenario run is mostly waiting (for a
model, a CLI or a container), so when item *i* needs its result, the scheduler also queues the
next ``2 * concurrency - 1`` scenarios this process will run on a pool of ``concurrency``
threads, and item *i* waits only for its own. pytest still sets up, reports and tears down each
item in order; only the waiting overlaps, and a thread that finishes picks up the next queued
scenario without waiting for pytest to reach it.

Which items come next: without xdist, the items after this one in ``session.items``; in an
xdist worker, the indices xdist has queued for this worker (read, never changed). A scenario
is started ahead only when it would be run with the same fixtures as the current one (a skill
whose ``conftest.py`` overrides the backends starts its own scenarios when its turn comes).
With ``concurrency`` 1 every scenario runs in pytest's thread, exactly when its item runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from pytest_openkata.results import ScenarioResult

RunFunction = Callable[[Any], ScenarioResult]
"""Runs the scenario of an item (a :class:`~pytest_openkata.items.ScenarioItem`)."""

# The fixtures a scenario run is built from: an item is started ahead only when it resolves
# every one of them to the same definition as the item that starts it.
RUN_FIXTURES = (
    "openkata_result",
    "openkata_backends",
    "openkata_run_options",
    "openkata_redactor",
    "openkata_settings",
    "openkata_sandbox",
)


def _fixture_definitions(item: pytest.Item) -> tuple[object, ...] | None:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    definitions = info.name2fixturedefs
    return tuple(definitions[name][-1] if definitions.get(name) else None for name in RUN_FIXTURES)


def _xdist_queue(config: pytest.Config) -> Any | None:
    """xdist's worker loop (the plugin that holds ``torun``), when this is a worker."""
    if not hasattr(config, "workerinput"):
        return None
    for plugin in config.pluginmanager.get_plugins():
        if hasattr(plugin, "torun") and hasattr(plugin, "nextitem_index"):
            return plugin
    return None


_positions_key = pytest.StashKey[tuple[int, dict[str, int]]]()


def _position(session: pytest.Session, item: pytest.Item) -> int | None:
    """``item``'s index in ``session.items`` (the table is rebuilt if the list changes)."""
    cached = session.stash.get(_positions_key, None)
    if cached is None or cached[0] != id(session.items):
        cached = (id(session.items), {it.nodeid: i for i, it in enumerate(session.items)})
        session.stash[_positions_key] = cached
    return cached[1].get(item.nodeid)


def upcoming_items(session: pytest.Session, item: pytest.Item) -> Iterator[pytest.Item]:
    """The items this process will run after ``item``, in order, as far as is known."""
    interactor = _xdist_queue(session.config)
    items = session.items
    if interactor is None:
        index = _position(session, item)
        if index is not None:
            for later in range(index + 1, len(items)):
                yield items[later]
        return
    try:
        with interactor.torun.lock() as queue:
            queued = list(queue)
        indices = [interactor.nextitem_index, *queued]
    except (AttributeError, TypeError):  # another xdist version: look no further
        return
    for index in indices:
        if isinstance(index, int) and 0 <= index < len(items) and items[index] is not item:
            yield items[index]


class ScenarioScheduler:
    """Starts scenario runs ahead on ``concurrency`` threads and hands out their results."""

    def __init__(
        self,
        concurrency: int,
        upcoming: Callable[[pytest.Item], Iterable[pytest.Item]],
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.concurrency = concurrency
        # Twice the pool: ``concurrency`` scenarios wait in the pool's queue, so a thread
        # that finishes starts the next one at once instead of when pytest reaches an item.
        self.lookahead = 2 * concurrency - 1
        self._upcoming = upcoming
        self._futures: dict[str, Future[ScenarioResult]] = {}
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=self.concurrency, thread_name_prefix="openkata-scenario"
            )
        return self._pool

    def _submit(self, item: pytest.Item, run: RunFunction) -> Future[ScenarioResult]:
        with self._lock:
            future = self._futures.get(item.nodeid)
            if future is None:
                future = self._executor().submit(run, item)
                self._futures[item.nodeid] = future
            return future

    def result(self, item: pytest.Item, run: RunFunction) -> ScenarioResult:
        """``item``'s result; starts it (and the next scenarios) if not yet started."""
        if self.concurrency == 1:
            return run(item)
        own = self._submit(item, run)
        definitions = _fixture_definitions(item)
        ahead = 0
        for upcoming in self._upcoming(item):
            if ahead >= self.lookahead:
                break
            ahead += 1
            if upcoming.nodeid in self._futures:
                continue
            if definitions is None or _fixture_definitions(upcoming) != definitions:
                continue
            self._submit(upcoming, run)
        try:
            return own.result()
        finally:
            with self._lock:
                self._futures.pop(item.nodeid, None)

    def close(self) -> None:
        """Drop scenarios started ahead that no item asked for (``-x``, an interrupt)."""
        with self._lock:
            pool, self._pool = self._pool, None
            self._futures.clear()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
