"""SIGTERM ends a run as Ctrl-C does, once.

A run starts what must be stopped again: agent CLIs, sandbox containers, and reports to write.
SIGTERM's default action ends the process at once, with none of that done. While a run is on,
the first SIGTERM instead raises :class:`KeyboardInterrupt` in the main thread, so that the run
stops the way Ctrl-C stops it: ``finally`` blocks remove containers and kill agents, the reports
of what finished are written, and pytest exits with its status for an interrupted run (2).

Every later SIGTERM is ignored while the run stops: a second interruption in the middle of the
clean-up would leave it half done, print a second traceback and end the process with another
status. GNU ``timeout`` sends two at once (one to the process, one to its process group), and a
supervisor may repeat its signal. Once the run is winding up on its own (pytest's
``pytest_sessionfinish``: containers removed, reports written), a SIGTERM is only noted
(:meth:`TerminationAsInterrupt.defer`): interrupting the clean-up would stop it halfway, and the
run ends moments later anyway, with the status of what it did. SIGKILL still ends everything
at once; the next run sweeps what that leaves behind.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

__all__ = ["INTERRUPTED_BY", "TerminationAsInterrupt", "sigterm_as_interrupt"]

INTERRUPTED_BY = "SIGTERM"  # the KeyboardInterrupt's text, which pytest shows


class TerminationAsInterrupt:
    """The SIGTERM handler of a run: :meth:`install` it from the main thread, :meth:`restore`
    the previous one when the run is over."""

    def __init__(self) -> None:
        self.received = False  # a SIGTERM came while installed
        self._previous: Any = None
        self._installed = False
        self._deferred = False

    def install(self) -> bool:
        """Handle SIGTERM, unless this is not the main thread (only it can) or someone else
        already handles it (a handler of the application's own stays in charge)."""
        if threading.current_thread() is not threading.main_thread():
            return False
        previous = signal.getsignal(signal.SIGTERM)
        if previous not in (signal.SIG_DFL, None):
            return False
        self._previous = previous
        signal.signal(signal.SIGTERM, self._handle)
        self._installed = True
        return True

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received or self._deferred:
            self.received = True
            return  # stopping already, or winding up: let the clean-up finish
        self.received = True
        raise KeyboardInterrupt(INTERRUPTED_BY)

    def defer(self) -> None:
        """From now on a SIGTERM is only noted (:attr:`received`): the run is winding up."""
        self._deferred = True

    def restore(self) -> None:
        """Put the previous handler back."""
        if not self._installed:
            return
        self._installed = False
        signal.signal(signal.SIGTERM, self._previous or signal.SIG_DFL)


@contextmanager
def sigterm_as_interrupt() -> Iterator[TerminationAsInterrupt]:
    """SIGTERM handled as :class:`TerminationAsInterrupt` for the block (a no-op outside the
    main thread or where SIGTERM already has a handler)."""
    handler = TerminationAsInterrupt()
    handler.install()
    try:
        yield handler
    finally:
        handler.restore()
