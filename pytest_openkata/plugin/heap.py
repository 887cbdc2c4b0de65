"""Garbage collection during an eval run: the heap that collection built is frozen.

A full collection in a pytest process that has collected a few hundred scenarios walks every
object pytest, pydantic and the plugin have made, and it fell just as the first model calls
went out, holding the interpreter lock while the scenario threads waited. The objects that
exist when the run starts (modules, items, fixture definitions) live until the session ends
anyway: :func:`gc.freeze` moves them out of the collector's sight for the run, and
:func:`gc.unfreeze` hands them back once pytest unconfigures, so that any garbage among them
is still collected. Only a session that collected scenarios does this; a pytest run without
them is left as it is.

Why not at the end of the session: pytest collects garbage twice as it shuts down, in its own
``pytest_unconfigure`` (to report exceptions raised in finalizers) and again in its config's
cleanup. Unfrozen at the end of the session, both walk the whole heap of a large run; unfrozen
after pytest's ``pytest_unconfigure`` (``trylast``), the first walks only what the run made,
and the second, which every garbage object still reaches before pytest's last report of such
exceptions, walks the rest: one walk of the collected heap less between the last answer and
the exit.
"""

from __future__ import annotations

import gc

import pytest

from pytest_openkata.plugin.items import ScenarioItem


class HeapFreezer:
    """Freezes the collected heap for a run with scenario items, until pytest unconfigures."""

    def __init__(self) -> None:
        self.frozen = False

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not self.frozen and any(isinstance(item, ScenarioItem) for item in session.items):
            gc.freeze()
            self.frozen = True

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self) -> None:
        if self.frozen:
            gc.unfreeze()
            self.frozen = False
