"""An offline sandbox for the local model: a Docker engine and an image, with no registry.

``python -m pytest_openkata.localmodel run`` uses this module so that sandboxed scenarios run
on a machine with no registry and no account:

- **The engine.** The one ``DOCKER_HOST`` names, else the system's socket when it answers;
  otherwise (or with ``OPENKATA_LOCAL_ENGINE=private``) a private ``dockerd`` on its own
  socket, with no bridge and no iptables rules (the host's network is left alone), started
  for the run and stopped with it. Its data folder is kept under the cache, so what it holds
  (the image) survives the run; one run at a time uses it, locked before the run's first long
  step: a second run waits for it (saying so, for at most ``OPENKATA_LOCAL_MODEL_WAIT``
  seconds) before it builds anything.
- **The image.** A Debian base from ``debootstrap`` (minbase, with git and CA certificates),
  the OpenAI Codex CLI from npm (its static binary, and the ``rg`` it searches with), and
  ``/workspace`` as the working folder. The Codex version is ``sandbox.agent_version`` when
  the environment sets it (``OPENKATA_EVAL_SANDBOX_AGENT_VERSION``, npm's ``pkg@version``),
  else the one this release pins; the image's tag names it. The root file system is kept as
  a tar archive named by everything it is made of (Debian suite, packages, Codex version,
  machine), so each engine imports it in seconds and only the first build downloads
  anything. It is built (or waited for, when another run builds it) before the engine
  starts.
- **The agent.** Codex, talking to the local model through its Responses route; Claude Code
  asks for 32000 answer tokens and fails an answer cut short, which a 135M model's often is.
  Containers use the host's network (the private engine has no other), so the agent reaches
  the model on loopback.

Every step says what it does and how long it took; a step that fails says which, with the end
of its log.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Self

import docker
import docker.errors

from pytest_openkata.infra.mounts import mounted_under
from pytest_openkata.infra.tempfiles import new_run_folder
from pytest_openkata.local.steps import (
    GB,
    MB,
    LocalModelError,
    Log,
    Step,
    build_lock,
    cache_dir,
    held_by_another,
    log_to_stderr,
    main_thread_death_preexec,
    new_work_folder,
    run_logged,
    take_lock,
)

__all__ = [
    "AGENT_VERSION_VARIABLE",
    "CODEX_VERSION",
    "SANDBOX_AGENT",
    "LocalEngine",
    "codex_version",
    "engine_answers",
    "image_tag",
    "local_sandbox",
    "prepare_image",
    "sandbox_environment",
    "sandbox_steps",
]

CODEX_PACKAGE = "@openai/codex"
CODEX_VERSION = "0.171.0"
# The setting ``sandbox.agent_version`` as the environment spells it: the Codex version the
# image installs instead of CODEX_VERSION.
AGENT_VERSION_VARIABLE = "OPENKATA_EVAL_SANDBOX_AGENT_VERSION"
DEBIAN_SUITE = "bookworm"
DEBIAN_PACKAGES = ("git", "ca-certificates")
MIRROR_VARIABLE = "OPENKATA_LOCAL_SANDBOX_MIRROR"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
IMAGE_REPOSITORY = "openkata-local-sandbox"
SANDBOX_AGENT = "codex"
SYSTEM_SOCKET = "unix:///var/run/docker.sock"
# "private": always start a private engine, whatever DOCKER_HOST and the system's socket say.
ENGINE_VARIABLE = "OPENKATA_LOCAL_ENGINE"
ENGINE_START_TIMEOUT = 60.0
ENGINE_STOP_TIMEOUT = 30.0
# The deepest socket a private engine makes under its --exec-root (its containerd's), and the
# length of a unix socket's path: a run folder too deep in TMPDIR is refused before dockerd
# fails on it.
DEEPEST_ENGINE_SOCKET = "containerd/containerd.sock.ttrpc"
UNIX_SOCKET_PATH_MAX = 107
# The image's settings; part of the recipe, so changing them makes a new image.
IMAGE_CHANGES = (
    "WORKDIR /workspace",
    "ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV HOME=/root",
    'CMD ["sleep", "infinity"]',
)
# Git refuses to commit without an author; agents commit in the workspace.
GITCONFIG = "[user]\n\tname = openkata agent\n\temail = agent@openkata.invalid\n"
# About how much disk each step needs at its largest, with room to spare: npm's install of
# Codex (its package for this machine, unpacked); the root file system (Debian with git, and
# Codex copied in) and its archive beside it while it is packed; an image imported from an
# archive that is still to be built (one that exists needs its own size); Docker from apt-get.
CODEX_SPACE = 600 * MB
ROOTFS_SPACE = 3 * GB // 2
IMAGE_SPACE = 800 * MB
DOCKER_PACKAGE_SPACE = 400 * MB
# Codex's npm package ships one static (musl) build per machine.
CODEX_TARGETS = {
    "x86_64": ("linux-x64", "x86_64-unknown-linux-musl"),
    "aarch64": ("linux-arm64", "aarch64-unknown-linux-musl"),
}


def codex_version() -> str:
    """The Codex version the image installs: ``sandbox.agent_version`` from the environment
    (:data:`AGENT_VERSION_VARIABLE`), else the one this release pins (:data:`CODEX_VERSION`).
    The image's tag and its cached files are named after it, so each version is its own
    image."""
    from pytest_openkata.infra.config import FIELDS_BY_KEY

    value = os.environ.get(AGENT_VERSION_VARIABLE, "")
    if not value:
        return CODEX_VERSION
    try:
        return str(FIELDS_BY_KEY["sandbox.agent_version"].parse(value))
    except ValueError as exc:
        raise LocalModelError(f"{AGENT_VERSION_VARIABLE}: {exc}") from None


def _codex_target() -> tuple[str, str]:
    machine = platform.machine()
    try:
        return CODEX_TARGETS[machine]
    except KeyError:
        raise LocalModelError(
            f"the local sandbox image is built for x86_64 and aarch64 only, not {machine}"
        ) from None


def image_tag() -> str:
    """The image's name, derived from everything it is made of."""
    recipe = {
        "suite": DEBIAN_SUITE,
        "packages": DEBIAN_PACKAGES,
        "codex": codex_version(),
        "machine": platform.machine(),
        "changes": IMAGE_CHANGES,
        "gitconfig": GITCONFIG,
    }
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]
    return f"{IMAGE_REPOSITORY}:{DEBIAN_SUITE}-codex-{codex_version()}-{digest}"


