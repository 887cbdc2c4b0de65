"""A local-model command that finds a lock held by another run waits for it politely: it says
what it waits for and which process holds it, says every so often that it still waits, gives
up at ``OPENKATA_LOCAL_MODEL_WAIT`` with one line, and ends cleanly on a stop signal. What can
be checked before the long steps is (the port, the limit itself).

Real processes (``python -m pytest_openkata.localmodel``), each lock held by a second real
process, real signals; each test has a cache folder of its own, and limits are tiny.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pytest_openkata.local.model import (
    LLAMA_CPP_PYTHON_VERSION,
    WEIGHTS_FILE,
    WEIGHTS_MODULE,
    LocalModelError,
)
from pytest_openkata.local.sandbox import LocalEngine
from pytest_openkata.local.steps import held_by_another

ENDED = 120.0  # a command that stops at a check or a tiny limit has ended (a bound only)
SERVER = f"llama-server-{LLAMA_CPP_PYTHON_VERSION}"
LIMIT = "OPENKATA_LOCAL_MODEL_WAIT"
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="a private engine needs root")

# Holds the lock of argv[1] as another run does, until its stdin closes.
HOLD = """
import fcntl, sys
lock = open(sys.argv[1], "a")
fcntl.flock(lock, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


class Holder:
    """Another process, holding a lock file's lock until :meth:`release`."""

    def __init__(self, lock_file: Path) -> None:
        lock_file.parent.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLD, str(lock_file)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        assert self.process.stdout.readline() == "held\n"

    @property
    def pid(self) -> int:
        return self.process.pid

    def release(self) -> None:
        assert self.process.stdin is not None
        if not self.process.stdin.closed:
            self.process.stdin.close()
        self.process.wait(timeout=30)


@contextlib.contextmanager
def _held(lock_file: Path) -> Iterator[Holder]:
    holder = Holder(lock_file)
    try:
        yield holder
    finally:
        holder.release()


def _environment(cache: Path, **more: str) -> dict[str, str]:
    return {
        **{name: value for name, value in os.environ.items() if name != LIMIT},  # the default
        "OPENKATA_LOCAL_MODEL_CACHE": str(cache),
        # A build that starts all the same fails at its download, instead of compiling for long.
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(cache.parent / "no-packages"),
        **more,
    }


def _stop_signals_at_their_defaults() -> None:
    """As at a terminal, whatever this test run's own start did (a background job ignores
    SIGINT, nohup SIGHUP)."""
    for signum in SIGNALS:
        signal.signal(signum, signal.SIG_DFL)


def _start(cache: Path, out: Path, *args: str, **env: str) -> subprocess.Popen[str]:
    with out.open("w") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "pytest_openkata.localmodel", *args],
            env=_environment(cache, **env),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            preexec_fn=_stop_signals_at_their_defaults,  # noqa: PLW1509 (tests' main thread)
        )


def _command(cache: Path, *args: str, **env: str) -> tuple[int, str]:
    out = cache.parent / "output"
    process = _start(cache, out, *args, **env)
    try:
        return process.wait(timeout=ENDED), out.read_text()
    finally:
        _end(process)


