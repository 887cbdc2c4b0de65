"""SIGTERM and SIGHUP end a run as Ctrl-C does, once.

A run starts what must be stopped again: agent CLIs, sandbox containers, and reports to write.
The default action of SIGTERM (a supervisor, ``timeout``, ``docker stop``) and of SIGHUP (the
terminal closed, the SSH session dropped) ends the process at once, with none of that done.
While a run is on, the first of them instead raises :class:`KeyboardInterrupt` in the main
thread, so that the run stops the way Ctrl-C stops it: ``finally`` blocks remove containers and
kill agents, the reports of what finished are written, and pytest exits with its status for an
interrupted run (2).

Every later one is ignored while the run stops: a second interruption in the middle of the
clean-up would leave it half done, print a second traceback and end the process with another
status. GNU ``timeout`` sends two SIGTERMs at once (one to the process, one to its process
group), a closed terminal sends SIGHUP to its whole session, and a supervisor may repeat its
signal. Once the run is winding up on its own (pytest's ``pytest_sessionfinish``: containers
removed, reports written), a signal is only noted (:meth:`TerminationAsInterrupt.defer`):
interrupting the clean-up would stop it halfway, and the run ends moments later anyway, with
the status of what it did. SIGKILL still ends everything at once; the next run sweeps what
that leaves behind.

Each signal is taken over only where it has its default action: a handler of the
application's own stays in charge, and a SIGHUP ignored on purpose (``nohup``) stays ignored.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

__all__ = ["HANDLED_SIGNALS", "TerminationAsInterrupt", "stop_signals_as_interrupt"]

HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class TerminationAsInterrupt:
    """The SIGTERM and SIGHUP handler of a run: :meth:`install` it from the main thread,
    :meth:`restore` the previous ones when the run is over."""

    def __init__(self) -> None:
        self.received = False  # a handled signal came while installed
        self._previous: dict[signal.Signals, Any] = {}
        self._deferred = False

    def install(self) -> bool:
        """Handle each of :data:`HANDLED_SIGNALS` that has its default action, unless this is
        not the main thread (only it can); whether any is handled."""
        if threading.current_thread() is not threading.main_thread():
            return False
        for signum in HANDLED_SIGNALS:
            previous = signal.getsignal(signum)
            if previous in (signal.SIG_DFL, None):
                self._previous[signum] = previous
                signal.signal(signum, self._handle)
        return bool(self._previous)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received or self._deferred:
            self.received = True
            return  # stopping already, or winding up: let the clean-up finish
        self.received = True
        raise KeyboardInterrupt(signal.Signals(signum).name)  # the text pytest shows

    def defer(self) -> None:
        """From now on a handled signal is only noted (:attr:`received`): the run is winding
        up."""
        self._deferred = True

    def restore(self) -> None:
        """Put the previous handlers back."""
        previous, self._previous = self._previous, {}
        for signum, handler in previous.items():
            signal.signal(signum, handler or signal.SIG_DFL)


@contextmanager
def stop_signals_as_interrupt() -> Iterator[TerminationAsInterrupt]:
    """SIGTERM and SIGHUP handled as :class:`TerminationAsInterrupt` for the block (a no-op
    outside the main thread, and for a signal that already has a handler)."""
    handler = TerminationAsInterrupt()
    handler.install()
    try:
        yield handler
    finally:
        handler.restore()