def sandbox_environment(engine_host: str, image: str) -> dict[str, str]:
    """The settings a run needs to use the engine and the image with the local model: the
    Codex agent reaches the model at ``http.base_url`` over the host's network."""
    return {
        "DOCKER_HOST": engine_host,
        "OPENKATA_EVAL_SANDBOX_IMAGE": image,
        "OPENKATA_EVAL_SANDBOX_AGENT": SANDBOX_AGENT,
        "OPENKATA_EVAL_SANDBOX_NETWORK": "host",
    }


class _Step:
    """Logs a step's start and, when it ends, how long it took."""

    def __init__(self, log: Log, what: str, log_file: Path | None = None) -> None:
        self.log, self.what, self.log_file = log, what, log_file

    def __enter__(self) -> Self:
        self.start = time.monotonic()
        self.log(f"{self.what} …" + (f" (log: {self.log_file})" if self.log_file else ""))
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            self.log(f"{self.what}: done in {time.monotonic() - self.start:.0f} s")


def _find_command(command: str) -> str | None:
    return shutil.which(command) or shutil.which(command, path="/usr/sbin:/sbin")


def _check_installable(command: str, package: str) -> None:
    """An error that says what to install when ``command`` is missing and this process may
    not install it (root with apt-get may)."""
    if _find_command(command) is None and (os.geteuid() != 0 or shutil.which("apt-get") is None):
        raise LocalModelError(f"{command} is not installed: apt-get install {package}")


