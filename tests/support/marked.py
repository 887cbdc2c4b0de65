"""The processes that carry a run's mark (``OPENKATA_RUN_OWNER``): what a run, or a build of the
local model, started on the host, found as the sweep of a later run finds them."""

from __future__ import annotations

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