def _end(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def _eventually(condition: Callable[[], bool], what: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + ENDED
    while not condition():
        if process.poll() is not None:
            pytest.fail(f"exited with {process.returncode} before {what}", pytrace=False)
        if time.monotonic() > deadline:
            pytest.fail(f"not {what} within {ENDED:g} s", pytrace=False)
        time.sleep(0.05)


def _tree(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


def _waiting(pid: int, doing: str, limit: str, until: str = "finish") -> str:
    return (
        f"another run (pid {pid}) is {doing}: waiting for it to {until} (at most {limit} s; "
        f"{LIMIT} sets the limit)\n"
    )


def _gave_up(pid: int, doing: str, limit: str, hint: str = "") -> str:
    return (
        f"error: another run (pid {pid}) is still {doing} after {limit} s of waiting; "
        f"set {LIMIT} to wait longer{hint}\n"
    )


# --- waits, and their limit ---------------------------------------------------------------------

BUILDING = f"building llama-server {LLAMA_CPP_PYTHON_VERSION}"
ENGINE_HINT = ", or set DOCKER_HOST to an engine"


def test_a_build_waits_for_another_runs_build_of_llama_server_until_its_limit(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    with _held(cache / SERVER / "build.lock") as other:
        status, said = _command(cache, "build", **{LIMIT: "0.5"})

    assert status == 1
    assert said == _waiting(other.pid, BUILDING, "0.5") + _gave_up(other.pid, BUILDING, "0.5")
    assert _tree(cache) == [SERVER, f"{SERVER}/build.lock"]  # nothing was built


@needs_root
def test_a_run_waits_for_another_runs_private_engine_until_its_limit(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    engine = f"using the private Docker engine in {cache / 'docker'}"
    # The first run has the engine's folder and is still compiling llama-server.
    with _held(cache / "docker" / "lock") as other, _held(cache / SERVER / "build.lock"):
        status, said = _command(
            cache, "run", "--", "true", OPENKATA_LOCAL_ENGINE="private", **{LIMIT: "0.5"}
        )

    assert status == 1
    assert said == _waiting(other.pid, engine, "0.5", until="end") + _gave_up(
        other.pid, engine, "0.5", ENGINE_HINT
    )  # no traceback; it did not go on to wait for the first run's build
    assert _tree(cache) == ["docker", "docker/lock", SERVER, f"{SERVER}/build.lock"]


@needs_root
def test_a_limit_of_0_does_not_wait(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    engine = f"using the private Docker engine in {cache / 'docker'}"
    with _held(cache / "docker" / "lock") as other:
        status, said = _command(
            cache, "build", "--sandbox", OPENKATA_LOCAL_ENGINE="private", **{LIMIT: "0"}
        )

    assert status == 1
    assert said == (
        f"error: another run (pid {other.pid}) is {engine}, and {LIMIT}=0 says not to wait"
        f"{ENGINE_HINT}\n"
    )


@needs_root
def test_a_reservation_that_waited_for_the_engine_takes_it_once_the_other_run_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("OPENKATA_LOCAL_MODEL_CACHE", str(cache))
    monkeypatch.setenv("OPENKATA_LOCAL_ENGINE", "private")
    monkeypatch.delenv(LIMIT, raising=False)
    said: list[str] = []
    with _held(cache / "docker" / "lock") as other:

        def log(line: str) -> None:
            said.append(line)
            other.release()  # the other run ends as soon as this one says it waits

        engine = LocalEngine(log=log).reserve()
    try:
        assert engine.data_folder == cache / "docker" / "data"
        assert said == [
            _waiting(other.pid, f"using the private Docker engine in {cache / 'docker'}", "3600",
                     until="end").rstrip("\n")
        ]  # fmt: skip
        assert held_by_another(cache / "docker" / "lock")  # by this reservation now
    finally:
        engine.stop()


def test_a_malformed_limit_is_reported_before_anything_is_built(tmp_path: Path) -> None:
    cache = tmp_path / "cache"

    status, said = _command(cache, "build", **{LIMIT: "soon"})

    assert status == 1
    assert said == f"error: {LIMIT}=soon: expected a number of seconds (0 or more)\n"
    assert not cache.exists()


# The waiter of this test notes every 0.1 s that it still waits.
WAIT_AND_NOTE = """
import sys
from pytest_openkata.local.steps import take_lock
with open(sys.argv[1], "a") as lock:
    take_lock(lock, "building something", print, every=0.1)
    print("taken")
"""


def test_a_wait_says_every_so_often_that_it_still_waits_then_takes_the_lock(
    tmp_path: Path,
) -> None:
    lock_file, out = tmp_path / "build.lock", tmp_path / "output"
    with _held(lock_file) as other:
        with out.open("w") as output:
            waiter = subprocess.Popen(
                [sys.executable, "-c", WAIT_AND_NOTE, str(lock_file)],
                env=_environment(tmp_path / "cache"),
                stdout=output,
                stderr=subprocess.STDOUT,
                text=True,
            )
        try:
            _eventually(lambda: "still waiting" in out.read_text(), "a note", waiter)
            other.release()
            status = waiter.wait(timeout=ENDED)
        finally:
            _end(waiter)

    lines = out.read_text().splitlines()
    assert status == 0, lines
    assert lines[0] == _waiting(other.pid, "building something", "3600").rstrip("\n")
    assert lines[-1] == "taken"
    notes = lines[1:-1]
    assert notes
    for note in notes:
        assert note.startswith("still waiting (")
        assert note.endswith(
            f" s of at most 3600 s): another run (pid {other.pid}) is building something"
        )


# --- stop signals while waiting -----------------------------------------------------------------


def _stand_in_weights(folder: Path) -> Path:
    """A package where the weights' package would be: the commands locate it, never load it."""
    package = folder / WEIGHTS_MODULE
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / WEIGHTS_FILE).write_bytes(b"stand-in weights")
    return folder


def _wait_then_signal(
    cache: Path, signum: int, waiting: str, *args: str, **env: str
) -> tuple[int, str]:
    out = cache.parent / "output"
    process = _start(cache, out, *args, **env)
    try:
        _eventually(lambda: waiting in out.read_text(), "waiting", process)
        process.send_signal(signum)
        return process.wait(timeout=ENDED), out.read_text()
    finally:
        _end(process)


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda signum: signal.Signals(signum).name)
def test_a_stop_signal_while_waiting_for_a_build_ends_the_command_cleanly(
    tmp_path: Path, signum: int
) -> None:
    cache = tmp_path / "cache"
    with _held(cache / SERVER / "build.lock") as other:
        status, said = _wait_then_signal(cache, signum, "waiting for it", "build")

    assert status == 128 + signum
    assert said == _waiting(other.pid, BUILDING, "3600")  # no traceback
    assert _tree(cache) == [SERVER, f"{SERVER}/build.lock"]


@needs_root
@pytest.mark.parametrize("signum", SIGNALS, ids=lambda signum: signal.Signals(signum).name)
def test_a_stop_signal_while_waiting_for_the_engine_ends_the_command_cleanly(
    tmp_path: Path, signum: int
) -> None:
    cache = tmp_path / "cache"
    engine = f"using the private Docker engine in {cache / 'docker'}"
    with _held(cache / "docker" / "lock") as other:
        status, said = _wait_then_signal(
            cache, signum, "waiting for it", "run", "--", "true", OPENKATA_LOCAL_ENGINE="private"
        )

    assert status == 128 + signum
    assert said == _waiting(other.pid, engine, "3600", until="end")
    assert _tree(cache) == ["docker", "docker/lock"]


@needs_root
@pytest.mark.skipif(shutil.which("dockerd") is None, reason="needs dockerd")
@pytest.mark.parametrize("signum", SIGNALS, ids=lambda signum: signal.Signals(signum).name)
@pytest.mark.parametrize(
    "command", [("build", "--sandbox"), ("run", "--", "true")], ids=["build", "run"]
)
def test_a_stop_signal_while_waiting_for_the_sandbox_image_ends_the_command_cleanly(
    tmp_path: Path, signum: int, command: tuple[str, ...]
) -> None:
    cache, temporary = tmp_path / "cache", tmp_path / "tmp"
    temporary.mkdir()
    binary = cache / SERVER / "llama-server"
    binary.parent.mkdir(parents=True)
    binary.write_text("cached")
    doing = "building the sandbox image's root file system"
    with _held(cache / "sandbox" / "build.lock") as other:
        status, said = _wait_then_signal(
            cache,
            signum,
            "waiting for it",
            *command,
            OPENKATA_LOCAL_ENGINE="private",
            PYTHONPATH=str(_stand_in_weights(tmp_path / "weights")),
            TMPDIR=str(temporary),
        )

    assert status == 128 + signum
    assert said == f"llama-server {LLAMA_CPP_PYTHON_VERSION}: cached at {binary}\n" + _waiting(
        other.pid, doing, "3600"
    )  # the engine was not started to wait, and nothing was left behind
    assert _tree(temporary) == []
    assert _tree(cache) == [
        "docker",
        "docker/lock",
        SERVER,
        f"{SERVER}/llama-server",
        "sandbox",
        "sandbox/build.lock",
    ]


# --- the port -----------------------------------------------------------------------------------


def test_serve_on_a_port_that_is_taken_stops_before_building_anything(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        status, said = _command(cache, "serve", "--port", str(port))

    assert status == 1
    assert said == (
        f"error: llama-server could not listen on port {port} of 127.0.0.1: Address already in "
        "use; choose another --port, or leave it out for a free one\n"
    )
    assert not cache.exists()


def test_serve_on_what_is_not_a_port_is_a_usage_error(tmp_path: Path) -> None:
    status, said = _command(tmp_path / "cache", "serve", "--port", "70000")

    assert status == 2
    assert said.splitlines()[-1].endswith("argument --port: 70000 is not a port (1 to 65535)")


@needs_root
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare")
def test_a_run_without_loopback_stops_before_building_anything(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    # A network namespace of its own, whose loopback is down.
    command = [
        "unshare", "--net", sys.executable, "-m", "pytest_openkata.localmodel",
        "run", "--no-sandbox", "--", "true",
    ]  # fmt: skip
    ran = subprocess.run(
        command,
        env=_environment(cache),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=ENDED,
        check=False,
    )
    if ran.returncode != 1 and "unshare:" in ran.stderr:
        pytest.skip(f"cannot make a network namespace: {ran.stderr.strip()}")

    assert ran.returncode == 1
    assert ran.stderr == (
        "error: llama-server could not listen on 127.0.0.1: Network is unreachable\n"
    )
    assert not cache.exists()


@needs_root
def test_a_temporary_folder_too_deep_for_the_engines_sockets_is_refused_before_dockerd_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENKATA_LOCAL_MODEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENKATA_LOCAL_ENGINE", "private")
    deep = tmp_path / ("t" * 60)
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    engine = LocalEngine(log=lambda line: None)

    with pytest.raises(LocalModelError, match=r"set TMPDIR to a shorter folder") as refused:
        engine.start()

    assert f"sockets would be too deep in {deep}" in str(refused.value)
    assert list(deep.iterdir()) == []  # its run folder removed: nothing was started in it
