"""``serve`` and ``run`` leave nothing behind: not on SIGINT, SIGTERM or SIGHUP, not when killed.

Real processes against the real llama-server: each test starts ``python -m
pytest_openkata.localmodel`` in its own session, waits until the server answers, signals the
command, and checks that the command ends with the conventional status, that llama-server,
CMD and what CMD started are gone, and that the port is free. Every wait is bounded, and the
fixture kills whatever a failed test left (the command's group and every process it saw).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pytest_openkata.local.model import LLAMA_CPP_PYTHON_VERSION
from pytest_openkata.local.steps import cache_dir

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc are Linux's"
    ),
]

STARTED = 180.0  # the command finds the cached server and weights, llama-server loads them
ENDED = 60.0  # a stopped command ends: CMD's 10 s grace and the server's 10 s fit in it
GONE = 30.0  # a process the kernel killed is gone (reaped by init at its own pace)
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
SERVING = re.compile(r"serving smollm2 at http://127\.0\.0\.1:(\d+)/v1 \(Ctrl-C stops it\)")
LOCAL_MODEL = re.compile(r"local model smollm2 at http://127\.0\.0\.1:(\d+)/v1")

# CMD for `run`: writes "PID [GRANDCHILD_PID] BASE_URL" to argv[1] once started, then sleeps.
CHILD = """
import os, signal, subprocess, sys, time
from pathlib import Path

if "--ignore-sigterm" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # inherited by the grandchild too
pids = [os.getpid()]
if "--grandchild" in sys.argv:
    pids.append(subprocess.Popen(["sleep", "600"]).pid)
out = Path(sys.argv[1])
staged = out.with_suffix(".partial")
staged.write_text(" ".join(map(str, pids)) + " " + os.environ["OPENKATA_EVAL_HTTP_BASE_URL"])
staged.replace(out)
time.sleep(600)
"""


def _signal_name(signum: int) -> str:
    return signal.Signals(signum).name


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), None when gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()


@dataclass(frozen=True)
class Proc:
    """A process, told apart from a later one with the same pid by its start time."""

    pid: int
    started: str

    @classmethod
    def of(cls, pid: int) -> Proc:
        found = cls.running(pid)
        assert found is not None, f"process {pid} is not running"
        return found

    @classmethod
    def running(cls, pid: int) -> Proc | None:
        stat = _stat(pid)
        return None if stat is None else cls(pid, stat[19])

    def alive(self) -> bool:
        stat = _stat(self.pid)
        return stat is not None and stat[19] == self.started and stat[0] != "Z"

    def gone(self) -> bool:
        return not self.alive()

    def kill(self) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


def _children(pid: int) -> list[int]:
    found = []
    for path in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(path.read_text().rpartition(")")[2].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid:
            found.append(int(path.parent.name))
    return found


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        children = _children(todo.pop())
        found += children
        todo += children
    return found


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _eventually(condition: Callable[[], bool], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not {what} within {within:g} s", pytrace=False)
        time.sleep(0.1)


def _port_free(port: int) -> bool:
    """Whether a new server could listen on the port (llama-server's TIME_WAIT connections
    do not count: a server sets SO_REUSEADDR)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen()
        except OSError:
            return False
    return True


def _health(port: int) -> int:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://127.0.0.1:{port}/health", timeout=10) as response:
        return int(response.status)


@dataclass
class Command:
    """A started ``python -m pytest_openkata.localmodel ...`` and what it was seen to start."""

    process: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path
    seen: list[Proc] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        return (
            f"stdout:\n{self.stdout.read_text(errors='replace')}\n"
            f"stderr:\n{self.stderr.read_text(errors='replace')}"
        )

    def _wait(self, what: str, ready: Callable[[], object]) -> object:
        deadline = time.monotonic() + STARTED
        while time.monotonic() < deadline:
            found = ready()
            if found:
                return found
            if self.process.poll() is not None:
                pytest.fail(
                    f"exited with {self.process.returncode} before {what}:\n{self.output()}",
                    pytrace=False,
                )
            time.sleep(0.1)
        pytest.fail(f"no {what} within {STARTED:g} s:\n{self.output()}", pytrace=False)

    def port(self, pattern: re.Pattern[str], stream: str = "stdout") -> int:
        """The port in the line the command prints once the server answers."""
        path = self.stdout if stream == "stdout" else self.stderr
        found = self._wait(pattern.pattern, lambda: pattern.search(path.read_text()))
        assert isinstance(found, re.Match)
        port = int(found.group(1))
        assert _health(port) == 200
        return port

    def llama_server(self) -> Proc:
        return self.child_named("llama-server")

    def child_named(self, name: str) -> Proc:
        def child() -> int | None:
            return next((p for p in _children(self.pid) if _name(p) == name), None)

        found = self._wait(f"{name} among its children", child)
        assert isinstance(found, int)
        return self._saw(found)

    def started_cmd(self, pids_file: Path) -> tuple[list[Proc], int]:
        """CMD's processes (CMD, and what it started) and the port it was pointed at."""
        self._wait(f"{pids_file.name} written by CMD", pids_file.exists)
        *pids, base_url = pids_file.read_text().split()
        procs = [self._saw(int(pid)) for pid in pids]
        found = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/v1", base_url)
        assert found is not None, base_url
        return procs, int(found.group(1))

    def _saw(self, pid: int) -> Proc:
        proc = Proc.of(pid)
        self.seen.append(proc)
        return proc

    def end(self) -> int:
        try:
            return self.process.wait(timeout=ENDED)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {ENDED:g} s later:\n{self.output()}", pytrace=False)

    def clean_up(self) -> None:
        if self.process.poll() is None:
            for pid in _descendants(self.pid):
                proc = Proc.running(pid)
                if proc is not None:
                    self.seen.append(proc)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        for proc in self.seen:
            proc.kill()


