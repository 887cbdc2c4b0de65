"""The processes that carry a run's mark (``OPENKATA_RUN_OWNER``): what a run, or a build of the
local model, started on the host, found as the sweep of a later run finds them; and whether a
process that was stopped has ended."""

from __future__ import annotations

import time

import psutil

from pytest_openkata.infra.processes import OWNER_VARIABLE


def marked_by(pid: int) -> list[psutil.Process]:
    """The live processes (zombies left out) whose mark names process ``pid`` as their run."""
    found = []
    for process in psutil.process_iter():
        try:
            mark = process.environ().get(OWNER_VARIABLE, "")
            if f":{pid}:" in mark and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except psutil.Error:
            continue
    return found


def ends(pid: int, within: float = 60.0) -> bool:
    """Whether process ``pid`` ends (is gone, or a zombie that no parent reaped yet) within
    ``within`` seconds, a bound for a process already sent the signal that ends it."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False
