"""CallSlots: at most N calls at once, handed out first come, first served, with real threads."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from pytest_openkata.core.slots import CallSlot, CallSlots, SlotsClosed

WAIT = 10.0  # seconds; only a broken implementation ever waits this long


def _until(condition: Callable[[], bool]) -> None:
    """Wait for another thread to reach a state (polling, no fixed sleeps)."""
    done = threading.Event()
    for _ in range(int(WAIT / 0.001)):
        if condition():
            return
        done.wait(0.001)
    raise AssertionError("the other thread never got there")


def _start(target: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def _take_in_thread(slot: CallSlot, order: list[str], name: str) -> threading.Thread:
    """Start a thread that takes ``slot`` and notes ``name`` in ``order`` while holding it."""

    def take() -> None:
        with slot:
            order.append(name)

    return _start(take)


def test_no_more_than_size_holders_at_once() -> None:
    slots = CallSlots(3)
    lock = threading.Lock()
    holding = peak = 0
    go = threading.Event()

    def call() -> None:
        nonlocal holding, peak
        with slots:
            with lock:
                holding += 1
                peak = max(peak, holding)
            go.wait(WAIT)
            with lock:
                holding -= 1

    threads = [_start(call) for _ in range(8)]
    _until(lambda: slots.waiting == 5)
    assert holding == 3
    go.set()
    for thread in threads:
        thread.join(WAIT)
    assert peak == 3
    assert holding == 0
    assert slots.waiting == 0


def test_a_released_slot_goes_to_the_longest_waiter_not_back_to_its_holder() -> None:
    slots = CallSlots(1)
    order: list[str] = []
    slots.acquire()
    order.append("first")

    waiters = [_take_in_thread(slots, order, "second")]
    _until(lambda: slots.waiting == 1)
    waiters.append(_take_in_thread(slots, order, "third"))
    _until(lambda: slots.waiting == 2)

    slots.release()
    slots.acquire()  # the releasing thread asks again at once: it queues behind both
    order.append("first again")
    slots.release()
    for thread in waiters:
        thread.join(WAIT)

    assert order == ["first", "second", "third", "first again"]


def test_closing_refuses_the_waiting_and_later_callers() -> None:
    slots = CallSlots(1)
    slots.acquire()
    outcomes: list[str] = []

    def wait_for_a_slot() -> None:
        try:
            slots.acquire()
        except SlotsClosed:
            outcomes.append("refused")
        else:
            outcomes.append("granted")

    waiter = _start(wait_for_a_slot)
    _until(lambda: slots.waiting == 1)
    slots.close()
    waiter.join(WAIT)

    assert outcomes == ["refused"]
    with pytest.raises(SlotsClosed):
        slots.acquire()
    slots.release()  # the holder still gives its slot back without error


def test_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        CallSlots(0)


def test_a_reservation_keeps_its_place_for_its_first_call() -> None:
    slots = CallSlots(1)
    slots.acquire()
    reserved = slots.reserve()  # queued first, before any call is made
    order: list[str] = []

    later = _take_in_thread(slots, order, "later caller")
    _until(lambda: slots.waiting == 2)
    slots.release()
    with reserved:
        order.append("reservation")
    later.join(WAIT)

    assert order == ["reservation", "later caller"]


def test_a_reservation_queues_afresh_for_its_later_calls() -> None:
    slots = CallSlots(1)
    reserved = slots.reserve()  # a free slot: granted at once
    with reserved:
        pass
    slots.acquire()
    taken: list[str] = []

    caller = _take_in_thread(reserved, taken, "second call")
    _until(lambda: slots.waiting == 1)
    assert taken == []
    slots.release()
    caller.join(WAIT)
    assert taken == ["second call"]


def test_closing_an_unused_reservation_gives_its_place_back() -> None:
    slots = CallSlots(1)
    granted = slots.reserve()  # holds the only slot
    queued = slots.reserve()
    assert slots.waiting == 1

    queued.close()  # still queued: leaves the queue
    assert slots.waiting == 0
    granted.close()  # granted but never used: the slot is free again

    caller = _start(slots.acquire)
    caller.join(WAIT)
    assert not caller.is_alive()  # the caller got the slot without anyone releasing it
    slots.close()
    with pytest.raises(SlotsClosed):
        slots.reserve()