def _install_debian_package(command: str, package: str, log: Log) -> str:
    """The path of ``command``, installing its Debian package when it is missing and this
    process may (root with apt-get); otherwise an error that says what to install."""
    found = _find_command(command)
    if found:
        return found
    _check_installable(command, package)
    log_file = cache_dir() / f"apt-{package}.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with _Step(log, f"installing {package} (apt-get)", log_file):
        env_apt = ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get"]
        run_logged([*env_apt, "update", "-qq"], log_file, marked=False)
        run_logged([*env_apt, "install", "-y", "-qq", package], log_file, marked=False)
    found = _find_command(command)
    if not found:
        raise LocalModelError(f"apt-get installed {package}, but {command} is not on PATH")
    return found


# --- the engine ---------------------------------------------------------------------------


def engine_answers(host: str) -> bool:
    try:
        client = docker.DockerClient(base_url=host, timeout=5)
        try:
            client.ping()
        finally:
            client.close()
    except (docker.errors.DockerException, OSError):
        return False
    return True


class LocalEngine:
    """The Docker engine of a run: the configured one, or a private ``dockerd`` started by
    :meth:`start` and stopped by :meth:`stop` (also when its start is interrupted).

    :meth:`reserve` chooses the engine without starting one, so that a run learns before its
    long steps that it could not have one; :meth:`start` reserves first if need be.
    The private engine gets the parent-death signal SIGTERM, so it shuts down cleanly when
    the process that started it dies without stopping it. Its data folder is
    ``data_root`` when given (the caller's to remove), else the cache's, which one engine at a
    time may use: it is locked from the reservation until :meth:`stop`, and a reservation
    while another run holds it waits for that run to end (``steps.take_lock``).
    """

    def __init__(self, log: Log = log_to_stderr, data_root: Path | None = None) -> None:
        self.log = log
        self.data_root = data_root
        self.host = ""
        self.private = False
        self.data_folder: Path | None = None  # a private engine's, once reserved
        self._reserved = False
        self._process: subprocess.Popen[bytes] | None = None
        self._runtime: Path | None = None
        self._data: Path | None = None  # the started private engine's data folder
        self._lock: IO[str] | None = None

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def reserve(self) -> Self:
        """Chooses the engine, and checks that it can be had: the one ``DOCKER_HOST`` names
        (it must answer), else the system's when it answers, else (or with
        ``OPENKATA_LOCAL_ENGINE=private``) a private one, which needs root and dockerd (or
        apt-get to install it) and whose data folder no other run may be using (another run's
        is waited for). Nothing is started; a second call keeps the first one's choice."""
        if self._reserved:
            return self
        configured = os.environ.get("DOCKER_HOST", "")
        if os.environ.get(ENGINE_VARIABLE, "") == "private":
            self._reserve_private()
        elif configured:
            if not engine_answers(configured):
                raise LocalModelError(
                    f"DOCKER_HOST={configured} does not answer; unset it to let the run start "
                    "a private engine"
                )
            self.host = configured
        elif engine_answers(SYSTEM_SOCKET):
            self.host = SYSTEM_SOCKET
        else:
            self._reserve_private()
        self._reserved = True
        return self

    def _reserve_private(self) -> None:
        if os.geteuid() != 0:
            raise LocalModelError(
                "a private Docker engine needs root (dockerd): run as root, or set DOCKER_HOST "
                "to an engine"
            )
        _check_installable("dockerd", "docker.io")
        self.data_folder = self._data_root()
        self.private = True

    def start(self) -> Self:
        self.reserve()
        if self.private:
            return self.start_private()
        self.log(f"Docker engine at {self.host}")
        return self

    def start_private(self) -> Self:
        """Starts a private engine, whatever else answers."""
        try:
            if not self.private:
                self._reserve_private()
                self._reserved = True
            self._start_private()
        except BaseException:  # an interruption too: no engine is left behind
            self.stop()
            raise
        return self

    def _data_root(self) -> Path:
        if self.data_root is not None:
            return self.data_root
        data = cache_dir() / "docker"
        data.mkdir(parents=True, exist_ok=True)
        lock = (data / "lock").open("a")
        try:
            take_lock(
                lock,
                f"using the private Docker engine in {data}",
                self.log,
                until="end",
                hint=", or set DOCKER_HOST to an engine",
            )
        except BaseException:  # its limit, or a stop signal: the file is closed
            lock.close()
            raise
        self._lock = lock
        return data / "data"

    def holds_image(self, tag: str) -> bool:
        """Whether the engine has the image ``tag``, as far as can be told without starting
        it: an engine that runs is asked; a private one's data folder is read (its image
        store's ``repositories.json``; one it cannot read counts as not holding it)."""
        if not self.private:
            client = docker.DockerClient(base_url=self.host, timeout=30)
            try:
                client.images.get(tag)
            except (docker.errors.DockerException, OSError):
                return False
            finally:
                client.close()
            return True
        assert self.data_folder is not None
        store = self.data_folder / "image" / "overlay2" / "repositories.json"
        try:
            repositories = json.loads(store.read_text())["Repositories"]
            return tag in repositories[tag.partition(":")[0]]
        except (OSError, ValueError, KeyError, TypeError):
            return False

    def _start_private(self) -> None:
        # Its run folder first: one too deep in TMPDIR is refused before anything is installed.
        self._runtime = runtime = new_run_folder("dockerd")
        deepest = runtime / "exec" / DEEPEST_ENGINE_SOCKET
        if len(os.fsencode(deepest)) > UNIX_SOCKET_PATH_MAX:
            raise LocalModelError(
                f"the private Docker engine's sockets would be too deep in {runtime.parent} "
                f"({len(os.fsencode(deepest))} bytes; a unix socket's path has at most "
                f"{UNIX_SOCKET_PATH_MAX}): set TMPDIR to a shorter folder, such as /tmp"
            )
        dockerd = _install_debian_package("dockerd", "docker.io", self.log)
        assert self.data_folder is not None
        data = self._data = self.data_folder
        with _Step(self.log, "starting a private Docker engine"):
            self.host = f"unix://{runtime}/docker.sock"
            with (runtime / "dockerd.log").open("wb") as log:
                self._process = subprocess.Popen(
                    [
                        dockerd, "--host", self.host, "--data-root", str(data),
                        "--exec-root", str(runtime / "exec"),
                        "--pidfile", str(runtime / "docker.pid"),
                        "--iptables=false", "--ip6tables=false", "--bridge=none",
                        "--storage-driver=overlay2",
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=main_thread_death_preexec(signal.SIGTERM),  # noqa: PLW1509
                )  # fmt: skip
            self.private = True
            deadline = time.monotonic() + ENGINE_START_TIMEOUT
            while not engine_answers(self.host):
                if self._process.poll() is not None or time.monotonic() > deadline:
                    raise LocalModelError(
                        f"the private Docker engine did not start; end of its log:\n"
                        f"{self._log_tail()}"
                    )
                time.sleep(0.2)
        self.log(f"Docker engine at {self.host} (private, data in {data})")

    def _log_tail(self) -> str:
        assert self._runtime is not None
        text = (self._runtime / "dockerd.log").read_text(errors="replace")
        return "\n".join(text.splitlines()[-20:])

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=ENGINE_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        data, self._data = self._data, None
        if data is not None:
            # dockerd mounts its data folder on itself and unmounts it only when it ends
            # cleanly; one that was killed leaves the mount (and those of its containers).
            _unmount_under(data, itself=True)
        runtime, self._runtime = self._runtime, None
        if runtime is not None:
            # dockerd can leave its network namespace mounted under its exec folder.
            netns = runtime / "exec" / "netns" / "default"
            if netns.exists():
                subprocess.run(["umount", str(netns)], check=False, capture_output=True)
            shutil.rmtree(runtime, ignore_errors=True)
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.close()  # releases the data folder
        self._reserved = self.private = False  # a new start chooses anew

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


# --- the image ------------------------------------------------------------------------------


def _codex_prefix() -> Path:
    return cache_dir() / "sandbox" / f"codex-{codex_version()}"


def _codex_binaries() -> tuple[Path, Path]:
    """Where npm puts Codex's static binary and its ``rg``."""
    package, triple = _codex_target()
    vendor = _codex_prefix() / "node_modules" / "@openai" / f"codex-{package}" / "vendor" / triple
    return vendor / "bin" / "codex", vendor / "codex-path" / "rg"


def _npm() -> str:
    npm = shutil.which("npm")
    if npm is None:
        raise LocalModelError("npm is not on PATH: it installs the sandbox's agent CLI (Codex)")
    return npm


def _install_codex(log: Log) -> tuple[Path, Path]:
    """Codex's static binary and its ``rg``, installed from npm once per version."""
    binaries = _codex_binaries()
    if all(path.is_file() for path in binaries):
        return binaries
    npm = _npm()
    prefix = _codex_prefix()
    prefix.mkdir(parents=True, exist_ok=True)
    log_file = prefix / "npm.log"
    with _Step(log, f"installing {CODEX_PACKAGE}@{codex_version()} from npm", log_file):
        run_logged(
            [npm, "install", "--no-fund", "--no-audit", "--prefix", str(prefix),
             f"{CODEX_PACKAGE}@{codex_version()}"],
            log_file,
        )  # fmt: skip
    missing = [str(path) for path in binaries if not path.is_file()]
    if missing:
        raise LocalModelError(f"npm installed {CODEX_PACKAGE} without {', '.join(missing)}")
    return binaries


def _check_rootfs_buildable() -> None:
    if os.geteuid() != 0:
        raise LocalModelError(
            "building the sandbox image needs root (debootstrap); build it once as root with "
            "`python -m pytest_openkata.localmodel build --sandbox`, or run with --no-sandbox"
        )
    _check_installable("debootstrap", "debootstrap")


def _debootstrap(rootfs: Path, log_file: Path, log: Log) -> None:
    _check_rootfs_buildable()
    debootstrap = _install_debian_package("debootstrap", "debootstrap", log)
    mirror = os.environ.get(MIRROR_VARIABLE, DEFAULT_MIRROR)
    with _Step(log, f"debootstrap {DEBIAN_SUITE} from {mirror}", log_file):
        run_logged(
            [debootstrap, "--variant=minbase", f"--include={','.join(DEBIAN_PACKAGES)}",
             DEBIAN_SUITE, str(rootfs), mirror],
            log_file,
        )  # fmt: skip


def _archive_path() -> Path:
    return cache_dir() / "sandbox" / f"{image_tag().replace(':', '_')}.tar"


def _archive_lock_file(archive: Path) -> Path:
    return archive.parent / "build.lock"


def rootfs_archive(log: Log = log_to_stderr) -> Path:
    """The image's root file system as a tar archive, built once per recipe; a process that
    wants it while another builds it waits for that build (and says so)."""
    archive = _archive_path()
    if archive.is_file():
        return archive
    what = "building the sandbox image's root file system"
    with build_lock(_archive_lock_file(archive), what, log):
        if not archive.is_file():
            _build_rootfs_archive(archive, log)
    return archive


def sandbox_steps(engine: LocalEngine) -> list[Step]:
    """What the sandbox still needs with the reserved ``engine``, once it is checked that it
    can be done: nothing when the engine holds the image; else importing it, and first
    building its root file system (as root, with debootstrap, and npm for Codex unless the
    cache has it) unless the cache holds the archive or another run is building it."""
    steps: list[Step] = []
    if engine.private and _find_command("dockerd") is None:
        steps.append(Step("installing docker.io", Path("/usr"), DOCKER_PACKAGE_SPACE))
    if engine.holds_image(image_tag()):
        return steps
    archive = _archive_path()
    image_space = IMAGE_SPACE
    if archive.is_file():
        image_space = archive.stat().st_size
    elif not held_by_another(_archive_lock_file(archive)):
        _check_rootfs_buildable()
        if not all(path.is_file() for path in _codex_binaries()):
            _npm()
            steps.append(Step(f"installing {CODEX_PACKAGE}", _codex_prefix(), CODEX_SPACE))
        what = "building the sandbox image's root file system"
        steps.append(Step(what, archive.parent, ROOTFS_SPACE))
    if engine.data_folder is not None:  # the disk of an engine not started here is its own
        steps.append(Step("importing the sandbox image", engine.data_folder, image_space))
    return steps


def _build_rootfs_archive(archive: Path, log: Log) -> None:
    # A debootstrap killed outright leaves /proc and /sys mounted in its target.
    work = new_work_folder(archive.parent, log, before_removing=_unmount_under)
    log_file = archive.with_suffix(".log")
    log_file.unlink(missing_ok=True)
    try:
        rootfs = work / "rootfs"
        _debootstrap(rootfs, log_file, log)
        for binary in _install_codex(log):
            shutil.copy2(binary, rootfs / "usr" / "local" / "bin" / binary.name)
        (rootfs / "root" / ".gitconfig").write_text(GITCONFIG)
        (rootfs / "workspace").mkdir(exist_ok=True)
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for entry in (rootfs / cache).glob("*"):
                if entry.is_file():
                    entry.unlink()
        staged = work / "rootfs.tar"
        with _Step(log, "packing the root file system"):
            run_logged(
                ["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(staged), "."], log_file
            )
        staged.replace(archive)  # atomic: a half-written archive is never taken from the cache
    finally:
        _unmount_under(work)
        shutil.rmtree(work, ignore_errors=True)


def _unmount_under(folder: Path, *, itself: bool = False) -> None:
    """Unmounts what is mounted under ``folder`` (and ``folder`` itself when ``itself``),
    deepest first: what an interrupted debootstrap left in its target (``/proc``, ``/sys``),
    so that removing the folder cannot reach the host's, or what a killed dockerd left in its
    data folder."""
    for target in mounted_under(str(folder), itself=itself):
        subprocess.run(["umount", "-l", target], check=False, capture_output=True)


def prepare_image(engine_host: str, log: Log = log_to_stderr) -> str:
    """The image's tag in the engine at ``engine_host``, importing (and first building) it when
    the engine does not have it."""
    tag = image_tag()
    client = docker.DockerClient(base_url=engine_host, timeout=600)
    try:
        try:
            client.images.get(tag)
            log(f"sandbox image {tag}: present")
            return tag
        except docker.errors.ImageNotFound:
            pass
        archive = rootfs_archive(log)
        repository, _, version = tag.partition(":")
        with _Step(log, f"importing the sandbox image {tag}"):
            try:
                client.api.import_image_from_file(
                    str(archive), repository=repository, tag=version, changes=list(IMAGE_CHANGES)
                )
                client.images.get(tag)
            except docker.errors.DockerException as exc:
                raise LocalModelError(f"the engine did not import {archive}: {exc}") from exc
        return tag
    finally:
        client.close()


@contextlib.contextmanager
def local_sandbox(
    log: Log = log_to_stderr, engine: LocalEngine | None = None
) -> Iterator[dict[str, str]]:
    """An engine (``engine`` when given, reserved or not) with the image in it, as the
    settings a run needs; the engine stops after. The image's root file system is built, or
    another run's build of it waited for, before the engine starts."""
    engine = engine if engine is not None else LocalEngine(log)
    try:
        if not engine.reserve().holds_image(image_tag()):
            rootfs_archive(log)
    except BaseException:  # the reservation (a private engine's folder) is released
        engine.stop()
        raise
    with engine as started:
        yield sandbox_environment(started.host, prepare_image(started.host, log))
