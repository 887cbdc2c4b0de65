"""A local-model command that could not finish stops before its first long step, and two that
need the same build at once compile it once (waits for another run: ``test_local_waits``).

Real processes (``python -m pytest_openkata.localmodel``), real locks, a real tmpfs for a small
disk, and for the build real pip and cmake runs on a stand-in of the ``llama-cpp-python`` sdist
(a few lines of C++ instead of llama.cpp); each test has a cache folder of its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pytest_openkata.local.model import (
    LLAMA_CPP_PYTHON_VERSION,
    LocalModelError,
    check_before_starting,
    server_binary,
)

ENDED = 120.0  # a command that stops at its checks has ended (a bound, not a timing check)
BUILT = 300.0  # the stand-in sdist is downloaded, configured and compiled
SERVER = f"llama-server-{LLAMA_CPP_PYTHON_VERSION}"


def _environment(cache: Path, **more: str) -> dict[str, str]:
    return {
        # Waits for another run at their default limit.
        **{
            name: value for name, value in os.environ.items() if name != "OPENKATA_LOCAL_MODEL_WAIT"
        },
        "OPENKATA_LOCAL_MODEL_CACHE": str(cache),
        # A build that starts all the same fails at its download, instead of compiling for long.
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(cache.parent / "no-packages"),
        **more,
    }


def _command(cache: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_openkata.localmodel", *args],
        env=_environment(cache, **env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=ENDED,
        check=False,
    )


@contextlib.contextmanager
def _held(lock_file: Path) -> Iterator[None]:
    """``lock_file``'s lock, held as another run holds it."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with lock_file.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A folder on a 16 MB tmpfs."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    folder = tmp_path / "small"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_build_without_room_on_the_disk_stops_before_it_starts(small_disk: Path) -> None:
    cache = small_disk / "cache"

    build = _command(cache, "build")

    assert build.returncode == 1
    assert re.fullmatch(
        rf"error: not enough free disk space in {re.escape(str(cache))} for building "
        rf"llama-server {re.escape(LLAMA_CPP_PYTHON_VERSION)}: about 1\.0 GB needed, 1[56] MB "
        r"free; free some space, or move the cache with OPENKATA_LOCAL_MODEL_CACHE\n",
        build.stderr,
    ), build.stderr
    assert not cache.exists()  # nothing was downloaded, nothing was built


