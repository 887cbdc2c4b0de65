"""Failures of the local-model tooling are clear and quick, never a hang; no process is left."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import signal
import stat
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pytest_openkata.contracts.config import EvalSettings, HttpSettings, SandboxSettings
from pytest_openkata.core.sandboxed import sandbox_identity
from pytest_openkata.local import model as localmodel
from pytest_openkata.local import steps as localsteps
from pytest_openkata.local.model import (
    LocalModelError,
    LocalModelServer,
    build_server,
    main,
    server_binary,
)
from tests.support.marked import ends

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc are Linux's"
)


def _script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_a_server_that_exits_at_start_is_reported_with_its_output(tmp_path: Path) -> None:
    binary = _script(tmp_path, "llama-server", 'echo "error: model file is corrupt"; exit 3')

    with pytest.raises(LocalModelError) as info:
        LocalModelServer(binary, tmp_path / "weights.gguf").start()

    assert "llama-server exited with 3 while starting" in str(info.value)
    assert "model file is corrupt" in str(info.value)


def test_a_server_that_never_answers_gives_up_after_the_start_timeout(tmp_path: Path) -> None:
    binary = _script(tmp_path, "llama-server", "echo loading; exec sleep 600")
    server = LocalModelServer(binary, tmp_path / "weights.gguf", start_timeout=1)

    with pytest.raises(LocalModelError) as info:
        server.start()

    assert f"did not answer on {server.root_url} within 1 s" in str(info.value)
    assert "loading" in str(info.value)
    with pytest.raises(LocalModelError):
        _ = server.pid  # stopped: no process is left behind


def test_a_missing_binary_is_reported(tmp_path: Path) -> None:
    with pytest.raises(LocalModelError, match="cannot start"):
        LocalModelServer(tmp_path / "absent", tmp_path / "weights.gguf").start()


def test_a_failed_build_names_the_step_and_shows_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENKATA_LOCAL_MODEL_CACHE", str(tmp_path))

    with pytest.raises(LocalModelError) as info:
        build_server("0.0.0.999999", log=lambda message: None)

    message = str(info.value)
    assert "pip download" in message
    assert "llama-cpp-python==0.0.0.999999" in message
    assert not server_binary("0.0.0.999999").exists()
    # The build folder is removed; the build's lock is left for the next one.
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == [
        "llama-server-0.0.0.999999",
        "llama-server-0.0.0.999999/build.lock",
    ]


def test_a_cached_binary_is_reused_without_building(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENKATA_LOCAL_MODEL_CACHE", str(tmp_path))
    cached = server_binary("1.2.3")
    cached.parent.mkdir(parents=True)
    cached.write_text("binary")

    assert build_server("1.2.3", log=lambda message: None) == cached


def test_run_without_a_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["run"])
    assert info.value.code == 2
    assert "run needs a command" in capsys.readouterr().err


_SERVER = types.SimpleNamespace(
    base_url="http://127.0.0.1:8123/v1",
    model="smollm2",
    identity="smollm2 weights sha256:1 temperature 0 --dry-multiplier 0.8 it's",
)
_DEFAULTED = (
    "OPENKATA_EVAL_DIRECT_TIMEOUT",
    "OPENKATA_EVAL_JUDGE_REASON_MAX_CHARS",
    "OPENKATA_EVAL_MAX_IN_FLIGHT",
    "OPENKATA_EVAL_SANDBOX_TIMEOUT",
)


def test_run_points_the_command_at_the_server_with_a_patient_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in _DEFAULTED:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENKATA_EVAL_BACKEND", "kiro")

    environment = localmodel._environment(_SERVER)  # type: ignore[arg-type]

    assert environment["OPENKATA_EVAL_BACKEND"] == "http"
    assert environment["OPENKATA_EVAL_HTTP_BASE_URL"] == "http://127.0.0.1:8123/v1"
    assert environment["OPENKATA_EVAL_MODEL"] == "smollm2"
    assert environment["OPENKATA_EVAL_HTTP_ENDPOINT_ID"] == _SERVER.identity
    assert environment["OPENKATA_EVAL_DIRECT_TIMEOUT"] == "600"
    assert environment["OPENKATA_EVAL_JUDGE_REASON_MAX_CHARS"] == "160"
    # Never more requests at once than the server's slots.
    assert environment["OPENKATA_EVAL_MAX_IN_FLIGHT"] == "auto"
    assert "OPENKATA_EVAL_SANDBOX_TIMEOUT" not in environment  # no sandbox started
    monkeypatch.setenv("OPENKATA_EVAL_DIRECT_TIMEOUT", "30")
    assert localmodel._environment(_SERVER)["OPENKATA_EVAL_DIRECT_TIMEOUT"] == "30"  # type: ignore[arg-type]


def test_with_a_sandbox_run_adds_its_engine_and_a_patient_agent_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in _DEFAULTED:
        monkeypatch.delenv(name, raising=False)
    sandbox = {"DOCKER_HOST": "unix:///tmp/x.sock", "OPENKATA_EVAL_SANDBOX_IMAGE": "img:1"}

    settings = localmodel._settings(_SERVER, sandbox)  # type: ignore[arg-type]

    assert settings["DOCKER_HOST"] == "unix:///tmp/x.sock"
    assert settings["OPENKATA_EVAL_SANDBOX_IMAGE"] == "img:1"
    assert settings["OPENKATA_EVAL_SANDBOX_TIMEOUT"] == "1800"
    monkeypatch.setenv("OPENKATA_EVAL_SANDBOX_TIMEOUT", "60")
    # What the environment sets is kept, and so not listed as set by run.
    assert "OPENKATA_EVAL_SANDBOX_TIMEOUT" not in localmodel._settings(_SERVER, sandbox)  # type: ignore[arg-type]
    assert localmodel._environment(_SERVER, sandbox)["OPENKATA_EVAL_SANDBOX_TIMEOUT"] == "60"  # type: ignore[arg-type]


def test_run_prints_every_setting_it_makes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in _DEFAULTED:
        monkeypatch.delenv(name, raising=False)
    settings = localmodel._settings(_SERVER, {"DOCKER_HOST": "unix:///tmp/x.sock"})  # type: ignore[arg-type]

    localmodel._print_settings(settings, as_exports=False)

    printed = capsys.readouterr()
    assert printed.out == ""
    lines = printed.err.splitlines()
    assert lines[0] == "settings for the command (any the environment sets is kept):"
    assert lines[1:] == [f"  {name}={value}" for name, value in settings.items()]
    assert {line.split("=")[0].strip() for line in lines[1:]} >= {*_DEFAULTED, "DOCKER_HOST"}


def test_serve_prints_exports_that_a_shell_reads_back_exactly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in _DEFAULTED:
        monkeypatch.delenv(name, raising=False)
    settings = localmodel._settings(_SERVER)  # type: ignore[arg-type]

    localmodel._print_settings(settings, as_exports=True)

    exports = capsys.readouterr().out
    names = list(settings)
    shell = subprocess.run(
        ["sh", "-c", exports + "".join(f'printf "%s\\0" "${name}"\n' for name in names)],
        capture_output=True,
        check=True,
        env={"PATH": os.environ["PATH"]},
    )
    assert shell.stdout.split(b"\0")[:-1] == [settings[name].encode() for name in names]
    assert "OPENKATA_EVAL_SANDBOX_TIMEOUT" not in settings  # serve starts no sandbox


@pytest.mark.parametrize(
    ("cpus", "available", "slots"),
    [
        (1, 16 << 30, 1),
        (2, 16 << 30, 1),  # two slots on two CPUs answer no faster than one
        (3, 16 << 30, 1),
        (4, 16 << 30, 2),
        (64, 16 << 30, 4),
        (8, 1200 << 20, 1),  # each slot's context needs memory: half of it is left free
        (8, 100 << 20, 1),
    ],
)
def test_the_server_gets_slots_that_fit_the_machine(cpus: int, available: int, slots: int) -> None:
    assert localmodel.machine_slots(cpus, available) == slots


def test_slots_can_be_set_in_the_environment_and_a_bad_value_is_named() -> None:
    assert localmodel.slots_setting({}) is None
    assert localmodel.slots_setting({"OPENKATA_LOCAL_MODEL_SLOTS": " 6 "}) == 6
    for bad in ("0", "two", "-1", "٣"):
        with pytest.raises(LocalModelError, match="OPENKATA_LOCAL_MODEL_SLOTS="):
            localmodel.slots_setting({"OPENKATA_LOCAL_MODEL_SLOTS": bad})


def test_a_bad_slots_value_stops_run_before_any_long_step(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENKATA_LOCAL_MODEL_CACHE", str(tmp_path))
    monkeypatch.setenv("OPENKATA_LOCAL_MODEL_SLOTS", "many")

    assert main(["run", "--no-sandbox", "--", "true"]) == 1

    assert capsys.readouterr().err.strip() == (
        "error: OPENKATA_LOCAL_MODEL_SLOTS='many': must be a whole number from 1"
    )
    assert list(tmp_path.iterdir()) == []  # nothing built, nothing downloaded


def test_slots_on_the_command_line_must_be_a_whole_number(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["serve", "--slots", "0"])
    assert info.value.code == 2
    assert "'0' is not a whole number from 1" in capsys.readouterr().err


def test_the_server_gives_each_slot_a_context_of_its_own(tmp_path: Path) -> None:
    arguments = tmp_path / "arguments"
    binary = _script(tmp_path, "llama-server", f'printf "%s\\n" "$@" > {arguments}; exit 3')

    with pytest.raises(LocalModelError):
        LocalModelServer(binary, tmp_path / "w.gguf", slots=3, context=1000).start()

    told = arguments.read_text().splitlines()
    assert told[told.index("-np") + 1] == "3"
    assert told[told.index("-c") + 1] == "3000"
    assert "--no-kv-unified" in told
    # Answers are generated on as many CPUs as the load leaves; prompts read on all.
    cpus = os.cpu_count() or 1
    assert told[told.index("-t") + 1] in {str(cpus), str(max(1, cpus - 1))}
    assert told[told.index("-tb") + 1] == str(cpus)


@pytest.mark.parametrize(
    ("cpus", "busy", "threads"),
    [(2, 0.2, 2), (2, 0.5, 1), (2, 2.0, 1), (1, 1.0, 1), (8, 0.0, 8), (8, 2.0, 7)],
)
def test_a_busy_machine_leaves_one_cpu_to_the_rest(cpus: int, busy: float, threads: int) -> None:
    assert localmodel.generation_threads(cpus, busy) == threads


def test_processes_keeping_every_cpu_busy_leave_one_cpu_to_them() -> None:
    cpus = os.cpu_count() or 1
    spin = [sys.executable, "-c", "while True: pass"]
    hogs = [subprocess.Popen(spin) for _ in range(cpus)]
    try:
        time.sleep(0.5)  # until they run
        threads = localmodel.generation_threads()
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert threads == max(1, cpus - 1)


def test_the_server_is_known_by_what_answers_not_by_its_port(tmp_path: Path) -> None:
    binary = tmp_path / "llama-server-0.3.36" / "llama-server"
    binary.parent.mkdir()
    binary.write_bytes(b"")
    weights, other = tmp_path / "a.gguf", tmp_path / "b.gguf"
    weights.write_bytes(b"weights")
    other.write_bytes(b"other weights")

    first = LocalModelServer(binary, weights, port=8123)
    second = LocalModelServer(binary, weights, port=8124)

    assert first.identity == second.identity
    assert first.identity == (
        f"smollm2 weights sha256:{hashlib.sha256(b'weights').hexdigest()} "
        "llama-server llama-server-0.3.36 context 16384 n-predict 768 temperature 0 seed 0 "
        "--dry-multiplier 0.8"
    )
    assert LocalModelServer(binary, other, port=8123).identity != first.identity
    # Other sampling defaults give other answers: they are part of what answers.
    assert LocalModelServer(binary, weights, seed=7).identity != first.identity
    assert LocalModelServer(binary, weights, temperature=0.8).identity != first.identity


# --- no leaked processes ------------------------------------------------------------------


def _state(pid: int) -> str | None:
    """The process's state letter (``Z`` for a zombie), None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return None