Launch = Callable[..., Command]


@pytest.fixture
def launch(local_model_files: tuple[Path, Path], tmp_path: Path) -> Iterator[Launch]:
    """Starts the command in its own session, stop signals at their defaults (whatever this
    test run's own are: a background job ignores SIGINT), SIGHUP ignored when asked."""
    commands: list[Command] = []

    def start(
        *args: str, ignore_sighup: bool = False, env: dict[str, str] | None = None
    ) -> Command:
        def reset_signals() -> None:
            for signum in SIGNALS:
                signal.signal(signum, signal.SIG_DFL)
            if ignore_sighup:
                signal.signal(signal.SIGHUP, signal.SIG_IGN)

        number = len(commands)
        stdout, stderr = tmp_path / f"stdout-{number}", tmp_path / f"stderr-{number}"
        with stdout.open("wb") as out, stderr.open("wb") as err:
            process = subprocess.Popen(
                [sys.executable, "-m", "pytest_openkata.localmodel", *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=tmp_path,
                env=env,
                start_new_session=True,
                preexec_fn=reset_signals,  # noqa: PLW1509 (tests run in the main thread)
            )
        command = Command(process, stdout, stderr)
        commands.append(command)
        return command

    try:
        yield start
    finally:
        for command in commands:
            command.clean_up()


@pytest.fixture
def child_script(tmp_path: Path) -> Path:
    path = tmp_path / "child.py"
    path.write_text(CHILD)
    return path


def _assert_all_gone(procs: list[tuple[str, Proc]], port: int) -> None:
    for what, proc in procs:
        _eventually(proc.gone, GONE, f"{what} ({proc.pid}) gone")
    _eventually(lambda: _port_free(port), GONE, f"port {port} free")


@pytest.mark.parametrize("signum", SIGNALS, ids=_signal_name)
def test_serve_stops_llama_server_and_frees_the_port_on(launch: Launch, signum: int) -> None:
    serve = launch("serve")
    port = serve.port(SERVING)
    server = serve.llama_server()

    os.kill(serve.pid, signum)

    status = serve.end()
    _assert_all_gone([("llama-server", server)], port)
    assert status == 128 + signum, serve.output()


@pytest.mark.parametrize("signum", SIGNALS, ids=_signal_name)
def test_run_stops_the_command_its_group_and_llama_server_on(
    launch: Launch, child_script: Path, tmp_path: Path, signum: int
) -> None:
    pids_file = tmp_path / "pids"
    run = launch(
        "run",
        "--no-sandbox",
        "--",
        sys.executable,
        str(child_script),
        str(pids_file),
        "--grandchild",
    )
    (child, grandchild), port = run.started_cmd(pids_file)
    assert run.port(LOCAL_MODEL, "stderr") == port
    server = run.llama_server()

    os.kill(run.pid, signum)

    status = run.end()
    _assert_all_gone(
        [("CMD", child), ("the process CMD started", grandchild), ("llama-server", server)], port
    )
    assert status == 128 + signum, run.output()


def test_serve_killed_leaves_no_llama_server_behind(launch: Launch) -> None:
    serve = launch("serve")
    port = serve.port(SERVING)
    server = serve.llama_server()

    os.kill(serve.pid, signal.SIGKILL)  # no handler runs: the parent-death signal does it

    status = serve.end()
    _assert_all_gone([("llama-server", server)], port)
    assert status == -signal.SIGKILL, serve.output()


def test_run_killed_leaves_neither_the_command_nor_llama_server_behind(
    launch: Launch, child_script: Path, tmp_path: Path
) -> None:
    pids_file = tmp_path / "pids"
    run = launch("run", "--no-sandbox", "--", sys.executable, str(child_script), str(pids_file))
    (child,), port = run.started_cmd(pids_file)
    server = run.llama_server()

    os.kill(run.pid, signal.SIGKILL)

    status = run.end()
    _assert_all_gone([("CMD", child), ("llama-server", server)], port)
    assert status == -signal.SIGKILL, run.output()


def test_run_kills_a_command_group_that_ignores_the_signal_after_the_grace_period(
    launch: Launch, child_script: Path, tmp_path: Path
) -> None:
    pids_file = tmp_path / "pids"
    run = launch(
        "run", "--no-sandbox", "--", sys.executable, str(child_script), str(pids_file),
        "--grandchild", "--ignore-sigterm",
    )  # fmt: skip
    (child, grandchild), port = run.started_cmd(pids_file)
    server = run.llama_server()

    os.kill(run.pid, signal.SIGTERM)

    status = run.end()
    _assert_all_gone(
        [("CMD", child), ("the process CMD started", grandchild), ("llama-server", server)], port
    )
    assert status == 128 + signal.SIGTERM, run.output()


def test_run_passes_the_command_status_on_and_stops_what_it_left_running(
    launch: Launch, tmp_path: Path
) -> None:
    left, go = tmp_path / "left", tmp_path / "go"
    script = (
        f'sleep 600 & echo "$! $OPENKATA_EVAL_HTTP_BASE_URL" > {left}.partial; '
        f"mv {left}.partial {left}; "
        f"while [ ! -e {go} ]; do sleep 0.1; done; exit 3"
    )
    run = launch("run", "--no-sandbox", "--", "sh", "-c", script)
    (leftover,), port = run.started_cmd(left)
    server = run.llama_server()

    go.touch()  # CMD exits with 3, its background sleep still running

    status = run.end()
    _assert_all_gone([("the sleep CMD left", leftover), ("llama-server", server)], port)
    assert status == 3, run.output()


def test_a_sighup_ignored_at_start_stays_ignored(launch: Launch) -> None:
    serve = launch("serve", ignore_sighup=True)  # as under nohup
    port = serve.port(SERVING)
    server = serve.llama_server()

    os.kill(serve.pid, signal.SIGHUP)
    os.kill(serve.pid, signal.SIGTERM)

    status = serve.end()
    _assert_all_gone([("llama-server", server)], port)
    assert status == 128 + signal.SIGTERM, serve.output()  # not 129: SIGHUP did nothing


# --- run with a private Docker engine -------------------------------------------------------


@pytest.fixture
def private_engine_env(sandbox_archive: Path, tmp_path: Path) -> dict[str, str]:
    """The environment of a ``run`` that starts its own engine, in a cache of its own: the
    built llama-server and the sandbox's root file system are linked from the real cache, the
    engine's data folder is new (the image is imported into it from the archive)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    real = cache_dir()
    for name in (f"llama-server-{LLAMA_CPP_PYTHON_VERSION}", "sandbox"):
        (cache / name).symlink_to(real / name)
    env = {**os.environ, "OPENKATA_LOCAL_MODEL_CACHE": str(cache)}
    env["OPENKATA_LOCAL_ENGINE"] = "private"
    return env


ENGINE_LINE = re.compile(r"Docker engine at unix://(\S+)/docker\.sock \(private")


def _engine_socket(run: Command) -> Path:
    found = run._wait(
        "the private engine's line", lambda: ENGINE_LINE.search(run.stderr.read_text())
    )
    assert isinstance(found, re.Match)
    return Path(found.group(1))


@pytest.mark.parametrize("signum", [*SIGNALS, signal.SIGKILL], ids=_signal_name)
def test_run_stops_its_private_engine_the_command_and_llama_server_on(
    launch: Launch,
    child_script: Path,
    tmp_path: Path,
    private_engine_env: dict[str, str],
    signum: int,
) -> None:
    pids_file = tmp_path / "pids"
    run = launch(
        "run", "--", sys.executable, str(child_script), str(pids_file), env=private_engine_env
    )
    (child,), port = run.started_cmd(pids_file)
    engine = run.child_named("dockerd")
    runtime = _engine_socket(run)
    engine_tree = [Proc.of(pid) for pid in _descendants(engine.pid)]  # containerd among them
    assert engine_tree, "dockerd started no containerd"
    server = run.llama_server()

    os.kill(run.pid, signum)

    status = run.end()
    _assert_all_gone(
        [("CMD", child), ("llama-server", server), ("dockerd", engine)]
        + [("a process of the engine", proc) for proc in engine_tree],
        port,
    )
    if signum == signal.SIGKILL:  # the parent-death signal stopped the engine: no clean-up ran
        assert status == -signal.SIGKILL, run.output()
    else:
        assert status == 128 + signum, run.output()
        assert not runtime.exists()  # its socket and runtime folder are removed