def test_only_the_steps_still_to_take_need_room(
    small_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENKATA_LOCAL_MODEL_CACHE", str(small_disk / "cache"))
    with pytest.raises(LocalModelError, match=r"building llama-server .*: about 1\.0 GB needed"):
        check_before_starting()

    # Another run is building it: this one will wait and take its binary.
    with _held(small_disk / "cache" / SERVER / "build.lock"):
        check_before_starting()
    # Built: nothing is left to build in the cache.
    server_binary().write_bytes(b"cached")
    check_before_starting()


# --- two builds at once -----------------------------------------------------------------------

STANDIN_VERSION = "0.0.1"
# The stand-in's compile notes that it started, then waits for the test's go.
STANDIN_CMAKE = """\
cmake_minimum_required(VERSION 3.10)
project(standin CXX)
add_custom_target(compile_step COMMAND sh ${CMAKE_SOURCE_DIR}/compile.sh)
add_executable(llama-server server.cpp)
add_dependencies(llama-server compile_step)
set_target_properties(llama-server PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
"""
STANDIN_COMPILE = """\
echo compiling >> "$STANDIN_COMPILES"
while [ ! -e "$STANDIN_GO" ]; do sleep 0.1; done
"""
STANDIN_SERVER = '#include <cstdio>\nint main() { std::puts("stand-in llama-server"); }\n'
# pip download reads an sdist's metadata through its build backend: one in the sdist itself,
# so that nothing is installed for it.
STANDIN_BACKEND = """\
import os

def get_requires_for_build_wheel(config_settings=None):
    return []

def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    name = "llama_cpp_python-{version}.dist-info"
    os.makedirs(os.path.join(metadata_directory, name))
    with open(os.path.join(metadata_directory, name, "METADATA"), "w") as metadata:
        metadata.write("Metadata-Version: 2.1\\nName: llama_cpp_python\\nVersion: {version}\\n")
    return name

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    raise NotImplementedError("a stand-in for its vendored llama.cpp only")
"""


def _standin_sdist(links: Path) -> None:
    """``llama_cpp_python-0.0.1.tar.gz`` in ``links``, laid out as the real one."""
    top = f"llama_cpp_python-{STANDIN_VERSION}"
    files = {
        "PKG-INFO": f"Metadata-Version: 2.1\nName: llama_cpp_python\nVersion: {STANDIN_VERSION}\n",
        "pyproject.toml": (
            '[build-system]\nrequires = []\nbuild-backend = "standin_backend"\n'
            'backend-path = ["."]\n'
        ),
        "standin_backend.py": STANDIN_BACKEND.format(version=STANDIN_VERSION),
        "vendor/llama.cpp/CMakeLists.txt": STANDIN_CMAKE,
        "vendor/llama.cpp/compile.sh": STANDIN_COMPILE,
        "vendor/llama.cpp/server.cpp": STANDIN_SERVER,
    }
    links.mkdir()
    with tarfile.open(links / f"{top}.tar.gz", "w:gz") as sdist:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            sdist.addfile(info, io.BytesIO(data))


BUILD = (
    "import sys; from pytest_openkata.local.model import build_server; "
    "print(build_server(sys.argv[1]))"
)


def _eventually(
    condition: Callable[[], bool], what: str, *processes: subprocess.Popen[str]
) -> None:
    deadline = time.monotonic() + BUILT
    while not condition():
        ended = [p for p in processes if p.poll() is not None]
        if ended:
            pytest.fail(f"a build exited with {ended[0].returncode} before {what}", pytrace=False)
        if time.monotonic() > deadline:
            pytest.fail(f"not {what} within {BUILT:g} s", pytrace=False)
        time.sleep(0.1)


@pytest.mark.skipif(
    shutil.which("cmake") is None or shutil.which("c++") is None,
    reason="needs cmake and a C++ compiler",
)
def test_two_processes_wanting_llama_server_at_once_compile_it_once(tmp_path: Path) -> None:
    cache, links = tmp_path / "cache", tmp_path / "links"
    compiles, go = tmp_path / "compiles", tmp_path / "go"
    _standin_sdist(links)
    env = _environment(
        cache, PIP_FIND_LINKS=str(links), STANDIN_COMPILES=str(compiles), STANDIN_GO=str(go)
    )
    builds: list[subprocess.Popen[str]] = []
    outputs: list[tuple[Path, Path]] = []

    def start() -> subprocess.Popen[str]:
        out, err = tmp_path / f"out-{len(builds)}", tmp_path / f"err-{len(builds)}"
        with out.open("w") as stdout, err.open("w") as stderr:
            build = subprocess.Popen(
                [sys.executable, "-c", BUILD, STANDIN_VERSION],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                text=True,
                start_new_session=True,
            )
        builds.append(build)
        outputs.append((out, err))
        return build

    try:
        first = start()
        _eventually(compiles.exists, "the first build compiling", first)
        second = start()
        waiting = (
            f"another run (pid {first.pid}) is building llama-server {STANDIN_VERSION}: waiting "
            "for it to finish (at most 3600 s; OPENKATA_LOCAL_MODEL_WAIT sets the limit)"
        )
        said = outputs[1][1]
        _eventually(lambda: waiting in said.read_text(), "the second waiting", first, second)
        go.touch()
        statuses = [build.wait(timeout=BUILT) for build in builds]
    finally:
        go.touch()  # a stand-in compile waiting for it ends
        for build in builds:
            if build.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(build.pid, signal.SIGKILL)
                build.wait(timeout=30)

    shown = "\n".join(f"{out.read_text()}{err.read_text()}" for out, err in outputs)
    assert statuses == [0, 0], shown
    binary = cache / f"llama-server-{STANDIN_VERSION}" / "llama-server"
    assert [out.read_text() for out, _ in outputs] == [f"{binary}\n"] * 2
    assert compiles.read_text() == "compiling\n"  # once
    second_said = outputs[1][1].read_text().splitlines()
    assert second_said == [
        waiting,
        f"llama-server {STANDIN_VERSION}: built by the other run, cached at {binary}",
    ]
    ran = subprocess.run([binary], capture_output=True, text=True, timeout=30, check=True)
    assert ran.stdout == "stand-in llama-server\n"
