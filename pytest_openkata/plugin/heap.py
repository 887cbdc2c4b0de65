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

At the interpreter's exit the heap is frozen once more, by an ``atexit`` handler registered
as the run unconfigures (so that it runs before the handlers registered earlier): the
interpreter's own last collection would walk every object of the process, all of which live
until the modules are torn down, between the last answer and the exit. Python does not promise
to finalize objects still alive at exit, and the handlers registered earlier (among them
``weakref.finalize``'s, which remove temporary folders) still run after it.
"""

from __future__ import annotations

import atexit
import functools
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
            _freeze_at_exit()


@functools.cache
def _freeze_at_exit() -> None:
    """Once per process, however many sessions it runs (``pytest.main`` called again)."""
    atexit.register(gc.freeze)
