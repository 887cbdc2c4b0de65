"""ScenarioScheduler on its own: runs handed to a pool of threads, each holding a call slot."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_openkata.schedule import SCENARIOS_PER_SLOT, ScenarioScheduler
from pytest_openkata.slots import CallSlot, SlotsClosed


@dataclass(frozen=True)
class Item:
    """What the scheduler reads of a pytest item: its node id."""

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
