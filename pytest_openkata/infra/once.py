"""A value built on first use, once, even when several threads ask at the same time."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Once(Generic[T]):
    """Calling it builds the value the first time and returns it every time; ``built`` holds
    it once built (empty before), so that whoever closes it closes only what exists. A build
    that raises is tried again by the next call."""

    def __init__(self, build: Callable[[], T]) -> None:
        self._build = build
        self._lock = threading.Lock()
        self.built: list[T] = []

    def __call__(self) -> T:
        with self._lock:
            if not self.built:
                self.built.append(self._build())
            return self.built[0]
