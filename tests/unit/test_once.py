"""A value built once on first use, and closed once when the run is over: a build still under
way when the run closes it closes its own value and is refused, so that no sandbox or backend
is left that nobody closes."""

from __future__ import annotations

import threading

import pytest

from pytest_openkata.contracts.errors import BackendError
from pytest_openkata.infra.once import Once

WAIT = 30.0  # a guard against a hang, never reached when the code is right


class Values:
    """Builds numbered values and notes which were closed."""

    def __init__(self) -> None:
        self.made = 0
        self.closed: list[int] = []

    def build(self) -> int:
        self.made += 1
        return self.made

    def close(self, value: int) -> None:
        self.closed.append(value)


def test_it_builds_once_and_closes_what_it_built_once() -> None:
    values = Values()
    once = Once(values.build, values.close, "the thing")

    assert [once(), once()] == [1, 1]
    once.close()
    once.close()

    assert values.closed == [1]
    assert once() == 1  # built before: still handed out, closed (its user refuses new work)


def test_a_build_that_raises_is_tried_again() -> None:
    attempts: list[int] = []

    def build() -> int:
        attempts.append(1)
        if len(attempts) == 1:
            raise BackendError("no engine yet")
        return 7

    once = Once(build, lambda value: None, "the thing")

    with pytest.raises(BackendError, match="no engine yet"):
        once()
    assert once() == 7


def test_after_close_nothing_is_built() -> None:
    values = Values()
    once = Once(values.build, values.close, "the sandbox")
    once.close()

    with pytest.raises(BackendError, match=r"^the sandbox was not started: the run is stopping$"):
        once()
    assert values.made == 0


def test_a_build_under_way_when_closed_closes_its_value_and_is_refused() -> None:
    values = Values()
    started, finish = threading.Event(), threading.Event()

    def slow_build() -> int:
        started.set()
        assert finish.wait(WAIT)
        return values.build()

    once = Once(slow_build, values.close, "the sandbox")
    outcome: list[object] = []

    def call() -> None:
        try:
            outcome.append(once())
        except BackendError as exc:
            outcome.append(str(exc))

    builder = threading.Thread(target=call)
    builder.start()
    assert started.wait(WAIT)

    once.close()  # returns while the build is still blocked: it does not wait for it
    assert values.made == 0
    assert values.closed == []
    finish.set()
    builder.join(WAIT)

    assert outcome == ["the sandbox was not started: the run is stopping"]
    assert values.closed == [1]  # the value built after close was closed by its builder
    assert once.built == []
