"""The long steps of the local-model tooling: each is taken once however many runs want it,
the disk is checked for those still to take before the first starts, and a lock that another
run holds is waited for politely.

``python -m pytest_openkata.localmodel`` lists what it still has to build or install (what the
cache holds does not count) as :class:`Step`\\ s, each with the folder it writes to and about
how much it needs there; :func:`space_shortage` says when a disk does not have that much
free, so that a run that could not finish says so in seconds, not after a long compile. Two
runs wanting the same build at once take turns on its lock (:func:`build_lock`): the second
waits, and then finds the first's result in the cache.

A lock held by another run (a build's, the private Docker engine's folder) is waited for by
:func:`take_lock`: one line says what is waited for and which process holds it, a line every
30 s says that it still waits, and past ``OPENKATA_LOCAL_MODEL_WAIT`` seconds (an hour unless
set: about the longest a step of another run takes, each of its commands being limited to an
hour) the wait ends with :class:`LockWaitExpired`. A stop signal ends the wait with
:class:`StopWaiting`, which the commands turn into their usual exit status (128 + its number).
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO

from pytest_openkata.contracts.errors import OpenkataError
from pytest_openkata.infra.processes import (
    OWNER_VARIABLE,
    owner_mark,
    parent_death_preexec,
    stopped_line,
    sweep_orphans,
    with_parent_death_signal,
)
from pytest_openkata.infra.tempfiles import REMOVED, new_temp_folder, remove_stale, stale_entries

MB = 1024 * 1024
GB = 1024 * MB
# How long a command waits for a lock that another run holds, in seconds.
WAIT_VARIABLE = "OPENKATA_LOCAL_MODEL_WAIT"
DEFAULT_WAIT = 3600.0
STILL_WAITING_EVERY = 30.0
LOCK_POLL = 0.2


class LocalModelError(OpenkataError):
    """The local model could not be installed, built or started; the message says why."""


class LockWaitExpired(LocalModelError):
    """Another run still held a lock when the wait for it reached its limit."""


class StopWaiting(BaseException):
    """A stop signal (SIGINT, SIGTERM, SIGHUP) ended a wait for another run's lock."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@dataclass(frozen=True)
class Step:
    """A long step still to take: what it is, the folder it writes to, and about how many
    bytes it needs there at its largest (downloads, work files and result together)."""

    what: str
    folder: Path
    space: int


def _existing(folder: Path) -> Path:
    """``folder``, or its nearest ancestor that exists (a step creates its folder)."""
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            return candidate
    return folder


def _size(space: int) -> str:
    return f"{space / GB:.1f} GB" if space >= GB else f"{space // MB} MB"


def space_shortage(steps: Iterable[Step]) -> str | None:
    """What is short, when the steps writing to one disk need more than it has free (the
    steps on one disk add up); None when every disk has room."""
    by_disk: dict[int, list[Step]] = {}
    for step in steps:
        by_disk.setdefault(os.stat(_existing(step.folder)).st_dev, []).append(step)
    for group in by_disk.values():
        needed = sum(step.space for step in group)
        free = shutil.disk_usage(_existing(group[0].folder)).free
        if needed > free:
            folder = os.path.commonpath([step.folder for step in group])
            names = [step.what for step in group]
            what = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
            return (
                f"not enough free disk space in {folder} for {what}: about {_size(needed)} "
                f"needed, {_size(free)} free"
            )
    return None


def held_by_another(lock_file: Path) -> bool:
    """Whether another process holds the lock of ``lock_file`` (a build under way)."""
    try:
        lock = lock_file.open()  # (flock needs no write access)
    except FileNotFoundError:  # nobody has built there yet
        return False
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False  # closing the file releases the lock


def wait_limit() -> float:
    """How many seconds a command waits for another run's lock (``OPENKATA_LOCAL_MODEL_WAIT``;
    0 does not wait)."""
    text = os.environ.get(WAIT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_WAIT
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds >= 0):
        raise LocalModelError(f"{WAIT_VARIABLE}={text}: expected a number of seconds (0 or more)")
    return seconds


def lock_holder(lock: IO[str]) -> int | None:
    """The process that holds the flock of the open file ``lock``, as the kernel's list of
    locks (Linux's ``/proc/locks``) names it; None when it cannot be told."""
    stat = os.fstat(lock.fileno())
    file_id = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 4242 fe:00:1234 0 EOF"; a waiter's line has "->".
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == file_id:
            with contextlib.suppress(ValueError):
                return int(fields[4]) if int(fields[4]) > 0 else None
    return None


@contextlib.contextmanager
def _stop_signals_end_the_wait() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise :class:`StopWaiting` while a lock is waited for, where
    Python's defaults would handle them (a traceback, or an end with no clean-up); a signal
    ignored stays ignored, and a handler of the caller's (``run``'s) is left to handle it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        raise StopWaiting(signum)

    replaced = {}
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        default = signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL
        previous = signal.getsignal(signum)
        if previous is default:
            replaced[signum] = previous
            signal.signal(signum, stop)
    try:
        yield
    finally:
        for signum, previous in replaced.items():
            signal.signal(signum, previous)