def _eventually(condition: Callable[[], bool], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not {what} within {within:g} s", pytrace=False)
        time.sleep(0.05)


def _written_pid(path: Path, process: subprocess.Popen[bytes] | None = None) -> int:
    _eventually(
        lambda: path.exists() or (process is not None and process.poll() is not None),
        30,
        f"{path.name} written",
    )
    assert path.exists(), f"exited with {process and process.returncode} before writing it"
    return int(path.read_text())


@pytest.fixture
def kill_after() -> Iterator[list[int]]:
    """Pids to SIGKILL at the end of the test if still there (a failed test leaves none)."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if _state(pid) not in {None, "Z"}:
            os.kill(pid, signal.SIGKILL)


PARENT = """
import subprocess, sys, time
from pathlib import Path
from pytest_openkata.local.steps import main_thread_death_preexec

child = subprocess.Popen(["sleep", "600"], preexec_fn=main_thread_death_preexec())
Path(sys.argv[1] + ".partial").write_text(str(child.pid))
Path(sys.argv[1] + ".partial").replace(sys.argv[1])
time.sleep(600)
"""


@linux_only
def test_a_child_with_the_parent_death_signal_ends_when_its_parent_is_killed(
    tmp_path: Path, kill_after: list[int]
) -> None:
    pid_file = tmp_path / "child-pid"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(pid_file)], start_new_session=True)
    kill_after.append(parent.pid)
    child = _written_pid(pid_file, parent)
    kill_after.append(child)

    parent.kill()
    parent.wait(timeout=30)

    _eventually(lambda: _state(child) in {None, "Z"}, 30, "the child killed with its parent")


@linux_only
def test_a_child_whose_parent_died_before_the_signal_was_set_kills_itself(
    tmp_path: Path,
) -> None:
    ran = tmp_path / "ran"
    # Expecting another parent than this process: as if the parent had died and the child
    # had been handed to init between the fork and the prctl.
    preexec = localsteps.main_thread_death_preexec(parent=os.getppid())

    completed = subprocess.run(["touch", str(ran)], preexec_fn=preexec, timeout=30, check=False)

    assert completed.returncode == -signal.SIGKILL
    assert not ran.exists()  # killed before exec


@linux_only
def test_the_parent_death_signal_is_set_only_from_the_main_thread() -> None:
    # Linux sends it when the forking *thread* ends: from a worker thread it would kill the
    # server with the thread.
    from_thread: list[object] = []
    thread = threading.Thread(
        target=lambda: from_thread.append(localsteps.main_thread_death_preexec())
    )
    thread.start()
    thread.join(timeout=30)

    assert from_thread == [None]
    assert localsteps.main_thread_death_preexec() is not None


class _Interrupted(BaseException):
    pass


def _raise_interrupted(signum: int, frame: object) -> None:
    raise _Interrupted


@linux_only
def test_a_server_interrupted_while_starting_is_stopped(
    tmp_path: Path, kill_after: list[int]
) -> None:
    pid_file = tmp_path / "server-pid"
    binary = _script(tmp_path, "llama-server", f"echo $$ > {pid_file}; exec sleep 600")
    previous = signal.signal(signal.SIGALRM, _raise_interrupted)
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)  # like a Ctrl-C while it loads
        with pytest.raises(_Interrupted), LocalModelServer(binary, tmp_path / "w.gguf"):
            pytest.fail("the server never answers: not reached")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    server = _written_pid(pid_file)
    kill_after.append(server)

    assert _state(server) is None  # stopped and waited for


def _signalled_wait(signals: localmodel._StopSignals, signum: int) -> None:
    with signals.interruptible():
        signal.raise_signal(signum)
        time.sleep(30)  # not reached: the handler raises first


@pytest.fixture
def stop_signals_as_at_a_terminal() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP handled as in a command started at a terminal, whatever the
    suite's own start did: a job started in the background has SIGINT ignored, one under nohup
    SIGHUP, and a signal ignored at start stays ignored by design."""
    handlers = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
    handlers[signal.SIGHUP] = signal.SIG_DFL
    previous = {signum: signal.signal(signum, handler) for signum, handler in handlers.items()}
    yield
    for signum, handler in previous.items():
        signal.signal(signum, handler)


@pytest.mark.usefixtures("stop_signals_as_at_a_terminal")
def test_the_first_stop_signal_ends_an_interruptible_wait_and_later_ones_are_noted() -> None:
    previous = signal.getsignal(signal.SIGTERM)
    with localmodel._StopSignals() as signals:
        with pytest.raises(localmodel._Stopped):
            _signalled_wait(signals, signal.SIGTERM)

        assert signals.signum == signal.SIGTERM
        signal.raise_signal(signal.SIGINT)  # while cleaning up: noted, nothing is raised
        assert signals.repeated
        with pytest.raises(localmodel._Stopped), signals.interruptible():
            pytest.fail("a signal already received stops the next wait at once")

    assert signal.getsignal(signal.SIGTERM) is previous


@pytest.mark.usefixtures("stop_signals_as_at_a_terminal")
def test_a_stop_signal_outside_a_wait_is_only_recorded() -> None:
    with localmodel._StopSignals() as signals:
        signal.raise_signal(signal.SIGHUP)  # e.g. while a process is being started

        assert signals.signum == signal.SIGHUP
        assert not signals.repeated
        with pytest.raises(localmodel._Stopped):
            signals.raise_if_stopped()


def test_a_stop_signal_ignored_at_start_stays_ignored() -> None:
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    try:
        with localmodel._StopSignals() as signals:
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            signal.raise_signal(signal.SIGHUP)
            assert signals.signum is None
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)


