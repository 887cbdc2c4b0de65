"""ScenarioScheduler on its own: runs handed to a pool of threads, each holding a call slot."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_openkata.core.schedule import SCENARIOS_PER_SLOT, ScenarioScheduler
from pytest_openkata.core.slots import CallSlot, SlotsClosed


@dataclass(frozen=True)
class Item:
    """A job: the scheduler needs nothing but a hashable value (pytest items are)."""

    nodeid: str


def _scheduler(items: list[Item], concurrency: int) -> ScenarioScheduler:
    return ScenarioScheduler(concurrency, lambda item: items[items.index(item) + 1 :])


def test_every_result_comes_back_and_calls_never_exceed_the_concurrency() -> None:
    items = [Item(f"scenario-{n}") for n in range(20)]
    scheduler = _scheduler(items, 3)
    lock = threading.Lock()
    holding = peak = 0

    def run(item: Any, slot: CallSlot) -> Any:
        nonlocal holding, peak
        for _call in range(2):
            with slot:
                with lock:
                    holding += 1
                    peak = max(peak, holding)
                with lock:
                    holding -= 1
        return f"result of {item.nodeid}"

    try:
        results = [scheduler.result(item, run) for item in items]  # type: ignore[arg-type]
    finally:
        scheduler.close()

    assert results == [f"result of {item.nodeid}" for item in items]
    assert 1 <= peak <= 3
    assert scheduler.threads == SCENARIOS_PER_SLOT * 3


def test_after_closing_a_result_is_refused_instead_of_awaited() -> None:
    items = [Item("scenario-0"), Item("scenario-1")]
    scheduler = _scheduler(items, 2)
    scheduler.close()

    with pytest.raises(SlotsClosed):
        scheduler.result(items[0], lambda item, slot: "never run")  # type: ignore[arg-type]


def test_concurrency_one_runs_in_the_calling_thread() -> None:
    items = [Item("scenario-0")]
    scheduler = _scheduler(items, 1)
    threads: list[str] = []

    def run(item: Any, slot: CallSlot) -> Any:
        with slot:
            threads.append(threading.current_thread().name)
        return item.nodeid

    assert scheduler.result(items[0], run) == "scenario-0"  # type: ignore[arg-type]
    assert threads == [threading.current_thread().name]


def test_scenarios_are_prepared_one_at_a_time_in_the_order_they_were_picked_up() -> None:
    items = [Item(f"scenario-{n}") for n in range(24)]
    scheduler = _scheduler(items, 4)
    events: list[tuple[str, str]] = []
    lock = threading.Lock()

    def run(item: Any, slot: CallSlot) -> Any:
        with lock:
            events.append(("prepare", item.nodeid))
        threading.Event().wait(0.001)  # reading files: the interpreter goes to other threads
        with lock:
            events.append(("prepared", item.nodeid))
        with slot:  # the first call ends the turn to prepare
            pass
        with slot:
            pass
        return item.nodeid

    try:
        results = [scheduler.result(item, run) for item in items]  # type: ignore[arg-type]
    finally:
        scheduler.close()

    assert results == [item.nodeid for item in items]
    expected = [(kind, item.nodeid) for item in items for kind in ("prepare", "prepared")]
    assert events == expected


def test_a_scenario_without_a_call_or_that_fails_still_passes_the_turn_on() -> None:
    items = [Item(f"scenario-{n}") for n in range(12)]
    scheduler = _scheduler(items, 3)

    def run(item: Any, slot: CallSlot) -> Any:
        number = int(item.nodeid.rsplit("-", 1)[1])
        if number % 3 == 0:
            return "cached: no call"
        if number % 3 == 1:
            raise ValueError("unreadable scenario")
        with slot:
            return "called"

    outcomes = []
    try:
        for item in items:
            try:
                outcomes.append(scheduler.result(item, run))  # type: ignore[arg-type]
            except ValueError as exc:
                outcomes.append(str(exc))
    finally:
        scheduler.close()

    assert outcomes == ["cached: no call", "unreadable scenario", "called"] * 4


def _join(threads: list[threading.Thread], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))


def _pool_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    return [
        thread
        for thread in threading.enumerate()
        if thread not in before and thread.name.startswith("openkata-scenario-")
    ]


def _two_calls(item: Any, slot: CallSlot) -> Any:
    for _call in range(2):
        with slot:
            pass
    return item.nodeid


def test_threads_end_once_every_scenario_is_queued_and_none_is_left() -> None:
    items = [Item(f"scenario-{n}") for n in range(12)]
    before = set(threading.enumerate())
    scheduler = _scheduler(items, 2)
    try:
        results = [scheduler.result(item, _two_calls) for item in items]  # type: ignore[arg-type]
        pool = _pool_threads(before)
        _join(pool)  # before the pool is closed
        assert [thread.name for thread in pool if thread.is_alive()] == []
    finally:
        scheduler.close()

    assert results == [item.nodeid for item in items]


def test_threads_wait_for_more_work_when_more_items_may_come() -> None:
    items = [Item(f"scenario-{n}") for n in range(6)]
    before = set(threading.enumerate())
    scheduler = ScenarioScheduler(
        2,
        lambda item: items[items.index(item) + 1 :] if item in items else [],
        upcoming_is_final=False,
    )
    try:
        results = [scheduler.result(item, _two_calls) for item in items]  # type: ignore[arg-type]
        waiting = _pool_threads(before)
        assert waiting
        assert all(thread.is_alive() for thread in waiting)
        late = Item("scenario-late")  # as xdist sends a worker more items
        assert scheduler.result(late, _two_calls) == "scenario-late"  # type: ignore[arg-type]
    finally:
        scheduler.close()
    _join(waiting)

    assert results == [item.nodeid for item in items]
    assert [thread.name for thread in waiting if thread.is_alive()] == []


@pytest.mark.parametrize("final", [True, False], ids=["final", "more may come"])
def test_once_every_job_is_queued_the_upcoming_jobs_are_not_looked_for_again(final: bool) -> None:
    # Looking ahead costs a walk over the jobs after each one: when what `upcoming` gave is
    # all there will be and all of it is queued, there is nothing left to find. An xdist
    # worker may be sent more, so there it keeps looking.
    items = [Item(f"scenario-{n}") for n in range(10)]
    asked: list[Item] = []

    def upcoming(item: Item) -> list[Item]:
        asked.append(item)
        return items[items.index(item) + 1 :]

    scheduler = ScenarioScheduler(2, upcoming, upcoming_is_final=final)
    try:
        results = [scheduler.result(item, lambda job, slot: job.nodeid) for item in items]  # type: ignore[arg-type,attr-defined]
    finally:
        scheduler.close()

    assert results == [item.nodeid for item in items]
    assert asked == (items[:1] if final else items)
