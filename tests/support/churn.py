"""Another thread setting and removing an environment variable without pause, as pytest's
own thread does with ``PYTEST_CURRENT_TEST`` for every item while scenarios run."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

CHURNED = "OPENKATA_TEST_CHURNED"


@contextmanager
def environment_churn() -> Iterator[None]:
    """While inside, ``CHURNED`` comes and goes in another thread, and the interpreter switches
    threads as often as it can, so that a reader racing the change meets it within a few
    hundred reads."""
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            os.environ[CHURNED] = "1"
            del os.environ[CHURNED]

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    thread = threading.Thread(target=churn, name="environment-churn", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(interval)
        os.environ.pop(CHURNED, None)