@linux_only
def test_a_group_of_zombies_only_is_not_alive(kill_after: list[int]) -> None:
    process = subprocess.Popen(["sleep", "600"], start_new_session=True)
    kill_after.append(process.pid)
    assert localmodel._group_alive(process.pid)

    os.kill(process.pid, signal.SIGKILL)
    _eventually(lambda: _state(process.pid) == "Z", 30, "a zombie")  # not waited for yet

    assert not localmodel._group_alive(process.pid)
    process.wait(timeout=30)
    assert not localmodel._group_alive(process.pid)


def test_exit_statuses_are_a_shells() -> None:
    assert localmodel._exit_status(0) == 0
    assert localmodel._exit_status(3) == 3
    assert localmodel._exit_status(-signal.SIGTERM) == 128 + signal.SIGTERM


# --- signs of life, the sandbox's cache key --------------------------------------------------


CMAKE_LINES = [
    f"[{percent:3d}%] Building CXX object x{percent}.o\n" for percent in range(0, 101, 4)
]


def test_build_progress_is_a_line_per_tenth_when_not_on_a_terminal() -> None:
    stream = io.StringIO()
    progress = localmodel.BuildProgress("compiling llama-server", stream)

    for line in ["-- Configuring done\n", *CMAKE_LINES, "[100%] Built target llama-server\n"]:
        progress(line)

    assert stream.getvalue().splitlines() == [
        f"compiling llama-server: {percent}%"
        for percent in (0, 12, 20, 32, 40, 52, 60, 72, 80, 92, 100)
    ]