def _try_lock(lock: IO[str]) -> bool:
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def take_lock(
    lock: IO[str],
    doing: str,
    log: Callable[[str], None],
    *,
    until: str = "finish",
    hint: str = "",
    every: float = STILL_WAITING_EVERY,
) -> None:
    """Takes the flock of the open file ``lock``: at once when no other process holds it,
    otherwise once the other lets it go. Waiting, it says so in one line, naming the holder
    ("another run (pid 4242) is {doing}: waiting for it to {until} …"), then in a line every
    ``every`` seconds; past :func:`wait_limit` it raises :class:`LockWaitExpired` (the message
    ends with ``hint``, another way out), and a stop signal raises :class:`StopWaiting`."""
    if _try_lock(lock):
        return
    limit = wait_limit()
    holder = lock_holder(lock)
    other = "another run" if holder is None else f"another run (pid {holder})"
    if limit == 0:
        raise LockWaitExpired(f"{other} is {doing}, and {WAIT_VARIABLE}=0 says not to wait{hint}")
    log(
        f"{other} is {doing}: waiting for it to {until} (at most {limit:g} s; "
        f"{WAIT_VARIABLE} sets the limit)"
    )
    start = time.monotonic()
    deadline, note = start + limit, start + every
    with _stop_signals_end_the_wait():
        while not _try_lock(lock):
            now = time.monotonic()
            if now >= deadline:
                raise LockWaitExpired(
                    f"{other} is still {doing} after {limit:g} s of waiting; set "
                    f"{WAIT_VARIABLE} to wait longer{hint}"
                )
            if now >= note:
                waited = f"{now - start:.0f} s of at most {limit:g} s"
                log(f"still waiting ({waited}): {other} is {doing}")
                note = now + every
            time.sleep(min(LOCK_POLL, deadline - now, max(note - now, 0.01)))


@contextlib.contextmanager
def build_lock(lock_file: Path, what: str, log: Callable[[str], None]) -> Iterator[None]:
    """Holds the lock of a build: at once when no other process holds it, otherwise once the
    other has finished (:func:`take_lock`). ``what`` names the build ("building llama-server
    0.3.36")."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with lock_file.open("a") as lock:
        take_lock(lock, what, log)
        yield


# --- shared by the model's and the sandbox's steps ---------------------------------------

# No command of a step may take longer (a build of llama-server takes minutes).
BUILD_TIMEOUT = 3600.0
# How long what is left of a step's process group has to end after SIGTERM, before SIGKILL.
STEP_STOP_GRACE = 10.0
STEP_POLL = 0.1  # how often a step's end is looked for (a step takes seconds to minutes)

Log = Callable[[str], None]


def log_to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cache_dir() -> Path:
    return Path(
        os.environ.get("OPENKATA_LOCAL_MODEL_CACHE", Path.home() / ".cache" / "pytest-openkata")
    )


def new_work_folder(
    parent: Path, log: Log, *, before_removing: Callable[[Path], None] | None = None
) -> Path:
    """A new work folder for a build in ``parent``, once what a build killed outright left is
    cleared: the processes of runs that are over stopped, and the work folders of builds
    whose process is gone removed (``before_removing`` is called on each first), each said in
    ``log``."""
    stopped = stopped_line(sweep_orphans(), "left by a run that is over")
    if stopped is not None:
        log(stopped)
    if before_removing is not None:
        for stale in stale_entries(parent):
            before_removing(stale)
    for path in remove_stale(parent):
        log(f"{REMOVED}: {path}")
    return new_temp_folder(parent)


def run_logged(
    command: Sequence[str],
    log_file: Path,
    cwd: Path | None = None,
    progress: Callable[[str], None] | None = None,
    *,
    marked: bool = True,
) -> None:
    """Runs a build step with its output in ``log_file``; each line also goes to ``progress``
    when given. A failure names the command and shows the end of the log.

    The step runs in a session of its own, and however it ends here (done, failed, past
    :data:`BUILD_TIMEOUT`, interrupted by Ctrl-C or a stop signal), what is left of its process
    group is ended before this returns or raises: a compiler that ``cmake`` or ``debootstrap``
    started does not outlive the build. Should this process be killed outright, the kernel
    ends the step's first process, and with ``marked`` the rest carry this process's mark
    (:data:`~pytest_openkata.infra.processes.OWNER_VARIABLE`) for the next run's sweep. A step
    that installs packages is not marked: the services a package starts are the system's."""
    with log_file.open("a") as log:
        log.write(f"$ {' '.join(command)}\n")
        log.flush()
        try:
            returncode = _run_step(command, log, cwd, progress, marked=marked)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise LocalModelError(f"{command[0]} failed: {exc} (log: {log_file})") from exc
    if returncode != 0:
        tail = "".join(log_file.read_text(errors="replace").splitlines(keepends=True)[-20:])
        raise LocalModelError(
            f"`{' '.join(command[:3])} …` exited with {returncode}; "
            f"last lines of {log_file}:\n{tail}"
        )


