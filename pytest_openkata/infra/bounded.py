"""Bytes that arrive in chunks, kept up to a bound: what a model, an agent CLI or a sandboxed
command sends is read as it comes, and never held past ``answer_max_bytes``."""

from __future__ import annotations

import threading

__all__ = ["BoundedBuffer"]


class BoundedBuffer:
    """The chunks given to :meth:`add`, up to ``limit`` bytes in all; :attr:`over` is set once
    more came, and from then on chunks are dropped (a reader that goes on reading keeps the
    writer from blocking on a full pipe). :attr:`over` is an event, so that another thread can
    wait for it."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1 byte, got {limit!r}")
        self.limit = limit
        self.over = threading.Event()
        self._chunks: list[bytes] = []
        self._room = limit

    def add(self, chunk: bytes) -> bool:
        """Keep what of ``chunk`` fits; False once the bound is passed."""
        if self.over.is_set():
            return False
        if len(chunk) > self._room:
            self._chunks.append(chunk[: self._room])
            self._room = 0
            self.over.set()
            return False
        self._chunks.append(chunk)
        self._room -= len(chunk)
        return True

    def data(self) -> bytes:
        """What was kept, at most ``limit`` bytes."""
        return b"".join(self._chunks)
