"""Processes a run starts on its host, and what a killed run left of them.

An agent CLI runs in a session (so a process group) of its own, which the run kills when the
CLI exits, times out or the run is interrupted. A run killed outright (SIGKILL, a crash, the
machine's out-of-memory killer) cannot do that, so two more things hold:

- the kernel sends the CLI SIGKILL when the run dies (Linux's parent-death signal,
  :func:`parent_death_preexec`);
- every process of the CLI carries :data:`OWNER_VARIABLE` in its environment, naming the run:
  its host (:func:`host_tag`), process id and start time (so that a reused process id is not
  taken for it). Processes the CLI started inherit it, and a parent-death signal does not
  reach them; the next run on the host kills every process whose run is gone
  (:func:`sweep_orphans`) and says so. A mark of another host tag is left alone: a container
  or another pid namespace on the same machine sees other process ids, and there a run that
  looks gone may be alive.
"""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import sys
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from functools import cache

__all__ = [
    "OWNER_VARIABLE",
    "Orphan",
    "host_tag",
    "owner_mark",
    "parent_death_preexec",
    "sweep_orphans",
]

OWNER_VARIABLE = "OPENKATA_RUN_OWNER"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


@cache
def host_tag() -> str:
    """This host as the process ids of this process see it: 8 hex digits of the SHA-256 of
    the host name and, on Linux, of the pid namespace."""
    namespace = ""
    with suppress(OSError):
        namespace = os.readlink("/proc/self/ns/pid")
    seed = f"{socket.gethostname()}\0{namespace}".encode()
    return hashlib.sha256(seed).hexdigest()[:8]


@cache
def owner_mark() -> str:
    """This process as :data:`OWNER_VARIABLE` names it: ``<host tag>:<pid>:<start time>``."""
    import psutil

    return _mark(os.getpid(), psutil.Process().create_time())


def _mark(pid: int, started: float) -> str:
    return f"{host_tag()}:{pid}:{started:.2f}"


def _owner_gone(mark: str) -> bool:
    """Whether the run a mark names, of this host, is no longer running (a mark of another
    host or one that cannot be read never counts as gone: nothing is killed on a guess)."""
    import psutil

    tag, _, rest = mark.partition(":")
    pid_text = rest.partition(":")[0]
    if tag != host_tag() or not pid_text.isdigit():
        return False
    try:
        return _mark(int(pid_text), psutil.Process(int(pid_text)).create_time()) != mark
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False


@dataclass(frozen=True)
class Orphan:
    """A process a killed run left, as it was stopped."""

    pid: int
    command: str

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.command})"


def sweep_orphans() -> list[Orphan]:
    """Kill (SIGKILL) every process of this user whose environment names a run of this host
    that is no longer running; the processes killed. Processes of other users, and ones
    whose environment cannot be read, are left alone."""
    import psutil

    found: list[Orphan] = []
    dead: dict[str, bool] = {}
    for process in psutil.process_iter(["pid", "cmdline", "name"]):
        try:
            mark = process.environ().get(OWNER_VARIABLE)
        except psutil.Error:
            continue
        if not mark or process.pid == os.getpid():
            continue
        if dead.setdefault(mark, _owner_gone(mark)):
            command = " ".join(process.info.get("cmdline") or []) or process.info.get("name", "")
            try:
                process.send_signal(signal.SIGKILL)
            except psutil.Error:
                continue
            found.append(Orphan(process.pid, command[:80]))
    return found


def parent_death_preexec(
    death_signal: int = signal.SIGKILL, *, parent: int | None = None
) -> Callable[[], None] | None:
    """A ``preexec_fn`` after which the kernel sends ``death_signal`` to the child when its
    parent dies, or None where that is not available (not Linux, no ``prctl``).

    Linux sends the signal when the *thread* that forked the child ends, not the process:
    the caller must wait for the child in that thread (as a CLI call does), else the child
    dies with the thread. Once the signal is set the child checks that its parent is still
    ``parent`` (this process): had the parent died just before, the signal would never
    come, so the child kills itself instead.
    """
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # here: the plugin loads in every pytest run, and most start no process

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    expected_parent = os.getpid() if parent is None else parent

    def set_parent_death_signal() -> None:  # runs in the child, between fork and exec
        prctl(PR_SET_PDEATHSIG, death_signal, 0, 0, 0)  # best effort: a filtered prctl fails
        if os.getppid() != expected_parent:
            os.kill(os.getpid(), death_signal)

    return set_parent_death_signal