def test_build_progress_rewrites_one_line_on_a_terminal() -> None:
    controller, terminal = os.openpty()
    with os.fdopen(terminal, "w") as stream:
        progress = localmodel.BuildProgress("compiling llama-server", stream)
        for line in [*CMAKE_LINES[:3], "[  8%] Linking\n", CMAKE_LINES[-1]]:
            progress(line)
    shown = b""
    while not shown.endswith(b"\n"):
        shown += os.read(controller, 1024)
    os.close(controller)

    assert shown.decode().replace("\r\n", "\n") == (
        "\rcompiling llama-server:   0%\rcompiling llama-server:   4%"
        "\rcompiling llama-server:   8%\rcompiling llama-server: 100%\n"
    )


def test_the_sandboxed_agent_is_known_by_the_endpoint_id_not_by_its_port() -> None:
    def identity(base_url: str, endpoint_id: str) -> dict[str, object]:
        settings = EvalSettings(
            http=HttpSettings(base_url=base_url, endpoint_id=endpoint_id),
            sandbox=SandboxSettings(agent="codex", image="local:1"),
        )
        return sandbox_identity(settings)

    named = identity("http://127.0.0.1:4001/v1", "smollm2 weights sha256:1")

    assert named == identity("http://127.0.0.1:4002/v1", "smollm2 weights sha256:1")
    assert 'model_providers.openkata.base_url="smollm2 weights sha256:1"' in named["argv"]
    assert named != identity("http://127.0.0.1:4001/v1", "another model")
    # Without an endpoint id, the URL is what names the endpoint.
    assert identity("http://127.0.0.1:4001/v1", "") != identity("http://127.0.0.1:4002/v1", "")


