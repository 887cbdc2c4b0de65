"""A value built on first use, once, even when several threads ask at the same time, and closed
once the run is over, even when its build was still under way."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from pytest_openkata.contracts.errors import BackendError

T = TypeVar("T")


class Once(Generic[T]):
    """Calling it builds the value the first time and returns it every time; ``built`` holds
    it once built (empty before). A build that raises is tried again by the next call.

    :meth:`close` closes what was built, with ``close``, and refuses every later build (a
    :class:`BackendError` saying ``<what> was not started: the run is stopping``). It does not
    wait for a build under way on another thread (connecting to an engine takes seconds):
    that build closes its own value as it ends and raises the same error, so that nothing is
    built that nobody would close (a sandbox provider whose containers outlive the run)."""

    def __init__(self, build: Callable[[], T], close: Callable[[T], None], what: str) -> None:
        self._build = build
        self._close = close
        self._what = what
        self._building = threading.Lock()  # one build at a time
        self._state = threading.Lock()  # guards built and closed
        self._closed = False
        self.built: list[T] = []

    def __call__(self) -> T:
        with self._building:
            with self._state:
                if self.built:
                    return self.built[0]
                if self._closed:
                    raise self._stopping()
            value = self._build()
            with self._state:
                if not self._closed:
                    self.built.append(value)
                    return value
            self._close(value)  # closed while it was being built
            raise self._stopping()

    def close(self) -> None:
        """Close what was built, once; later builds are refused (a value built before stays
        in ``built``, closed: what uses it refuses new work itself)."""
        with self._state:
            if self._closed:
                return
            self._closed = True
            built = list(self.built)
        for value in built:
            self._close(value)

    def _stopping(self) -> BackendError:
        return BackendError(f"{self._what} was not started: the run is stopping")
