"""Processes a run starts on its host, and what a run no longer running left of them.

An agent CLI runs in a session (so a process group) of its own, which the run kills when the
CLI exits, times out or the run is interrupted. A run killed outright (SIGKILL, a crash, the
machine's out-of-memory killer) cannot do that, and a process that left the CLI's group
escapes it, so two more things hold:

- on Linux the kernel sends the CLI SIGKILL when the run dies (its parent-death signal, set
  by a small launcher that then becomes the CLI: :func:`with_parent_death_signal`);
- every process of the CLI carries :data:`OWNER_VARIABLE` in its environment, naming the run:
  its host (:func:`host_tag`), process id and start (so that a reused process id is not
  taken for it). Processes the CLI started inherit it, and a parent-death signal does not
  reach them; a run on the host stops every process of this user whose run is over
  (:func:`sweep_orphans`), and says so; and a run that ends stops those that carry its own
  mark, left by its agents outside their group (:func:`stop_strays`), and says so.

Nothing is killed on a guess. A mark of another host tag is left alone (a container or
another pid namespace on the same machine sees other process ids, and there a run that looks
over may be alive), as are a mark that cannot be read, other users' processes, and the
sweeping run's own family: its ancestors and descendants, and the processes that carry the
mark it inherited itself (a run started by an agent of another run).
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
from pathlib import Path

__all__ = [
    "OWNER_VARIABLE",
    "Orphan",
    "host_tag",
    "owner_mark",
    "parent_death_preexec",
    "process_gone",
    "run_mark",
    "run_over",
    "stop_strays",
    "stopped_line",
    "sweep_orphans",
    "with_parent_death_signal",
]

OWNER_VARIABLE = "OPENKATA_RUN_OWNER"
STOP_GRACE = 3.0  # seconds an orphan has to end after SIGTERM before SIGKILL

# Sets the parent-death signal, makes sure the parent is still the one that started it (had
# it died just before, the signal would never come), then becomes the command. A command that
# cannot be run exits as a shell would: 127 when it is not found, 126 when it cannot run.
_LAUNCHER = """\
import ctypes, os, sys
parent, command = int(sys.argv[1]), sys.argv[2:]
ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
if os.getppid() != parent:
    os.kill(os.getpid(), 9)
try:
    os.execvp(command[0], command)
except OSError as error:
    sys.stderr.write(f"{command[0]}: {error.strerror}\\n")
    sys.exit(127 if isinstance(error, FileNotFoundError) else 126)
"""


@cache
def host_tag() -> str:
    """This host as the process ids of this process see it: 8 hex digits of the SHA-256 of
    the machine's id, the host name and, on Linux, the pid namespace (whose id is the same
    number on every machine's first namespace, hence the machine id)."""
    parts = [socket.gethostname()]
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        with suppress(OSError):
            parts.append(Path(path).read_text().strip())
            break
    with suppress(OSError):
        parts.append(os.readlink("/proc/self/ns/pid"))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:8]


def process_gone(pid: int) -> bool:
    """Whether no process ``pid`` runs on this host (in this pid namespace); another user's
    process, or a number that is no process id at all, is not gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):
        return False
    return False


def _start_of(pid: int) -> str:
    """When process ``pid`` started, as a text that stays the same for its whole life: on
    Linux its start in clock ticks since boot (``/proc/<pid>/stat``), which no step of the
    clock moves; elsewhere its start time to the second. Raises ``psutil.NoSuchProcess`` for a
    process that is gone."""
    import psutil

    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        if sys.platform.startswith("linux"):
            raise psutil.NoSuchProcess(pid) from None
    except OSError:
        pass
    else:
        # The command's name (field 2) may hold spaces and parentheses: the fields after it
        # come after its last ")"; the start (field 22) is the 20th of them.
        return stat.rpartition(")")[2].split()[19]
    return f"{psutil.Process(pid).create_time():.0f}"


# The processes (by id: a forked child is a run of its own) whose mark was handed out.
_HANDED_OUT: set[int] = set()


def owner_mark() -> str:
    """This process as :data:`OWNER_VARIABLE` names it: ``<host tag>:<pid>:<start>`` (worked
    out for the current process id: a forked child is a run of its own)."""
    pid = os.getpid()
    _HANDED_OUT.add(pid)
    return _owner_mark(pid)


def run_mark() -> str:
    """This process's mark (as :func:`owner_mark` gives it) for what is not a process, such as
    a container's label: handing it out does not make the run look for stray processes."""
    return _owner_mark(os.getpid())


@cache
def _owner_mark(pid: int) -> str:
    return f"{host_tag()}:{pid}:{_start_of(pid)}"


def run_over(mark: str) -> bool:
    """Whether the run a mark names, of this host, is no longer running (a mark of another
    host or one that cannot be read never counts as over)."""
    import psutil

    tag, _, rest = mark.partition(":")
    pid_text, _, start = rest.partition(":")
    if tag != host_tag() or not pid_text.isdigit() or not start:
        return False
    try:
        return _start_of(int(pid_text)) != start
    except psutil.NoSuchProcess:
        return True
    except (psutil.Error, OSError, IndexError):
        return False