def test_a_build_step_with_progress_logs_every_line_and_names_its_failure(tmp_path: Path) -> None:
    log_file = tmp_path / "build.log"
    seen: list[str] = []
    script = "print('[ 50%] compiling'); print('[100%] linking'); raise SystemExit(3)"

    with pytest.raises(localmodel.LocalModelError, match="exited with 3") as raised:
        localsteps.run_logged([sys.executable, "-c", script], log_file, progress=seen.append)

    assert seen == ["[ 50%] compiling\n", "[100%] linking\n"]
    assert log_file.read_text().endswith("[ 50%] compiling\n[100%] linking\n")
    assert "[100%] linking" in str(raised.value)  # the end of the log is shown


@pytest.mark.parametrize("status", [0, 3])
def test_what_a_build_step_left_running_in_its_group_ends_with_the_step(
    tmp_path: Path, status: int
) -> None:
    # As make leaves a compiler, or debootstrap a daemon: a process of the step's group that
    # outlives the step's first process.
    pid_file = tmp_path / "left.pid"
    script = f"sleep 300 & echo $! > {pid_file}; exit {status}"

    with contextlib.ExitStack() as failing:
        if status:
            failing.enter_context(pytest.raises(localmodel.LocalModelError, match="exited with 3"))
        localsteps.run_logged(["sh", "-c", script], tmp_path / "build.log")

    assert ends(int(pid_file.read_text()))


