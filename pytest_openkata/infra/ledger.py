"""A spend ledger shared by the processes of one run: a small JSON file, changed only under an
exclusive :func:`fcntl.flock`, so that xdist workers on one host add to one total.

The file holds the live tokens spent, the US dollars spent at the run's prices, whether some
call's tokens or cost were not known (so the totals are a lower bound), and whether a process
stopped starting trials because the budget was reached. Each process adds what one trial spent after
it finishes; every reader sees the sum of all additions so far. As with the in-flight cap's
lock files, the folder must be on a file system with working flock (a local disk or tmpfs).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import IO

__all__ = ["SpendLedger", "Spent"]


@dataclass(frozen=True)
class Spent:
    """What a run spent so far: live tokens, US dollars (of the priced calls), whether some
    call's tokens or cost were not known, and whether the budget was reached."""

    tokens: int = 0
    usd: float = 0.0
    unknown: bool = False
    reached: bool = False

    def plus(self, other: Spent) -> Spent:
        return Spent(
            self.tokens + other.tokens,
            self.usd + other.usd,
            self.unknown or other.unknown,
            self.reached or other.reached,
        )


class SpendLedger:
    """The ledger file at ``path`` (made empty by :meth:`create`, by the run's first process)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def create(cls, path: Path) -> SpendLedger:
        """A new, empty ledger; an existing file there is started again from nothing."""
        path.parent.mkdir(parents=True, exist_ok=True)
        ledger = cls(path)
        with ledger._locked() as file:
            ledger._write(file, Spent())
        return ledger

    def read(self) -> Spent:
        with self._locked() as file:
            return self._read(file)

    def add(self, spent: Spent) -> Spent:
        """Add ``spent`` to the total and return the new total."""
        with self._locked() as file:
            total = self._read(file).plus(spent)
            self._write(file, total)
            return total

    def mark_reached(self) -> Spent:
        with self._locked() as file:
            total = replace(self._read(file), reached=True)
            self._write(file, total)
            return total

    @contextmanager
    def _locked(self) -> Iterator[IO[str]]:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        with os.fdopen(fd, "r+", encoding="utf-8") as file:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX)
            try:
                yield file
            finally:
                fcntl.flock(file.fileno(), fcntl.LOCK_UN)

    @staticmethod
    def _read(file: IO[str]) -> Spent:
        file.seek(0)
        text = file.read()
        if not text.strip():
            return Spent()
        data = json.loads(text)
        return Spent(
            tokens=int(data.get("tokens", 0)),
            usd=float(data.get("usd", 0.0)),
            unknown=bool(data.get("unknown", False)),
            reached=bool(data.get("reached", False)),
        )

    @staticmethod
    def _write(file: IO[str], spent: Spent) -> None:
        # Written over the old total, then cut to its length: a write that fails (a full disk)
        # leaves no empty file, which would read as nothing spent.
        file.seek(0)
        file.write(json.dumps(asdict(spent)))
        file.flush()
        file.truncate()