def _run_step(
    command: Sequence[str],
    log: IO[str],
    cwd: Path | None,
    progress: Callable[[str], None] | None,
    *,
    marked: bool,
) -> int | None:
    environment = {k: v for k, v in os.environ.items() if k != OWNER_VARIABLE}
    if marked:
        environment[OWNER_VARIABLE] = owner_mark()
    process = subprocess.Popen(
        with_parent_death_signal(list(command)),
        cwd=cwd,
        stdout=log if progress is None else subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
        env=environment,
    )
    output: _StepOutput | None = None
    try:
        if progress is not None:
            output = _StepOutput(process, log, progress)
        failed = None if output is None else output.failed
        _wait_without_reaping(process, BUILD_TIMEOUT, command, until=failed)
    finally:
        with _stop_signals_held():
            _end_group(process, command)
            if output is not None:
                output.close()
    if output is not None and output.error is not None:
        raise output.error
    return process.returncode


class _StepOutput:
    """A step's output copied to its log and to ``progress`` on a thread of its own, so that
    the step's deadline holds: a process of the group that keeps the output open after the
    step's first process ended cannot hold the build, and the pipe is always read, so that
    the step never blocks on it. A failure to write the log or to show progress is kept in
    :attr:`error` and ends the step (:attr:`failed`)."""

    def __init__(
        self, process: subprocess.Popen[str], log: IO[str], progress: Callable[[str], None]
    ) -> None:
        assert process.stdout is not None
        self.failed = threading.Event()
        self.error: BaseException | None = None
        self._stream = process.stdout
        self._thread = threading.Thread(target=self._copy, args=(log, progress), daemon=True)
        self._thread.start()

    def _copy(self, log: IO[str], progress: Callable[[str], None]) -> None:
        with contextlib.suppress(OSError, ValueError):  # the pipe closed under it
            for line in self._stream:
                if self.error is not None:
                    continue  # read on: what is left of the step must not block on the pipe
                try:
                    log.write(line)
                    progress(line)
                except BaseException as exc:  # raised in the step's own thread
                    self.error = exc
                    self.failed.set()

    def close(self) -> None:
        """Once the step's group has ended: its output ends, unless a process that left the
        group holds it (that reader is left behind, on a daemon thread)."""
        self._thread.join(STEP_STOP_GRACE)
        if not self._thread.is_alive():
            self._stream.close()


def _wait_without_reaping(
    process: subprocess.Popen[str],
    seconds: float,
    command: Sequence[str],
    *,
    until: threading.Event | None = None,
) -> None:
    """Waits until the step's first process ended (or ``until`` is set), leaving it unreaped
    on Linux, so that its process group's id is not given to another process before
    :func:`_end_group` signals it; raises :class:`subprocess.TimeoutExpired` after
    ``seconds``."""
    if not sys.platform.startswith("linux"):  # reaped, as subprocess does
        process.wait(timeout=seconds)
        return
    deadline = time.monotonic() + seconds
    flags = os.WEXITED | os.WNOWAIT | os.WNOHANG
    while until is None or not until.is_set():
        try:
            if os.waitid(os.P_PID, process.pid, flags) is not None:
                return
        except ChildProcessError:
            return  # reaped already (SIGCHLD ignored): subprocess gives it status 0
        if time.monotonic() > deadline:
            raise subprocess.TimeoutExpired(list(command), seconds)
        time.sleep(STEP_POLL)


@contextlib.contextmanager
def _stop_signals_held() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP held back from this thread for the block, and delivered
    after it: ending a step's group is not cut short halfway. (A process started meanwhile
    would inherit the held set: none is.)"""
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _end_group(process: subprocess.Popen[str], command: Sequence[str]) -> None:
    """Ends what is left of a step's process group (it leads its own session, so the group's
    id is its pid): SIGTERM, then SIGKILL once the step's first process has ended, at most
    :data:`STEP_STOP_GRACE` seconds later; then reaps the first process (one that cannot be
    killed is left)."""
    signal_group(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        _wait_without_reaping(process, STEP_STOP_GRACE, command)
    signal_group(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=STEP_STOP_GRACE)


def signal_group(pgid: int, signum: int) -> None:
    """Sends ``signum`` to process group ``pgid``; a group that is gone, or that this
    process may not signal, is passed over."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def main_thread_death_preexec(
    death_signal: int = signal.SIGKILL, parent: int | None = None
) -> Callable[[], None] | None:
    """:func:`~pytest_openkata.infra.processes.parent_death_preexec` for the children of
    ``serve`` and ``run``, from the main thread only: Linux sends the signal when the thread
    that forked the child ends, and these children outlive any other thread."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return parent_death_preexec(death_signal, parent=parent)
