"""Garbage collection during an eval run: the heap that collection built is frozen.

A full collection in a pytest process that has collected a few hundred scenarios walks every
object pytest, pydantic and the plugin have made: about 50 ms on the machine of the
benchmarks, and it fell just as the first model calls went out, holding the interpreter lock
while the scenario threads waited. The objects that exist when the run starts (modules,
items, fixture definitions) live until the session ends anyway: :func:`gc.freeze` moves them
out of the collector's sight for the run, and :func:`gc.unfreeze` hands them back when the
session finishes, so that any garbage among them is still collected. Only a session that
collected scenarios does this; a pytest run without them is left as it is.
"""

from __future__ import annotations

import gc

import pytest

from pytest_openkata.plugin.items import ScenarioItem


class HeapFreezer:
    """Freezes the collected heap for a run with scenario items, until the session ends."""

    def __init__(self) -> None:
        self.frozen = False

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not self.frozen and any(isinstance(item, ScenarioItem) for item in session.items):
            gc.freeze()
            self.frozen = True

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        if self.frozen:
            gc.unfreeze()
            self.frozen = False