@dataclass(frozen=True)
class Orphan:
    """A process a run no longer running left, as it was stopped."""

    pid: int
    command: str

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.command})"


def _family() -> set[int]:
    """This process, its ancestors and its descendants: never swept."""
    import psutil

    me = psutil.Process()
    family = {me.pid}
    with suppress(psutil.Error):
        family.update(parent.pid for parent in me.parents())
    with suppress(psutil.Error):
        family.update(child.pid for child in me.children(recursive=True))
    return family


def stopped_line(stopped: list[Orphan], whose: str) -> str | None:
    """``openkata: stopped 2 agent processes <whose>: pid 7 (sleep 300), ...`` (the first five
    named), or None when none was stopped."""
    if not stopped:
        return None
    shown = ", ".join(str(orphan) for orphan in stopped[:5])
    more = f" and {len(stopped) - 5} more" if len(stopped) > 5 else ""
    processes = "1 agent process" if len(stopped) == 1 else f"{len(stopped)} agent processes"
    return f"openkata: stopped {processes} {whose}: {shown}{more}"


def sweep_orphans() -> list[Orphan]:
    """Stop every process of this user whose environment names a run of this host that is
    over (SIGTERM, then SIGKILL after :data:`STOP_GRACE` seconds); the processes stopped."""
    inherited = os.environ.get(OWNER_VARIABLE)
    over: dict[str, bool] = {}

    def of_a_run_over(mark: str) -> bool:
        if mark == inherited:
            return False
        if mark not in over:
            over[mark] = run_over(mark)
        return over[mark]

    return _stop_marked(of_a_run_over, spared=_family())


def stop_strays() -> list[Orphan]:
    """Stop every process of this user that carries this process's own mark: what its agents
    started and left running outside their process group (a server started in the background
    in a session of its own), which ending each agent's group does not reach. Called as the
    run ends; nothing is read when this process never handed its mark out."""
    if os.getpid() not in _HANDED_OUT:
        return []
    mine = owner_mark()
    return _stop_marked(lambda mark: mark == mine, spared={os.getpid()})


def _stop_marked(chosen: Callable[[str], bool], spared: set[int]) -> list[Orphan]:
    """Stop (SIGTERM, then SIGKILL after :data:`STOP_GRACE` seconds) every process of this
    user but ``spared`` whose mark is ``chosen``; the processes stopped."""
    import psutil

    found: list[tuple[psutil.Process, Orphan]] = []
    # Only the environment is read of every process; the owner and the command line only of
    # a process whose mark is chosen (almost never one): a sweep reads one file per process
    # of the host instead of four.
    for process in psutil.process_iter():
        if process.pid in spared:
            continue
        try:
            mark = process.environ().get(OWNER_VARIABLE)
        except psutil.Error:
            continue
        if not mark or not chosen(mark):
            continue
        try:
            if hasattr(process, "uids") and process.uids().real != os.getuid():
                continue
            command = " ".join(process.cmdline()) or process.name()
        except psutil.Error:
            continue
        found.append((process, Orphan(process.pid, command[:80])))
    for process, _orphan in found:
        with suppress(psutil.Error):
            process.terminate()
    _gone, alive = psutil.wait_procs([process for process, _ in found], timeout=STOP_GRACE)
    for process in alive:
        with suppress(psutil.Error):
            process.kill()
    return [orphan for _process, orphan in found]


def with_parent_death_signal(argv: list[str]) -> list[str]:
    """``argv`` started through a launcher that asks the kernel to SIGKILL it when its parent
    dies, then becomes ``argv`` (same process, so a process group and its id stay the CLI's);
    ``argv`` itself where there is no such signal (not Linux).

    Linux sends the signal when the *thread* that started the process ends, not the process:
    the caller must wait for it in that thread, as a CLI call does. A launcher rather than a
    ``preexec_fn``: a scenario thread starts CLIs while other threads run, where Python code
    between fork and exec may deadlock.
    """
    if not sys.platform.startswith("linux"):
        return argv
    return [sys.executable, "-I", "-c", _LAUNCHER, str(os.getpid()), *argv]


def parent_death_preexec(
    death_signal: int = signal.SIGKILL, *, parent: int | None = None
) -> Callable[[], None] | None:
    """A ``preexec_fn`` that sets the parent-death signal (see :func:`with_parent_death_signal`),
    for a process started from a thread no other thread runs beside (the main thread of
    ``localmodel``'s commands), or None where there is none (not Linux, no ``prctl``)."""
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
        prctl(1, death_signal, 0, 0, 0)  # PR_SET_PDEATHSIG; best effort: a filtered prctl fails
        if os.getppid() != expected_parent:
            os.kill(os.getpid(), death_signal)

    return set_parent_death_signal