STEP_BOUND = 120.0  # a step that should end at once has ended (a bound, not a timing check)


def _bounded(call: Callable[[], None]) -> BaseException | None:
    """Runs ``call`` on a thread and waits for it up to :data:`STEP_BOUND`; what it raised.
    A call still running then fails the test."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(STEP_BOUND)
    assert not thread.is_alive(), "the step still holds the build"
    return raised[0] if raised else None


def test_a_step_whose_output_a_leftover_keeps_open_does_not_hold_the_build(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "left.pid"
    # A process of the group that keeps the output open once the step's first one ended.
    holds_output = f"sleep 3600 & echo $! > {pid_file}; echo started"
    seen: list[str] = []

    raised = _bounded(
        lambda: localsteps.run_logged(
            ["sh", "-c", holds_output], tmp_path / "a.log", progress=seen.append
        )
    )

    assert raised is None
    assert seen == ["started\n"]
    assert ends(int(pid_file.read_text()))


def test_a_step_past_the_build_deadline_is_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(localsteps, "BUILD_TIMEOUT", 5.0)  # room for the step to start
    pid_file = tmp_path / "step.pid"
    runs_on = f"echo $$ > {pid_file}; echo started; exec sleep 3600"

    with pytest.raises(localmodel.LocalModelError, match=r"timed out after 5\.0 seconds"):
        localsteps.run_logged(["sh", "-c", runs_on], tmp_path / "b.log", progress=lambda _: None)

    assert ends(int(pid_file.read_text()))


def test_progress_that_cannot_be_shown_ends_the_step_with_its_error(tmp_path: Path) -> None:
    # A terminal that is gone (stderr piped into a `head` that exited): the step must not
    # then block on its full output pipe until the build's deadline.
    pid_file = tmp_path / "step.pid"
    loud = f"echo $$ > {pid_file}; while true; do echo compiling; done"

    def gone(line: str) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    raised = _bounded(
        lambda: localsteps.run_logged(["sh", "-c", loud], tmp_path / "c.log", progress=gone)
    )

    assert isinstance(raised, localmodel.LocalModelError)
    assert "Broken pipe" in str(raised)
    assert ends(int(pid_file.read_text()))


def test_a_step_runs_when_the_parent_ignores_sigchld(tmp_path: Path) -> None:
    # Children are then reaped by the kernel at once: nothing is left to wait for.
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        localsteps.run_logged(["sh", "-c", "echo built"], tmp_path / "d.log")
        localsteps.run_logged(["sh", "-c", "echo built"], tmp_path / "e.log", progress=print)
    finally:
        signal.signal(signal.SIGCHLD, previous)

    assert (tmp_path / "d.log").read_text().endswith("built\n")
    assert (tmp_path / "e.log").read_text().endswith("built\n")
