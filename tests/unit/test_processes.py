"""Which processes the sweep of runs that are over stops, and which it leaves alone: real
processes, started detached (their parent exits at once, so they are no one's descendants)
with the marks the test gives them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

from pytest_openkata.infra.processes import (
    OWNER_VARIABLE,
    host_tag,
    owner_mark,
    stop_strays,
    sweep_orphans,
)

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="process starts are read from /proc on Linux"
)


def _detached(mark: str) -> psutil.Process:
    """A ``sleep`` whose parent has exited, carrying ``mark``."""
    started = subprocess.run(
        ["sh", "-c", "sleep 600 >/dev/null 2>&1 & echo $!"],
        env={**os.environ, OWNER_VARIABLE: mark},
        capture_output=True,
        text=True,
        check=True,
    )
    return psutil.Process(int(started.stdout))


def _ended() -> str:
    """The mark of a run on this host that has ended: a process that has exited."""
    probe = subprocess.Popen(["true"])
    probe.wait()
    return f"{host_tag()}:{probe.pid}:1"


@pytest.fixture
def made() -> Iterator[list[psutil.Process]]:
    processes: list[psutil.Process] = []
    yield processes
    for process in processes:
        if process.is_running():
            process.kill()


def _alive(process: psutil.Process) -> bool:
    return process.is_running() and process.status() != psutil.STATUS_ZOMBIE


def test_a_process_of_a_run_that_is_over_is_stopped_and_named(
    made: list[psutil.Process],
) -> None:
    orphan = _detached(_ended())
    made.append(orphan)

    stopped = sweep_orphans()

    assert orphan.pid in [found.pid for found in stopped]
    assert [str(f) for f in stopped if f.pid == orphan.pid] == [f"pid {orphan.pid} (sleep 600)"]
    assert not _alive(orphan)


def test_processes_of_a_live_run_of_another_host_or_of_an_unreadable_mark_stay(
    made: list[psutil.Process],
) -> None:
    live = _detached(owner_mark())  # this process's run is going
    other_host = _detached(f"00000000:{_ended().split(':')[1]}:1")
    unreadable = _detached("not a mark")
    made.extend([live, other_host, unreadable])

    stopped = {found.pid for found in sweep_orphans()}

    assert not stopped & {live.pid, other_host.pid, unreadable.pid}
    assert all(_alive(process) for process in (live, other_host, unreadable))


def test_the_processes_that_carry_the_sweeping_runs_own_inherited_mark_stay(
    made: list[psutil.Process], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run started by an agent of a run that is over inherited that run's mark: so did its
    own xdist workers, which it must not stop."""
    over = _ended()
    sibling = _detached(over)
    made.append(sibling)
    monkeypatch.setenv(OWNER_VARIABLE, over)

    stopped = {found.pid for found in sweep_orphans()}

    assert sibling.pid not in stopped
    assert _alive(sibling)


def test_a_run_stops_what_carries_its_own_mark_and_nothing_of_other_runs_as_it_ends(
    made: list[psutil.Process],
) -> None:
    other_run = subprocess.Popen(  # a run still going: a process that handed its mark out
        [
            sys.executable,
            "-c",
            "import sys; from pytest_openkata.infra.processes import owner_mark; "
            "print(owner_mark(), flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert other_run.stdout is not None
    assert other_run.stdin is not None
    try:
        own = _detached(owner_mark())  # left by this process's agents, outside their group
        going = _detached(other_run.stdout.readline().strip())
        over = _detached(_ended())  # the next run's sweep stops it, not this run's end
        made.extend([own, going, over])

        stopped = stop_strays()

        # Only its own: not the live run's, nor the one of a run that is over (which any run's
        # start may sweep meanwhile, so its being alive afterwards proves nothing here).
        assert [str(found) for found in stopped] == [f"pid {own.pid} (sleep 600)"]
        assert not _alive(own)
        assert _alive(going)
    finally:
        other_run.stdin.close()
        other_run.wait(60)


def test_a_process_started_with_the_parent_death_signal_ends_with_its_parent() -> None:
    """The launcher becomes the command (same process id) after asking for the signal."""
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys; "
            "from pytest_openkata.infra.processes import with_parent_death_signal; "
            "child = subprocess.Popen(with_parent_death_signal(['sleep', '600'])); "
            "print(child.pid, flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None
    child = psutil.Process(int(parent.stdout.readline()))
    try:
        deadline = time.monotonic() + 60
        while child.cmdline() != ["sleep", "600"]:  # the launcher, until it becomes sleep
            assert time.monotonic() < deadline, child.cmdline()
            time.sleep(0.01)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 60
        while _alive(child):  # killed by the kernel; a zombie until its new parent reaps it
            assert time.monotonic() < deadline, "the child outlived its parent"
            time.sleep(0.01)
    finally:
        if child.is_running():
            child.kill()
