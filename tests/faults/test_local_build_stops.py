"""``localmodel build`` stops its steps with it: a stop signal ends the step's whole process
group and removes the work folder, and a build killed outright leaves a work folder that the
next build removes.

A real build, against a package index on loopback that accepts connections and never answers,
so that the first step (``pip download`` of llama-cpp-python) is under way, as a compiler
would be, when the command is stopped.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from pytest_openkata.infra.processes import OWNER_VARIABLE
from tests.support.marked import marked_by

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="sessions, PR_SET_PDEATHSIG and /proc"
)

WAIT = 120.0


class SilentIndex:
    """A TCP server on loopback that accepts every connection and never answers."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.connections = 0
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._socket.getsockname()[1]}/simple"

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            self._held.append(connection)
            self.connections += 1

    def close(self) -> None:
        self._socket.close()
        for connection in self._held:
            connection.close()


@pytest.fixture
def index() -> Iterator[SilentIndex]:
    server = SilentIndex()
    yield server
    server.close()


def _wait_until(ready: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not ready():
        if time.monotonic() > deadline:
            pytest.fail(f"never: {what}")
        time.sleep(0.05)


def _alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    return [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def _start_build(cache: Path, index: SilentIndex) -> subprocess.Popen[str]:
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is needed: a build checks for it before its first step")
    environment = {
        **os.environ,
        "OPENKATA_LOCAL_MODEL_CACHE": str(cache),
        "PIP_CONFIG_FILE": os.devnull,  # no mirror of the machine's: the silent index only
        "PIP_INDEX_URL": index.url,
        "PIP_DEFAULT_TIMEOUT": "600",
        "PIP_RETRIES": "0",
    }
    environment.pop(OWNER_VARIABLE, None)
    return subprocess.Popen(
        [sys.executable, "-m", "pytest_openkata.localmodel", "build"],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # a supervisor's signal reaches the command, not its steps
    )


def _build_under_way(
    cache: Path, index: SilentIndex, builds: list[subprocess.Popen[str]]
) -> tuple[subprocess.Popen[str], list[psutil.Process]]:
    """A build started, once its first step asked the index; the step's processes."""
    asked = index.connections
    build = _start_build(cache, index)
    builds.append(build)
    _wait_until(lambda: index.connections > asked, "pip asked the index")
    return build, marked_by(build.pid)


def _work_folders(cache: Path) -> list[Path]:
    return sorted(cache.glob(".openkata-*.tmp"))


@pytest.fixture
def builds() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for build in started:  # whatever a failed test left
        for process in marked_by(build.pid):
            process.kill()
        if build.poll() is None:
            os.killpg(build.pid, signal.SIGKILL)
            build.wait()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stop_signal_ends_the_step_under_way_and_removes_the_work_folder(
    tmp_path: Path, index: SilentIndex, builds: list[subprocess.Popen[str]], signum: int
) -> None:
    cache = tmp_path / "cache"
    build, step = _build_under_way(cache, index, builds)
    assert [p.name() for p in step] != []
    assert len(_work_folders(cache)) == 1

    os.kill(build.pid, signum)
    output, _ = build.communicate(timeout=WAIT)

    assert build.returncode == 128 + signum, output
    assert "Traceback" not in output
    _wait_until(lambda: _alive(step) == [], "the step's processes ended")
    assert _work_folders(cache) == []


def test_the_work_folder_of_a_build_killed_outright_is_removed_by_the_next(
    tmp_path: Path, index: SilentIndex, builds: list[subprocess.Popen[str]]
) -> None:
    cache = tmp_path / "cache"
    killed, step = _build_under_way(cache, index, builds)
    [left] = _work_folders(cache)

    os.kill(killed.pid, signal.SIGKILL)
    killed.wait(timeout=WAIT)
    # The kernel ends the step's first process with the build (its parent-death signal).
    _wait_until(lambda: _alive(step) == [], "the killed build's step ended")
    assert _work_folders(cache) == [left]

    again, _ = _build_under_way(cache, index, builds)
    assert [path.name for path in _work_folders(cache)] != [left.name]
    os.kill(again.pid, signal.SIGTERM)
    output, _ = again.communicate(timeout=WAIT)

    assert f"removed a temporary file left by a killed run: {left}" in output
    assert _work_folders(cache) == []
